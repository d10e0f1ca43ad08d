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
	AD_CAUSE_OTHER_PROCESSES,
} ad_cause;

/* "fragmentation", "capacity", "other_processes", "unknown": the contract's words. */
const char *ad_cause_name(ad_cause c);

/* Rules (first match wins; `limit` is ev_oom_limit of oom_message.h):
 *  fragmentation   reserved_unallocated >= requested (the cache held enough bytes, just not in
 *                  one piece) and reserved_unallocated >= 10% of the limit (a real share, not
 *                  the usual few MiB of slack);
 *  other_processes the limit that was hit is the device, not a memory fraction, and memory
 *                  outside this PyTorch allocator (other processes + this process's non-PyTorch
 *                  memory, or total - free - reserved) is more than 50% of the total capacity;
 *  capacity        allocated_by_pytorch + requested >= 90% of the limit: live tensors fill it;
 *  unknown         otherwise, or when the figures are missing (driver errors, bare messages). */
ad_cause ad_message_cause(const ev_oom *o);

/* What this PyTorch allocator held (reserved) by the message: the reserved total, or allocated
 * plus reserved-but-unallocated, or (cudaMallocAsync) the allocated figure. Returns 0 when the
 * message does not tell. */
int ad_message_reserved(const ev_oom *o, uint64_t *out);

#endif
