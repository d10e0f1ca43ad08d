/* settings.c: allocator settings as a whole. */
#include "advise/settings.h"

#include <stdio.h>
#include <string.h>

#include "base/buf.h"
#include "base/units.h"
#include "sim/config.h"

/* Reserved above allocated at the peak, as a share of peak reserved, that is worth an allocator
 * change; and the least absolute amount. */
enum { HIGH_OVERHEAD_PERCENT = 15 };
#define HIGH_OVERHEAD_MIN_BYTES (256 * MR_MIB)

static int settings_expandable(const ad_ctx *c)
{
	return c->s->settings.expandable_segments || (c->dv && c->dv->expandable);
}

static int settings_max_split(const ad_ctx *c)
{
	uint64_t m = c->s->settings.max_split_size;
	return m != UINT64_MAX && m != 0;
}

int ad_complete_conf(const ad_ctx *c, const char *change, char *out, size_t outsz)
{
	sim_config recorded, cfg;
	mr_error err = {0};
	sim_config_from_settings(c->s, &recorded);
	if (sim_parse_conf(change, &recorded, &cfg, &err))
		return -1;
	mr_buf b = {0};
	mr_buf_puts(&b, "PYTORCH_CUDA_ALLOC_CONF=");
	sim_config_format(&cfg, &b);
	int ok = !b.failed && b.len < outsz;
	if (ok)
		memcpy(out, b.data, b.len + 1);
	mr_buf_free(&b);
	return ok ? 0 : -1;
}

void ad_rule_fragmentation(ad_ctx *c, int priority, uint64_t free_bytes, uint64_t largest,
                           uint64_t hole)
{
	char b1[32], b2[32], change[160], piece[64] = "";
	if (largest)
		snprintf(piece, sizeof piece, ", and the largest piece is %s", ad_sz(b2, largest));
	/* turning expandable segments on, max_split_size_mb goes: it would keep freed expandable
	 * blocks from serving other sizes */
	if (!settings_expandable(c) &&
	    !ad_complete_conf(c,
	                      settings_max_split(c)
	                          ? "expandable_segments:True,max_split_size_mb:default"
	                          : "expandable_segments:True",
	                      change, sizeof change))
		ad_suggest(
		    c, "expandable_segments", priority, "Turn on expandable segments", change,
		    "%s is cached but free%s: expandable segments map memory in pages so freed "
		    "space can be reused for larger tensors instead of staying cut into pieces.",
		    ad_sz(b1, free_bytes), piece);
	if (settings_max_split(c) || settings_expandable(c))
		return;
	/* Blocks at least as large as the largest hole left inside a split segment are then never
	 * split, and requests that size get segments of their own. Without a layout (a log
	 * alone), 128 MiB is the usual first try. */
	uint64_t mib = hole ? (hole + MR_MIB - 1) / MR_MIB : 128;
	mib = (mib + 31) / 32 * 32;
	if (mib < 32)
		mib = 32;
	char set[64];
	snprintf(set, sizeof set, "max_split_size_mb:%llu", (unsigned long long)mib);
	if (ad_complete_conf(c, set, change, sizeof change))
		return;
	ad_suggest(c, "max_split_size_mb", priority + 5,
	           "If expandable segments cannot be used: stop splitting large blocks", change,
	           "Blocks of %llu MiB or more would no longer be split into pieces that larger "
	           "requests cannot reuse. It costs speed (more cudaMalloc calls and cache "
	           "flushes when memory is short), so prefer expandable segments.",
	           (unsigned long long)mib);
}

/* max_split_size_mb beside expandable segments: a freed expandable block larger than the limit
 * is never split for a smaller request, so the allocator maps more pages instead. */
static void advise_max_split_with_expandable(ad_ctx *c)
{
	const an_device *dv = c->dv;
	char b1[32], b2[32], change[160];
	uint64_t over = dv && dv->peak_reserved > dv->peak_allocated
	                    ? dv->peak_reserved - dv->peak_allocated
	                    : 0;
	int costly = dv && dv->has_trace &&
	             ad_pct(over, dv->peak_reserved) >= HIGH_OVERHEAD_PERCENT &&
	             over >= HIGH_OVERHEAD_MIN_BYTES;
	if (!costly || ad_complete_conf(c, "max_split_size_mb:default", change, sizeof change)) {
		ad_note(c, "setting_ineffective", AD_INFO,
		        "Both expandable_segments and max_split_size_mb are set: max_split_size_mb "
		        "only acts on non-expandable segments, so with expandable segments on it "
		        "has little left to do.");
		return;
	}
	ad_note(c, "settings_conflict", AD_WARNING,
	        "expandable_segments and max_split_size_mb are both set, and the peak shows the "
	        "cost: %s reserved for %s allocated. Freed expandable blocks over the split "
	        "limit are not cut for smaller requests, so the allocator maps new pages "
	        "instead of reusing them.",
	        ad_sz(b1, dv->peak_reserved), ad_sz(b2, dv->peak_allocated));
	ad_suggest(c, "remove_max_split_size_mb", AD_PRIO_FIRST,
	           "Remove max_split_size_mb: expandable segments need no split limit", change,
	           "With expandable segments, max_split_size_mb only keeps %s of freed memory "
	           "from being reused at the peak.",
	           ad_sz(b1, over));
}

void ad_rule_settings(ad_ctx *c)
{
	const md_settings *cfg = &c->s->settings;
	const an_oom *o = c->dv ? &c->dv->oom : NULL;
	int oom = o && o->present;
	int fraction = oom && o->device_free > o->alloc_size;
	/* Only an OOM tells whether a fraction was set (the device had room it could not use);
	 * a run that did not fail says nothing of it, and one whose trace shows the threshold
	 * reclaiming (allocator_reclaim) shows it acting. */
	if (cfg->gc_threshold > 0 && oom && !fraction)
		ad_note(
		    c, "setting_ineffective", AD_WARNING,
		    "garbage_collection_threshold:%g is set, but it only acts when a memory "
		    "fraction is set (torch.cuda.set_per_process_memory_fraction), and this OOM "
		    "shows none: the device itself was full.",
		    cfg->gc_threshold);
	else if (cfg->gc_threshold > 0 && !oom && !ad_finding_of(c->a, "allocator_reclaim"))
		ad_note(c, "setting_unverified", AD_INFO,
		        "garbage_collection_threshold:%g is set; it acts only when a memory "
		        "fraction is set (torch.cuda.set_per_process_memory_fraction), and these "
		        "inputs do not show whether one is.",
		        cfg->gc_threshold);
	if (settings_max_split(c) && settings_expandable(c))
		advise_max_split_with_expandable(c);
}
