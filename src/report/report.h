/* report.h: one run, carried through the whole pipeline: its evidence (load/), the analysis
 * (analyze/), the recorded replays (advise/replay.h) and the diagnosis (advise/rules.h). This is
 * what every renderer reads.
 *
 * The pipeline is rp_build, in one place: load is done by the caller (ld_load or
 * ld_load_buffers); then analyse, replay the recorded settings (exact peaks) on one thread
 * while the other finishes the analysis and reads the allocations and the moments (the state
 * at the peak, the OOM, the iteration ends, the snapshot), settle the moments on the replay's
 * peaks (read again where the peak moved), advise, replay the recommended settings. Rendering
 * follows (render/).
 *
 * Ownership: an rp_report owns everything it holds, its evidence included; rp_free releases it
 * (and is safe on a zeroed or failed rp_report). */
#ifndef MR_REPORT_H
#define MR_REPORT_H

#include <stddef.h>

#include "advise/advice.h"
#include "analyze/allocs.h"
#include "analyze/analyze.h"
#include "analyze/moments.h"
#include "base/error.h"
#include "load/load.h"

typedef struct {
	ld_evidence ev; /* the inputs */
	an_result an;   /* per device of the snapshot (empty without one) */
	/* Per device of `an`: the recorded settings replayed (conf "" when not run: no
	 * trace). NULL without a snapshot. */
	ad_replay *recorded;
	/* Per device of `an`: its allocations as trace intervals and the state at its marked
	 * moments (analyze/moments.h), as they are after the replay has settled the peak. NULL
	 * without a snapshot. */
	an_allocs *allocs;
	an_moments *moments;
	ad_advice advice; /* always made, whatever the inputs */
} rp_report;

/* What the pipeline is asked for: device >= 0 diagnoses that device (--device), -1 the one
 * that ran out of memory (else the one with most reserved); budget plans the microbatch for
 * that many bytes (--budget; 0: the cap the evidence shows). */
typedef struct {
	int device;
	uint64_t budget;
} rp_params;

/* Runs the pipeline over the loaded evidence *ev, which the report takes over (*ev is left
 * zeroed, whatever happens). On failure *out is left freed. */
mr_status rp_build(rp_report *out, ld_evidence *ev, const rp_params *params, mr_error *err);
void rp_free(rp_report *r);

/* The moments and allocations of analysed device dv of r (NULL when there are none). */
const an_moments *rp_moments(const rp_report *r, const an_device *dv);
const an_allocs *rp_allocs(const rp_report *r, const an_device *dv);

/* The moment of device dv that the verdict speaks of (advice.verdict_moment): its OOM, its peak
 * or its snapshot, the snapshot when dv has no such moment; AN_NO_MOMENT without moments. */
size_t rp_verdict_moment(const rp_report *r, const an_device *dv);

#endif
