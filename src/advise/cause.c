/* cause.c: why an allocation failed, from an OOM message alone. */
#include "advise/cause.h"

#include <stddef.h>
#include <string.h>

#include "base/units.h"

const char *ad_cause_name(ad_cause c)
{
	switch (c) {
	case AD_CAUSE_FRAGMENTATION: return "fragmentation";
	case AD_CAUSE_CAPACITY: return "capacity";
	case AD_CAUSE_OTHER_PROCESSES: return "other_processes";
	case AD_CAUSE_NON_PYTORCH: return "non_pytorch_memory";
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

int ad_listed_self(const ev_oom *o, uint64_t reserved)
{
	if (o->has_this_process || !o->other_process_count || !o->has_total_capacity ||
	    !o->has_device_free || o->device_free >= o->total_capacity)
		return -1;
	/* amounts are printed with two decimals: a hundredth of the card covers the rounding */
	uint64_t used = o->total_capacity - o->device_free, slack = o->total_capacity / 100;
	uint64_t listed = 0;
	for (size_t i = 0; i < o->other_process_count; i++)
		listed += o->other_processes[i].bytes;
	if (listed + reserved <= used + slack)
		return -1;
	int self = -1;
	for (size_t i = 0; i < o->other_process_count; i++) {
		uint64_t b = o->other_processes[i].bytes;
		if (b + slack >= reserved && (self < 0 || b < o->other_processes[self].bytes))
			self = (int)i;
	}
	return self;
}

void ad_message_holders(const ev_oom *o, ad_holders *h)
{
	memset(h, 0, sizeof *h);
	h->self_listed = -1;
	uint64_t limit = ev_oom_limit(o), req = o->requested_bytes;
	uint64_t total = o->has_total_capacity ? o->total_capacity : limit;
	h->has_reserved = ad_message_reserved(o, &h->reserved);
	h->fraction_hit = o->has_allowed && o->allowed < total && h->has_reserved &&
	                  h->reserved + req > o->allowed;
	h->device_full = o->has_device_free && o->has_requested && o->device_free < req;
	if (h->has_reserved)
		h->self_listed = ad_listed_self(o, h->reserved);
	uint64_t listed = 0, mine = 0;
	for (size_t i = 0; i < o->other_process_count; i++)
		if ((int)i != h->self_listed)
			listed += o->other_processes[i].bytes;
	int has_mine = o->has_this_process || h->self_listed >= 0;
	if (has_mine)
		mine = o->has_this_process ? o->this_process_in_use
		                           : o->other_processes[h->self_listed].bytes;
	if (o->other_process_count) {
		h->has_others = 1;
		h->others = listed;
	} else if (o->has_total_capacity && o->has_device_free && (has_mine || h->has_reserved)) {
		/* no process listed (a container does not see them): what nobody here holds, or
		 * without this process's figure, all that PyTorch does not */
		uint64_t here = o->device_free + (has_mine ? mine : h->reserved);
		h->has_others = 1;
		h->others = o->total_capacity > here ? o->total_capacity - here : 0;
	}
	if (has_mine && h->has_reserved) {
		h->has_non_pytorch = 1;
		h->non_pytorch = mine > h->reserved ? mine - h->reserved : 0;
	}
}

ad_cause ad_outside_cause(const ad_holders *h)
{
	if (h->fraction_hit || !h->device_full || !h->has_reserved)
		return AD_CAUSE_UNKNOWN;
	uint64_t others = h->has_others ? h->others : 0;
	uint64_t np = h->has_non_pytorch ? h->non_pytorch : 0;
	uint64_t outside = others > np ? others : np;
	if (outside < MR_GIB || outside < h->reserved)
		return AD_CAUSE_UNKNOWN;
	return others >= np ? AD_CAUSE_OTHER_PROCESSES : AD_CAUSE_NON_PYTORCH;
}

ad_cause ad_message_cause(const ev_oom *o)
{
	uint64_t limit = ev_oom_limit(o);
	if (!o->has_requested || limit == 0)
		return AD_CAUSE_UNKNOWN;
	uint64_t req = o->requested_bytes;
	ad_holders h;
	ad_message_holders(o, &h);

	/* Fragmentation: the cache held at least the request, in pieces, and that cache is at
	 * least 10% of the limit (a few MiB of slack next to a full GPU is not fragmentation). */
	if (o->has_reserved_unallocated && o->reserved_unallocated >= req &&
	    o->reserved_unallocated >= limit / 10)
		return AD_CAUSE_FRAGMENTATION;
	ad_cause outside = ad_outside_cause(&h);
	if (outside != AD_CAUSE_UNKNOWN)
		return outside;

	/* Capacity: live tensors plus the request fill (>= 90% of) the limit; or the device itself
	 * ran dry (free < request) while live tensors hold at least half of it (the rest being the
	 * CUDA context and small slack, neither fragmentation nor memory outside PyTorch per the
	 * above). */
	if (o->has_allocated && o->allocated_by_pytorch + req >= limit - limit / 10)
		return AD_CAUSE_CAPACITY;
	if (o->has_allocated && !h.fraction_hit && h.device_full &&
	    o->allocated_by_pytorch >= limit / 2)
		return AD_CAUSE_CAPACITY;
	return AD_CAUSE_UNKNOWN;
}

int ad_packed_thin(uint64_t limit, uint64_t allocated, uint64_t requested, uint64_t *left)
{
	uint64_t used = allocated + requested;
	*left = limit > used ? limit - used : 0;
	return *left < limit / 4;
}
