/* moments.h: the allocator's state at the moments a report talks about.
 *
 * Marks on a device's trace: its peak (the analysed peak of allocated bytes,
 * an_device.peak_allocated_event), every OOM, the end of each iteration (the event before each
 * iteration start of an_structure, after the first), and the snapshot (the last event). A
 * moment is the state after a marked event: the snapshot's, the peak's, the last OOM's, and up
 * to AN_ITERATION_MOMENTS iteration ends, evenly spaced (docs/page-schema.md, "Marks").
 *
 * The state at the snapshot is the snapshot's own, exactly. An earlier one is rebuilt
 * backwards from it: segments by undoing the segment events after the moment, newest first
 * (exact); blocks from the allocations live then (allocs.h), at their recorded addresses,
 * sized as the snapshot has them when they are still live at the end, else by the
 * allocator's rules (a request rounded to 512 bytes, and a large-pool remainder of at most
 * 1 MiB left unsplit), so the sizes of blocks freed before the snapshot are estimates. The
 * rules are the reference's (tests/browser/make_page_fixture.py), value for value.
 *
 * Ownership: an_moments owns its arrays; an_moments_free releases them. Frame and segment
 * pointers point into the md_snapshot. */
#ifndef MR_MOMENTS_H
#define MR_MOMENTS_H

#include <stddef.h>
#include <stdint.h>

#include "analyze/allocs.h"
#include "analyze/analyze.h"
#include "analyze/sites.h"
#include "base/error.h"
#include "model/model.h"

enum { AN_ITERATION_MOMENTS = 12 };

/* Kinds of marks, in the order marks of one event are listed. */
typedef enum { AN_MARK_PEAK, AN_MARK_OOM, AN_MARK_ITERATION, AN_MARK_SNAPSHOT } an_mark_kind;
const char *an_mark_name(an_mark_kind k); /* "peak", "oom", "iteration", "snapshot" */

enum { AN_NO_MOMENT = SIZE_MAX };

typedef struct {
	an_mark_kind kind;
	size_t event;
	uint64_t bytes; /* peak: allocated bytes; oom: the request that failed */
	size_t n;       /* iteration: 1, 2, ... (the iteration that ends) */
	size_t moment;  /* index into moments, AN_NO_MOMENT */
} an_mark;

typedef struct {
	size_t event;         /* the state after this event; AN_NO_MOMENT without a trace */
	unsigned kinds;       /* 1u << an_mark_kind of its marks */
	int from_snapshot;    /* the snapshot's own state (else rebuilt) */
	md_segment *segments; /* address order; first_block and block_count index blocks */
	size_t segment_count;
	md_block *blocks;
	uint32_t *owners; /* per block: an_alloc.owner (AN_OWNER_NONE for free blocks) */
	size_t block_count;
	an_pool totals;  /* memory_stats() words at this moment (every pool) */
	an_usite *sites; /* active blocks by the user's line, largest first */
	size_t site_count;
} an_moment;

typedef struct {
	an_mark *marks; /* by event, then kind */
	size_t mark_count;
	an_moment *moments; /* by event */
	size_t moment_count;
	size_t peak, oom, snapshot; /* moment indices, AN_NO_MOMENT */
	size_t iteration_ends;      /* iteration marks */
	int gave_up; /* rebuilding the segments was too costly: only the snapshot's moment */
} an_moments;

/* The moments of device dv (analysed, its peak settled by the replay) with trace md (may have
 * no events), the kinds of s's frames (an_frame_kinds) and allocations al (an_allocs_read). */
mr_status an_moments_read(const md_snapshot *s, const md_device *md, const an_device *dv,
                          const uint8_t *kinds, const an_allocs *al, an_moments *out,
                          mr_error *err);
void an_moments_free(an_moments *m);

/* Moments read before the replay settled dv's peak (ad_replay_apply; they are read beside it)
 * are still the settled ones when the peak stays at the same event: the peak mark then takes
 * the settled bytes, and 1 is returned. 0: the peak moved, and m must be read again. */
int an_moments_settle_peak(an_moments *m, const md_device *md, const an_device *dv);

/* The overhead at the peak: peak reserved minus peak allocated, as a share of peak reserved
 * (each the trace's highest, at its own event); 0 without a trace. */
double an_overhead_at_peak(const an_device *dv);

/* The moment of the given kind's last mark, or AN_NO_MOMENT. */
size_t an_moment_of(const an_moments *m, an_mark_kind kind);

#endif
