/* render_text.c: a terminal summary. Every string that can hold an input's bytes (names,
 * paths, the verdict and advice that quote them) goes through mr_buf_plain: control
 * characters, invalid UTF-8 and bidirectional controls become U+FFFD. */
#include "render/render_text.h"

#include <inttypes.h>
#include <string.h>

#include "analyze/text_devices.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/escape.h"
#include "base/mem.h"
#include "base/units.h"
#include "render/html_util.h"
#include "render/redact.h"
#include "report/view.h"

/* Strings from a snapshot or log, made harmless for a terminal. */
static void safe(mr_buf *b, const char *s)
{
	mr_buf_plain(b, s, strlen(s));
}

/* Prose of the diagnosis: its paths redacted when asked, then made harmless. */
static void prose(mr_buf *b, const rd_options *opt, const char *text, const ad_paths *paths)
{
	mr_buf tmp = {0};
	rd_prose(&tmp, opt, text, paths);
	if (tmp.failed)
		b->failed = 1;
	safe(b, tmp.data ? tmp.data : "");
	mr_buf_free(&tmp);
}

static void line_bytes(mr_buf *b, const char *label, uint64_t v)
{
	char s[32];
	mr_format_bytes(s, sizeof s, v);
	mr_buf_printf(b, "  %-26s %12s  (%" PRIu64 " bytes)\n", label, s, v);
}

/* The inputs, the verdict and the OOM. */
static void header(mr_buf *b, const rp_report *run, const rd_options *opt)
{
	mr_buf_puts(b, "memreport: ");
	for (size_t i = 0; i < run->ev.input_count; i++) {
		char pbuf[4096];
		mr_buf_puts(b, i ? ", " : "");
		safe(b, rd_path(opt, run->ev.inputs[i].path, pbuf, sizeof pbuf));
		mr_buf_printf(b, " (%s)", ld_kind_name(run->ev.inputs[i].kind));
	}
	mr_buf_puts(b, "\n");
	const ad_advice *a = &run->advice;
	if (a->verdict && a->verdict[0]) {
		mr_buf_puts(b, "\n");
		safe(b, a->verdict);
		mr_buf_puts(b, "\n");
	}
	if (a->what_ran && a->what_ran[0]) {
		mr_buf_puts(b, "What ran: ");
		safe(b, a->what_ran);
		mr_buf_puts(b, "\n");
	}
	if (a->capacity_line && a->capacity_line[0]) {
		safe(b, a->capacity_line);
		mr_buf_puts(b, "\n");
	}
	if (a->oom.present) {
		char r[32] = "unknown", f[32] = "unknown", l[32], lim[32] = "unknown";
		if (!(a->oom.unknown & AD_OOM_NO_REQUESTED))
			mr_format_bytes(r, sizeof r, a->oom.requested);
		if (!(a->oom.unknown & AD_OOM_NO_FREE_CACHED))
			mr_format_bytes(f, sizeof f, a->oom.free_cached);
		mr_format_bytes(l, sizeof l, a->oom.largest_free);
		if (a->oom.limit)
			mr_format_bytes(lim, sizeof lim, a->oom.limit);
		mr_buf_printf(b,
		              "\nOOM on device %d (cause: %s): requested %s, free cached %s, "
		              "largest free block %s, limit %s\n",
		              a->oom.device, ad_oom_cause_words(&a->oom), r, f,
		              a->oom.largest_unknown ? "unknown" : l, lim);
	}
}

static void advice(mr_buf *b, const ad_advice *a, const rd_options *opt)
{
	if (a->finding_count)
		mr_buf_puts(b, "\nFindings:\n");
	for (size_t i = 0; i < a->finding_count; i++) {
		mr_buf_printf(b, "  [%s] %s: ", ad_severity_name(a->findings[i].severity),
		              a->findings[i].id);
		prose(b, opt, a->findings[i].message, &a->findings[i].paths);
		mr_buf_puts(b, "\n");
	}
	if (a->rec_count)
		mr_buf_puts(b, "\nRecommendations (do the first one first):\n");
	for (size_t i = 0; i < a->rec_count; i++) {
		const ad_recommendation *r = &a->recs[i];
		mr_buf_printf(b, "  %d. ", r->rank);
		safe(b, r->title ? r->title : "");
		mr_buf_printf(b, " [%s]\n     ", r->id);
		prose(b, opt, r->reason, &r->reason_paths);
		mr_buf_puts(b, "\n");
		if (r->change) {
			mr_buf_puts(b, "     change: ");
			for (const char *p = r->change; *p;) {
				size_t line = strcspn(p, "\n");
				mr_buf_plain(b, p, line);
				p += line;
				if (*p == '\n') {
					mr_buf_puts(b, "\n             ");
					p++;
				}
			}
			mr_buf_puts(b, "\n");
		}
	}
}

/* A device described by text evidence (no snapshot). */
static void numbers(mr_buf *b, const an_numbers *d)
{
	mr_buf_printf(b, "\nDevice %d (from %s%s):\n", d->device, ld_kind_name(d->source),
	              d->precision > 1 ? "; table cells are lower bounds" : "");
	/* only what the table or dump gives */
	if (d->known & AN_KNOWN_RESERVED)
		line_bytes(b, "reserved", d->reserved);
	if (d->known & AN_KNOWN_ALLOCATED)
		line_bytes(b, "allocated", d->allocated);
	if (d->known & AN_KNOWN_ACTIVE)
		line_bytes(b, "active", d->active);
	if (d->known & AN_KNOWN_INACTIVE_SPLIT)
		line_bytes(b, "inactive split", d->inactive_split);
	if (d->known & AN_KNOWN_PEAK_ALLOCATED)
		line_bytes(b, "peak allocated", d->peak_allocated);
	if (d->known & AN_KNOWN_PEAK_RESERVED)
		line_bytes(b, "peak reserved", d->peak_reserved);
}

/* A device of the snapshot: its numbers and top allocation sites. */
/* The layout at a rebuilt moment. */
static void moment_lines(mr_buf *b, const an_moments *m, size_t k)
{
	const an_moment *mo = &m->moments[k];
	mr_buf_puts(b, "  At ");
	hu_moment_name(b, m, k);
	mr_buf_printf(b, " (after event %zu, rebuilt from the trace):\n", mo->event);
	line_bytes(b, "reserved", mo->totals.reserved);
	line_bytes(b, "allocated", mo->totals.allocated);
	line_bytes(b, "free cached", mo->totals.free_cached);
	line_bytes(b, "largest free block", mo->totals.largest_free);
	mr_buf_printf(b, "  %-26s %12.1f%%\n", "fragmentation",
	              an_fragmentation(&mo->totals) * 100.0);
}

static void device(mr_buf *b, const an_device *dv, const an_moments *m)
{
	const an_pool *p = &dv->pool[AN_POOL_ALL];
	mr_buf_printf(b, "\nDevice %d: %" PRIu64 " segments%s\n  At the snapshot:\n", dv->device,
	              p->segments, dv->expandable ? " (expandable segments)" : "");
	line_bytes(b, "reserved", p->reserved);
	line_bytes(b, "allocated", p->allocated);
	line_bytes(b, "active", p->active);
	line_bytes(b, "requested", p->requested);
	line_bytes(b, "inactive split", p->inactive_split);
	line_bytes(b, "free cached", p->free_cached);
	line_bytes(b, "largest free block", p->largest_free);
	mr_buf_printf(b, "  %-26s %12.1f%%\n", "fragmentation", dv->fragmentation * 100.0);
	if (dv->pool[AN_POOL_PRIVATE].segments)
		line_bytes(b, "in private pools", dv->pool[AN_POOL_PRIVATE].reserved);
	if (!dv->has_trace) {
		mr_buf_puts(b, "  no trace recorded: peaks unknown\n");
		return;
	}
	mr_buf_puts(b, "  Over the trace:\n");
	line_bytes(b, "peak allocated", dv->peak_allocated);
	line_bytes(b, "peak reserved", dv->peak_reserved);
	mr_buf_printf(b, "  %-26s %12.1f%%  (peak reserved - peak allocated, of peak reserved)\n",
	              "overhead at the peak", an_overhead_at_peak(dv) * 100.0);
	mr_buf_printf(b, "  %-26s %12zu%s\n", "trace events", dv->trace_events,
	              !dv->truncated   ? ""
	              : dv->peak_exact ? "  (truncated: peaks exact within the window, "
	                                 "lower bounds for the run)"
	                               : "  (truncated: peaks are lower bounds)");
	if (m && m->peak != AN_NO_MOMENT && m->peak != m->snapshot)
		moment_lines(b, m, m->peak);
	if (m && m->oom != AN_NO_MOMENT && m->oom != m->snapshot)
		moment_lines(b, m, m->oom);
}

static void frame_line(mr_buf *b, const md_snapshot *s, const rd_options *opt, const md_frame *f)
{
	char pbuf[4096];
	safe(b, md_str(s, f->name));
	mr_buf_puts(b, " (");
	safe(b, rd_path(opt, md_str(s, f->filename), pbuf, sizeof pbuf));
	mr_buf_printf(b, ":%d)", f->line);
}

/* The top sites of one moment: the user's line, then the library frame beside it. */
static void moment_sites(mr_buf *b, const md_snapshot *s, const an_moments *m, size_t k,
                         const rd_options *opt)
{
	const an_moment *mo = &m->moments[k];
	mr_buf_puts(b, "\n  Top live allocation sites at ");
	hu_moment_name(b, m, k);
	mr_buf_puts(b, mo->from_snapshot ? ":\n" : " (rebuilt from the trace):\n");
	for (size_t i = 0; i < mo->site_count && i < 10; i++) {
		const an_usite *site = &mo->sites[i];
		char sz[32];
		mr_format_bytes(sz, sizeof sz, site->bytes);
		mr_buf_printf(b, "  %2zu. %10s in %" PRIu64 " block%s  ", i + 1, sz, site->blocks,
		              site->blocks == 1 ? "" : "s");
		if (site->user)
			frame_line(b, s, opt, site->user);
		else if (site->autograd)
			mr_buf_puts(b, "autograd (backward)");
		else if (site->lib)
			frame_line(b, s, opt, site->lib);
		else
			mr_buf_puts(b, "(no stack recorded)");
		if (site->user && site->autograd) {
			mr_buf_puts(b, "\n        autograd (backward)");
		} else if (site->user && site->lib) {
			mr_buf_puts(b, "\n        via ");
			frame_line(b, s, opt, site->lib);
		}
		mr_buf_puts(b, "\n");
	}
}

/* Sites at the verdict's moment, then at the OOM, the peak and the snapshot (each once). */
static void device_sites(mr_buf *b, const rp_report *run, const an_device *dv,
                         const rd_options *opt)
{
	const an_moments *m = rp_moments(run, dv);
	if (!m)
		return;
	size_t order[4] = {rp_verdict_moment(run, dv), m->oom, m->peak, m->snapshot};
	for (size_t i = 0; i < 4; i++) {
		int seen = order[i] == AN_NO_MOMENT || !m->moments[order[i]].site_count;
		for (size_t j = 0; j < i && !seen; j++)
			seen = order[j] == order[i];
		if (!seen)
			moment_sites(b, &run->ev.snap, m, order[i], opt);
	}
}

mr_status rd_render_text(const rp_report *run, const rd_options *opt, mr_buf *out, mr_error *err)
{
	rp_view view;
	mr_buf text = {0};
	mr_status st = rp_view_init(&view, run, opt->device, err);
	if (st)
		return st;
	header(&text, run, opt);
	advice(&text, &run->advice, opt);
	for (size_t i = 0; i < view.number_count; i++)
		numbers(&text, &view.numbers[i]);
	for (size_t i = 0; i < view.device_count; i++) {
		device(&text, view.devices[i], rp_moments(run, view.devices[i]));
		device_sites(&text, run, view.devices[i], opt);
	}
	rp_view_free(&view);
	if (text.failed)
		out->failed = 1;
	rd_wrap(out, text.data ? text.data : "", text.len, RD_TEXT_COLUMNS);
	mr_buf_free(&text);
	return out->failed ? mr_oom(err) : MR_OK;
}

/* ---- wrapping ------------------------------------------------------------------------------- */

/* Bytes of the UTF-8 character at p (1 for a stray byte), for counting columns. */
static size_t char_len(const char *p, const char *end)
{
	size_t n = 1;
	while (p + n < end && ((unsigned char)p[n] & 0xC0) == 0x80 && n < 4)
		n++;
	return n;
}

/* One line (no newline in it) into out, broken to `columns`. */
static void wrap_line(mr_buf *out, const char *p, const char *end, size_t columns)
{
	size_t indent = 0;
	while (p + indent < end && p[indent] == ' ')
		indent++;
	size_t deeper = MR_MIN(indent + 2, columns / 4); /* the continuation's indentation */
	size_t lead = 0;                                 /* spaces before this piece */
	for (;;) {
		size_t width = lead, fit = 0, space = 0; /* bytes that fit; the last space's */
		const char *q = p;
		while (q < end && width < columns) {
			if (*q == ' ' && q > p)
				space = (size_t)(q - p);
			q += char_len(q, end);
			width++;
			fit = (size_t)(q - p);
		}
		if (q >= end) {
			mr_buf_append(out, p, (size_t)(end - p));
			return;
		}
		/* Over the width: break at the last space (when it leaves more than the indentation
		 * on the line), else inside the word. */
		size_t cut = *q == ' ' ? fit : space > indent ? space : fit;
		while (cut > 0 && p[cut - 1] == ' ')
			cut--;
		mr_buf_append(out, p, cut ? cut : fit);
		mr_buf_putc(out, '\n');
		p += cut ? cut : fit;
		while (p < end && *p == ' ')
			p++;
		if (p >= end)
			return;
		for (size_t i = 0; i < deeper; i++)
			mr_buf_putc(out, ' ');
		lead = deeper;
		indent = 0;
	}
}

void rd_wrap(mr_buf *out, const char *text, size_t len, size_t columns)
{
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *line_end = nl ? nl : end;
		wrap_line(out, p, line_end, columns);
		if (nl)
			mr_buf_putc(out, '\n');
		p = nl ? nl + 1 : end;
	}
}
