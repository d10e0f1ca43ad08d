/* replay.h: the recorded trace through the allocator model (sim/replay.h), for the report.
 * Every trace is replayed, whatever its length (0.1 us an event); a truncated one from the
 * state its window starts in (sim/initial.h). The jobs of one call run in parallel
 * (base/pool.h).
 *
 * Ownership: ad_replay_recorded allocates the per-device array it returns (free it with
 * free()); ad_replay_settings writes into the caller's ad_advice. */
#ifndef MR_ADVISE_REPLAY_H
#define MR_ADVISE_REPLAY_H

#include "advise/advice.h"
#include "analyze/analyze.h"
#include "base/error.h"
#include "load/load.h"

/* Replays each device's trace under its recorded settings, before the diagnosis: *recorded
 * gets one ad_replay per device of an (conf "" when not run: no trace). It reads only what
 * an_analyze_base gives a device, so an_analyze_rest may run beside it. */
mr_status ad_replay_recorded(const ld_evidence *ev, const an_result *an, ad_replay **recorded,
                             mr_error *err);
/* Then, where a replay reproduced its trace, the device's peaks in an become the replay's,
 * exact (peak_exact): of a truncated trace, exact within its window. */
void ad_replay_apply(an_result *an, const ad_replay *recorded);

/* After ad_advise: replays the diagnosed device's trace under each recommended allocator
 * setting, quotes the result in the recommendation's reason, and withdraws (as a finding) a
 * setting the replay shows to fail or to cost memory. recorded is ad_replay_recorded's array
 * (may be NULL). */
mr_status ad_replay_settings(const ld_evidence *ev, const an_result *an, const ad_replay *recorded,
                             ad_advice *a, mr_error *err);

#endif
