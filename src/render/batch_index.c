/* batch_index.c: the batch's index of runs, as JSON and as a sortable HTML table. */
#include "render/batch_index.h"

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
#include "report/view.h"

static char *settings_text(const rp_report *run)
{
	if (!run->ev.has_snapshot || !run->ev.snap.settings.present)
		return mr_strndup("", 0);
	const md_settings *cfg = &run->ev.snap.settings;
	const char *conf = md_str(&run->ev.snap, cfg->conf);
	if (conf[0])
		return mr_strdup(conf);
	mr_buf b = {0};
	if (cfg->expandable_segments)
		mr_buf_puts(&b, "expandable_segments:True");
	if (cfg->max_split_size != UINT64_MAX)
		mr_buf_printf(&b, "%smax_split_size_mb:%" PRIu64, b.len ? "," : "",
		              cfg->max_split_size / MR_MIB);
	if (cfg->gc_threshold > 0)
		mr_buf_printf(&b, "%sgarbage_collection_threshold:%g", b.len ? "," : "",
		              cfg->gc_threshold);
	if (!b.len)
		mr_buf_puts(&b, "defaults");
	if (b.failed) {
		mr_buf_free(&b);
		return NULL;
	}
	return b.data;
}

/* The facts of the device the row stands for: the one with the most reserved memory. */
static void device_facts(const rp_view *view, ix_row *r)
{
	const an_device *best = NULL;
	for (size_t i = 0; i < view->device_count; i++) {
		const an_device *dv = view->devices[i];
		r->device_count++;
		if (!best || dv->pool[AN_POOL_ALL].reserved > best->pool[AN_POOL_ALL].reserved)
			best = dv;
	}
	if (best) {
		r->has_peaks = best->has_trace;
		r->peak_reserved =
		    best->has_trace ? best->peak_reserved : best->pool[AN_POOL_ALL].reserved;
		r->peak_allocated =
		    best->has_trace ? best->peak_allocated : best->pool[AN_POOL_ALL].allocated;
		r->fragmentation = best->fragmentation;
	} else if (!view->report->ev.has_snapshot) {
		/* Text evidence only: memory_stats() is exact, a memory_summary() table close. */
		const an_numbers *top = NULL;
		for (size_t i = 0; i < view->number_count; i++) {
			r->device_count++;
			if (!top || view->numbers[i].reserved > top->reserved)
				top = &view->numbers[i];
		}
		if (top) {
			r->has_peaks = top->has_peaks;
			r->peak_reserved = top->has_peaks ? top->peak_reserved : top->reserved;
			r->peak_allocated = top->has_peaks ? top->peak_allocated : top->allocated;
		}
		r->fragmentation = -1.0; /* needs the blocks of a snapshot */
	}
}

mr_status ix_row_of(const rp_report *run, const rd_options *opt, ix_row *r, mr_error *err)
{
	memset(r, 0, sizeof *r);
	rp_view view;
	mr_status st = rp_view_init(&view, run, opt->device, err);
	if (st)
		return st;
	r->has_snapshot = run->ev.has_snapshot;
	device_facts(&view, r);
	rp_view_free(&view);
	const ad_advice *a = &run->advice;
	if (!(r->settings = settings_text(run)) ||
	    (a->oom.present && !(r->oom_cause = mr_strdup(ad_cause_name(a->oom.cause)))) ||
	    (a->rec_count &&
	     (!(r->rec_id = mr_strdup(a->recs[0].id)) ||
	      (a->recs[0].title && !(r->rec_title = mr_strdup(a->recs[0].title))))) ||
	    (a->verdict && !(r->verdict = mr_strdup(a->verdict)))) {
		ix_row_free(r);
		return mr_oom(err);
	}
	return MR_OK;
}

void ix_row_free(ix_row *r)
{
	free(r->settings);
	free(r->oom_cause);
	free(r->rec_id);
	free(r->rec_title);
	free(r->verdict);
	memset(r, 0, sizeof *r);
}

mr_status rd_index_json(const ar_set *set, const ix_line *lines, mr_buf *b, mr_error *err)
{
	mr_buf_puts(b, "{\n\"schema\": \"memreport-batch/1\",\n\"memreport\": \"" MEMREPORT_VERSION
	               "\",\n\"runs\": [");
	for (size_t i = 0; i < set->count; i++) {
		const ar_run *r = &set->runs[i];
		const ix_line *x = &lines[i];
		const ix_row *e = x->row;
		mr_buf_puts(b, i ? ",\n{" : "\n{");
		mr_buf_puts(b, "\"name\": ");
		mr_json_str(b, r->name);
		mr_buf_puts(b, ", \"group\": ");
		mr_json_str(b, r->group);
		if (r->rank >= 0)
			mr_buf_printf(b, ", \"rank\": %d", r->rank);
		else
			mr_buf_puts(b, ", \"rank\": null");
		if (r->iteration >= 0)
			mr_buf_printf(b, ", \"iteration\": %ld", r->iteration);
		else
			mr_buf_puts(b, ", \"iteration\": null");
		mr_buf_puts(b, ", \"inputs\": [");
		for (size_t k = 0; k < r->member_count; k++) {
			mr_buf_puts(b, k ? ", " : "");
			mr_json_str(b, r->members[k].name);
		}
		mr_buf_puts(b, "], \"report\": ");
		if (x->done)
			mr_buf_printf(b, "\"%s.html\"", r->slug); /* slugs need no escaping */
		else
			mr_buf_puts(b, "null");
		mr_buf_puts(b, ", \"error\": ");
		mr_json_str(b, x->done ? NULL : (x->error ? x->error : "not processed"));
		if (!x->done) {
			mr_buf_puts(b, ", \"summary\": null, \"result\": null}");
			continue;
		}
		mr_buf_puts(b, ",\n \"summary\": {\"settings\": ");
		mr_json_str(b, e->settings);
		if (e->device_count) {
			mr_buf_printf(
			    b,
			    ", \"peak_reserved_bytes\": %" PRIu64
			    ", \"peak_allocated_bytes\": %" PRIu64 ", \"peaks_recorded\": %s",
			    e->peak_reserved, e->peak_allocated, e->has_peaks ? "true" : "false");
			if (e->fragmentation >= 0)
				mr_buf_printf(b, ", \"fragmentation\": %.4f", e->fragmentation);
			else
				mr_buf_puts(b, ", \"fragmentation\": null");
		} else
			mr_buf_puts(b, ", \"peak_reserved_bytes\": null, \"peak_allocated_bytes\": "
			               "null, \"peaks_recorded\": false, \"fragmentation\": null");
		mr_buf_puts(b, ", \"oom_cause\": ");
		mr_json_str(b, e->oom_cause);
		mr_buf_puts(b, ", \"first_recommendation\": ");
		mr_json_str(b, e->rec_id);
		mr_buf_puts(b, "},\n \"result\": ");
		/* The run's own memreport/1 document, as written by rd_render_json. */
		size_t n = x->json_len;
		while (n && (x->json[n - 1] == '\n' || x->json[n - 1] == ' '))
			n--;
		if (n)
			mr_buf_append(b, x->json, n);
		else
			mr_buf_puts(b, "null");
		mr_buf_puts(b, "}");
	}
	mr_buf_puts(b, "\n]\n}\n");
	return b->failed ? mr_oom(err) : MR_OK;
}

static void esc(mr_buf *b, const char *s)
{
	mr_buf_html(b, s, strlen(s));
}

static void bytes_cell(mr_buf *b, uint64_t v, int exact)
{
	char s[32];
	mr_format_bytes(s, sizeof s, v);
	mr_buf_printf(b, "<td class=n data-v=%" PRIu64 " title=\"%" PRIu64 " bytes%s\">%s%s</td>",
	              v, v, exact ? "" : " at the snapshot: no peak recorded", s, exact ? "" : "*");
}

/* The page's body: a summary line and the table. */
static void index_body(const ar_set *set, const ix_line *lines, mr_buf *b)
{
	size_t failed = 0, ooms = 0;
	for (size_t i = 0; i < set->count; i++) {
		failed += !lines[i].done;
		ooms += lines[i].done && lines[i].row->oom_cause;
	}
	mr_buf_puts(b, "<h1>memreport: runs</h1>");
	mr_buf_printf(b,
	              "<p class=muted>%zu run%s, %zu with an out-of-memory error, %zu that could "
	              "not be read. Click a column title to sort. The peaks are the trace's "
	              "highest reserved and allocated bytes (each at its own event); sizes marked "
	              "* are the snapshot's own: no trace or memory_stats() recorded the peak. "
	              "Fragmentation (1 \xe2\x88\x92 largest free block / free cached) is the "
	              "snapshot's.</p>",
	              set->count, set->count == 1 ? "" : "s", ooms, failed);
	mr_buf_puts(
	    b, "<table><thead><tr><th data-k=t>Run</th><th data-k=n>Rank</th>"
	       "<th data-k=t>Allocator settings</th><th data-k=n class=n>Reserved at the peak</th>"
	       "<th data-k=n class=n>Allocated at the peak</th><th data-k=n class=n>Fragmentation "
	       "at the snapshot</th>"
	       "<th data-k=t>OOM cause</th><th data-k=t>First recommendation</th>"
	       "<th data-k=t>Report</th></tr></thead><tbody>\n");
	for (size_t i = 0; i < set->count; i++) {
		const ar_run *r = &set->runs[i];
		const ix_line *x = &lines[i];
		const ix_row *e = x->row;
		mr_buf_puts(b, x->done ? "<tr><td>" : "<tr class=err><td>");
		esc(b, r->name);
		if (r->iteration >= 0)
			mr_buf_printf(b, " <span class=muted>(iteration %ld)</span>", r->iteration);
		if (r->rank >= 0)
			mr_buf_printf(b, "</td><td class=n data-v=%d>%d</td>", r->rank, r->rank);
		else
			mr_buf_puts(b, "</td><td class=n data-v=-1>&mdash;</td>");
		if (!x->done) {
			mr_buf_puts(
			    b, "<td></td><td class=n data-v=-1></td><td class=n data-v=-1></td>"
			       "<td class=n data-v=-1></td><td></td><td></td><td class=msg>");
			mr_buf_puts(b, "could not be read: ");
			esc(b, x->error ? x->error : "not processed");
			mr_buf_puts(b, "</td></tr>\n");
			continue;
		}
		mr_buf_puts(b, "<td><code>");
		esc(b, e->settings[0] ? e->settings : "(not recorded)");
		mr_buf_puts(b, "</code></td>");
		if (e->device_count) {
			bytes_cell(b, e->peak_reserved, e->has_peaks);
			bytes_cell(b, e->peak_allocated, e->has_peaks);
			if (e->fragmentation >= 0)
				mr_buf_printf(b, "<td class=n data-v=%.4f>%.1f%%</td>",
				              e->fragmentation, e->fragmentation * 100.0);
			else
				mr_buf_puts(b, "<td class=n data-v=-1 title=\"needs a "
				               "snapshot\">&mdash;</td>");
		} else {
			mr_buf_puts(
			    b, "<td class=n data-v=-1>&mdash;</td><td class=n data-v=-1>&mdash;"
			       "</td><td class=n data-v=-1>&mdash;</td>");
		}
		if (e->oom_cause) {
			mr_buf_puts(b, "<td class=oom>");
			esc(b, e->oom_cause);
			mr_buf_puts(b, "</td>");
		} else {
			mr_buf_puts(b, "<td class=muted>no OOM</td>");
		}
		mr_buf_puts(b, "<td>");
		if (e->rec_id) {
			esc(b, e->rec_title && e->rec_title[0] ? e->rec_title : e->rec_id);
			mr_buf_puts(b, " <span class=muted>(");
			esc(b, e->rec_id);
			mr_buf_puts(b, ")</span>");
		} else {
			mr_buf_puts(b, "<span class=muted>none</span>");
		}
		/* slugs are [A-Za-z0-9._-]: safe in an href as they are */
		mr_buf_printf(b, "</td><td><a href=\"%s.html\">report</a></td></tr>\n", r->slug);
	}
	mr_buf_puts(b, "</tbody></table>");
}

mr_status rd_index_html(const ar_set *set, const ix_line *lines, mr_buf *out, mr_error *err)
{
	static const char *const css[] = {"index.css", NULL}, *const js[] = {"index.js", NULL};
	mr_buf body = {0};
	index_body(set, lines, &body);
	mr_status st = body.failed
	                   ? mr_oom(err)
	                   : rd_page(out, "memreport: runs", css, js, body.data, body.len, err);
	mr_buf_free(&body);
	return st;
}
