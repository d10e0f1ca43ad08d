/* plan.h: how large a microbatch fits a memory budget, planned from one recorded run.
 *
 * The recorded trace's allocations are split into what does not depend on the microbatch
 * (parameters, their gradients, optimizer state, buffers and workspaces: whatever lives across
 * iterations or is freed by the optimizer) and what scales with it (the activations, the loss
 * and its logits, their gradients: what each iteration allocates and frees again). The trace is
 * then replayed through the allocator model (sim/) with the scaling requests multiplied by a
 * factor f, under the budget, rounding and fragmentation included, and the largest f that does
 * not run out of memory is searched for. A run that died is never promised a factor at or above
 * the one it died at: the plan is then an upper bound from the part of the step that ran.
 *
 * Ownership: ad_capacity is a plain value. */
#ifndef MR_PLAN_H
#define MR_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "analyze/analyze.h"
#include "base/error.h"
#include "load/load.h"

typedef enum {
	AD_PLAN_NONE,          /* no plan: `why` says what is missing */
	AD_PLAN_SCALED_REPLAY, /* the largest factor the scaled replay fits in the budget */
	AD_PLAN_UPPER_BOUND,   /* the run died before a full step: no factor at or above fits */
} ad_plan_method;

enum { AD_PLAN_CURVE = 24, AD_PLAN_DECIDING = 3 };

typedef struct {
	ad_plan_method method;
	char why[200];          /* without a plan: what would make one */
	uint64_t budget;        /* bytes the run may reserve; 0 unknown */
	int budget_given;       /* --budget, not read from the evidence */
	uint64_t fixed_bytes;   /* live at the recorded peak, not depending on the microbatch */
	uint64_t scaling_bytes; /* live at the recorded peak, scaling with it */
	double max_factor;      /* SCALED_REPLAY: the largest factor that fits; UPPER_BOUND: no
	                           microbatch at or above this factor fits (a bound, not a promise);
	                           0 when nothing fits (then `why` says so) */
	int at_cap;             /* SCALED_REPLAY: it fits up to the search's cap (64x) */
	int with_flushes;       /* SCALED_REPLAY: no microbatch fits without the allocator freeing
	                           its cache to retry; max_factor survives such flushes */
	uint64_t predicted_peak_reserved; /* at max_factor (SCALED_REPLAY) */
	uint64_t recorded_peak_reserved;  /* the run as recorded (factor 1) */
	uint64_t limit;                   /* the replays' limit: the budget, less headroom */
	/* UPPER_BOUND: where the run died: "the forward", "the loss", "the backward", "the
	 * optimizer step" ("" unknown), and the share of the step before's allocations its last
	 * step had made (0: no step before to compare with). */
	const char *died_in;
	double step_reached;
	size_t events_replayed, iterations_replayed;
	/* The replays, in the order of their factors: the plot of predicted peak against f. */
	double curve_factor[AD_PLAN_CURVE];
	uint64_t curve_peak_reserved[AD_PLAN_CURVE];
	int curve_oom[AD_PLAN_CURVE];
	size_t curve_count;
	/* What decides the answer: the stacks whose live allocations that scale hold the most at
	 * the predicted peak (at the OOM, for a run that died), their bytes and blocks then. */
	uint32_t deciding_stack[AD_PLAN_DECIDING];
	uint64_t deciding_bytes[AD_PLAN_DECIDING];
	uint64_t deciding_blocks[AD_PLAN_DECIDING];
	size_t deciding_count;
} ad_capacity;

const char *ad_plan_method_name(ad_plan_method m); /* "scaled_replay", "upper_bound", "none" */

/* Plans device dv of the evidence (the diagnosed one; info classifies the snapshot's stacks)
 * under `budget` bytes (0: no plan); given: it came from --budget, not from the evidence. */
mr_status ad_plan(const ld_evidence *ev, const an_device *dv, const an_stack_info *info,
                  uint64_t budget, int given, ad_capacity *out, mr_error *err);

#endif
