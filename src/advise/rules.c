/* rules.c: findings and ranked recommendations.
 *
 * The order follows the guides users learn from: measure first; when live tensors fill the
 * card shrink the working set (microbatch with accumulation, checkpointing, mixed precision)
 * or shard and offload when the model state itself does not fit; touch the allocator
 * (expandable_segments, then max_split_size_mb) only when the numbers show fragmentation;
 * empty_cache() is never the fix. Every rule reads numbers; none reads a file name. */
#include "advise/rules.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advise/capacity.h"
#include "advise/growth.h"
#include "advise/outside.h"
#include "advise/rule_ctx.h"
#include "advise/settings.h"
#include "advise/verdict.h"
#include "advise/plan_line.h"
#include "advise/what_ran.h"
#include "base/buf.h"
#include "base/mem.h"
#include "base/units.h"
#include "decode/oom_message.h"
#include "decode/text.h"

/* Thresholds, with why. */
enum {
	/* Free cached memory is a "real share" of the budget when it is at least 10% of it: below
	 * that, fixing fragmentation would only delay an OOM that capacity makes inevitable. */
	FRAG_SHARE_PERCENT = 10,
	/* Reserved above allocated at the peak, as a share of peak reserved, that is worth an
	 * allocator change; and the least absolute amount. */
	HIGH_FRAG_PERCENT = 15,
};
#define HIGH_FRAG_MIN_BYTES (256 * MR_MIB)
/* Free memory at the peak counts as cut up when its largest block holds under three quarters
 * of it (an_fragmentation 0.25 or more). */
#define PEAK_CUT_UP 0.25

static void rank(ad_ctx *c)
{
	ad_advice *a = c->a;
	/* insertion sort: a handful of items, stable */
	for (size_t i = 1; i < a->rec_count; i++) {
		ad_recommendation r = a->recs[i];
		int p = c->rec_priority[i];
		size_t j = i;
		while (j > 0 && c->rec_priority[j - 1] > p) {
			a->recs[j] = a->recs[j - 1];
			c->rec_priority[j] = c->rec_priority[j - 1];
			j--;
		}
		a->recs[j] = r;
		c->rec_priority[j] = p;
	}
	for (size_t i = 0; i < a->rec_count; i++)
		a->recs[i].rank = (int)i + 1;
}

/* The device to diagnose: the one asked for (--device), else the one that ran out of memory,
 * else the one with most reserved. */
static const an_device *primary_device(const an_result *an, int32_t wanted)
{
	const an_device *best = NULL;
	for (size_t i = 0; i < an->device_count; i++) {
		const an_device *d = &an->devices[i];
		if (wanted >= 0) {
			if (d->device == wanted)
				return d;
			continue;
		}
		if (d->oom.present &&
		    (!best || !best->oom.present || d->oom.event > best->oom.event))
			best = d;
		else if (!best || (!best->oom.present && d->pool[AN_POOL_ALL].reserved >
		                                             best->pool[AN_POOL_ALL].reserved))
			best = d;
	}
	return best;
}

static int settings_expandable(const ad_ctx *c)
{
	return c->s->settings.expandable_segments || (c->dv && c->dv->expandable);
}

/* The OOM message to analyse: the last one of the logs (each is listed as a finding). */
static const ev_oom *last_message(const ad_ctx *c)
{
	const ev_text *t = &c->ev->text;
	return t->oom_count ? &t->ooms[t->oom_count - 1] : NULL;
}

static int close_enough(uint64_t a, uint64_t b)
{
	/* messages print two decimals of the unit: 1% covers their rounding */
	uint64_t d = a > b ? a - b : b - a;
	return (double)d <= 0.01 * (double)MR_MAX(a, b) + 1024.0;
}

/* Snapshot and log describe one run: say where they disagree instead of hiding it. */
static void check_agreement(ad_ctx *c, const ev_oom *msg)
{
	const an_device *dv = c->dv;
	const an_pool *all = &dv->pool[AN_POOL_ALL];
	char b1[32], b2[32];
	if (msg->has_requested && dv->oom.present &&
	    !close_enough(msg->requested_bytes, dv->oom.requested) &&
	    !close_enough(msg->requested_bytes, an_segment_size_for(dv->oom.requested)))
		ad_note(c, "evidence_disagrees", AD_WARNING,
		        "The log's OOM asked for %s but the snapshot's OOM event for %s: they may "
		        "not be "
		        "the same failure.",
		        ad_sz(b1, msg->requested_bytes), ad_sz(b2, dv->oom.requested));
	/* "allocated by PyTorch" already counts the private pools' free blocks ("with X
	 * allocated in private pools" is a part of it): reserved is it plus the unallocated */
	uint64_t reserved;
	if (msg->has_allocated && msg->has_reserved_unallocated &&
	    ad_message_reserved(msg, &reserved)) {
		if (!close_enough(reserved, all->reserved))
			ad_note(c, "evidence_disagrees", AD_WARNING,
			        "The log says PyTorch held %s (allocated plus reserved but "
			        "unallocated), "
			        "the snapshot %s reserved: they were taken at different moments.",
			        ad_sz(b1, reserved), ad_sz(b2, all->reserved));
	}
}

/* Why a capacity OOM's own figures do not contradict it: the limit a memory fraction (or MPS's
 * watermark) set below the card, or CUDA's free figure that covers the segment it refused. */
static void explain_limit(ad_text *t, const ev_oom *msg)
{
	char b1[32], b2[32], b3[32];
	uint64_t limit = ev_oom_limit(msg);
	if (msg->era == EV_OOM_ERA_MPS && msg->has_allowed) {
		ad_text_printf(t,
		               " The limit is MPS's max allowed (PYTORCH_MPS_HIGH_WATERMARK_RATIO "
		               "sets it), not all of the machine's memory");
		if (msg->has_this_process)
			ad_text_printf(
			    t, "; MPS's own and its other allocations, %s, count against it",
			    ad_sz(b1, msg->this_process_in_use));
		ad_text_printf(t, ".");
	} else if (msg->has_allowed && limit == msg->allowed && msg->has_total_capacity &&
	           msg->allowed < msg->total_capacity) {
		ad_text_printf(t,
		               " The limit is the %s a memory fraction allows this process "
		               "(torch.cuda.set_per_process_memory_fraction), not the card's %s",
		               ad_sz(b1, msg->allowed), ad_sz(b2, msg->total_capacity));
		if (msg->has_device_free)
			ad_text_printf(t, ": CUDA still had %s free that it may not use.",
			               ad_sz(b3, msg->device_free));
		else
			ad_text_printf(t, ".");
	} else if (msg->has_device_free && msg->has_requested &&
	           msg->device_free >= msg->requested_bytes) {
		ad_text_printf(t,
		               " CUDA reported %s free, no less than the %s it refused: that "
		               "figure is read after the failure, once PyTorch had released its "
		               "cached segments, and CUDA's own free memory need not lie in one "
		               "piece that large (or another process freed memory meanwhile).",
		               ad_sz(b1, msg->device_free), ad_sz(b2, msg->requested_bytes));
	}
}

/* A forward that an earlier OOM ended, whose tensors are still live at this one while the
 * model runs again (a retry inside the except block, or the exception kept): that memory is the
 * first thing to give back. Returns whether it explains a quarter of live memory. */
static int advise_failed_attempt(ad_ctx *c)
{
	const an_structure *r = c->run;
	uint64_t held = r ? r->held_from_failed : 0;
	uint64_t live = c->dv->pool[AN_POOL_ALL].allocated;
	char b1[32], b2[32];
	if (held < 64 * MR_MIB || held * 4 < live)
		return 0;
	ad_note(c, "oom_attempt_held", AD_CRITICAL,
	        "An earlier out-of-memory error (trace event %zu) ended a forward pass, and the "
	        "model was called again; %s that the failed forward allocated is still live at "
	        "this OOM, %d%% of the %s live: the failed attempt is still referenced. Retrying "
	        "inside the except block does that (the exception's traceback holds the frames of "
	        "the failed forward and their tensors), and so does keeping the exception.",
	        r->handled_oom_event, ad_sz(b1, held), ad_pct(held, live), ad_sz(b2, live));
	ad_suggest(c, "release_failed_attempt", AD_PRIO_FIRST,
	           "Let go of the failed attempt before retrying",
	           "except torch.OutOfMemoryError:\n    failed = True  # nothing else here\n"
	           "if failed:  # outside the except block: its tensors are unreferenced now\n"
	           "    optimizer.zero_grad(set_to_none=True); gc.collect()\n"
	           "    ...  # retry with the smaller batch",
	           "The retry has %s more room once the failed forward's tensors are freed: "
	           "leave the except block before retrying, and keep no reference to the "
	           "exception, its traceback or the attempt's outputs.",
	           ad_sz(b1, held));
	return 1;
}

/* Packed, the free pieces would hold the request with almost nothing to spare (less than
 * another request of its size and than half the share that makes fragmentation the cause):
 * the next request of that scale fails anyway, so the free memory only delays the OOM. Says
 * so into delay. */
static int barely_serves(const an_oom *o, uint64_t budget, char *delay, size_t n)
{
	char b1[32];
	if (o->usable_free < o->requested)
		return 0;
	uint64_t spare = o->usable_free - o->requested;
	if (spare >= o->requested || (double)spare * 200.0 >= (double)budget * FRAG_SHARE_PERCENT)
		return 0;
	snprintf(delay, n,
	         " Packed together it would just hold the request, with %s to spare: the next "
	         "request of this size would fail anyway, so fixing fragmentation would only make "
	         "it fail a little later.",
	         ad_sz(b1, spare));
	return 1;
}

/* In a forward that keeps its layers' tensors (a first forward cut short, or one whose
 * finished layers were being saved for a backward), packed free pieces would hold the request
 * with less than another of its size to spare, and the failing call (its stack: the same line
 * of the same layer code) already holds at least as much again in live blocks made before
 * (an earlier layer's, kept): nothing of that size is freed before the next layer asks as
 * much again, and that fails however the free memory is laid out. Says so into delay. */
static int repeat_fails(const ad_ctx *c, char *delay, size_t n)
{
	const an_device *dv = c->dv;
	const an_oom *o = &dv->oom;
	const md_device *md = md_find_device(c->s, dv->device);
	char b1[32], b2[32];
	if (!c->run || (!an_first_forward_cut(c->run) && c->run->oom_forward_graph != 1) || !md ||
	    o->event >= md->event_count || o->usable_free < o->requested ||
	    o->usable_free - o->requested >= o->requested)
		return 0;
	uint32_t st = md->events[o->event].stack;
	uint64_t held = 0, blocks = 0;
	if (st >= c->s->stack_count || !(c->info[st].flags & AN_SF_MODULE_CALL))
		return 0;
	for (size_t i = 0; i < dv->site_count; i++)
		if (dv->sites[i].stack == st) {
			held += dv->sites[i].bytes;
			blocks += dv->sites[i].count;
		}
	if (held < o->requested)
		return 0;
	snprintf(delay, n,
	         " Packed together it would hold the request, with %s to spare, but the call that "
	         "failed already holds %s in %llu live blocks it made before, kept: the next time "
	         "it runs it asks as much again, so fixing fragmentation would only make it fail "
	         "a little later.",
	         ad_sz(b1, o->usable_free - o->requested), ad_sz(b2, held),
	         (unsigned long long)blocks);
	return 1;
}

/* What packing `free_bytes` of free pieces would buy when a leak fills them. */
static void leak_delay(const ad_ctx *c, uint64_t free_bytes, char *out, size_t n)
{
	char b1[32], iters[48];
	uint64_t rate = ad_leak_rate(c) ? ad_leak_rate(c) : ad_carried_rate(c);
	unsigned long long k = rate ? (unsigned long long)(free_bytes / rate) : 0;
	if (k < 2)
		snprintf(iters, sizeof iters, "%s",
		         k ? "about one iteration" : "less than one iteration");
	else
		snprintf(iters, sizeof iters, "about %llu iterations", k);
	snprintf(out, n,
	         " Packed together it would have held the request, but each iteration needs %s "
	         "more than the last: fixing fragmentation would buy %s.",
	         ad_sz(b1, rate), iters);
}

/* CUDA graph private pools that hold most of what was reserved when a request failed, with
 * more free inside them than the request: memory each recorded graph keeps for its replays,
 * which no request outside its pool can use and which the allocator never releases while the
 * graph lives. The graphs, not the tensors live beside them, filled the budget; a graph is
 * recorded for each new input shape (torch.compile's mode="reduce-overhead" records one per
 * shape), so fewer shapes or no graphs for varying shapes give it back. 1 when advised. */
static int advise_graph_pools(ad_ctx *c)
{
	const an_device *dv = c->dv;
	const an_pool *all = &dv->pool[AN_POOL_ALL], *priv = &dv->pool[AN_POOL_PRIVATE];
	char b1[32], b2[32], b3[32], b4[32];
	if (!priv->segments || priv->reserved * 2 < all->reserved ||
	    priv->reserved - MR_MIN(priv->allocated, priv->reserved) < dv->oom.requested)
		return 0;
	int compiled = c->run && (c->run->techniques & AN_TECH_COMPILE);
	ad_note(c, "oom_graph_pools", AD_CRITICAL,
	        "CUDA graph private pools hold %s of the %s reserved (%llu segments, %s of it "
	        "allocated) when the %s request failed: memory recorded graphs keep for their "
	        "replays, which no request outside their pool can use and which is not "
	        "released while the graphs live.",
	        ad_sz(b1, priv->reserved), ad_sz(b2, all->reserved),
	        (unsigned long long)priv->segments, ad_sz(b3, priv->allocated),
	        ad_sz(b4, dv->oom.requested));
	ad_suggest(c, "fewer_cuda_graphs", AD_PRIO_FIRST,
	           "Record fewer CUDA graphs: fewer input shapes, or no graphs for varying ones",
	           compiled ? "x = F.pad(x, (0, bucket - x.shape[-1]))  # a few fixed lengths\n"
	                      "# or, for shapes that vary: torch.compile(model, "
	                      "mode=\"max-autotune-no-cudagraphs\")"
	                    : "x = F.pad(x, (0, bucket - x.shape[-1]))  # a few fixed shapes\n"
	                      "# or drop graphs no longer replayed: del graph; "
	                      "torch.cuda.empty_cache()",
	           "%s of the budget is held by CUDA graph pools%s. A graph is recorded for "
	           "every new input shape, each keeping its memory: padding inputs to a few "
	           "sizes, or running shapes that vary without CUDA graphs, leaves that memory "
	           "to the work.",
	           ad_sz(b1, priv->reserved),
	           compiled ? " (torch.compile's mode=\"reduce-overhead\" records them)" : "");
	return 1;
}

/* What shrinks live memory helps a fragmentation OOM too, after the allocator fix; in a first
 * forward cut short, packed memory gets past this request but the rest of the step is not in
 * the trace: the batch comes right after it. */
static void capacity_after_fragmentation(ad_ctx *c, const uint64_t *cat)
{
	int first = an_first_forward_cut(c->run);
	size_t before = c->a->rec_count;
	ad_rule_capacity(c, cat, 0);
	ad_rank_later(c, before, 100);
	for (size_t i = before; first && i < c->a->rec_count; i++)
		if (strcmp(c->a->recs[i].id, "reduce_microbatch") == 0)
			c->rec_priority[i] = AD_PRIO_FIRST + 2;
}

/* The targeted and capacity advice of a capacity OOM. A leak that filled the memory: the growth
 * rule says what to change, not the batch; one that outgrows the free pieces but holds less
 * than half of live memory: the batch's levers still shrink the rest, after the leak's; so for
 * copies of the model. later: rank them after what came before (a leak, CUDA graphs' pools). */
static void capacity_levers(ad_ctx *c, int later)
{
	if (ad_leak_explains(c))
		return;
	int copies = ad_rule_checkpoint_skipped(c) ? 0 : ad_rule_model_copies(c);
	if (copies >= 2)
		return;
	int carried =
	    copies || ad_has_finding(c, "checkpointing_inactive") ? 1 : ad_rule_carried(c);
	if (carried == 2) /* what earlier steps left fills half the memory: the step fits */
		return;
	carried = carried || ad_rule_held(c) || ad_rule_graph_in_eval(c) || ad_rule_nograd_held(c);
	size_t before = c->a->rec_count;
	ad_rule_gathered_predictions(c);
	ad_rule_logits(c);
	ad_rule_attention(c);
	ad_rule_kept_attention(c);
	ad_rule_quadratic(c);
	ad_rule_attention_shape(c);
	ad_rule_big_operation(c);
	ad_rule_capacity(c, c->dv->categories, 1);
	ad_rule_larger_eval_pass(c);
	if (later || carried)
		ad_rank_later(c, before, 100);
}

/* The failed allocation, read from the layout it met. */
static void advise_oom(ad_ctx *c)
{
	const an_device *dv = c->dv;
	const an_oom *o = &dv->oom;
	const an_pool *all = &dv->pool[AN_POOL_ALL];
	ad_oom *out = &c->a->oom;
	char b1[32], b2[32], b3[32], b4[32], b5[32];
	out->present = 1;
	out->device = dv->device;
	out->requested = o->requested;
	out->free_cached = o->usable_free;
	out->largest_free = o->usable_largest;
	out->free_pieces = o->usable_pieces;
	out->reserved = all->reserved;
	out->allocated = all->allocated;
	if (c->msg)
		check_agreement(c, c->msg);
	ad_outside outside = ad_rule_outside(c);
	if (o->events_after)
		ad_note(c, "oom_snapshot_later", AD_INFO,
		        "The snapshot was taken %zu trace events after the OOM, so its layout may "
		        "differ a little from the moment of the failure.",
		        o->events_after);
	if (outside == AD_OUTSIDE_CAUSE)
		return;
	/* the budget the request met: the cap; without one in the evidence, what was reserved
	 * (a memory fraction was reached: the device still had room) */
	uint64_t budget = out->limit ? out->limit : all->reserved;
	int could_serve = o->usable_free >= o->requested;
	char freebuf[160] = "nothing was cached but free", delay[320] = "";
	int barely =
	    barely_serves(o, budget, delay, sizeof delay) || repeat_fails(c, delay, sizeof delay);
	int real_share =
	    !barely && (double)o->usable_free * 100.0 >= (double)budget * FRAG_SHARE_PERCENT;
	const uint64_t *cat = dv->categories;
	/* a leak that would fill the free pieces again within a quarter of its growth so far is
	 * the cause: packing them would only delay the failure */
	uint64_t grown = ad_leak_grown(c);
	int leak_fills = (ad_leak_explains(c) && o->usable_free * 4 <= grown) ||
	                 ad_leak_outgrows(c, o->usable_free) ||
	                 ad_carried_outgrows(c, o->usable_free);
	if (could_serve && real_share && !leak_fills) {
		out->cause = AD_CAUSE_FRAGMENTATION;
		ad_note(
		    c, "oom_fragmentation", AD_CRITICAL,
		    "Out of memory from fragmentation: %s was cached but free in %llu pieces, and "
		    "the largest (%s) is smaller than the %s requested. Reserved %s, allocated %s.",
		    ad_sz(b1, o->usable_free), (unsigned long long)o->usable_pieces,
		    ad_sz(b2, o->usable_largest), ad_sz(b3, o->requested), ad_sz(b4, all->reserved),
		    ad_sz(b5, all->allocated));
		ad_rule_fragmentation(c, AD_PRIO_FIRST, o->usable_free, o->usable_largest,
		                      all->largest_hole);
		capacity_after_fragmentation(c, cat);
		return;
	}
	out->cause = outside == AD_OUTSIDE_UNCLEAR ? AD_CAUSE_UNKNOWN : AD_CAUSE_CAPACITY;
	if (o->usable_free)
		snprintf(freebuf, sizeof freebuf, "%s%s was cached but free (largest piece %s)",
		         real_share ? "" : "only ", ad_sz(b2, o->usable_free),
		         ad_sz(b3, o->usable_largest));
	if (could_serve && leak_fills)
		leak_delay(c, o->usable_free, delay, sizeof delay);
	else if (could_serve && !barely)
		snprintf(delay, sizeof delay,
		         " The scattered free memory is too small a share of the budget to matter: "
		         "fixing fragmentation would only make it fail a little later.");
	if (outside != AD_OUTSIDE_UNCLEAR) {
		ad_text t = {0};
		ad_text_printf(&t,
		               "Out of memory from capacity: live tensors hold %s and %s for a "
		               "request of %s.%s",
		               ad_sz(b1, all->allocated), freebuf, ad_sz(b4, o->requested), delay);
		if (c->msg)
			explain_limit(&t, c->msg);
		ad_note_text(c, "oom_capacity", AD_CRITICAL, &t);
	}
	int graphs = advise_graph_pools(c);
	advise_failed_attempt(c);
	ad_rule_failing_pass(c);
	capacity_levers(c, leak_fills || graphs);
	if (outside == AD_OUTSIDE_UNCLEAR && !out->outside_grew)
		ad_suggest(
		    c, "free_device_memory", AD_PRIO_CAPACITY - 1, "Check what else holds the GPU",
		    "nvidia-smi --query-compute-apps=pid,used_memory --format=csv",
		    "The device was full while PyTorch held only %s: if another process or a "
		    "library holds the rest, freeing it gives this run room without changing "
		    "it.",
		    ad_sz(b1, all->reserved));
	/* Free pieces that even packed would hold less than half the request: the finding above
	 * says so; a setting to try would be noise beside the advice that can work. */
	if (ad_live_total(cat) && !settings_expandable(c) && o->usable_free > 0 &&
	    o->usable_free >= o->requested / 2)
		ad_suggest(
		    c, "expandable_segments", AD_PRIO_LATER,
		    "Expandable segments would not save this run",
		    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
		    could_serve
		        ? "Packed together, the %s free in the cache would hold this %s "
		          "request, but the requests after it would not fit: worth having, "
		          "but not the fix."
		        : "Only %s was free in the cache; even perfectly packed it would not "
		          "hold the %s request. Worth having, but not the fix.",
		    ad_sz(b1, o->usable_free), ad_sz(b2, o->requested));
}

/* A capacity OOM from the message alone: its figures, without the ones it does not give. */
static void message_capacity(ad_ctx *c, const ev_oom *msg)
{
	char b1[32], b2[32], b3[32], b4[32];
	ad_text t = {0};
	uint64_t limit = c->a->oom.limit;
	ad_text_printf(&t,
	               "Out of memory from capacity: PyTorch had %s allocated within a limit of %s",
	               ad_sz(b1, msg->allocated_by_pytorch), ad_sz(b2, limit));
	if (!msg->has_reserved_unallocated)
		ad_text_printf(&t, ", for a request of %s.", ad_sz(b4, msg->requested_bytes));
	else if (msg->reserved_unallocated < msg->requested_bytes)
		ad_text_printf(&t, ", and only %s reserved but unallocated for a request of %s.",
		               ad_sz(b3, msg->reserved_unallocated),
		               ad_sz(b4, msg->requested_bytes));
	else
		ad_text_printf(
		    &t,
		    ", for a request of %s. The %s reserved but unallocated is more than "
		    "that, but in pieces none of which could hold it, and at %d%% of "
		    "the limit too small a share to be the cause: fixing fragmentation "
		    "would only make it fail a little later.",
		    ad_sz(b4, msg->requested_bytes), ad_sz(b3, msg->reserved_unallocated),
		    ad_pct(msg->reserved_unallocated, limit));
	explain_limit(&t, msg);
	ad_note_text(c, "oom_capacity", AD_CRITICAL, &t);
}

/* A message that only says memory ran out: say so, and what usually does it. */
static void message_without_sizes(ad_ctx *c, const ev_oom *msg)
{
	if (msg->era == EV_OOM_ERA_LIBRARY)
		ad_note(c, "library_oom", AD_CRITICAL,
		        "A CUDA library could not allocate memory for its handle or workspace "
		        "(%s): the card was already full, and the message gives no sizes (neither "
		        "the request nor what PyTorch held). Record a snapshot, or read "
		        "torch.cuda.memory_summary() at that point, to see what filled it.",
		        msg->status);
	else
		ad_note(
		    c, "driver_oom", AD_CRITICAL,
		    "The CUDA %s ran out of memory (%s), outside the caching allocator: the "
		    "message gives no sizes (neither the request nor what PyTorch held). Other "
		    "processes, a CUDA context on a full card, or a library allocating directly "
		    "are the usual causes.",
		    msg->era == EV_OOM_ERA_LEGACY_RUNTIME ? "runtime" : "driver itself",
		    msg->era == EV_OOM_ERA_LEGACY_RUNTIME ? "PyTorch 0.x: \"cuda runtime error "
		                                            "(2) : out of memory\""
		                                          : "\"CUDA error: out of memory\"");
}

static const char history_change[] =
    "torch.cuda.memory._record_memory_history(max_entries=100000)\n"
    "# ... then, in an except torch.OutOfMemoryError block:\n"
    "torch.cuda.memory._dump_snapshot(\"oom_snapshot.pickle\")";

/* Only a log: the message's own figures, and what it cannot tell. */
static void advise_message(ad_ctx *c, const ev_oom *msg)
{
	ad_oom *out = &c->a->oom;
	char b1[32], b2[32], b3[32], b4[32];
	out->present = 1;
	out->device = msg->device < 0 ? 0 : msg->device;
	out->requested = msg->requested_bytes;
	out->free_cached = msg->reserved_unallocated;
	out->allocated = msg->allocated_by_pytorch;
	int reserved_known = ad_message_reserved(msg, &out->reserved);
	out->unknown = (msg->has_requested ? 0u : AD_OOM_NO_REQUESTED) |
	               (msg->has_reserved_unallocated ? 0u : AD_OOM_NO_FREE_CACHED) |
	               (reserved_known ? 0u : AD_OOM_NO_RESERVED) |
	               (msg->has_allocated ? 0u : AD_OOM_NO_ALLOCATED);
	out->cause = ad_message_cause(msg);
	out->largest_unknown = 1;
	if (ev_oom_without_sizes(msg)) {
		message_without_sizes(c, msg);
		return;
	}
	if (ad_rule_outside(c) == AD_OUTSIDE_CAUSE)
		goto record;
	switch (out->cause) {
	case AD_CAUSE_FRAGMENTATION: {
		uint64_t left;
		int thin = ad_packed_thin(out->limit, out->allocated, out->requested, &left);
		ad_note(
		    c, "oom_fragmentation", AD_CRITICAL,
		    "Out of memory from fragmentation: %s was reserved by PyTorch but "
		    "unallocated, more than the %s requested, within a limit of %s; no free piece "
		    "was large enough.%s%s%s",
		    ad_sz(b1, msg->reserved_unallocated), ad_sz(b2, msg->requested_bytes),
		    ad_sz(b3, out->limit), thin ? " Packed, the limit would leave only " : "",
		    thin ? ad_sz(b4, left) : "",
		    thin ? " free beside live tensors and the request: the message cannot tell "
		           "whether the run would then go on or fail at its next request (memory "
		           "that grows, a larger request after this one); a snapshot would."
		         : "");
		ad_rule_fragmentation(c, AD_PRIO_FIRST, msg->reserved_unallocated, 0, 0);
		/* Fragmentation and live memory near the limit (a larger batch, memory that
		 * grows) read alike in the message: what tells them apart follows the try. */
		if (thin)
			ad_suggest(
			    c, "record_history", AD_PRIO_FIRST + 2,
			    "Record a snapshot at the OOM to see whether the cache or live "
			    "memory is the cause",
			    history_change,
			    "Packed, only %s would be left beside live tensors and this "
			    "request: if live memory grows every step, or a larger request "
			    "follows, expandable segments only delay the failure. A snapshot "
			    "tells: it shows whether live memory grows, what holds it, and "
			    "the free blocks; a log only has totals.",
			    ad_sz(b4, left));
		break;
	}
	case AD_CAUSE_CAPACITY:
		message_capacity(c, msg);
		/* a log cannot say what kind of run it was: what helps either way */
		ad_suggest(
		    c, "reduce_microbatch", AD_PRIO_CAPACITY,
		    "Put fewer samples through the model at once",
		    "batch_size //= 2  # in training, accumulate gradients to keep the batch",
		    "Live tensors fill the limit. Without a snapshot the log cannot say what "
		    "they are; activations usually scale with the batch.");
		break;
	default:
		ad_note(
		    c, "oom_unknown", AD_WARNING,
		    "Out of memory, but the message does not carry enough figures to tell why.");
	}
record:
	if (msg->era == EV_OOM_ERA_MPS)
		return; /* the snapshot below is torch.cuda's: MPS has none */
	if (msg->era == EV_OOM_ERA_ASYNC_ALLOCATOR) {
		/* CUDA's own allocator tracks no blocks: PyTorch refuses history, snapshots and OOM
		 * observers under it, and the caching allocator's settings do not reach it */
		ad_note(c, "async_backend", AD_INFO,
		        "The message is cudaMallocAsync's (PYTORCH_CUDA_ALLOC_CONF=backend:"
		        "cudaMallocAsync): CUDA's own allocator serves the memory, so the caching "
		        "allocator's settings (expandable_segments, max_split_size_mb, "
		        "garbage_collection_threshold) do not apply, and it keeps no record of "
		        "blocks: _record_memory_history() and _dump_snapshot() raise under it.");
		ad_suggest(
		    c, "record_history", 50,
		    "Record a snapshot with the native allocator to see what holds memory",
		    "# PYTORCH_CUDA_ALLOC_CONF without backend:cudaMallocAsync, then:\n"
		    "torch.cuda.memory._record_memory_history(max_entries=100000)\n"
		    "# ... then, in an except torch.OutOfMemoryError block:\n"
		    "torch.cuda.memory._dump_snapshot(\"oom_snapshot.pickle\")",
		    "cudaMallocAsync cannot record history or dump a snapshot; one run with "
		    "the native caching allocator can, and shows live memory by category and "
		    "the allocation sites where a log only has totals.");
		return;
	}
	ad_suggest(c, "record_history", 50, "Record a snapshot at the OOM to see what holds memory",
	           history_change,
	           "A snapshot shows the free blocks, live memory by category and the allocation "
	           "sites; a log only has totals.");
}

static void list_messages(ad_ctx *c)
{
	const ev_text *t = &c->ev->text;
	char b1[32];
	if (t->oom_count > 1)
		ad_note(
		    c, "several_ooms", AD_INFO,
		    "The logs hold %zu out-of-memory messages; the last (line %zu) is analysed.",
		    t->oom_count, t->ooms[t->oom_count - 1].line);
	for (size_t i = 0; i < t->oom_count; i++) {
		const ev_oom *o = &t->ooms[i];
		ad_text x = {0};
		ad_text_printf(&x, "Line %zu: %s out of memory, %s requested (%s era)", o->line,
		               o->backend[0] ? o->backend : "CUDA",
		               o->has_requested ? ad_sz(b1, o->requested_bytes) : "nothing",
		               ev_oom_era_name(o->era));
		/* the traceback's innermost line, where the memory was asked, and the user's own */
		const ev_frame *f[2] = {&o->raised, &o->user};
		int same =
		    o->user.line == o->raised.line && strcmp(o->user.file, o->raised.file) == 0;
		for (int k = 0; k < 2; k++) {
			if (!f[k]->line || (k == 1 && same))
				continue;
			ad_text_printf(&x, "%s %s (",
			               k == 0 ? (same ? ", raised in your" : ", raised in")
			                      : "; your code:",
			               f[k]->function);
			ad_text_path(&x, f[k]->file);
			ad_text_printf(&x, ":%ld)%s%s", f[k]->line, f[k]->code[0] ? ": " : "",
			               f[k]->code);
		}
		ad_text_printf(&x, ".");
		ad_note_text(c, "oom_message", AD_INFO, &x);
	}
}

/* OOMs the run caught and went on from (analyze.c went_on_after): they did not end it, so the
 * report is a survivor's; what it says is that they happened, how many, and that the snapshot
 * shows the run at the settings that fit after them. */
static void advise_recovered(ad_ctx *c)
{
	const an_device *dv = c->dv;
	char b1[32], b2[32];
	uint64_t ooms = 0, n = dv->oom_events;
	if (c->ev->has_stats && ev_stats_get(&c->ev->stats, "num_ooms", &ooms) && ooms > n)
		n = ooms;
	/* Lightning's BatchSizeFinder (its tuner) leaves its frames on the trials' allocations */
	const char *finder =
	    ad_any_frame(c->s, "_scale_batch_size", "lightning/pytorch/tuner/batch_size_scaling.py")
	        ? "Lightning's BatchSizeFinder or Tuner.scale_batch_size: its tuner's "
	          "_scale_batch_size is in the trace"
	        : "a batch-size finder such as accelerate's find_executable_batch_size, "
	          "Trainer(auto_find_batch_size=True) or Lightning's BatchSizeFinder, or a retry "
	          "loop";
	ad_note(c, "oom_survived", AD_WARNING,
	        "%llu out-of-memory error%s did not end the run: the trace holds %llu (the last at "
	        "event %zu), and after it %zu backward pass%s ran, so the run caught them and went "
	        "on (%s). The snapshot shows the run "
	        "after them, at what fit: peak %s allocated in %s reserved over the trace. Each "
	        "caught error cost a failed attempt and a flush of the cache.",
	        (unsigned long long)n, n == 1 ? "" : "s", (unsigned long long)dv->oom_events,
	        dv->last_oom_event, dv->recovered_backwards,
	        dv->recovered_backwards == 1 ? "" : "es", finder, ad_sz(b1, dv->peak_allocated),
	        ad_sz(b2, dv->peak_reserved));
}

static void advise_peak_overhead(ad_ctx *c)
{
	const an_device *dv = c->dv;
	char b1[32], b2[32], b3[32];
	if (!dv->trace_allocs || dv->peak_reserved == 0 || dv->peak_allocated >= dv->peak_reserved)
		return; /* without an allocation in the trace, its "peak" is the snapshot itself */
	uint64_t over = dv->peak_reserved - dv->peak_allocated;
	if (ad_pct(over, dv->peak_reserved) < HIGH_FRAG_PERCENT || over < HIGH_FRAG_MIN_BYTES)
		return;
	if (dv->truncated && dv->initial_reserved >= dv->peak_reserved) {
		/* Reserved never grew inside the window: it reached its peak before the trace
		 * begins, at a moment the trace never saw. The window's allocated peak is a lower
		 * bound of what that reservation was made for, so the gap is not overhead that
		 * the trace measured, and no allocator setting is shown to help. */
		ad_note(c, "peak_before_trace", AD_INFO,
		        "%s was already reserved when the trace begins and reserved never grew "
		        "inside it: the run's peak came before the window, so how much of it held "
		        "no tensor cannot be told from this trace (inside it at most %s was "
		        "allocated). Record history from the start (a larger max_entries) to see "
		        "that peak.",
		        ad_sz(b1, dv->initial_reserved), ad_sz(b2, dv->peak_allocated));
		return;
	}
	/* Free memory at the peak that is mostly one block is cached, not cut up: the allocator
	 * hands any request up to that block's size out of it, and no setting shrinks it. */
	if (c->peak && c->peak->totals.free_cached &&
	    an_fragmentation(&c->peak->totals) < PEAK_CUT_UP)
		return;
	/* Without an OOM, the overhead costs the run something when the allocator had to flush
	 * its cache to retry; without a retry, however large, it is room a larger batch or a
	 * neighbour could use, not a fault (the device's size is not in a snapshot, so how much
	 * of the card it is cannot be told). */
	int pressed = ad_retried(c);
	ad_note(c, "high_fragmentation", pressed ? AD_WARNING : AD_INFO,
	        "At the peak, %s was reserved for %s allocated: %s (%d%% of reserved, the overhead "
	        "at the peak) held no tensor, cut up by fragmentation and the caching of "
	        "differently sized blocks%s",
	        ad_sz(b1, dv->peak_reserved), ad_sz(b2, dv->peak_allocated), ad_sz(b3, over),
	        ad_pct(over, dv->peak_reserved),
	        pressed ? "."
	                : ". Nothing shows that it cost this run anything (no cudaMalloc "
	                  "retry, no OOM): it is room to gain, not a fault.");
	if (!settings_expandable(c))
		ad_rule_fragmentation(c, AD_PRIO_CAPACITY, over, dv->pool[AN_POOL_ALL].largest_free,
		                      dv->pool[AN_POOL_ALL].largest_hole);
}

static void advise_evidence(ad_ctx *c)
{
	const an_device *dv = c->dv;
	const md_snapshot *s = c->s;
	const an_pool *all = &dv->pool[AN_POOL_ALL];
	const an_pool *priv = &dv->pool[AN_POOL_PRIVATE];
	char b1[32], b2[32];
	if (all->pending_free_blocks)
		ad_note(c, "pending_free_blocks", AD_WARNING,
		        "%s in %llu blocks was freed by the program but is still in use by another "
		        "stream (record_stream or collective communication): the allocator cannot "
		        "reuse it until that stream's work completes.",
		        ad_sz(b1, all->pending_free), (unsigned long long)all->pending_free_blocks);
	if (priv->segments)
		ad_note(
		    c, "private_pools", AD_INFO,
		    "%s is reserved in %llu segments of private pools (CUDA graphs or MemPool), "
		    "with %s allocated; it is reported apart and is only released when its graph "
		    "or pool is destroyed.",
		    ad_sz(b1, priv->reserved), (unsigned long long)priv->segments,
		    ad_sz(b2, priv->allocated));
	if (dv->trace_allocs && dv->truncated)
		ad_note(
		    c, "trace_truncated", AD_WARNING,
		    "The trace does not reach back to the start of the run (%zu events; %s was "
		    "already reserved when it begins): the ring buffer wrapped or recording began "
		    "late, so peaks from it are lower bounds%s.",
		    dv->trace_events, ad_sz(b1, dv->initial_reserved),
		    dv->peak_exact ? " for the run (the allocator replay reproduced the window "
		                     "from the state reconstructed from the snapshot: they are "
		                     "exact within it)"
		                   : "");
	if (!dv->trace_allocs) {
		if (dv->has_trace)
			ad_note(
			    c, "no_history", AD_INFO,
			    "No allocation history was recorded: the trace holds %zu event%s and "
			    "no allocation (recording began after the work, or stopped before it), "
			    "so there are no peaks, no timeline and no growth analysis.",
			    dv->trace_events, dv->trace_events == 1 ? "" : "s");
		else
			ad_note(c, "no_history", AD_INFO,
			        "No allocation history was recorded: the snapshot has segments and "
			        "blocks but no trace%s, so there are no peaks, no timeline and no "
			        "growth analysis.",
			        s->has_history ? "" : " and no stacks");
		ad_suggest(c, "record_history", 50, "Record allocation history next time",
		           "torch.cuda.memory._record_memory_history(max_entries=100000)\n"
		           "# ... run until the problem shows ...\n"
		           "torch.cuda.memory._dump_snapshot(\"snapshot.pickle\")",
		           "With history, every block carries the stack that allocated it and the "
		           "trace gives peaks, a timeline, OOM details and growth per iteration.");
	}
	/* a private pool's empty segments stay with its graph or pool: empty_cache() keeps them */
	uint64_t whole = all->whole_free - MR_MIN(priv->whole_free, all->whole_free);
	if (whole >= MR_GIB && whole * 4 >= all->reserved)
		ad_note(c, "empty_cache_note", AD_INFO,
		        "%s of the %s reserved is in segments with nothing allocated. "
		        "empty_cache() would "
		        "hand them back to the driver for other processes, but it never gives this "
		        "process more room: the allocator reuses them anyway.",
		        ad_sz(b1, whole), ad_sz(b2, all->reserved));
}

/* The capacity plan, quoted where the advice is to change the microbatch. */
static void quote_plan(ad_ctx *c)
{
	const ad_capacity *cp = &c->a->capacity;
	ad_recommendation *r = ad_find_rec(c, "reduce_microbatch");
	char b1[32], more[256];
	if (cp->method == AD_PLAN_NONE || !r || cp->max_factor <= 0 || cp->at_cap)
		return;
	ad_sz(b1, cp->budget);
	if (cp->method == AD_PLAN_SCALED_REPLAY)
		snprintf(more, sizeof more,
		         " Replayed with the microbatch scaled, the largest that fits %s is about "
		         "%.2fx this one.",
		         b1, cp->max_factor);
	else
		snprintf(
		    more, sizeof more,
		    " Replayed with the microbatch scaled, what of the step ran does not fit "
		    "%s at %.2fx this one or more: a microbatch that fits, if any, is smaller.",
		    b1, cp->max_factor);
	if (ad_append_reason(r, more))
		c->failed = 1;
}

/* The moment of the device's peak, if one was rebuilt. */
static const an_moment *peak_moment(const an_result *an, const an_moments *moments,
                                    const an_device *dv)
{
	const an_moments *m = moments && dv ? &moments[dv - an->devices] : NULL;
	return m && m->peak != AN_NO_MOMENT ? &m->moments[m->peak] : NULL;
}

mr_status ad_advise(const ld_evidence *ev, const an_result *an, const an_moments *moments,
                    int device, uint64_t budget, ad_advice *out, mr_error *err)
{
	memset(out, 0, sizeof *out);
	ad_ctx c = {.a = out, .ev = ev, .s = &ev->snap};
	c.msg = last_message(&c);
	if (ev->has_snapshot && an) {
		c.dv = primary_device(an, device);
		c.info = an->stack_info;
		c.run = c.dv ? &c.dv->run : NULL;
		c.peak = peak_moment(an, moments, c.dv);
		if (c.dv)
			ad_measure_growth(&c);
	}
	out->device = c.dv ? c.dv->device : -1;
	if (c.dv) {
		out->categories.present = c.s->has_history;
		memcpy(out->categories.bytes, c.dv->categories, sizeof out->categories.bytes);
		out->categories.peak_present = c.dv->peak_categories_known;
		memcpy(out->categories.peak, c.dv->peak_categories, sizeof out->categories.peak);
		out->categories.moment =
		    c.dv->oom.present && !c.dv->oom.events_after ? "oom" : "snapshot";
		if (c.dv->oom.present)
			advise_oom(&c);
		ad_rule_growth(&c);
		if (c.dv->oom_recovered)
			advise_recovered(&c);
		if (!c.dv->oom.present)
			advise_peak_overhead(&c);
		ad_rule_releases(&c);
		ad_rule_settings(&c);
		advise_evidence(&c);
	} else if (c.msg) {
		advise_message(&c, c.msg);
	} else if (ev->text.summary_count || ev->has_stats) {
		ad_rule_releases(&c);
	}
	ad_outside_notes(&c);
	list_messages(&c);
	rank(&c); /* the verdict names the first recommendation's cause */
	if (ad_write_verdict(out, c.dv) || ad_write_what_ran(out, c.run))
		c.failed = 1;
	free(c.rec_priority);
	mr_status st = MR_OK;
	/* The evidence's cap is a budget unless what filled the device was someone else's, or
	 * may have been (a full device that the evidence cannot place). */
	ad_cause why = out->oom.cause;
	int others = why == AD_CAUSE_OTHER_PROCESSES || why == AD_CAUSE_NON_PYTORCH ||
	             (out->oom.device_full && why == AD_CAUSE_UNKNOWN);
	uint64_t plan_for = budget ? budget : others ? 0 : out->oom.limit;
	if (c.dv && (st = ad_plan(ev, c.dv, c.info, plan_for, budget != 0, &out->capacity, err))) {
		ad_free(out);
		return st;
	}
	quote_plan(&c);
	if (ad_write_capacity_line(out, c.s, c.info, c.run))
		c.failed = 1;
	if (c.failed || !out->verdict) {
		ad_free(out);
		return mr_oom(err);
	}
	return MR_OK;
}
