/* html_capacity.h: the capacity section of the HTML report: the plan's line, a plot of the
 * predicted peak reserved against the microbatch factor with the budget, and the tensors that
 * decide it (advise/plan.h).
 *
 * Ownership: appends to the page through the context. */
#ifndef MR_HTML_CAPACITY_H
#define MR_HTML_CAPACITY_H

#include "render/html_parts.h"

/* Nothing without a budget. */
void hr_capacity(hr_ctx *c);

#endif
