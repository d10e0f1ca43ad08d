/* verdict.c: the one sentence a report leads with. */
#include "advise/verdict.h"

#include <string.h>

#include "base/buf.h"
#include "base/mem.h"
#include "base/units.h"

static const char *sz(char *buf, uint64_t v)
{
	mr_format_bytes(buf, 32, v);
	return buf;
}

int ad_write_verdict(ad_advice *a, const an_device *dv)
{
	const an_pool *all = dv ? &dv->pool[AN_POOL_ALL] : NULL;
	const ad_oom *o = &a->oom;
	char b1[32], b2[32], b3[32], b4[32];
	mr_buf b = {0};
	static const uint64_t none[AN_CAT_COUNT];
	const uint64_t *cat = dv ? dv->categories : none;
	uint64_t live = ad_live_total(cat);
	if (!dv) {
		if (o->present && o->cause == AD_CAUSE_FRAGMENTATION)
			mr_buf_printf(
			    &b,
			    "Out of memory from fragmentation: %s reserved but unallocated, more "
			    "than the %s asked for, within %s.",
			    sz(b1, o->free_cached), sz(b2, o->requested), sz(b3, o->limit));
		else if (o->present && o->cause == AD_CAUSE_CAPACITY &&
		         (o->unknown & AD_OOM_NO_FREE_CACHED))
			mr_buf_printf(
			    &b,
			    "Out of memory from capacity: %s allocated by PyTorch within %s, "
			    "for a %s request.",
			    sz(b1, o->allocated), sz(b2, o->limit), sz(b4, o->requested));
		else if (o->present && o->cause == AD_CAUSE_CAPACITY &&
		         o->free_cached >= o->requested)
			mr_buf_printf(
			    &b,
			    "Out of memory from capacity: %s allocated by PyTorch within %s; the "
			    "%s "
			    "reserved but unallocated was in pieces, none large enough for the %s "
			    "request.",
			    sz(b1, o->allocated), sz(b2, o->limit), sz(b3, o->free_cached),
			    sz(b4, o->requested));
		else if (o->present && o->cause == AD_CAUSE_CAPACITY)
			mr_buf_printf(
			    &b,
			    "Out of memory from capacity: %s allocated by PyTorch within %s; only "
			    "%s was reserved but unallocated for a %s request.",
			    sz(b1, o->allocated), sz(b2, o->limit), sz(b3, o->free_cached),
			    sz(b4, o->requested));
		else if (o->present && o->cause == AD_CAUSE_OTHER_PROCESSES)
			mr_buf_printf(
			    &b,
			    "Out of memory because other processes hold most of the card; "
			    "PyTorch had only %s allocated.",
			    sz(b1, o->allocated));
		else if (o->present)
			mr_buf_printf(&b, "Out of memory; the evidence does not say why.");
		else
			mr_buf_printf(&b, "No out-of-memory error in the evidence.");
	} else if (o->present && o->cause == AD_CAUSE_FRAGMENTATION) {
		mr_buf_printf(
		    &b,
		    "Out of memory from fragmentation: %s free in %llu pieces, none as large "
		    "as the %s asked for.",
		    sz(b1, o->free_cached), (unsigned long long)o->free_pieces,
		    sz(b2, o->requested));
	} else if (o->present) {
		uint64_t state =
		    cat[AN_CAT_PARAMETERS] + cat[AN_CAT_GRADIENTS] + cat[AN_CAT_OPTIMIZER];
		if (live && ad_pct(state, live) >= AD_DOMINANT_PERCENT)
			mr_buf_printf(
			    &b,
			    "Out of memory from capacity: parameters, gradients and optimizer "
			    "state hold %s of %s live; activations are only %s, so a smaller "
			    "batch cannot help.",
			    sz(b1, state), sz(b2, live), sz(b3, cat[AN_CAT_ACTIVATIONS]));
		else
			mr_buf_printf(&b,
			              "Out of memory from capacity: live tensors hold %s (%d%% "
			              "activations); only %s was free for a %s request.",
			              sz(b1, all->allocated), ad_pct(cat[AN_CAT_ACTIVATIONS], live),
			              sz(b2, o->free_cached), sz(b3, o->requested));
	} else {
		const ad_finding *growth = NULL, *frag = NULL;
		for (size_t i = 0; i < a->finding_count; i++) {
			if (strcmp(a->findings[i].id, "memory_growth") == 0)
				growth = &a->findings[i];
			if (strcmp(a->findings[i].id, "high_fragmentation") == 0)
				frag = &a->findings[i];
		}
		if (growth) {
			const an_growth *g = &dv->growth;
			mr_buf_printf(
			    &b,
			    "Memory grows %s per iteration and is never released: %s over "
			    "%zu iterations.",
			    sz(b1, g->per_iteration),
			    sz(b2, g->per_iteration * g->middle_iterations), g->middle_iterations);
		} else if (frag) {
			mr_buf_printf(
			    &b,
			    "%d%% of reserved memory is lost to fragmentation at the peak: %s "
			    "reserved for %s allocated.",
			    ad_pct(dv->peak_reserved - dv->peak_allocated, dv->peak_reserved),
			    sz(b1, dv->peak_reserved), sz(b2, dv->peak_allocated));
		} else if (dv->has_trace) {
			mr_buf_printf(
			    &b,
			    "Healthy: peak %s allocated in %s reserved (%d%% overhead); nothing "
			    "urgent to change.",
			    sz(b1, dv->peak_allocated), sz(b2, dv->peak_reserved),
			    ad_pct(dv->peak_reserved -
			               MR_MIN(dv->peak_allocated, dv->peak_reserved),
			           dv->peak_reserved));
		} else {
			mr_buf_printf(
			    &b,
			    "No out-of-memory error: %s reserved, %s allocated, largest free "
			    "block %s. No allocation history was recorded.",
			    sz(b1, all->reserved), sz(b2, all->allocated),
			    sz(b3, all->largest_free));
		}
	}
	if (b.failed) {
		mr_buf_free(&b);
		return -1;
	}
	a->verdict = b.data ? b.data : mr_strndup("", 0);
	return a->verdict ? 0 : -1;
}
