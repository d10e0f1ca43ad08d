/* diff_text.c: the diff of two runs as Markdown and as text. */
#include "render/diff_text.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/moments.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/escape.h"
#include "base/units.h"
#include "render/html_util.h"
#include "render/redact.h"
#include "render/render_diff.h"
#include "render/render_text.h"
#include "report/view.h"

enum { DT_TEXT_CAP = 200 };

typedef struct {
	mr_buf *b;
	const rd_options *opt;
	int md; /* Markdown, else text */
} dt_out;

/* Text from the inputs, escaped for the format. */
static void str(const dt_out *o, const char *s)
{
	if (o->md)
		hu_md_text(o->b, s, DT_TEXT_CAP);
	else
		mr_buf_plain(o->b, s, strlen(s));
}

static const char *sz(char out[32], uint64_t v)
{
	mr_format_bytes(out, 32, v);
	return out;
}

static const char *delta(char out[40], int64_t v)
{
	char s[32];
	uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	snprintf(out, 40, "%s%s", v > 0 ? "+" : v < 0 ? "-" : "", sz(s, mag));
	return out;
}

/* One row of a before / after / change table. */
static void row(const dt_out *o, const char *label, const char *a, const char *b, const char *c)
{
	if (o->md)
		mr_buf_printf(o->b, "| %s | %s | %s | %s |\n", label, a, b, c);
	else
		mr_buf_printf(o->b, "  %-30s %12s %12s %16s\n", label, a, b, c);
}

static void bytes_row(const dt_out *o, const char *label, uint64_t a, uint64_t b, int known)
{
	char x[32], y[32], z[40];
	if (!known)
		row(o, label, "n/a", "n/a", "n/a");
	else
		row(o, label, sz(x, a), sz(y, b), delta(z, (int64_t)(b - a)));
}

static void pct_row(const dt_out *o, const char *label, double a, double b, int known)
{
	char x[16], y[16], z[24];
	snprintf(x, sizeof x, "%.1f%%", a * 100.0);
	snprintf(y, sizeof y, "%.1f%%", b * 100.0);
	snprintf(z, sizeof z, "%+.1f points", (b - a) * 100.0);
	row(o, label, known ? x : "n/a", known ? y : "n/a", known ? z : "n/a");
}

static void heading(const dt_out *o, const char *text)
{
	if (o->md)
		mr_buf_printf(o->b,
		              "\n#### %s\n\n| | before | after | change |\n|---|---:|---:|---:|\n",
		              text);
	else
		mr_buf_printf(o->b, "\n%s:\n  %-30s %12s %12s %16s\n", text, "", "before", "after",
		              "change");
}

static void inputs(const dt_out *o, const rp_report *run)
{
	char pbuf[4096];
	for (size_t i = 0; i < run->ev.input_count; i++) {
		mr_buf_puts(o->b, i ? ", " : "");
		str(o, rd_path(o->opt, run->ev.inputs[i].path, pbuf, sizeof pbuf));
	}
}

static void settings(const dt_out *o, const df_result *d)
{
	mr_buf_puts(o->b, o->md ? "\n**Allocator settings:** " : "\nAllocator settings: ");
	if (!d->setting_count)
		mr_buf_puts(o->b, "the same in both runs.\n");
	for (size_t i = 0; i < d->setting_count; i++) {
		const df_setting *x = &d->settings[i];
		mr_buf_puts(o->b, i ? "; " : "");
		str(o, x->key);
		mr_buf_puts(o->b, " ");
		str(o, x->before ? (x->before[0] ? x->before : "(empty)") : "(not recorded)");
		mr_buf_puts(o->b, " -> ");
		str(o, x->after ? (x->after[0] ? x->after : "(empty)") : "(not recorded)");
	}
	mr_buf_puts(o->b, d->setting_count ? ".\n" : "");
}

static void changes(const dt_out *o, const char *title, const df_change *c, size_t count,
                    size_t max)
{
	size_t n = max && max < count ? max : count;
	char x[32], y[32], z[40];
	if (o->md)
		mr_buf_printf(o->b, "\n#### %s\n\n", title);
	else
		mr_buf_printf(o->b, "\n%s:\n", title);
	if (!n) {
		mr_buf_puts(o->b, o->md ? "No allocation site holds more or less memory.\n"
		                        : "  no allocation site holds more or less memory\n");
		return;
	}
	if (o->md)
		mr_buf_puts(o->b, "| site | before | after | change | blocks |\n"
		                  "|---|---:|---:|---:|---:|\n");
	for (size_t i = 0; i < n; i++) {
		char *site = rd_diff_site(&c[i], o->opt);
		if (!site) {
			o->b->failed = 1;
			return;
		}
		if (o->md) {
			mr_buf_puts(o->b, "| ");
			str(o, site);
			mr_buf_printf(o->b, " | %s | %s | %s | %" PRIu64 " -> %" PRIu64 " |\n",
			              sz(x, c[i].bytes_before), sz(y, c[i].bytes_after),
			              delta(z, c[i].bytes_delta), c[i].count_before,
			              c[i].count_after);
		} else {
			mr_buf_printf(
			    o->b, "  %12s -> %12s (%s, %" PRIu64 " -> %" PRIu64 " blocks)  ",
			    sz(x, c[i].bytes_before), sz(y, c[i].bytes_after),
			    delta(z, c[i].bytes_delta), c[i].count_before, c[i].count_after);
			str(o, site);
			mr_buf_puts(o->b, "\n");
		}
		free(site);
	}
	if (n < count)
		mr_buf_printf(o->b, "%s%zu smaller changes not listed.\n", o->md ? "\n" : "  ",
		              count - n);
}

/* The overhead at the peak of a run's diagnosed device (else the first with a trace). */
static int overhead(const rp_report *run, const rd_options *opt, double *out)
{
	rp_view v;
	int found = 0;
	if (rp_view_init(&v, run, opt->device, NULL))
		return 0;
	for (size_t i = 0; i < v.device_count; i++) {
		const an_device *dv = v.devices[i];
		if (dv->has_trace && (!found || dv->device == run->advice.device)) {
			*out = an_overhead_at_peak(dv);
			found = 1;
		}
	}
	rp_view_free(&v);
	return found;
}

static mr_status write_diff(const dt_out *o, const df_result *d, const rp_report *before,
                            const rp_report *after, size_t max, mr_error *err)
{
	static const char *const end_labels[] = {"reserved", "allocated", "active", "requested",
	                                         "inactive split"};
	static const char *const peak_labels[DF_PK_COUNT] = {
	    "reserved at the peak", "allocated at the peak", "free cached at the peak",
	    "largest free block at the peak"};
	mr_buf_puts(o->b, o->md ? "### memreport diff\n\nBefore: " : "memreport diff\nBefore: ");
	inputs(o, before);
	mr_buf_puts(o->b, o->md ? "  \nAfter: " : "\nAfter: ");
	inputs(o, after);
	mr_buf_puts(o->b, "\n");
	settings(o, d);
	heading(o, "At the peak (each run at its own)");
	bytes_row(o, "peak reserved", d->value[0][DF_PEAK_RESERVED], d->value[1][DF_PEAK_RESERVED],
	          d->known[0][DF_PEAK_RESERVED] && d->known[1][DF_PEAK_RESERVED]);
	bytes_row(o, "peak allocated", d->value[0][DF_PEAK_ALLOCATED],
	          d->value[1][DF_PEAK_ALLOCATED],
	          d->known[0][DF_PEAK_ALLOCATED] && d->known[1][DF_PEAK_ALLOCATED]);
	double oa = 0, ob = 0;
	int ka = overhead(before, o->opt, &oa), kb = overhead(after, o->opt, &ob);
	pct_row(o, "overhead at the peak", oa, ob, ka && kb);
	int known = d->peak_known[0] && d->peak_known[1];
	for (int m = 0; m < DF_PK_COUNT; m++)
		bytes_row(o, peak_labels[m], d->peak_value[0][m], d->peak_value[1][m], known);
	pct_row(o, "fragmentation at the peak", df_peak_fragmentation(d, 0),
	        df_peak_fragmentation(d, 1), known);
	changes(o, "What changed at the peak, by allocation site", d->peak_changes,
	        d->peak_change_count, max);
	heading(o, "At the end (the snapshots)");
	for (int m = 0; m < DF_PEAK_RESERVED; m++)
		bytes_row(o, end_labels[m], d->value[0][m], d->value[1][m],
		          d->known[0][m] && d->known[1][m]);
	changes(o, "What changed at the end, by allocation site", d->changes, d->change_count, max);
	return o->b->failed ? mr_oom(err) : MR_OK;
}

mr_status rd_diff_md(const df_result *d, const rp_report *before, const rp_report *after,
                     const rd_options *opt, size_t max_changes, mr_buf *out, mr_error *err)
{
	dt_out o = {out, opt, 1};
	return write_diff(&o, d, before, after, max_changes, err);
}

mr_status rd_diff_text(const df_result *d, const rp_report *before, const rp_report *after,
                       const rd_options *opt, size_t max_changes, mr_buf *out, mr_error *err)
{
	mr_buf text = {0};
	dt_out o = {&text, opt, 0};
	mr_status st = write_diff(&o, d, before, after, max_changes, err);
	if (!st) /* as the text report: at most RD_TEXT_COLUMNS wide */
		rd_wrap(out, text.data ? text.data : "", text.len, RD_TEXT_COLUMNS);
	if (!st && out->failed)
		st = mr_oom(err);
	mr_buf_free(&text);
	return st;
}
