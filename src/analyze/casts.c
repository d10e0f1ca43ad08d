/* casts.c: autocast's half-precision copies of float32 weights. */
#include "analyze/casts.h"

#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"
#include "base/mem.h"

static uint64_t block_size(uint64_t requested)
{
	return requested < 512 ? 512 : (requested + 511) / 512 * 512;
}

static int category(const md_snapshot *s, const an_stack_info *info, uint32_t stack)
{
	return an_stack_category(info, stack < s->stack_count ? stack : 0, AN_CAT_GRADIENTS);
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static size_t cast_slot(const an_casts *k, uint64_t size)
{
	size_t lo = 0, hi = k->count;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (k->size[mid] < size)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < k->count && k->size[lo] == size ? lo : SIZE_MAX;
}

int an_casts_take(an_casts *k, const md_snapshot *s, const an_stack_info *info, const md_event *e)
{
	uint32_t flags = e->stack < s->stack_count ? info[e->stack].flags : 0;
	if (!(flags & AN_SF_MODULE_CALL) || category(s, info, e->stack) != AN_CAT_ACTIVATIONS)
		return 0;
	size_t slot = cast_slot(k, block_size(e->size));
	if (slot == SIZE_MAX || k->used[slot] >= k->quota[slot])
		return 0;
	k->used[slot]++;
	return 1;
}

void an_casts_next_iteration(an_casts *k)
{
	if (k->used)
		memset(k->used, 0, k->count * sizeof *k->used);
}

void an_casts_free(an_casts *k)
{
	free(k->size);
	free(k->quota);
	free(k->used);
	memset(k, 0, sizeof *k);
}

/* Whether allocation i outlives the next CAST_KEPT_ALLOCS allocations. Each scan stops there,
 * so every event is read by at most that many scans. */
#define CAST_KEPT_ALLOCS 4
static int kept(const md_device *md, size_t i)
{
	size_t allocs = 0;
	for (size_t j = i + 1; j < md->event_count && allocs < CAST_KEPT_ALLOCS; j++) {
		const md_event *e = &md->events[j];
		if (e->action == MD_ACT_ALLOC)
			allocs++;
		else if (e->action == MD_ACT_FREE_REQUESTED && e->addr == md->events[i].addr)
			return 0;
	}
	return 1;
}

int an_casts_copy_all(const md_snapshot *s, const md_device *md, const an_stack_info *info,
                      size_t first, uint64_t bytes)
{
	const md_event *ev = md->events;
	am_map live = {
	    0}; /* parameter address -> the half sizes of its allocations not yet freed */
	uint64_t total = 0, v;
	int ok = 1;
	for (size_t i = 0; i < first && i < md->event_count && ok; i++) {
		if (ev[i].action == MD_ACT_FREE_REQUESTED) {
			am_take(&live, ev[i].addr, &v);
		} else if (ev[i].action == MD_ACT_ALLOC &&
		           category(s, info, ev[i].stack) == AN_CAT_PARAMETERS) {
			if (!am_get(&live, ev[i].addr, &v))
				v = 0;
			ok = !am_put(&live, ev[i].addr, v + block_size(ev[i].size / 2));
		}
	}
	for (size_t i = 0; ok && i < live.cap; i++)
		if (live.slots[i].key)
			total += live.slots[i].val;
	am_free(&live);
	return ok && total && (unsigned __int128)bytes * 5 >= (unsigned __int128)total * 4;
}

/* Of a truncated trace: the parameters live at the snapshot that the trace did not allocate
 * before `first` (made before its window), their half sizes appended to k->size. -1: out of
 * memory. */
static int params_before_window(const md_snapshot *s, const md_device *md,
                                const an_stack_info *info, size_t first, an_casts *k, size_t *n,
                                size_t *cap)
{
	am_map seen = {0};
	int st = 0;
	for (size_t i = 0; i < first && i < md->event_count; i++)
		if (md->events[i].action == MD_ACT_ALLOC &&
		    category(s, info, md->events[i].stack) == AN_CAT_PARAMETERS &&
		    am_put(&seen, md->events[i].addr, 1))
			goto oom;
	for (size_t i = 0; i < s->segment_count; i++) {
		const md_segment *seg = &s->segments[i];
		for (size_t j = 0; seg->device == md->id && j < seg->block_count; j++) {
			const md_block *b = &s->blocks[seg->first_block + j];
			uint64_t v;
			if (b->state != MD_BLOCK_ACTIVE_ALLOCATED || b->stack == MD_NO_STACK ||
			    category(s, info, b->stack) != AN_CAT_PARAMETERS ||
			    am_get(&seen, b->address, &v))
				continue;
			if (MR_GROW(k->size, *cap, *n + 1))
				goto oom;
			uint64_t req = b->requested_known ? b->requested_size : b->size;
			k->size[(*n)++] = block_size(req / 2);
		}
	}
	goto done;
oom:
	st = -1;
done:
	am_free(&seen);
	return st;
}

mr_status an_casts_find(const md_snapshot *s, const md_device *md, const an_stack_info *info,
                        size_t first, size_t end, int truncated, an_casts *k, mr_error *err)
{
	const md_event *ev = md->events;
	size_t n = 0, cap = 0;
	memset(k, 0, sizeof *k);
	for (size_t i = 0; i < first && i < md->event_count; i++) {
		if (ev[i].action != MD_ACT_ALLOC ||
		    category(s, info, ev[i].stack) != AN_CAT_PARAMETERS)
			continue;
		if (MR_GROW(k->size, cap, n + 1))
			goto oom;
		k->size[n++] = block_size(ev[i].size / 2);
	}
	if (truncated && params_before_window(s, md, info, first, k, &n, &cap))
		goto oom;
	if (n > 1)
		qsort(k->size, n, sizeof *k->size, u64_cmp);
	k->quota = mr_alloc_array(n ? n : 1, sizeof *k->quota);
	k->used = mr_alloc_array(n ? n : 1, sizeof *k->used);
	if (!k->quota || !k->used)
		goto oom;
	uint64_t total = 0, seen = 0;
	for (size_t i = 0; i < n; i++) {
		total += k->size[i];
		if (k->count && k->size[k->count - 1] == k->size[i]) {
			k->quota[k->count - 1]++;
			continue;
		}
		k->size[k->count] = k->size[i];
		k->quota[k->count++] = 1;
	}
	for (size_t i = first; i < end && i < md->event_count; i++) {
		if (ev[i].action != MD_ACT_ALLOC || !an_casts_take(k, s, info, &ev[i]))
			continue;
		seen += block_size(ev[i].size);
		k->copied_count++;
		size_t j = i + 1;
		while (j < md->event_count && ev[j].action != MD_ACT_ALLOC)
			j++;
		uint32_t st = ev[i].stack;
		uint32_t flags = st < s->stack_count ? info[st].flags : 0;
		if ((j < md->event_count && ev[j].stack == st) || (flags & AN_SF_COMPILE)) {
			k->adjacent_bytes += block_size(ev[i].size);
			k->adjacent_count++;
			if ((flags & (AN_SF_COMPILE | AN_SF_TORCH_LAYER)) || kept(md, i)) {
				k->kept_bytes += block_size(ev[i].size);
				k->kept_count++;
			}
		}
	}
	k->on = total && seen * 5 >= total * 4;
	k->param_bytes = total;
	k->copied_bytes = seen;
	an_casts_next_iteration(k);
	return MR_OK;
oom:
	an_casts_free(k);
	return mr_oom(err);
}
