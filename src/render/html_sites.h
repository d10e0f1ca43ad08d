/* html_sites.h: the allocation sites of the HTML report: live blocks grouped by their site frame,
 * with their stacks.
 *
 * Ownership: appends to the page through the context. */
#ifndef MR_HTML_SITES_H
#define MR_HTML_SITES_H

#include "render/html_parts.h"

/* The "Where the live memory was allocated" section, at the snapshot (or OOM) moment and at
 * the trace's peak. */
void hr_sites(hr_ctx *c, const hr_oom *oom);

#endif
