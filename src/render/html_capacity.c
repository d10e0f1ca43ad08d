/* html_capacity.c: "How large a microbatch fits", with its plot. */
#include "render/html_capacity.h"

#include <inttypes.h>

#include "analyze/frames.h"
#include "base/mem.h"
#include "render/html_util.h"

enum { PLOT_W = 640, PLOT_H = 220, PLOT_L = 64, PLOT_R = 16, PLOT_T = 12, PLOT_B = 34 };

static double px(double f, double fmax)
{
	return PLOT_L + (PLOT_W - PLOT_L - PLOT_R) * f / fmax;
}

static double py(uint64_t v, uint64_t vmax)
{
	return PLOT_T + (PLOT_H - PLOT_T - PLOT_B) * (1.0 - (double)v / (double)vmax);
}

/* Peak reserved of each replay (dots: fits or not) against its factor, with the budget. */
static void plot(hr_ctx *c, const ad_capacity *cp)
{
	char s[32];
	double fmax = 0;
	uint64_t vmax = MR_MAX(cp->budget, cp->recorded_peak_reserved);
	for (size_t i = 0; i < cp->curve_count; i++) {
		fmax = MR_MAX(fmax, cp->curve_factor[i]);
		vmax = MR_MAX(vmax, cp->curve_peak_reserved[i]);
	}
	fmax = MR_MAX(fmax * 1.08, 1.0);
	vmax += vmax / 12;
	mr_buf_printf(
	    c->b,
	    "<svg class=capplot viewBox=\"0 0 %d %d\" role=img aria-label=\"predicted peak "
	    "reserved against the microbatch factor\">",
	    PLOT_W, PLOT_H);
	mr_buf_printf(c->b, "<line class=axis x1=%d y1=%d x2=%d y2=%d />", PLOT_L, PLOT_H - PLOT_B,
	              PLOT_W - PLOT_R, PLOT_H - PLOT_B);
	mr_buf_printf(c->b, "<line class=axis x1=%d y1=%d x2=%d y2=%d />", PLOT_L, PLOT_T, PLOT_L,
	              PLOT_H - PLOT_B);
	for (int k = 0; k <= 4; k++) { /* five ticks on each axis */
		double f = fmax * k / 4;
		uint64_t v = (uint64_t)((double)vmax * k / 4);
		mr_buf_printf(c->b, "<text class=tick x=%.1f y=%d text-anchor=middle>%.*fx</text>",
		              px(f, fmax), PLOT_H - PLOT_B + 16, fmax < 4 ? 2 : 1, f);
		mr_buf_printf(c->b, "<text class=tick x=%d y=%.1f text-anchor=end>%s</text>",
		              PLOT_L - 6, py(v, vmax) + 4, hr_bytes(s, v));
	}
	mr_buf_printf(c->b,
	              "<line class=budget x1=%d y1=%.1f x2=%d y2=%.1f /><text class=tick x=%d "
	              "y=%.1f>budget %s</text>",
	              PLOT_L, py(cp->budget, vmax), PLOT_W - PLOT_R, py(cp->budget, vmax),
	              PLOT_L + 6, py(cp->budget, vmax) - 4, hr_bytes(s, cp->budget));
	if (cp->limit < cp->budget)
		mr_buf_printf(c->b, "<line class=limit x1=%d y1=%.1f x2=%d y2=%.1f />", PLOT_L,
		              py(cp->limit, vmax), PLOT_W - PLOT_R, py(cp->limit, vmax));
	mr_buf_printf(c->b,
	              "<circle class=recorded cx=%.1f cy=%.1f r=5><title>1x, as recorded: "
	              "%s</title></circle>",
	              px(1.0, fmax), py(cp->recorded_peak_reserved, vmax),
	              hr_bytes(s, cp->recorded_peak_reserved));
	if (cp->max_factor > 0)
		mr_buf_printf(c->b, "<line class=answer x1=%.1f y1=%d x2=%.1f y2=%d />",
		              px(cp->max_factor, fmax), PLOT_T, px(cp->max_factor, fmax),
		              PLOT_H - PLOT_B);
	for (size_t i = 0; i < cp->curve_count; i++)
		mr_buf_printf(c->b,
		              "<circle class=%s cx=%.1f cy=%.1f r=4><title>%.3fx: %s%s</title>"
		              "</circle>",
		              cp->curve_oom[i] ? "nofit" : "fit", px(cp->curve_factor[i], fmax),
		              py(cp->curve_peak_reserved[i], vmax), cp->curve_factor[i],
		              hr_bytes(s, cp->curve_peak_reserved[i]),
		              cp->curve_oom[i] ? ", does not fit" : "");
	mr_buf_printf(c->b, "<text class=tick x=%d y=%d text-anchor=end>microbatch factor</text>",
	              PLOT_W - PLOT_R, PLOT_H - 2);
	mr_buf_puts(c->b, "</svg>");
}

/* The largest allocations that grow with the microbatch at the predicted peak. */
static void deciding(hr_ctx *c, const ad_capacity *cp)
{
	char s[32];
	if (!cp->deciding_count)
		return;
	mr_buf_printf(c->b,
	              "<table><thead><tr><th class=n>bytes %s</th><th class=n>blocks</th>"
	              "<th>allocated by</th></tr></thead><tbody>",
	              cp->method == AD_PLAN_UPPER_BOUND ? "at the OOM" : "at the predicted peak");
	for (size_t i = 0; i < cp->deciding_count; i++) {
		const md_frame *f = an_user_frame(c->s, cp->deciding_stack[i]);
		mr_buf_printf(c->b, "<tr><td class=n>%s</td><td class=n>%" PRIu64 "</td><td>",
		              hr_bytes(s, cp->deciding_bytes[i]), cp->deciding_blocks[i]);
		if (f)
			hr_frame_html(c, f);
		else
			mr_buf_puts(c->b, "autograd (backward)");
		mr_buf_puts(c->b, "</td></tr>");
	}
	mr_buf_puts(c->b, "</tbody></table>");
}

void hr_capacity(hr_ctx *c)
{
	const ad_advice *ad = &c->run->advice;
	const ad_capacity *cp = &ad->capacity;
	if (!cp->budget || !ad->capacity_line)
		return;
	mr_buf_puts(c->b, "<section id=capacity><h2>How large a microbatch fits</h2><p>");
	hu_text(c->b, ad->capacity_line, 1500);
	mr_buf_puts(c->b, "</p>");
	if (cp->method != AD_PLAN_NONE && cp->curve_count) {
		plot(c, cp);
		mr_buf_printf(c->b,
		              "<p class=muted>Each dot is one replay of the first %zu trace events "
		              "through the allocator model, with the requests that grow with the "
		              "microbatch multiplied by the factor (blue: the run as recorded); "
		              "%s.</p>",
		              cp->events_replayed,
		              cp->method == AD_PLAN_UPPER_BOUND
		                  ? "a dot that does not fit ran out of memory under the budget"
		                  : "a plan keeps 5% of the budget spare (the grey line) and asks "
		                    "that the cache never has to be freed to retry");
		deciding(c, cp);
	}
	mr_buf_puts(c->b, "</section>");
}
