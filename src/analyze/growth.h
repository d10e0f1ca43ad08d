/* growth.h: growth across iterations (an_growth of analyze.h). An iteration is the span
 * between two occurrences of a regularly repeating allocation site, or between optimizer-step
 * annotations; what each middle iteration left alive at the snapshot is its growth.
 *
 * Ownership: fills dv->growth, whose site array an_free releases. */
#ifndef MR_GROWTH_H
#define MR_GROWTH_H

#include "analyze/analyze.h"
#include "base/error.h"
#include "model/model.h"

mr_status an_growth_of(const md_snapshot *s, const md_device *md, an_device *dv, mr_error *err);

#endif
