/* render_md.c: a Markdown summary for pasting into a GitHub issue. */
#include <inttypes.h>

#include "report.h"

mr_status rp_render_md(const rp_run *run, const rp_options *opt, mr_buf *out, mr_error *err)
{
	mr_buf *b = out;
	mr_buf_puts(b, "## memreport\n\n| device | reserved | allocated | active | free cached | "
		       "largest free block | fragmentation |\n|---|---|---|---|---|---|---|\n");
	for (size_t d = 0; run->has_snapshot && d < run->an.device_count; d++) {
		const an_device *dv = &run->an.devices[d];
		const an_pool *p = &dv->pool[AN_POOL_ALL];
		char r[32], a[32], ac[32], f[32], l[32];
		if (opt->device >= 0 && dv->device != opt->device)
			continue;
		mr_format_bytes(r, sizeof r, p->reserved);
		mr_format_bytes(a, sizeof a, p->allocated);
		mr_format_bytes(ac, sizeof ac, p->active);
		mr_format_bytes(f, sizeof f, p->free_cached);
		mr_format_bytes(l, sizeof l, p->largest_free);
		mr_buf_printf(b, "| %d | %s | %s | %s | %s | %s | %.1f%% |\n", dv->device, r, a, ac, f, l,
			      dv->fragmentation * 100.0);
	}
	return b->failed ? mr_oom(err) : MR_OK;
}
