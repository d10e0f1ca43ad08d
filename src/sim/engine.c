/* engine.c: the caching-allocator model: blocks, free sets, pools and segments, allocation,
 * release, and the comparison with the recording as it goes. */
#include "sim/engine.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"
#include "base/mem.h"

/* ---- blocks ---- */

static uint32_t block_new(engine *e)
{
	uint32_t i;
	if (e->free_blocks != NIL) {
		i = e->free_blocks;
		e->free_blocks = e->blocks[i].next;
	} else {
		if (e->block_count >= NIL - 2 ||
		    MR_GROW(e->blocks, e->block_cap, e->block_count + 1)) {
			e->nomem = 1;
			return NIL;
		}
		i = (uint32_t)e->block_count++;
	}
	sim_block *b = &e->blocks[i];
	memset(b, 0, sizeof *b);
	b->prev = b->next = b->seg = b->pool = b->pending_pos = NIL;
	return i;
}

static void block_release(engine *e, uint32_t i)
{
	e->blocks[i].state = B_DEAD;
	e->blocks[i].next = e->free_blocks;
	e->free_blocks = i;
}

/* ---- ordered sets: skip lists over block indices ---- */

typedef struct {
	uint64_t a, b, c;
} sk_key;

static sk_key key_of(const sk_set *set, const sim_block *b)
{
	sk_key k = {b->stream, set->by_address ? b->addr : b->size, set->by_address ? 0 : b->addr};
	return k;
}

static int key_less(sk_key x, sk_key y)
{
	if (x.a != y.a)
		return x.a < y.a;
	if (x.b != y.b)
		return x.b < y.b;
	return x.c < y.c;
}

static int sk_init(engine *e, sk_set *set, int by_address)
{
	set->head = block_new(e);
	if (set->head == NIL)
		return -1;
	sim_block *h = &e->blocks[set->head];
	for (int l = 0; l < SL_LEVELS; l++)
		h->fwd[l] = NIL;
	h->level = SL_LEVELS;
	set->by_address = by_address;
	set->level = 1;
	return 0;
}

/* Fills update[l] with the last node at level l whose key is below k. */
static void sk_search(const engine *e, const sk_set *set, sk_key k, uint32_t update[SL_LEVELS])
{
	uint32_t x = set->head;
	for (int l = set->level - 1; l >= 0; l--) {
		uint32_t nx;
		while ((nx = e->blocks[x].fwd[l]) != NIL &&
		       key_less(key_of(set, &e->blocks[nx]), k))
			x = nx;
		update[l] = x;
	}
	for (int l = set->level; l < SL_LEVELS; l++)
		update[l] = set->head;
}

static int random_level(engine *e)
{
	int level = 1;
	while (level < SL_LEVELS) {
		e->rng ^= e->rng << 13;
		e->rng ^= e->rng >> 7;
		e->rng ^= e->rng << 17;
		if (e->rng & 3) /* p = 1/4 */
			break;
		level++;
	}
	return level;
}

/* A block is in at most one set, once: a trace that contradicts itself (hostile, or spliced)
 * must not link a block twice, which would make a cycle and hang every later search. */
static void sk_insert(engine *e, sk_set *set, uint32_t i)
{
	uint32_t update[SL_LEVELS];
	if (e->blocks[i].in_set)
		return;
	sk_search(e, set, key_of(set, &e->blocks[i]), update);
	int level = random_level(e);
	if (level > set->level)
		set->level = level;
	sim_block *b = &e->blocks[i];
	b->level = (uint8_t)level;
	for (int l = 0; l < level; l++) {
		b->fwd[l] = e->blocks[update[l]].fwd[l];
		b->bwd[l] = update[l];
		e->blocks[update[l]].fwd[l] = i;
		if (b->fwd[l] != NIL)
			e->blocks[b->fwd[l]].bwd[l] = i;
	}
	b->in_set = 1;
}

/* Unlinks by the block's own links, with no search: a key that changed while linked (a
 * contradictory trace) cannot lose the block. */
static void sk_erase(engine *e, sk_set *set, uint32_t i)
{
	sim_block *b = &e->blocks[i];
	if (!b->in_set)
		return;
	for (int l = 0; l < b->level; l++) {
		e->blocks[b->bwd[l]].fwd[l] = b->fwd[l];
		if (b->fwd[l] != NIL)
			e->blocks[b->fwd[l]].bwd[l] = b->bwd[l];
	}
	b->in_set = 0;
	while (set->level > 1 && e->blocks[set->head].fwd[set->level - 1] == NIL)
		set->level--;
}

/* First node with key >= k, or NIL. */
static uint32_t sk_lower_bound(const engine *e, const sk_set *set, sk_key k)
{
	uint32_t update[SL_LEVELS];
	sk_search(e, set, k, update);
	return e->blocks[update[0]].fwd[0];
}

/* Last node with key < k, or NIL. */
static uint32_t sk_before(const engine *e, const sk_set *set, sk_key k)
{
	uint32_t update[SL_LEVELS];
	sk_search(e, set, k, update);
	return update[0] == set->head ? NIL : update[0];
}

static uint32_t sk_first(const engine *e, const sk_set *set)
{
	return e->blocks[set->head].fwd[0];
}

/* ---- validation ---- */

void eng_diverge(engine *e, size_t event, const char *what, const char *expected, const char *got)
{
	e->lockstep = 0;
	sim_divergence *d = &e->out->first_divergence;
	if (d->present)
		return;
	d->present = 1;
	d->event_index = event;
	snprintf(d->what, sizeof d->what, "%s", what);
	snprintf(d->expected, sizeof d->expected, "%s", expected);
	snprintf(d->got, sizeof d->got, "%s", got);
}

static const char *seg_action_name(int action)
{
	return md_action_name((md_action)action);
}

/* The next recorded segment event, if the replay still follows the recording and it comes
 * before the request being replayed. */
static const md_event *rec_next_segment(const engine *e)
{
	if (!e->lockstep || e->rec_cursor >= e->rec_seg_count)
		return NULL;
	size_t idx = e->rec_seg[e->rec_cursor];
	if (idx >= e->bound)
		return NULL;
	return &e->md->events[idx];
}

/* Every segment event of the replay is compared with the recording's next one. */
static void emit_segment(engine *e, int action, uint64_t addr, uint64_t size)
{
	if (!e->lockstep)
		return;
	const md_event *r = rec_next_segment(e);
	char want[96], got[96];
	snprintf(got, sizeof got, "%s of %" PRIu64 " bytes at 0x%" PRIx64, seg_action_name(action),
	         size, addr);
	if (!r) {
		eng_diverge(e, e->cur_event, seg_action_name(action), "no segment event here", got);
		return;
	}
	if (r->action != action || r->size != size || r->addr != addr) {
		snprintf(want, sizeof want, "%s of %" PRIu64 " bytes at 0x%" PRIx64,
		         seg_action_name(r->action), r->size, r->addr);
		eng_diverge(e, e->rec_seg[e->rec_cursor], seg_action_name(r->action), want, got);
		return;
	}
	e->rec_cursor++;
}

/* ---- levels ---- */

static void note_allocated(engine *e)
{
	if (e->allocated > e->out->peak_allocated) {
		e->out->peak_allocated = e->allocated;
		e->out->peak_allocated_event = e->cur_event;
	}
}

static int note_device_alloc(engine *e, uint64_t size)
{
	sim_result *r = e->out;
	e->reserved += size;
	if (e->reserved > r->peak_reserved) {
		r->peak_reserved = e->reserved;
		r->peak_reserved_event = e->cur_event;
	}
	if (MR_GROW(r->segment_sizes, e->sizes_cap, r->segment_size_count + 1)) {
		e->nomem = 1;
		return -1;
	}
	r->segment_sizes[r->segment_size_count++] = size;
	r->segments_allocated++;
	return 0;
}

static void note_device_free(engine *e, uint64_t size)
{
	e->reserved -= size;
	e->out->segments_released++;
}

/* ---- pools and segments ---- */

uint32_t eng_pool_find(engine *e, const uint64_t pool_id[2], int small)
{
	for (size_t i = 0; i < e->pool_count; i++)
		if (e->pools[i].pool_id[0] == pool_id[0] && e->pools[i].pool_id[1] == pool_id[1] &&
		    e->pools[i].small == small)
			return (uint32_t)i;
	if (MR_GROW(e->pools, e->pool_cap, e->pool_count + 1)) {
		e->nomem = 1;
		return NIL;
	}
	sim_pool *p = &e->pools[e->pool_count];
	memset(p, 0, sizeof *p);
	p->pool_id[0] = pool_id[0];
	p->pool_id[1] = pool_id[1];
	p->small = small;
	p->is_private = pool_id[0] || pool_id[1];
	if (sk_init(e, &p->blocks, 0) || sk_init(e, &p->unmapped, 1))
		return NIL;
	return (uint32_t)e->pool_count++;
}

uint32_t eng_seg_new(engine *e, uint64_t addr, uint64_t size, uint32_t pool, int expandable,
                     uint64_t page)
{
	if (MR_GROW(e->segs, e->seg_cap, e->seg_count + 1)) {
		e->nomem = 1;
		return NIL;
	}
	sim_segment *sg = &e->segs[e->seg_count];
	sg->addr = addr;
	sg->size = size;
	sg->page = page;
	sg->pool = pool;
	sg->expandable = (uint8_t)(expandable != 0);
	sg->live = 1;
	return (uint32_t)e->seg_count++;
}

static uint64_t synthetic_address(engine *e, uint64_t size)
{
	uint64_t a = e->synthetic_va;
	e->synthetic_va +=
	    (size + K_ROUND_LARGE - 1) / K_ROUND_LARGE * K_ROUND_LARGE + K_ROUND_LARGE;
	return a;
}

static int block_expandable(const engine *e, uint32_t i)
{
	return e->segs[e->blocks[i].seg].expandable;
}

static int block_split(const engine *e, uint32_t i)
{
	return e->blocks[i].prev != NIL || e->blocks[i].next != NIL;
}

/* A new block at [addr, addr + size) of segment seg; NIL when out of memory. */
uint32_t eng_block_make(engine *e, uint64_t addr, uint64_t size, uint64_t stream, uint32_t seg,
                        uint8_t state)
{
	uint32_t i = block_new(e);
	if (i == NIL)
		return NIL;
	sim_block *b = &e->blocks[i];
	b->addr = addr;
	b->size = size;
	b->stream = stream;
	b->seg = seg;
	b->pool = e->segs[seg].pool;
	b->state = state;
	return i;
}

/* Links block i just before block at (which is in the same segment). */
static void link_before(engine *e, uint32_t i, uint32_t at)
{
	sim_block *b = &e->blocks[i], *a = &e->blocks[at];
	b->prev = a->prev;
	b->next = at;
	if (a->prev != NIL)
		e->blocks[a->prev].next = i;
	a->prev = i;
}

void eng_link_after(engine *e, uint32_t i, uint32_t at)
{
	sim_block *b = &e->blocks[i], *a = &e->blocks[at];
	b->next = a->next;
	b->prev = at;
	if (a->next != NIL)
		e->blocks[a->next].prev = i;
	a->next = i;
}

void eng_cache_block(engine *e, uint32_t i)
{
	sim_pool *p = &e->pools[e->blocks[i].pool];
	e->blocks[i].state = B_FREE;
	e->blocks[i].gc_base = p->search_count;
	sk_insert(e, &p->blocks, i);
}

/* try_merge_blocks: joins src into dst when both are free (or both unmapped). */
static void try_merge(engine *e, uint32_t dst, uint32_t src)
{
	if (src == NIL)
		return;
	sim_block *d = &e->blocks[dst], *s = &e->blocks[src];
	int mapped = d->state != B_UNMAPPED;
	if (mapped ? s->state != B_FREE : s->state != B_UNMAPPED)
		return;
	sim_pool *p = &e->pools[s->pool];
	sk_erase(e, s->state == B_FREE ? &p->blocks : &p->unmapped, src);
	if (d->prev == src) {
		d->addr = s->addr;
		d->prev = s->prev;
		if (d->prev != NIL)
			e->blocks[d->prev].next = dst;
	} else {
		d->next = s->next;
		if (d->next != NIL)
			e->blocks[d->next].prev = dst;
	}
	d->size += s->size;
	block_release(e, src);
}

/* free_block: a block whose use is over goes back to its pool, merged with free neighbours. */
static void free_block(engine *e, uint32_t i)
{
	sim_block *b = &e->blocks[i];
	uint32_t prev = b->prev, next = b->next;
	e->active -= b->size;
	b->state = B_FREE;
	try_merge(e, i, prev);
	try_merge(e, i, next);
	eng_cache_block(e, i);
}

void eng_pending_add(engine *e, uint32_t i)
{
	if (MR_GROW(e->pending, e->pending_cap, e->pending_count + 1)) {
		e->nomem = 1;
		return;
	}
	e->blocks[i].pending_pos = (uint32_t)e->pending_count;
	e->pending[e->pending_count++] = i;
}

static void pending_remove(engine *e, uint32_t i)
{
	uint32_t pos = e->blocks[i].pending_pos;
	uint32_t last = e->pending[--e->pending_count];
	e->pending[pos] = last;
	e->blocks[last].pending_pos = pos;
	e->blocks[i].pending_pos = NIL;
}

void eng_complete_pending(engine *e, uint32_t i)
{
	pending_remove(e, i);
	if (e->blocks[i].mapped_key)
		eng_map_del(&e->live, e->blocks[i].trace_addr);
	e->blocks[i].mapped_key = 0;
	free_block(e, i);
}

/* ---- releasing memory ---- */

/* release_block: cudaFree of a free, unsplit, non-expandable segment. */
static void release_block(engine *e, uint32_t i)
{
	sim_block *b = &e->blocks[i];
	uint64_t addr = b->addr, size = b->size;
	sk_erase(e, &e->pools[b->pool].blocks, i);
	e->segs[b->seg].live = 0;
	block_release(e, i);
	note_device_free(e, size);
	emit_segment(e, MD_ACT_SEGMENT_FREE, addr, size);
}

/* unmap_block: unmaps the whole pages inside a free expandable block. */
static void unmap_block(engine *e, uint32_t i)
{
	sim_block *b = &e->blocks[i];
	const sim_segment *sg = &e->segs[b->seg];
	uint64_t page = sg->page, base = sg->addr;
	uint64_t off = b->addr - base, end = off + b->size;
	uint64_t first = (off + page - 1) / page * page, last = end / page * page;
	if (first >= last)
		return;
	sk_erase(e, &e->pools[b->pool].blocks, i);
	if (first > off) {
		uint32_t nb = eng_block_make(e, b->addr, first - off, b->stream, b->seg, B_FREE);
		if (nb == NIL)
			return;
		link_before(e, nb, i);
		eng_cache_block(e, nb);
	}
	b = &e->blocks[i];
	if (end > last) {
		uint32_t na = eng_block_make(e, base + last, end - last, b->stream, b->seg, B_FREE);
		if (na == NIL)
			return;
		eng_link_after(e, na, i);
		eng_cache_block(e, na);
	}
	b = &e->blocks[i];
	b->addr = base + first;
	b->size = last - first;
	b->state = B_UNMAPPED;
	uint64_t addr = b->addr, size = b->size;
	uint32_t prev = b->prev, next = b->next;
	try_merge(e, i, prev);
	try_merge(e, i, next);
	sk_insert(e, &e->pools[e->blocks[i].pool].unmapped, i);
	note_device_free(e, size);
	emit_segment(e, MD_ACT_SEGMENT_UNMAP, addr, size);
}

static int releasable(const engine *e, uint32_t i)
{
	return !block_split(e, i) && !block_expandable(e, i);
}

/* release_blocks: frees every whole free segment of a pool, unmaps free expandable pages. */
static void release_blocks(engine *e, uint32_t pool, uint32_t **scratch, size_t *scratch_cap)
{
	size_t n = 0;
	for (uint32_t it = sk_first(e, &e->pools[pool].blocks); it != NIL;) {
		uint32_t nx = e->blocks[it].fwd[0];
		if (block_expandable(e, it)) {
			if (MR_GROW(*scratch, *scratch_cap, n + 1)) {
				e->nomem = 1;
				return;
			}
			(*scratch)[n++] = it;
		} else if (!block_split(e, it)) {
			release_block(e, it);
		}
		it = nx;
	}
	for (size_t k = 0; k < n; k++) {
		uint32_t i = (*scratch)[k];
		unmap_block(e, i);
		if (e->nomem)
			return;
		sim_block *b = &e->blocks[i];
		if (b->state == B_UNMAPPED && b->prev == NIL && b->next == NIL) {
			sk_erase(e, &e->pools[b->pool].unmapped, i);
			e->segs[b->seg].live = 0;
			block_release(e, i);
		}
	}
}

/* release_cached_blocks: waits for pending frees, then releases both default pools. Private
 * pools are kept: when their graphs die is not in the trace. */
void eng_release_cached_blocks(engine *e)
{
	while (e->pending_count)
		eng_complete_pending(e, e->pending[e->pending_count - 1]);
	uint32_t *scratch = NULL;
	size_t cap = 0;
	release_blocks(e, 1, &scratch, &cap);
	release_blocks(e, 0, &scratch, &cap);
	free(scratch);
}

/* release_available_cached_blocks: with max_split_size set, frees oversize cached blocks. */
static int release_available(engine *e, uint32_t pool, uint64_t size, uint64_t stream)
{
	uint64_t max_split = e->cfg.max_split_size;
	if (max_split == UINT64_MAX)
		return 0;
	sk_set *set = &e->pools[pool].blocks;
	sk_key key = {stream, size < max_split ? max_split : size, 0};
	uint32_t it = sk_lower_bound(e, set, key);
	if (it != NIL && e->blocks[it].stream == stream) {
		if (!releasable(e, it))
			return 0;
		release_block(e, it);
		return 1;
	}
	uint64_t total = 0;
	uint32_t cur = sk_before(e, set, key);
	while (total < key.b && cur != NIL && e->blocks[cur].size >= max_split &&
	       e->blocks[cur].stream == stream && releasable(e, cur)) {
		uint32_t prev = sk_before(e, set, key_of(set, &e->blocks[cur]));
		total += e->blocks[cur].size;
		release_block(e, cur);
		cur = prev;
	}
	return total >= key.b;
}

/* garbage_collect_cached_blocks: frees old whole blocks of the default large pool until
 * reserved memory is back under threshold x limit. */
static void garbage_collect(engine *e)
{
	uint64_t threshold = (uint64_t)(e->cfg.gc_threshold * (double)e->limit);
	if (e->reserved <= threshold)
		return;
	uint64_t target = e->reserved - threshold, reclaimed = 0;
	sim_pool *p = &e->pools[1];
	uint64_t total_age = 0, count = 0;
	for (uint32_t it = sk_first(e, &p->blocks); it != NIL; it = e->blocks[it].fwd[0])
		if (releasable(e, it)) {
			total_age += (uint64_t)(p->search_count - e->blocks[it].gc_base);
			count++;
		}
	int freed = 1;
	while (reclaimed < target && freed && count > 0) {
		double age_threshold = (double)total_age / (double)count;
		freed = 0;
		for (uint32_t it = sk_first(e, &p->blocks); it != NIL;) {
			uint32_t nx = e->blocks[it].fwd[0];
			uint64_t age = (uint64_t)(p->search_count - e->blocks[it].gc_base);
			if (releasable(e, it) && (double)age >= age_threshold) {
				freed = 1;
				reclaimed += e->blocks[it].size;
				total_age -= age;
				count--;
				release_block(e, it);
			}
			it = nx;
		}
	}
}

/* ---- allocating ---- */

static uint64_t expandable_size(const engine *e, uint32_t i)
{
	const sim_block *b = &e->blocks[i];
	if (b->next != NIL && e->blocks[b->next].state == B_UNMAPPED)
		return b->size + e->blocks[b->next].size;
	return b->size;
}

/* get_free_block: best fit by (stream, size, address), with PyTorch's exclusions. */
static uint32_t get_free_block(engine *e, uint32_t pool, uint64_t size, uint64_t stream)
{
	sim_pool *p = &e->pools[pool];
	if (e->limit && e->cfg.gc_threshold > 0)
		p->search_count++;
	sk_key key = {stream, size, 0};
	uint32_t it = sk_lower_bound(e, &p->blocks, key);
	if (it == NIL || e->blocks[it].stream != stream)
		return NIL;
	if (block_expandable(e, it)) {
		if (e->cfg.expandable_segments) {
			/* best fit counts the unmapped room behind a block */
			uint32_t nx = e->blocks[it].fwd[0];
			while (block_expandable(e, it) && nx != NIL &&
			       e->blocks[nx].stream == stream &&
			       expandable_size(e, nx) < expandable_size(e, it)) {
				it = nx;
				nx = e->blocks[nx].fwd[0];
			}
		} else {
			do
				it = e->blocks[it].fwd[0];
			while (it != NIL && block_expandable(e, it) &&
			       e->blocks[it].stream == stream);
			if (it == NIL || e->blocks[it].stream != stream)
				return NIL;
		}
	}
	uint64_t max_split = e->cfg.max_split_size, bsize = e->blocks[it].size;
	if (size < max_split && bsize >= max_split)
		return NIL; /* small requests never take oversize blocks */
	if (size >= max_split && bsize >= size + e->cfg.max_non_split_rounding)
		return NIL; /* an oversize block may be only a little larger */
	sk_erase(e, &p->blocks, it);
	return it;
}

static int allocatable(const engine *e, uint32_t i)
{
	return i != NIL && (e->blocks[i].state == B_FREE || e->blocks[i].state == B_UNMAPPED);
}

/* Whether addr lies in the address range of a live expandable segment of the pool (the
 * model's ranges are larger than PyTorch's, whose size depends on the GPU). */
static int address_in_expandable(const engine *e, uint32_t pool, uint64_t addr)
{
	for (size_t k = 0; k < e->seg_count; k++) {
		const sim_segment *sg = &e->segs[k];
		if (sg->live && sg->expandable && sg->pool == pool && addr >= sg->addr &&
		    addr - sg->addr < sg->size)
			return 1;
	}
	return 0;
}

/* find_expandable_block: the lowest-address run of free and unmapped blocks with room for
 * size, or a new expandable segment. */
static uint32_t find_expandable_block(engine *e, uint32_t pool, uint64_t size, uint64_t stream)
{
	sk_key key = {stream, 0, 0};
	for (uint32_t it = sk_lower_bound(e, &e->pools[pool].unmapped, key);
	     it != NIL && e->blocks[it].stream == stream; it = e->blocks[it].fwd[0]) {
		uint32_t c = it;
		if (allocatable(e, e->blocks[c].prev))
			c = e->blocks[c].prev;
		uint64_t bytes = 0;
		for (uint32_t w = c; bytes < size && allocatable(e, w); w = e->blocks[w].next)
			bytes += e->blocks[w].size;
		if (bytes >= size)
			return c;
	}
	uint64_t page = e->pools[pool].small ? K_SMALL_BUFFER : e->cfg.large_segment_size;
	uint64_t va = (EXPANDABLE_VA + page - 1) / page * page;
	const md_event *r = rec_next_segment(e);
	uint64_t base =
	    r && r->action == MD_ACT_SEGMENT_MAP && !address_in_expandable(e, pool, r->addr)
	        ? r->addr
	        : synthetic_address(e, va);
	uint32_t seg = eng_seg_new(e, base, va, pool, 1, page);
	if (seg == NIL)
		return NIL;
	uint32_t b = eng_block_make(e, base, va, stream, seg, B_UNMAPPED);
	if (b == NIL)
		return NIL;
	sk_insert(e, &e->pools[pool].unmapped, b);
	return b;
}

/* map_block: maps whole pages at the start of an unmapped block. */
static void map_block(engine *e, uint32_t i, uint64_t size)
{
	sim_block *b = &e->blocks[i];
	uint64_t page = e->segs[b->seg].page;
	uint64_t mapped = (size + page - 1) / page * page;
	if (mapped > b->size)
		mapped = b->size;
	sk_erase(e, &e->pools[b->pool].unmapped, i);
	b->state = B_FREE;
	if (mapped < b->size) {
		uint32_t r = eng_block_make(e, b->addr + mapped, b->size - mapped, b->stream,
		                            b->seg, B_UNMAPPED);
		if (r == NIL)
			return;
		eng_link_after(e, r, i);
		sk_insert(e, &e->pools[e->blocks[r].pool].unmapped, r);
		e->blocks[i].size = mapped;
	}
	uint64_t addr = e->blocks[i].addr;
	uint32_t prev = e->blocks[i].prev, next = e->blocks[i].next;
	try_merge(e, i, prev);
	try_merge(e, i, next);
	eng_cache_block(e, i);
	if (note_device_alloc(e, mapped))
		return;
	emit_segment(e, MD_ACT_SEGMENT_MAP, addr, mapped);
}

static uint32_t try_allocate_expandable(engine *e, uint32_t pool, uint64_t size, uint64_t stream)
{
	uint32_t c = find_expandable_block(e, pool, size, stream);
	if (c == NIL)
		return NIL;
	if (e->blocks[c].state == B_UNMAPPED)
		map_block(e, c, MR_MIN(e->blocks[c].size, size));
	while (!e->nomem && e->blocks[c].size < size) {
		uint32_t nc = e->blocks[c].next;
		if (nc == NIL || e->blocks[nc].state != B_UNMAPPED)
			return NIL; /* cannot happen: find_expandable_block checked the room */
		map_block(e, nc, MR_MIN(size - e->blocks[c].size, e->blocks[nc].size));
		c = nc;
	}
	if (e->nomem)
		return NIL;
	sk_erase(e, &e->pools[pool].blocks, c);
	return c;
}

/* alloc_block: a new segment (or mapped pages), unless it would pass the limit. */
static uint32_t alloc_block(engine *e, uint32_t pool, uint64_t size, uint64_t alloc_size,
                            uint64_t stream)
{
	if (e->limit && e->reserved + alloc_size > e->limit)
		return NIL;
	if (e->cfg.expandable_segments && !e->pools[pool].is_private)
		return try_allocate_expandable(e, pool, size, stream);
	const md_event *r = rec_next_segment(e);
	uint64_t addr = r && r->action == MD_ACT_SEGMENT_ALLOC && r->size == alloc_size
	                    ? r->addr
	                    : synthetic_address(e, alloc_size);
	uint32_t seg = eng_seg_new(e, addr, alloc_size, pool, 0, 0);
	if (seg == NIL)
		return NIL;
	uint32_t b = eng_block_make(e, addr, alloc_size, stream, seg, B_FREE);
	if (b == NIL || note_device_alloc(e, alloc_size))
		return NIL;
	emit_segment(e, MD_ACT_SEGMENT_ALLOC, addr, alloc_size);
	return b;
}

/* DeviceCachingAllocator::malloc. Returns the block, or NIL when the request fails (OOM, or
 * e->nomem). *alloc_size receives the cudaMalloc size the request needed. */
uint32_t eng_malloc(engine *e, uint64_t orig_size, uint64_t stream, const uint64_t pool_id[2],
                    uint64_t *alloc_size_out)
{
	uint64_t size = sim_round_size(&e->cfg, orig_size);
	uint32_t pool = eng_pool_find(e, pool_id, size <= K_SMALL_SIZE);
	if (pool == NIL)
		return NIL;
	uint64_t alloc_size = sim_allocation_size(&e->cfg, size);
	*alloc_size_out = alloc_size;
	uint32_t b = get_free_block(e, pool, size, stream);
	if (b == NIL) {
		if (e->limit && e->cfg.gc_threshold > 0)
			garbage_collect(e);
		b = alloc_block(e, pool, size, alloc_size, stream);
		if (b == NIL && !e->nomem && release_available(e, pool, size, stream))
			b = alloc_block(e, pool, size, alloc_size, stream);
		if (b == NIL && !e->nomem) {
			eng_release_cached_blocks(e);
			if (!e->nomem)
				b = alloc_block(e, pool, size, alloc_size, stream);
		}
	}
	if (b == NIL || e->nomem)
		return NIL;
	sim_block *blk = &e->blocks[b];
	uint64_t remaining = blk->size - size;
	int split = e->pools[pool].small || e->cfg.expandable_segments
	                ? remaining >= K_MIN_BLOCK
	                : size < e->cfg.max_split_size && remaining > K_SMALL_SIZE;
	if (split) {
		uint32_t nb =
		    eng_block_make(e, blk->addr, size, blk->stream, blk->seg, B_ALLOCATED);
		if (nb == NIL)
			return NIL;
		link_before(e, nb, b);
		e->blocks[b].addr += size;
		e->blocks[b].size -= size;
		eng_cache_block(e, b);
		b = nb;
	}
	blk = &e->blocks[b];
	blk->state = B_ALLOCATED;
	e->allocated += blk->size;
	e->active += blk->size;
	note_allocated(e);
	return b;
}

uint64_t eng_largest_free(const engine *e)
{
	uint64_t best = 0;
	for (size_t p = 0; p < e->pool_count; p++)
		for (uint32_t it = sk_first(e, &e->pools[p].blocks); it != NIL;
		     it = e->blocks[it].fwd[0])
			best = MR_MAX(best, e->blocks[it].size);
	return best;
}

void eng_free(engine *e)
{
	free(e->blocks);
	free(e->segs);
	free(e->pools);
	free(e->pending);
	free(e->rec_seg);
	free(e->rec_live);
	am_free(&e->live);
	am_free(&e->last_seg_alloc);
}

int eng_init(engine *e, const md_snapshot *s, const md_device *md, const sim_config *cfg,
             uint64_t limit, sim_result *out, mr_error *err)
{
	static const uint64_t default_pool[2] = {0, 0};
	memset(e, 0, sizeof *e);
	e->s = s;
	e->md = md;
	e->cfg = *cfg;
	e->limit = limit;
	e->out = out;
	e->err = err;
	e->free_blocks = NIL;
	e->rng = 0x2545f4914f6cdd1dull;
	e->synthetic_va = SYNTHETIC_VA_BASE;
	e->lockstep = 1;
	/* pool 0: the default small pool, pool 1: the default large one */
	return eng_pool_find(e, default_pool, 1) != 0 || eng_pool_find(e, default_pool, 0) != 1 ? -1
	                                                                                        : 0;
}
