/* allocs.c: a device's allocations as trace intervals, in stacking order. */
#include "analyze/allocs.h"

#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"
#include "base/mem.h"

int an_alloc_live_after(const an_alloc *a, size_t i)
{
	return (a->start == AN_NO_EVENT || a->start <= i) && (a->end == AN_NO_EVENT || a->end > i);
}

typedef struct {
	const md_snapshot *s;
	const an_stack_info *info;
	const uint8_t *kinds; /* per frame (an_frame_kinds) */
	uint8_t *own;         /* per stack: 0 not read yet, 1 no line of the user's own, 2 one */
	int trace_has_python;
	uint32_t backward; /* the backward() call running on the main thread, AN_OWNER_NONE */
	an_alloc *list;    /* in order of first appearance in the trace */
	size_t count, cap;
	size_t room; /* bytes of list's room (mem.h; cap fixed), 0: malloc'ed */
	am_map live; /* open address -> index into list */
	const md_event *events;
} walk;

static int has_own(walk *w, uint32_t stack)
{
	if (!w->own[stack])
		w->own[stack] = an_own_frame_k(w->s, w->kinds, stack) ? 2 : 1;
	return w->own[stack] == 2;
}

/* The main thread enters backward() with a stack of its own above autograd; any other event
 * of its own (the optimizer's step, the next forward) means backward has returned. */
static void follow_backward(walk *w, uint32_t stack)
{
	if (stack == MD_NO_STACK || stack >= w->s->stack_count)
		return;
	uint32_t f = w->info[stack].flags;
	if (!(f & AN_SF_PYTHON) || (f & AN_SF_ENGINE_THREAD) || !has_own(w, stack))
		return;
	w->backward = f & AN_SF_BACKWARD ? stack : AN_OWNER_NONE;
}

static uint32_t owner_of(const walk *w, uint32_t stack)
{
	int python = stack != MD_NO_STACK && stack < w->s->stack_count &&
	             (w->info[stack].flags & AN_SF_PYTHON);
	if (python || !w->trace_has_python)
		return AN_OWNER_NONE;
	return w->backward != AN_OWNER_NONE ? w->backward : AN_OWNER_AUTOGRAD;
}

static int push(walk *w, an_alloc a, uint64_t addr, size_t *idx)
{
	if (MR_GROW_IN(w->list, w->cap, w->room, w->count + 1))
		return -1;
	w->list[w->count] = a;
	*idx = w->count++;
	return am_put(&w->live, addr, *idx);
}

static int walk_event(walk *w, const md_event *e, uint32_t i)
{
	uint64_t v;
	size_t idx;
	uint32_t stack = e->stack < w->s->stack_count ? e->stack : MD_NO_STACK;
	follow_backward(w, stack);
	switch (e->action) {
	case MD_ACT_ALLOC:
		if (am_take(&w->live, e->addr, &v))
			w->list[v].end = i; /* its free was not recorded: it ends here */
		return push(
		    w,
		    (an_alloc){i, AN_NO_EVENT, AN_NO_EVENT, stack, owner_of(w, stack), AN_NO_BLOCK},
		    e->addr, &idx);
	case MD_ACT_FREE_REQUESTED:
	case MD_ACT_FREE_COMPLETED:
		if (am_get(&w->live, e->addr, &v)) {
			idx = (size_t)v;
		} else if (push(w,
		                (an_alloc){AN_NO_EVENT, AN_NO_EVENT, AN_NO_EVENT, stack,
		                           AN_OWNER_NONE, AN_NO_BLOCK},
		                e->addr, &idx)) {
			return -1; /* allocated before the trace began */
		}
		if (e->action == MD_ACT_FREE_REQUESTED) {
			/* PyTorch requests one free per allocation; a repeated request keeps the
			 * first (the event an older allocation takes its size from) */
			if (w->list[idx].free_requested == AN_NO_EVENT)
				w->list[idx].free_requested = i;
		} else {
			w->list[idx].end = i;
			am_take(&w->live, e->addr, &v);
		}
		return 0;
	default: return 0;
	}
}

/* Active blocks of the snapshot: the allocation that holds each one at the end, or a new one
 * older than the trace. */
static int snapshot_blocks(walk *w, size_t seg_first, size_t seg_count)
{
	const md_snapshot *s = w->s;
	uint64_t v;
	for (size_t i = seg_first; i < seg_first + seg_count; i++) {
		const md_segment *seg = &s->segments[i];
		for (size_t j = 0; j < seg->block_count; j++) {
			size_t bi = seg->first_block + j;
			const md_block *b = &s->blocks[bi];
			if (b->state == MD_BLOCK_INACTIVE)
				continue;
			if (am_get(&w->live, b->address, &v)) {
				w->list[v].block = (uint32_t)bi;
				continue;
			}
			if (MR_GROW_IN(w->list, w->cap, w->room, w->count + 1))
				return -1;
			w->list[w->count++] = (an_alloc){
			    AN_NO_EVENT,   AN_NO_EVENT,
			    AN_NO_EVENT,   b->stack < s->stack_count ? b->stack : MD_NO_STACK,
			    AN_OWNER_NONE, (uint32_t)bi};
		}
	}
	return 0;
}

typedef struct {
	uint64_t key; /* the event that freed it; live at the end sorts first */
	size_t index;
} older_key;

static int older_cmp(const void *a, const void *b)
{
	const older_key *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? 1 : -1;
	return (x->index > y->index) - (x->index < y->index);
}

/* The stacking order: the older ones (latest freed lowest... live at the end first), then the
 * trace's own in alloc order. In place: the list becomes out->items, so that the millions of
 * allocations of a long trace are never held twice; only the older ones are copied aside. */
static mr_status order(walk *w, size_t n, an_allocs *out, mr_error *err)
{
	size_t k = 0;
	for (size_t i = 0; i < w->count; i++)
		k += w->list[i].start == AN_NO_EVENT;
	older_key *keys = mr_alloc_array(k ? k : 1, sizeof *keys);
	an_alloc *older = mr_alloc_array(k ? k : 1, sizeof *older);
	int no_items = !w->list && MR_GROW(w->list, w->cap, 1); /* an empty run gets one too */
	if (!keys || !older || no_items) {
		free(keys);
		free(older);
		return mr_oom(err);
	}
	for (size_t i = 0, j = 0; i < w->count; i++)
		if (w->list[i].start == AN_NO_EVENT)
			keys[j++] =
			    (older_key){w->list[i].end == AN_NO_EVENT ? n : w->list[i].end, i};
	qsort(keys, k, sizeof *keys, older_cmp);
	for (size_t i = 0; i < k; i++)
		older[i] = w->list[keys[i].index];
	/* the trace's own slide to the end, last first, so none is overwritten before it moves */
	for (size_t i = w->count, to = w->count; i-- > 0;)
		if (w->list[i].start != AN_NO_EVENT)
			w->list[--to] = w->list[i];
	if (k)
		memcpy(w->list, older, k * sizeof *older);
	out->items = w->list;
	out->count = w->count;
	out->events = w->events;
	out->blocks = w->s->blocks;
	out->older = k;
	out->room = w->room;
	w->list = NULL;
	w->count = w->cap = w->room = 0;
	free(keys);
	free(older);
	return MR_OK;
}

mr_status an_allocs_read(const md_snapshot *s, const md_device *md, size_t seg_first,
                         size_t seg_count, const an_stack_info *info, const uint8_t *kinds,
                         an_allocs *out, mr_error *err)
{
	memset(out, 0, sizeof *out);
	size_t n = md ? md->event_count : 0;
	if (n >= AN_NO_EVENT)
		return mr_fail(err, MR_EINPUT, "a trace of %zu events is too long to draw", n);
	walk w = {s,    info, kinds, NULL, 0,   AN_OWNER_NONE,
	          NULL, 0,    0,     0,    {0}, md ? md->events : NULL};
	mr_status st = MR_OK;
	w.own = mr_alloc_array(s->stack_count ? s->stack_count : 1, 1);
	if (!w.own)
		goto oom;
	/* each allocation is one of the trace's events or one of the snapshot's blocks */
	size_t most = n + s->block_count;
	if (most <= SIZE_MAX / sizeof *w.list && (w.list = mr_room_new(most * sizeof *w.list))) {
		w.cap = most;
		w.room = most * sizeof *w.list;
	}
	for (size_t i = 0; i < n && !w.trace_has_python; i++) {
		uint32_t stk = md->events[i].stack;
		w.trace_has_python = stk < s->stack_count && (info[stk].flags & AN_SF_PYTHON);
	}
	for (size_t i = 0; i < n; i++)
		if (walk_event(&w, &md->events[i], (uint32_t)i))
			goto oom;
	if (snapshot_blocks(&w, seg_first, seg_count))
		goto oom;
	st = order(&w, n, out, err);
	goto done;
oom:
	st = mr_oom(err);
done:
	free(w.own);
	mr_release(w.list, w.room);
	am_free(&w.live);
	return st;
}

void an_allocs_free(an_allocs *a)
{
	mr_release(a->items, a->room);
	memset(a, 0, sizeof *a);
}
