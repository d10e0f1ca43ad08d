/* rule_ctx.h: what the rule files of advise/ share while a diagnosis is made: the run being
 * diagnosed and the helpers that add findings and prioritised recommendations. Internal to
 * advise/ (rules.c and the rule files it calls: outside.c, capacity.c, growth.c, settings.c).
 *
 * Ownership: a ctx borrows everything it points to; the recommendations and findings it adds
 * belong to the ad_advice. rec_priority is the ctx's own, freed by ad_advise. */
#ifndef MR_RULE_CTX_H
#define MR_RULE_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "advise/advice.h"
#include "analyze/analyze.h"
#include "analyze/moments.h"
#include "load/load.h"

typedef struct {
	ad_advice *a;
	const ld_evidence *ev;
	const md_snapshot *s;
	const an_device *dv;     /* the device diagnosed; NULL without a snapshot */
	const an_structure *run; /* its run structure; NULL without a snapshot */
	const an_stack_info *info;
	const an_moment *peak; /* the state at dv's peak, rebuilt from the trace; NULL: none */
	const ev_oom *msg;     /* the OOM message analysed (the last of the logs), or NULL */
	int failed;
	/* explicit attention's probabilities live at the OOM (ad_rule_attention), bytes */
	uint64_t attention_bytes;
	/* one of them twice another: a float32 softmax cast down to a 16-bit model's dtype */
	int attention_half;
	int *rec_priority; /* parallel to a->recs while collecting */
	size_t prio_cap;
} ad_ctx;

/* Priorities: lower ranks first. Rules keep to bands so that their advice orders the same
 * way whatever else fired: the cause's own fix first, then what shrinks memory, then the rest. */
enum {
	AD_PRIO_FIRST = 1,     /* the fix for the cause found */
	AD_PRIO_TARGETED = 5,  /* a fix aimed at one named tensor or call */
	AD_PRIO_CAPACITY = 10, /* what shrinks live memory, 10..40 */
	AD_PRIO_SETTINGS = 60, /* allocator settings that help but are not the fix */
	AD_PRIO_LATER = 90,    /* worth knowing */
};

void ad_note_text(ad_ctx *c, const char *id, ad_severity sev, ad_text *t);
void ad_note(ad_ctx *c, const char *id, ad_severity sev, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Adds a recommendation; an id already present keeps the better priority and its first
 * reason. */
void ad_suggest_text(ad_ctx *c, const char *id, int priority, const char *title, const char *change,
                     ad_text *t);
void ad_suggest(ad_ctx *c, const char *id, int priority, const char *title, const char *change,
                const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Ranks the recommendations added since the count `since` (a->rec_count before a rule ran) `by`
 * later: a rule whose levers come after another's. */
void ad_rank_later(ad_ctx *c, size_t since, int by);
/* The recommendation with this id, or NULL. */
ad_recommendation *ad_find_rec(ad_ctx *c, const char *id);
int ad_has_finding(const ad_ctx *c, const char *id);

/* Human-readable bytes into buf (32 bytes), returned for printf. */
const char *ad_sz(char *buf, uint64_t v);

/* Appends "name (file:line)" of the user's own frame of a stack, the file marked as a path.
 * Returns 0 (appending nothing) when the stack has none. */
int ad_user_site(ad_text *t, const md_snapshot *s, uint32_t stack);

/* Whether a stack (ad_stack_has_frame), or any frame of the snapshot (ad_any_frame), is a call
 * of function `name` (NULL: any) in a file whose path contains `path`. */
int ad_stack_has_frame(const md_snapshot *s, uint32_t stack, const char *name, const char *path);
int ad_any_frame(const md_snapshot *s, const char *name, const char *path);
/* Whether the model looks its input up in an embedding table (nn.Embedding's forward in
 * torch/nn/modules/sparse.py): tokens, whose padded length the activations scale with too. */
int ad_embeds_tokens(const md_snapshot *s);

/* The kind of run and what is on, for rules that advise by them. */
an_run_kind ad_run_kind(const ad_ctx *c);
int ad_technique_on(const ad_ctx *c, uint32_t tech);
int ad_framework(const ad_ctx *c, uint32_t fw);

#endif
