/* evidence.h: readers for text evidence of PyTorch memory use.
 *
 *   - torch.cuda.memory_summary() tables (any era: KB/MB or KiB/MiB units, abbreviated or not,
 *     other backends' words such as MLU/XPU/NPU/HIP), found anywhere in a log, with log
 *     prefixes and hard wraps tolerated;
 *   - out-of-memory error messages of every era (caching allocator, cudaMallocAsync, driver
 *     "CUDA error: out of memory"), found anywhere in a log, hard wraps tolerated;
 *   - memory_stats() dumps: a JSON object of "key": number (nested objects are flattened with
 *     '.', Python dict reprs with single quotes are accepted too).
 *
 * Ownership: ev_parse_text fills an ev_text whose arrays it allocates; ev_text_free releases
 * them (and is safe on a zeroed or partially filled ev_text). Likewise ev_parse_stats_json and
 * ev_stats_free. The parsers never keep pointers into the input. Nothing here prints. */
#ifndef MR_EVIDENCE_H
#define MR_EVIDENCE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* ---- memory_summary() tables ------------------------------------------------------------ */

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

/* ---- out-of-memory messages --------------------------------------------------------------- */

enum ev_oom_era {
	EV_OOM_ERA_UNKNOWN,
	EV_OOM_ERA_LEGACY_CACHED,   /* <= ~1.4: "(GPU 0; T total capacity; A already allocated; F
	                               free; C cached)" */
	EV_OOM_ERA_LEGACY_RESERVED, /* ~1.5-1.9: "...; R reserved in total by PyTorch)" */
	EV_OOM_ERA_LEGACY_HINT,     /* ~1.10-2.0: the same + "If reserved memory is >> allocated ...
	                               max_split_size_mb" */
	EV_OOM_ERA_V21_SENTENCE,    /* 2.1: "GPU 0 has a total capacty of ..." (sic) */
	EV_OOM_ERA_CURRENT, /* >= 2.2: "GPU 0 has a total capacity of ...", expandable_segments hint
	                     */
	EV_OOM_ERA_ASYNC_ALLOCATOR, /* cudaMallocAsync: "Allocation on device 0 would exceed allowed
	                               memory" */
	EV_OOM_ERA_DRIVER_ERROR,    /* "CUDA error: out of memory": no numbers */
	EV_OOM_ERA_GENERIC, /* "X out of memory." with no recognisable tail (XPU, generic allocator,
	                       1EB) */
};
const char *ev_oom_era_name(int era);

typedef struct {
	int pid;
	uint64_t bytes;
} ev_process;

typedef struct {
	size_t line;      /* 1-based line of the input where the message starts */
	int era;          /* enum ev_oom_era */
	char backend[16]; /* word before "out of memory" ("CUDA", "HIP", "XPU"...), else the device
	                     word of the tail when not "GPU" ("NPU", "MLU"), else "" */
	int device;       /* -1 unknown */
	/* Every figure below is in bytes and valid only when its has_ flag is set. Amounts printed
	 * with two decimals are rounded to the nearest byte. */
	uint64_t requested_bytes; /* "Tried to allocate X" / "Requested : X" */
	uint64_t total_capacity;  /* "total capacity" / "Device limit" */
	uint64_t device_free;     /* "F free" / "of which F is free" / "Free (according to CUDA)" */
	uint64_t allowed;         /* "X allowed;" / "PyTorch limit (...) : X" */
	uint64_t this_process_in_use; /* "Including non-PyTorch memory, this process has X memory in
	                                 use" */
	uint64_t allocated_by_pytorch; /* "already allocated" / "is allocated by PyTorch" /
	                                  "Currently allocated" */
	uint64_t reserved_unallocated; /* "reserved by PyTorch but unallocated"; derived for legacy
	                                  eras */
	uint64_t private_pools;        /* "with X allocated in private pools" */
	uint64_t reserved_total; /* legacy "reserved in total by PyTorch"; derived for "cached" */
	int has_requested, has_total_capacity, has_device_free, has_allowed, has_this_process,
	    has_allocated, has_reserved_unallocated, has_private_pools, has_reserved_total;
	int requested_more_than_1eb; /* "Tried to allocate more than 1EB memory" */
	ev_process *other_processes; /* "Process N has X memory in use", in message order */
	size_t other_process_count;
} ev_oom;

typedef struct {
	ev_summary *summaries; /* in input order */
	size_t summary_count;
	ev_oom *ooms; /* in input order */
	size_t oom_count;
} ev_text;

/* Finds every memory_summary() table and every out-of-memory message in `data` (need not be
 * NUL-terminated). MR_EINPUT with "no memory_summary() table or CUDA out-of-memory message
 * found" when it holds neither; MR_EFAIL when memory runs out. On failure *out is left empty. */
mr_status ev_parse_text(const char *data, size_t len, ev_text *out, mr_error *err);
void ev_text_free(ev_text *t);

/* ---- cause of an OOM, from the message alone ------------------------------------------------ */

typedef enum {
	EV_CAUSE_UNKNOWN,
	EV_CAUSE_FRAGMENTATION,
	EV_CAUSE_CAPACITY,
	EV_CAUSE_OTHER_PROCESSES
} ev_cause;

/* Rules (first match wins; `limit` is ev_oom_limit):
 *  fragmentation   reserved_unallocated >= requested (the cache held enough bytes, just not in
 *                  one piece) and reserved_unallocated >= 10% of the limit (a real share, not
 *                  the usual few MiB of slack);
 *  other_processes the limit that was hit is the device, not a memory fraction, and memory
 *                  outside this PyTorch allocator (other processes + this process's non-PyTorch
 *                  memory, or total - free - reserved) is more than 50% of the total capacity;
 *  capacity        allocated_by_pytorch + requested >= 90% of the limit: live tensors fill it;
 *  unknown         otherwise, or when the figures are missing (driver errors, bare messages). */
ev_cause ev_oom_cause(const ev_oom *o);
const char *
ev_cause_name(ev_cause c); /* "fragmentation", "capacity", "other_processes", "unknown" */
/* The limit the allocator ran into: `allowed` when a memory fraction was set (and below the
 * total), else the total capacity; 0 when unknown. */
uint64_t ev_oom_limit(const ev_oom *o);

/* Converts "204.00 MiB", "0 bytes", "1.5GiB", "146836 KB" (binary multiples whatever the
 * spelling) at s[0..len) to bytes, rounding to the nearest byte. Returns the number of
 * characters consumed (spaces between number and unit allowed), 0 when it is not an amount.
 * *overflow is set when the amount does not fit in 64 bits (then *out is UINT64_MAX). */
size_t ev_parse_amount(const char *s, size_t len, uint64_t *out, int *overflow);

/* ---- memory_stats() dumps ------------------------------------------------------------------- */

typedef struct {
	char *key; /* NUL-terminated, owned */
	double value;
	uint64_t uvalue; /* exact value when is_uint */
	int is_uint;     /* the literal was a non-negative integer that fits in 64 bits */
} ev_stat;

typedef struct {
	ev_stat *items; /* in input order */
	size_t count;
} ev_stats;

/* Parses a memory_stats() dump: a JSON object whose values are numbers; nested objects (as
 * from memory_stats_as_nested_dict) are flattened to "a.b.c" keys; Python dict reprs
 * ('key': 1) are accepted; true/false/null/strings are skipped. MR_EINPUT with the byte offset
 * when it is not such an object, or when it holds no numeric value. */
mr_status ev_parse_stats_json(const char *data, size_t len, ev_stats *out, mr_error *err);
/* Returns 1 and sets *out when `key` is present with a non-negative integral value (the first
 * occurrence wins), else 0. */
int ev_stats_get(const ev_stats *s, const char *key, uint64_t *out);
void ev_stats_free(ev_stats *s);

#endif
