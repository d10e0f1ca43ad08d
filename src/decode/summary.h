/* summary.h: torch.cuda.memory_summary() tables (any era: KB/MB or KiB/MiB units, abbreviated
 * or not, other backends' words such as MLU/XPU/NPU/HIP), found anywhere in a log, with log
 * prefixes and hard wraps tolerated.
 *
 * Ownership: ev_find_summaries grows a caller-owned array (free it with free()); it keeps no
 * pointer into the input. Nothing here prints. */
#ifndef MR_SUMMARY_H
#define MR_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* One table cell. `value` is in bytes for byte metrics and a plain count for count metrics.
 * `unit` is the display precision: the printed number times the unit (1024 for "KiB", 1000
 * for a "K" count, 1 for bytes and plain counts). memory_summary truncates, so when unit > 1
 * the true value lies in [value, value + unit). */
typedef struct {
	int known;
	uint64_t value;
	uint64_t unit;
} ev_cell;

enum ev_metric {
	EV_ALLOCATED,             /* Allocated memory       allocated_bytes */
	EV_ACTIVE,                /* Active memory          active_bytes */
	EV_REQUESTED,             /* Requested memory       requested_bytes (absent before ~2.1) */
	EV_RESERVED,              /* GPU reserved memory    reserved_bytes */
	EV_INACTIVE_SPLIT,        /* Non-releasable memory  inactive_split_bytes */
	EV_ALLOCATIONS,           /* Allocations            allocation */
	EV_ACTIVE_ALLOCS,         /* Active allocs          active */
	EV_SEGMENTS,              /* GPU reserved segments  segment */
	EV_INACTIVE_SPLIT_ALLOCS, /* Non-releasable allocs inactive_split */
	EV_OVERSIZE_ALLOCS,       /* Oversize allocations  oversize_allocations (pool ALL only) */
	EV_OVERSIZE_SEGMENTS,     /* Oversize GPU segments oversize_segments (pool ALL only) */
	EV_METRIC_COUNT
};
enum ev_pool { EV_POOL_ALL, EV_POOL_LARGE, EV_POOL_SMALL, EV_POOL_COUNT };
enum ev_col { EV_CUR, EV_PEAK, EV_TOT_ALLOC, EV_TOT_FREED, EV_COL_COUNT };

/* 1 for the byte metrics (EV_ALLOCATED..EV_INACTIVE_SPLIT), 0 for counts. */
int ev_metric_is_bytes(int metric);
/* The memory_stats() key stem of a metric ("allocated_bytes", "segment", ...). */
const char *ev_metric_stat_key(int metric);

typedef struct {
	size_t line;           /* 1-based line of the table's top border */
	int device;            /* -1 when the title line was not seen */
	int num_ooms;          /* -1 unknown */
	int num_alloc_retries; /* -1 unknown */
	char backend[16];      /* word of the title: "CUDA", "MLU", "XPU"...; "" unknown */
	ev_cell cells[EV_METRIC_COUNT][EV_POOL_COUNT][EV_COL_COUNT];
	int legacy_units; /* cells printed in KB/MB/GB (PyTorch < ~2.0) */
	int abbreviated;  /* no "from large/small pool" rows */
} ev_summary;

/* Appends every table of d[0..len) to *items (*count of them so far, the array grown with
 * realloc). MR_EFAIL when memory runs out (what was appended stays). */
mr_status ev_find_summaries(const char *d, size_t len, ev_summary **items, size_t *count,
                            mr_error *err);

#endif
