/* replay.c: a recorded trace, event by event, through the engine. */
#include "sim/replay.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"
#include "base/error.h"
#include "base/mem.h"
#include "sim/engine.h"
#include "sim/initial.h"

/* The pool a recorded request was served from: a private pool when its block lay in a
 * segment the snapshot reports in one. */
static void request_pool(const engine *e, uint64_t addr, uint64_t pool_id[2])
{
	pool_id[0] = pool_id[1] = 0;
	if (!e->track_pools || !e->rec_live_count)
		return;
	size_t lo = 0, hi = e->rec_live_count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (e->rec_live[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return;
	const rec_segment *rs = &e->rec_live[lo - 1];
	if (addr - rs->addr < rs->size) {
		pool_id[0] = rs->pool_id[0];
		pool_id[1] = rs->pool_id[1];
	}
}

/* The pool of the snapshot's segment allocated by x, if the snapshot still holds it. Segments
 * are sorted by (device, address): a search, not a scan per segment_alloc. */
static void snapshot_pool(const engine *e, const md_event *x, uint64_t pool_id[2])
{
	const md_segment *seg = e->s->segments;
	size_t lo = 0, hi = e->s->segment_count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (seg[mid].device < e->md->id ||
		    (seg[mid].device == e->md->id && seg[mid].address < x->addr))
			lo = mid + 1;
		else
			hi = mid;
	}
	for (;
	     lo < e->s->segment_count && seg[lo].device == e->md->id && seg[lo].address == x->addr;
	     lo++)
		if (seg[lo].total_size == x->size) {
			pool_id[0] = seg[lo].pool_id[0];
			pool_id[1] = seg[lo].pool_id[1];
			return;
		}
}

static int rec_live_update(engine *e, const md_event *x)
{
	size_t lo = 0, hi = e->rec_live_count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (e->rec_live[mid].addr < x->addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (x->action == MD_ACT_SEGMENT_FREE) {
		if (lo < e->rec_live_count && e->rec_live[lo].addr == x->addr) {
			memmove(e->rec_live + lo, e->rec_live + lo + 1,
			        (e->rec_live_count - lo - 1) * sizeof *e->rec_live);
			e->rec_live_count--;
		}
		return 0;
	}
	if (MR_GROW(e->rec_live, e->rec_live_cap, e->rec_live_count + 1))
		return -1;
	rec_segment rs = {x->addr, x->size, {0, 0}};
	/* The snapshot knows the pool of the segments still there at its end: this one, when no
	 * later segment_alloc reuses its address. */
	uint32_t last = eng_map_get(&e->last_seg_alloc, x->addr);
	if (last == e->rec_cursor_alloc)
		snapshot_pool(e, x, rs.pool_id);
	memmove(e->rec_live + lo + 1, e->rec_live + lo,
	        (e->rec_live_count - lo) * sizeof *e->rec_live);
	e->rec_live[lo] = rs;
	e->rec_live_count++;
	return 0;
}

/* A recorded `alloc` (or `oom`: the request that failed) through the model. */
static void on_request(engine *e, const md_event *x, size_t i, int recorded_oom)
{
	uint64_t pool_id[2], alloc_size = 0;
	char buf[96];
	request_pool(e, recorded_oom ? 0 : x->addr, pool_id);
	if (recorded_oom)
		pool_id[0] = pool_id[1] = 0;
	uint32_t b = eng_malloc(e, x->size, eng_stream_raw(e->s, x->stream), pool_id, &alloc_size);
	if (e->nomem)
		return;
	sim_result *r = e->out;
	if (b == NIL) {
		r->oom_count++;
		if (!r->first_oom.present) {
			sim_oom *o = &r->first_oom;
			o->present = 1;
			o->event_index = i;
			o->requested_bytes = x->size;
			o->alloc_bytes = alloc_size;
			o->reserved_bytes = e->reserved;
			o->allocated_bytes = e->allocated;
			o->free_cached_bytes = e->reserved - e->active;
			o->largest_free_bytes = eng_largest_free(e);
		}
		if (!recorded_oom) {
			snprintf(buf, sizeof buf, "OOM: %" PRIu64 " bytes would pass the limit",
			         alloc_size);
			if (e->lockstep)
				eng_diverge(e, i, "oom", "the request succeeded", buf);
			if (am_put(&e->live, x->addr, MAP_FAILED))
				e->nomem = 1;
		}
		return;
	}
	if (recorded_oom) {
		/* The replay could serve what failed: the block is never freed. */
		r->recorded_ooms_allocated++;
		if (e->lockstep)
			eng_diverge(e, i, "oom", "OOM", "the request succeeded");
		return;
	}
	sim_block *blk = &e->blocks[b];
	if (e->lockstep && blk->addr != x->addr) {
		char want[96];
		snprintf(want, sizeof want, "block at 0x%" PRIx64, x->addr);
		snprintf(buf, sizeof buf, "block at 0x%" PRIx64 " (%" PRIu64 " bytes)", blk->addr,
		         blk->size);
		eng_diverge(e, i, "block address", want, buf);
	}
	blk->trace_addr = x->addr;
	blk->mapped_key = 1;
	if (am_put(&e->live, x->addr, b))
		e->nomem = 1;
}

static void on_free_requested(engine *e, const md_event *x)
{
	uint32_t b = eng_map_get(&e->live, x->addr);
	if (b == NIL) {
		e->out->unknown_frees++;
		return;
	}
	if (b == MAP_FAILED || e->blocks[b].state != B_ALLOCATED)
		return;
	e->allocated -= e->blocks[b].size;
	e->blocks[b].state = B_PENDING;
	eng_pending_add(e, b);
}

static void on_free_completed(engine *e, const md_event *x)
{
	uint32_t b = eng_map_get(&e->live, x->addr);
	if (b == NIL)
		return; /* completed early by a release, or unknown (counted at its request) */
	if (b == MAP_FAILED) {
		eng_map_del(&e->live, x->addr);
		return;
	}
	if (e->blocks[b].state == B_ALLOCATED) { /* no free_requested seen */
		e->allocated -= e->blocks[b].size;
		e->blocks[b].state = B_PENDING;
		eng_pending_add(e, b);
		if (e->nomem)
			return;
	}
	if (e->blocks[b].state == B_PENDING)
		eng_complete_pending(e, b);
}

/* Recorded segment events the replay did not produce before event i. */
static void check_missing(engine *e, size_t i)
{
	if (!e->lockstep || e->rec_cursor >= e->rec_seg_count || e->rec_seg[e->rec_cursor] >= i)
		return;
	const md_event *r = &e->md->events[e->rec_seg[e->rec_cursor]];
	char want[96];
	snprintf(want, sizeof want, "%s of %" PRIu64 " bytes at 0x%" PRIx64,
	         md_action_name((md_action)r->action), r->size, r->addr);
	eng_diverge(e, e->rec_seg[e->rec_cursor], md_action_name((md_action)r->action), want,
	            "no segment event here");
}

static int is_release(int action)
{
	return action == MD_ACT_SEGMENT_FREE || action == MD_ACT_SEGMENT_UNMAP;
}

/* The run of consecutive segment events around a group of releases. A run of n segment
 * events can hold n/2 groups (a release after each creation): the run is scanned once, not
 * once per group, which cost n^2/4 steps. */
typedef struct {
	size_t end;          /* first event after the run; 0 before the first run */
	size_t created_upto; /* 1 + the last segment_alloc/map of the run; 0 when none */
	int oom_after;       /* an oom event follows the run */
} seg_run;

/* A group of recorded releases at i: caused by the request after it (the OOM path, garbage
 * collection, oversize release: then segments are created or an OOM follows) or by
 * empty_cache(). Returns 1 when the replay should release now; *end is the first event after
 * the group's segment events. Calls come in event order; run carries the current run. */
static int release_is_external(const engine *e, size_t i, seg_run *run, size_t *end)
{
	const md_event *ev = e->md->events;
	size_t n = e->md->event_count;
	if (i >= run->end) {
		size_t j = i;
		run->created_upto = 0;
		for (; j < n; j++) {
			int a = ev[j].action;
			if (a == MD_ACT_SEGMENT_ALLOC || a == MD_ACT_SEGMENT_MAP)
				run->created_upto = j + 1;
			else if (!is_release(a))
				break;
		}
		run->end = j;
		run->oom_after = j < n && ev[j].action == MD_ACT_OOM;
	}
	*end = run->end;
	int created = run->created_upto > i || run->oom_after;
	/* Without a limit the replay never needs to release: do it where the recording did. */
	return !created || !e->limit;
}

static uint64_t snapshot_total(const engine *e, int allocated_only)
{
	uint64_t total = 0;
	for (size_t i = 0; i < e->s->segment_count; i++) {
		const md_segment *sg = &e->s->segments[i];
		if (sg->device != e->md->id)
			continue;
		if (!allocated_only) {
			total += sg->total_size;
			continue;
		}
		for (size_t j = 0; j < sg->block_count; j++) {
			const md_block *mb = &e->s->blocks[sg->first_block + j];
			if (mb->state == MD_BLOCK_ACTIVE_ALLOCATED)
				total += mb->size;
		}
	}
	return total;
}

static void check_level(engine *e, size_t i, const char *what, uint64_t want, uint64_t got)
{
	if (!e->lockstep || want == got)
		return;
	char a[96], b[96];
	snprintf(a, sizeof a, "%" PRIu64 " bytes", want);
	snprintf(b, sizeof b, "%" PRIu64 " bytes", got);
	eng_diverge(e, i, what, a, b);
}

static mr_status replay_events(engine *e, mr_error *err)
{
	const md_event *ev = e->md->events;
	size_t n = e->md->event_count;
	uint64_t rec_reserved = e->out->initial_reserved, rec_peak = rec_reserved;
	seg_run run = {0, 0, 0};
	/* the snapshot's final state is the end of the recorded trace, not of a part or a copy */
	const md_device *rec = md_find_device(e->s, e->md->id);
	int validated_to_end = rec && rec->events == ev && rec->event_count == n;
	for (size_t i = 0; i < n; i++) {
		const md_event *x = &ev[i];
		e->cur_event = i;
		e->bound = i;
		switch (x->action) {
		case MD_ACT_ALLOC:
			on_request(e, x, i, 0);
			check_missing(e, i);
			break;
		case MD_ACT_OOM:
			e->out->recorded_ooms++;
			if (!e->limit && e->lockstep) {
				/* The recording hit a limit the replay was not given: what follows
				 * cannot be compared. */
				e->lockstep = 0;
				validated_to_end = 0;
			}
			on_request(e, x, i, 1);
			check_missing(e, i);
			break;
		case MD_ACT_FREE_REQUESTED:
			on_free_requested(e, x);
			check_missing(e, i);
			break;
		case MD_ACT_FREE_COMPLETED:
			on_free_completed(e, x);
			check_missing(e, i);
			break;
		case MD_ACT_SNAPSHOT:
			check_level(e, i, "active bytes at snapshot", x->size, e->active);
			break;
		case MD_ACT_SEGMENT_ALLOC:
		case MD_ACT_SEGMENT_MAP:
			rec_reserved += x->size;
			rec_peak = MR_MAX(rec_peak, rec_reserved);
			if (e->track_pools && x->action == MD_ACT_SEGMENT_ALLOC) {
				if (rec_live_update(e, x))
					e->nomem = 1;
				e->rec_cursor_alloc++;
			}
			break;
		case MD_ACT_SEGMENT_FREE:
		case MD_ACT_SEGMENT_UNMAP: {
			rec_reserved = rec_reserved > x->size ? rec_reserved - x->size : 0;
			if (e->track_pools && x->action == MD_ACT_SEGMENT_FREE &&
			    rec_live_update(e, x))
				e->nomem = 1;
			size_t end;
			if ((i == 0 || !is_release(ev[i - 1].action)) &&
			    release_is_external(e, i, &run, &end)) {
				e->bound = end;
				eng_release_cached_blocks(e);
			}
			break;
		}
		default: break;
		}
		if (e->nomem)
			return mr_oom(err);
	}
	e->cur_event = n;
	e->bound = n;
	check_missing(e, n);
	if (validated_to_end) {
		check_level(e, n, "final reserved", snapshot_total(e, 0), e->reserved);
		check_level(e, n, "final allocated", snapshot_total(e, 1), e->allocated);
		check_level(e, n, "peak reserved", rec_peak, e->out->peak_reserved);
	}
	return MR_OK;
}

mr_status sim_replay(const md_snapshot *s, int32_t device, const sim_config *cfg, uint64_t limit,
                     sim_result *out, mr_error *err)
{
	const md_device *md = md_find_device(s, device);
	if (!md || !md->event_count) {
		memset(out, 0, sizeof *out);
		out->device = device;
		return mr_fail(err, MR_EINPUT,
		               "device %d has no allocation trace to replay (record one with "
		               "torch.cuda.memory._record_memory_history())",
		               (int)device);
	}
	return sim_replay_trace(s, md, cfg, limit, out, err);
}

mr_status sim_replay_trace(const md_snapshot *s, const md_device *md, const sim_config *cfg,
                           uint64_t limit, sim_result *out, mr_error *err)
{
	memset(out, 0, sizeof *out);
	out->device = md->id;
	out->config = *cfg;
	out->limit = limit;
	int32_t device = md->id;
	engine e;
	mr_status st = MR_OK;
	size_t rec_seg_cap = 0;
	uint32_t seg_allocs = 0;
	if (eng_init(&e, s, md, cfg, limit, out, err))
		goto oom;
	e.recorded = md_find_device(s, device);
	if (!e.recorded)
		e.recorded = md;
	for (size_t i = 0; i < s->segment_count; i++)
		if (s->segments[i].device == device &&
		    (s->segments[i].pool_id[0] || s->segments[i].pool_id[1]))
			e.track_pools = 1;
	for (size_t i = 0; i < md->event_count; i++) {
		int a = md->events[i].action;
		if (a != MD_ACT_SEGMENT_ALLOC && a != MD_ACT_SEGMENT_FREE &&
		    a != MD_ACT_SEGMENT_MAP && a != MD_ACT_SEGMENT_UNMAP)
			continue;
		if (MR_GROW(e.rec_seg, rec_seg_cap, e.rec_seg_count + 1))
			goto oom;
		e.rec_seg[e.rec_seg_count++] = i;
		if (a == MD_ACT_SEGMENT_ALLOC && e.track_pools &&
		    am_put(&e.last_seg_alloc, md->events[i].addr, seg_allocs++))
			goto oom;
	}
	if ((st = sim_initial_state(&e, err)))
		goto done;
	if ((st = replay_events(&e, err)))
		goto done;
	out->events = md->event_count;
	out->final_allocated = e.allocated;
	out->final_reserved = e.reserved;
	out->final_active = e.active;
	out->matches_recording = !out->first_divergence.present;
	goto done;
oom:
	st = mr_oom(err);
done:
	eng_free(&e);
	return st;
}

void sim_result_free(sim_result *r)
{
	free(r->segment_sizes);
	r->segment_sizes = NULL;
	r->segment_size_count = 0;
}
