/* diff.h: what changed between two runs: their totals at the end (the snapshots) and at their
 * peaks, the allocator settings they recorded, and the allocation sites at both moments.
 *
 * Live (allocated) blocks of each run are grouped by their allocation site: the first frame of
 * the block's stack that PyTorch's viewer shows (an_frame_hidden) and that is not inside torch
 * itself, i.e. the user's code line that asked for the memory; stacks without such a frame fall
 * back to the first shown Python frame, then to the first shown frame. Sites are matched between
 * the runs by the (file name, line, function name) text, never by interned ids, which differ
 * between snapshots. A block the autograd engine allocated in backward (no Python frame) is
 * in the site of its backward() call (analyze/allocs.h). The bytes of every allocated block
 * land in exactly one site, so the bytes_delta of all sites add up to the change of
 * allocated_bytes at that moment. At the peak the blocks are those of each run's layout
 * rebuilt at its peak (analyze/moments.h).
 *
 * Ownership: df_compute fills a df_result that df_free releases; it copies every string it
 * keeps, so the runs may be freed first. render/render_diff.h writes it. */
#ifndef MR_DIFF_H
#define MR_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "report/report.h"

typedef struct {
	char *filename, *name;
	int32_t line;
} df_frame;

typedef struct {
	char *site;     /* "file:line in name", as shown; "(no stack recorded)" */
	df_frame where; /* the site frame; filename "" when there is none */
	df_frame
	    *frames; /* the shown frames of the site's largest block's stack, innermost first */
	size_t frame_count;
	uint64_t bytes_before, bytes_after, count_before, count_after;
	int64_t bytes_delta, count_delta;
} df_change;

enum {
	DF_RESERVED,
	DF_ALLOCATED,
	DF_ACTIVE,
	DF_REQUESTED,
	DF_INACTIVE_SPLIT,
	DF_PEAK_RESERVED,
	DF_PEAK_ALLOCATED,
	DF_METRIC_COUNT
};

/* The layout at the peak (the peak moment of each device, summed; the largest free block is
 * the largest of any device). */
enum { DF_PK_RESERVED, DF_PK_ALLOCATED, DF_PK_FREE_CACHED, DF_PK_LARGEST_FREE, DF_PK_COUNT };

/* An allocator setting the two runs recorded differently. */
typedef struct {
	char *key;
	char *before, *after; /* NULL: that run did not record it */
} df_setting;

typedef struct {
	uint64_t value[2][DF_METRIC_COUNT]; /* [0] before, [1] after: summed over the devices */
	int known[2][DF_METRIC_COUNT];      /* peaks need a trace on every device */
	df_change *changes; /* at the end: every site whose bytes or blocks changed; largest
	                       growth first */
	size_t change_count;
	df_change *peak_changes; /* the same at each run's peak */
	size_t peak_change_count;
	uint64_t peak_value[2][DF_PK_COUNT];
	int peak_known[2]; /* every device shown has a peak moment */
	df_setting *settings;
	size_t setting_count, setting_cap;
	size_t max_frames; /* frames kept per change (default 32) */
} df_result;

const char *df_peak_key(int metric);
/* 1 - largest free block / free cached at side's peak (0 when nothing is free). */
double df_peak_fragmentation(const df_result *d,
                             int side); /* "reserved_bytes", ..., "largest_free_block_bytes" */

const char *df_metric_key(int metric); /* "reserved_bytes", ..., "peak_allocated_bytes" */

/* Compares two loaded runs. device < 0: every device. */
mr_status df_compute(const rp_report *before, const rp_report *after, int device, df_result *out,
                     mr_error *err);
void df_free(df_result *d);

#endif
