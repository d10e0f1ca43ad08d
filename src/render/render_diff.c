/* render_diff.c: the diff of two runs as memreport-diff/1 JSON and as an HTML page. */
#include "render/render_diff.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/escape.h"
#include "base/mem.h"
#include "base/units.h"
#include "base/version.h"
#include "render/page.h"
#include "render/redact.h"
#include "render/svg_timeline.h"
#include "report/view.h"

static void side_json(mr_buf *b, const rp_report *run, const rd_options *opt)
{
	rp_view view;
	if (rp_view_init(&view, run, opt->device, NULL)) {
		b->failed = 1;
		return;
	}
	char pbuf[4096];
	mr_buf_puts(b, "{\"inputs\": [");
	for (size_t i = 0; i < run->ev.input_count; i++) {
		mr_buf_puts(b, i ? ", " : "");
		mr_json_str(b, rd_path(opt, run->ev.inputs[i].path, pbuf, sizeof pbuf));
	}
	mr_buf_puts(b, "], \"devices\": [");
	for (size_t i = 0; i < view.device_count; i++) {
		const an_device *dv = view.devices[i];
		const an_pool *p = &dv->pool[AN_POOL_ALL];
		mr_buf_printf(b,
		              "%s{\"device\": %d, \"reserved_bytes\": %" PRIu64
		              ", \"allocated_bytes\": %" PRIu64 ", \"active_bytes\": %" PRIu64
		              ", \"requested_bytes\": %" PRIu64
		              ", \"inactive_split_bytes\": %" PRIu64 ", \"segments\": %" PRIu64
		              ", \"fragmentation\": %.4f",
		              i ? ", " : "", dv->device, p->reserved, p->allocated, p->active,
		              p->requested, p->inactive_split, p->segments, dv->fragmentation);
		if (dv->has_trace)
			mr_buf_printf(
			    b,
			    ", \"peak_reserved_bytes\": %" PRIu64
			    ", \"peak_allocated_bytes\": %" PRIu64 ", \"overhead_at_peak\": %.4f}",
			    dv->peak_reserved, dv->peak_allocated, an_overhead_at_peak(dv));
		else
			mr_buf_puts(b, ", \"peak_reserved_bytes\": null, \"peak_allocated_bytes\": "
			               "null, \"overhead_at_peak\": null}");
	}
	mr_buf_puts(b, "]}");
	rp_view_free(&view);
}

static void frame_json(mr_buf *b, const df_frame *f, const rd_options *opt)
{
	char pbuf[4096];
	mr_buf_puts(b, "{\"filename\": ");
	mr_json_str(b, rd_path(opt, f->filename, pbuf, sizeof pbuf));
	mr_buf_printf(b, ", \"line\": %d, \"name\": ", (int)f->line);
	mr_json_str(b, f->name);
	mr_buf_puts(b, "}");
}

char *rd_diff_site(const df_change *c, const rd_options *opt)
{
	char pbuf[4096];
	return !c->where.filename[0] && !c->where.name[0]
	           ? mr_strdup(c->site)
	           : mr_format("%s:%d in %s", rd_path(opt, c->where.filename, pbuf, sizeof pbuf),
	                       (int)c->where.line, c->where.name);
}

/* The site text appended escaped for HTML or as a JSON string. */
static void site_text(mr_buf *b, const df_change *c, const rd_options *opt, int html)
{
	char *text = rd_diff_site(c, opt);
	if (!text)
		b->failed = 1;
	else if (html)
		mr_buf_html(b, text, strlen(text));
	else
		mr_json_str(b, text);
	free(text);
}

/* A list of site changes (at most max, 0: all). */
static void changes_json(mr_buf *b, const df_change *changes, size_t count, size_t max,
                         const rd_options *opt)
{
	size_t n = max && max < count ? max : count;
	mr_buf_puts(b, "[");
	for (size_t i = 0; i < n; i++) {
		const df_change *c = &changes[i];
		mr_buf_puts(b, i ? ",\n    {\"site\": " : "\n    {\"site\": ");
		site_text(b, c, opt, 0);
		mr_buf_puts(b, ", \"where\": ");
		frame_json(b, &c->where, opt);
		mr_buf_puts(b, ", \"frames\": [");
		for (size_t k = 0; k < c->frame_count; k++) {
			mr_buf_puts(b, k ? ", " : "");
			frame_json(b, &c->frames[k], opt);
		}
		mr_buf_printf(b,
		              "], \"bytes_before\": %" PRIu64 ", \"bytes_after\": %" PRIu64
		              ", \"bytes_delta\": %" PRId64 ", \"count_before\": %" PRIu64
		              ", \"count_after\": %" PRIu64 ", \"count_delta\": %" PRId64 "}",
		              c->bytes_before, c->bytes_after, c->bytes_delta, c->count_before,
		              c->count_after, c->count_delta);
	}
	mr_buf_puts(b, n ? "\n  ]" : "]");
}

/* One side's layout at its peak, or null when a device shown has no peak. */
static void peak_json(mr_buf *b, const df_result *d, int side)
{
	if (!d->peak_known[side]) {
		mr_buf_puts(b, "null");
		return;
	}
	const uint64_t *v = d->peak_value[side];
	mr_buf_puts(b, "{");
	for (int m = 0; m < DF_PK_COUNT; m++)
		mr_buf_printf(b, "%s\"%s\": %" PRIu64, m ? ", " : "", df_peak_key(m), v[m]);
	mr_buf_printf(b, ", \"fragmentation\": %.4f}", df_peak_fragmentation(d, side));
}

static int64_t delta_of(const df_result *d, int m)
{
	return (int64_t)(d->value[1][m] - d->value[0][m]);
}

mr_status rd_diff_json(const df_result *d, const rp_report *before, const rp_report *after,
                       const rd_options *opt, size_t max_changes, mr_buf *out, mr_error *err)
{
	mr_buf *b = out;
	mr_buf_puts(b,
	            "{\n  \"schema\": \"memreport-diff/1\",\n  \"memreport\": \"" MEMREPORT_VERSION
	            "\",\n  \"before\": ");
	side_json(b, before, opt);
	mr_buf_puts(b, ",\n  \"after\": ");
	side_json(b, after, opt);
	mr_buf_puts(b, ",\n  \"delta\": {");
	for (int m = 0; m < DF_METRIC_COUNT; m++) {
		mr_buf_printf(b, "%s\"%s\": ", m ? ", " : "", df_metric_key(m));
		if (d->known[0][m] && d->known[1][m])
			mr_buf_printf(b, "%" PRId64, delta_of(d, m));
		else
			mr_buf_puts(b, "null");
	}
	mr_buf_puts(b, "},\n  \"top_changes\": ");
	changes_json(b, d->changes, d->change_count, max_changes, opt);
	mr_buf_puts(b, ",\n  \"settings_changes\": [");
	for (size_t i = 0; i < d->setting_count; i++) {
		mr_buf_puts(b, i ? ", {\"key\": " : "{\"key\": ");
		mr_json_str(b, d->settings[i].key);
		mr_buf_puts(b, ", \"before\": ");
		mr_json_str(b, d->settings[i].before);
		mr_buf_puts(b, ", \"after\": ");
		mr_json_str(b, d->settings[i].after);
		mr_buf_puts(b, "}");
	}
	mr_buf_puts(b, "],\n  \"at_peak\": {\"before\": ");
	peak_json(b, d, 0);
	mr_buf_puts(b, ", \"after\": ");
	peak_json(b, d, 1);
	mr_buf_puts(b, ", \"delta\": {");
	for (int m = 0; m < DF_PK_COUNT; m++) {
		mr_buf_printf(b, "%s\"%s\": ", m ? ", " : "", df_peak_key(m));
		if (d->peak_known[0] && d->peak_known[1])
			mr_buf_printf(b, "%" PRId64,
			              (int64_t)(d->peak_value[1][m] - d->peak_value[0][m]));
		else
			mr_buf_puts(b, "null");
	}
	mr_buf_puts(b, "},\n    \"top_changes\": ");
	changes_json(b, d->peak_changes, d->peak_change_count, max_changes, opt);
	mr_buf_puts(b, "}\n}\n");
	return b->failed ? mr_oom(err) : MR_OK;
}

/* ---- HTML ------------------------------------------------------------------------------------ */

static void esc(mr_buf *b, const char *s)
{
	mr_buf_html(b, s, strlen(s));
}

static void size_cell(mr_buf *b, uint64_t v, int known)
{
	char s[32];
	if (!known) {
		mr_buf_puts(b, "<td class=n>&mdash;</td>");
		return;
	}
	mr_format_bytes(s, sizeof s, v);
	mr_buf_printf(b, "<td class=n title=\"%" PRIu64 " bytes\">%s</td>", v, s);
}

static void delta_cell(mr_buf *b, int64_t v, int known)
{
	char s[32];
	if (!known) {
		mr_buf_puts(b, "<td class=n>&mdash;</td>");
		return;
	}
	uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	mr_format_bytes(s, sizeof s, mag);
	mr_buf_printf(b, "<td class=\"n %s\" title=\"%" PRId64 " bytes\">%s%s</td>",
	              v > 0   ? "up"
	              : v < 0 ? "down"
	                      : "",
	              v,
	              v > 0   ? "+"
	              : v < 0 ? "\xe2\x88\x92"
	                      : "",
	              s);
}

static void inputs_html(mr_buf *b, const rp_report *run, const rd_options *opt)
{
	char pbuf[4096];
	for (size_t i = 0; i < run->ev.input_count; i++) {
		mr_buf_puts(b, i ? ", <code>" : "<code>");
		esc(b, rd_path(opt, run->ev.inputs[i].path, pbuf, sizeof pbuf));
		mr_buf_puts(b, "</code>");
	}
}

/* The site changes of one moment as a table (at most max rows, 0: all). */
static void changes_html(mr_buf *b, const df_change *changes, size_t count, size_t max,
                         const rd_options *opt, const char *same)
{
	char pbuf[4096];
	size_t n = max && max < count ? max : count;
	if (!n) {
		mr_buf_printf(b, "<p class=muted>%s</p>", same);
		return;
	}
	mr_buf_puts(b, "<p class=muted>Live allocated blocks grouped by the first line of code "
	               "outside torch that allocated them (the autograd engine's under its "
	               "backward() call); largest growth first.</p>"
	               "<table><thead><tr><th>site</th><th class=n>before</th>"
	               "<th class=n>after</th><th class=n>change</th>"
	               "<th class=n>blocks</th></tr></thead><tbody>");
	for (size_t i = 0; i < n; i++) {
		const df_change *c = &changes[i];
		mr_buf_puts(b, "<tr><td><details><summary><code>");
		site_text(b, c, opt, 1);
		mr_buf_puts(b, "</code></summary><ol class=frames>");
		for (size_t k = 0; k < c->frame_count; k++) {
			mr_buf_puts(b, "<li><code>");
			esc(b, c->frames[k].name);
			mr_buf_puts(b, "</code> <span class=muted>");
			esc(b, rd_path(opt, c->frames[k].filename, pbuf, sizeof pbuf));
			mr_buf_printf(b, ":%d</span></li>", (int)c->frames[k].line);
		}
		mr_buf_puts(b, "</ol></details></td>");
		size_cell(b, c->bytes_before, 1);
		size_cell(b, c->bytes_after, 1);
		delta_cell(b, c->bytes_delta, 1);
		mr_buf_printf(b, "<td class=n>%" PRIu64 " &rarr; %" PRIu64 "</td></tr>",
		              c->count_before, c->count_after);
	}
	mr_buf_puts(b, "</tbody></table>");
	if (n < count)
		mr_buf_printf(b, "<p class=muted>%zu smaller changes are not listed.</p>",
		              count - n);
}

static void settings_html(mr_buf *b, const df_result *d)
{
	mr_buf_puts(b, "<h2>Allocator settings</h2>");
	if (!d->setting_count) {
		mr_buf_puts(b, "<p class=muted>Both runs recorded the same allocator settings (or "
		               "neither recorded any).</p>");
		return;
	}
	mr_buf_puts(b, "<table><thead><tr><th>setting</th><th>before</th><th>after</th></tr>"
	               "</thead><tbody>");
	for (size_t i = 0; i < d->setting_count; i++) {
		const df_setting *x = &d->settings[i];
		mr_buf_puts(b, "<tr><th><code>");
		esc(b, x->key);
		mr_buf_puts(b, "</code></th><td><code>");
		esc(b, x->before ? x->before : "(not recorded)");
		mr_buf_puts(b, "</code></td><td><code>");
		esc(b, x->after ? x->after : "(not recorded)");
		mr_buf_puts(b, "</code></td></tr>");
	}
	mr_buf_puts(b, "</tbody></table>");
}

static void pct_row(mr_buf *b, const char *label, double v0, double v1, int known)
{
	mr_buf_printf(b, "<tr><th>%s</th>", label);
	if (!known) {
		mr_buf_puts(b, "<td class=n>&mdash;</td><td class=n>&mdash;</td><td class=n>&mdash;"
		               "</td></tr>");
		return;
	}
	mr_buf_printf(b,
	              "<td class=n>%.1f%%</td><td class=n>%.1f%%</td><td class=n>%+.1f "
	              "points</td></tr>",
	              v0 * 100.0, v1 * 100.0, (v1 - v0) * 100.0);
}

/* The device a side's timeline stands for: the diagnosed one, else the first with a trace. */
static const an_device *timeline_device(const rp_view *v)
{
	const an_device *pick = NULL;
	for (size_t i = 0; i < v->device_count; i++) {
		const an_device *dv = v->devices[i];
		if (dv->has_trace && (!pick || dv->device == v->report->advice.device))
			pick = dv;
	}
	return pick;
}

/* Both peaks: the trace's, the overhead between them, the layout at the peak; the overlay. */
static mr_status peak_html(mr_buf *b, const df_result *d, const rp_report *const runs[2],
                           const rd_options *opt, mr_error *err)
{
	static const char *const labels[DF_PK_COUNT] = {
	    "reserved at the peak", "allocated at the peak", "free cached at the peak",
	    "largest free block at the peak"};
	rp_view v[2];
	mr_status st = rp_view_init(&v[0], runs[0], opt->device, err);
	if (st || (st = rp_view_init(&v[1], runs[1], opt->device, err))) {
		if (!st)
			rp_view_free(&v[0]);
		return st;
	}
	const an_device *dv[2] = {timeline_device(&v[0]), timeline_device(&v[1])};
	mr_buf_puts(b, "<h2>At the peak</h2><p class=muted>Each run at its own peak of allocated "
	               "bytes (the layout there rebuilt from its trace); the peak reserved bytes "
	               "are the trace's highest, at their own event.</p><table><thead><tr><th>"
	               "</th><th class=n>before</th><th class=n>after</th><th class=n>change</th>"
	               "</tr></thead><tbody>");
	for (int m = DF_PEAK_RESERVED; m <= DF_PEAK_ALLOCATED; m++) {
		mr_buf_printf(b, "<tr><th>%s</th>",
		              m == DF_PEAK_RESERVED ? "peak reserved" : "peak allocated");
		size_cell(b, d->value[0][m], d->known[0][m]);
		size_cell(b, d->value[1][m], d->known[1][m]);
		delta_cell(b, delta_of(d, m), d->known[0][m] && d->known[1][m]);
		mr_buf_puts(b, "</tr>");
	}
	pct_row(b, "overhead at the peak", dv[0] ? an_overhead_at_peak(dv[0]) : 0,
	        dv[1] ? an_overhead_at_peak(dv[1]) : 0, dv[0] && dv[1]);
	int known = d->peak_known[0] && d->peak_known[1];
	for (int m = 0; m < DF_PK_COUNT; m++) {
		mr_buf_printf(b, "<tr><th>%s</th>", labels[m]);
		size_cell(b, d->peak_value[0][m], d->peak_known[0]);
		size_cell(b, d->peak_value[1][m], d->peak_known[1]);
		delta_cell(b, (int64_t)(d->peak_value[1][m] - d->peak_value[0][m]), known);
		mr_buf_puts(b, "</tr>");
	}
	pct_row(b, "fragmentation at the peak", df_peak_fragmentation(d, 0),
	        df_peak_fragmentation(d, 1), known);
	mr_buf_puts(b, "</tbody></table>");
	if (dv[0] && dv[1]) {
		mr_buf_printf(b,
		              "<figure><figcaption>Allocated and reserved bytes over each trace "
		              "(device %d before, device %d after), by event index: before dashed, "
		              "after solid.</figcaption>",
		              dv[0]->device, dv[1]->device);
		st = st_render_overlay(dv[0], dv[1], b, err);
		mr_buf_puts(b,
		            "<ul class=legend><li><span class=\"sw ov-a\"></span>allocated</li><li>"
		            "<span class=\"sw ov-r\"></span>reserved</li></ul></figure>");
	}
	rp_view_free(&v[0]);
	rp_view_free(&v[1]);
	return st;
}

static const char *const diff_css[] = {"diff.css", NULL};

mr_status rd_diff_html(const df_result *d, const rp_report *before, const rp_report *after,
                       const rd_options *opt, size_t max_changes, mr_buf *out, mr_error *err)
{
	static const char *const labels[DF_METRIC_COUNT] = {"reserved",
	                                                    "allocated",
	                                                    "active",
	                                                    "requested",
	                                                    "non-releasable (inactive split)",
	                                                    "peak reserved",
	                                                    "peak allocated"};
	const rp_report *const runs[2] = {before, after};
	mr_buf body = {0};
	mr_buf *b = &body;
	mr_buf_puts(b, "<h1>memreport diff</h1><p>Before: ");
	inputs_html(b, before, opt);
	mr_buf_puts(b, "<br>After: ");
	inputs_html(b, after, opt);
	mr_buf_puts(b, "</p>");
	settings_html(b, d);
	mr_status st = peak_html(b, d, runs, opt, err);
	if (st)
		goto done;
	mr_buf_puts(b, "<h2>What changed at the peak, by allocation site</h2>");
	changes_html(b, d->peak_changes, d->peak_change_count, max_changes, opt,
	             d->peak_known[0] && d->peak_known[1]
	                 ? "No allocation site holds more or less memory at the peak."
	                 : "A run has no trace: there is no peak to compare.");
	mr_buf_puts(b, "<h2>At the end (the snapshots)</h2><table><thead><tr><th></th><th "
	               "class=n>before</th><th class=n>after</th><th class=n>change</th></tr>"
	               "</thead><tbody>");
	for (int m = 0; m < DF_PEAK_RESERVED; m++) {
		mr_buf_printf(b, "<tr><th>%s</th>", labels[m]);
		size_cell(b, d->value[0][m], d->known[0][m]);
		size_cell(b, d->value[1][m], d->known[1][m]);
		delta_cell(b, delta_of(d, m), d->known[0][m] && d->known[1][m]);
		mr_buf_puts(b, "</tr>");
	}
	mr_buf_puts(b, "</tbody></table><h2>What changed at the end, by allocation site</h2>");
	changes_html(b, d->changes, d->change_count, max_changes, opt,
	             "No allocation site holds more or less memory at the end: the live blocks "
	             "of the snapshots are the same.");
	st = body.failed ? mr_oom(err)
	                 : rd_page(out, "memreport diff", diff_css, NULL, body.data, body.len, err);
done:
	mr_buf_free(&body);
	return st;
}
