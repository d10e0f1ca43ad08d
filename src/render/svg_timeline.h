/* svg_timeline.h: the trace's allocated and reserved bytes over time, as inline SVG.
 *
 * Drawn from the analysis' down-sampled timeline (an_point): each bucket keeps the minimum and
 * maximum of its events, so a peak that lasted one event still reaches the top of the chart.
 * The x axis is seconds since the first event when every event has time_us, else the event
 * index. The peak of allocated bytes and the last OOM are marked.
 *
 * Ownership: appends to a caller-owned mr_buf; allocates nothing that outlives the call.
 * Output is deterministic (fixed number formatting). Nothing from the snapshot is written
 * except numbers. */
#ifndef MR_SVG_TIMELINE_H
#define MR_SVG_TIMELINE_H

#include "analyze/analyze.h"
#include "base/buf.h"
#include "base/error.h"
#include "model/model.h"

/* Appends an <svg> element for dv; appends nothing when dv has no timeline. */
mr_status st_render(const md_snapshot *s, const an_device *dv, mr_buf *out, mr_error *err);

/* Appends an <svg> of two runs' timelines on one pair of axes, by event index: allocated and
 * reserved of `before` and of `after`, each with its peak. Nothing when either has no
 * timeline. */
mr_status st_render_overlay(const an_device *before, const an_device *after, mr_buf *out,
                            mr_error *err);

/* Whether st_render would draw the x axis in seconds (every event has a time). */
int st_uses_time(const md_snapshot *s, const an_device *dv);

#endif
