/* analyze.c: per-device numbers, layout, trace replay and live sites. */
#include "analyze/analyze.h"

#include <stdlib.h>
#include <string.h>

#include "analyze/frames.h"
#include "base/addrmap.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/units.h"
#include "sim/config.h"

/* ---- layout ---- */

static int is_private(const md_segment *seg)
{
	return seg->pool_id[0] || seg->pool_id[1];
}

void an_pool_add(an_pool *p, const md_segment *seg, const md_block *blocks)
{
	/* blocks is NULL in a snapshot without blocks: no arithmetic on it then */
	const md_block *b = seg->block_count ? blocks + seg->first_block : NULL;
	int split = seg->block_count > 1 && !seg->is_expandable;
	int any_active = 0;
	p->reserved += seg->total_size;
	p->segments++;
	for (size_t i = 0; i < seg->block_count; i++) {
		switch (b[i].state) {
		case MD_BLOCK_ACTIVE_ALLOCATED:
			p->allocated += b[i].size;
			/* fallthrough */
		case MD_BLOCK_ACTIVE_PENDING_FREE:
			p->active += b[i].size;
			p->requested += b[i].requested_size;
			p->active_blocks++;
			any_active = 1;
			if (b[i].size > b[i].requested_size)
				p->rounding_waste += b[i].size - b[i].requested_size;
			if (b[i].state == MD_BLOCK_ACTIVE_PENDING_FREE) {
				p->pending_free += b[i].size;
				p->pending_free_blocks++;
			}
			break;
		default:
			p->free_cached += b[i].size;
			p->free_blocks++;
			if (b[i].size > p->largest_free)
				p->largest_free = b[i].size;
			if (seg->block_count > 1 && b[i].size > p->largest_hole)
				p->largest_hole = b[i].size;
			if (split) {
				p->inactive_split += b[i].size;
				p->inactive_split_blocks++;
			}
		}
	}
	if (!any_active)
		p->whole_free += seg->total_size;
}

double an_fragmentation(const an_pool *p)
{
	return p->free_cached ? 1.0 - (double)p->largest_free / (double)p->free_cached : 0.0;
}

/* ---- trace replay ---- */

/* Estimated block size of a request whose block is gone (exact sizes need the allocator
 * replay of simulate.c): rounded the way the allocator rounds. */
static uint64_t block_estimate(const md_settings *cfg, uint64_t requested)
{
	return sim_round_divisions(cfg ? cfg->roundup_divisions : NULL, requested);
}

static void bucket_add(an_point *p, int first_visit, size_t i, int64_t time_us, uint64_t alloc,
                       uint64_t reserved)
{
	if (first_visit) {
		p->allocated_min = p->allocated_max = alloc;
		p->reserved_min = p->reserved_max = reserved;
	} else {
		p->allocated_min = MR_MIN(p->allocated_min, alloc);
		p->allocated_max = MR_MAX(p->allocated_max, alloc);
		p->reserved_min = MR_MIN(p->reserved_min, reserved);
		p->reserved_max = MR_MAX(p->reserved_max, reserved);
	}
	p->first_event = i;
	p->time_us = time_us;
}

/* Walks the trace backwards from the snapshot, whose state is exact: blocks live at the end
 * keep their real sizes, blocks freed inside the window are estimated at their free, and
 * whatever is left when the walk reaches the first event was there before the window. */
static mr_status replay(const md_snapshot *s, const an_pool *all, an_device *dv,
                        const md_device *md, size_t max_points, am_map *older, mr_error *err)
{
	const md_event *ev = md->events;
	size_t n = md->event_count;
	am_map live = {0};
	mr_status st = MR_OK;
	uint64_t v;
	/* `older` starts as every block live at the snapshot; the walk takes out each one whose
	 * allocation it meets, and leaves those older than the trace. */
	for (size_t i = dv->segment_first; i < dv->segment_first + dv->segment_count; i++) {
		const md_segment *seg = &s->segments[i];
		for (size_t j = 0; j < seg->block_count; j++) {
			const md_block *b = &s->blocks[seg->first_block + j];
			if (b->state == MD_BLOCK_INACTIVE)
				continue;
			if (am_put(older, b->address, 1) ||
			    (b->state == MD_BLOCK_ACTIVE_ALLOCATED &&
			     am_put(&live, b->address, b->size)))
				goto oom;
		}
	}
	size_t buckets = n < max_points ? n : max_points;
	dv->timeline = mr_alloc_array(buckets, sizeof *dv->timeline);
	if (!dv->timeline)
		goto oom;
	dv->timeline_count = buckets;
	uint64_t alloc = all->allocated, reserved = all->reserved, size;
	dv->peak_allocated = alloc;
	dv->peak_reserved = reserved;
	dv->peak_allocated_event = dv->peak_reserved_event = n - 1;
	size_t bucket = (size_t)-1;
	for (size_t i = n; i-- > 0;) {
		const md_event *e = &ev[i];
		/* Levels after event i. */
		if (alloc >= dv->peak_allocated) {
			dv->peak_allocated = alloc;
			dv->peak_allocated_event = i;
		}
		if (reserved >= dv->peak_reserved) {
			dv->peak_reserved = reserved;
			dv->peak_reserved_event = i;
		}
		size_t b = (size_t)((unsigned __int128)i * buckets / n);
		bucket_add(&dv->timeline[b], b != bucket, i, md_event_time(md, i), alloc, reserved);
		bucket = b;
		/* Undo event i. */
		switch (e->action) {
		case MD_ACT_ALLOC:
			am_take(older, e->addr, &v);
			if (!am_take(&live, e->addr, &size))
				size = block_estimate(&s->settings, e->size);
			alloc = alloc > size ? alloc - size : 0;
			break;
		case MD_ACT_FREE_REQUESTED:
			/* A block freed twice with no alloc between (a spliced or repeated trace)
			 * is counted once. */
			if (am_take(&live, e->addr, &size)) {
				if (am_put(&live, e->addr, size))
					goto oom;
				break;
			}
			size = block_estimate(&s->settings, e->size);
			if (am_put(&live, e->addr, size))
				goto oom;
			alloc += size;
			break;
		case MD_ACT_SEGMENT_ALLOC:
		case MD_ACT_SEGMENT_MAP:
			reserved = reserved > e->size ? reserved - e->size : 0;
			break;
		case MD_ACT_SEGMENT_FREE:
		case MD_ACT_SEGMENT_UNMAP: reserved += e->size; break;
		case MD_ACT_OOM:
			if (!dv->oom_events++)
				dv->last_oom_event = i;
			break;
		default: break;
		}
	}
	dv->initial_allocated = alloc;
	dv->initial_reserved = reserved;
	dv->blocks_before_window = live.count;
	if (alloc > dv->peak_allocated)
		dv->peak_allocated = alloc;
	if (reserved > dv->peak_reserved)
		dv->peak_reserved = reserved;
	/* The window starts with an empty allocator only when the recording began with the run. */
	dv->truncated = alloc > 0 || reserved > 0;
	goto done;
oom:
	st = mr_oom(err);
done:
	am_free(&live);
	return st;
}

/* ---- live sites ---- */

static int site_cmp(const void *a, const void *b)
{
	const an_site *x = a, *y = b;
	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return (x->stack > y->stack) - (x->stack < y->stack);
}

static mr_status live_sites(const md_snapshot *s, an_device *dv, mr_error *err)
{
	size_t nb = 0;
	for (size_t i = dv->segment_first; i < dv->segment_first + dv->segment_count; i++)
		nb += s->segments[i].block_count;
	an_site *sites = mr_alloc_array(nb, sizeof *sites);
	uint32_t *slot_of = mr_alloc_array(s->stack_count, sizeof *slot_of); /* site index + 1 */
	if (!sites || !slot_of) {
		free(sites);
		free(slot_of);
		return mr_oom(err);
	}
	size_t count = 0;
	for (size_t i = dv->segment_first; i < dv->segment_first + dv->segment_count; i++) {
		const md_segment *seg = &s->segments[i];
		for (size_t j = 0; j < seg->block_count; j++) {
			const md_block *b = &s->blocks[seg->first_block + j];
			if (b->state == MD_BLOCK_INACTIVE)
				continue;
			uint32_t k = b->stack < s->stack_count ? b->stack : 0;
			if (!slot_of[k]) {
				sites[count].stack = k;
				slot_of[k] = (uint32_t)++count;
			}
			an_site *site = &sites[slot_of[k] - 1];
			site->bytes += b->size;
			site->requested += b->requested_size;
			site->count++;
		}
	}
	free(slot_of);
	qsort(sites, count, sizeof *sites, site_cmp);
	dv->sites = sites;
	dv->site_count = count;
	return MR_OK;
}

/* ---- categories ---- */

/* What a live block's frames say; for a block without one, whether the trace saw it allocated
 * (then autograd's engine thread did it, in backward) or it is older than the trace. */
static int block_category(const md_snapshot *s, const an_stack_info *info, uint32_t stack,
                          int in_window)
{
	return an_stack_category(info, stack < s->stack_count ? stack : 0,
	                         in_window ? AN_CAT_GRADIENTS : AN_CAT_UNKNOWN);
}

static void snapshot_categories(const md_snapshot *s, const an_stack_info *info, an_device *dv,
                                const am_map *older)
{
	uint64_t v;
	for (size_t i = dv->segment_first; i < dv->segment_first + dv->segment_count; i++) {
		const md_segment *seg = &s->segments[i];
		for (size_t j = 0; j < seg->block_count; j++) {
			const md_block *b = &s->blocks[seg->first_block + j];
			if (b->state == MD_BLOCK_INACTIVE)
				continue;
			int in_window = dv->has_trace && !am_get(older, b->address, &v);
			dv->categories[block_category(s, info, b->stack, in_window)] += b->size;
		}
	}
}

/* ---- the OOM moment ---- */

uint64_t an_segment_size_for(uint64_t size)
{
	if (size <= MR_MIB)
		return 2 * MR_MIB;
	if (size < 10 * MR_MIB)
		return 20 * MR_MIB;
	return (size + 2 * MR_MIB - 1) / (2 * MR_MIB) * (2 * MR_MIB);
}

/* Whether training went on after the OOM at event `at`: a backward pass began after it and then
 * an optimizer step, or a second backward pass (an optimizer that allocates nothing). A snapshot
 * dumped in the except block, or by the OOM observer, sees at most the unwinding's frees and a
 * retry that died too: no completed step. Counts the backward passes into *backwards. */
static int went_on_after(const md_snapshot *s, const an_stack_info *info, const md_device *md,
                         size_t at, size_t *backwards)
{
	int in_backward = 0, stepped = 0;
	size_t n = 0;
	for (size_t i = at + 1; i < md->event_count; i++) {
		const md_event *e = &md->events[i];
		if (e->action != MD_ACT_ALLOC || e->stack >= s->stack_count)
			continue;
		uint32_t f = info[e->stack].flags;
		int bwd = (f & (AN_SF_BACKWARD | AN_SF_ENGINE_THREAD)) != 0;
		if (bwd && !in_backward)
			n++;
		in_backward = bwd;
		if (!bwd && n && (f & AN_SF_OPTIMIZER) && !(f & AN_SF_MODULE_CALL))
			stepped = 1;
	}
	*backwards = n;
	return (n >= 1 && stepped) || n >= 2;
}

static void oom_layout(const md_snapshot *s, const an_stack_info *info, const md_device *md,
                       an_device *dv)
{
	if (!dv->oom_events)
		return;
	/* The last OOM of the trace is the one analysed. */
	size_t at = md->event_count;
	while (at-- > 0)
		if (md->events[at].action == MD_ACT_OOM)
			break;
	const md_event *e = &md->events[at];
	an_oom *o = &dv->oom;
	if (went_on_after(s, info, md, at, &dv->recovered_backwards)) {
		dv->oom_recovered = 1;
		return;
	}
	o->present = 1;
	o->event = at;
	o->requested = e->size;
	o->alloc_size = an_segment_size_for(e->size);
	o->category = block_category(s, info, e->stack, 0);
	o->device_free = e->addr;
	o->events_after = md->event_count - at - 1;
	int small = e->size <= MR_MIB;
	uint64_t stream = s->streams[e->stream];
	for (size_t i = dv->segment_first; i < dv->segment_first + dv->segment_count; i++) {
		const md_segment *seg = &s->segments[i];
		if ((seg->pool == MD_POOL_SMALL) != small || seg->stream != stream ||
		    seg->pool_id[0] || seg->pool_id[1] ||
		    (seg->is_expandable && !s->settings.expandable_segments))
			continue;
		for (size_t j = 0; j < seg->block_count; j++) {
			const md_block *b = &s->blocks[seg->first_block + j];
			if (b->state != MD_BLOCK_INACTIVE)
				continue;
			o->usable_free += b->size;
			o->usable_pieces++;
			o->usable_largest = MR_MAX(o->usable_largest, b->size);
		}
	}
}

/* ---- live memory at the peak: a forward pass to the peak event ---- */

typedef struct {
	uint64_t size;
	uint32_t stack;
} peak_block;

static mr_status peak_live(const md_snapshot *s, const an_stack_info *info, const md_device *md,
                           an_device *dv, mr_error *err)
{
	am_map live = {0}; /* address -> index into blocks */
	peak_block *blocks = NULL;
	size_t nblocks = 0, cap = 0;
	uint32_t *slot_of = NULL; /* stack -> site index + 1 */
	mr_status st = MR_OK;
	uint64_t before = dv->initial_allocated, idx;
	int stacks_recorded = 0;
	for (size_t i = 0; i < md->event_count && !stacks_recorded; i++)
		stacks_recorded = md->events[i].stack != MD_NO_STACK;
	for (size_t i = 0; i <= dv->peak_allocated_event && i < md->event_count; i++) {
		const md_event *e = &md->events[i];
		if (e->action == MD_ACT_ALLOC) {
			if (MR_GROW(blocks, cap, nblocks + 1) || am_put(&live, e->addr, nblocks))
				goto oom;
			blocks[nblocks].size = block_estimate(&s->settings, e->size);
			blocks[nblocks].stack = e->stack < s->stack_count ? e->stack : 0;
			nblocks++;
		} else if (e->action == MD_ACT_FREE_REQUESTED && !am_take(&live, e->addr, &idx)) {
			uint64_t size = block_estimate(&s->settings, e->size);
			before =
			    before > size ? before - size : 0; /* allocated before the window */
		}
	}
	dv->peak_sites = mr_alloc_array(live.count ? live.count : 1, sizeof *dv->peak_sites);
	slot_of = mr_alloc_array(s->stack_count, sizeof *slot_of);
	if (!dv->peak_sites || !slot_of)
		goto oom;
	for (size_t i = 0; i < live.cap; i++) {
		if (!live.slots[i].key)
			continue;
		const peak_block *pb = &blocks[live.slots[i].val];
		if (!slot_of[pb->stack]) {
			dv->peak_sites[dv->peak_site_count].stack = pb->stack;
			slot_of[pb->stack] = (uint32_t)++dv->peak_site_count;
		}
		an_site *site = &dv->peak_sites[slot_of[pb->stack] - 1];
		site->bytes += pb->size;
		site->count++;
	}
	qsort(dv->peak_sites, dv->peak_site_count, sizeof *dv->peak_sites, site_cmp);
	for (size_t i = 0; i < dv->peak_site_count; i++)
		dv->peak_categories[block_category(s, info, dv->peak_sites[i].stack,
		                                   stacks_recorded)] += dv->peak_sites[i].bytes;
	dv->peak_categories[AN_CAT_UNKNOWN] += before; /* allocated before the window */
	dv->peak_categories_known = 1;
	goto done;
oom:
	st = mr_oom(err);
done:
	am_free(&live);
	free(blocks);
	free(slot_of);
	return st;
}

mr_status an_analyze_base(const md_snapshot *s, size_t max_points, an_result *out, mr_error *err)
{
	memset(out, 0, sizeof *out);
	if (!max_points)
		max_points = 2000;
	mr_status st = MR_OK;
	out->devices = mr_alloc_array(s->device_count, sizeof *out->devices);
	if (!out->devices)
		return mr_oom(err);
	out->device_count = s->device_count;
	out->stack_info = an_classify_stacks(s);
	out->frame_kinds = an_frame_kinds(s);
	if (!out->stack_info || !out->frame_kinds) {
		an_free(out);
		return mr_oom(err);
	}
	const an_stack_info *info = out->stack_info;
	am_map older = {0}; /* blocks of the device being analysed that are older than its trace */
	size_t seg = 0;
	for (size_t d = 0; d < s->device_count; d++) {
		an_device *dv = &out->devices[d];
		const md_device *md = &s->devices[d];
		dv->device = md->id;
		while (seg < s->segment_count && s->segments[seg].device < md->id)
			seg++;
		dv->segment_first = seg;
		while (seg < s->segment_count && s->segments[seg].device == md->id) {
			const md_segment *sg = &s->segments[seg];
			an_pool_add(&dv->pool[AN_POOL_ALL], sg, s->blocks);
			an_pool_add(
			    &dv->pool[sg->pool == MD_POOL_SMALL ? AN_POOL_SMALL : AN_POOL_LARGE],
			    sg, s->blocks);
			if (is_private(sg))
				an_pool_add(&dv->pool[AN_POOL_PRIVATE], sg, s->blocks);
			if (sg->is_expandable)
				dv->expandable = 1;
			seg++;
		}
		dv->segment_count = seg - dv->segment_first;
		if (s->settings.expandable_segments)
			dv->expandable = 1;
		const an_pool *all = &dv->pool[AN_POOL_ALL];
		dv->fragmentation = an_fragmentation(all);
		dv->trace_events = md->event_count;
		dv->has_trace = md->event_count > 0;
		for (size_t i = 0; i < md->event_count; i++)
			dv->trace_allocs += md->events[i].action == MD_ACT_ALLOC;
		am_free(&older);
		if (dv->has_trace && (st = replay(s, all, dv, md, max_points, &older, err)))
			break;
		if ((st = live_sites(s, dv, err)))
			break;
		snapshot_categories(s, info, dv, &older);
		if (dv->has_trace)
			oom_layout(s, info, md, dv);
	}
	am_free(&older);
	if (st)
		an_free(out);
	return st;
}

mr_status an_analyze_rest(const md_snapshot *s, an_result *out, mr_error *err)
{
	mr_status st = MR_OK;
	for (size_t d = 0; d < out->device_count && !st; d++) {
		an_device *dv = &out->devices[d];
		const md_device *md = &s->devices[d];
		if ((st = an_structure_read(s, md, out->stack_info, out->frame_kinds,
		                            dv->initial_allocated,
		                            dv->pool[AN_POOL_PRIVATE].segments, &dv->run, err)))
			break;
		if (dv->has_trace)
			st = peak_live(s, out->stack_info, md, dv, err);
	}
	return st;
}

mr_status an_analyze(const md_snapshot *s, size_t max_points, an_result *out, mr_error *err)
{
	mr_status st = an_analyze_base(s, max_points, out, err);
	if (!st && (st = an_analyze_rest(s, out, err)))
		an_free(out);
	return st;
}

void an_free(an_result *r)
{
	for (size_t i = 0; i < r->device_count; i++) {
		free(r->devices[i].timeline);
		free(r->devices[i].sites);
		an_structure_free(&r->devices[i].run);
		free(r->devices[i].peak_sites);
	}
	free(r->devices);
	free(r->stack_info);
	free(r->frame_kinds);
	memset(r, 0, sizeof *r);
}
