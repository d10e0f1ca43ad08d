/* cause.h: the one answer to "why did the allocation fail", whatever the evidence: a snapshot
 * (advise.c reads the layout the failed request met) or an OOM message alone (below).
 *
 * Ownership: plain values. */
#ifndef MR_CAUSE_H
#define MR_CAUSE_H

#include <stdint.h>

#include "decode/oom_message.h"

typedef enum {
	AD_CAUSE_UNKNOWN,
	AD_CAUSE_FRAGMENTATION,
	AD_CAUSE_CAPACITY,
	AD_CAUSE_OTHER_PROCESSES, /* another process holds the device */
	AD_CAUSE_NON_PYTORCH,     /* this process, outside the caching allocator (CuPy, JAX, ...) */
} ad_cause;

/* "fragmentation", "capacity", "other_processes", "non_pytorch_memory", "unknown": the
 * contract's words. */
const char *ad_cause_name(ad_cause c);

/* Who held the device when an allocation failed, from a message's figures. */
typedef struct {
	int has_reserved; /* what PyTorch's allocator held (allocated + reserved but unallocated) */
	uint64_t reserved;
	int fraction_hit; /* the memory fraction refused it, not the device */
	int device_full;  /* the device had less free than was asked for */
	int has_others;   /* total - free - this process, or the processes the message lists */
	uint64_t others;
	int has_non_pytorch; /* this process's memory outside PyTorch's allocator: the CUDA
	                        context, libraries, other allocators */
	uint64_t non_pytorch;
	int self_listed; /* index in the message's processes of the one that is this process
	                    (ad_listed_self), -1 when none is */
} ad_holders;

void ad_message_holders(const ev_oom *o, ad_holders *out);

/* The process of the message's "Process N has X memory in use" list that is this process,
 * when the message has no "this process has" sentence and the figures leave no other reading:
 * the listed processes and what PyTorch held here (`reserved`) add up to more than the device
 * had in use (total - free), so PyTorch's memory is inside one of them. Inside a container NVML
 * gives the host's PID, which is not getpid(), and PyTorch prints its own process that way.
 * The one chosen is the smallest that holds `reserved`. Returns its index, or -1 (no such
 * contradiction, figures missing, or none large enough). */
int ad_listed_self(const ev_oom *o, uint64_t reserved);

/* Memory outside PyTorch's allocator is the cause when the device itself was full and what
 * others (or this process's non-PyTorch memory) hold is at least what PyTorch holds and at
 * least 1 GiB: then no change inside PyTorch fits the run. AD_CAUSE_UNKNOWN when it is not. */
ad_cause ad_outside_cause(const ad_holders *h);

/* Rules (first match wins; `limit` is ev_oom_limit of oom_message.h):
 *  fragmentation   reserved_unallocated >= requested (the cache held enough bytes, just not in
 *                  one piece) and reserved_unallocated >= 10% of the limit (a real share, not
 *                  the usual few MiB of slack);
 *  other_processes / non_pytorch_memory  ad_outside_cause over ad_message_holders;
 *  capacity        allocated_by_pytorch + requested >= 90% of the limit: live tensors fill it;
 *  unknown         otherwise, or when the figures are missing (driver errors, bare messages). */
ad_cause ad_message_cause(const ev_oom *o);

/* What this PyTorch allocator held (reserved) by the message: the reserved total, or allocated
 * plus reserved-but-unallocated, or (cudaMallocAsync) the allocated figure. Returns 0 when the
 * message does not tell. */
int ad_message_reserved(const ev_oom *o, uint64_t *out);

/* A fragmentation OOM told by a message alone: what the limit would leave free were the cache
 * packed (the limit less what PyTorch allocated and the request), into *left. Returns 1 when
 * that is under a quarter of the limit: thin enough that the message cannot tell whether the run
 * would go on, or fail at its next request (memory that grows, a larger request after it). */
int ad_packed_thin(uint64_t limit, uint64_t allocated, uint64_t requested, uint64_t *left);

#endif
