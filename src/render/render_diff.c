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
			mr_buf_printf(b,
			              ", \"peak_reserved_bytes\": %" PRIu64
			              ", \"peak_allocated_bytes\": %" PRIu64 "}",
			              dv->peak_reserved, dv->peak_allocated);
		else
			mr_buf_puts(
			    b, ", \"peak_reserved_bytes\": null, \"peak_allocated_bytes\": null}");
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

/* The shown site text ("file:line in name"), the file name redacted when asked, appended
 * escaped for HTML or as a JSON string. */
static void site_text(mr_buf *b, const df_change *c, const rd_options *opt, int html)
{
	char pbuf[4096];
	char *text =
	    !c->where.filename[0] && !c->where.name[0]
	        ? mr_strdup(c->site)
	        : mr_format("%s:%d in %s", rd_path(opt, c->where.filename, pbuf, sizeof pbuf),
	                    (int)c->where.line, c->where.name);
	if (!text)
		b->failed = 1;
	else if (html)
		mr_buf_html(b, text, strlen(text));
	else
		mr_json_str(b, text);
	free(text);
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
	mr_buf_puts(b, "},\n  \"top_changes\": [");
	size_t n = max_changes && max_changes < d->change_count ? max_changes : d->change_count;
	for (size_t i = 0; i < n; i++) {
		const df_change *c = &d->changes[i];
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
	mr_buf_puts(b, n ? "\n  ]\n}\n" : "]\n}\n");
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
	char pbuf[4096];
	mr_buf body = {0};
	mr_buf *b = &body;
	mr_buf_puts(b, "<h1>memreport diff</h1><p>Before: ");
	inputs_html(b, before, opt);
	mr_buf_puts(b, "<br>After: ");
	inputs_html(b, after, opt);
	mr_buf_puts(b, "</p><h2>Totals</h2><table><thead><tr><th></th><th class=n>before</th>"
	               "<th class=n>after</th><th class=n>change</th></tr></thead><tbody>");
	for (int m = 0; m < DF_METRIC_COUNT; m++) {
		mr_buf_printf(b, "<tr><th>%s</th>", labels[m]);
		size_cell(b, d->value[0][m], d->known[0][m]);
		size_cell(b, d->value[1][m], d->known[1][m]);
		delta_cell(b, delta_of(d, m), d->known[0][m] && d->known[1][m]);
		mr_buf_puts(b, "</tr>");
	}
	mr_buf_puts(b, "</tbody></table><h2>What changed, by allocation site</h2>");
	size_t n = max_changes && max_changes < d->change_count ? max_changes : d->change_count;
	if (!n) {
		mr_buf_puts(b,
		            "<p class=muted>No allocation site holds more or less memory: the live "
		            "blocks are the same.</p>");
	} else {
		mr_buf_puts(b, "<p class=muted>Live allocated blocks grouped by the first line of "
		               "code outside torch that allocated them; largest growth first.</p>"
		               "<table><thead><tr><th>site</th><th class=n>before</th>"
		               "<th class=n>after</th><th class=n>change</th>"
		               "<th class=n>blocks</th></tr></thead><tbody>");
		for (size_t i = 0; i < n; i++) {
			const df_change *c = &d->changes[i];
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
		if (n < d->change_count)
			mr_buf_printf(b, "<p class=muted>%zu smaller changes are not listed.</p>",
			              d->change_count - n);
	}
	mr_status st = body.failed ? mr_oom(err)
	                           : rd_page(out, "memreport diff", "diff.css", NULL, body.data,
	                                     body.len, err);
	mr_buf_free(&body);
	return st;
}
