/* render_html.c: the self-contained HTML report.
 *
 * One file: the page skeleton (templates/report.html), CSS (report.css) and a small script
 * (report.js) are inlined; segment maps are PNG data: URIs (png_map.c), the timeline inline
 * SVG (svg_timeline.c). The Content-Security-Policy allows nothing but the page's own style and
 * script, by hash, and data: images, so nothing is fetched when the page is opened and a
 * string that escaped escaping still could not run. Every string that comes from the inputs
 * goes through mr_buf_html (hu_text). Output is deterministic: no time, stable orders, fixed
 * number formats. Sections are capped so the page stays under RP_HTML_MAX whatever the input;
 * what was left out is said in the notes. */
#include "render/render_html.h"

#include <cmark.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/text_devices.h"
#include "base/base64.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/sha256.h"
#include "base/units.h"
#include "render/html_util.h"
#include "render/page.h"
#include "render/png_map.h"
#include "render/redact.h"
#include "render/svg_timeline.h"
#include "render/templates.h"
#include "report/view.h"

enum {
	RP_HTML_MAX = 3000000,    /* the promise: never more than this */
	RP_HTML_BUDGET = 2300000, /* optional sections stop here; what follows is capped */
	HR_TEXT_CAP = 200,        /* bytes of one name, file name or setting shown */
	HR_MAX_SITES = 40,        /* allocation sites per device */
	HR_MAX_STACKS = 6,        /* distinct stacks shown per site */
	HR_MAX_FRAMES = 24,       /* frames shown per stack */
	HR_MAX_MAP_ROWS = 48,     /* segments drawn one by one per device */
	HR_MAX_MAP_GROUPS = 24,   /* aggregate rows for the remaining segments */
	HR_MAX_FINDINGS = 50,
	HR_MAX_SETTINGS = 32,
	HR_MAP_WIDTH = 640,
	HR_MAP_HEIGHT = 14,
};

typedef struct {
	const rp_report *run;
	const rd_options *opt;
	const rp_view *view; /* the devices shown */
	const md_snapshot *s;
	mr_buf *b;       /* the page body */
	mr_buf left_out; /* <li> notes about capped sections */
	mr_error *err;
	mr_status st; /* first failure of a helper that cannot return one */
} hr_ctx;

/* ---- small helpers ---- */

static void text(hr_ctx *c, const char *s)
{
	hu_text(c->b, s ? s : "", HR_TEXT_CAP);
}

/* Prose from the diagnosis may quote frames: paths in it obey --redact-paths too, the ones it
 * marks (paths, may be NULL) and, as a guard, anything else that looks like a path. */
static void advice_text(hr_ctx *c, const char *s, const ad_paths *paths, size_t cap)
{
	mr_buf marked = {0}, tmp = {0};
	rd_prose(&marked, c->opt, s ? s : "", paths);
	rd_redact_text(&tmp, c->opt, marked.data ? marked.data : "");
	if (tmp.failed || marked.failed)
		c->b->failed = 1;
	hu_text(c->b, tmp.data ? tmp.data : "", cap);
	mr_buf_free(&marked);
	mr_buf_free(&tmp);
}

static const char *fmt_bytes(char out[32], uint64_t v)
{
	mr_format_bytes(out, 32, v);
	return out;
}

static void left_out(hr_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void left_out(hr_ctx *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	mr_buf_puts(&c->left_out, "<li>");
	mr_buf_vprintf(&c->left_out, fmt, ap);
	mr_buf_puts(&c->left_out, "</li>");
	va_end(ap);
}

static int over_budget(const hr_ctx *c)
{
	return c->b->len > RP_HTML_BUDGET;
}

static void path_text(hr_ctx *c, const char *path)
{
	char buf[4096];
	text(c, rd_path(c->opt, path ? path : "", buf, sizeof buf));
}

static void frame_html(hr_ctx *c, const md_frame *f)
{
	mr_buf_puts(c->b, "<code class=fn>");
	text(c, md_str(c->s, f->name));
	mr_buf_puts(c->b, "</code> <span class=loc>");
	path_text(c, md_str(c->s, f->filename));
	mr_buf_printf(c->b, ":%d</span>", f->line);
}

static void stream_label(char out[40], uint64_t stream)
{
	if (stream == 0)
		snprintf(out, 40, "default");
	else
		snprintf(out, 40, "0x%" PRIx64, stream);
}

/* ---- the OOM facts: from the diagnosis, else from the trace ---- */

typedef struct {
	int present;
	int32_t device;
	uint64_t requested, largest_free, free_cached, free_pieces, limit, reserved, allocated;
	const char *cause;   /* NULL when unknown */
	int largest_unknown; /* a log alone: the free blocks' layout was not recorded */
} hr_oom;

static hr_oom oom_facts(const rp_report *run, const rp_view *view)
{
	hr_oom o = {0};
	const ad_oom *a = &run->advice.oom;
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
			o.cause = ad_cause_name(a->cause);
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

static void verdict(hr_ctx *c, const hr_oom *oom)
{
	const rp_report *run = c->run;
	const ad_advice *ad = &run->advice;
	int worst = -1;
	for (size_t i = 0; i < ad->finding_count; i++)
		worst = MR_MAX(worst, (int)ad->findings[i].severity);
	const char *cls = oom->present || worst == AD_CRITICAL ? "bad"
	                  : worst == AD_WARNING                ? "warn"
	                                                       : "ok";
	mr_buf_printf(c->b, "<p class=\"verdict %s\" id=verdict>", cls);
	if (ad->verdict && ad->verdict[0]) {
		advice_text(c, ad->verdict, NULL, 1000);
		mr_buf_puts(c->b, "</p>");
		return;
	}
	/* No diagnosis: a neutral sentence from the numbers alone. */
	char a[32], r[32], f[32], l[32];
	if (oom->present) {
		mr_buf_printf(
		    c->b,
		    "Out of memory on device %d: %s was requested; the largest free cached "
		    "block was %s, with %s free in %" PRIu64 " cached block%s.",
		    oom->device, fmt_bytes(a, oom->requested), fmt_bytes(l, oom->largest_free),
		    fmt_bytes(f, oom->free_cached), oom->free_pieces,
		    oom->free_pieces == 1 ? "" : "s");
	} else {
		const an_device *dv = c->view->device_count ? c->view->devices[0] : NULL;
		if (!dv) {
			mr_buf_puts(c->b, "No device memory was recorded in the inputs.");
		} else if (dv->has_trace) {
			const an_pool *p = &dv->pool[AN_POOL_ALL];
			mr_buf_printf(
			    c->b,
			    "No out-of-memory recorded: allocated memory on device %d peaked "
			    "at %s%s with %s reserved; %s of the reserved memory is free in "
			    "cached blocks now.",
			    dv->device, fmt_bytes(a, dv->peak_allocated),
			    dv->truncated ? " or more" : "", fmt_bytes(r, dv->peak_reserved),
			    fmt_bytes(f, p->free_cached));
		} else {
			const an_pool *p = &dv->pool[AN_POOL_ALL];
			mr_buf_printf(c->b,
			              "Device %d holds %s allocated in %s reserved; %s is free in "
			              "cached blocks, the largest %s.",
			              dv->device, fmt_bytes(a, p->allocated),
			              fmt_bytes(r, p->reserved), fmt_bytes(f, p->free_cached),
			              fmt_bytes(l, p->largest_free));
		}
	}
	mr_buf_puts(c->b, "</p>");
}

/* ---- cards per device and pool ---- */

static void card(hr_ctx *c, const char *label, uint64_t v, const char *hint)
{
	char s[32];
	mr_buf_printf(c->b,
	              "<div class=card><div class=k>%s</div><div class=v>%s</div>"
	              "<div class=sub>%" PRIu64 " B%s%s</div></div>",
	              label, fmt_bytes(s, v), v, hint ? " \xc2\xb7 " : "", hint ? hint : "");
}

static void pool_row(hr_ctx *c, const char *name, const an_pool *p)
{
	char s[7][32];
	double frag = p->free_cached ? 1.0 - (double)p->largest_free / (double)p->free_cached : 0;
	mr_buf_printf(c->b,
	              "<tr><th>%s</th><td class=n>%" PRIu64 "</td><td class=n>%s</td>"
	              "<td class=n>%s</td><td class=n>%s</td><td class=n>%s</td><td class=n>%s</td>"
	              "<td class=n>%s</td><td class=n>%.1f%%</td><td class=n>%s</td></tr>",
	              name, p->segments, fmt_bytes(s[0], p->reserved),
	              fmt_bytes(s[1], p->allocated), fmt_bytes(s[2], p->active),
	              fmt_bytes(s[3], p->free_cached), fmt_bytes(s[4], p->inactive_split),
	              fmt_bytes(s[5], p->largest_free), frag * 100.0,
	              fmt_bytes(s[6], p->rounding_waste));
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
		card(c, "reserved", d->reserved, hint ? hint : "held from CUDA");
		card(c, "allocated", d->allocated, hint ? hint : "in live tensors");
		card(c, "active", d->active, hint ? hint : "allocated + pending free");
		card(c, "non-releasable", d->inactive_split,
		     hint ? hint : "free inside split segments");
		if (d->has_peaks) {
			card(c, "peak allocated", d->peak_allocated, hint);
			card(c, "peak reserved", d->peak_reserved, hint);
		}
		mr_buf_puts(c->b, "</div>");
	}
	mr_buf_puts(c->b, "<p class=muted>A table or a memory_stats() dump has totals only: the "
	                  "segment maps, the largest free block and the allocation sites need a "
	                  "snapshot.</p>");
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
		char frag[48];
		mr_buf_printf(c->b,
		              "<h3>Device %d <span class=muted>%" PRIu64 " segment%s%s</span></h3>",
		              dv->device, p->segments, p->segments == 1 ? "" : "s",
		              dv->expandable ? ", expandable segments" : "");
		mr_buf_puts(c->b, "<div class=cards>");
		card(c, "reserved", p->reserved, "held from CUDA");
		card(c, "allocated", p->allocated, "in live tensors");
		card(c, "active", p->active, "allocated + pending free");
		card(c, "free cached", p->free_cached, "reserved, not allocated");
		card(c, "non-releasable", p->inactive_split, "free inside split segments");
		card(c, "largest free block", p->largest_free, NULL);
		snprintf(frag, sizeof frag, "%.1f%%", dv->fragmentation * 100.0);
		mr_buf_printf(
		    c->b,
		    "<div class=\"card%s\"><div class=k>fragmentation</div><div class=v>%s</div>"
		    "<div class=sub>1 \xe2\x88\x92 largest free / free cached</div></div>",
		    /* Highlighted only when the scattered free memory is stuck inside
		     * split segments: whole free segments are not fragmentation. */
		    dv->fragmentation >= 0.5 && p->inactive_split >= 64 * MR_MIB ? " hot" : "",
		    frag);
		if (dv->has_trace) {
			card(c, "peak allocated", dv->peak_allocated,
			     dv->truncated ? "from the trace, a lower bound" : "from the trace");
			card(c, "peak reserved", dv->peak_reserved,
			     dv->truncated ? "from the trace, a lower bound" : "from the trace");
		}
		mr_buf_puts(c->b, "</div>");
		mr_buf_puts(c->b,
		            "<table class=pools><thead><tr><th>pool</th><th class=n>segments</th>"
		            "<th class=n>reserved</th><th class=n>allocated</th><th class=n>active"
		            "</th><th class=n>free cached</th><th class=n>non-releasable</th>"
		            "<th class=n>largest free block</th><th class=n>fragmentation</th>"
		            "<th class=n>rounding waste</th></tr></thead><tbody>");
		pool_row(c, "large", &dv->pool[AN_POOL_LARGE]);
		pool_row(c, "small", &dv->pool[AN_POOL_SMALL]);
		if (dv->pool[AN_POOL_PRIVATE].segments)
			pool_row(c, "private", &dv->pool[AN_POOL_PRIVATE]);
		mr_buf_puts(
		    c->b, "</tbody></table><p class=\"muted small\">The large pool serves requests "
		          "over 1 MiB, the small pool the rest (in 2 MiB segments)");
		if (dv->pool[AN_POOL_PRIVATE].segments)
			mr_buf_puts(
			    c->b, "; private pools (CUDA graphs, <code>torch.cuda.MemPool</code>) "
			          "are also counted in the large or small row");
		mr_buf_puts(c->b, ".</p>");
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
	              known ? fmt_bytes(s, v) : "unknown");
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
		    o->device, fmt_bytes(a, o->requested), fmt_bytes(f, o->free_cached));
	else
		mr_buf_printf(
		    c->b,
		    "<p>Device %d asked for <b>%s</b> in one piece. The largest free cached "
		    "block was <b>%s</b>; %s was free in %" PRIu64 " cached block%s",
		    o->device, fmt_bytes(a, o->requested), fmt_bytes(l, o->largest_free),
		    fmt_bytes(f, o->free_cached), o->free_pieces, o->free_pieces == 1 ? "" : "s");
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
		text(c, f->id);
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
		text(c, r->id);
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
		text(c, i == 0 ? "recorded settings" : r->conf);
		mr_buf_printf(c->b,
		              "</code></td><td>%s</td><td>%s</td><td class=n>%s</td>"
		              "<td class=n>%s</td><td class=n>%s</td></tr>",
		              i == 0 ? (r->matches ? "yes" : "no") : "", r->oom ? "yes" : "no",
		              fmt_bytes(b1, r->peak_reserved), fmt_bytes(b2, r->peak_allocated),
		              r->limit ? fmt_bytes(b3, r->limit) : "none");
	}
	mr_buf_puts(c->b, "</tbody></table>");
	if (ad->replay_note[0]) {
		mr_buf_puts(c->b, "<p class=muted>");
		text(c, ad->replay_note);
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
		              i, ad_category_name(i), fmt_bytes(s, cat->bytes[i]),
		              (double)cat->bytes[i] * 100.0 / (double)total);
	}
	mr_buf_puts(c->b, "</tbody></table></section>");
}

/* ---- segment maps ---- */

static void png_img(hr_ctx *c, const mr_buf *png, const char *cls)
{
	mr_buf_printf(c->b, "<img class=%s width=%d height=%d src=\"data:image/png;base64,", cls,
	              HR_MAP_WIDTH, HR_MAP_HEIGHT);
	b64_encode(c->b, (const unsigned char *)png->data, png->len);
	mr_buf_puts(c->b, "\"");
}

typedef struct {
	int pool;     /* 0 large, 1 small, 2 private */
	int exact;    /* key is an exact size */
	uint64_t key; /* size, or power-of-two exponent */
	uint64_t count, bytes;
	pm_totals totals;
} hr_group;

static int group_cmp(const void *a, const void *b)
{
	const hr_group *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	if (x->pool != y->pool)
		return x->pool - y->pool;
	if (x->exact != y->exact)
		return x->exact - y->exact;
	return (x->key > y->key) - (x->key < y->key);
}

static int seg_pool(const md_segment *seg)
{
	return seg->pool_id[0] || seg->pool_id[1] ? 2 : seg->pool == MD_POOL_SMALL ? 1 : 0;
}

static const char *pool_name(int pool)
{
	return pool == 2 ? "private" : pool == 1 ? "small" : "large";
}

static void map_row(hr_ctx *c, size_t rank, const md_segment *seg, uint64_t scale)
{
	pm_totals t = {0};
	pm_segment_totals(c->s, seg, &t);
	char size[32], act[32], fr[32], stream[40];
	uint64_t free_bytes = t.bytes[PM_FREE_SPLIT] + t.bytes[PM_FREE_WHOLE];
	stream_label(stream, seg->stream);
	mr_buf png = {0};
	mr_status st = pm_segment_png(c->s, seg, scale, HR_MAP_WIDTH, HR_MAP_HEIGHT, &png, c->err);
	if (st) {
		c->st = st;
		mr_buf_free(&png);
		return;
	}
	mr_buf_printf(c->b,
	              "<tr><td class=n>%zu</td><td class=n data-v=%" PRIu64 ">%s</td><td>%s</td>"
	              "<td>%s%s</td><td class=n>%" PRIu64 "</td><td>",
	              rank, seg->total_size, fmt_bytes(size, seg->total_size), stream,
	              pool_name(seg_pool(seg)), seg->is_expandable ? ", expandable" : "", t.blocks);
	png_img(c, &png, "map");
	mr_buf_printf(c->b,
	              " alt=\"segment 0x%" PRIx64 ", %s: %s active, %s free in %" PRIu64
	              " block%s\" title=\"segment 0x%" PRIx64 ": %s active, %s free in %" PRIu64
	              " block%s\"></td><td class=n data-v=%" PRIu64
	              ">%s</td><td class=n data-v=%" PRIu64 ">%s</td></tr>",
	              seg->address, size, fmt_bytes(act, t.bytes[PM_ACTIVE] + t.bytes[PM_WASTE]),
	              fmt_bytes(fr, free_bytes), t.free_blocks, t.free_blocks == 1 ? "" : "s",
	              seg->address, act, fr, t.free_blocks, t.free_blocks == 1 ? "" : "s",
	              t.bytes[PM_ACTIVE] + t.bytes[PM_WASTE], act, free_bytes, fr);
	mr_buf_free(&png);
}

static void map_groups(hr_ctx *c, const size_t *order, size_t from, size_t count)
{
	hr_group *groups = mr_alloc_array(count ? count : 1, sizeof *groups);
	size_t ng = 0;
	if (!groups) {
		c->st = mr_oom(c->err);
		return;
	}
	for (size_t i = from; i < count; i++) {
		const md_segment *seg = &c->s->segments[order[i]];
		hr_group key = {seg_pool(seg), seg->total_size <= 20 * MR_MIB, 0, 0, 0,
		                {{0}, 0, 0}};
		key.key =
		    key.exact ? seg->total_size : (uint64_t)(63 - __builtin_clzll(seg->total_size));
		size_t g = 0;
		/* Segments arrive largest first, so a group's members are mostly adjacent. */
		for (g = ng; g-- > 0;)
			if (groups[g].pool == key.pool && groups[g].exact == key.exact &&
			    groups[g].key == key.key)
				break;
		if (g == (size_t)-1) {
			g = ng++;
			groups[g] = key;
		}
		groups[g].count++;
		groups[g].bytes += seg->total_size;
		pm_segment_totals(c->s, seg, &groups[g].totals);
	}
	qsort(groups, ng, sizeof *groups, group_cmp);
	uint64_t top = ng ? groups[0].bytes : 1;
	mr_buf_printf(
	    c->b,
	    "<p class=muted>The other %zu segments, aggregated by pool and size: each bar "
	    "is the share of the group's bytes in each state (not their layout), its "
	    "length the group's total against the largest group.</p>"
	    "<table class=maps><thead><tr><th>segments</th><th class=n>size</th>"
	    "<th class=n>total</th><th>pool</th><th class=n>blocks</th><th>state of the "
	    "bytes</th><th class=n>active</th><th class=n>free</th></tr></thead><tbody>",
	    count - from);
	size_t shown = MR_MIN(ng, (size_t)HR_MAX_MAP_GROUPS);
	for (size_t g = 0; g < ng; g++) {
		/* Beyond the cap, the remaining groups fold into the last row. */
		if (g >= shown && shown > 0) {
			hr_group *last = &groups[shown - 1];
			last->count += groups[g].count;
			last->bytes += groups[g].bytes;
			for (int k = 0; k < PM_STATE_COUNT; k++)
				last->totals.bytes[k] += groups[g].totals.bytes[k];
			last->totals.blocks += groups[g].totals.blocks;
			last->totals.free_blocks += groups[g].totals.free_blocks;
			last->exact = -1;
		}
	}
	for (size_t g = 0; g < shown; g++) {
		const hr_group *gr = &groups[g];
		char size[80], lo[32], hi[32], tot[32], act[32], fr[32];
		if (gr->exact == -1)
			snprintf(size, sizeof size, "all other sizes");
		else if (gr->exact)
			snprintf(size, sizeof size, "%s each", fmt_bytes(lo, gr->key));
		else
			snprintf(size, sizeof size, "%s\xe2\x80\x93%s",
			         fmt_bytes(lo, (uint64_t)1 << gr->key),
			         fmt_bytes(hi, gr->key >= 63 ? UINT64_MAX
			                                     : (uint64_t)1 << (gr->key + 1)));
		mr_buf png = {0};
		mr_status st = pm_totals_png(&gr->totals, (double)gr->bytes / (double)top,
		                             HR_MAP_WIDTH, HR_MAP_HEIGHT, &png, c->err);
		if (st) {
			c->st = st;
			mr_buf_free(&png);
			break;
		}
		uint64_t free_bytes =
		    gr->totals.bytes[PM_FREE_SPLIT] + gr->totals.bytes[PM_FREE_WHOLE];
		mr_buf_printf(c->b,
		              "<tr><td class=n>%" PRIu64
		              "</td><td class=n>%s</td><td class=n>%s</td>"
		              "<td>%s</td><td class=n>%" PRIu64 "</td><td>",
		              gr->count, size, fmt_bytes(tot, gr->bytes), pool_name(gr->pool),
		              gr->totals.blocks);
		png_img(c, &png, "map");
		mr_buf_printf(
		    c->b,
		    " alt=\"%" PRIu64 " segments, %s\"></td><td class=n>%s</td>"
		    "<td class=n>%s</td></tr>",
		    gr->count, tot,
		    fmt_bytes(act, gr->totals.bytes[PM_ACTIVE] + gr->totals.bytes[PM_WASTE]),
		    fmt_bytes(fr, free_bytes));
		mr_buf_free(&png);
	}
	mr_buf_puts(c->b, "</tbody></table>");
	free(groups);
}

static void legend(hr_ctx *c)
{
	mr_buf_puts(c->b, "<ul class=legend>");
	for (int i = 0; i < PM_STATE_COUNT; i++)
		mr_buf_printf(c->b, "<li><span class=\"sw st-%s\"></span>%s</li>",
		              pm_state_class(i), pm_state_label(i));
	mr_buf_puts(c->b, "</ul>");
}

static void segment_maps(hr_ctx *c)
{
	const rp_report *run = c->run;
	if (!run->ev.has_snapshot || !c->s->segment_count)
		return;
	mr_buf_puts(c->b,
	            "<section id=maps><h2>Segment maps</h2>"
	            "<p class=muted>Each bar is one segment reserved from CUDA, its blocks in "
	            "address order, coloured by state; a thin dark line separates blocks. Bar "
	            "length is proportional to the segment's size.</p>");
	legend(c);
	for (size_t d = 0; d < c->view->device_count; d++) {
		const an_device *dv = c->view->devices[d];
		if (!dv->segment_count)
			continue;
		if (over_budget(c)) {
			left_out(c, "Segment maps of device %d (the page reached its size limit).",
			         dv->device);
			continue;
		}
		size_t *order = mr_alloc_array(dv->segment_count, sizeof *order);
		if (!order || pm_sort_segments(c->s, dv->segment_first, dv->segment_count, order)) {
			free(order);
			c->st = mr_oom(c->err);
			return;
		}
		size_t shown = MR_MIN(dv->segment_count, (size_t)HR_MAX_MAP_ROWS);
		uint64_t scale = c->s->segments[order[0]].total_size;
		char big[32];
		mr_buf_printf(
		    c->b,
		    "<h3>Device %d <span class=muted>%zu segment%s%s; full bar = %s</span></h3>",
		    dv->device, dv->segment_count, dv->segment_count == 1 ? "" : "s",
		    dv->segment_count > shown ? ", largest first" : "", fmt_bytes(big, scale));
		mr_buf_puts(c->b,
		            "<table class=\"maps sortable\"><thead><tr><th class=n>#</th>"
		            "<th class=n>size</th><th>stream</th><th>pool</th><th class=n>blocks"
		            "</th><th>map</th><th class=n>active</th><th class=n>free</th></tr>"
		            "</thead><tbody>");
		for (size_t i = 0; i < shown && !c->st; i++)
			map_row(c, i + 1, &c->s->segments[order[i]], scale);
		mr_buf_puts(c->b, "</tbody></table>");
		if (!c->st && shown < dv->segment_count)
			map_groups(c, order, shown, dv->segment_count);
		free(order);
		if (c->st)
			return;
	}
	mr_buf_puts(c->b, "</section>");
}

/* ---- timeline ---- */

static void timelines(hr_ctx *c)
{
	const rp_report *run = c->run;
	if (!run->ev.has_snapshot)
		return;
	mr_buf_puts(c->b, "<section id=timeline><h2>Memory over the trace</h2>");
	int any = 0;
	for (size_t d = 0; d < c->view->device_count; d++) {
		const an_device *dv = c->view->devices[d];
		if (!dv->has_trace || !dv->timeline_count) {
			mr_buf_printf(
			    c->b,
			    "<p class=muted>Device %d: no trace was recorded, so there is "
			    "no timeline and no peak.</p>",
			    dv->device);
			continue;
		}
		if (over_budget(c)) {
			left_out(c, "The timeline of device %d (the page reached its size limit).",
			         dv->device);
			continue;
		}
		char pa[32], pr[32];
		mr_buf_printf(
		    c->b,
		    "<figure><figcaption>Device %d: %zu events, drawn in %zu buckets that each "
		    "keep their minimum and maximum. Peak allocated %s, peak reserved %s%s."
		    "</figcaption>",
		    dv->device, dv->trace_events, dv->timeline_count,
		    fmt_bytes(pa, dv->peak_allocated), fmt_bytes(pr, dv->peak_reserved),
		    dv->truncated ? " (the trace does not reach back to the start: both are "
		                    "lower bounds)"
		                  : "");
		mr_status st = st_render(c->s, dv, c->b, c->err);
		if (st) {
			c->st = st;
			return;
		}
		mr_buf_puts(c->b,
		            "<ul class=legend><li><span class=\"sw tl-alloc\"></span>allocated"
		            "</li><li><span class=\"sw tl-band\"></span>allocated, range within "
		            "a bucket</li><li><span class=\"sw tl-res\"></span>reserved</li>"
		            "<li><span class=\"sw tl-peak\"></span>peak allocated</li>");
		if (dv->oom_events)
			mr_buf_puts(c->b,
			            "<li><span class=\"sw tl-oom\"></span>out of memory</li>");
		mr_buf_puts(c->b, "</ul></figure>");
		any = 1;
	}
	(void)any;
	mr_buf_puts(c->b, "</section>");
}

/* ---- allocation sites ---- */

typedef struct {
	const md_frame *frame; /* first visible frame, NULL: none */
	uint64_t bytes, requested, count;
	size_t first_site, nstacks; /* members: sorted site indexes in a side array */
} hr_site_group;

typedef struct {
	const md_snapshot *s;
	const an_device *dv;
} hr_sort_env;

static int frame_key_cmp(const md_snapshot *s, const md_frame *x, const md_frame *y)
{
	if (!x || !y)
		return (x != NULL) - (y != NULL);
	int k = strcmp(md_str(s, x->filename), md_str(s, y->filename));
	if (k)
		return k;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return strcmp(md_str(s, x->name), md_str(s, y->name));
}

typedef struct {
	const md_frame *frame;
	size_t site;
	const md_snapshot *s;
} hr_member;

static int member_cmp(const void *a, const void *b)
{
	const hr_member *x = a, *y = b;
	int k = frame_key_cmp(x->s, x->frame, y->frame);
	if (k)
		return k;
	return (x->site > y->site) - (x->site < y->site);
}

static int sgroup_cmp(const void *a, const void *b)
{
	const hr_site_group *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	if (x->count != y->count)
		return x->count < y->count ? 1 : -1;
	return (x->first_site > y->first_site) - (x->first_site < y->first_site);
}

static void stack_html(hr_ctx *c, uint32_t stack)
{
	const md_snapshot *s = c->s;
	if (stack >= s->stack_count || !s->stacks[stack].count) {
		mr_buf_puts(c->b, "<p class=muted>No stack was recorded for these blocks.</p>");
		return;
	}
	const md_stack *st = &s->stacks[stack];
	size_t shown = 0, hidden = 0;
	mr_buf_puts(c->b, "<ol class=frames>");
	for (uint32_t i = 0; i < st->count; i++) {
		const md_frame *f = &s->frames[st->first + i];
		if (an_frame_hidden(s, f)) {
			hidden++;
			continue;
		}
		if (shown++ >= HR_MAX_FRAMES)
			continue;
		mr_buf_puts(c->b, "<li>");
		frame_html(c, f);
		mr_buf_puts(c->b, "</li>");
	}
	mr_buf_puts(c->b, "</ol>");
	if (shown > HR_MAX_FRAMES)
		mr_buf_printf(c->b, "<p class=muted>%zu more frame%s not shown.</p>",
		              shown - HR_MAX_FRAMES, shown - HR_MAX_FRAMES == 1 ? "" : "s");
	if (hidden)
		mr_buf_printf(c->b,
		              "<p class=muted>%zu PyTorch-internal frame%s hidden, as "
		              "PyTorch's own viewer hides them.</p>",
		              hidden, hidden == 1 ? "" : "s");
}

static void device_sites(hr_ctx *c, const an_device *dv, const an_site *sites, size_t n,
                         const char *moment)
{
	const md_snapshot *s = c->s;
	hr_member *m = mr_alloc_array(n ? n : 1, sizeof *m);
	hr_site_group *g = mr_alloc_array(n ? n : 1, sizeof *g);
	size_t ng = 0;
	if (!m || !g) {
		c->st = mr_oom(c->err);
		goto done;
	}
	for (size_t i = 0; i < n; i++)
		m[i] = (hr_member){an_site_frame(s, sites[i].stack), i, s};
	qsort(m, n, sizeof *m, member_cmp);
	for (size_t i = 0; i < n; i++) {
		if (!ng || frame_key_cmp(s, g[ng - 1].frame, m[i].frame)) {
			g[ng] = (hr_site_group){m[i].frame, 0, 0, 0, i, 0};
			ng++;
		}
		const an_site *site = &sites[m[i].site];
		g[ng - 1].bytes += site->bytes;
		g[ng - 1].requested += site->requested;
		g[ng - 1].count += site->count;
		g[ng - 1].nstacks++;
	}
	/* Members of a group are in site order, which is largest first (analyze.c). */
	qsort(g, ng, sizeof *g, sgroup_cmp);
	uint64_t total = 0;
	for (size_t i = 0; i < ng; i++)
		total += g[i].bytes;
	char tb[32];
	mr_buf_printf(
	    c->b,
	    "<h3>Device %d <span class=muted>%s live in %zu site%s, %zu distinct stack%s, at "
	    "the %s</span></h3><div class=sites data-list>",
	    dv->device, fmt_bytes(tb, total), ng, ng == 1 ? "" : "s", n, n == 1 ? "" : "s", moment);
	size_t shown = MR_MIN(ng, (size_t)HR_MAX_SITES);
	for (size_t i = 0; i < shown && !c->b->failed; i++) {
		const hr_site_group *gr = &g[i];
		if (over_budget(c)) {
			left_out(
			    c,
			    "%zu allocation sites of device %d (the page reached its size limit).",
			    shown - i, dv->device);
			shown = i;
			break;
		}
		char b[32], pct[16];
		snprintf(pct, sizeof pct, "%.1f%%",
		         total ? (double)gr->bytes * 100.0 / (double)total : 0);
		mr_buf_printf(c->b,
		              "<details class=site data-bytes=%" PRIu64 " data-count=%" PRIu64
		              "><summary><span class=sb>%s</span><span class=sp>%s</span>"
		              "<span class=sc>%" PRIu64 " block%s</span><span class=sf>",
		              gr->bytes, gr->count, fmt_bytes(b, gr->bytes), pct, gr->count,
		              gr->count == 1 ? "" : "s");
		if (gr->frame)
			frame_html(c, gr->frame);
		else
			mr_buf_puts(c->b, "<i>no stack recorded</i>");
		mr_buf_puts(c->b, "</span></summary><div class=stacks>");
		for (size_t k = 0; k < gr->nstacks && k < HR_MAX_STACKS; k++) {
			const an_site *site = &sites[m[gr->first_site + k].site];
			mr_buf_printf(
			    c->b,
			    "<div class=stack><div class=stack-h>%s in %" PRIu64 " block%s"
			    "</div>",
			    fmt_bytes(b, site->bytes), site->count, site->count == 1 ? "" : "s");
			stack_html(c, site->stack);
			mr_buf_puts(c->b, "</div>");
		}
		if (gr->nstacks > HR_MAX_STACKS)
			mr_buf_printf(
			    c->b, "<p class=muted>%zu smaller stacks of this site not shown.</p>",
			    gr->nstacks - HR_MAX_STACKS);
		mr_buf_puts(c->b, "</div></details>");
	}
	mr_buf_puts(c->b, "</div>");
	if (ng > shown) {
		uint64_t rest = 0, rest_count = 0;
		for (size_t i = shown; i < ng; i++) {
			rest += g[i].bytes;
			rest_count += g[i].count;
		}
		char rb[32];
		mr_buf_printf(c->b,
		              "<p class=muted>%zu smaller sites not shown: %s in %" PRIu64
		              " blocks.</p>",
		              ng - shown, fmt_bytes(rb, rest), rest_count);
	}
done:
	free(m);
	free(g);
}

static void sites(hr_ctx *c, const hr_oom *oom)
{
	const rp_report *run = c->run;
	if (!run->ev.has_snapshot)
		return;
	mr_buf_puts(c->b,
	            "<section id=sites><h2>Where the live memory was allocated</h2>"
	            "<p class=muted>Live blocks grouped by the innermost Python frame that "
	            "PyTorch's viewer shows; open a site for its stacks.</p><div class=toolbar "
	            "hidden><input "
	            "type=search placeholder=\"filter by function or file\" aria-label=\"filter "
	            "sites\"><button type=button data-sort=bytes>sort by bytes</button><button "
	            "type=button data-sort=count>sort by blocks</button></div>");
	for (size_t d = 0; d < c->view->device_count; d++) {
		const an_device *dv = c->view->devices[d];
		if (!dv->site_count)
			continue;
		if (over_budget(c)) {
			left_out(c,
			         "Allocation sites of device %d (the page reached its size limit).",
			         dv->device);
			continue;
		}
		device_sites(c, dv, dv->sites, dv->site_count,
		             oom->present && oom->device == dv->device ? "out-of-memory moment"
		                                                       : "snapshot");
		if (c->st)
			return;
		/* At the trace's peak too, unless that is the snapshot's own moment. */
		if (dv->peak_site_count && dv->peak_allocated_event + 1 < dv->trace_events &&
		    !over_budget(c)) {
			device_sites(c, dv, dv->peak_sites, dv->peak_site_count,
			             "trace's allocated peak (block sizes rounded as the allocator "
			             "rounds)");
			if (c->st)
				return;
		}
	}
	mr_buf_puts(c->b, "</section>");
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
		text(c, k);
		mr_buf_puts(c->b, "</th><td><code>");
		text(c, md_str(c->s, cfg->raw[i].value));
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
			    "recording started late), so the peaks shown are lower bounds.</li>",
			    dv->device, fmt_bytes(b1, dv->initial_reserved),
			    fmt_bytes(b2, dv->initial_allocated));
		const an_pool *p = &dv->pool[AN_POOL_ALL];
		if (p->pending_free)
			mr_buf_printf(
			    &n,
			    "<li>Device %d: <b>%s in %" PRIu64 " block%s are pending free</b>: "
			    "freed by Python but still used by another stream "
			    "(<code>record_stream</code>); they return only when that stream's "
			    "work completes.</li>",
			    dv->device, fmt_bytes(b1, p->pending_free), p->pending_free_blocks,
			    p->pending_free_blocks == 1 ? "" : "s");
		const an_pool *pp = &dv->pool[AN_POOL_PRIVATE];
		if (pp->segments)
			mr_buf_printf(
			    &n,
			    "<li>Device %d: <b>%s in %" PRIu64 " segment%s belong to private "
			    "pools</b> (CUDA graphs or <code>torch.cuda.MemPool</code>): other "
			    "allocations cannot use them, and they are reported apart from the "
			    "default pool.</li>",
			    dv->device, fmt_bytes(b1, pp->reserved), pp->segments,
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
		path_text(c, c->run->ev.inputs[i].path);
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

mr_status rd_render_html(const rp_report *run, const rd_options *opt, mr_buf *out, mr_error *err)
{
	mr_buf body = {0}, title = {0};
	rp_view view;
	mr_status st = rp_view_init(&view, run, opt->device, err);
	if (st)
		return st;
	hr_ctx c = {run, opt, &view, &run->ev.snap, &body, {0}, err, MR_OK};

	hr_oom oom = oom_facts(run, &view);
	header(&c);
	verdict(&c, &oom);
	device_cards(&c);
	oom_panel(&c, &oom);
	findings(&c);
	recommendations(&c);
	replays(&c);
	categories(&c);
	if (!c.st)
		segment_maps(&c);
	if (!c.st)
		timelines(&c);
	if (!c.st)
		sites(&c, &oom);
	settings(&c);
	notes(&c);
	mr_buf_puts(&body, "<footer>Written by memreport. This page is self-contained: it loads "
	                   "nothing from the network and works without its script.</footer>");
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
	st = rd_page(out, title.data, "report.css", "report.js", body.data, body.len, err);
	if (!st && out->len - start > RP_HTML_MAX)
		st = mr_fail(err, MR_EFAIL, "the HTML report would exceed %d bytes", RP_HTML_MAX);
done:
	mr_buf_free(&body);
	mr_buf_free(&title);
	mr_buf_free(&c.left_out);
	rp_view_free(&view);
	return st;
}
