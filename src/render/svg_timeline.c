/* svg_timeline.c: allocated and reserved over the trace, as inline SVG. */
#include "render/svg_timeline.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/units.h"

enum { ST_W = 1000, ST_H = 280, ST_LEFT = 74, ST_RIGHT = 16, ST_TOP = 18, ST_BOTTOM = 36 };

typedef struct {
	const an_device *dv;
	const md_device *md;
	int use_time;
	double x_lo, x_hi; /* domain: seconds since first event, or event index */
	double y_hi;       /* bytes */
	int64_t t0;
} st_axes;

int st_uses_time(const md_snapshot *s, const an_device *dv)
{
	const md_device *md = md_find_device(s, dv->device);
	if (!md || !md->event_count)
		return 0;
	int64_t prev = INT64_MIN;
	for (size_t i = 0; i < md->event_count; i++) {
		int64_t t = md_event_time(md, i);
		if (t == MD_TIME_NONE || t < prev)
			return 0;
		prev = t;
	}
	return md_event_time(md, md->event_count - 1) > md_event_time(md, 0);
}

static double event_x(const st_axes *a, size_t event)
{
	if (!a->use_time)
		return (double)event;
	if (event >= a->md->event_count)
		event = a->md->event_count - 1;
	/* as doubles: hostile times may span the whole int64 range */
	return ((double)md_event_time(a->md, event) - (double)a->t0) / 1e6;
}

static double px(const st_axes *a, double x)
{
	double span = a->x_hi > a->x_lo ? a->x_hi - a->x_lo : 1;
	return ST_LEFT + (x - a->x_lo) / span * (ST_W - ST_LEFT - ST_RIGHT);
}

static double py(const st_axes *a, uint64_t bytes)
{
	double h = ST_H - ST_TOP - ST_BOTTOM;
	return ST_TOP + h - (double)bytes / a->y_hi * h;
}

/* A round step giving about `want` intervals over span: 1, 2 or 5 times a power of ten. */
static double nice_step(double span, int want)
{
	double raw = span / want;
	if (!(raw > 0))
		return 1;
	double mag = pow(10, floor(log10(raw)));
	double f = raw / mag;
	return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

static void y_axis(mr_buf *b, const st_axes *a)
{
	double unit = a->y_hi >= 2.0 * (double)MR_GIB   ? (double)MR_GIB
	              : a->y_hi >= 2.0 * (double)MR_MIB ? (double)MR_MIB
	                                                : (double)MR_KIB;
	const char *name = unit == (double)MR_GIB ? "GiB" : unit == (double)MR_MIB ? "MiB" : "KiB";
	double step = nice_step(a->y_hi / unit, 5);
	mr_buf_puts(b, "<g class=axis>");
	for (int i = 0; i <= 12; i++) {
		double v = step * i;
		if (v * unit > a->y_hi)
			break;
		double y = py(a, (uint64_t)(v * unit));
		mr_buf_printf(b, "<line x1=%d x2=%d y1=%.1f y2=%.1f class=grid />", ST_LEFT,
		              ST_W - ST_RIGHT, y, y);
		mr_buf_printf(b, "<text x=%d y=%.1f text-anchor=end>%g %s</text>", ST_LEFT - 6,
		              y + 4, v, name);
	}
	mr_buf_puts(b, "</g>");
}

static void x_axis(mr_buf *b, const st_axes *a)
{
	double span = a->x_hi - a->x_lo;
	double step = nice_step(span > 0 ? span : 1, 8);
	if (!a->use_time && step < 1)
		step = 1;
	mr_buf_puts(b, "<g class=axis>");
	double first = ceil(a->x_lo / step) * step;
	for (int i = 0; i <= 20; i++) {
		double v = first + step * i;
		if (v > a->x_hi + 1e-9)
			break;
		double x = px(a, v);
		mr_buf_printf(b, "<line x1=%.1f x2=%.1f y1=%d y2=%d class=tick />", x, x,
		              ST_H - ST_BOTTOM, ST_H - ST_BOTTOM + 4);
		if (a->use_time)
			mr_buf_printf(b, "<text x=%.1f y=%d text-anchor=middle>%g s</text>", x,
			              ST_H - ST_BOTTOM + 17, v);
		else
			mr_buf_printf(b, "<text x=%.1f y=%d text-anchor=middle>%.0f</text>", x,
			              ST_H - ST_BOTTOM + 17, v);
	}
	mr_buf_printf(b, "<text x=%d y=%d text-anchor=middle class=label>%s</text>",
	              (ST_LEFT + ST_W - ST_RIGHT) / 2, ST_H - 4,
	              a->use_time ? "seconds since the first recorded event"
	                          : "event index (no times recorded)");
	mr_buf_puts(b, "</g>");
}

/* The horizontal extent of bucket i, in pixels: from its first event to the next bucket's. */
static void bucket_span(const st_axes *a, size_t i, double *x0, double *x1)
{
	const an_device *dv = a->dv;
	size_t n = dv->timeline_count;
	*x0 = px(a, event_x(a, dv->timeline[i].first_event));
	*x1 = i + 1 < n ? px(a, event_x(a, dv->timeline[i + 1].first_event)) : px(a, a->x_hi);
}

/* "<cmd>x y" then a horizontal line to x_to. */
static void path_step(mr_buf *b, char cmd, double x, double y, double x_to)
{
	mr_buf_putc(b, cmd);
	mr_buf_fixed1(b, x);
	mr_buf_putc(b, ' ');
	mr_buf_fixed1(b, y);
	mr_buf_putc(b, 'H');
	mr_buf_fixed1(b, x_to);
}

/* Path commands along the top of every bucket, left to right (steps, so each bucket keeps
 * its extent). */
static void upper_steps(mr_buf *b, const st_axes *a, int reserved)
{
	const an_device *dv = a->dv;
	for (size_t i = 0; i < dv->timeline_count; i++) {
		const an_point *p = &dv->timeline[i];
		double x0, x1;
		bucket_span(a, i, &x0, &x1);
		uint64_t hi = reserved ? p->reserved_max : p->allocated_max;
		path_step(b, i ? 'L' : 'M', x0, py(a, hi), x1);
	}
}

/* A filled band between lo(i) and hi(i). */
static void band(mr_buf *b, const st_axes *a, const char *cls, int lower_zero, int reserved)
{
	const an_device *dv = a->dv;
	mr_buf_printf(b, "<path class=%s d=\"", cls);
	upper_steps(b, a, reserved);
	for (size_t i = dv->timeline_count; i-- > 0;) {
		const an_point *p = &dv->timeline[i];
		double x0, x1;
		bucket_span(a, i, &x0, &x1);
		uint64_t lo = lower_zero ? 0 : reserved ? p->reserved_min : p->allocated_min;
		path_step(b, 'L', x1, py(a, lo), x0);
	}
	mr_buf_puts(b, "Z\" />");
}

/* The upper edge only, as a line. */
static void edge(mr_buf *b, const st_axes *a, const char *cls, int reserved)
{
	mr_buf_printf(b, "<path class=%s d=\"", cls);
	upper_steps(b, a, reserved);
	mr_buf_puts(b, "\" />");
}

static void marker(mr_buf *b, const st_axes *a, size_t event, const char *cls, const char *label,
                   int right_side)
{
	double x = px(a, event_x(a, event));
	mr_buf_printf(b, "<g class=%s><line x1=%.1f x2=%.1f y1=%d y2=%d />", cls, x, x, ST_TOP,
	              ST_H - ST_BOTTOM);
	/* Labels that would leave the plot go on the other side of the line. */
	int anchor_end = x > ST_W - 220;
	mr_buf_printf(b, "<text x=%.1f y=%d text-anchor=%s>%s</text>", anchor_end ? x - 5 : x + 5,
	              right_side ? ST_TOP + 12 : ST_TOP + 28, anchor_end ? "end" : "start", label);
	mr_buf_printf(b, "<title>%s (event %zu)</title></g>", label, event);
}

mr_status st_render(const md_snapshot *s, const an_device *dv, mr_buf *out, mr_error *err)
{
	if (!dv->timeline_count || !dv->timeline)
		return MR_OK;
	st_axes a = {.dv = dv, .md = md_find_device(s, dv->device)};
	if (!a.md || !a.md->event_count)
		return MR_OK;
	a.use_time = st_uses_time(s, dv);
	a.t0 = a.use_time ? md_event_time(a.md, 0) : 0;
	a.x_lo = 0;
	a.x_hi = a.use_time ? event_x(&a, a.md->event_count - 1)
	                    : (double)(a.md->event_count > 1 ? a.md->event_count - 1 : 1);
	if (a.x_hi <= a.x_lo)
		a.x_hi = a.x_lo + 1;
	uint64_t top = MR_MAX(dv->peak_reserved, dv->peak_allocated);
	for (size_t i = 0; i < dv->timeline_count; i++)
		top = MR_MAX(top,
		             MR_MAX(dv->timeline[i].reserved_max, dv->timeline[i].allocated_max));
	a.y_hi = top ? (double)top * 1.08 : 1.0;

	mr_buf *b = out;
	char peak[32], res[32];
	mr_format_bytes(peak, sizeof peak, dv->peak_allocated);
	mr_format_bytes(res, sizeof res, dv->peak_reserved);
	mr_buf_printf(b,
	              "<svg class=timeline viewBox=\"0 0 %d %d\" role=img "
	              "aria-label=\"allocated and reserved bytes over the trace of device %d: peak "
	              "allocated %s, peak reserved %s\">",
	              ST_W, ST_H, dv->device, peak, res);
	y_axis(b, &a);
	x_axis(b, &a);
	band(b, &a, "alloc-area", 1, 0);
	band(b, &a, "alloc-band", 0, 0);
	edge(b, &a, "reserved-line", 1);
	mr_buf_printf(b, "<line class=axis-line x1=%d x2=%d y1=%d y2=%d />", ST_LEFT,
	              ST_W - ST_RIGHT, ST_H - ST_BOTTOM, ST_H - ST_BOTTOM);
	char label[96];
	snprintf(label, sizeof label, "peak allocated %s", peak);
	marker(b, &a, dv->peak_allocated_event, "mark-peak", label, 1);
	if (dv->oom_events) {
		snprintf(label, sizeof label, "out of memory%s",
		         dv->oom_events > 1 ? " (last of several)" : "");
		marker(b, &a, dv->last_oom_event, "mark-oom", label, 0);
	}
	mr_buf_puts(b, "</svg>");
	return b->failed ? mr_oom(err) : MR_OK;
}

/* The top of a run's buckets drawn into an overlay's axes (event index on x). */
static void overlay_run(mr_buf *b, st_axes *a, const an_device *dv, const char *side)
{
	char cls[48], label[96], peak[32];
	a->dv = dv;
	snprintf(cls, sizeof cls, "ov-alloc ov-%s", side);
	edge(b, a, cls, 0);
	snprintf(cls, sizeof cls, "ov-res ov-%s", side);
	edge(b, a, cls, 1);
	mr_format_bytes(peak, sizeof peak, dv->peak_allocated);
	snprintf(label, sizeof label, "%s: peak allocated %s", side, peak);
	snprintf(cls, sizeof cls, "mark-%s", side);
	marker(b, a, dv->peak_allocated_event, cls, label, side[0] == 'a');
}

mr_status st_render_overlay(const an_device *before, const an_device *after, mr_buf *out,
                            mr_error *err)
{
	const an_device *runs[2] = {before, after};
	st_axes a = {0};
	uint64_t top = 1;
	for (int i = 0; i < 2; i++) {
		if (!runs[i]->timeline_count || !runs[i]->timeline)
			return MR_OK;
		a.x_hi =
		    MR_MAX(a.x_hi, (double)(runs[i]->trace_events ? runs[i]->trace_events - 1 : 1));
		top = MR_MAX(top, MR_MAX(runs[i]->peak_reserved, runs[i]->peak_allocated));
		for (size_t k = 0; k < runs[i]->timeline_count; k++)
			top = MR_MAX(top, MR_MAX(runs[i]->timeline[k].reserved_max,
			                         runs[i]->timeline[k].allocated_max));
	}
	a.y_hi = (double)top * 1.08;
	a.dv = before;
	mr_buf *b = out;
	mr_buf_printf(b,
	              "<svg class=\"timeline overlay\" viewBox=\"0 0 %d %d\" role=img "
	              "aria-label=\"allocated and reserved bytes of both runs over their traces\">",
	              ST_W, ST_H);
	y_axis(b, &a);
	x_axis(b, &a);
	overlay_run(b, &a, before, "before");
	overlay_run(b, &a, after, "after");
	mr_buf_printf(b, "<line class=axis-line x1=%d x2=%d y1=%d y2=%d />", ST_LEFT,
	              ST_W - ST_RIGHT, ST_H - ST_BOTTOM, ST_H - ST_BOTTOM);
	mr_buf_puts(b, "</svg>");
	return b->failed ? mr_oom(err) : MR_OK;
}
