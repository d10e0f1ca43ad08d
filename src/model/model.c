/* model.c: the model's storage: string and stack interning, lifetime. */
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

static uint64_t hash_bytes(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 1099511628211ull;
	}
	return h;
}

void md_init(md_snapshot *s)
{
	memset(s, 0, sizeof *s);
	s->settings.max_split_size = UINT64_MAX;
	md_intern(s, "", 0);         /* id 0 */
	md_intern_stack(s, NULL, 0); /* stack 0 */
}

void md_free(md_snapshot *s)
{
	free(s->strings.data);
	free(s->strings.offsets);
	free(s->strings.lens);
	free(s->strings.hash_slots);
	free(s->frames);
	free(s->stacks);
	free(s->stack_hash);
	free(s->segments);
	free(s->blocks);
	free(s->devices);
	md_events_free(s);
	md_times_free(&s->times);
	free(s->metas);
	free(s->settings.raw);
	free(s->annotations);
	memset(s, 0, sizeof *s);
}

void md_events_free(md_snapshot *s)
{
	mr_release(s->event_store, s->event_store_room);
	s->event_store = NULL;
	s->event_store_count = s->event_store_cap = s->event_store_room = 0;
}

void md_reserve_events(md_snapshot *s, size_t max_events)
{
	md_times *t = &s->times;
	if (s->event_store || t->off || max_events > SIZE_MAX / sizeof *s->event_store)
		return;
	size_t bytes = max_events * sizeof *s->event_store;
	if ((s->event_store = mr_room_new(bytes))) {
		s->event_store_cap = max_events;
		s->event_store_room = bytes;
	}
	bytes = max_events * sizeof *t->off;
	if ((t->off = mr_room_new(bytes))) {
		t->off_cap = max_events;
		t->off_room = bytes;
	}
}

const char *md_str(const md_snapshot *s, uint32_t id)
{
	if (id >= s->strings.count)
		return "";
	return s->strings.data + s->strings.offsets[id];
}

uint32_t md_str_len(const md_snapshot *s, uint32_t id)
{
	return id < s->strings.count ? s->strings.lens[id] : 0;
}

static int strtab_rehash(md_strtab *t, size_t ncap)
{
	uint32_t *slots = mr_alloc_array(ncap, sizeof *slots);
	if (!slots)
		return -1;
	for (size_t id = 0; id < t->count; id++) {
		size_t h = hash_bytes(t->data + t->offsets[id], t->lens[id]) & (ncap - 1);
		while (slots[h])
			h = (h + 1) & (ncap - 1);
		slots[h] = (uint32_t)id + 1;
	}
	free(t->hash_slots);
	t->hash_slots = slots;
	t->hash_cap = ncap;
	return 0;
}

uint32_t md_intern(md_snapshot *s, const char *str, size_t len)
{
	md_strtab *t = &s->strings;
	if (len > UINT32_MAX || t->count >= UINT32_MAX - 1)
		return UINT32_MAX;
	if ((t->count + 1) * 2 > t->hash_cap &&
	    strtab_rehash(t, t->hash_cap ? t->hash_cap * 2 : 256))
		return UINT32_MAX;
	uint64_t hv = hash_bytes(str, len);
	size_t h = hv & (t->hash_cap - 1);
	while (t->hash_slots[h]) {
		uint32_t id = t->hash_slots[h] - 1;
		if (t->lens[id] == len && memcmp(t->data + t->offsets[id], str, len) == 0)
			return id;
		h = (h + 1) & (t->hash_cap - 1);
	}
	if (MR_GROW(t->offsets, t->ocap, t->count + 1))
		return UINT32_MAX;
	uint32_t *lens = mr_realloc_array(t->lens, t->ocap, sizeof *lens);
	if (!lens)
		return UINT32_MAX;
	t->lens = lens;
	if (mr_grow((void **)&t->data, &t->cap, t->len + len + 1, 1))
		return UINT32_MAX;
	if (len)
		memcpy(t->data + t->len, str, len);
	t->data[t->len + len] = '\0';
	uint32_t id = (uint32_t)t->count++;
	t->offsets[id] = t->len;
	t->lens[id] = (uint32_t)len;
	t->len += len + 1;
	t->hash_slots[h] = id + 1;
	return id;
}

static uint64_t hash_frames(const md_frame *f, size_t n)
{
	/* a word at a time: stacks are hashed once per trace entry */
	uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
	for (size_t i = 0; i < n; i++) {
		h ^= ((uint64_t)f[i].name << 32 | f[i].filename) +
		     (uint64_t)(uint32_t)f[i].line * 0x100000001B3ull;
		h *= 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
	}
	return h;
}

static int stacks_rehash(md_snapshot *s, size_t ncap)
{
	uint32_t *slots = mr_alloc_array(ncap, sizeof *slots);
	if (!slots)
		return -1;
	for (size_t id = 0; id < s->stack_count; id++) {
		const md_stack *st = &s->stacks[id];
		size_t h = hash_frames(s->frames + st->first, st->count) & (ncap - 1);
		while (slots[h])
			h = (h + 1) & (ncap - 1);
		slots[h] = (uint32_t)id + 1;
	}
	free(s->stack_hash);
	s->stack_hash = slots;
	s->stack_hash_cap = ncap;
	return 0;
}

uint32_t md_intern_stack(md_snapshot *s, const md_frame *frames, size_t count)
{
	if (count > UINT32_MAX || s->stack_count >= UINT32_MAX - 1 ||
	    s->frame_count > UINT32_MAX - count)
		return UINT32_MAX;
	if ((s->stack_count + 1) * 2 > s->stack_hash_cap &&
	    stacks_rehash(s, s->stack_hash_cap ? s->stack_hash_cap * 2 : 256))
		return UINT32_MAX;
	size_t h = hash_frames(frames, count) & (s->stack_hash_cap - 1);
	while (s->stack_hash[h]) {
		uint32_t id = s->stack_hash[h] - 1;
		const md_stack *st = &s->stacks[id];
		if (st->count == count && (count == 0 || memcmp(s->frames + st->first, frames,
		                                                count * sizeof *frames) == 0))
			return id;
		h = (h + 1) & (s->stack_hash_cap - 1);
	}
	if (MR_GROW(s->frames, s->frame_cap, s->frame_count + count) ||
	    MR_GROW(s->stacks, s->stack_cap, s->stack_count + 1))
		return UINT32_MAX;
	if (count)
		memcpy(s->frames + s->frame_count, frames, count * sizeof *frames);
	uint32_t id = (uint32_t)s->stack_count++;
	s->stacks[id].first = (uint32_t)s->frame_count;
	s->stacks[id].count = (uint32_t)count;
	s->frame_count += count;
	s->stack_hash[h] = id + 1;
	return id;
}

const char *md_action_name(md_action a)
{
	static const char *names[MD_ACT_COUNT] = {
	    "alloc",       "free_requested", "free_completed", "segment_alloc", "segment_free",
	    "segment_map", "segment_unmap",  "snapshot",       "oom",           "unknown"};
	return a < MD_ACT_COUNT ? names[a] : "unknown";
}

const char *md_state_name(md_block_state st)
{
	switch (st) {
	case MD_BLOCK_ACTIVE_ALLOCATED: return "active_allocated";
	case MD_BLOCK_ACTIVE_PENDING_FREE: return "active_pending_free";
	default: return "inactive";
	}
}

const md_device *md_find_device(const md_snapshot *s, int32_t id)
{
	for (size_t i = 0; i < s->device_count; i++)
		if (s->devices[i].id == id)
			return &s->devices[i];
	return NULL;
}

int md_times_push(md_times *t, int64_t time_us)
{
	size_t k = t->count;
	if (MR_GROW_IN(t->off, t->off_cap, t->off_room, k + 1))
		return -1;
	if (k % MD_TIME_CHUNK == 0) {
		if (MR_GROW(t->base, t->base_cap, k / MD_TIME_CHUNK + 1))
			return -1;
		t->base[k / MD_TIME_CHUNK] = time_us == MD_TIME_NONE ? 0 : time_us;
	}
	int64_t base = t->base[k / MD_TIME_CHUNK], off = 0;
	if (time_us != MD_TIME_NONE && time_us >= base &&
	    !__builtin_sub_overflow(time_us, base, &off) && off < (int64_t)MD_TIME_FAR) {
		t->off[k] = (uint32_t)off;
	} else {
		if (MR_GROW(t->far, t->far_cap, t->far_count + 1))
			return -1;
		t->far[t->far_count++] = (md_far_time){k, time_us};
		t->off[k] = MD_TIME_FAR;
	}
	t->count = k + 1;
	return 0;
}

int64_t md_times_far(const md_times *t, size_t event)
{
	size_t lo = 0, hi = t->far_count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->far[mid].event < event)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < t->far_count && t->far[lo].event == event ? t->far[lo].time_us : MD_TIME_NONE;
}

void md_times_free(md_times *t)
{
	mr_release(t->off, t->off_room);
	free(t->base);
	free(t->far);
	*t = (md_times){0};
}
