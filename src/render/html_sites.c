/* html_sites.c: the allocation sites of the HTML report: live memory by the line of the user's
 * own code (analyze/sites.h), at the moment the verdict speaks of and at the report's other
 * moments (the OOM, the peak, the snapshot), each with the innermost library frame beside it
 * and its largest stack. */
#include "render/html_sites.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "analyze/frames.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/units.h"
#include "render/html_util.h"

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

/* The site's name: the user's line, and beside it the library frame or autograd. */
static void site_name(hr_ctx *c, const an_usite *site)
{
	mr_buf_puts(c->b, "<span class=sf>");
	if (site->user)
		hr_frame_html(c, site->user);
	else if (site->autograd)
		mr_buf_puts(c->b, "<i>autograd (backward)</i>");
	else if (site->lib)
		hr_frame_html(c, site->lib);
	else
		mr_buf_puts(c->b, "<i>no stack recorded</i>");
	mr_buf_puts(c->b, "</span>");
	if (site->user && site->autograd) {
		mr_buf_puts(c->b, "<span class=sl>autograd (backward)</span>");
	} else if (site->user && site->lib) {
		mr_buf_puts(c->b, "<span class=sl>via ");
		hr_frame_html(c, site->lib);
		mr_buf_puts(c->b, "</span>");
	}
}

static void site_html(hr_ctx *c, const an_usite *site, uint64_t total)
{
	char b[32], pct[16];
	snprintf(pct, sizeof pct, "%.1f%%",
	         total ? (double)site->bytes * 100.0 / (double)total : 0);
	mr_buf_printf(c->b,
	              "<details class=site data-bytes=%" PRIu64 " data-count=%" PRIu64
	              "><summary><span class=sb>%s</span><span class=sp>%s</span>"
	              "<span class=sc>%" PRIu64 " block%s</span>",
	              site->bytes, site->blocks, hr_bytes(b, site->bytes), pct, site->blocks,
	              site->blocks == 1 ? "" : "s");
	site_name(c, site);
	mr_buf_puts(c->b, "</summary><div class=stacks><div class=stack>");
	if (site->autograd) {
		mr_buf_puts(c->b,
		            "<div class=stack-h>Allocated by the autograd engine in backward, "
		            "which records no Python frame");
		mr_buf_puts(c->b, site->call != MD_NO_STACK
		                      ? "; the program was in this backward() call:</div>"
		                      : "; the trace does not show the backward() call.</div>");
		if (site->call != MD_NO_STACK)
			stack_html(c, site->call);
	} else {
		mr_buf_puts(c->b, "<div class=stack-h>The largest of its stacks:</div>");
		stack_html(c, site->stack);
	}
	mr_buf_puts(c->b, "</div></div></details>");
}

static void moment_sites(hr_ctx *c, const an_device *dv, const an_moments *m, size_t k)
{
	const an_moment *mo = &m->moments[k];
	uint64_t total = 0;
	for (size_t i = 0; i < mo->site_count; i++)
		total += mo->sites[i].bytes;
	char tb[32];
	mr_buf_printf(c->b, "<h3>Device %d <span class=muted>%s live in %zu site%s, at ",
	              dv->device, hr_bytes(tb, total), mo->site_count,
	              mo->site_count == 1 ? "" : "s");
	hu_moment_name(c->b, m, k);
	mr_buf_puts(c->b, mo->from_snapshot ? "" : " (rebuilt from the trace)");
	mr_buf_puts(c->b, "</span></h3><div class=sites data-list>");
	size_t shown = MR_MIN(mo->site_count, (size_t)HR_MAX_SITES);
	for (size_t i = 0; i < shown && !c->b->failed; i++) {
		if (hr_over_budget(c)) {
			hr_left_out(
			    c,
			    "%zu allocation sites of device %d (the page reached its size limit).",
			    shown - i, dv->device);
			shown = i;
			break;
		}
		site_html(c, &mo->sites[i], total);
	}
	mr_buf_puts(c->b, "</div>");
	if (mo->site_count > shown) {
		uint64_t rest = 0, rest_count = 0;
		for (size_t i = shown; i < mo->site_count; i++) {
			rest += mo->sites[i].bytes;
			rest_count += mo->sites[i].blocks;
		}
		char rb[32];
		mr_buf_printf(c->b,
		              "<p class=muted>%zu smaller sites not shown: %s in %" PRIu64
		              " blocks.</p>",
		              mo->site_count - shown, hr_bytes(rb, rest), rest_count);
	}
}

void hr_sites(hr_ctx *c)
{
	const rp_report *run = c->run;
	if (!run->ev.has_snapshot)
		return;
	mr_buf_puts(c->b,
	            "<section id=sites><h2>Where the live memory was allocated</h2>"
	            "<p class=muted>Live blocks grouped by the line of your own code that asked "
	            "for them (the first frame outside torch, installed packages and the standard "
	            "library), with the innermost library frame beside it. What the autograd "
	            "engine allocates in backward has no Python frame: it is grouped under the "
	            "backward() call. First at the moment the verdict speaks of, then at the "
	            "others; open a site for its stack.</p><div class=toolbar hidden><input "
	            "type=search placeholder=\"filter by function or file\" aria-label=\"filter "
	            "sites\"><button type=button data-sort=bytes>sort by bytes</button><button "
	            "type=button data-sort=count>sort by blocks</button></div>");
	for (size_t d = 0; d < c->view->device_count && !c->st; d++) {
		const an_device *dv = c->view->devices[d];
		const an_moments *m = rp_moments(run, dv);
		if (!m)
			continue;
		size_t first = rp_verdict_moment(run, dv);
		size_t order[4] = {first, m->oom, m->peak, m->snapshot};
		for (size_t i = 0; i < 4; i++) {
			size_t k = order[i];
			int seen = k == AN_NO_MOMENT || !m->moments[k].site_count;
			for (size_t j = 0; j < i && !seen; j++)
				seen = order[j] == k;
			if (seen)
				continue;
			if (hr_over_budget(c)) {
				hr_left_out(
				    c,
				    "Allocation sites of device %d at some of its moments (the "
				    "page reached its size limit).",
				    dv->device);
				break;
			}
			moment_sites(c, dv, m, k);
		}
	}
	mr_buf_puts(c->b, "</section>");
}
