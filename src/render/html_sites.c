/* html_sites.c: the allocation sites of the HTML report: live blocks grouped by their site frame,
 * with their stacks. */
#include "render/html_sites.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analyze/frames.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/units.h"
#include "render/html_util.h"

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
		hr_frame_html(c, f);
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
	    dv->device, hr_bytes(tb, total), ng, ng == 1 ? "" : "s", n, n == 1 ? "" : "s", moment);
	size_t shown = MR_MIN(ng, (size_t)HR_MAX_SITES);
	for (size_t i = 0; i < shown && !c->b->failed; i++) {
		const hr_site_group *gr = &g[i];
		if (hr_over_budget(c)) {
			hr_left_out(
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
		              gr->bytes, gr->count, hr_bytes(b, gr->bytes), pct, gr->count,
		              gr->count == 1 ? "" : "s");
		if (gr->frame)
			hr_frame_html(c, gr->frame);
		else
			mr_buf_puts(c->b, "<i>no stack recorded</i>");
		mr_buf_puts(c->b, "</span></summary><div class=stacks>");
		for (size_t k = 0; k < gr->nstacks && k < HR_MAX_STACKS; k++) {
			const an_site *site = &sites[m[gr->first_site + k].site];
			mr_buf_printf(
			    c->b,
			    "<div class=stack><div class=stack-h>%s in %" PRIu64 " block%s"
			    "</div>",
			    hr_bytes(b, site->bytes), site->count, site->count == 1 ? "" : "s");
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
		              ng - shown, hr_bytes(rb, rest), rest_count);
	}
done:
	free(m);
	free(g);
}

void hr_sites(hr_ctx *c, const hr_oom *oom)
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
		if (hr_over_budget(c)) {
			hr_left_out(
			    c, "Allocation sites of device %d (the page reached its size limit).",
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
		    !hr_over_budget(c)) {
			device_sites(c, dv, dv->peak_sites, dv->peak_site_count,
			             "trace's allocated peak (block sizes rounded as the allocator "
			             "rounds)");
			if (c->st)
				return;
		}
	}
	mr_buf_puts(c->b, "</section>");
}
