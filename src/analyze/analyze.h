/* analyze.h: numbers only, no prose. Per device and pool, what memory_stats() would say at the
 * snapshot's moment; free-space layout and fragmentation; the trace replayed once into peaks and
 * a down-sampled timeline; live allocation sites.
 *
 * Ownership: an_result owns its arrays; an_free releases them. It keeps pointers into the
 * md_snapshot it was computed from, which must outlive it. */
#ifndef MR_ANALYZE_H
#define MR_ANALYZE_H

#include <stddef.h>
#include <stdint.h>

#include "analyze/frames.h"
#include "analyze/structure.h"
#include "base/error.h"
#include "model/model.h"

enum { AN_POOL_ALL, AN_POOL_LARGE, AN_POOL_SMALL, AN_POOL_PRIVATE, AN_POOL_COUNT };

typedef struct {
	/* The same words as torch.cuda.memory_stats(), ".current". */
	uint64_t reserved, allocated, active, requested;
	uint64_t inactive_split, inactive_split_blocks; /* not counted in expandable segments */
	uint64_t segments;
	/* Layout. */
	uint64_t free_cached; /* every inactive block, split or not */
	uint64_t free_blocks;
	uint64_t largest_free; /* largest inactive block */
	uint64_t largest_hole; /* largest inactive block inside a split segment */
	uint64_t whole_free;   /* segments with no active block: what empty_cache() releases */
	uint64_t pending_free, pending_free_blocks; /* freed, but an event is still outstanding */
	uint64_t active_blocks;
	uint64_t rounding_waste; /* size - requested over active blocks */
} an_pool;

/* Adds segment seg (its blocks are blocks[seg->first_block ..]) to the pool's numbers. */
void an_pool_add(an_pool *p, const md_segment *seg, const md_block *blocks);
/* 1 - largest free block / free cached, 0 when nothing is free. */
double an_fragmentation(const an_pool *p);
/* The segment the allocator asks CUDA for when a request of `size` bytes (rounded) finds no
 * cached block: 2 MiB for small ones, 20 MiB under 10 MiB, else the size rounded up to 2 MiB.
 * It is what an OOM message's "Tried to allocate" prints. */
uint64_t an_segment_size_for(uint64_t size);

/* One bucket of the down-sampled timeline: min and max inside keep every peak. */
typedef struct {
	size_t first_event;
	int64_t time_us; /* MD_TIME_NONE when the trace has no times */
	uint64_t allocated_min, allocated_max;
	uint64_t reserved_min, reserved_max;
} an_point;

typedef struct {
	uint32_t stack; /* interned stack id */
	uint64_t bytes, requested;
	uint64_t count;
} an_site;

/* The free space the failed allocation could have used: same stream, same size class, default
 * pool, and (unless they are on) not inside expandable segments. */
typedef struct {
	int present;
	size_t event;        /* index of the oom event in the device's trace */
	uint64_t requested;  /* rounded request (the event's size) */
	uint64_t alloc_size; /* the segment cudaMalloc would have needed */
	int category;        /* the request's, by its frames (AN_CAT_UNKNOWN when none decides) */
	uint64_t device_free;
	uint64_t usable_free, usable_largest, usable_pieces;
	size_t events_after; /* trace events after the OOM: the snapshot is later than the OOM */
} an_oom;

typedef struct {
	int32_t device;
	an_pool pool[AN_POOL_COUNT];
	double fragmentation; /* 1 - largest_free / free_cached, 0 when nothing is free */
	int expandable;       /* expandable segments seen or configured */
	size_t segment_first, segment_count; /* this device's slice of md_snapshot.segments */

	/* From the trace. */
	int has_trace; /* at least one event */
	size_t trace_events;
	size_t trace_allocs; /* alloc events: none, and the trace shows no peak, OOM nor growth */
	int truncated;       /* 1 when the trace does not reach back to an empty allocator */
	uint64_t blocks_before_window; /* live blocks the trace never saw allocated */
	uint64_t initial_reserved, initial_allocated; /* reconstructed at the window's start */
	uint64_t peak_allocated, peak_reserved;
	int peak_exact; /* set by the allocator replay when it reproduced the trace (truncated:
	                   exact within its window, the run may have peaked before it) */
	uint64_t peak_exact_limit; /* the limit that replay ran under (0: none) */
	size_t peak_allocated_event, peak_reserved_event;
	uint64_t oom_events;
	size_t last_oom_event; /* valid when oom_events > 0 */
	/* The run went on past the trace's last OOM: a backward pass and an optimizer step (or
	 * two backward passes) came after it, so the error was caught and handled (a batch-size
	 * finder, a retry loop) and the snapshot shows the run later, alive. oom.present is then 0:
	 * no OOM ended the run in this evidence. recovered_backwards: backward passes after it. */
	int oom_recovered;
	size_t recovered_backwards;
	an_point *timeline;
	size_t timeline_count;

	an_site *sites; /* live blocks grouped by stack, largest first */
	size_t site_count;

	/* Live memory by category (frames.h): a block with no frame shown is the autograd
	 * engine's when the trace saw it allocated, unknown when it is older than the trace. */
	uint64_t categories[AN_CAT_COUNT]; /* live at the snapshot */
	int peak_categories_known;
	uint64_t peak_categories[AN_CAT_COUNT]; /* live at the trace's allocated peak */
	an_site *peak_sites; /* live at the peak, by stack (block sizes estimated), largest first */
	size_t peak_site_count;
	an_oom oom;
	an_structure run; /* kind of run, iterations, techniques, growth */
} an_device;

typedef struct {
	an_device *devices;
	size_t device_count;
	an_stack_info *stack_info; /* per stack of the snapshot (frames.h) */
	uint8_t *frame_kinds;      /* per frame of the snapshot: AN_FK_* (frames.h) */
} an_result;

/* Computes everything for every device of s. max_points bounds the timeline (0: 2000). */
mr_status an_analyze(const md_snapshot *s, size_t max_points, an_result *out, mr_error *err);
/* an_analyze in two halves, for a caller that runs other work beside the second: the first
 * gives every device its pools, timeline, peaks (not yet exact), OOM and snapshot sites and
 * categories; the second its kind of run (run) and what was live at its peak (peak_sites,
 * peak_categories), reading only those and writing nothing the first wrote. On failure
 * an_analyze_base frees *out; after a failed an_analyze_rest the caller does (an_free). */
mr_status an_analyze_base(const md_snapshot *s, size_t max_points, an_result *out, mr_error *err);
mr_status an_analyze_rest(const md_snapshot *s, an_result *out, mr_error *err);
void an_free(an_result *r);

#endif
