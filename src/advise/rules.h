/* rules.h: the diagnosis of a run: which device, why it ran out of memory, findings and ranked
 * recommendations, from the evidence and its analysis. The order follows the guides users
 * learn from (rules.c); every rule reads numbers, none reads a file name.
 *
 * Ownership: fills a caller-owned ad_advice (advice.h) that ad_free releases. */
#ifndef MR_RULES_H
#define MR_RULES_H

#include "advise/advice.h"
#include "analyze/analyze.h"
#include "analyze/moments.h"
#include "base/error.h"
#include "load/load.h"

/* Diagnoses the run: the device asked for (device >= 0), else the one that ran out of memory,
 * else the one with the most reserved memory; without a snapshot (an NULL or empty), the last
 * OOM message of the logs. moments: the devices' moments, parallel to an->devices (NULL: none
 * read). budget: the bytes to plan the microbatch for (--budget; 0: the cap the evidence
 * shows, if any). On failure *out is left freed. */
mr_status ad_advise(const ld_evidence *ev, const an_result *an, const an_moments *moments,
                    int device, uint64_t budget, ad_advice *out, mr_error *err);

#endif
