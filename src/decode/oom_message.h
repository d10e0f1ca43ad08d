/* oom_message.h: out-of-memory error messages of every era (caching allocator,
 * cudaMallocAsync, driver "CUDA error: out of memory", 0.x "cuda runtime error (2)", cuBLAS and
 * cuDNN allocation failures, Apple's MPS backend), found anywhere in a log, hard wraps
 * tolerated.
 *
 * Ownership: ev_find_ooms grows a caller-owned array; each ev_oom owns its other_processes
 * array (free both with free()). Nothing keeps a pointer into the input; nothing prints. */
#ifndef MR_OOM_MESSAGE_H
#define MR_OOM_MESSAGE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

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
	EV_OOM_ERA_LEGACY_RUNTIME, /* 0.x: "THCudaCheck FAIL ... error=2 : out of memory", "cuda
	                              runtime error (2) : out of memory": no numbers */
	EV_OOM_ERA_LIBRARY,        /* "CUBLAS_STATUS_ALLOC_FAILED" (cuDNN likewise): a CUDA library
	                              could not allocate its workspace; no numbers */
	EV_OOM_ERA_MPS, /* Apple's MPS backend: "MPS backend out of memory (MPS allocated: X, other
	                   allocations: Y, max allowed: Z). Tried to allocate W" */
};
const char *ev_oom_era_name(int era);

typedef struct {
	int pid;
	uint64_t bytes;
} ev_process;

typedef struct {
	char file[192], function[64], code[160];
	long line;
} ev_frame;

typedef struct {
	size_t line;      /* 1-based line of the input where the message starts */
	int era;          /* enum ev_oom_era */
	char backend[16]; /* word before "out of memory" ("CUDA", "HIP", "XPU", "MPS"...), else the
	                     device word of the tail when not "GPU" ("NPU", "MLU"), else "" */
	char
	    status[32]; /* the library's status for EV_OOM_ERA_LIBRARY: "CUBLAS_STATUS_ALLOC_FAILED"
	                 */
	int device;     /* -1 unknown */
	/* Every figure below is in bytes and valid only when its has_ flag is set. Amounts printed
	 * with two decimals are rounded to the nearest byte. */
	uint64_t requested_bytes; /* "Tried to allocate X" / "Requested : X" */
	uint64_t total_capacity;  /* "total capacity" / "Device limit" */
	uint64_t device_free;     /* "F free" / "of which F is free" / "Free (according to CUDA)" */
	uint64_t allowed;         /* "X allowed;" / "PyTorch limit (...) : X" / MPS "max allowed" */
	uint64_t this_process_in_use; /* "Including non-PyTorch memory, this process has X memory in
	                                 use"; MPS: allocated plus "other allocations" */
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
	/* The Python traceback printed just above the message: its innermost frame (where the
	 * memory was asked), and its innermost frame outside the installed packages and the
	 * standard library (the user's own line; the same frame when the innermost is the user's).
	 * line 0 when there is none. Strings are as the log wrote them (cut to fit), not escaped.
	 */
	ev_frame raised, user;
} ev_oom;

/* Appends every message of d[0..len) to *items (*count of them so far, the array grown with
 * realloc). MR_EFAIL when memory runs out (what was appended stays). */
mr_status ev_find_ooms(const char *d, size_t len, ev_oom **items, size_t *count, mr_error *err);

/* The limit the allocator ran into: `allowed` when a memory fraction was set (and below the
 * total), else the total capacity; 0 when unknown. */
uint64_t ev_oom_limit(const ev_oom *o);

/* 1 for the eras whose message says only that memory ran out (driver, 0.x runtime, library). */
int ev_oom_without_sizes(const ev_oom *o);

#endif
