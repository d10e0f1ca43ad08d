/* html_maps.h: the segment maps (PNG bars per segment, aggregates for the rest) and the timelines
 * (inline SVG) of the HTML report.
 *
 * Ownership: appends to the page through the context. */
#ifndef MR_HTML_MAPS_H
#define MR_HTML_MAPS_H

#include "render/html_parts.h"

/* The "Segment maps" section: each segment of each device shown as a bar of its states,
 * largest first, capped; the rest aggregated by pool and size. */
void hr_segment_maps(hr_ctx *c);
/* The "Memory over the trace" section: one timeline per device with a trace. */
void hr_timelines(hr_ctx *c);

#endif
