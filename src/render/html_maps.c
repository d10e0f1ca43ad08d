/* html_maps.c: the segment maps (PNG bars per segment, aggregates for the rest) and the timelines
 * (inline SVG) of the HTML report. */
#include "render/html_maps.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base64.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/units.h"
#include "render/html_util.h"
#include "render/png_map.h"
#include "render/svg_timeline.h"
#include "render/templates.h"

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

/* The segments and blocks of one moment (analyze/moments.h). */
typedef struct {
	const md_segment *segs;
	const md_block *blocks;
	size_t count;
} hr_layout;

static void map_row(hr_ctx *c, const hr_layout *l, size_t rank, const md_segment *seg,
                    uint64_t scale)
{
	pm_totals t = {0};
	pm_segment_totals(l->blocks, seg, &t);
	char size[32], act[32], fr[32], stream[40];
	uint64_t free_bytes = t.bytes[PM_FREE_SPLIT] + t.bytes[PM_FREE_WHOLE];
	hr_stream_label(stream, seg->stream);
	mr_buf png = {0};
	mr_status st =
	    pm_segment_png(l->blocks, seg, scale, HR_MAP_WIDTH, HR_MAP_PNG_ROWS, &png, c->err);
	if (st) {
		c->st = st;
		mr_buf_free(&png);
		return;
	}
	mr_buf_printf(c->b,
	              "<tr><td class=n>%zu</td><td class=n data-v=%" PRIu64 ">%s</td><td>%s</td>"
	              "<td>%s%s</td><td class=n>%" PRIu64 "</td><td>",
	              rank, seg->total_size, hr_bytes(size, seg->total_size), stream,
	              pool_name(seg_pool(seg)), seg->is_expandable ? ", expandable" : "", t.blocks);
	png_img(c, &png, "map");
	mr_buf_printf(c->b,
	              " alt=\"segment 0x%" PRIx64 ", %s: %s active, %s free in %" PRIu64
	              " block%s\" title=\"segment 0x%" PRIx64 ": %s active, %s free in %" PRIu64
	              " block%s\"></td><td class=n data-v=%" PRIu64
	              ">%s</td><td class=n data-v=%" PRIu64 ">%s</td></tr>",
	              seg->address, size, hr_bytes(act, t.bytes[PM_ACTIVE] + t.bytes[PM_WASTE]),
	              hr_bytes(fr, free_bytes), t.free_blocks, t.free_blocks == 1 ? "" : "s",
	              seg->address, act, fr, t.free_blocks, t.free_blocks == 1 ? "" : "s",
	              t.bytes[PM_ACTIVE] + t.bytes[PM_WASTE], act, free_bytes, fr);
	mr_buf_free(&png);
}

static void map_groups(hr_ctx *c, const hr_layout *l, const size_t *order, size_t from,
                       size_t count, size_t max_groups)
{
	hr_group *groups = mr_alloc_array(count ? count : 1, sizeof *groups);
	size_t ng = 0;
	if (!groups) {
		c->st = mr_oom(c->err);
		return;
	}
	for (size_t i = from; i < count; i++) {
		const md_segment *seg = &l->segs[order[i]];
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
		pm_segment_totals(l->blocks, seg, &groups[g].totals);
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
	size_t shown = MR_MIN(ng, max_groups);
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
			snprintf(size, sizeof size, "%s each", hr_bytes(lo, gr->key));
		else
			snprintf(size, sizeof size, "%s\xe2\x80\x93%s",
			         hr_bytes(lo, (uint64_t)1 << gr->key),
			         hr_bytes(hi, gr->key >= 63 ? UINT64_MAX
			                                    : (uint64_t)1 << (gr->key + 1)));
		mr_buf png = {0};
		mr_status st = pm_totals_png(&gr->totals, (double)gr->bytes / (double)top,
		                             HR_MAP_WIDTH, HR_MAP_PNG_ROWS, &png, c->err);
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
		              gr->count, size, hr_bytes(tot, gr->bytes), pool_name(gr->pool),
		              gr->totals.blocks);
		png_img(c, &png, "map");
		mr_buf_printf(
		    c->b,
		    " alt=\"%" PRIu64 " segments, %s\"></td><td class=n>%s</td>"
		    "<td class=n>%s</td></tr>",
		    gr->count, tot,
		    hr_bytes(act, gr->totals.bytes[PM_ACTIVE] + gr->totals.bytes[PM_WASTE]),
		    hr_bytes(fr, free_bytes));
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

/* The maps of one moment: its largest segments one by one, the rest aggregated; rows and
 * groups are fewer for the moments other than the verdict's. */
static void moment_maps(hr_ctx *c, const an_device *dv, const an_moments *m, size_t k, int open)
{
	const an_moment *mo = &m->moments[k];
	const hr_layout l = {mo->segments, mo->blocks, mo->segment_count};
	const an_pool *p = &mo->totals;
	size_t rows = open ? HR_MAX_MAP_ROWS : HR_MAX_MAP_ROWS / 4;
	size_t *order = mr_alloc_array(l.count ? l.count : 1, sizeof *order);
	if (!order || pm_sort_segments(l.segs, 0, l.count, order)) {
		free(order);
		c->st = mr_oom(c->err);
		return;
	}
	char v[5][32];
	mr_buf_printf(c->b, "<details class=moment id=maps-d%d-m%zu%s><summary>At ", dv->device, k,
	              open ? " open" : "");
	hu_moment_name(c->b, m, k);
	if (mo->event != AN_NO_MOMENT && !mo->from_snapshot)
		mr_buf_printf(c->b,
		              " <span class=muted>(after event %zu, rebuilt from the trace)</span>",
		              mo->event);
	mr_buf_printf(c->b,
	              ": %s reserved in %" PRIu64 " segment%s, %s allocated, %s free cached, "
	              "largest free block %s, fragmentation %.1f%%</summary>",
	              hr_bytes(v[0], p->reserved), p->segments, p->segments == 1 ? "" : "s",
	              hr_bytes(v[1], p->allocated), hr_bytes(v[2], p->free_cached),
	              hr_bytes(v[3], p->largest_free), an_fragmentation(p) * 100.0);
	size_t shown = MR_MIN(l.count, rows);
	uint64_t scale = l.count ? l.segs[order[0]].total_size : 1;
	mr_buf_printf(c->b, "<p class=muted>%zu segment%s%s; full bar = %s.</p>", l.count,
	              l.count == 1 ? "" : "s", l.count > shown ? ", largest first" : "",
	              hr_bytes(v[4], scale));
	mr_buf_puts(c->b, "<table class=\"maps sortable\"><thead><tr><th class=n>#</th>"
	                  "<th class=n>size</th><th>stream</th><th>pool</th><th class=n>blocks"
	                  "</th><th>map</th><th class=n>active</th><th class=n>free</th></tr>"
	                  "</thead><tbody>");
	for (size_t i = 0; i < shown && !c->st; i++)
		map_row(c, &l, i + 1, &l.segs[order[i]], scale);
	mr_buf_puts(c->b, "</tbody></table>");
	if (!c->st && shown < l.count)
		map_groups(c, &l, order, shown, l.count,
		           open ? HR_MAX_MAP_GROUPS : HR_MAX_MAP_GROUPS / 4);
	mr_buf_puts(c->b, "</details>");
	free(order);
}

/* One device: a line of links to its moments, then the maps of each, the verdict's open. */
static void device_maps(hr_ctx *c, const an_device *dv)
{
	const an_moments *m = rp_moments(c->run, dv);
	size_t focus = rp_verdict_moment(c->run, dv);
	mr_buf_printf(c->b, "<h3>Device %d</h3><p class=moments>Segments at ", dv->device);
	for (size_t k = 0; k < m->moment_count; k++) {
		mr_buf_printf(c->b, "%s<a href=\"#maps-d%d-m%zu\">", k ? " \xc2\xb7 " : "",
		              dv->device, k);
		hu_moment_name(c->b, m, k);
		mr_buf_puts(c->b, "</a>");
	}
	mr_buf_puts(c->b, "</p>");
	for (size_t k = 0; k < m->moment_count && !c->st; k++) {
		if (k != focus && hr_over_budget(c)) {
			hr_left_out(c,
			            "Segment maps of device %d at %zu of its moments (the page "
			            "reached its size limit).",
			            dv->device, m->moment_count - k);
			break;
		}
		moment_maps(c, dv, m, k, k == focus);
	}
}

void hr_segment_maps(hr_ctx *c)
{
	const rp_report *run = c->run;
	if (!run->ev.has_snapshot || !c->s->segment_count)
		return;
	mr_buf_puts(c->b,
	            "<section id=maps><h2>Segment maps</h2>"
	            "<p class=muted>Each bar is one segment reserved from CUDA, its blocks in "
	            "address order, coloured by state; a thin dark line separates blocks. Bar "
	            "length is proportional to the segment's size. They are drawn at each marked "
	            "moment: the one the verdict speaks of is open; the state at a moment before "
	            "the snapshot is rebuilt from the trace (blocks freed before the snapshot "
	            "have their sizes estimated by the allocator's rounding).</p>");
	legend(c);
	for (size_t d = 0; d < c->view->device_count && !c->st; d++) {
		const an_device *dv = c->view->devices[d];
		if (!dv->segment_count && !dv->has_trace)
			continue;
		if (hr_over_budget(c)) {
			hr_left_out(c,
			            "Segment maps of device %d (the page reached its size limit).",
			            dv->device);
			continue;
		}
		device_maps(c, dv);
	}
	mr_buf_puts(c->b, "</section>");
}

void hr_timelines(hr_ctx *c)
{
	const rp_report *run = c->run;
	if (!run->ev.has_snapshot)
		return;
	mr_buf_puts(c->b, "<section id=timeline><h2>Memory over the trace</h2>");
	/* the interactive timeline (hidden until its script shows it), templates/timeline.html */
	size_t len = 0;
	char *fragment = tp_get("timeline.html", &len);
	while (fragment && len && (fragment[len - 1] == '\n' || fragment[len - 1] == ' '))
		len--;
	if (fragment)
		mr_buf_append(c->b, fragment, len);
	free(fragment);
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
		if (hr_over_budget(c)) {
			hr_left_out(c,
			            "The timeline of device %d (the page reached its size limit).",
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
		    hr_bytes(pa, dv->peak_allocated), hr_bytes(pr, dv->peak_reserved),
		    !dv->truncated   ? ""
		    : dv->peak_exact ? " (the trace does not reach back to the start: both are "
		                       "exact within its window, lower bounds for the run)"
		                     : " (the trace does not reach back to the start: both are "
		                       "lower bounds)");
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
