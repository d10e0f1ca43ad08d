/* analyze.c: per-device numbers, layout, trace replay and live sites. */
#include "analyze.h"

#include <stdlib.h>
#include <string.h>

/* ---- a small address -> size map with backward-shift deletion ---- */

typedef struct {
	uint64_t *keys; /* address + 1; 0 = empty */
	uint64_t *vals;
	size_t cap, count;
} addr_map;

static size_t addr_hash(uint64_t a, size_t cap)
{
	a ^= a >> 29;
	a *= 0xbf58476d1ce4e5b9ull;
	a ^= a >> 32;
	return (size_t)a & (cap - 1);
}

static int map_grow(addr_map *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 4096;
	uint64_t *k = mr_alloc_array(ncap, sizeof *k), *v = mr_alloc_array(ncap, sizeof *v);
	if (!k || !v) {
		free(k);
		free(v);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->keys[i])
			continue;
		size_t h = addr_hash(m->keys[i], ncap);
		while (k[h])
			h = (h + 1) & (ncap - 1);
		k[h] = m->keys[i];
		v[h] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = k;
	m->vals = v;
	m->cap = ncap;
	return 0;
}

static int map_put(addr_map *m, uint64_t addr, uint64_t val)
{
	if ((m->count + 1) * 2 > m->cap && map_grow(m))
		return -1;
	uint64_t key = addr + 1;
	size_t h = addr_hash(key, m->cap);
	while (m->keys[h] && m->keys[h] != key)
		h = (h + 1) & (m->cap - 1);
	if (!m->keys[h])
		m->count++;
	m->keys[h] = key;
	m->vals[h] = val;
	return 0;
}

/* Removes addr; returns 1 and its value if it was there. */
static int map_take(addr_map *m, uint64_t addr, uint64_t *val)
{
	if (!m->cap)
		return 0;
	uint64_t key = addr + 1;
	size_t h = addr_hash(key, m->cap);
	while (m->keys[h] && m->keys[h] != key)
		h = (h + 1) & (m->cap - 1);
	if (!m->keys[h])
		return 0;
	*val = m->vals[h];
	m->keys[h] = 0;
	m->count--;
	/* Shift later members of the cluster back so lookups never stop early. */
	size_t hole = h, j = h;
	for (;;) {
		j = (j + 1) & (m->cap - 1);
		if (!m->keys[j])
			break;
		size_t home = addr_hash(m->keys[j], m->cap);
		int movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
		if (movable) {
			m->keys[hole] = m->keys[j];
			m->vals[hole] = m->vals[j];
			m->keys[j] = 0;
			hole = j;
		}
	}
	return 1;
}

static void map_free(addr_map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof *m);
}

/* ---- allocator rules ---- */

uint64_t an_round_size(const md_settings *cfg, uint64_t size)
{
	const uint64_t min_block = 512;
	if (size < min_block)
		return min_block;
	uint32_t div = 0;
	if (cfg) {
		int log2 = 63 - __builtin_clzll(size);
		int idx = log2 - 20;
		idx = idx < 0 ? 0 : idx > 15 ? 15 : idx;
		div = cfg->roundup_divisions[idx];
	}
	if (div > 1 && size > min_block * div) {
		uint64_t floor = (uint64_t)1 << (63 - __builtin_clzll(size));
		if (floor == size)
			return size;
		int shift = __builtin_ctz(div);
		uint64_t step = floor >> shift;
		if (step == 0)
			return floor * 2;
		return (size + step - 1) / step * step;
	}
	return (size + min_block - 1) / min_block * min_block;
}

int an_frame_hidden(const md_snapshot *s, const md_frame *f)
{
	static const char *const names[] = {"unwind::unwind", "CapturedTraceback::gather",
					    "gather_with_cpp", "_start", "__libc_start_main",
					    "PyEval_", "PyObject_", "PyFunction_"};
	static const char *const files[] = {"core/boxing", "/Register", "/Redispatch",
					    "pythonrun.c", "Modules/main.c", "Objects/call.c",
					    "Objects/methodobject.c", "pycore_ceval.h", "ceval.c",
					    "cpython/abstract.h"};
	const char *name = md_str(s, f->name), *file = md_str(s, f->filename);
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strstr(name, names[i]))
			return 1;
	for (size_t i = 0; i < sizeof files / sizeof *files; i++)
		if (strstr(file, files[i]))
			return 1;
	return 0;
}

/* ---- layout ---- */

static int is_private(const md_segment *seg)
{
	return seg->pool_id[0] || seg->pool_id[1];
}

static void add_segment(an_pool *p, const md_snapshot *s, const md_segment *seg)
{
	const md_block *b = s->blocks + seg->first_block;
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
			if (split) {
				p->inactive_split += b[i].size;
				p->inactive_split_blocks++;
			}
		}
	}
	if (!any_active)
		p->whole_free += seg->total_size;
}

/* ---- trace replay ---- */

/* Estimated block size of a request whose block is gone (exact sizes need the allocator
 * replay of simulate.c): rounded the way the allocator rounds. */
static uint64_t block_estimate(const md_settings *cfg, uint64_t requested)
{
	return an_round_size(cfg, requested);
}

static void bucket_add(an_point *p, int first_visit, size_t i, const md_event *e, uint64_t alloc,
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
	p->time_us = e->time_us;
}

/* Walks the trace backwards from the snapshot, whose state is exact: blocks live at the end
 * keep their real sizes, blocks freed inside the window are estimated at their free, and
 * whatever is left when the walk reaches the first event was there before the window. */
static mr_status replay(const md_snapshot *s, const an_pool *all, an_device *dv,
			const md_device *md, size_t max_points, mr_error *err)
{
	const md_event *ev = md->events;
	size_t n = md->event_count;
	addr_map live = {0};
	mr_status st = MR_OK;
	for (size_t i = dv->segment_first; i < dv->segment_first + dv->segment_count; i++) {
		const md_segment *seg = &s->segments[i];
		for (size_t j = 0; j < seg->block_count; j++) {
			const md_block *b = &s->blocks[seg->first_block + j];
			if (b->state == MD_BLOCK_ACTIVE_ALLOCATED && map_put(&live, b->address, b->size))
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
		bucket_add(&dv->timeline[b], b != bucket, i, e, alloc, reserved);
		bucket = b;
		/* Undo event i. */
		switch (e->action) {
		case MD_ACT_ALLOC:
			if (!map_take(&live, e->addr, &size))
				size = block_estimate(&s->settings, e->size);
			alloc = alloc > size ? alloc - size : 0;
			break;
		case MD_ACT_FREE_REQUESTED:
			size = block_estimate(&s->settings, e->size);
			if (map_put(&live, e->addr, size))
				goto oom;
			alloc += size;
			break;
		case MD_ACT_SEGMENT_ALLOC:
		case MD_ACT_SEGMENT_MAP:
			reserved = reserved > e->size ? reserved - e->size : 0;
			break;
		case MD_ACT_SEGMENT_FREE:
		case MD_ACT_SEGMENT_UNMAP:
			reserved += e->size;
			break;
		case MD_ACT_OOM:
			if (!dv->oom_events++)
				dv->last_oom_event = i;
			break;
		default:
			break;
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
	map_free(&live);
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

mr_status an_analyze(const md_snapshot *s, size_t max_points, an_result *out, mr_error *err)
{
	memset(out, 0, sizeof *out);
	if (!max_points)
		max_points = 2000;
	mr_status st = MR_OK;
	out->devices = mr_alloc_array(s->device_count, sizeof *out->devices);
	if (!out->devices)
		return mr_oom(err);
	out->device_count = s->device_count;
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
			add_segment(&dv->pool[AN_POOL_ALL], s, sg);
			add_segment(&dv->pool[sg->pool == MD_POOL_SMALL ? AN_POOL_SMALL : AN_POOL_LARGE], s,
				    sg);
			if (is_private(sg))
				add_segment(&dv->pool[AN_POOL_PRIVATE], s, sg);
			if (sg->is_expandable)
				dv->expandable = 1;
			seg++;
		}
		dv->segment_count = seg - dv->segment_first;
		if (s->settings.expandable_segments)
			dv->expandable = 1;
		const an_pool *all = &dv->pool[AN_POOL_ALL];
		dv->fragmentation =
			all->free_cached ? 1.0 - (double)all->largest_free / (double)all->free_cached : 0.0;
		dv->trace_events = md->event_count;
		dv->has_trace = md->event_count > 0;
		if (dv->has_trace && (st = replay(s, all, dv, md, max_points, err)))
			break;
		if ((st = live_sites(s, dv, err)))
			break;
	}
	if (st)
		an_free(out);
	return st;
}

void an_free(an_result *r)
{
	for (size_t i = 0; i < r->device_count; i++) {
		free(r->devices[i].timeline);
		free(r->devices[i].sites);
	}
	free(r->devices);
	memset(r, 0, sizeof *r);
}
