/* verdict.c: the one sentence a report leads with. */
#include "advise/verdict.h"

#include <stdio.h>
#include <string.h>

#include "advise/capacity.h"
#include "base/buf.h"
#include "base/mem.h"
#include "base/units.h"

static const char *sz(char *buf, uint64_t v)
{
	mr_format_bytes(buf, 32, v);
	return buf;
}

static int first_rec_is(const ad_advice *a, const char *id)
{
	for (size_t i = 0; i < a->rec_count; i++)
		if (a->recs[i].rank == 1)
			return strcmp(a->recs[i].id, id) == 0;
	return 0;
}

/* An OOM whose cause is memory outside PyTorch, or a full device nobody can place. Returns 1
 * when it wrote the verdict. */
static int outside_verdict(mr_buf *b, const ad_oom *o)
{
	char b1[32], b2[32], b3[32], b4[32];
	const char *free_words = o->has_device_free ? sz(b2, o->device_free) : "nothing";
	if (o->cause == AD_CAUSE_OTHER_PROCESSES)
		mr_buf_printf(
		    b,
		    "Out of memory because other processes hold %s of the device: only %s "
		    "was free for a %s request, while PyTorch held %s.",
		    sz(b1, o->others), free_words, sz(b3, o->requested), sz(b4, o->reserved));
	else if (o->cause == AD_CAUSE_NON_PYTORCH)
		mr_buf_printf(
		    b,
		    "Out of memory because this process holds %s outside PyTorch's "
		    "allocator: only %s was free for a %s request, while PyTorch held %s.",
		    sz(b1, o->non_pytorch), free_words, sz(b3, o->requested), sz(b4, o->reserved));
	else if (o->device_full && o->cause == AD_CAUSE_UNKNOWN && o->outside_grew)
		mr_buf_printf(b,
		              "Out of memory with the device full (%s free for a %s request) "
		              "while PyTorch held %s: at least %s more of it is held outside "
		              "PyTorch than when this run reserved its peak, by another process "
		              "or a library.",
		              free_words, sz(b3, o->requested), sz(b4, o->reserved),
		              sz(b1, o->outside_grew));
	else if (o->device_full && o->cause == AD_CAUSE_UNKNOWN)
		mr_buf_printf(
		    b,
		    "Out of memory with the device itself full (%s free for a %s request) "
		    "while PyTorch held %s: either its tensors fill the card, or memory "
		    "outside PyTorch holds the rest; the log's OOM message would tell.",
		    free_words, sz(b3, o->requested), sz(b4, o->reserved));
	else
		return 0;
	return 1;
}

static void log_only_verdict(mr_buf *b, const ad_oom *o)
{
	char b1[32], b2[32], b3[32], b4[32];
	if (o->present && outside_verdict(b, o))
		return;
	uint64_t left;
	if (o->present && o->cause == AD_CAUSE_FRAGMENTATION &&
	    ad_packed_thin(o->limit, o->allocated, o->requested, &left))
		mr_buf_printf(
		    b,
		    "Out of memory from fragmentation at this request: %s reserved but "
		    "unallocated, more than the %s asked for, within %s; but packed, only "
		    "%s would be left, so whether the run would go on is not in the "
		    "message.",
		    sz(b1, o->free_cached), sz(b2, o->requested), sz(b3, o->limit), sz(b4, left));
	else if (o->present && o->cause == AD_CAUSE_FRAGMENTATION)
		mr_buf_printf(b,
		              "Out of memory from fragmentation: %s reserved but unallocated, more "
		              "than the %s asked for, within %s.",
		              sz(b1, o->free_cached), sz(b2, o->requested), sz(b3, o->limit));
	else if (o->present && o->cause == AD_CAUSE_CAPACITY &&
	         (o->unknown & AD_OOM_NO_FREE_CACHED))
		mr_buf_printf(b,
		              "Out of memory from capacity: %s allocated by PyTorch within %s, "
		              "for a %s request.",
		              sz(b1, o->allocated), sz(b2, o->limit), sz(b4, o->requested));
	else if (o->present && o->cause == AD_CAUSE_CAPACITY && o->free_cached >= o->requested)
		mr_buf_printf(
		    b,
		    "Out of memory from capacity: %s allocated by PyTorch within %s; the %s "
		    "reserved but unallocated was in pieces, none large enough for the %s "
		    "request.",
		    sz(b1, o->allocated), sz(b2, o->limit), sz(b3, o->free_cached),
		    sz(b4, o->requested));
	else if (o->present && o->cause == AD_CAUSE_CAPACITY)
		mr_buf_printf(
		    b,
		    "Out of memory from capacity: %s allocated by PyTorch within %s; only "
		    "%s was reserved but unallocated for a %s request.",
		    sz(b1, o->allocated), sz(b2, o->limit), sz(b3, o->free_cached),
		    sz(b4, o->requested));
	else if (o->present)
		mr_buf_printf(b, "Out of memory; the evidence does not say why.");
	else
		mr_buf_printf(b, "No out-of-memory error in the evidence.");
}

/* One request too large: larger than the limit, or (the limit unknown) twice all live memory. */
static void split_words(mr_buf *b, const ad_advice *a, const an_device *dv)
{
	char b1[32], b2[32], b3[32];
	uint64_t live = dv->pool[AN_POOL_ALL].allocated;
	if (a->oom.limit)
		mr_buf_printf(b,
		              "Out of memory from one request larger than the limit: %s asked for, "
		              "%s allowed, with %s live beside it.",
		              sz(b1, a->oom.requested), sz(b2, a->oom.limit), sz(b3, live));
	else
		mr_buf_printf(b,
		              "Out of memory from one request of more than twice all live memory: "
		              "%s asked for, with %s live beside it (the limit is not in the "
		              "evidence).",
		              sz(b1, a->oom.requested), sz(b2, live));
}

/* A capacity OOM with no more specific story: what one site holds when the first
 * recommendation is about it, else live memory against the free pieces. */
static void capacity_words(mr_buf *b, const ad_advice *a, const an_device *dv)
{
	const ad_oom *o = &a->oom;
	uint64_t cat[AN_CAT_COUNT];
	/* gradients of the batch (beyond one per parameter) scale with it, as activations do */
	const char *what = ad_batch_categories(&dv->run, dv->categories, cat)
	                       ? "activations and the batch's gradients"
	                       : "activations";
	uint64_t live = ad_live_total(cat);
	char b1[32], b2[32], b3[32];
	if (first_rec_is(a, "release_references") && dv->site_count &&
	    dv->sites[0].bytes * 2 >= dv->pool[AN_POOL_ALL].allocated)
		mr_buf_printf(b,
		              "Out of memory from capacity: live tensors hold %s, %s of them from "
		              "one site (the first recommendation names it), when the %s "
		              "request failed.",
		              sz(b1, dv->pool[AN_POOL_ALL].allocated), sz(b2, dv->sites[0].bytes),
		              sz(b3, o->requested));
	else if (o->free_cached >= o->requested)
		mr_buf_printf(
		    b,
		    "Out of memory from capacity: live tensors hold %s (%d%% %s); "
		    "packed, the %s free in the cache (in pieces smaller than the %s request) "
		    "would only delay the failure.",
		    sz(b1, dv->pool[AN_POOL_ALL].allocated), ad_pct(cat[AN_CAT_ACTIVATIONS], live),
		    what, sz(b2, o->free_cached), sz(b3, o->requested));
	else if (o->free_cached)
		mr_buf_printf(b,
		              "Out of memory from capacity: live tensors hold %s (%d%% %s); "
		              "only %s was free for a %s request.",
		              sz(b1, dv->pool[AN_POOL_ALL].allocated),
		              ad_pct(cat[AN_CAT_ACTIVATIONS], live), what, sz(b2, o->free_cached),
		              sz(b3, o->requested));
	else
		mr_buf_printf(b,
		              "Out of memory from capacity: live tensors hold %s (%d%% %s); "
		              "nothing was cached but free for a %s request.",
		              sz(b1, dv->pool[AN_POOL_ALL].allocated),
		              ad_pct(cat[AN_CAT_ACTIVATIONS], live), what, sz(b3, o->requested));
}

/* The model state (parameters, one gradient per parameter, optimizer state); bcat gets the
 * categories with the batch's gradients (a jacobian's backward, per-sample gradients) counted
 * as activations, as the advice weighs them. */
static uint64_t model_state(const an_device *dv, uint64_t *bcat)
{
	ad_batch_categories(&dv->run, dv->categories, bcat);
	return bcat[AN_CAT_PARAMETERS] + bcat[AN_CAT_GRADIENTS] + bcat[AN_CAT_OPTIMIZER];
}

/* The verdict of an OOM that memory grown every iteration filled. */
static void growth_verdict(mr_buf *b, const ad_advice *a, const an_structure *r)
{
	const ad_oom *o = &a->oom;
	char b1[32], b2[32], over[64];
	/* one increment: a truncated trace's last whole iteration, beside what its lines kept
	 * from before the window */
	if (r->growth_increments == 1)
		snprintf(over, sizeof over, "over the trace's last iteration and those before it");
	else
		snprintf(over, sizeof over, "over %zu iterations", r->growth_increments);
	if (r->kind == AN_RUN_EVALUATION)
		mr_buf_printf(b,
		              "Out of memory from kept autograd graphs: live memory grew %s per "
		              "iteration %s, each forward keeping its graph with no "
		              "backward, until the %s request failed.",
		              sz(b1, r->growth_per_iteration), over, sz(b2, o->requested));
	else if (a->oom.rebuilt)
		mr_buf_printf(b,
		              "Out of memory from growth: one tensor made anew every "
		              "iteration, %s larger each time (its old and new copies live "
		              "at once), over %zu iterations until the %s request failed.",
		              sz(b1, r->growth_per_iteration), r->growth_increments,
		              sz(b2, o->requested));
	else if (r->growth_in_tail)
		mr_buf_printf(b,
		              "Out of memory from growth in the evaluation after training: "
		              "live memory grew %s a batch over %zu batches, each batch's "
		              "outputs kept, until the %s request failed.",
		              sz(b1, r->growth_per_iteration), r->growth_increments,
		              sz(b2, o->requested));
	else if (r->growth_stepped)
		mr_buf_printf(b,
		              "Out of memory from a leak: live memory grew %s about every %zu "
		              "iterations over %zu iterations until the %s request failed.",
		              sz(b1, r->growth_step_bytes), r->growth_step_every,
		              r->growth_increments, sz(b2, o->requested));
	else
		mr_buf_printf(b,
		              "Out of memory from a leak: live memory grew %s per iteration %s "
		              "until the %s request failed.",
		              sz(b1, r->growth_per_iteration), over, sz(b2, o->requested));
}

/* Writes the verdict of an OOM; returns 1 when it blames memory that grew every iteration. */
static int oom_verdict(mr_buf *b, const ad_advice *a, const an_device *dv)
{
	const ad_oom *o = &a->oom;
	const uint64_t *cat = dv->categories;
	uint64_t live = ad_live_total(cat);
	char b1[32], b2[32], b3[32], b4[32];
	if (outside_verdict(b, o))
		return 0;
	if (o->cause == AD_CAUSE_FRAGMENTATION) {
		mr_buf_printf(
		    b,
		    "Out of memory from fragmentation: %s free in %llu pieces, none as large "
		    "as the %s asked for.",
		    sz(b1, o->free_cached), (unsigned long long)o->free_pieces,
		    sz(b2, o->requested));
		if (an_first_forward_cut(&dv->run))
			mr_buf_puts(b, " It was the run's first forward: packed, the free memory "
			               "holds this request, but what the rest of the step needs is "
			               "not in the trace.");
		return 0;
	}
	uint64_t bcat[AN_CAT_COUNT], state = model_state(dv, bcat);
	const ad_finding *growth = ad_finding_of(a, "memory_growth");
	const an_structure *r = &dv->run;
	if (growth && growth->severity == AD_CRITICAL) {
		growth_verdict(b, a, r);
		return 1;
	}
	if (first_rec_is(a, "fewer_cuda_graphs"))
		mr_buf_printf(
		    b,
		    "Out of memory with CUDA graphs holding the budget: their private pools keep "
		    "%s of the %s reserved, and the %s request found no room beside the %s live "
		    "outside them.",
		    sz(b1, dv->pool[AN_POOL_PRIVATE].reserved),
		    sz(b2, dv->pool[AN_POOL_ALL].reserved), sz(b3, o->requested),
		    sz(b4,
		       dv->pool[AN_POOL_ALL].allocated - MR_MIN(dv->pool[AN_POOL_PRIVATE].allocated,
		                                                dv->pool[AN_POOL_ALL].allocated)));
	else if (first_rec_is(a, "restore_checkpointing"))
		mr_buf_printf(b,
		              "Out of memory with activation checkpointing not running: the "
		              "forward that failed checkpointed nothing where earlier passes of "
		              "its layers did, and %s was live when the %s request failed.",
		              sz(b1, dv->pool[AN_POOL_ALL].allocated), sz(b2, o->requested));
	else if (ad_finding_of(a, "model_copies_kept"))
		mr_buf_printf(b,
		              "Out of memory with copies of the model kept: tensors made by "
		              "copy.deepcopy hold twice the model's parameters or more of the %s "
		              "live when the %s request failed.",
		              sz(b1, dv->pool[AN_POOL_ALL].allocated), sz(b2, o->requested));
	else if (first_rec_is(a, "release_failed_attempt"))
		mr_buf_printf(
		    b,
		    "Out of memory while retrying: %s of the %s live belongs to a forward pass "
		    "that an earlier out-of-memory error ended and that is still referenced.",
		    sz(b1, r->held_from_failed), sz(b2, dv->pool[AN_POOL_ALL].allocated));
	else if (ad_finding_of(a, "activations_held_over"))
		mr_buf_printf(
		    b,
		    "Out of memory with outputs kept across steps: %s of the previous step's "
		    "forward outputs were still alive when the next step began (%s live when "
		    "the %s request failed).",
		    sz(b1, r->held_activations), sz(b2, dv->pool[AN_POOL_ALL].allocated),
		    sz(b3, o->requested));
	else if (ad_finding_of(a, "graph_held_in_eval"))
		mr_buf_printf(
		    b,
		    "Out of memory in a no_grad pass run inside the training step: %s of the %s "
		    "live is a training forward's graph whose backward had not run when the %s "
		    "request failed.",
		    sz(b1, r->graph_held_at_oom), sz(b2, dv->pool[AN_POOL_ALL].allocated),
		    sz(b3, o->requested));
	else if (ad_finding_of(a, "nograd_outputs_held"))
		mr_buf_printf(b,
		              "Out of memory in training with %s of an evaluation's outputs live.",
		              sz(b1, r->nograd_held_at_oom));
	else if (ad_finding_of(a, "activations_carried"))
		mr_buf_printf(
		    b,
		    "Out of memory with an earlier iteration's activations still live: %s of the "
		    "%s live was saved by a previous step's forward and never freed when the %s "
		    "request failed.",
		    sz(b1, r->carried_activations), sz(b2, dv->pool[AN_POOL_ALL].allocated),
		    sz(b3, o->requested));
	else if (ad_state_bound(bcat, &dv->oom) && r->kind == AN_RUN_TRAINING)
		mr_buf_printf(
		    b,
		    "Out of memory from capacity: parameters, gradients and optimizer state "
		    "hold %s of %s live; activations are only %s, so a smaller batch cannot "
		    "help.",
		    sz(b1, state), sz(b2, live), sz(b3, bcat[AN_CAT_ACTIVATIONS]));
	else if (first_rec_is(a, "split_operation") &&
	         (a->oom.limit ? a->oom.requested > a->oom.limit
	                       : a->oom.requested / 2 >= dv->pool[AN_POOL_ALL].allocated))
		split_words(b, a, dv);
	else if (first_rec_is(a, "chunked_loss") && o->logits[0])
		mr_buf_printf(
		    b, "Out of memory from capacity at the logits: live tensors hold %s, and %s.",
		    sz(b1, dv->pool[AN_POOL_ALL].allocated), o->logits);
	else
		capacity_words(b, a, dv);
	return 0;
}

/* Writes the verdict of a run that did not run out of memory; returns the moment it speaks
 * of: the peak for the numbers of the peak (overhead, fragmentation, retries), else the
 * snapshot (growth shows in the end state). */
static ad_moment healthy_verdict(mr_buf *b, const ad_advice *a, const an_device *dv)
{
	char b1[32], b2[32], b3[32];
	const an_structure *r = &dv->run;
	const ad_finding *growth = ad_finding_of(a, "memory_growth");
	if (growth && growth->severity != AD_INFO && r->growth_stepped) {
		mr_buf_printf(b,
		              "Memory grows %s about every %zu iterations and is never released: "
		              "%s over %zu iterations.",
		              sz(b1, r->growth_step_bytes), r->growth_step_every,
		              sz(b2, r->growth_per_iteration * r->growth_increments),
		              r->growth_increments);
		return AD_MOMENT_SNAPSHOT;
	}
	if (growth && growth->severity != AD_INFO && r->growth_increments == 1) {
		mr_buf_printf(b,
		              "Memory grows %s per iteration and is never released: the trace's "
		              "last whole iteration added that much, beside what the lines that "
		              "added it kept from before the trace.",
		              sz(b1, r->growth_per_iteration));
		return AD_MOMENT_SNAPSHOT;
	}
	if (growth && growth->severity != AD_INFO) {
		mr_buf_printf(b,
		              "Memory grows %s per iteration and is never released: %s over %zu "
		              "iterations.",
		              sz(b1, r->growth_per_iteration),
		              sz(b2, r->growth_per_iteration * r->growth_increments),
		              r->growth_increments);
		return AD_MOMENT_SNAPSHOT;
	}
	if (ad_finding_of(a, "settings_conflict")) {
		mr_buf_printf(b,
		              "%s reserved for %s allocated at the peak: max_split_size_mb keeps "
		              "expandable segments from reusing freed memory.",
		              sz(b1, dv->peak_reserved), sz(b2, dv->peak_allocated));
		return AD_MOMENT_PEAK;
	}
	const ad_finding *frag = ad_finding_of(a, "high_fragmentation");
	if (frag && frag->severity != AD_INFO) {
		mr_buf_printf(b,
		              "Overhead at the peak: %d%% of reserved memory holds no tensor, %s "
		              "reserved for %s allocated, cut up by blocks of varying sizes.",
		              ad_pct(dv->peak_reserved - dv->peak_allocated, dv->peak_reserved),
		              sz(b1, dv->peak_reserved), sz(b2, dv->peak_allocated));
		return AD_MOMENT_PEAK;
	}
	if (ad_finding_of(a, "empty_cache_churn")) {
		mr_buf_printf(
		    b,
		    "No memory problem, but torch.cuda.empty_cache() inside the loop hands "
		    "%zu release%s (%s) back to CUDA that the next iteration asks for again.",
		    r->empty_cache_releases, r->empty_cache_releases == 1 ? "" : "s",
		    sz(b1, r->empty_cache_bytes));
		return AD_MOMENT_SNAPSHOT;
	}
	if (ad_finding_of(a, "oom_survived")) {
		mr_buf_printf(
		    b,
		    "No OOM ended the run: it caught the out-of-memory errors in its trace "
		    "and went on (%zu backward passes after the last); peak %s allocated "
		    "in %s reserved.",
		    dv->recovered_backwards, sz(b1, dv->peak_allocated), sz(b2, dv->peak_reserved));
		return AD_MOMENT_SNAPSHOT;
	}
	if (ad_finding_of(a, "allocator_retries")) {
		mr_buf_printf(b,
		              "No OOM, but only by retrying: cudaMalloc failed and the allocator "
		              "flushed its cache to continue; peak %s allocated in %s reserved.",
		              sz(b1, dv->peak_allocated), sz(b2, dv->peak_reserved));
		return AD_MOMENT_PEAK;
	}
	if (dv->trace_allocs && ad_finding_of(a, "peak_before_trace")) {
		mr_buf_printf(b,
		              "No OOM in the evidence; %s was reserved before the trace begins "
		              "and reserved memory peaked before it (the window peaks at %s "
		              "allocated): nothing urgent seen, but its overhead is unmeasured.",
		              sz(b1, dv->initial_reserved), sz(b2, dv->peak_allocated));
		return AD_MOMENT_PEAK;
	}
	if (dv->trace_allocs) {
		/* a wrapped ring buffer whose window is too short to compare iterations: the run
		 * went on longer than it shows, and whether its memory grew is not in it */
		int short_window = dv->truncated && !dv->run.growth_checked;
		mr_buf_printf(
		    b, "%s: peak %s allocated in %s reserved (%d%% overhead at the peak)%s.",
		    short_window ? "Healthy within the trace's window" : "Healthy",
		    sz(b1, dv->peak_allocated), sz(b2, dv->peak_reserved),
		    ad_pct(dv->peak_reserved - MR_MIN(dv->peak_allocated, dv->peak_reserved),
		           dv->peak_reserved),
		    short_window ? ", but the window holds too few iterations to show whether "
		                   "memory grows from one to the next"
		                 : "; nothing urgent to change");
		return AD_MOMENT_PEAK;
	}
	const an_pool *all = &dv->pool[AN_POOL_ALL];
	mr_buf_printf(b,
	              "No out-of-memory error is in the evidence, but no allocation history was "
	              "recorded that would show one: %s reserved, %s allocated, largest free "
	              "block %s.",
	              sz(b1, all->reserved), sz(b2, all->allocated), sz(b3, all->largest_free));
	return AD_MOMENT_SNAPSHOT;
}

int ad_write_verdict(ad_advice *a, const an_device *dv)
{
	mr_buf b = {0};
	a->verdict_moment = AD_MOMENT_SNAPSHOT;
	if (!dv)
		log_only_verdict(&b, &a->oom);
	else if (a->oom.present)
		a->oom.by_growth = oom_verdict(&b, a, dv);
	else
		a->verdict_moment = healthy_verdict(&b, a, dv);
	if (a->oom.present)
		a->verdict_moment = AD_MOMENT_OOM;
	if (b.failed) {
		mr_buf_free(&b);
		return -1;
	}
	a->verdict = b.data ? b.data : mr_strndup("", 0);
	return a->verdict ? 0 : -1;
}
