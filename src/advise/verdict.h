/* verdict.h: the verdict: one sentence with its key number, from the diagnosis already made
 * (the OOM cause, the findings) and the diagnosed device's numbers.
 *
 * Ownership: the verdict is allocated into a->verdict, which ad_free releases. */
#ifndef MR_VERDICT_H
#define MR_VERDICT_H

#include "advise/advice.h"
#include "analyze/analyze.h"

/* Writes a->verdict: every run gets a sentence, whatever its evidence (the renderers have no
 * other). dv is the diagnosed device, NULL without a snapshot. Returns 0, -1 when memory ran
 * out. */
int ad_write_verdict(ad_advice *a, const an_device *dv);

#endif
