/* plan_line.c: "Capacity: about 1.37x this microbatch fits 24.0 GiB (scaled replay) ..." */
#include "advise/plan_line.h"

#include <inttypes.h>
#include <stdio.h>

#include "advise/rule_ctx.h"
#include "base/buf.h"
#include "base/mem.h"

/* The site whose allocations that grow with the microbatch hold the most, in words. */
static void deciding(mr_buf *b, const ad_capacity *cp, const md_snapshot *s,
                     const an_stack_info *info, const char *where)
{
	char sz[32];
	if (!cp->deciding_count)
		return;
	uint32_t st = cp->deciding_stack[0];
	const md_frame *f = s ? an_user_frame(s, st) : NULL;
	uint32_t flags = info && s && st < s->stack_count ? info[st].flags : 0;
	mr_buf_printf(b, " %s, what grows with it most is %s", where,
	              ad_sz(sz, cp->deciding_bytes[0]));
	if (cp->deciding_blocks[0] > 1)
		mr_buf_printf(b, " in %" PRIu64 " blocks", cp->deciding_blocks[0]);
	if (f)
		mr_buf_printf(b, ", from %s()", md_str(s, f->name));
	else if (!(flags & AN_SF_PYTHON))
		mr_buf_puts(b, ", from autograd (backward)");
	if (flags & AN_SF_LOSS)
		mr_buf_puts(b,
		            ", in the loss: computing the loss in chunks (chunked_loss) moves this "
		            "limit");
	mr_buf_putc(b, '.');
}

static void plan(mr_buf *b, const ad_capacity *cp, const char *what, const char *budget)
{
	char sz[2][32];
	if (cp->max_factor <= 0) {
		mr_buf_printf(b,
		              "what does not scale with the %s (%s at the peak) leaves no room "
		              "for it in %s.",
		              what, ad_sz(sz[0], cp->fixed_bytes), budget);
		return;
	}
	if (cp->at_cap) {
		mr_buf_printf(b,
		              "even %.0fx this %s fits %s in the scaled replay: the %s is not what "
		              "fills memory here.",
		              cp->max_factor, what, budget, what);
		return;
	}
	char peak[32];
	mr_buf_printf(b,
	              "about %.2fx this %s fits %s (the trace replayed with what scales "
	              "multiplied: %s does not scale with it, %s does; predicted peak reserved "
	              "%s).",
	              cp->max_factor, what, budget, ad_sz(sz[0], cp->fixed_bytes),
	              ad_sz(sz[1], cp->scaling_bytes), ad_sz(peak, cp->predicted_peak_reserved));
	if (cp->with_flushes)
		mr_buf_printf(b,
		              " Only with the allocator freeing its cache to retry (slow steps): "
		              "no %s fits without that.",
		              what);
}

/* step: what the run repeats, "step" or (inference) "iteration" */
static void bound(mr_buf *b, const ad_capacity *cp, const char *what, const char *step,
                  const char *budget)
{
	mr_buf_puts(b, "the run died");
	if (cp->died_in && cp->died_in[0])
		mr_buf_printf(b, " in %s", cp->died_in);
	if (cp->step_reached > 0)
		mr_buf_printf(b,
		              " of %s %s that had made %.0f%% of the allocations of the one before",
		              step[0] == 'i' ? "an" : "a", step, cp->step_reached * 100.0);
	if (cp->max_factor > 0)
		mr_buf_printf(
		    b,
		    "; what of the %s ran does not fit %s at %.2fx this %s or more, so no "
		    "such %s can",
		    step, budget, cp->max_factor, what, what);
	else
		mr_buf_printf(b, "; what does not scale with the %s leaves no room for it in %s",
		              what, budget);
	mr_buf_printf(b,
	              ". That is a bound, not a plan: for one, record a whole %s at a smaller "
	              "%s with the history on and rerun memreport with --budget.",
	              step, what);
}

/* A plan scales the microbatch over memory as the run had it; memory that a leak or an earlier
 * iteration left behind is counted as what does not scale, and it is not fixed. */
static void left_behind(mr_buf *b, const ad_advice *a, const char *what)
{
	if (a->oom.by_growth)
		mr_buf_printf(
		    b,
		    " Memory grew every iteration until the OOM: this counts what had "
		    "grown by then, and a smaller %s would run out too, later, unless the "
		    "growth stops.",
		    what);
	else if (ad_finding_of(a, "checkpointing_inactive"))
		mr_buf_printf(b,
		              " The step that died ran without the checkpointing the earlier steps "
		              "had: this bounds that step, and with checkpointing restored the "
		              "%s that fitted before fits again.",
		              what);
	else if (ad_finding_of(a, "activations_carried"))
		mr_buf_printf(
		    b, " Activations an earlier iteration saved were still live: this counts "
		       "them as memory that does not scale, and it moves once they are freed.");
}

int ad_write_capacity_line(ad_advice *a, const md_snapshot *s, const an_stack_info *info,
                           const an_structure *run)
{
	const ad_capacity *cp = &a->capacity;
	mr_buf b = {0};
	char sz[32], budget[64];
	/* a microbatch is a training word; forwards that kept graphs with no backward may be an
	 * evaluation or microbatches of a loss not backpropagated yet: the neutral word */
	an_run_kind kind = run ? run->kind : AN_RUN_UNKNOWN;
	int sequences = run && s && ((run->flags_seen & AN_SF_GENERATE) || ad_embeds_tokens(s));
	const char *what = kind == AN_RUN_INFERENCE && sequences ? "batch of sequences"
	                   : kind == AN_RUN_INFERENCE || kind == AN_RUN_EVALUATION ? "batch"
	                                                                           : "microbatch";
	snprintf(budget, sizeof budget, "%s%s", ad_sz(sz, cp->budget),
	         cp->budget_given ? "" : " (the cap the OOM message shows)");
	if (cp->budget) {
		mr_buf_puts(&b, "Capacity: ");
		if (cp->method == AD_PLAN_NONE)
			mr_buf_printf(&b, "no plan for %s: %s.", budget, cp->why);
		else if (cp->method == AD_PLAN_UPPER_BOUND)
			bound(&b, cp, what, kind == AN_RUN_INFERENCE ? "iteration" : "step",
			      budget);
		else
			plan(&b, cp, what, budget);
		if (cp->method != AD_PLAN_NONE && !cp->at_cap)
			deciding(&b, cp, s, info,
			         cp->method == AD_PLAN_UPPER_BOUND ? "At the OOM" : "At that peak");
		if (cp->method != AD_PLAN_NONE)
			left_behind(&b, a, what);
	}
	if (b.failed) {
		mr_buf_free(&b);
		return -1;
	}
	a->capacity_line = b.data ? b.data : mr_strndup("", 0);
	return a->capacity_line ? 0 : -1;
}
