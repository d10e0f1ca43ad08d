/* render_html.c: the self-contained HTML report.
 *
 * One file in the page shell (page.c: templates/page.html, report.css and report.js inlined,
 * one Content-Security-Policy for every page); segment maps are PNG data: URIs and the
 * timeline inline SVG (html_maps.c), the allocation sites have their own file (html_sites.c). Every
 * string that comes from the inputs goes through mr_buf_html (hu_text). Output is deterministic: no
 * time, stable orders, fixed number formats. Sections are capped so the page stays under
 * RP_HTML_MAX whatever the input; what was left out is said in the notes. */
#include "render/render_html.h"

#include <cmark.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/text_devices.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/units.h"
#include "render/html_maps.h"
#include "render/html_parts.h"
#include "render/html_sites.h"
#include "render/html_util.h"
#include "render/html_capacity.h"
#include "render/page.h"
#include "render/page_data.h"
#include "render/redact.h"
#include "render/templates.h"
#include "report/view.h"

/* Prose from the diagnosis may quote frames: the paths it marks (paths, may be NULL) obey
 * --redact-paths too. Nothing else in it is a path: code such as `batch_size //= 2` stays. */
static void advice_text(hr_ctx *c, const char *s, const ad_paths *paths, size_t cap)
{
	mr_buf marked = {0};
	rd_prose(&marked, c->opt, s ? s : "", paths);
	if (marked.failed)
		c->b->failed = 1;
	hu_text(c->b, marked.data ? marked.data : "", cap);
	mr_buf_free(&marked);
}

static hr_oom oom_facts(const rp_report *run, const rp_view *view)
{
	hr_oom o = {0};
	const ad_oom *a = &run->advice.oom;
	if (a->present && (a->unknown & AD_OOM_NO_REQUESTED))
		return o; /* a message without sizes: the findings say so, no bars to draw */
	if (a->present && rp_view_shows(view, a->device)) {
		o = (hr_oom){1,
		             a->device,
		             a->requested,
		             a->largest_free,
		             a->free_cached,
		             a->free_pieces,
		             a->limit,
		             a->reserved,
		             a->allocated,
		             NULL,
		             a->largest_unknown};
		if (a->cause != AD_CAUSE_UNKNOWN)
			o.cause = ad_oom_cause_words(a);
		return o;
	}
	for (size_t d = 0; d < view->device_count; d++) {
		const an_device *dv = view->devices[d];
		const md_device *md = md_find_device(&run->ev.snap, dv->device);
		if (!dv->oom_events || !md || dv->last_oom_event >= md->event_count)
			continue;
		/* The snapshot's layout is the one the failed request met when the snapshot was
		 * taken at the OOM (the usual observer); the large pool serves requests over 1 MiB.
		 */
		const an_pool *p = &dv->pool[AN_POOL_LARGE];
		o.present = 1;
		o.device = dv->device;
		o.requested = md->events[dv->last_oom_event].size;
		o.largest_free = p->largest_free;
		o.free_cached = p->free_cached;
		o.free_pieces = p->free_blocks;
		o.reserved = dv->pool[AN_POOL_ALL].reserved;
		o.allocated = dv->pool[AN_POOL_ALL].allocated;
		return o;
	}
	return o;
}

/* ---- verdict ---- */

/* The diagnosis' verdict, coloured by the worst finding. */
static void verdict(hr_ctx *c, const hr_oom *oom)
{
	const ad_advice *ad = &c->run->advice;
	int worst = -1;
	for (size_t i = 0; i < ad->finding_count; i++)
		worst = MR_MAX(worst, (int)ad->findings[i].severity);
	const char *cls = oom->present || worst == AD_CRITICAL ? "bad"
	                  : worst == AD_WARNING                ? "warn"
	                                                       : "ok";
	mr_buf_printf(c->b, "<p class=\"verdict %s\" id=verdict>", cls);
	advice_text(c, ad->verdict, NULL, 1000);
	mr_buf_puts(c->b, "</p>");
	if (ad->what_ran && ad->what_ran[0]) {
		mr_buf_puts(c->b, "<p class=what-ran id=what-ran>What ran: ");
		advice_text(c, ad->what_ran, NULL, 400);
		mr_buf_puts(c->b, "</p>");
	}
}

/* ---- cards per device and pool ---- */

static void card(hr_ctx *c, const char *label, uint64_t v, const char *hint)
{
	char s[32];
	mr_buf_printf(c->b,
	              "<div class=card><div class=k>%s</div><div class=v>%s</div>"
	              "<div class=sub>%" PRIu64 " B%s%s</div></div>",
	              label, hr_bytes(s, v), v, hint ? " \xc2\xb7 " : "", hint ? hint : "");
}

static void pool_row(hr_ctx *c, const char *name, const an_pool *p)
{
	char s[7][32];
	double frag = p->free_cached ? 1.0 - (double)p->largest_free / (double)p->free_cached : 0;
	mr_buf_printf(c->b,
	              "<tr><th>%s</th><td class=n>%" PRIu64 "</td><td class=n>%s</td>"
	              "<td class=n>%s</td><td class=n>%s</td><td class=n>%s</td><td class=n>%s</td>"
	              "<td class=n>%s</td><td class=n>%.1f%%</td><td class=n>%s</td></tr>",
	              name, p->segments, hr_bytes(s[0], p->reserved), hr_bytes(s[1], p->allocated),
	              hr_bytes(s[2], p->active), hr_bytes(s[3], p->free_cached),
	              hr_bytes(s[4], p->inactive_split), hr_bytes(s[5], p->largest_free),
	              frag * 100.0, hr_bytes(s[6], p->rounding_waste));
}

/* Without a snapshot: the numbers of a memory_stats() dump or of the last memory_summary()
 * table of each device; table cells are truncated to their unit, so they read "at least". */
static void text_device_cards(hr_ctx *c)
{
	const rp_view *v = c->view;
	if (!v->numbers_in_evidence) {
		mr_buf_puts(c->b, "<p class=muted>No snapshot, memory_summary() table or "
		                  "memory_stats() dump among the inputs: no per-device numbers to "
		                  "show.</p>");
		return;
	}
	for (size_t i = 0; i < v->number_count; i++) {
		const an_numbers *d = &v->numbers[i];
		const char *hint = d->precision > 1 ? "at least (table cell)" : NULL;
		mr_buf_printf(c->b, "<h3>Device %d <span class=muted>from the %s</span></h3>",
		              d->device,
		              d->source == LD_MEMORY_STATS ? "memory_stats() dump"
		                                           : "last memory_summary() table");
		mr_buf_puts(c->b, "<div class=cards>");
		/* only what the table or dump gives: a pasted part leaves the rest unknown */
		if (d->known & AN_KNOWN_RESERVED)
			card(c, "reserved", d->reserved, hint ? hint : "held from CUDA");
		if (d->known & AN_KNOWN_ALLOCATED)
			card(c, "allocated", d->allocated, hint ? hint : "in live tensors");
		if (d->known & AN_KNOWN_ACTIVE)
			card(c, "active", d->active, hint ? hint : "allocated + pending free");
		if (d->known & AN_KNOWN_INACTIVE_SPLIT)
			card(c, "non-releasable", d->inactive_split,
			     hint ? hint : "free inside split segments");
		if (d->known & AN_KNOWN_PEAK_ALLOCATED)
			card(c, "peak allocated", d->peak_allocated, hint);
		if (d->known & AN_KNOWN_PEAK_RESERVED)
			card(c, "peak reserved", d->peak_reserved, hint);
		mr_buf_puts(c->b, "</div>");
	}
	mr_buf_puts(c->b, "<p class=muted>A table or a memory_stats() dump has totals only: the "
	                  "segment maps, the largest free block and the allocation sites need a "
	                  "snapshot.</p>");
}

/* Every pool's numbers at the snapshot. */
static void pool_table(hr_ctx *c, const an_device *dv)
{
	mr_buf_puts(c->b, "<table class=pools><thead><tr><th>pool</th><th class=n>segments</th>"
	                  "<th class=n>reserved</th><th class=n>allocated</th><th class=n>active"
	                  "</th><th class=n>free cached</th><th class=n>non-releasable</th>"
	                  "<th class=n>largest free block</th><th class=n>fragmentation</th>"
	                  "<th class=n>rounding waste</th></tr></thead><tbody>");
	pool_row(c, "large", &dv->pool[AN_POOL_LARGE]);
	pool_row(c, "small", &dv->pool[AN_POOL_SMALL]);
	if (dv->pool[AN_POOL_PRIVATE].segments)
		pool_row(c, "private", &dv->pool[AN_POOL_PRIVATE]);
	mr_buf_puts(
	    c->b, "</tbody></table><p class=\"muted small\">Every pool at the snapshot. The large "
	          "pool serves requests over 1 MiB, the small pool the rest (in 2 MiB segments)");
	if (dv->pool[AN_POOL_PRIVATE].segments)
		mr_buf_puts(c->b, "; private pools (CUDA graphs, <code>torch.cuda.MemPool</code>) "
		                  "are also counted in the large or small row");
	mr_buf_puts(c->b, ".</p>");
}

static void frag_card(hr_ctx *c, const an_pool *p, const char *moment)
{
	double frag = an_fragmentation(p);
	mr_buf_printf(
	    c->b,
	    "<div class=\"card%s\"><div class=k>fragmentation</div><div class=v>%.1f%%</div>"
	    "<div class=sub>%s \xc2\xb7 1 \xe2\x88\x92 largest free / free cached</div></div>",
	    /* Highlighted only when the scattered free memory is stuck inside split
	     * segments: whole free segments are not fragmentation. */
	    frag >= 0.5 && p->inactive_split >= 64 * MR_MIB ? " hot" : "", frag * 100.0, moment);
}

/* The layout at a rebuilt moment (the peak, the OOM): what the allocator held then. */
static void moment_cards(hr_ctx *c, const an_moments *m, size_t k, const char *what)
{
	const an_moment *mo = &m->moments[k];
	mr_buf_printf(c->b,
	              "<p class=at>At %s <span class=muted>(after event %zu%s)</span></p>"
	              "<div class=cards>",
	              what, mo->event,
	              mo->from_snapshot ? ", the snapshot" : ", rebuilt from the trace");
	card(c, "reserved", mo->totals.reserved, what);
	card(c, "allocated", mo->totals.allocated, what);
	card(c, "free cached", mo->totals.free_cached, what);
	card(c, "largest free block", mo->totals.largest_free, what);
	frag_card(c, &mo->totals, what);
	mr_buf_puts(c->b, "</div>");
}

/* The trace's peaks, each at its own event, and the overhead between them. */
static void peak_cards(hr_ctx *c, const an_device *dv)
{
	const char *bound = !dv->truncated   ? "over the trace"
	                    : dv->peak_exact ? "exact in the trace's window, a lower bound"
	                                     : "over the trace, a lower bound";
	char pct[16];
	snprintf(pct, sizeof pct, "%.1f%%", an_overhead_at_peak(dv) * 100.0);
	mr_buf_puts(c->b, "<p class=at>The peaks <span class=muted>(the trace's highest, each at "
	                  "its own event)</span></p><div class=cards>");
	card(c, "peak allocated", dv->peak_allocated, bound);
	card(c, "peak reserved", dv->peak_reserved, bound);
	mr_buf_printf(c->b,
	              "<div class=card><div class=k>overhead at the peak</div><div class=v>%s</div>"
	              "<div class=sub>peak reserved \xe2\x88\x92 peak allocated, of peak reserved"
	              "</div></div></div>",
	              pct);
}

static void device_cards(hr_ctx *c)
{
	const rp_report *run = c->run;
	mr_buf_puts(c->b, "<section id=devices><h2>Memory by device</h2>");
	if (!run->ev.has_snapshot)
		text_device_cards(c);
	else if (!run->an.device_count)
		mr_buf_puts(c->b, "<p class=muted>The snapshot holds no segments: nothing was "
		                  "allocated.</p>");
	for (size_t d = 0; d < c->view->device_count; d++) {
		const an_device *dv = c->view->devices[d];
		const an_pool *p = &dv->pool[AN_POOL_ALL];
		const an_moments *m = rp_moments(run, dv);
		mr_buf_printf(c->b,
		              "<h3>Device %d <span class=muted>%" PRIu64 " segment%s%s</span></h3>",
		              dv->device, p->segments, p->segments == 1 ? "" : "s",
		              dv->expandable ? ", expandable segments" : "");
		mr_buf_puts(c->b, "<p class=at>At the snapshot</p><div class=cards>");
		card(c, "reserved", p->reserved, "held from CUDA");
		card(c, "allocated", p->allocated, "in live tensors");
		card(c, "active", p->active, "allocated + pending free");
		card(c, "free cached", p->free_cached, "reserved, not allocated");
		card(c, "non-releasable", p->inactive_split, "free inside split segments");
		card(c, "largest free block", p->largest_free, NULL);
		frag_card(c, p, "at the snapshot");
		mr_buf_puts(c->b, "</div>");
		if (dv->has_trace)
			peak_cards(c, dv);
		if (m && m->peak != AN_NO_MOMENT && m->peak != m->snapshot)
			moment_cards(c, m, m->peak, "the peak");
		if (m && m->oom != AN_NO_MOMENT && m->oom != m->snapshot)
			moment_cards(c, m, m->oom, "the out-of-memory moment");
		pool_table(c, dv);
	}
	mr_buf_puts(c->b, "</section>");
}

/* ---- OOM panel ---- */

static void oom_bar(hr_ctx *c, int row, const char *label, uint64_t v, uint64_t scale,
                    const char *cls, int known)
{
	char s[32];
	int y = 8 + row * 34;
	double w = known && scale ? (double)v / (double)scale * 560.0 : 0;
	if (known && v && w < 2)
		w = 2;
	mr_buf_printf(c->b, "<text x=0 y=%d class=lbl>%s</text>", y + 15, label);
	mr_buf_printf(c->b, "<rect x=190 y=%d width=560 height=20 class=track />", y);
	if (known)
		mr_buf_printf(c->b, "<rect x=190 y=%d width=%.1f height=20 class=%s />", y, w, cls);
	mr_buf_printf(c->b, "<text x=%.1f y=%d class=val>%s</text>", 190 + MR_MAX(w, 0) + 8, y + 15,
	              known ? hr_bytes(s, v) : "unknown");
}

static void oom_panel(hr_ctx *c, const hr_oom *o)
{
	if (!o->present)
		return;
	char a[32], l[32], f[32];
	mr_buf_puts(c->b, "<section id=oom class=panel><h2>The out-of-memory moment</h2>");
	if (o->largest_unknown)
		mr_buf_printf(
		    c->b,
		    "<p>Device %d asked for <b>%s</b> in one piece; <b>%s</b> was reserved "
		    "but unallocated (the message does not say how it was cut up: a "
		    "snapshot would)",
		    o->device, hr_bytes(a, o->requested), hr_bytes(f, o->free_cached));
	else
		mr_buf_printf(
		    c->b,
		    "<p>Device %d asked for <b>%s</b> in one piece. The largest free cached "
		    "block was <b>%s</b>; %s was free in %" PRIu64 " cached block%s",
		    o->device, hr_bytes(a, o->requested), hr_bytes(l, o->largest_free),
		    hr_bytes(f, o->free_cached), o->free_pieces, o->free_pieces == 1 ? "" : "s");
	if (o->largest_unknown)
		mr_buf_puts(c->b,
		            o->free_cached < o->requested ? ": not enough even in total." : ".");
	else if (o->free_cached >= o->requested && o->largest_free < o->requested)
		mr_buf_puts(c->b, ": enough in total, but not in one piece.");
	else if (o->free_cached < o->requested)
		mr_buf_puts(c->b, ": not enough even in total.");
	else
		mr_buf_puts(c->b, ".");
	if (o->cause)
		mr_buf_printf(c->b, " Cause: <b>%s</b>.", o->cause);
	mr_buf_puts(c->b, "</p>");
	uint64_t scale = MR_MAX(MR_MAX(o->requested, o->largest_free), o->free_cached);
	if (o->limit)
		scale = MR_MAX(scale, o->limit);
	mr_buf_printf(c->b,
	              "<svg class=oombars viewBox=\"0 0 900 %d\" role=img aria-label=\"request "
	              "against largest free block, free cached and limit\">",
	              34 * (2 + !o->largest_unknown + !!o->limit) + 6);
	int row = 0;
	oom_bar(c, row++, "requested", o->requested, scale, "req", 1);
	if (!o->largest_unknown)
		oom_bar(c, row++, "largest free block", o->largest_free, scale, "largest", 1);
	oom_bar(c, row++, "free cached (all pieces)", o->free_cached, scale, "freec", 1);
	if (o->limit)
		oom_bar(c, row++, "limit", o->limit, scale, "limit", 1);
	mr_buf_puts(c->b, "</svg>");
	if (!o->limit)
		mr_buf_puts(c->b,
		            "<p class=muted>The memory limit is not in the snapshot; give the "
		            "OOM message or the training log as a second input to show it.</p>");
	mr_buf_puts(c->b, "</section>");
}

/* ---- findings and recommendations ---- */

static void findings(hr_ctx *c)
{
	const ad_advice *ad = &c->run->advice;
	if (!ad->finding_count)
		return;
	mr_buf_puts(c->b, "<section id=findings><h2>Findings</h2><ul class=findings>");
	for (size_t i = 0; i < ad->finding_count && i < HR_MAX_FINDINGS; i++) {
		const ad_finding *f = &ad->findings[i];
		mr_buf_printf(c->b, "<li class=%s><span class=sev>%s</span> ",
		              ad_severity_name(f->severity), ad_severity_name(f->severity));
		advice_text(c, f->message, &f->paths, 2000);
		mr_buf_puts(c->b, " <code class=id>");
		hr_text(c, f->id);
		mr_buf_puts(c->b, "</code></li>");
	}
	mr_buf_puts(c->b, "</ul>");
	if (ad->finding_count > HR_MAX_FINDINGS)
		mr_buf_printf(c->b, "<p class=muted>%zu more findings are in the JSON report.</p>",
		              ad->finding_count - HR_MAX_FINDINGS);
	mr_buf_puts(c->b, "</section>");
}

static int plain_id(const char *id)
{
	if (!id[0])
		return 0;
	for (const char *p = id; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
			return 0;
	return 1;
}

/* The recommendation's prose from templates/recommendations/<id>.md, rendered by cmark with
 * raw HTML and unsafe links suppressed. */
static void rec_prose(hr_ctx *c, const char *id)
{
	char name[96];
	if (!plain_id(id))
		return;
	snprintf(name, sizeof name, "recommendations/%s.md", id);
	size_t len = 0;
	char *md = tp_get(name, &len);
	if (!md)
		return;
	char *html = cmark_markdown_to_html(md, len, CMARK_OPT_SAFE);
	free(md);
	if (!html) {
		c->b->failed = 1;
		return;
	}
	mr_buf_puts(c->b, "<details class=prose><summary>What it does, what it costs, how to "
	                  "apply it</summary>");
	mr_buf_puts(c->b, html);
	mr_buf_puts(c->b, "</details>");
	free(html);
}

static void recommendations(hr_ctx *c)
{
	const ad_advice *ad = &c->run->advice;
	mr_buf_puts(c->b, "<section id=recommendations><h2>What to change</h2>");
	if (!ad->rec_count) {
		mr_buf_puts(c->b, "<p class=muted>No change is recommended from this evidence.</p>"
		                  "</section>");
		return;
	}
	mr_buf_puts(c->b, "<ol class=recs>");
	for (size_t i = 0; i < ad->rec_count; i++) {
		const ad_recommendation *r = &ad->recs[i];
		mr_buf_printf(c->b,
		              "<li class=rec><div class=rec-head><span class=rank>%d</span><h3>",
		              r->rank > 0 ? r->rank : (int)i + 1);
		advice_text(c, r->title ? r->title : r->id, NULL, HR_TEXT_CAP);
		mr_buf_puts(c->b, "</h3><code class=id>");
		hr_text(c, r->id);
		mr_buf_puts(c->b, "</code></div>");
		if (r->reason && r->reason[0]) {
			mr_buf_puts(c->b, "<p class=reason>");
			advice_text(c, r->reason, &r->reason_paths, 2000);
			mr_buf_puts(c->b, "</p>");
		}
		if (r->change && r->change[0]) {
			mr_buf_puts(c->b, "<pre class=change><code>");
			advice_text(c, r->change, NULL, 2000);
			mr_buf_puts(c->b, "</code></pre>");
		}
		rec_prose(c, r->id);
		mr_buf_puts(c->b, "</li>");
	}
	mr_buf_puts(c->b, "</ol></section>");
}

/* The recorded settings against each recommended one, replayed through the allocator model. */
static void replays(hr_ctx *c)
{
	const ad_advice *ad = &c->run->advice;
	char b1[32], b2[32], b3[32];
	if (!ad->replay_count)
		return;
	mr_buf_puts(
	    c->b, "<section id=replay><h2>Replayed under other settings</h2>"
	          "<p class=muted>The recorded trace is run again through a model of PyTorch's "
	          "caching allocator. The first row must reproduce the recording before the others "
	          "mean anything.</p><table><thead><tr><th>settings</th><th>matches the recording"
	          "</th><th>out of memory</th><th class=n>peak reserved</th><th class=n>peak "
	          "allocated</th><th class=n>limit</th></tr></thead><tbody>");
	for (size_t i = 0; i < ad->replay_count; i++) {
		const ad_replay *r = &ad->replays[i];
		mr_buf_puts(c->b, "<tr><td><code>");
		hr_text(c, i == 0 ? "recorded settings" : r->conf);
		mr_buf_printf(c->b,
		              "</code></td><td>%s</td><td>%s</td><td class=n>%s</td>"
		              "<td class=n>%s</td><td class=n>%s</td></tr>",
		              i == 0 ? (r->matches ? "yes" : "no") : "", r->oom ? "yes" : "no",
		              hr_bytes(b1, r->peak_reserved), hr_bytes(b2, r->peak_allocated),
		              r->limit ? hr_bytes(b3, r->limit) : "none");
	}
	mr_buf_puts(c->b, "</tbody></table>");
	if (ad->replay_note[0]) {
		mr_buf_puts(c->b, "<p class=muted>");
		hr_text(c, ad->replay_note);
		mr_buf_puts(c->b, "</p>");
	}
	mr_buf_puts(c->b, "</section>");
}

static void categories(hr_ctx *c)
{
	const ad_categories *cat = &c->run->advice.categories;
	if (!cat->present)
		return;
	uint64_t total = 0;
	for (int i = 0; i < AD_CAT_COUNT; i++)
		total += cat->bytes[i];
	if (!total)
		return;
	mr_buf_printf(c->b,
	              "<section id=categories><h2>Live memory by kind <span class=muted>at the "
	              "%s</span></h2>",
	              cat->moment && strcmp(cat->moment, "oom") == 0 ? "out-of-memory moment"
	                                                             : "snapshot");
	mr_buf_puts(c->b, "<svg class=catbar viewBox=\"0 0 1000 22\" preserveAspectRatio=none "
	                  "role=img aria-label=\"live memory "
	                  "by kind\">");
	double x = 0;
	for (int i = 0; i < AD_CAT_COUNT; i++) {
		double w = (double)cat->bytes[i] / (double)total * 1000.0;
		if (w > 0)
			mr_buf_printf(c->b, "<rect x=%.1f y=0 width=%.1f height=22 class=cat%d />",
			              x, w, i);
		x += w;
	}
	mr_buf_puts(c->b, "</svg><table class=cats><tbody>");
	for (int i = 0; i < AD_CAT_COUNT; i++) {
		char s[32];
		mr_buf_printf(c->b,
		              "<tr><th><span class=\"sw cat%d\"></span>%s</th><td class=n>%s</td>"
		              "<td class=n>%.1f%%</td></tr>",
		              i, ad_category_name(i), hr_bytes(s, cat->bytes[i]),
		              (double)cat->bytes[i] * 100.0 / (double)total);
	}
	mr_buf_puts(c->b, "</tbody></table></section>");
}

/* ---- settings and notes ---- */

static void settings(hr_ctx *c)
{
	const rp_report *run = c->run;
	if (!run->ev.has_snapshot)
		return;
	const md_settings *cfg = &c->s->settings;
	mr_buf_puts(c->b, "<section id=settings><h2>Allocator settings</h2>");
	if (!cfg->present) {
		mr_buf_puts(c->b, "<p class=muted>The snapshot did not record allocator settings "
		                  "(PyTorch before 2.3 does not).</p></section>");
		return;
	}
	mr_buf_puts(c->b, "<table class=settings><tbody><tr><th>PYTORCH_CUDA_ALLOC_CONF</th><td>");
	const char *conf = md_str(c->s, cfg->conf);
	if (conf[0]) {
		mr_buf_puts(c->b, "<code>");
		hu_text(c->b, conf, 1000);
		mr_buf_puts(c->b, "</code>");
	} else {
		mr_buf_puts(c->b, "<span class=muted>not set (defaults)</span>");
	}
	mr_buf_puts(c->b, "</td></tr>");
	for (size_t i = 0; i < cfg->raw_count && i < HR_MAX_SETTINGS; i++) {
		const char *k = md_str(c->s, cfg->raw[i].key);
		if (strcmp(k, "PYTORCH_CUDA_ALLOC_CONF") == 0)
			continue;
		mr_buf_puts(c->b, "<tr><th>");
		hr_text(c, k);
		mr_buf_puts(c->b, "</th><td><code>");
		hr_text(c, md_str(c->s, cfg->raw[i].value));
		mr_buf_puts(c->b, "</code></td></tr>");
	}
	mr_buf_puts(c->b, "</tbody></table>");
	if (cfg->raw_count > HR_MAX_SETTINGS)
		mr_buf_printf(c->b, "<p class=muted>%zu more settings not shown.</p>",
		              cfg->raw_count - HR_MAX_SETTINGS);
	mr_buf_puts(c->b, "</section>");
}

static void notes(hr_ctx *c)
{
	const rp_report *run = c->run;
	const md_snapshot *s = c->s;
	mr_buf n = {0};
	mr_buf *save = c->b;
	c->b = &n;
	if (run->ev.has_snapshot && !s->has_history)
		mr_buf_puts(
		    &n, "<li><b>No allocation history was recorded</b>: there are no stacks "
		        "and no trace, so no timeline, no peaks and no allocation sites. Call "
		        "<code>torch.cuda.memory._record_memory_history(max_entries=100000)</code> "
		        "at the start of the run and dump the snapshot with "
		        "<code>torch.cuda.memory._dump_snapshot(\"snapshot.pickle\")</code>.</li>");
	if (run->ev.has_snapshot && s->era != MD_ERA_CURRENT)
		mr_buf_printf(
		    &n,
		    "<li>The snapshot is in an older format (%s): some numbers (requested "
		    "bytes, stacks of free blocks) were not recorded.</li>",
		    s->era == MD_ERA_HISTORY ? "PyTorch 2.0, per-block history"
		                             : "a bare segment list");
	for (size_t d = 0; d < c->view->device_count; d++) {
		const an_device *dv = c->view->devices[d];
		char b1[32], b2[32];
		if (dv->has_trace && dv->truncated)
			mr_buf_printf(
			    &n,
			    "<li>Device %d: <b>the trace is truncated</b>: it does not reach back "
			    "to an empty allocator (%s reserved and %s allocated before its first "
			    "event; the ring buffer of <code>max_entries</code> overflowed or "
			    "recording started late), so the peaks shown are lower bounds%s.</li>",
			    dv->device, hr_bytes(b1, dv->initial_reserved),
			    hr_bytes(b2, dv->initial_allocated),
			    dv->peak_exact ? " for the run; the allocator replay reproduced the "
			                     "window from that state, so they are exact within it"
			                   : "");
		const an_pool *p = &dv->pool[AN_POOL_ALL];
		if (p->pending_free)
			mr_buf_printf(
			    &n,
			    "<li>Device %d: <b>%s in %" PRIu64 " block%s are pending free</b>: "
			    "freed by Python but still used by another stream "
			    "(<code>record_stream</code>); they return only when that stream's "
			    "work completes.</li>",
			    dv->device, hr_bytes(b1, p->pending_free), p->pending_free_blocks,
			    p->pending_free_blocks == 1 ? "" : "s");
		const an_pool *pp = &dv->pool[AN_POOL_PRIVATE];
		if (pp->segments)
			mr_buf_printf(
			    &n,
			    "<li>Device %d: <b>%s in %" PRIu64 " segment%s belong to private "
			    "pools</b> (CUDA graphs or <code>torch.cuda.MemPool</code>): other "
			    "allocations cannot use them, and they are reported apart from the "
			    "default pool.</li>",
			    dv->device, hr_bytes(b1, pp->reserved), pp->segments,
			    pp->segments == 1 ? "" : "s");
	}
	if (run->ev.has_snapshot && s->inconsistent_segments)
		mr_buf_printf(&n,
		              "<li>%zu segment%s whose blocks do not tile them exactly; their maps "
		              "are drawn from the blocks as recorded.</li>",
		              s->inconsistent_segments,
		              s->inconsistent_segments == 1 ? " has" : "s have");
	if (run->ev.has_snapshot && (s->unknown_states || s->unknown_actions || s->dropped_events))
		mr_buf_printf(&n,
		              "<li>Unrecognised content was ignored: %zu block states, %zu trace "
		              "actions, %zu events dropped.</li>",
		              s->unknown_states, s->unknown_actions, s->dropped_events);
	if (c->opt->redact_paths)
		mr_buf_puts(&n, "<li>File paths are redacted (<code>--redact-paths</code>).</li>");
	c->b = save;
	if (n.failed)
		c->b->failed = 1;
	if (n.len || c->left_out.len) {
		mr_buf_puts(c->b,
		            "<section id=notes><h2>Notes on the evidence</h2><ul class=notes>");
		if (n.data)
			mr_buf_append(c->b, n.data, n.len);
		if (c->left_out.len) {
			mr_buf_puts(c->b, "<li>Left out to keep this page under 3 MB:<ul>");
			mr_buf_append(c->b, c->left_out.data, c->left_out.len);
			mr_buf_puts(c->b,
			            "</ul>The JSON report (<code>--format json</code>) has the "
			            "numbers.</li>");
		}
		mr_buf_puts(c->b, "</ul></section>");
	}
	mr_buf_free(&n);
}

static void header(hr_ctx *c)
{
	mr_buf_puts(c->b, "<header><h1>memreport <span class=muted>CUDA memory report</span></h1>"
	                  "<p class=inputs>");
	for (size_t i = 0; i < c->run->ev.input_count; i++) {
		mr_buf_puts(c->b, i ? ", " : "");
		mr_buf_puts(c->b, "<code>");
		hr_path_text(c, c->run->ev.inputs[i].path);
		mr_buf_printf(c->b, "</code> <span class=muted>(%s)</span>",
		              ld_kind_name(c->run->ev.inputs[i].kind));
	}
	if (c->view->device >= 0)
		mr_buf_printf(c->b, " <span class=muted>\xc2\xb7 device %d only</span>",
		              c->view->device);
	mr_buf_puts(c->b, "</p><nav><a href=\"#devices\">devices</a> <a href=\"#recommendations\">"
	                  "what to change</a> <a href=\"#maps\">segment maps</a> <a "
	                  "href=\"#timeline\">timeline</a> <a href=\"#sites\">allocation sites</a> "
	                  "<a href=\"#settings\">settings</a></nav></header>");
}

/* ---- the page ---- */

/* The interactive page's data block, at most RP_DATA_MAX bytes; the notes say what it left out. */
static mr_status data_block(hr_ctx *c, mr_buf *data)
{
	pd_fit fit;
	mr_status st = rd_page_data(c->run, c->view, c->opt, RP_DATA_MAX, &fit, data, c->err);
	if (st)
		return st;
	if (fit.left_out_bytes) {
		/* what is left (series, moments, stacks) is too large still: the page keeps its
		 * static figures, which need no script */
		hr_left_out(
		    c,
		    "The interactive timeline: its data would take %zu bytes, more than the %d "
		    "this page allows; the figures below are drawn without it.",
		    fit.left_out_bytes, RP_DATA_MAX);
		return MR_OK;
	}
	if (fit.iteration_moments < fit.iteration_moments_all)
		hr_left_out(
		    c,
		    "Segments at iteration ends: %zu of the %zu moments the analysis has, evenly "
		    "spaced (the page's data would pass %d bytes).",
		    fit.iteration_moments, fit.iteration_moments_all, RP_DATA_MAX);
	if (fit.iteration_marks < fit.iteration_marks_all)
		hr_left_out(c,
		            "Iteration ends marked on the timeline: %zu of %zu, evenly spaced (the "
		            "page's data would pass %d bytes).",
		            fit.iteration_marks, fit.iteration_marks_all, RP_DATA_MAX);
	if (fit.band_budget < PD_BAND_BUDGET)
		hr_left_out(c,
		            "Allocations drawn as bands of their own: at most %zu per page (the "
		            "smaller ones are in the merged band).",
		            fit.band_budget);
	return MR_OK;
}

mr_status rd_render_html(const rp_report *run, const rd_options *opt, mr_buf *out, mr_error *err)
{
	static const char *const css[] = {"report.css", "timeline.css", NULL};
	static const char *const js[] = {"report.js", "timeline.js", NULL};
	mr_buf body = {0}, title = {0}, data = {0};
	rp_view view;
	mr_status st = rp_view_init(&view, run, opt->device, err);
	if (st)
		return st;
	hr_ctx c = {run, opt, &view, &run->ev.snap, &body, {0}, 0, err, MR_OK};
	if ((st = data_block(&c, &data)))
		goto done;
	c.fixed = data.len + HR_SCRIPT_BYTES;

	hr_oom oom = oom_facts(run, &view);
	header(&c);
	verdict(&c, &oom);
	device_cards(&c);
	oom_panel(&c, &oom);
	findings(&c);
	recommendations(&c);
	replays(&c);
	hr_capacity(&c);
	categories(&c);
	if (!c.st)
		hr_segment_maps(&c);
	if (!c.st)
		hr_timelines(&c);
	if (!c.st)
		hr_sites(&c);
	settings(&c);
	notes(&c);
	mr_buf_puts(&body, "<footer>Written by memreport. This page is self-contained: it loads "
	                   "nothing from the network and works without its script.</footer>\n");
	mr_buf_append(&body, data.data, data.len);
	if (c.st) {
		st = c.st;
		goto done;
	}

	mr_buf_puts(&title, "memreport: ");
	if (run->ev.input_count) {
		char pbuf[4096];
		const char *p = rd_path(opt, run->ev.inputs[0].path, pbuf, sizeof pbuf);
		const char *base = strrchr(p, '/');
		hu_text(&title, base ? base + 1 : p, 120);
	}
	if (body.failed || title.failed || c.left_out.failed) {
		st = mr_oom(err);
		goto done;
	}
	size_t start = out->len;
	st = rd_page(out, title.data, css, js, body.data, body.len, err);
	if (!st && out->len - start > RP_HTML_MAX)
		st = mr_fail(err, MR_EFAIL, "the HTML report would exceed %d bytes", RP_HTML_MAX);
done:
	mr_buf_free(&body);
	mr_buf_free(&title);
	mr_buf_free(&data);
	mr_buf_free(&c.left_out);
	rp_view_free(&view);
	return st;
}
