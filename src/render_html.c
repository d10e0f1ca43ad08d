/* render_html.c: the self-contained HTML report. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "templates.h"

static void esc(mr_buf *b, const char *s)
{
	mr_buf_html(b, s, strlen(s));
}

static void cell_bytes(mr_buf *b, uint64_t v)
{
	char s[32];
	mr_format_bytes(s, sizeof s, v);
	mr_buf_printf(b, "<td class=n title=\"%" PRIu64 " bytes\">%s</td>", v, s);
}

mr_status rp_render_html(const rp_run *run, const rp_options *opt, mr_buf *out, mr_error *err)
{
	mr_buf *b = out;
	size_t css_len = 0;
	char *css = tp_get("report.css", &css_len);
	char pbuf[4096];
	mr_buf_puts(b, "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
		       "<meta name=viewport content=\"width=device-width,initial-scale=1\">"
		       "<meta http-equiv=Content-Security-Policy content=\"default-src 'none'; "
		       "style-src 'unsafe-inline'; img-src data:; script-src 'unsafe-inline'\">"
		       "<title>memreport</title><style>");
	if (css)
		mr_buf_append(b, css, css_len);
	free(css);
	mr_buf_puts(b, "</style></head><body><main><h1>memreport</h1><p class=muted>");
	for (size_t i = 0; i < run->input_count; i++) {
		mr_buf_puts(b, i ? ", " : "");
		esc(b, rp_path(opt, run->inputs[i].path, pbuf, sizeof pbuf));
		mr_buf_printf(b, " (%s)", rp_kind_name(run->inputs[i].kind));
	}
	mr_buf_puts(b, "</p>");
	for (size_t d = 0; run->has_snapshot && d < run->an.device_count; d++) {
		const an_device *dv = &run->an.devices[d];
		const an_pool *p = &dv->pool[AN_POOL_ALL];
		if (opt->device >= 0 && dv->device != opt->device)
			continue;
		mr_buf_printf(b, "<h2>Device %d</h2><table><tr>", dv->device);
		mr_buf_puts(b, "<th class=n>reserved</th><th class=n>allocated</th><th class=n>active</th>"
			       "<th class=n>free cached</th><th class=n>largest free block</th>"
			       "<th class=n>fragmentation</th></tr><tr>");
		cell_bytes(b, p->reserved);
		cell_bytes(b, p->allocated);
		cell_bytes(b, p->active);
		cell_bytes(b, p->free_cached);
		cell_bytes(b, p->largest_free);
		mr_buf_printf(b, "<td class=n>%.1f%%</td></tr></table>", dv->fragmentation * 100.0);
	}
	mr_buf_puts(b, "</main></body></html>\n");
	return b->failed ? mr_oom(err) : MR_OK;
}
