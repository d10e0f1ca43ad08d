/* initial.c: the allocator's state at a trace's first event, when the trace starts mid-run. */
#include "sim/initial.h"

#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"
#include "base/error.h"
#include "base/mem.h"
#include "sim/config.h"

typedef struct {
	uint64_t addr, size, stream;
	uint64_t pool_id[2];
	uint8_t small, expandable;
} init_seg;

typedef struct {
	uint64_t addr, size, requested, stream;
	uint8_t state; /* B_ALLOCATED or B_PENDING */
	uint8_t known; /* size from the snapshot, not estimated */
} init_block;

typedef struct {
	init_seg *segs;
	size_t count, cap;
} seg_list;

/* First entry with address >= addr. */
static size_t seg_lower(const seg_list *l, uint64_t addr)
{
	size_t lo = 0, hi = l->count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (l->segs[mid].addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int seg_insert(seg_list *l, const init_seg *sg)
{
	if (MR_GROW(l->segs, l->cap, l->count + 1))
		return -1;
	size_t at = seg_lower(l, sg->addr);
	memmove(l->segs + at + 1, l->segs + at, (l->count - at) * sizeof *l->segs);
	l->segs[at] = *sg;
	l->count++;
	return 0;
}

static void seg_remove_at(seg_list *l, size_t at)
{
	memmove(l->segs + at, l->segs + at + 1, (l->count - at - 1) * sizeof *l->segs);
	l->count--;
}

/* Undoing a segment_map: the range was not mapped before it. */
static int range_subtract(seg_list *l, uint64_t a, uint64_t size)
{
	uint64_t b = a + size;
	for (size_t k = 0; k < l->count;) {
		init_seg *sg = &l->segs[k];
		uint64_t x = sg->addr, y = sg->addr + sg->size;
		if (!sg->expandable || y <= a || x >= b) {
			k++;
			continue;
		}
		if (a <= x && y <= b) {
			seg_remove_at(l, k);
			continue;
		}
		if (x < a && y > b) { /* a hole in the middle */
			init_seg tail = *sg;
			tail.addr = b;
			tail.size = y - b;
			sg->size = a - x;
			return seg_insert(l, &tail);
		}
		if (x < a)
			sg->size = a - x;
		else {
			sg->addr = b;
			sg->size = y - b;
		}
		k++;
	}
	return 0;
}

/* Undoing a segment_unmap: the range was mapped before it. */
static int range_add(seg_list *l, uint64_t a, uint64_t size, uint64_t stream)
{
	init_seg sg = {a, size, stream, {0, 0}, 0, 1};
	if (seg_insert(l, &sg))
		return -1;
	size_t at = seg_lower(l, a);
	if (at + 1 < l->count && l->segs[at + 1].expandable &&
	    l->segs[at + 1].addr == a + l->segs[at].size) {
		l->segs[at].size += l->segs[at + 1].size;
		seg_remove_at(l, at + 1);
	}
	if (at > 0 && l->segs[at - 1].expandable &&
	    l->segs[at - 1].addr + l->segs[at - 1].size == a) {
		l->segs[at - 1].size += l->segs[at].size;
		seg_remove_at(l, at);
	}
	return 0;
}

static int block_addr_cmp(const void *x, const void *y)
{
	const init_block *a = x, *b = y;
	return (a->addr > b->addr) - (a->addr < b->addr);
}

enum { SEEN_IN_WINDOW = 1, SEEN_PRE = 2, SEEN_ALLOC = 4 };

static int pre_add(init_block **blocks, size_t *count, size_t *cap, const init_block *b)
{
	if (MR_GROW(*blocks, *cap, *count + 1))
		return -1;
	(*blocks)[(*count)++] = *b;
	return 0;
}

/* Places the blocks of one starting segment and creates its simulated twin. */
static int instantiate_segment(engine *e, const init_seg *is, init_block *bl, size_t nb,
                               const sim_config *recorded)
{
	uint32_t pool = eng_pool_find(e, is->pool_id, is->small);
	if (pool == NIL)
		return -1;
	uint32_t seg = eng_seg_new(e, is->addr, is->size, pool, 0, 0);
	if (seg == NIL)
		return -1;
	if (is->expandable)
		e->out->approximate = 1; /* replayed as a fixed segment */
	e->reserved += is->size;
	uint64_t pos = is->addr, end = is->addr + is->size;
	uint32_t last = NIL;
	for (size_t k = 0; k <= nb; k++) {
		uint64_t start = k < nb ? bl[k].addr : end;
		if (k < nb && (start < pos || start >= end)) {
			e->out->approximate = 1; /* overlaps the previous block: dropped */
			continue;
		}
		if (start > pos) { /* free space up to the next live block */
			uint32_t f = eng_block_make(e, pos, start - pos, is->stream, seg, B_FREE);
			if (f == NIL)
				return -1;
			if (last != NIL)
				eng_link_after(e, f, last);
			eng_cache_block(e, f);
			last = f;
			pos = start;
		}
		if (k == nb)
			break;
		uint64_t boundary = k + 1 < nb && bl[k + 1].addr < end ? bl[k + 1].addr : end;
		uint64_t room = boundary > start ? boundary - start : 0, size = bl[k].size;
		if (!bl[k].known) {
			/* freed inside the window: its size is estimated from its request */
			size = sim_round_size(recorded, bl[k].requested);
			uint64_t gap = room > size ? room - size : 0;
			if (size > room || (is->small ? gap < K_MIN_BLOCK : gap <= K_SMALL_SIZE))
				size = room;
			e->out->estimated_blocks++;
			e->out->approximate = 1;
		} else if (size > room) {
			size = room;
			e->out->approximate = 1;
		}
		if (!size)
			continue;
		uint32_t b = eng_block_make(e, start, size, is->stream, seg, bl[k].state);
		if (b == NIL)
			return -1;
		if (last != NIL)
			eng_link_after(e, b, last);
		last = b;
		pos = start + size;
		e->active += size;
		e->out->initial_blocks++;
		if (bl[k].state == B_ALLOCATED)
			e->allocated += size;
		else
			eng_pending_add(e, b);
		e->blocks[b].trace_addr = start;
		e->blocks[b].mapped_key = 1;
		if (am_put(&e->live, start, b))
			return -1;
	}
	return e->nomem ? -1 : 0;
}

/* The segments at the first event: the snapshot's, with the window's segment events undone. */
static int start_segments(const engine *e, seg_list *segs)
{
	const md_snapshot *s = e->s;
	const md_event *ev = e->recorded->events;
	for (size_t i = 0; i < s->segment_count; i++) {
		const md_segment *sg = &s->segments[i];
		if (sg->device != e->recorded->id)
			continue;
		init_seg is = {sg->address,
		               sg->total_size,
		               sg->stream,
		               {sg->pool_id[0], sg->pool_id[1]},
		               (uint8_t)(sg->pool == MD_POOL_SMALL),
		               sg->is_expandable};
		if (seg_insert(segs, &is))
			return -1;
	}
	for (size_t i = e->recorded->event_count; i-- > 0;) {
		const md_event *x = &ev[i];
		if (x->action == MD_ACT_SEGMENT_ALLOC) {
			size_t at = seg_lower(segs, x->addr);
			if (at < segs->count && segs->segs[at].addr == x->addr)
				seg_remove_at(segs, at);
		} else if (x->action == MD_ACT_SEGMENT_FREE) {
			init_seg is = {x->addr,
			               x->size,
			               eng_stream_raw(s, x->stream),
			               {0, 0},
			               (uint8_t)(x->size == K_SMALL_BUFFER),
			               0};
			if (seg_insert(segs, &is))
				return -1;
		} else if (x->action == MD_ACT_SEGMENT_MAP) {
			if (range_subtract(segs, x->addr, x->size))
				return -1;
		} else if (x->action == MD_ACT_SEGMENT_UNMAP) {
			if (range_add(segs, x->addr, x->size, eng_stream_raw(s, x->stream)))
				return -1;
		}
	}
	return 0;
}

/* Blocks freed in the window without being allocated there: *seen maps each address the trace
 * touches to its SEEN_ flags. */
static int freed_before_window(const engine *e, am_map *seen, init_block **pre, size_t *count,
                               size_t *cap)
{
	const md_event *ev = e->recorded->events;
	for (size_t i = 0; i < e->recorded->event_count; i++) {
		const md_event *x = &ev[i];
		uint32_t flags = eng_map_get(seen, x->addr);
		flags = flags == NIL ? 0 : flags;
		init_block b = {x->addr,     0, x->size, eng_stream_raw(e->s, x->stream),
		                B_ALLOCATED, 0};
		if (x->action == MD_ACT_ALLOC) {
			flags |= SEEN_IN_WINDOW | SEEN_ALLOC;
		} else if (x->action == MD_ACT_FREE_REQUESTED) {
			if (!(flags & (SEEN_IN_WINDOW | SEEN_PRE))) {
				if (pre_add(pre, count, cap, &b))
					return -1;
				flags |= SEEN_PRE;
			}
		} else if (x->action == MD_ACT_FREE_COMPLETED) {
			if (!(flags & (SEEN_IN_WINDOW | SEEN_PRE))) {
				b.state = B_PENDING; /* its free was requested before the window */
				if (pre_add(pre, count, cap, &b))
					return -1;
			}
			flags &= ~(uint32_t)(SEEN_IN_WINDOW | SEEN_PRE);
		} else {
			continue;
		}
		if (am_put(seen, x->addr, flags))
			return -1;
	}
	return 0;
}

/* The blocks live at the first event, sorted by address: freed in the window without being
 * allocated there, or live in the snapshot without an allocation in the window. */
static int start_blocks(const engine *e, init_block **pre, size_t *count)
{
	const md_snapshot *s = e->s;
	am_map seen = {0};
	size_t cap = 0;
	int rc = freed_before_window(e, &seen, pre, count, &cap);
	for (size_t i = 0; i < s->segment_count && !rc; i++) {
		const md_segment *sg = &s->segments[i];
		if (sg->device != e->recorded->id)
			continue;
		for (size_t j = 0; j < sg->block_count && !rc; j++) {
			const md_block *mb = &s->blocks[sg->first_block + j];
			if (mb->state == MD_BLOCK_INACTIVE)
				continue;
			uint32_t flags = eng_map_get(&seen, mb->address);
			if (flags != NIL && (flags & (SEEN_ALLOC | SEEN_PRE)))
				continue;
			init_block b = {mb->address,
			                mb->size,
			                mb->requested_size,
			                sg->stream,
			                mb->state == MD_BLOCK_ACTIVE_ALLOCATED ? B_ALLOCATED
			                                                       : B_PENDING,
			                1};
			rc = pre_add(pre, count, &cap, &b);
		}
	}
	am_free(&seen);
	if (!rc && *count)
		qsort(*pre, *count, sizeof **pre, block_addr_cmp);
	return rc;
}

/* Each starting segment with its blocks, into the engine. */
static int place_blocks(engine *e, const seg_list *segs, init_block *pre, size_t pre_count,
                        const sim_config *recorded)
{
	size_t k = 0, placed = 0;
	for (size_t i = 0; i < segs->count; i++) {
		const init_seg *is = &segs->segs[i];
		while (k < pre_count && pre[k].addr < is->addr)
			k++;
		size_t first = k;
		while (k < pre_count && pre[k].addr < is->addr + is->size)
			k++;
		placed += k - first;
		/* pre is NULL when no block was recorded: no arithmetic on it then */
		if (instantiate_segment(e, is, k > first ? pre + first : NULL, k - first, recorded))
			return -1;
		if (e->track_pools) {
			if (MR_GROW(e->rec_live, e->rec_live_cap, e->rec_live_count + 1))
				return -1;
			rec_segment rs = {is->addr, is->size, {is->pool_id[0], is->pool_id[1]}};
			e->rec_live[e->rec_live_count++] = rs;
		}
	}
	if (placed < pre_count)
		e->out->approximate = 1; /* blocks outside every known segment */
	return 0;
}

mr_status sim_initial_state(engine *e, mr_error *err)
{
	seg_list segs = {0};
	init_block *pre = NULL;
	size_t pre_count = 0;
	mr_status st = MR_OK;
	sim_config recorded;
	sim_config_from_settings(e->s, &recorded);
	if (start_segments(e, &segs) || start_blocks(e, &pre, &pre_count) ||
	    place_blocks(e, &segs, pre, pre_count, &recorded)) {
		st = mr_oom(err);
	} else {
		e->out->truncated = segs.count > 0 || pre_count > 0;
		e->out->initial_allocated = e->allocated;
		e->out->initial_reserved = e->reserved;
		e->out->peak_allocated = e->allocated;
		e->out->peak_reserved = e->reserved;
	}
	free(segs.segs);
	free(pre);
	return st;
}
