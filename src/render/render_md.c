/* render_md.c: a Markdown summary for pasting into a GitHub issue.
 *
 * At most RP_MD_MAX_LINES lines: the verdict, a key-numbers table per device, the OOM numbers,
 * the top three recommendations and the top allocation sites. Every string from the inputs is
 * escaped with hu_md_text (entities for HTML, backslashes for Markdown, a word joiner inside
 * what GitHub would link or ping, U+FFFD for bidirectional controls), so a hostile frame name
 * can neither open an HTML tag, break the table, ping a user nor read as another name. */
#include "render/render_md.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "analyze/text_devices.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/escape.h"
#include "base/mem.h"
#include "base/units.h"
#include "base/version.h"
#include "render/html_util.h"
#include "render/redact.h"
#include "report/view.h"

enum {
	RP_MD_MAX_LINES = 60,
	MD_MAX_DEVICES = 8,
	MD_MAX_RECS = 3,
	MD_MAX_SITES = 5,
	MD_MAX_CHANGE_LINES = 3,
	MD_TEXT_CAP = 160,
};

static const char *md_bytes(char out[32], uint64_t v)
{
	mr_format_bytes(out, 32, v);
	return out;
}

/* Diagnosis prose, with the paths it quotes (and marks) redacted like frames, escaped for
 * Markdown. Nothing else in it is a path: code such as `batch_size //= 2` stays as written. */
static void md_advice(mr_buf *b, const rd_options *opt, const char *text, const ad_paths *paths,
                      size_t cap)
{
	mr_buf marked = {0};
	rd_prose(&marked, opt, text ? text : "", paths);
	if (marked.failed)
		b->failed = 1;
	hu_md_text(b, marked.data ? marked.data : "", cap);
	mr_buf_free(&marked);
}

/* The exact change (code or an environment line, never a recorded path: it is not redacted) as
 * a fenced block when it is plain text, else escaped inline. */
static void md_change(mr_buf *b, const char *change)
{
	if (!change || !change[0])
		return;
	size_t run = 0, longest = 0, lines = 1;
	int plain = 1;
	for (const char *p = change; *p; p++) {
		run = *p == '`' ? run + 1 : 0;
		longest = MR_MAX(longest, run);
		lines += *p == '\n';
		if (strchr("<>&", *p) || ((unsigned char)*p < 0x20 && *p != '\n') ||
		    mr_bidi_control_len(p, strlen(p)))
			plain = 0;
	}
	if (!plain || lines > MD_MAX_CHANGE_LINES || longest >= 3) {
		mr_buf_puts(b, "   Change: ");
		hu_md_text(b, change, MD_TEXT_CAP * 2);
		mr_buf_puts(b, "\n");
		return;
	}
	mr_buf_puts(b, "   ```\n   ");
	for (const char *p = change; *p; p++) {
		mr_buf_putc(b, *p);
		if (*p == '\n')
			mr_buf_puts(b, "   ");
	}
	mr_buf_puts(b, "\n   ```\n");
}

static void md_frame_text(mr_buf *b, const rd_options *opt, const md_snapshot *s, const md_frame *f)
{
	char pbuf[4096];
	const char *path = rd_path(opt, md_str(s, f->filename), pbuf, sizeof pbuf);
	const char *base = strrchr(path, '/');
	hu_md_text(b, md_str(s, f->name), MD_TEXT_CAP);
	mr_buf_puts(b, " (");
	hu_md_text(b, base && base[1] ? base + 1 : path, MD_TEXT_CAP);
	mr_buf_printf(b, ":%d)", f->line);
}

/* Cuts b to at most max lines, closing an open code fence. */
static void cap_lines(mr_buf *b, size_t max)
{
	size_t lines = 0, fences = 0;
	for (size_t i = 0; i < b->len; i++) {
		if (b->data[i] != '\n')
			continue;
		size_t start = i;
		while (start > 0 && b->data[start - 1] != '\n')
			start--;
		const char *line = b->data + start;
		while (*line == ' ')
			line++;
		if (strncmp(line, "```", 3) == 0)
			fences++;
		if (++lines == max - 1 && i + 1 < b->len) {
			b->len = i + 1;
			b->data[b->len] = '\0';
			mr_buf_puts(b, fences % 2 ? "   ```\n" : "");
			mr_buf_puts(b, "(cut to fit a ticket: see the HTML report)\n");
			return;
		}
	}
}

/* The key numbers of every device shown, one table row each. */
static void device_table(mr_buf *b, const rp_report *run, const rp_view *view)
{
	char v[8][32];
	if (!run->ev.has_snapshot || !run->an.device_count)
		return;
	mr_buf_puts(b, "At the snapshot, and the trace's peaks:\n\n"
	               "| device | reserved | allocated | active | free cached | non-releasable "
	               "| largest free block | fragmentation | peak allocated | peak reserved | "
	               "overhead at the peak |\n"
	               "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (size_t d = 0; d < view->device_count && d < MD_MAX_DEVICES; d++) {
		const an_device *dv = view->devices[d];
		const an_pool *p = &dv->pool[AN_POOL_ALL];
		char over[16] = "n/a";
		if (dv->has_trace)
			snprintf(over, sizeof over, "%.1f%%", an_overhead_at_peak(dv) * 100.0);
		mr_buf_printf(b, "| %d | %s | %s | %s | %s | %s | %s | %.1f%% | %s | %s | %s |\n",
		              dv->device, md_bytes(v[0], p->reserved), md_bytes(v[1], p->allocated),
		              md_bytes(v[2], p->active), md_bytes(v[3], p->free_cached),
		              md_bytes(v[4], p->inactive_split), md_bytes(v[5], p->largest_free),
		              dv->fragmentation * 100.0,
		              dv->has_trace ? md_bytes(v[6], dv->peak_allocated) : "n/a",
		              dv->has_trace ? md_bytes(v[7], dv->peak_reserved) : "n/a", over);
	}
	if (view->device_count > MD_MAX_DEVICES)
		mr_buf_printf(b, "\n%zu more devices in the full report.\n",
		              view->device_count - MD_MAX_DEVICES);
	mr_buf_puts(b, "\n");
}

/* Without a snapshot: the devices the text evidence describes. */
static void numbers_table(mr_buf *b, const rp_view *view)
{
	char v[6][32];
	if (!view->number_count)
		return;
	mr_buf_puts(b, "| device | reserved | allocated | active | non-releasable | "
	               "peak allocated | peak reserved | source |\n"
	               "|---:|---:|---:|---:|---:|---:|---:|---|\n");
	for (size_t i = 0; i < view->number_count && i < MD_MAX_DEVICES; i++) {
		const an_numbers *d = &view->numbers[i];
		unsigned k = d->known;
		mr_buf_printf(
		    b, "| %d | %s | %s | %s | %s | %s | %s | %s |\n", d->device,
		    k & AN_KNOWN_RESERVED ? md_bytes(v[0], d->reserved) : "n/a",
		    k & AN_KNOWN_ALLOCATED ? md_bytes(v[1], d->allocated) : "n/a",
		    k & AN_KNOWN_ACTIVE ? md_bytes(v[2], d->active) : "n/a",
		    k & AN_KNOWN_INACTIVE_SPLIT ? md_bytes(v[3], d->inactive_split) : "n/a",
		    k & AN_KNOWN_PEAK_ALLOCATED ? md_bytes(v[4], d->peak_allocated) : "n/a",
		    k & AN_KNOWN_PEAK_RESERVED ? md_bytes(v[5], d->peak_reserved) : "n/a",
		    d->precision > 1 ? "memory_summary() (at least)" : "memory_stats()");
	}
	mr_buf_puts(b, "\n");
}

static void oom_line(mr_buf *b, const ad_oom *o)
{
	char v[4][32];
	if (o->present && (o->unknown & AD_OOM_NO_REQUESTED)) {
		mr_buf_printf(b,
		              "**Out of memory** on device %d: the message gives no sizes; cause "
		              "%s.\n\n",
		              o->device, ad_oom_cause_words(o));
	} else if (o->present && o->largest_unknown) {
		mr_buf_printf(
		    b,
		    "**Out of memory** on device %d: requested %s; %s reserved but "
		    "unallocated (layout unknown without a snapshot); limit %s; cause "
		    "%s.\n\n",
		    o->device,
		    o->unknown & AD_OOM_NO_REQUESTED ? "unknown" : md_bytes(v[0], o->requested),
		    o->unknown & AD_OOM_NO_FREE_CACHED ? "unknown" : md_bytes(v[2], o->free_cached),
		    o->limit ? md_bytes(v[3], o->limit) : "unknown", ad_oom_cause_words(o));
	} else if (o->present) {
		mr_buf_printf(
		    b,
		    "**Out of memory** on device %d: requested %s; largest free block %s; free "
		    "cached %s in %" PRIu64 " pieces; limit %s; cause %s.\n\n",
		    o->device, md_bytes(v[0], o->requested), md_bytes(v[1], o->largest_free),
		    md_bytes(v[2], o->free_cached), o->free_pieces,
		    o->limit ? md_bytes(v[3], o->limit) : "unknown", ad_oom_cause_words(o));
	}
}

static void recommendations(mr_buf *b, const ad_advice *ad, const rd_options *opt)
{
	if (!ad->rec_count)
		return;
	mr_buf_puts(b, "#### What to change\n\n");
	for (size_t i = 0; i < ad->rec_count && i < MD_MAX_RECS; i++) {
		const ad_recommendation *r = &ad->recs[i];
		mr_buf_printf(b, "%zu. **", i + 1);
		md_advice(b, opt, r->title ? r->title : r->id, NULL, MD_TEXT_CAP);
		mr_buf_puts(b, "** (");
		hu_md_text(b, r->id, 40);
		mr_buf_puts(b, ")");
		if (r->reason && r->reason[0]) {
			mr_buf_puts(b, ": ");
			md_advice(b, opt, r->reason, &r->reason_paths, 400);
		}
		mr_buf_puts(b, "\n");
		md_change(b, r->change);
	}
	if (ad->rec_count > MD_MAX_RECS)
		mr_buf_printf(b, "\n%zu more in the full report.\n", ad->rec_count - MD_MAX_RECS);
	mr_buf_puts(b, "\n");
}

/* A site's own line and what is beside it, for a table cell. */
static void md_site(mr_buf *b, const rd_options *opt, const md_snapshot *s, const an_usite *site)
{
	if (site->user)
		md_frame_text(b, opt, s, site->user);
	else if (site->autograd)
		mr_buf_puts(b, "autograd (backward)");
	else if (site->lib)
		md_frame_text(b, opt, s, site->lib);
	else
		mr_buf_puts(b, "(no stack recorded)");
	mr_buf_puts(b, " | ");
	if (site->user && site->autograd)
		mr_buf_puts(b, "autograd (backward)");
	else if (site->user && site->lib)
		md_frame_text(b, opt, s, site->lib);
}

/* Sites at the verdict's moment, on the diagnosed device (else the first shown with any). */
static void top_sites(mr_buf *b, const rp_report *run, const rp_view *view, const rd_options *opt)
{
	char v[32];
	const an_device *pick = NULL;
	for (size_t d = 0; d < view->device_count; d++) {
		const an_device *dv = view->devices[d];
		const an_moments *m = rp_moments(run, dv);
		size_t k = rp_verdict_moment(run, dv);
		if (!m || k == AN_NO_MOMENT || !m->moments[k].site_count)
			continue;
		if (!pick || dv->device == run->advice.device)
			pick = dv;
	}
	if (!pick)
		return;
	const an_moments *m = rp_moments(run, pick);
	size_t k = rp_verdict_moment(run, pick);
	const an_moment *mo = &m->moments[k];
	mr_buf_printf(b, "#### Top allocation sites (device %d, live at ", pick->device);
	hu_moment_name(b, m, k);
	mr_buf_puts(b, ")\n\n| bytes | blocks | your code | via |\n|---:|---:|---|---|\n");
	for (size_t i = 0; i < mo->site_count && i < MD_MAX_SITES; i++) {
		const an_usite *site = &mo->sites[i];
		mr_buf_printf(b, "| %s | %" PRIu64 " | ", md_bytes(v, site->bytes), site->blocks);
		md_site(b, opt, &run->ev.snap, site);
		mr_buf_puts(b, " |\n");
	}
	mr_buf_puts(b, "\n");
}

/* What made the report, for a ticket: memreport's version and the inputs it read. */
static void provenance(mr_buf *b, const rp_report *run, const rd_options *opt)
{
	mr_buf_puts(b, "<sub>memreport " MEMREPORT_VERSION " from ");
	for (size_t i = 0; i < run->ev.input_count; i++) {
		char pbuf[4096];
		mr_buf_puts(b, i ? ", " : "");
		hu_md_text(b, rd_path(opt, run->ev.inputs[i].path, pbuf, sizeof pbuf), MD_TEXT_CAP);
		mr_buf_printf(b, " (%s)", ld_kind_name(run->ev.inputs[i].kind));
	}
	mr_buf_puts(b, "</sub>\n\n");
}

mr_status rd_render_md(const rp_report *run, const rd_options *opt, mr_buf *out, mr_error *err)
{
	mr_buf b = {0};
	const ad_advice *ad = &run->advice;
	rp_view view;
	mr_status st = rp_view_init(&view, run, opt->device, err);
	if (st)
		return st;
	mr_buf_puts(&b, "### memreport\n\n**");
	md_advice(&b, opt, ad->verdict, NULL, 600);
	mr_buf_puts(&b, "**\n\n");
	if (ad->what_ran && ad->what_ran[0]) {
		mr_buf_puts(&b, "What ran: ");
		md_advice(&b, opt, ad->what_ran, NULL, 300);
		mr_buf_puts(&b, "\n\n");
	}
	if (ad->capacity_line && ad->capacity_line[0]) {
		md_advice(&b, opt, ad->capacity_line, NULL, 1000);
		mr_buf_puts(&b, "\n\n");
	}
	provenance(&b, run, opt);
	device_table(&b, run, &view);
	numbers_table(&b, &view);
	oom_line(&b, &ad->oom);
	recommendations(&b, ad, opt);
	top_sites(&b, run, &view, opt);
	mr_buf_printf(&b,
	              "<sub>memreport: %zu finding%s, %zu recommendation%s; the HTML report has "
	              "the segment maps, timeline and stacks.</sub>\n",
	              ad->finding_count, ad->finding_count == 1 ? "" : "s", ad->rec_count,
	              ad->rec_count == 1 ? "" : "s");
	cap_lines(&b, RP_MD_MAX_LINES);
	if (b.failed)
		st = mr_oom(err);
	else
		mr_buf_append(out, b.data, b.len);
	if (out->failed)
		st = mr_oom(err);
	mr_buf_free(&b);
	rp_view_free(&view);
	return st;
}
