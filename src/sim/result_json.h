/* result_json.h: a replay's result as JSON, for `memreport simulate` (schema memreport-sim/1).
 *
 * Ownership: appends to a caller-owned mr_buf. */
#ifndef MR_SIM_RESULT_JSON_H
#define MR_SIM_RESULT_JSON_H

#include "base/buf.h"
#include "sim/replay.h"

/* JSON: the whole result as one object; or only the "oom" / "first_divergence" values
 * (null when absent). */
void sim_result_json(const sim_result *r, mr_buf *out);
void sim_oom_json(const sim_result *r, mr_buf *out);
void sim_divergence_json(const sim_result *r, mr_buf *out);

#endif
