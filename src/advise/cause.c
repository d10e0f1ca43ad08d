/* cause.c: why an allocation failed, from an OOM message alone. */
#include "advise/cause.h"

#include <stddef.h>

const char *ad_cause_name(ad_cause c)
{
	switch (c) {
	case AD_CAUSE_FRAGMENTATION: return "fragmentation";
	case AD_CAUSE_CAPACITY: return "capacity";
	case AD_CAUSE_OTHER_PROCESSES: return "other_processes";
	default: return "unknown";
	}
}

int ad_message_reserved(const ev_oom *o, uint64_t *out)
{
	if (o->has_reserved_total) {
		*out = o->reserved_total;
		return 1;
	}
	if (o->has_allocated && o->has_reserved_unallocated) {
		*out = o->allocated_by_pytorch + o->reserved_unallocated;
		return 1;
	}
	if (o->has_allocated && o->era == EV_OOM_ERA_ASYNC_ALLOCATOR) {
		*out = o->allocated_by_pytorch;
		return 1;
	}
	return 0;
}

ad_cause ad_message_cause(const ev_oom *o)
{
	uint64_t limit = ev_oom_limit(o);
	if (!o->has_requested || limit == 0)
		return AD_CAUSE_UNKNOWN;
	uint64_t req = o->requested_bytes, reserved = 0;
	int has_reserved = ad_message_reserved(o, &reserved);

	/* Fragmentation: the cache held at least the request, in pieces, and that cache is at
	 * least 10% of the limit (a few MiB of slack next to a full GPU is not fragmentation). */
	if (o->has_reserved_unallocated && o->reserved_unallocated >= req &&
	    o->reserved_unallocated >= limit / 10)
		return AD_CAUSE_FRAGMENTATION;

	/* Other processes: skipped when the limit hit was a memory fraction (reserved + request
	 * went over `allowed`: PyTorch refused before asking the device). */
	uint64_t total = o->has_total_capacity ? o->total_capacity : limit;
	int fraction_hit =
	    o->has_allowed && o->allowed < total && has_reserved && reserved + req > o->allowed;
	if (!fraction_hit) {
		uint64_t outside = 0;
		int has_outside = 0;
		if (o->has_total_capacity && o->has_device_free && has_reserved) {
			uint64_t used = o->total_capacity > o->device_free
			                    ? o->total_capacity - o->device_free
			                    : 0;
			outside = used > reserved ? used - reserved : 0;
			has_outside = 1;
		} else if (o->other_process_count || o->has_this_process) {
			for (size_t i = 0; i < o->other_process_count; i++)
				outside += o->other_processes[i].bytes;
			if (o->has_this_process && has_reserved &&
			    o->this_process_in_use > reserved)
				outside += o->this_process_in_use - reserved;
			has_outside = 1;
		}
		if (has_outside && outside > total / 2)
			return AD_CAUSE_OTHER_PROCESSES;
	}

	/* Capacity: live tensors plus the request fill (>= 90% of) the limit; or the device itself
	 * ran dry (free < request) while live tensors hold at least half of it (the rest being the
	 * CUDA context and small slack, neither fragmentation nor other processes per the above).
	 */
	if (o->has_allocated && o->allocated_by_pytorch + req >= limit - limit / 10)
		return AD_CAUSE_CAPACITY;
	if (o->has_allocated && !fraction_hit && o->has_device_free && o->device_free < req &&
	    o->allocated_by_pytorch >= limit / 2)
		return AD_CAUSE_CAPACITY;
	return AD_CAUSE_UNKNOWN;
}
