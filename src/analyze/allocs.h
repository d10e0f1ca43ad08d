/* allocs.h: every allocation of one device, as an interval of its trace.
 *
 * Walking the trace forward, an `alloc` opens an allocation (its requested size, its stack)
 * and the `free_completed` of the same address closes it; an `alloc` at an address still open
 * closes the open one first. Allocations older than the trace are of two kinds: a free of an
 * address the trace never opened (its size and stack are the free's), and an active block of
 * the snapshot that no trace allocation holds at the end (its requested size and stack are the
 * block's). One still open at the end, or found in the snapshot, is live at the end.
 *
 * They are kept in the stacking order of PyTorch's active-memory timeline
 * (docs/page-schema.md): the older ones first, those live at the end lowest, then by the event
 * that freed them, the latest first (ties in order of first appearance: in the trace, then in
 * the snapshot by segment address and block); then the trace's own, in alloc order.
 *
 * An allocation with no Python frame, made while the trace has Python frames elsewhere, is the
 * autograd engine's (its thread runs backward with no Python above it): its `owner` is the
 * stack of the main thread's backward() call that was running (the last backward stack with a
 * line of the user's own before it), or AN_OWNER_AUTOGRAD when the trace does not show one.
 *
 * Ownership: an_allocs owns its array (an_allocs_free releases it) and borrows the device's
 * events and the snapshot's blocks, which must outlive it. */
#ifndef MR_ALLOCS_H
#define MR_ALLOCS_H

#include <stddef.h>
#include <stdint.h>

#include "analyze/frames.h"
#include "base/error.h"
#include "model/model.h"

enum {
	AN_NO_EVENT = UINT32_MAX,           /* start: older than the trace; end: live at the end */
	AN_OWNER_NONE = UINT32_MAX,         /* not the autograd engine's */
	AN_OWNER_AUTOGRAD = UINT32_MAX - 1, /* the engine's, no backward() call in sight */
	AN_NO_BLOCK = UINT32_MAX,
};

/* 24 bytes: a long trace has millions. Its address and requested size are those of the first
 * event that names it (its alloc, else its free) or of the block it holds in the snapshot:
 * an_alloc_addr, an_alloc_bytes. */
typedef struct {
	uint32_t start, end;     /* event indices, AN_NO_EVENT as above */
	uint32_t free_requested; /* its (first) free_requested event, AN_NO_EVENT when none */
	uint32_t stack;          /* md stack id (MD_NO_STACK: none) */
	uint32_t owner;          /* AN_OWNER_* or the stack of the backward() call */
	uint32_t block;          /* its block in md_snapshot.blocks when live at the end */
} an_alloc;

typedef struct {
	an_alloc *items; /* stacking order */
	size_t count;
	size_t older;           /* items[0..older) are older than the trace */
	const md_event *events; /* borrowed: the device's */
	const md_block *blocks; /* borrowed: the snapshot's */
	size_t room;            /* bytes of items' room (mem.h), 0: malloc'ed */
} an_allocs;

/* The first event that names it: its alloc, else (older than the trace) its free. */
static inline uint32_t an_alloc_origin(const an_alloc *a)
{
	return a->start != AN_NO_EVENT            ? a->start
	       : a->free_requested != AN_NO_EVENT ? a->free_requested
	                                          : a->end;
}

static inline uint64_t an_alloc_addr(const an_allocs *al, const an_alloc *a)
{
	uint32_t o = an_alloc_origin(a);
	return o != AN_NO_EVENT ? al->events[o].addr : al->blocks[a->block].address;
}

/* As requested. */
static inline uint64_t an_alloc_bytes(const an_allocs *al, const an_alloc *a)
{
	uint32_t o = an_alloc_origin(a);
	return o != AN_NO_EVENT ? al->events[o].size : al->blocks[a->block].requested_size;
}

/* Reads the allocations of device md (its segments are s->segments[seg_first ..
 * seg_first + seg_count)). info classifies s's stacks, kinds its frames (an_frame_kinds). A trace
 * of AN_NO_EVENT events or more is refused (MR_EINPUT). */
mr_status an_allocs_read(const md_snapshot *s, const md_device *md, size_t seg_first,
                         size_t seg_count, const an_stack_info *info, const uint8_t *kinds,
                         an_allocs *out, mr_error *err);
void an_allocs_free(an_allocs *a);

/* Whether the allocation is live after event i (older: from the start; live at the end: to
 * the end). */
int an_alloc_live_after(const an_alloc *a, size_t i);

#endif
