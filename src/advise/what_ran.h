/* what_ran.h: the one line every report says about the run itself: what kind of run it was
 * and how that was told, the iterations seen, and the techniques and frameworks that were on.
 *
 * Ownership: allocates a->what_ran, which ad_free releases. */
#ifndef MR_WHAT_RAN_H
#define MR_WHAT_RAN_H

#include "advise/advice.h"
#include "analyze/structure.h"

/* Writes a->what_ran ("" without a trace to read it from; run may be NULL). Returns 0, -1 when
 * memory ran out. */
int ad_write_what_ran(ad_advice *a, const an_structure *run);

#endif
