/* plan.c: the largest microbatch factor that fits a budget, by replaying the scaled trace. */
#include "advise/plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/casts.h"
#include "base/addrmap.h"
#include "base/mem.h"
#include "base/units.h"
#include "sim/config.h"
#include "sim/replay.h"

/* The search stops when the factors that fit and fail are this close (0.5%), or after this
 * many replays: each is a whole pass over the trace. */
#define PLAN_PRECISION 1.005
#define PLAN_MAX_FACTOR 64.0
/* A plan keeps its replays under this share of the budget. A fresh process at the edge
 * reserves more than the replay of its scaled trace says (measured up to 7% more for a
 * Hugging Face Llama trained with AdamW: requests that do not scale exactly with the batch,
 * workspaces a larger problem asks for), so a factor that fits only at the very edge fails. */
#define PLAN_HEADROOM 0.95
enum { PLAN_MAX_REPLAYS = AD_PLAN_CURVE };

const char *ad_plan_method_name(ad_plan_method m)
{
	return m == AD_PLAN_SCALED_REPLAY ? "scaled_replay"
	       : m == AD_PLAN_UPPER_BOUND ? "upper_bound"
	                                  : "none";
}

typedef struct {
	const md_snapshot *s;
	const an_device *dv;
	const md_device *md;
	const an_stack_info *info;
	uint8_t *scales; /* per event of the trace: 1 when its request scales with the batch */
	size_t first;    /* the first event of the first iteration */
	size_t last;     /* the first event of the iteration the replayed events end in */
	size_t n;        /* the events replayed: the trace up to the end of the peak's iteration */
	int died;        /* those events end with the recorded OOM */
	md_event *scratch; /* the replayed copy, scaled */
	sim_config cfg;
	uint64_t limit;       /* the replays' limit: the budget, less headroom for a plan */
	int flushes;          /* a fit may free the cache to retry (else it must stay under) */
	size_t lo_peak;       /* the event of the peak allocated in the replay at the answer */
	uint64_t lo_reserved; /* and its peak reserved */
	ad_capacity *out;
} plan_ctx;

static uint64_t block_size(uint64_t requested)
{
	return requested < 512 ? 512 : (requested + 511) / 512 * 512;
}

static int category(const plan_ctx *p, uint32_t stack)
{
	return an_stack_category(p->info, stack < p->s->stack_count ? stack : 0, AN_CAT_GRADIENTS);
}

static uint32_t flags(const plan_ctx *p, uint32_t stack)
{
	return stack < p->s->stack_count ? p->info[stack].flags : 0;
}

/* The first event of the run's first iteration: its recorded start, else (a run that died in
 * its first forward) the first allocation inside the model. SIZE_MAX when neither exists. */
static size_t first_iteration(const plan_ctx *p)
{
	if (p->dv->run.start_count)
		return p->dv->run.starts[0];
	for (size_t i = 0; i < p->md->event_count; i++)
		if (p->md->events[i].action == MD_ACT_ALLOC &&
		    (flags(p, p->md->events[i].stack) & AN_SF_MODULE_CALL))
			return i;
	return SIZE_MAX;
}

/* Which requests scale with the microbatch: allocated in an iteration, freed again, and not
 * parameters, optimizer state, a parameter's gradient (the gradients the optimizer or
 * zero_grad frees, or, where frees carry no stack, a gradient the size of a parameter) or a
 * weight's autocast copy. */
static mr_status classify(plan_ctx *p, mr_error *err)
{
	const md_event *ev = p->md->events;
	size_t count = p->md->event_count;
	am_map last = {0}, param_sizes = {0};
	an_casts k = {0};
	mr_status st = MR_OK;
	uint64_t a, v;
	int free_stacks = 0;
	const an_structure *run = &p->dv->run;
	size_t iter = 0; /* the next iteration start to reach */
	p->scales = mr_alloc_array(count ? count : 1, 1);
	if (!p->scales)
		goto oom;
	if ((st = an_casts_find(p->s, p->md, p->info, p->first,
	                        run->start_count > 1 ? run->starts[1] : count, 0, &k, err)))
		goto done;
	for (size_t i = 0; i < count; i++) {
		free_stacks |= ev[i].action == MD_ACT_FREE_REQUESTED && ev[i].stack != MD_NO_STACK;
		if (ev[i].action == MD_ACT_ALLOC && category(p, ev[i].stack) == AN_CAT_PARAMETERS &&
		    am_put(&param_sizes, block_size(ev[i].size), 1))
			goto oom;
	}
	for (size_t i = 0; i < count; i++) {
		const md_event *e = &ev[i];
		int cat = category(p, e->stack);
		int candidate =
		    i >= p->first && cat != AN_CAT_PARAMETERS && cat != AN_CAT_OPTIMIZER;
		while (iter < run->start_count && run->starts[iter] <= i) {
			an_casts_next_iteration(&k); /* a new iteration's copies */
			iter++;
		}
		if (candidate && k.on && e->action == MD_ACT_ALLOC &&
		    an_casts_take(&k, p->s, p->info, e))
			candidate = 0;
		if (e->action == MD_ACT_ALLOC) {
			if (am_put(&last, e->addr, i))
				goto oom;
			p->scales[i] = candidate ? 2 : 0; /* 2: until its free is seen */
		} else if (e->action == MD_ACT_OOM) {
			p->scales[i] = (uint8_t)candidate;
		} else if (e->action == MD_ACT_FREE_REQUESTED && am_take(&last, e->addr, &a) &&
		           p->scales[a] == 2) {
			uint32_t f = flags(p, e->stack);
			int grad_of_param =
			    free_stacks
			        ? (f & AN_SF_ZERO_GRAD) ||
			              ((f & AN_SF_IN_OPTIMIZER) && !(f & AN_SF_MODULE_CALL) &&
			               !(f & (AN_SF_BACKWARD | AN_SF_ENGINE_THREAD)))
			        : category(p, ev[a].stack) == AN_CAT_GRADIENTS &&
			              am_get(&param_sizes, block_size(ev[a].size), &v);
			p->scales[a] = !grad_of_param;
		}
	}
	/* Never freed: it lives across iterations, unless the run died in the middle of the
	 * iteration that allocated it, like the activations the backward never came to free. */
	for (size_t i = 0; i < count; i++)
		if (p->scales[i] == 2)
			p->scales[i] = p->died && i >= p->last &&
			               !(category(p, ev[i].stack) == AN_CAT_GRADIENTS &&
			                 am_get(&param_sizes, block_size(ev[i].size), &v));
	goto done;
oom:
	st = mr_oom(err);
done:
	am_free(&last);
	am_free(&param_sizes);
	an_casts_free(&k);
	return st;
}

/* Keeps the AD_PLAN_DECIDING sites with the most bytes, most first. */
static void keep_deciding(ad_capacity *out, uint32_t stack, uint64_t bytes, uint64_t blocks)
{
	size_t j = out->deciding_count;
	while (j > 0 && out->deciding_bytes[j - 1] < bytes)
		j--;
	if (j >= AD_PLAN_DECIDING)
		return;
	size_t last = MR_MIN(out->deciding_count, (size_t)AD_PLAN_DECIDING - 1);
	memmove(&out->deciding_bytes[j + 1], &out->deciding_bytes[j],
	        (last - j) * sizeof *out->deciding_bytes);
	memmove(&out->deciding_stack[j + 1], &out->deciding_stack[j],
	        (last - j) * sizeof *out->deciding_stack);
	memmove(&out->deciding_blocks[j + 1], &out->deciding_blocks[j],
	        (last - j) * sizeof *out->deciding_blocks);
	out->deciding_bytes[j] = bytes;
	out->deciding_stack[j] = stack;
	out->deciding_blocks[j] = blocks;
	if (out->deciding_count < AD_PLAN_DECIDING)
		out->deciding_count++;
}

/* The bytes live after event `at` that scale and that do not; deciding: instead, the sites
 * whose live blocks that scale hold the most, as they would be at factor f. */
static mr_status live_at(plan_ctx *p, size_t at, double f, int deciding, mr_error *err)
{
	const md_event *ev = p->md->events;
	am_map live = {0};                /* address -> event index of its allocation */
	am_map bytes = {0}, blocks = {0}; /* stack -> what it holds that scales */
	uint64_t a, v;
	ad_capacity *out = p->out;
	mr_status st = MR_OK;
	for (size_t i = 0; i <= at && i < p->md->event_count; i++) {
		if (ev[i].action == MD_ACT_ALLOC && am_put(&live, ev[i].addr, i))
			goto oom;
		if (ev[i].action == MD_ACT_FREE_REQUESTED)
			am_take(&live, ev[i].addr, &a);
	}
	if (!deciding)
		out->fixed_bytes = p->dv->initial_allocated;
	for (size_t k = 0; k < live.cap; k++) {
		if (!live.slots[k].key)
			continue;
		const md_event *e = &ev[live.slots[k].val];
		int scales = p->scales[live.slots[k].val] != 0;
		uint64_t b = block_size(scales ? (uint64_t)ceil((double)e->size * f) : e->size);
		if (!deciding)
			*(scales ? &out->scaling_bytes : &out->fixed_bytes) += b;
		else if (scales &&
		         (am_put(&bytes, e->stack, (am_get(&bytes, e->stack, &v) ? v : 0) + b) ||
		          am_put(&blocks, e->stack, (am_get(&blocks, e->stack, &v) ? v : 0) + 1)))
			goto oom;
	}
	for (size_t k = 0; k < bytes.cap; k++)
		if (bytes.slots[k].key && am_get(&blocks, bytes.slots[k].key - 1, &v))
			keep_deciding(out, (uint32_t)(bytes.slots[k].key - 1), bytes.slots[k].val,
			              v);
	goto done;
oom:
	st = mr_oom(err);
done:
	am_free(&live);
	am_free(&bytes);
	am_free(&blocks);
	return st;
}

/* Replays the first n events with every scaling request times f, under p->limit. *fits: no
 * OOM; *peak: the replay's peak allocated event. */
static mr_status replay_at(plan_ctx *p, double f, int *fits, size_t *peak, mr_error *err)
{
	const md_event *ev = p->md->events;
	for (size_t i = 0; i < p->n; i++) {
		p->scratch[i] = ev[i];
		if (p->scales[i])
			p->scratch[i].size = (uint64_t)ceil((double)ev[i].size * f);
	}
	md_device copy = {p->md->id, p->scratch, p->n, 1, p->md->times, p->md->first};
	sim_result r;
	/* without flushes: replayed with no limit, the cache never grows past it */
	mr_status st = sim_replay_trace(p->s, &copy, &p->cfg, p->flushes ? p->limit : 0, &r, err);
	ad_capacity *out = p->out;
	if (!st) {
		*fits = r.oom_count == 0 && (p->flushes || r.peak_reserved <= p->limit);
		*peak = r.peak_allocated_event;
		if (*fits)
			p->lo_reserved =
			    r.peak_reserved; /* the search keeps the last fit it takes */
		/* the curve, in the order of the factors */
		size_t j = out->curve_count;
		while (j > 0 && out->curve_factor[j - 1] > f)
			j--;
		if (out->curve_count < AD_PLAN_CURVE) {
			memmove(&out->curve_factor[j + 1], &out->curve_factor[j],
			        (out->curve_count - j) * sizeof *out->curve_factor);
			memmove(&out->curve_peak_reserved[j + 1], &out->curve_peak_reserved[j],
			        (out->curve_count - j) * sizeof *out->curve_peak_reserved);
			memmove(&out->curve_oom[j + 1], &out->curve_oom[j],
			        (out->curve_count - j) * sizeof *out->curve_oom);
			out->curve_factor[j] = f;
			out->curve_peak_reserved[j] = r.peak_reserved;
			out->curve_oom[j] = !*fits;
			out->curve_count++;
		}
	}
	sim_result_free(&r);
	return st;
}

/* The trace as recorded, replayed: the model must reproduce it before any scaled replay
 * means something. */
static mr_status validate(plan_ctx *p, int *ok, mr_error *err)
{
	md_device copy = {p->md->id, p->md->events, p->n, 1, p->md->times, p->md->first};
	sim_result r;
	mr_status st = sim_replay_trace(p->s, &copy, &p->cfg, 0, &r, err);
	*ok = !st && r.matches_recording;
	sim_result_free(&r);
	return st;
}

/* The largest factor that fits, searched upwards: fits are not monotonic near the edge (a
 * larger request can land in a cached block a smaller one split), so the answer is the last
 * factor that fits below the first that does not, found in steps of 10% from below the
 * estimate (budget - fixed) / scaling, then refined by halving that step. Sets *lo and *hi (hi:
 * the first factor found not to fit, the cap when none was). */
static mr_status search(plan_ctx *p, double cap, double *lo, double *hi, mr_error *err)
{
	const ad_capacity *out = p->out;
	double est = out->scaling_bytes && p->limit > out->fixed_bytes
	                 ? (double)(p->limit - out->fixed_bytes) / (double)out->scaling_bytes
	                 : 1.0;
	double f = MR_MIN(MR_MAX(est * 0.8, 0.01), cap / 1.1);
	int fits = 0, replays = 0;
	size_t peak = 0;
	mr_status st = MR_OK;
	*lo = 0;
	*hi = cap;
	/* down until something fits */
	while (replays++ < PLAN_MAX_REPLAYS && !(st = replay_at(p, f, &fits, &peak, err))) {
		if (fits || f < 0.01)
			break;
		*hi = f;
		f /= 1.25;
	}
	if (st || !fits)
		return st;
	*lo = f;
	p->lo_peak = peak;
	/* up in steps of 10% to the first factor that does not fit, then halve the step */
	while (*hi / *lo > PLAN_PRECISION && replays++ < PLAN_MAX_REPLAYS) {
		int bisect = *hi < cap || *lo * 1.1 >= cap;
		f = bisect ? sqrt(*lo * *hi) : *lo * 1.1;
		if ((st = replay_at(p, f, &fits, &peak, err)))
			break;
		if (!fits) {
			*hi = f;
			continue;
		}
		*lo = f;
		p->lo_peak = peak;
	}
	return st;
}

/* The events to replay: through the end of the iteration holding the recorded peak (an OOM
 * run: through its OOM). Returns 0 when the trace holds no iteration to plan from. */
static int choose_prefix(plan_ctx *p)
{
	const an_structure *r = &p->dv->run;
	const an_oom *o = &p->dv->oom;
	if (o->present) {
		p->n = o->event + 1;
		p->died = 1;
	} else {
		size_t peak = p->dv->peak_allocated_event, end = p->md->event_count;
		for (size_t k = 0; k < r->start_count; k++)
			if (r->starts[k] > peak) {
				end = r->starts[k];
				break;
			}
		p->n = end;
	}
	p->out->events_replayed = p->n;
	p->last = p->first;
	for (size_t k = 0; k < r->start_count; k++)
		if (r->starts[k] < p->n) {
			p->out->iterations_replayed++;
			p->last = MR_MAX(p->last, r->starts[k]);
		}
	return p->n > p->first;
}

static int preconditions(plan_ctx *p, uint64_t budget)
{
	ad_capacity *out = p->out;
	if (!p->md || !p->dv->has_trace)
		snprintf(out->why, sizeof out->why, "no allocation trace to replay");
	else if (p->dv->truncated)
		snprintf(
		    out->why, sizeof out->why,
		    "the trace does not reach back to the start of the run (record it from the "
		    "start, with max_entries large enough for one step)");
	else if (!budget)
		snprintf(
		    out->why, sizeof out->why,
		    "no budget: give --budget SIZE (the evidence says no memory fraction or card "
		    "size)");
	else if (p->dv->oom.present && p->dv->run.growth_in_tail)
		snprintf(out->why, sizeof out->why,
		         "the memory ran out in the loop after training (an evaluation), which "
		         "grew with what each of its batches kept; the training microbatch is not "
		         "what to change");
	else if ((p->first = first_iteration(p)) == SIZE_MAX || !choose_prefix(p))
		snprintf(out->why, sizeof out->why,
		         "the trace holds no iteration of a training or inference loop to scale");
	else
		return 1;
	return 0;
}

/* Where a run that died was in its last step: the phase of the failed request, and how far
 * through the step it was, against the allocations of the step before. */
static void how_far(const plan_ctx *p)
{
	ad_capacity *out = p->out;
	const an_structure *r = &p->dv->run;
	uint32_t f = flags(p, p->md->events[p->n - 1].stack);
	size_t before = 0, now = 0;
	uint32_t seen = 0, near = 0; /* what the dying step had done before; its latest stack */
	for (size_t i = p->last; i + 1 < p->n; i++) {
		uint32_t g = flags(p, p->md->events[i].stack);
		seen |= g;
		near = g ? g : near;
	}
	/* A request with no Python frame at all, right after autograd's engine thread ran
	 * Python (a checkpoint's recomputation, a hook): the engine's own work, the backward. */
	if (!f && (near & AN_SF_ENGINE_THREAD))
		f = near & (AN_SF_ENGINE_THREAD | AN_SF_BACKWARD);
	/* code after the forward is a loss only where a backward follows it */
	int backward_follows = r->kind == AN_RUN_TRAINING || r->kind == AN_RUN_UNKNOWN;
	out->died_in = f & AN_SF_OPTIMIZER                          ? "the optimizer step"
	               : f & (AN_SF_BACKWARD | AN_SF_ENGINE_THREAD) ? "the backward"
	               : f & AN_SF_LOSS                             ? "the loss"
	               : f & AN_SF_MODULE_CALL                      ? "the forward"
	               : (f & AN_SF_PYTHON) && (seen & AN_SF_MODULE_CALL) &&
	                       !(seen & (AN_SF_BACKWARD | AN_SF_ENGINE_THREAD))
	                   ? (backward_follows ? "the loss (after the forward, before the backward)"
	                                       : "the code after the forward")
	                   : "";
	for (size_t k = 1; k < r->start_count; k++)
		if (r->starts[k] == p->last) {
			for (size_t i = r->starts[k - 1]; i < p->last; i++)
				before += p->md->events[i].action == MD_ACT_ALLOC;
			for (size_t i = p->last; i < p->n; i++)
				now += p->md->events[i].action == MD_ACT_ALLOC;
		}
	out->step_reached = before ? MR_MIN((double)now / (double)before, 1.0) : 0;
}

mr_status ad_plan(const ld_evidence *ev, const an_device *dv, const an_stack_info *info,
                  uint64_t budget, int given, ad_capacity *out, mr_error *err)
{
	memset(out, 0, sizeof *out);
	plan_ctx p = {.s = &ev->snap,
	              .dv = dv,
	              .md = md_find_device(&ev->snap, dv->device),
	              .info = info,
	              .out = out};
	mr_status st = MR_OK;
	double lo, hi;
	out->budget = budget;
	out->budget_given = given;
	if (!preconditions(&p, budget))
		return MR_OK;
	sim_config_from_settings(&ev->snap, &p.cfg);
	p.scratch = mr_alloc_array(p.n, sizeof *p.scratch);
	if (!p.scratch)
		return mr_oom(err);
	/* A bound must not be tighter than the real limit: any replay that survives counts. A plan
	 * keeps headroom, and first asks for a microbatch that fits without the allocator freeing
	 * its cache to retry a cudaMalloc: a fit that depends on such flushes turns on where
	 * blocks happen to land, which a scaled trace cannot know; only when even the smallest
	 * microbatch needs them (a run whose cache grows without bound) does it settle for one
	 * that survives them. */
	p.limit = p.died ? budget : (uint64_t)((double)budget * PLAN_HEADROOM);
	p.flushes = p.died;
	out->limit = p.limit;
	out->recorded_peak_reserved = dv->peak_reserved;
	/* The recorded replay before the diagnosis (advise/replay.h) reproduced the whole trace
	 * without a limit: it reproduces its first part too. */
	int valid = dv->peak_exact && !dv->peak_exact_limit;
	if (!valid && (st = validate(&p, &valid, err)))
		goto done;
	if (!valid) {
		snprintf(
		    out->why, sizeof out->why,
		    "the allocator model does not reproduce this recording, so a scaled replay "
		    "would mean nothing");
		goto done;
	}
	if ((st = classify(&p, err)) ||
	    (st = live_at(&p, MR_MIN(dv->peak_allocated_event, p.n - 1), 1.0, 0, err)) ||
	    (st = search(&p, p.died ? 1.0 : PLAN_MAX_FACTOR, &lo, &hi, err)))
		goto done;
	if (lo <= 0 && !p.died) {
		p.flushes = 1;
		out->curve_count = 0;
		if ((st = search(&p, PLAN_MAX_FACTOR, &lo, &hi, err)))
			goto done;
	}
	out->with_flushes = p.flushes && !p.died && lo > 0;
	if ((st = live_at(&p, lo > 0 ? p.lo_peak : p.n - 1, lo > 0 ? lo : 1.0, 1, err)))
		goto done;
	/* A run that died has not shown the whole of the step it died in: no microbatch at or
	 * above the first factor that failed fits, a bound, not a plan. */
	out->method = p.died ? AD_PLAN_UPPER_BOUND : AD_PLAN_SCALED_REPLAY;
	out->max_factor = p.died && lo > 0 ? hi : lo;
	out->predicted_peak_reserved = p.died ? 0 : p.lo_reserved;
	out->at_cap = !p.died && hi >= PLAN_MAX_FACTOR;
	if (p.died)
		how_far(&p);
	if (lo <= 0)
		snprintf(out->why, sizeof out->why,
		         "what does not scale with the microbatch leaves no room for it in %s",
		         p.died ? "the budget, even at 1% of this one" : "the budget");
done:
	free(p.scratch);
	free(p.scales);
	return st;
}
