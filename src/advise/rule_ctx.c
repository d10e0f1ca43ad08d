/* rule_ctx.c: adding findings and prioritised recommendations while a diagnosis is made. */
#include "advise/rule_ctx.h"

#include <stdarg.h>
#include <string.h>

#include "base/buf.h"
#include "base/mem.h"
#include "base/units.h"

void ad_note_text(ad_ctx *c, const char *id, ad_severity sev, ad_text *t)
{
	if (ad_add_finding(c->a, id, sev, t))
		c->failed = 1;
}

void ad_note(ad_ctx *c, const char *id, ad_severity sev, const char *fmt, ...)
{
	ad_text t = {0};
	va_list ap;
	va_start(ap, fmt);
	mr_buf_vprintf(&t.b, fmt, ap);
	va_end(ap);
	ad_note_text(c, id, sev, &t);
}

void ad_suggest_text(ad_ctx *c, const char *id, int priority, const char *title, const char *change,
                     ad_text *t)
{
	ad_advice *a = c->a;
	for (size_t i = 0; i < a->rec_count; i++)
		if (strcmp(a->recs[i].id, id) == 0) {
			if (priority < c->rec_priority[i])
				c->rec_priority[i] = priority;
			ad_text_free(t);
			return;
		}
	if (MR_GROW(c->rec_priority, c->prio_cap, a->rec_count + 1) ||
	    ad_add_rec(a, id, title, change, t)) {
		ad_text_free(t);
		c->failed = 1;
		return;
	}
	c->rec_priority[a->rec_count - 1] = priority;
}

void ad_suggest(ad_ctx *c, const char *id, int priority, const char *title, const char *change,
                const char *fmt, ...)
{
	ad_text t = {0};
	va_list ap;
	va_start(ap, fmt);
	mr_buf_vprintf(&t.b, fmt, ap);
	va_end(ap);
	ad_suggest_text(c, id, priority, title, change, &t);
}

ad_recommendation *ad_find_rec(ad_ctx *c, const char *id)
{
	for (size_t i = 0; i < c->a->rec_count; i++)
		if (strcmp(c->a->recs[i].id, id) == 0)
			return &c->a->recs[i];
	return NULL;
}

int ad_has_finding(const ad_ctx *c, const char *id)
{
	return ad_finding_of(c->a, id) != NULL;
}

const char *ad_sz(char *buf, uint64_t v)
{
	mr_format_bytes(buf, 32, v);
	return buf;
}

int ad_user_site(ad_text *t, const md_snapshot *s, uint32_t stack)
{
	const md_frame *f = an_user_frame(s, stack);
	if (!f)
		return 0;
	ad_text_printf(t, "%s (", md_str(s, f->name));
	ad_text_path(t, md_str(s, f->filename));
	ad_text_printf(t, ":%d)", f->line);
	return 1;
}

static int frame_is(const md_snapshot *s, const md_frame *f, const char *name, const char *path)
{
	return (!name || strcmp(md_str(s, f->name), name) == 0) &&
	       an_path_has(md_str(s, f->filename), path);
}

int ad_stack_has_frame(const md_snapshot *s, uint32_t stack, const char *name, const char *path)
{
	if (stack >= s->stack_count)
		return 0;
	const md_stack *st = &s->stacks[stack];
	for (size_t k = 0; k < st->count; k++)
		if (frame_is(s, &s->frames[st->first + k], name, path))
			return 1;
	return 0;
}

int ad_any_frame(const md_snapshot *s, const char *name, const char *path)
{
	for (size_t i = 0; i < s->frame_count; i++)
		if (frame_is(s, &s->frames[i], name, path))
			return 1;
	return 0;
}

int ad_embeds_tokens(const md_snapshot *s)
{
	return ad_any_frame(s, "forward", "torch/nn/modules/sparse.py");
}

an_run_kind ad_run_kind(const ad_ctx *c)
{
	return c->run ? c->run->kind : AN_RUN_UNKNOWN;
}

int ad_technique_on(const ad_ctx *c, uint32_t tech)
{
	return c->run && (c->run->techniques & tech) != 0;
}

int ad_framework(const ad_ctx *c, uint32_t fw)
{
	return c->run && (c->run->frameworks & fw) != 0;
}

void ad_rank_later(ad_ctx *c, size_t since, int by)
{
	for (size_t i = since; i < c->a->rec_count; i++)
		c->rec_priority[i] += by;
}
