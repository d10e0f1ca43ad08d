/* advice.c: the advice of one run, and adding to it. */
#include "advise/advice.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/mem.h"

const char *ad_oom_cause_words(const ad_oom *o)
{
	if (o->by_growth && o->cause == AD_CAUSE_CAPACITY)
		return "capacity, filled by memory that grew every iteration";
	return ad_cause_name(o->cause);
}

const char *ad_severity_name(ad_severity s)
{
	return s == AD_CRITICAL ? "critical" : s == AD_WARNING ? "warning" : "info";
}

const char *ad_moment_name(ad_moment m)
{
	return m == AD_MOMENT_OOM ? "oom" : m == AD_MOMENT_PEAK ? "peak" : "snapshot";
}

const char *ad_category_name(int cat)
{
	return an_category_name(cat);
}

int ad_pct(uint64_t part, uint64_t whole)
{
	return whole ? (int)((double)part * 100.0 / (double)whole + 0.5) : 0;
}

uint64_t ad_live_total(const uint64_t cat[AN_CAT_COUNT])
{
	uint64_t t = 0;
	for (int i = 0; i < AN_CAT_COUNT; i++)
		t += cat[i];
	return t;
}

static void rec_free(ad_recommendation *r)
{
	free(r->title);
	free(r->reason);
	free(r->change);
}

void ad_free(ad_advice *a)
{
	free(a->verdict);
	free(a->what_ran);
	free(a->capacity_line);
	for (size_t i = 0; i < a->finding_count; i++)
		free(a->findings[i].message);
	free(a->findings);
	for (size_t i = 0; i < a->rec_count; i++)
		rec_free(&a->recs[i]);
	free(a->recs);
	memset(a, 0, sizeof *a);
}

void ad_text_printf(ad_text *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	mr_buf_vprintf(&t->b, fmt, ap);
	va_end(ap);
}

void ad_text_path(ad_text *t, const char *path)
{
	size_t len = strlen(path);
	if (t->paths.count >= AD_MAX_PATHS || t->b.len > UINT32_MAX || len > UINT32_MAX) {
		t->b.failed = 1; /* a rule quoting more paths than AD_MAX_PATHS: never silently */
		return;
	}
	t->paths.at[t->paths.count].offset = (uint32_t)t->b.len;
	t->paths.at[t->paths.count].len = (uint32_t)len;
	t->paths.count++;
	mr_buf_append(&t->b, path, len);
}

void ad_text_free(ad_text *t)
{
	mr_buf_free(&t->b);
	memset(t, 0, sizeof *t);
}

/* The text's bytes as a string of their own and its paths (t is left empty); NULL when memory
 * ran out. */
static char *take_text(ad_text *t, ad_paths *paths)
{
	char *s = t->b.failed ? NULL : t->b.data ? t->b.data : mr_strndup("", 0);
	*paths = t->paths;
	if (!s)
		mr_buf_free(&t->b);
	memset(t, 0, sizeof *t);
	return s;
}

const ad_finding *ad_finding_of(const ad_advice *a, const char *id)
{
	for (size_t i = 0; i < a->finding_count; i++)
		if (strcmp(a->findings[i].id, id) == 0)
			return &a->findings[i];
	return NULL;
}

int ad_add_finding(ad_advice *a, const char *id, ad_severity sev, ad_text *t)
{
	ad_paths paths;
	char *msg = take_text(t, &paths);
	if (!msg || MR_GROW(a->findings, a->finding_cap, a->finding_count + 1)) {
		free(msg);
		return -1;
	}
	ad_finding *f = &a->findings[a->finding_count++];
	memset(f, 0, sizeof *f);
	snprintf(f->id, sizeof f->id, "%s", id);
	f->severity = sev;
	f->message = msg;
	f->paths = paths;
	return 0;
}

int ad_add_findingf(ad_advice *a, const char *id, ad_severity sev, const char *fmt, ...)
{
	ad_text t = {0};
	va_list ap;
	va_start(ap, fmt);
	mr_buf_vprintf(&t.b, fmt, ap);
	va_end(ap);
	return ad_add_finding(a, id, sev, &t);
}

int ad_add_rec(ad_advice *a, const char *id, const char *title, const char *change, ad_text *t)
{
	ad_paths paths;
	char *reason = take_text(t, &paths);
	char *ti = mr_strdup(title);
	char *ch = change ? mr_strdup(change) : NULL;
	if (!reason || !ti || (change && !ch) || MR_GROW(a->recs, a->rec_cap, a->rec_count + 1)) {
		free(reason);
		free(ti);
		free(ch);
		return -1;
	}
	ad_recommendation *r = &a->recs[a->rec_count++];
	memset(r, 0, sizeof *r);
	snprintf(r->id, sizeof r->id, "%s", id);
	r->title = ti;
	r->reason = reason;
	r->reason_paths = paths;
	r->change = ch;
	return 0;
}

int ad_append_reason(ad_recommendation *r, const char *more)
{
	size_t a = strlen(r->reason), b = strlen(more);
	char *n = realloc(r->reason, a + b + 1);
	if (!n)
		return -1;
	memcpy(n + a, more, b + 1);
	r->reason = n;
	return 0;
}

void ad_remove_rec(ad_advice *a, size_t k)
{
	rec_free(&a->recs[k]);
	memmove(&a->recs[k], &a->recs[k + 1], (a->rec_count - k - 1) * sizeof *a->recs);
	a->rec_count--;
}
