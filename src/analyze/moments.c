/* moments.c: marks on a trace, and the segments and blocks at each marked moment. */
#include "analyze/moments.h"

#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"
#include "base/mem.h"
#include "base/units.h"

/* Bound on the work of rebuilding expandable segments (segments scanned per map or unmap
 * event): past it only the snapshot's own moment is kept. Real traces use a few thousand. */
#define REBUILD_BUDGET 50000000ull
#define SMALL_SEGMENT (2 * MR_MIB) /* the small pool's segment size */
#define LARGE_NO_SPLIT MR_MIB      /* large-pool remainders up to this are not split off */

const char *an_mark_name(an_mark_kind k)
{
	static const char *const names[] = {"peak", "oom", "iteration", "snapshot"};
	return k <= AN_MARK_SNAPSHOT ? names[k] : "";
}

double an_overhead_at_peak(const an_device *dv)
{
	if (!dv->has_trace || !dv->peak_reserved)
		return 0.0;
	return 1.0 -
	       (double)MR_MIN(dv->peak_allocated, dv->peak_reserved) / (double)dv->peak_reserved;
}

size_t an_moment_of(const an_moments *m, an_mark_kind kind)
{
	size_t found = AN_NO_MOMENT;
	for (size_t i = 0; i < m->mark_count; i++)
		if (m->marks[i].kind == kind && m->marks[i].moment != AN_NO_MOMENT)
			found = m->marks[i].moment;
	return found;
}

/* ---- marks ---- */

static int mark_cmp(const void *a, const void *b)
{
	const an_mark *x = a, *y = b;
	if (x->event != y->event)
		return x->event < y->event ? -1 : 1;
	if (x->kind != y->kind)
		return (int)x->kind - (int)y->kind;
	return (x->n > y->n) - (x->n < y->n);
}

/* Whether iteration end j (0-based) of count gets a moment: all of them up to
 * AN_ITERATION_MOMENTS, else that many evenly spaced, the first and the last included. */
static int iteration_has_moment(size_t j, size_t count)
{
	if (count <= AN_ITERATION_MOMENTS)
		return 1;
	size_t k = AN_ITERATION_MOMENTS - 1;
	for (size_t i = 0; i <= k; i++)
		if ((2 * i * (count - 1) + k) / (2 * k) == j)
			return 1;
	return 0;
}

/* The event the peak mark is at: the peak's, within the trace. */
static size_t peak_event(const md_device *md, const an_device *dv)
{
	size_t n = md->event_count;
	return dv->peak_allocated_event < n ? dv->peak_allocated_event : n - 1;
}

static mr_status read_marks(const md_device *md, const an_device *dv, an_moments *out,
                            mr_error *err)
{
	size_t n = md->event_count, ooms = 0, last_oom = 0;
	size_t iters = dv->run.start_count > 1 ? dv->run.start_count - 1 : 0;
	for (size_t i = 0; i < n; i++)
		if (md->events[i].action == MD_ACT_OOM) {
			ooms++;
			last_oom = i;
		}
	out->marks = mr_alloc_array(2 + ooms + iters, sizeof *out->marks);
	if (!out->marks)
		return mr_oom(err);
	an_mark *m = out->marks;
	size_t k = 0;
	m[k++] = (an_mark){AN_MARK_PEAK, peak_event(md, dv), dv->peak_allocated, 0, 0};
	for (size_t i = 0; i < n; i++)
		if (md->events[i].action == MD_ACT_OOM)
			m[k++] = (an_mark){AN_MARK_OOM, i, md->events[i].size, 0,
			                   i == last_oom ? 0 : AN_NO_MOMENT};
	for (size_t j = 0; j < iters; j++)
		m[k++] = (an_mark){AN_MARK_ITERATION, dv->run.starts[j + 1] - 1, 0, j + 1,
		                   iteration_has_moment(j, iters) ? 0 : AN_NO_MOMENT};
	m[k++] = (an_mark){AN_MARK_SNAPSHOT, n - 1, 0, 0, 0};
	qsort(m, k, sizeof *m, mark_cmp);
	out->mark_count = k;
	out->iteration_ends = iters;
	return MR_OK;
}

/* One moment per distinct event that a mark with a moment points at. */
static mr_status assign_moments(an_moments *out, mr_error *err)
{
	out->moments = mr_alloc_array(out->mark_count ? out->mark_count : 1, sizeof *out->moments);
	if (!out->moments)
		return mr_oom(err);
	for (size_t i = 0; i < out->mark_count; i++) {
		an_mark *mk = &out->marks[i];
		if (mk->moment == AN_NO_MOMENT)
			continue;
		if (!out->moment_count || out->moments[out->moment_count - 1].event != mk->event)
			out->moments[out->moment_count++].event = mk->event;
		mk->moment = out->moment_count - 1;
		out->moments[mk->moment].kinds |= 1u << mk->kind;
	}
	return MR_OK;
}

/* ---- segments, rebuilt backwards ---- */

typedef struct {
	uint64_t addr, size, stream, pool_id[2];
	uint8_t pool, expandable, alive;
} rseg;

typedef struct {
	rseg *items; /* in the reference's list order; dead ones stay until compacted */
	size_t count, cap;
	am_map at; /* address -> index of the live segment there */
	uint64_t work;
} rsegs;

static int rseg_add(rsegs *r, rseg g)
{
	g.alive = 1;
	if (MR_GROW(r->items, r->cap, r->count + 1))
		return -1;
	r->items[r->count] = g;
	return am_put(&r->at, g.addr, r->count++);
}

static int rseg_addr_cmp(const void *a, const void *b)
{
	const rseg *x = *(rseg *const *)a, *y = *(rseg *const *)b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return (x > y) - (x < y); /* stable: list order */
}

/* The live segments in address order (stable), as pointers into r->items. */
static rseg **rseg_sorted(const rsegs *r, size_t *count)
{
	rseg **v = mr_alloc_array(r->count ? r->count : 1, sizeof *v);
	size_t n = 0;
	if (!v)
		return NULL;
	for (size_t i = 0; i < r->count; i++)
		if (r->items[i].alive)
			v[n++] = &r->items[i];
	qsort(v, n, sizeof *v, rseg_addr_cmp);
	*count = n;
	return v;
}

/* Compacts the list into address order, joining adjacent expandable ranges of one stream. */
static int rseg_join(rsegs *r)
{
	size_t n = 0;
	rseg **v = rseg_sorted(r, &n), *items = mr_alloc_array(n ? n : 1, sizeof *items);
	size_t k = 0;
	if (!v || !items) {
		free(v);
		free(items);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		rseg *p = k ? &items[k - 1] : NULL;
		if (p && p->expandable && v[i]->expandable && p->addr + p->size == v[i]->addr &&
		    p->stream == v[i]->stream)
			p->size += v[i]->size;
		else
			items[k++] = *v[i];
	}
	free(v);
	free(r->items);
	r->items = items;
	r->count = r->cap = k;
	am_free(&r->at);
	for (size_t i = 0; i < k; i++)
		if (am_put(&r->at, items[i].addr, i))
			return -1;
	r->work += n;
	return 0;
}

static void rseg_kill(rsegs *r, size_t i)
{
	uint64_t v;
	r->items[i].alive = 0;
	if (am_get(&r->at, r->items[i].addr, &v) && v == i)
		am_take(&r->at, r->items[i].addr, &v);
}

/* Undoes a segment_map: its range leaves the range holding it. */
static int undo_map(rsegs *r, const md_event *e)
{
	for (size_t i = 0; i < r->count; i++) {
		rseg *g = &r->items[i];
		if (!g->alive || g->addr > e->addr || e->addr + e->size > g->addr + g->size)
			continue;
		uint64_t end = g->addr + g->size;
		rseg rest = *g;
		g->size = e->addr - g->addr;
		rest.addr = e->addr + e->size;
		rest.size = end - rest.addr;
		rest.expandable = 1;
		if (rest.addr < end && rseg_add(r, rest))
			return -1;
		break;
	}
	for (size_t i = 0; i < r->count; i++)
		if (r->items[i].alive && r->items[i].size == 0)
			rseg_kill(r, i);
	r->work += r->count;
	return 0;
}

/* Undoes a segment_unmap: its range comes back, joined with the expandable range it ends. */
static int undo_unmap(rsegs *r, const md_event *e, uint64_t stream)
{
	int joined = 0;
	for (size_t i = 0; i < r->count && !joined; i++) {
		rseg *g = &r->items[i];
		if (g->alive && g->expandable && g->addr + g->size == e->addr &&
		    g->stream == stream) {
			g->size += e->size;
			joined = 1;
		}
	}
	rseg add = {e->addr, e->size, stream, {0, 0}, e->size == SMALL_SEGMENT, 1, 1};
	if (!joined && rseg_add(r, add))
		return -1;
	return rseg_join(r);
}

static int undo_event(rsegs *r, const md_snapshot *s, const md_event *e)
{
	uint64_t v, stream = s->streams[e->stream];
	switch (e->action) {
	case MD_ACT_SEGMENT_ALLOC:
		if (am_get(&r->at, e->addr, &v))
			rseg_kill(r, (size_t)v);
		return 0;
	case MD_ACT_SEGMENT_FREE: {
		rseg add = {e->addr, e->size, stream, {0, 0}, e->size == SMALL_SEGMENT, 0, 1};
		return rseg_add(r, add);
	}
	case MD_ACT_SEGMENT_MAP: return undo_map(r, e);
	case MD_ACT_SEGMENT_UNMAP: return undo_unmap(r, e, stream);
	default: return 0;
	}
}

/* ---- blocks at a moment ---- */

typedef struct {
	uint64_t addr;
	size_t alloc; /* index into an_allocs */
} live_ref;

static int live_cmp(const void *a, const void *b)
{
	const live_ref *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return (x->alloc > y->alloc) - (x->alloc < y->alloc);
}

typedef struct {
	const md_snapshot *s;
	const an_allocs *al;
	int32_t device;
	md_segment *segs;
	md_block *blocks;
	uint32_t *owners;
	size_t seg_count, block_count, block_cap, seg_cap;
} builder;

static int put_block(builder *b, md_block blk, uint32_t owner)
{
	size_t cap = b->block_cap;
	if (MR_GROW(b->blocks, b->block_cap, b->block_count + 1))
		return -1;
	if (b->block_cap != cap) {
		uint32_t *o = mr_realloc_array(b->owners, b->block_cap, sizeof *o);
		if (!o)
			return -1;
		b->owners = o;
	}
	b->blocks[b->block_count] = blk;
	b->owners[b->block_count++] = owner;
	return 0;
}

static uint64_t round_block(uint64_t bytes)
{
	return bytes <= 512 ? 512 : (bytes + 511) / 512 * 512;
}

/* The block allocation a holds after event m: its size, state and stack. */
static md_block alloc_block(const builder *b, const an_alloc *a, size_t m, int *estimated)
{
	const md_block *snap = a->block != AN_NO_BLOCK ? &b->s->blocks[a->block] : NULL;
	int pending = (a->free_requested != AN_NO_EVENT && a->free_requested <= m) ||
	              (a->free_requested == AN_NO_EVENT && a->start == AN_NO_EVENT && snap &&
	               snap->state == MD_BLOCK_ACTIVE_PENDING_FREE);
	*estimated = !(a->end == AN_NO_EVENT && snap);
	md_block blk = {0};
	blk.address = an_alloc_addr(b->al, a);
	blk.size = *estimated ? round_block(an_alloc_bytes(b->al, a)) : snap->size;
	blk.requested_size = an_alloc_bytes(b->al, a);
	blk.requested_known = 1;
	blk.stack = a->stack;
	blk.state = pending ? MD_BLOCK_ACTIVE_PENDING_FREE : MD_BLOCK_ACTIVE_ALLOCATED;
	return blk;
}

static int free_block(builder *b, uint64_t addr, uint64_t size)
{
	md_block f = {addr, size, 0, MD_NO_STACK, MD_BLOCK_INACTIVE, 1};
	return put_block(b, f, AN_OWNER_NONE);
}

/* The live blocks at addresses [g->addr, end), from live[*j], placed in segment g. */
static int place_segment(builder *b, const rseg *g, const live_ref *live, size_t nlive, size_t *j,
                         size_t m)
{
	uint64_t end = g->addr + g->size, pos = g->addr;
	while (*j < nlive && live[*j].addr < g->addr)
		(*j)++; /* a block outside every segment: inconsistent input, left out */
	size_t from = *j;
	while (*j < nlive && live[*j].addr < end)
		(*j)++;
	for (size_t k = from; k < *j; k++) {
		const an_alloc *a = &b->al->items[live[k].alloc];
		int estimated;
		md_block blk = alloc_block(b, a, m, &estimated);
		uint64_t next = k + 1 < *j ? live[k + 1].addr : end;
		if (blk.address > pos && free_block(b, pos, blk.address - pos))
			return -1;
		if (estimated && g->pool != 1 && next > blk.address + blk.size &&
		    next - (blk.address + blk.size) <= LARGE_NO_SPLIT)
			blk.size = next - blk.address; /* the allocator does not split that off */
		blk.size = MR_MIN(blk.size, next - blk.address);
		if (put_block(b, blk, a->owner))
			return -1;
		pos = blk.address + blk.size;
	}
	return pos < end ? free_block(b, pos, end - pos) : 0;
}

static int put_segment(builder *b, const rseg *g)
{
	if (MR_GROW(b->segs, b->seg_cap, b->seg_count + 1))
		return -1;
	md_segment seg = {0};
	seg.device = b->device;
	seg.address = g->addr;
	seg.total_size = g->size;
	seg.stream = g->stream;
	seg.pool_id[0] = g->pool_id[0];
	seg.pool_id[1] = g->pool_id[1];
	seg.stack = MD_NO_STACK;
	seg.pool = g->pool == 1 ? MD_POOL_SMALL : MD_POOL_LARGE;
	seg.is_expandable = g->expandable;
	seg.first_block = (uint32_t)b->block_count;
	b->segs[b->seg_count++] = seg;
	return 0;
}

/* The state after event m, from the live segments of r. */
static mr_status rebuilt_moment(builder *b, const rsegs *r, size_t m, an_moment *mo, mr_error *err)
{
	size_t nseg = 0, nlive = 0, j = 0;
	rseg **segs = rseg_sorted(r, &nseg);
	/* not zeroed: filled up to nlive, and a large run's allocations are megabytes of it */
	live_ref *live = mr_realloc_array(NULL, b->al->count ? b->al->count : 1, sizeof *live);
	mr_status st = MR_OK;
	if (!segs || !live)
		goto oom;
	for (size_t i = 0; i < b->al->count; i++)
		if (an_alloc_live_after(&b->al->items[i], m))
			live[nlive++] = (live_ref){an_alloc_addr(b->al, &b->al->items[i]), i};
	qsort(live, nlive, sizeof *live, live_cmp);
	for (size_t i = 0; i < nseg; i++) {
		if (put_segment(b, segs[i]) || place_segment(b, segs[i], live, nlive, &j, m))
			goto oom;
		b->segs[b->seg_count - 1].block_count =
		    (uint32_t)(b->block_count - b->segs[b->seg_count - 1].first_block);
	}
	goto done;
oom:
	st = mr_oom(err);
done:
	free(segs);
	free(live);
	mo->segments = b->segs;
	mo->segment_count = b->seg_count;
	mo->blocks = b->blocks;
	mo->owners = b->owners;
	mo->block_count = b->block_count;
	return st;
}

/* The snapshot's own segments and blocks, with their allocations' owners. */
static mr_status snapshot_moment(const md_snapshot *s, const an_device *dv, const an_allocs *al,
                                 an_moment *mo, mr_error *err)
{
	size_t nb = 0;
	const md_segment *first = dv->segment_count ? &s->segments[dv->segment_first] : NULL;
	for (size_t i = 0; i < dv->segment_count; i++)
		nb += first[i].block_count;
	mo->from_snapshot = 1;
	mo->segments =
	    mr_alloc_array(dv->segment_count ? dv->segment_count : 1, sizeof *mo->segments);
	mo->blocks = mr_alloc_array(nb ? nb : 1, sizeof *mo->blocks);
	mo->owners = mr_alloc_array(nb ? nb : 1, sizeof *mo->owners);
	if (!mo->segments || !mo->blocks || !mo->owners)
		return mr_oom(err);
	size_t base = dv->segment_count ? first[0].first_block : 0, k = 0;
	for (size_t i = 0; i < dv->segment_count; i++) {
		mo->segments[i] = first[i];
		mo->segments[i].first_block = (uint32_t)k;
		for (size_t j = 0; j < first[i].block_count; j++, k++) {
			mo->blocks[k] = s->blocks[first[i].first_block + j];
			mo->owners[k] = AN_OWNER_NONE;
		}
	}
	for (size_t i = 0; i < al->count; i++)
		if (al->items[i].block != AN_NO_BLOCK && al->items[i].block >= base &&
		    al->items[i].block - base < nb)
			mo->owners[al->items[i].block - base] = al->items[i].owner;
	mo->segment_count = dv->segment_count;
	mo->block_count = nb;
	return MR_OK;
}

static mr_status finish_moment(const md_snapshot *s, const uint8_t *kinds, an_moment *mo,
                               mr_error *err)
{
	for (size_t i = 0; i < mo->segment_count; i++)
		an_pool_add(&mo->totals, &mo->segments[i], mo->blocks);
	return an_sites_group(s, kinds, mo->blocks, mo->owners, mo->block_count, &mo->sites,
	                      &mo->site_count, err);
}

static mr_status start_segments(const md_snapshot *s, const an_device *dv, rsegs *r, mr_error *err)
{
	for (size_t i = dv->segment_first; i < dv->segment_first + dv->segment_count; i++) {
		const md_segment *g = &s->segments[i];
		int priv = g->pool_id[0] || g->pool_id[1];
		rseg add = {g->address,
		            g->total_size,
		            g->stream,
		            {g->pool_id[0], g->pool_id[1]},
		            (uint8_t)(priv ? 2 : g->pool == MD_POOL_SMALL),
		            g->is_expandable,
		            1};
		if (rseg_add(r, add))
			return mr_oom(err);
	}
	return MR_OK;
}

/* Every moment's state: walking the trace backwards from the snapshot, each earlier moment
 * is rebuilt when the walk reaches it. *gave_up: the rebuilding passed REBUILD_BUDGET. */
static mr_status read_states(const md_snapshot *s, const md_device *md, const an_device *dv,
                             const an_allocs *al, an_moments *out, int *gave_up, mr_error *err)
{
	rsegs r = {0};
	mr_status st = start_segments(s, dv, &r, err);
	size_t next = md->event_count; /* events at or after next are undone */
	for (size_t k = out->moment_count; k-- > 0 && !st && !*gave_up;) {
		an_moment *mo = &out->moments[k];
		if (mo->event + 1 >= md->event_count) {
			st = snapshot_moment(s, dv, al, mo, err);
			continue;
		}
		while (!st && next > mo->event + 1 && !*gave_up) {
			if (undo_event(&r, s, &md->events[--next]))
				st = mr_oom(err);
			*gave_up = r.work > REBUILD_BUDGET;
		}
		builder b = {s, al, dv->device, NULL, NULL, NULL, 0, 0, 0, 0};
		if (!st && !*gave_up)
			st = rebuilt_moment(&b, &r, mo->event, mo, err);
	}
	free(r.items);
	am_free(&r.at);
	return st;
}

static void free_moment(an_moment *mo)
{
	free(mo->segments);
	free(mo->blocks);
	free(mo->owners);
	free(mo->sites);
	memset(mo, 0, sizeof *mo);
}

/* Past the budget only the snapshot's own moment is kept (the last one). */
static void keep_snapshot_only(an_moments *out)
{
	size_t last = out->moment_count - 1;
	for (size_t k = 0; k < last; k++)
		free_moment(&out->moments[k]);
	out->moments[0] = out->moments[last];
	if (last)
		memset(&out->moments[last], 0, sizeof out->moments[last]);
	out->moment_count = 1;
	for (size_t i = 0; i < out->mark_count; i++)
		out->marks[i].moment =
		    out->marks[i].event == out->moments[0].event ? 0 : AN_NO_MOMENT;
	out->moments[0].kinds = 0;
	for (size_t i = 0; i < out->mark_count; i++)
		if (out->marks[i].moment == 0)
			out->moments[0].kinds |= 1u << out->marks[i].kind;
}

mr_status an_moments_read(const md_snapshot *s, const md_device *md, const an_device *dv,
                          const uint8_t *kinds, const an_allocs *al, an_moments *out, mr_error *err)
{
	memset(out, 0, sizeof *out);
	out->peak = out->oom = out->snapshot = AN_NO_MOMENT;
	mr_status st = MR_OK;
	if (md && md->event_count) {
		if ((st = read_marks(md, dv, out, err)) || (st = assign_moments(out, err)))
			goto done;
	} else {
		out->moments = mr_alloc_array(1, sizeof *out->moments);
		if (!out->moments) {
			st = mr_oom(err);
			goto done;
		}
		out->moments[0].event = AN_NO_MOMENT;
		out->moments[0].kinds = 1u << AN_MARK_SNAPSHOT;
		out->moment_count = 1;
		st = snapshot_moment(s, dv, al, &out->moments[0], err);
		if (!st)
			st = finish_moment(s, kinds, &out->moments[0], err);
		goto done;
	}
	int gave_up = 0;
	if ((st = read_states(s, md, dv, al, out, &gave_up, err)))
		goto done;
	if (gave_up) {
		keep_snapshot_only(out);
		out->gave_up = 1;
	}
	for (size_t k = 0; k < out->moment_count && !st; k++)
		st = finish_moment(s, kinds, &out->moments[k], err);
done:
	if (st) {
		an_moments_free(out);
		return st;
	}
	out->peak = an_moment_of(out, AN_MARK_PEAK);
	out->oom = an_moment_of(out, AN_MARK_OOM);
	out->snapshot = out->moment_count ? out->moment_count - 1 : AN_NO_MOMENT;
	return MR_OK;
}

int an_moments_settle_peak(an_moments *m, const md_device *md, const an_device *dv)
{
	if (!md || !md->event_count)
		return 1; /* no marks: the snapshot's moment alone, whatever the peak */
	for (size_t i = 0; i < m->mark_count; i++)
		if (m->marks[i].kind == AN_MARK_PEAK) {
			if (m->marks[i].event != peak_event(md, dv))
				return 0;
			m->marks[i].bytes = dv->peak_allocated;
			return 1;
		}
	return 0;
}

void an_moments_free(an_moments *m)
{
	for (size_t i = 0; i < m->moment_count; i++)
		free_moment(&m->moments[i]);
	free(m->moments);
	free(m->marks);
	memset(m, 0, sizeof *m);
}
