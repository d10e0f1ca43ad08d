/* plan_line.h: the one line every report says about capacity (plan.h): how large a microbatch
 * fits the budget, or what bounds it for a run that died, or why there is no plan.
 *
 * Ownership: allocates a->capacity_line ("" when there is no budget), which ad_free releases. */
#ifndef MR_PLAN_LINE_H
#define MR_PLAN_LINE_H

#include "advise/advice.h"
#include "analyze/frames.h"
#include "analyze/structure.h"

/* From a->capacity. s and info name the deciding tensors (either may be NULL); run says
 * whether the microbatch is one of training or of inference (may be NULL). Returns 0, -1 when
 * memory ran out. */
int ad_write_capacity_line(ad_advice *a, const md_snapshot *s, const an_stack_info *info,
                           const an_structure *run);

#endif
