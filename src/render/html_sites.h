/* html_sites.h: the allocation sites of the HTML report: live blocks grouped by the user's own
 * line (analyze/sites.h), at the report's moments, with their stacks.
 *
 * Ownership: appends to the page through the context. */
#ifndef MR_HTML_SITES_H
#define MR_HTML_SITES_H

#include "render/html_parts.h"

/* The "Where the live memory was allocated" section: at the verdict's moment first, then at
 * the OOM, the peak and the snapshot (each moment once). */
void hr_sites(hr_ctx *c);

#endif
