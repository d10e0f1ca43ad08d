/* snapshot.c: from decoded pickle values to the typed model. */
#include "decode/snapshot.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "base/units.h"
#include "decode/sniff.h"

/* Keys the builder cares about; the decoder shares key strings through the memo, so a small
 * cache keyed by node id avoids comparing bytes for every entry. */
typedef enum {
	K_OTHER,
	K_ACTION,
	K_ADDR,
	K_SIZE,
	K_STREAM,
	K_TIME_US,
	K_FRAMES,
	K_DEVICE_FREE,
	K_USER_METADATA,
	K_COMPILE_CONTEXT,
	K_COUNT
} key_id;

static const char *const key_names[K_COUNT] = {
    "",        "action", "addr",        "size",          "stream",
    "time_us", "frames", "device_free", "user_metadata", "compile_context"};

typedef struct {
	uint32_t node;
	uint8_t value;
	uint8_t used;
} id_cache_entry;

/* Segment, block, frame, history and annotation dicts hold a handful of keys in every PyTorch
 * version. pk_dict_get is a linear scan, and the memo lets one dict be listed many times for two
 * bytes each, so a bigger dict is refused (or skipped) rather than scanned again and again:
 * without this bound a 1 MB pickle costs billions of key comparisons. */
enum { SN_MAX_RECORD_KEYS = 64 };

/* Records the builder leaves in the decoder: a number and its kind in the low two bits. Trace
 * entries are numbered from 1 (record 0 is none); a frames list already turned into a stack
 * holds the stack id, a frame dict its index in frame_cache. Small records keep the decoder's
 * memo entries small (pickle.c). */
enum { SN_REC_EVENT = 0, SN_REC_STACK = 1, SN_REC_FRAME = 2, SN_REC_KIND = 3 };

static uint64_t sn_rec(uint64_t number, unsigned kind)
{
	return number << 2 | kind;
}

/* The 1-based event number of a trace entry's record, 0 for any other record. */
static uint64_t sn_event(uint64_t rec)
{
	return (rec & SN_REC_KIND) == SN_REC_EVENT ? rec >> 2 : 0;
}

typedef struct {
	char text[32];
	size_t len;
	uint32_t id;
	uint32_t node; /* the string node it was read from (never retired: pickle.h) */
	int valid;
} recent_str;

/* A list whose first items were trace entries in order, taken by the list hook instead of
 * being stored in it: entries first .. first + count - 1 of event_store (0-based), then
 * whatever the list stores. A list of 12 M entries then costs no item storage. */
enum { SN_LIST_RUNS = 64 };
typedef struct {
	uint32_t node; /* the list's node id */
	int closed;    /* an append that did not continue the run: the list stores the rest */
	size_t first, count;
} list_run;

/* A string node's interned id. A long string shared through the memo (one 1 MB user_metadata
 * or frame name listed by every trace entry) is hashed and compared once per node, not once per
 * use: that would cost its length times its uses. String nodes are never retired (pickle.h), so
 * an id names one string for the whole run. */
enum { SN_LONG_STR = 64 };
typedef struct {
	uint32_t node_plus1, id;
} node_string;

typedef struct {
	md_snapshot *s;
	pk_decoder *d;
	list_run runs[SN_LIST_RUNS];
	uint8_t run_of[SN_LIST_RUNS]; /* node id % SN_LIST_RUNS -> run index + 1 */
	size_t run_count;
	id_cache_entry keys[512];
	node_string *long_strs; /* open addressing by node id */
	size_t long_count, long_cap;
	id_cache_entry actions[64];
	int saw_history; /* a block carried 2.0's `history` */
	recent_str last_um, last_cc;
	md_frame *frame_cache;
	size_t frame_cache_count, frame_cache_cap;
	md_frame *tmp_frames;
	size_t tmp_cap;
	/* The last frames list interned and its stack: a trace entry's stack is most often the
	 * one before it (an alloc's free, and its free_completed, from the same line). */
	md_frame *prev_frames;
	size_t prev_cap, prev_count;
	uint32_t prev_stack; /* MD_NO_STACK: none yet */
	uint32_t *meta_hash; /* (user_metadata, compile_context) -> meta index + 1 */
	size_t meta_hash_cap;
} builder;

static uint32_t hash32(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (uint32_t)x;
}

/* key_of's cache miss: compares the key with the names and caches the answer. */
static __attribute__((noinline)) key_id key_lookup(builder *b, pk_val k, uint32_t node,
                                                   id_cache_entry *e)
{
	key_id id = K_OTHER;
	for (int i = 1; i < K_COUNT; i++)
		if (pk_str_eq(b->d, k, key_names[i])) {
			id = (key_id)i;
			break;
		}
	/* only strings are cached: their nodes are never retired (pickle.h), so an id seen
	 * here always names the same string */
	if (pk_typeof(b->d, k) != PK_T_STR)
		return id;
	e->node = node;
	e->value = (uint8_t)id;
	e->used = 1;
	return id;
}

/* Nine keys for every trace entry: the hit is inline. */
static inline key_id key_of(builder *b, pk_val k)
{
	uint32_t node = pk_node_id(k);
	if (node == UINT32_MAX)
		return K_OTHER;
	id_cache_entry *e = &b->keys[node & 511];
	if (e->used && e->node == node)
		return (key_id)e->value;
	return key_lookup(b, k, node, e);
}

static const char *const action_names[] = {"alloc",         "free_requested", "free_completed",
                                           "segment_alloc", "segment_free",   "segment_map",
                                           "segment_unmap", "snapshot",       "oom"};

static md_action action_of(builder *b, pk_val v)
{
	uint32_t node = pk_node_id(v);
	id_cache_entry *e = node != UINT32_MAX ? &b->actions[node & 63] : NULL;
	if (e && e->used && e->node == node)
		return (md_action)e->value;
	md_action a = MD_ACT_UNKNOWN;
	for (int i = 0; i < MD_ACT_UNKNOWN; i++)
		if (pk_str_eq(b->d, v, action_names[i])) {
			a = (md_action)i;
			break;
		}
	/* Older docs spelled free as "free"; it meant a completed free. */
	if (a == MD_ACT_UNKNOWN && pk_str_eq(b->d, v, "free"))
		a = MD_ACT_FREE_COMPLETED;
	if (e && pk_typeof(b->d, v) == PK_T_STR) {
		e->node = node;
		e->value = (uint8_t)a;
		e->used = 1;
	}
	return a;
}

static int long_strs_grow(builder *b)
{
	size_t ncap = b->long_cap ? b->long_cap * 2 : 64;
	node_string *t = mr_alloc_array(ncap, sizeof *t);
	if (!t)
		return -1;
	for (size_t i = 0; i < b->long_cap; i++) {
		if (!b->long_strs[i].node_plus1)
			continue;
		size_t p = hash32(b->long_strs[i].node_plus1) & (ncap - 1);
		while (t[p].node_plus1)
			p = (p + 1) & (ncap - 1);
		t[p] = b->long_strs[i];
	}
	free(b->long_strs);
	b->long_strs = t;
	b->long_cap = ncap;
	return 0;
}

/* The id of string v whose bytes are s[0..n); UINT32_MAX when memory runs out. */
static uint32_t intern_bytes(builder *b, pk_val v, const char *s, size_t n)
{
	uint32_t node = pk_node_id(v);
	if (n < SN_LONG_STR || node == UINT32_MAX)
		return md_intern(b->s, s, n);
	if ((b->long_count + 1) * 2 > b->long_cap && long_strs_grow(b))
		return UINT32_MAX;
	size_t p = hash32(node + 1ull) & (b->long_cap - 1);
	while (b->long_strs[p].node_plus1) {
		if (b->long_strs[p].node_plus1 == node + 1ull)
			return b->long_strs[p].id;
		p = (p + 1) & (b->long_cap - 1);
	}
	uint32_t id = md_intern(b->s, s, n);
	if (id != UINT32_MAX) {
		b->long_strs[p].node_plus1 = node + 1;
		b->long_strs[p].id = id;
		b->long_count++;
	}
	return id;
}

static uint32_t intern_val(builder *b, pk_val v)
{
	const char *s;
	size_t n;
	if (!pk_str(b->d, v, &s, &n))
		return 0;
	return intern_bytes(b, v, s, n);
}

/* PyTorch writes compile_context and user_metadata as a new string for every trace entry,
 * almost always the same text as the entry before: compare with that before interning. */
static uint32_t intern_recent(builder *b, recent_str *last, pk_val v)
{
	const char *s;
	size_t n;
	uint32_t node = pk_node_id(v);
	if (last->valid && node == last->node && node != UINT32_MAX)
		return last->id; /* the decoder shares short strings by content */
	if (!pk_str(b->d, v, &s, &n))
		return 0;
	if (last->valid && n == last->len && memcmp(s, last->text, n) == 0)
		return last->id;
	uint32_t id = intern_bytes(b, v, s, n);
	if (id != UINT32_MAX && n <= sizeof last->text) {
		memcpy(last->text, s, n);
		last->len = n;
		last->id = id;
		last->node = node;
		last->valid = 1;
	}
	return id;
}

/* A frame dict {name, filename, line}, decoded once per shared dict. Returns 0, or -1 on OOM. */
static int frame_of(builder *b, pk_val dict, md_frame *out)
{
	pk_val name = 0, file = 0, line = 0;
	md_frame f = {0, 0, 0};
	int64_t ln = 0;
	if (pk_len(b->d, dict) <= SN_MAX_RECORD_KEYS) {
		if (pk_dict_get(b->d, dict, "name", &name))
			f.name = intern_val(b, name);
		if (pk_dict_get(b->d, dict, "filename", &file))
			f.filename = intern_val(b, file);
		if (pk_dict_get(b->d, dict, "line", &line) && pk_int(b->d, line, &ln))
			f.line = ln > INT32_MAX   ? INT32_MAX
			         : ln < INT32_MIN ? INT32_MIN
			                          : (int32_t)ln;
	}
	if (f.name == UINT32_MAX || f.filename == UINT32_MAX ||
	    MR_GROW(b->frame_cache, b->frame_cache_cap, b->frame_cache_count + 1))
		return -1;
	/* Frame dicts are shared by thousands of entries: read each once, then it is a record. */
	pk_convert(b->d, dict, sn_rec(b->frame_cache_count, SN_REC_FRAME));
	b->frame_cache[b->frame_cache_count++] = f;
	*out = f;
	return 0;
}

/* Interns a frames list (list of {name, filename, line} dicts); cached per shared list. */
static int stack_of(builder *b, pk_val list, uint32_t *out)
{
	*out = MD_NO_STACK;
	pk_type t = pk_typeof(b->d, list);
	if (t == PK_T_RECORD) {
		/* a frames list already read, shared through the memo */
		uint64_t rec = pk_record(b->d, list);
		if ((rec & SN_REC_KIND) == SN_REC_STACK && (rec >> 2) < b->s->stack_count)
			*out = (uint32_t)(rec >> 2);
		return 0;
	}
	if (t != PK_T_LIST && t != PK_T_TUPLE)
		return 0;
	size_t n = pk_len(b->d, list);
	const pk_val *items = pk_items(b->d, list);
	if (MR_GROW(b->tmp_frames, b->tmp_cap, n ? n : 1))
		return -1;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		md_frame f = {0, 0, 0};
		/* a frame dict already read (the builder's records are never 0) */
		uint64_t rec = pk_record(b->d, items[i]);
		pk_type ft = rec ? PK_T_RECORD : pk_typeof(b->d, items[i]);
		if (ft == PK_T_RECORD) {
			uint64_t idx = rec >> 2;
			if ((rec & SN_REC_KIND) != SN_REC_FRAME || idx >= b->frame_cache_count)
				continue;
			f = b->frame_cache[idx];
		} else if (ft == PK_T_DICT) {
			if (frame_of(b, items[i], &f))
				return -1;
		} else if (ft == PK_T_STR) {
			f.name = intern_val(b, items[i]); /* legacy C++ frames are plain strings */
			if (f.name == UINT32_MAX)
				return -1;
		} else {
			continue;
		}
		b->tmp_frames[k++] = f;
	}
	uint32_t id = b->prev_stack;
	if (id == MD_NO_STACK || k != b->prev_count ||
	    (k && memcmp(b->tmp_frames, b->prev_frames, k * sizeof *b->tmp_frames))) {
		if ((id = md_intern_stack(b->s, b->tmp_frames, k)) == UINT32_MAX)
			return -1;
		/* the buffers trade places: this list is the one to compare the next with */
		md_frame *f = b->prev_frames;
		size_t cap = b->prev_cap;
		b->prev_frames = b->tmp_frames;
		b->prev_cap = b->tmp_cap;
		b->tmp_frames = f;
		b->tmp_cap = cap;
		b->prev_count = k;
		b->prev_stack = id;
	}
	/* Most trace entries carry a list of their own: give its storage back now. */
	pk_convert(b->d, list, sn_rec(id, SN_REC_STACK));
	*out = id;
	return 0;
}

static uint8_t stream_index(md_snapshot *s, uint64_t raw)
{
	for (size_t i = 0; i < s->stream_count; i++)
		if (s->streams[i] == raw)
			return (uint8_t)i;
	if (s->stream_count < 255) {
		s->streams[s->stream_count] = raw;
		return (uint8_t)s->stream_count++;
	}
	return 255; /* more than 255 streams: the rest share one bucket */
}

static int meta_index(builder *b, uint32_t um, uint32_t cc, uint16_t *out)
{
	md_snapshot *s = b->s;
	if (um == 0 && cc == 0 && s->meta_count > 0 && s->metas[0].user_metadata == 0 &&
	    s->metas[0].compile_context == 0) {
		*out = 0;
		return 0;
	}
	if ((s->meta_count + 1) * 2 > b->meta_hash_cap) {
		size_t ncap = b->meta_hash_cap ? b->meta_hash_cap * 2 : 64;
		uint32_t *h = mr_alloc_array(ncap, sizeof *h);
		if (!h)
			return -1;
		for (size_t i = 0; i < s->meta_count; i++) {
			size_t p = hash32(((uint64_t)s->metas[i].user_metadata << 32) |
			                  s->metas[i].compile_context) &
			           (ncap - 1);
			while (h[p])
				p = (p + 1) & (ncap - 1);
			h[p] = (uint32_t)i + 1;
		}
		free(b->meta_hash);
		b->meta_hash = h;
		b->meta_hash_cap = ncap;
	}
	size_t p = hash32(((uint64_t)um << 32) | cc) & (b->meta_hash_cap - 1);
	while (b->meta_hash[p]) {
		const md_meta *m = &s->metas[b->meta_hash[p] - 1];
		if (m->user_metadata == um && m->compile_context == cc) {
			*out = (uint16_t)(b->meta_hash[p] - 1);
			return 0;
		}
		p = (p + 1) & (b->meta_hash_cap - 1);
	}
	if (s->meta_count >= 65535) {
		/* Metadata beyond 65535 distinct values is not kept: those entries read as the
		 * first value seen, a valid index like any other. */
		*out = 0;
		return 0;
	}
	if (MR_GROW(s->metas, s->meta_cap, s->meta_count + 1))
		return -1;
	s->metas[s->meta_count].user_metadata = um;
	s->metas[s->meta_count].compile_context = cc;
	b->meta_hash[p] = (uint32_t)s->meta_count + 1;
	*out = (uint16_t)s->meta_count++;
	return 0;
}

static int get_u64(const pk_decoder *d, pk_val v, uint64_t *out)
{
	int64_t i;
	if (pk_inline_int(v, &i) && i >= 0) { /* an address or a size: no call */
		*out = (uint64_t)i;
		return 1;
	}
	if (pk_uint(d, v, out))
		return 1;
	if (pk_int(d, v, &i)) { /* negative: e.g. max_split_size -1 */
		*out = (uint64_t)i;
		return 1;
	}
	return 0;
}

/* The dict hook: trace entries become compact md_event records as soon as they are decoded. */
static int event_hook(void *ctx, pk_decoder *d, const pk_val *items, size_t n, uint64_t *record,
                      mr_error *err)
{
	builder *b = ctx;
	md_snapshot *s = b->s;
	int is_event = 0;
	for (size_t i = 0; i + 1 < n; i += 2)
		if (key_of(b, items[i]) == K_ACTION && pk_typeof(d, items[i + 1]) == PK_T_STR) {
			is_event = 1;
			break;
		}
	if (!is_event)
		return 0;
	/* Each key's handler jumps to the next key's (labels as values, as in pickle.c's fast
	 * loop): entries list their keys in the same order, which the jumps then predict. */
	static void *const on_key[K_COUNT] = {
	    [K_OTHER] = &&next,         [K_ACTION] = &&action,
	    [K_ADDR] = &&addr,          [K_SIZE] = &&size,
	    [K_STREAM] = &&stream_k,    [K_TIME_US] = &&time,
	    [K_FRAMES] = &&frames,      [K_DEVICE_FREE] = &&addr,
	    [K_USER_METADATA] = &&user, [K_COMPILE_CONTEXT] = &&compile};
	md_event e = {0, 0, MD_NO_STACK, 0, 0, MD_ACT_UNKNOWN};
	int64_t time_us = MD_TIME_NONE, t;
	uint32_t um = 0, cc = 0;
	uint64_t stream = 0;
	size_t i = 0;
	pk_val v;
#define NEXT_KEY                                                                                   \
	do {                                                                                       \
		if (i + 1 >= n)                                                                    \
			goto keys_done;                                                            \
		v = items[i + 1];                                                                  \
		i += 2;                                                                            \
		goto *on_key[key_of(b, items[i - 2])];                                             \
	} while (0)
	NEXT_KEY;
action:
	e.action = (uint8_t)action_of(b, v);
	NEXT_KEY;
addr:
	get_u64(d, v, &e.addr);
	NEXT_KEY;
size:
	get_u64(d, v, &e.size);
	NEXT_KEY;
stream_k:
	get_u64(d, v, &stream);
	NEXT_KEY;
time:
	if (pk_inline_int(v, &t) || pk_int(d, v, &t))
		time_us = t == MD_TIME_NONE ? t + 1 : t;
	NEXT_KEY;
frames:
	if (stack_of(b, v, &e.stack))
		return mr_oom(err), -1;
	NEXT_KEY;
user:
	um = intern_recent(b, &b->last_um, v);
	NEXT_KEY;
compile:
	cc = intern_recent(b, &b->last_cc, v);
next:
	NEXT_KEY;
#undef NEXT_KEY
keys_done:
	if (e.action == MD_ACT_UNKNOWN)
		s->unknown_actions++;
	e.stream = stream_index(s, stream);
	if (um == UINT32_MAX || cc == UINT32_MAX || meta_index(b, um, cc, &e.meta) ||
	    MR_GROW_IN(s->event_store, s->event_store_cap, s->event_store_room,
	               s->event_store_count + 1) ||
	    md_times_push(&s->times, time_us))
		return mr_oom(err), -1;
	s->event_store[s->event_store_count++] = e;
	*record = sn_rec(s->event_store_count, SN_REC_EVENT); /* 1-based */
	return 1;
}

static list_run *run_find(builder *b, uint32_t node)
{
	uint8_t i = b->run_of[node % SN_LIST_RUNS];
	return i && b->runs[i - 1].node == node ? &b->runs[i - 1] : NULL;
}

/* The list hook: appends of trace entries (records the dict hook made) that continue the
 * list's run are counted, not stored. A record never changes once made, so reading it now is
 * reading it at the end. */
static int list_hook(void *ctx, const pk_decoder *d, pk_val list, const pk_val *items, size_t n)
{
	builder *b = ctx;
	uint32_t node = pk_node_id(list);
	if (node == UINT32_MAX)
		return 0;
	list_run *r = run_find(b, node);
	if (r && r->closed)
		return 0;
	size_t next = r ? r->first + r->count : SIZE_MAX;
	for (size_t k = 0; k < n; k++) {
		uint64_t rec = sn_event(pk_record(d, items[k]));
		if (!rec || (next != SIZE_MAX && rec - 1 != next + k)) {
			if (r)
				r->closed = 1;
			return 0;
		}
		if (next == SIZE_MAX)
			next = (size_t)rec - 1 - k;
	}
	if (!r) {
		/* a new run: the list must hold nothing yet, and there must be room */
		if (pk_len(d, list) || b->run_count == SN_LIST_RUNS ||
		    b->run_of[node % SN_LIST_RUNS])
			return 0;
		r = &b->runs[b->run_count++];
		*r = (list_run){node, 0, next, 0};
		b->run_of[node % SN_LIST_RUNS] = (uint8_t)b->run_count;
	}
	r->count += n;
	return 1;
}

/* ---- segments and blocks ---- */

static int dict_u64(const pk_decoder *d, pk_val dict, const char *key, uint64_t *out)
{
	pk_val v;
	return pk_dict_get(d, dict, key, &v) && get_u64(d, v, out);
}

static mr_status add_block(builder *b, md_segment *seg, pk_val blk, uint64_t *cursor, size_t *cap,
                           mr_error *err)
{
	md_snapshot *s = b->s;
	const pk_decoder *d = b->d;
	md_block out = {0};
	pk_val v;
	if (pk_typeof(d, blk) != PK_T_DICT)
		return mr_fail(err, MR_EINPUT,
		               "not a PyTorch memory snapshot: a segment's block is not a dict");
	if (pk_len(d, blk) > SN_MAX_RECORD_KEYS)
		return mr_fail(
		    err, MR_EINPUT,
		    "not a PyTorch memory snapshot: a block dict has %zu keys (limit %d)",
		    pk_len(d, blk), SN_MAX_RECORD_KEYS);
	if (!dict_u64(d, blk, "size", &out.size))
		return mr_fail(err, MR_EINPUT,
		               "not a PyTorch memory snapshot: a block has no integer 'size'");
	if (!dict_u64(d, blk, "address", &out.address))
		out.address = *cursor;
	*cursor = out.address + out.size;
	out.state = MD_BLOCK_INACTIVE;
	if (pk_dict_get(d, blk, "state", &v)) {
		if (pk_str_eq(d, v, "active_allocated"))
			out.state = MD_BLOCK_ACTIVE_ALLOCATED;
		else if (pk_str_eq(d, v, "active_pending_free") ||
		         pk_str_eq(d, v, "active_awaiting_free"))
			out.state = MD_BLOCK_ACTIVE_PENDING_FREE;
		else if (!pk_str_eq(d, v, "inactive"))
			s->unknown_states++;
	}
	out.requested_known = (uint8_t)dict_u64(d, blk, "requested_size", &out.requested_size);
	if (pk_dict_get(d, blk, "frames", &v) && stack_of(b, v, &out.stack))
		return mr_oom(err);
	/* 2.0: `history` holds {addr, real_size, frames}, newest first. */
	if (pk_dict_get(d, blk, "history", &v))
		b->saw_history = 1;
	if (pk_dict_get(d, blk, "history", &v) && pk_len(d, v) > 0 &&
	    pk_len(d, pk_items(d, v)[0]) <= SN_MAX_RECORD_KEYS) {
		pk_val h0 = pk_items(d, v)[0], f;
		if (!out.requested_known && dict_u64(d, h0, "real_size", &out.requested_size))
			out.requested_known = 1;
		if (out.stack == MD_NO_STACK && pk_dict_get(d, h0, "frames", &f) &&
		    stack_of(b, f, &out.stack))
			return mr_oom(err);
	}
	if (!out.requested_known && out.state != MD_BLOCK_INACTIVE)
		out.requested_size = out.size;
	if (out.stack != MD_NO_STACK)
		s->has_history = 1;
	if (MR_GROW(s->blocks, *cap, s->block_count + 1))
		return mr_oom(err);
	s->blocks[s->block_count++] = out;
	seg->block_count++;
	if (out.state == MD_BLOCK_ACTIVE_ALLOCATED)
		seg->allocated_size += out.size;
	if (out.state != MD_BLOCK_INACTIVE) {
		seg->active_size += out.size;
		seg->requested_size += out.requested_size;
	}
	return MR_OK;
}

static mr_status add_segment(builder *b, pk_val sv, size_t *seg_cap, size_t *blk_cap, mr_error *err)
{
	md_snapshot *s = b->s;
	const pk_decoder *d = b->d;
	md_segment seg;
	memset(&seg, 0, sizeof seg);
	pk_val v;
	if (pk_typeof(d, sv) != PK_T_DICT)
		return mr_fail(err, MR_EINPUT,
		               "not a PyTorch memory snapshot: a segment is not a dict");
	if (pk_len(d, sv) > SN_MAX_RECORD_KEYS)
		return mr_fail(
		    err, MR_EINPUT,
		    "not a PyTorch memory snapshot: a segment dict has %zu keys (limit %d)",
		    pk_len(d, sv), SN_MAX_RECORD_KEYS);
	if (!dict_u64(d, sv, "total_size", &seg.total_size))
		return mr_fail(err, MR_EINPUT,
		               "not a PyTorch memory snapshot: a segment has no 'total_size'");
	uint64_t dev = 0;
	dict_u64(d, sv, "device", &dev);
	if (dev > 1024)
		return mr_fail(err, MR_EINPUT, "a segment names device %llu",
		               (unsigned long long)dev);
	seg.device = (int32_t)dev;
	dict_u64(d, sv, "address", &seg.address);
	dict_u64(d, sv, "stream", &seg.stream);
	seg.pool = MD_POOL_LARGE;
	if (pk_dict_get(d, sv, "segment_type", &v))
		seg.pool = pk_str_eq(d, v, "small") ? MD_POOL_SMALL : MD_POOL_LARGE;
	else if (seg.total_size == 2 * MR_MIB)
		seg.pool = MD_POOL_SMALL; /* 1.x: small-pool segments are exactly 2 MiB */
	if (pk_dict_get(d, sv, "segment_pool_id", &v) && pk_len(d, v) == 2) {
		get_u64(d, pk_items(d, v)[0], &seg.pool_id[0]);
		get_u64(d, pk_items(d, v)[1], &seg.pool_id[1]);
	}
	int flag = 0;
	if (pk_dict_get(d, sv, "is_expandable", &v) && pk_bool(d, v, &flag))
		seg.is_expandable = (uint8_t)flag;
	if (pk_dict_get(d, sv, "frames", &v) && stack_of(b, v, &seg.stack))
		return mr_oom(err);
	seg.first_block = (uint32_t)s->block_count;
	if (!pk_dict_get(d, sv, "blocks", &v) || pk_typeof(d, v) != PK_T_LIST)
		return mr_fail(err, MR_EINPUT,
		               "not a PyTorch memory snapshot: a segment has no 'blocks' list");
	size_t nb = pk_len(d, v);
	const pk_val *blocks = pk_items(d, v);
	/* Every real block is a dict of its own. Through the memo one segment (or one block list)
	 * can be listed thousands of times for two bytes each; without this bound a 60 KB pickle
	 * asks for 30 million blocks. */
	if (nb > pk_node_count(d) || s->block_count > pk_node_count(d) - nb)
		return mr_fail(err, MR_EINPUT,
		               "not a PyTorch memory snapshot: segments list more blocks than the "
		               "pickle holds objects (blocks repeated through the memo)");
	uint64_t cursor = seg.address, sum = 0;
	for (size_t i = 0; i < nb; i++) {
		mr_status st = add_block(b, &seg, blocks[i], &cursor, blk_cap, err);
		if (st)
			return st;
		sum += s->blocks[s->block_count - 1].size;
	}
	int tiles = sum == seg.total_size;
	for (size_t i = 0; tiles && i < nb; i++) {
		const md_block *blk = &s->blocks[seg.first_block + i];
		uint64_t expect = i ? blk[-1].address + blk[-1].size : seg.address;
		tiles = blk->address == expect;
	}
	if (!tiles)
		s->inconsistent_segments++;
	if (seg.stack != MD_NO_STACK)
		s->has_history = 1;
	if (MR_GROW(s->segments, *seg_cap, s->segment_count + 1))
		return mr_oom(err);
	s->segments[s->segment_count++] = seg;
	return MR_OK;
}

static int seg_cmp(const void *a, const void *b)
{
	const md_segment *x = a, *y = b;
	if (x->device != y->device)
		return x->device < y->device ? -1 : 1;
	if (x->address != y->address)
		return x->address < y->address ? -1 : 1;
	return 0;
}

/* Sorting segments must carry their blocks along: rebuild the block array in segment order. */
static mr_status sort_segments(md_snapshot *s, mr_error *err)
{
	int sorted = 1;
	for (size_t i = 1; i < s->segment_count && sorted; i++)
		sorted = seg_cmp(&s->segments[i - 1], &s->segments[i]) <= 0;
	if (sorted)
		return MR_OK;
	qsort(s->segments, s->segment_count, sizeof *s->segments, seg_cmp);
	md_block *nb = mr_alloc_array(s->block_count, sizeof *nb);
	if (!nb)
		return mr_oom(err);
	size_t k = 0;
	for (size_t i = 0; i < s->segment_count; i++) {
		md_segment *seg = &s->segments[i];
		if (seg->block_count) /* s->blocks is NULL when no segment has a block */
			memcpy(nb + k, s->blocks + seg->first_block, seg->block_count * sizeof *nb);
		seg->first_block = (uint32_t)k;
		k += seg->block_count;
	}
	free(s->blocks);
	s->blocks = nb;
	return MR_OK;
}

/* ---- devices and traces ---- */

static mr_status ensure_device(md_snapshot *s, int32_t id, size_t *cap, md_device **out,
                               mr_error *err)
{
	for (size_t i = 0; i < s->device_count; i++)
		if (s->devices[i].id == id) {
			*out = &s->devices[i];
			return MR_OK;
		}
	if (MR_GROW(s->devices, *cap, s->device_count + 1))
		return mr_oom(err);
	md_device *dv = &s->devices[s->device_count++];
	memset(dv, 0, sizeof *dv);
	dv->id = id;
	*out = dv;
	return MR_OK;
}

static int dev_cmp(const void *a, const void *b)
{
	const md_device *x = a, *y = b;
	return (x->id > y->id) - (x->id < y->id);
}

typedef struct {
	size_t first, count; /* event_store range, or first = SIZE_MAX when not contiguous */
} trace_range;

/* The 1-based event number of entry i of a device's trace list (0: not a trace entry): its run
 * first (list_hook), then the items it stores. */
static uint64_t trace_rec(const builder *b, const list_run *r, const pk_val *items, size_t i)
{
	size_t pre = r ? r->count : 0;
	return i < pre ? r->first + i + 1 : sn_event(pk_record(b->d, items[i - pre]));
}

static size_t trace_len(const builder *b, const list_run *r, pk_val list)
{
	return (r ? r->count : 0) + pk_len(b->d, list);
}

static mr_status load_traces(builder *b, pk_val traces, size_t *dev_cap, mr_error *err)
{
	md_snapshot *s = b->s;
	const pk_decoder *d = b->d;
	size_t nd = pk_len(d, traces);
	const pk_val *lists = pk_items(d, traces);
	if (nd > 1024)
		return mr_fail(err, MR_EINPUT, "device_traces lists %zu devices", nd);
	trace_range *ranges = mr_alloc_array(nd, sizeof *ranges);
	md_event *store = NULL;
	md_times times = {0};
	mr_status st = MR_OK;
	if (!ranges)
		return mr_oom(err);
	int contiguous = 1;
	size_t total = 0;
	for (size_t dev = 0; dev < nd; dev++) {
		const list_run *run = run_find(b, pk_node_id(lists[dev]));
		size_t n = trace_len(b, run, lists[dev]);
		const pk_val *ev = pk_items(d, lists[dev]);
		size_t first = SIZE_MAX, count = 0;
		for (size_t i = 0; i < n; i++) {
			uint64_t rec = trace_rec(b, run, ev, i);
			if (!rec) {
				s->dropped_events++; /* not a trace entry we could read */
				continue;
			}
			if (count == 0)
				first = (size_t)rec - 1;
			else if ((size_t)rec - 1 != first + count)
				contiguous = 0;
			count++;
		}
		ranges[dev].first = first;
		ranges[dev].count = count;
		total += count;
		/* Each trace entry PyTorch writes is a dict of its own: an entry listed twice
		 * (through the memo, two bytes each) would let a small pickle ask for billions of
		 * events. */
		if (total > s->event_store_count) {
			st = mr_fail(
			    err, MR_EINPUT,
			    "not a PyTorch memory snapshot: device_traces lists more entries "
			    "than the pickle holds trace entries (%zu; entries repeated "
			    "through the memo)",
			    s->event_store_count);
			goto done;
		}
	}
	/* Rare: entries shared between lists or out of order. Copy them into a fresh store. */
	if (!contiguous || s->dropped_events) {
		store = mr_alloc_array(total, sizeof *store);
		if (!store) {
			st = mr_oom(err);
			goto done;
		}
		size_t k = 0;
		md_device old = {.times = s->times};
		for (size_t dev = 0; dev < nd; dev++) {
			const list_run *run = run_find(b, pk_node_id(lists[dev]));
			size_t n = trace_len(b, run, lists[dev]);
			const pk_val *ev = pk_items(d, lists[dev]);
			ranges[dev].first = k;
			for (size_t i = 0; i < n; i++) {
				uint64_t rec = trace_rec(b, run, ev, i);
				if (!rec)
					continue;
				store[k++] = s->event_store[rec - 1];
				if (md_times_push(&times, md_event_time(&old, rec - 1))) {
					st = mr_oom(err);
					goto done;
				}
			}
		}
		md_events_free(s);
		s->event_store = store;
		s->event_store_count = s->event_store_cap = total;
		store = NULL;
		md_times_free(&s->times);
		s->times = times;
		times = (md_times){0};
	}
	for (size_t dev = 0; dev < nd; dev++) {
		md_device *dv = NULL;
		if ((st = ensure_device(s, (int32_t)dev, dev_cap, &dv, err)))
			goto done;
		dv->has_trace_list = 1;
		dv->event_count = ranges[dev].count;
		dv->events = NULL; /* pointers are set once the store stops moving */
		if (ranges[dev].count)
			dv->events = (md_event *)(uintptr_t)(ranges[dev].first + 1);
		if (ranges[dev].count)
			s->has_history = 1;
	}
done:
	free(ranges);
	free(store);
	md_times_free(&times);
	return st;
}

/* ---- settings and annotations ---- */

static void value_text(const pk_decoder *d, pk_val v, char *buf, size_t n)
{
	const char *s = "";
	size_t len = 0;
	int64_t i = 0;
	uint64_t u = 0;
	double f = 0;
	buf[0] = '\0';
	switch (pk_typeof(d, v)) {
	case PK_T_STR:
		pk_str(d, v, &s, &len);
		snprintf(buf, n, "%.*s", (int)MR_MIN(len, n - 1), s);
		break;
	case PK_T_BOOL:
		pk_int(d, v, &i);
		snprintf(buf, n, "%s", i ? "True" : "False");
		break;
	case PK_T_UINT64:
		pk_uint(d, v, &u);
		snprintf(buf, n, "%llu", (unsigned long long)u);
		break;
	case PK_T_INT:
	case PK_T_BIGINT:
		pk_int(d, v, &i);
		snprintf(buf, n, "%lld", (long long)i);
		break;
	case PK_T_FLOAT:
		pk_float(d, v, &f);
		snprintf(buf, n, "%g", f);
		break;
	case PK_T_NONE: snprintf(buf, n, "None"); break;
	case PK_T_DICT: {
		size_t cnt = pk_len(d, v), off = 0;
		const pk_val *it = pk_items(d, v);
		off += (size_t)snprintf(buf + off, n - off, "{");
		for (size_t k = 0; k < cnt && off + 1 < n; k++) {
			char kb[64], vb[64];
			/* One level only: a key or value that is itself a container is "..." (a
			 * dict can even be its own key through the memo: recursing would never
			 * end). */
			if (pk_typeof(d, it[2 * k]) == PK_T_DICT ||
			    pk_typeof(d, it[2 * k]) == PK_T_LIST)
				snprintf(kb, sizeof kb, "...");
			else
				value_text(d, it[2 * k], kb, sizeof kb);
			if (pk_typeof(d, it[2 * k + 1]) == PK_T_DICT ||
			    pk_typeof(d, it[2 * k + 1]) == PK_T_LIST)
				snprintf(vb, sizeof vb, "...");
			else
				value_text(d, it[2 * k + 1], vb, sizeof vb);
			int w = snprintf(buf + off, n - off, "%s%s: %s", k ? ", " : "", kb, vb);
			if (w < 0 || (size_t)w >= n - off) {
				off = n - 1;
				break;
			}
			off += (size_t)w;
		}
		if (off + 1 < n)
			snprintf(buf + off, n - off, "}");
		break;
	}
	default: snprintf(buf, n, "...");
	}
}

static mr_status load_settings(builder *b, pk_val dict, mr_error *err)
{
	md_snapshot *s = b->s;
	const pk_decoder *d = b->d;
	md_settings *cfg = &s->settings;
	size_t n = pk_len(d, dict);
	const pk_val *it = pk_items(d, dict);
	int roundup_seen = 0; /* a key repeated n times must not cost n times its dict */
	cfg->present = 1;
	cfg->raw = mr_alloc_array(n, sizeof *cfg->raw);
	if (!cfg->raw)
		return mr_oom(err);
	for (size_t i = 0; i < n; i++) {
		pk_val k = it[2 * i], v = it[2 * i + 1];
		char text[1024];
		const char *ks;
		size_t kl;
		if (!pk_str(d, k, &ks, &kl))
			continue;
		value_text(d, v, text, sizeof text);
		uint32_t kid = md_intern(s, ks, kl), vid = md_intern(s, text, strlen(text));
		if (kid == UINT32_MAX || vid == UINT32_MAX)
			return mr_oom(err);
		cfg->raw[cfg->raw_count].key = kid;
		cfg->raw[cfg->raw_count].value = vid;
		cfg->raw_count++;
		uint64_t u;
		double f;
		int flag;
		if (pk_str_eq(d, k, "PYTORCH_CUDA_ALLOC_CONF")) {
			cfg->conf = intern_val(b, v);
		} else if (pk_str_eq(d, k, "max_split_size") && get_u64(d, v, &u)) {
			/* -1 (SIZE_MAX cast to int64) and 2^64-1 both mean unlimited */
			cfg->max_split_size = u;
		} else if (pk_str_eq(d, k, "garbage_collection_threshold") && pk_float(d, v, &f)) {
			cfg->gc_threshold = isfinite(f) ? f : 0;
		} else if (pk_str_eq(d, k, "expandable_segments") && pk_bool(d, v, &flag)) {
			cfg->expandable_segments = flag;
		} else if (!roundup_seen && pk_str_eq(d, k, "roundup_power2_divisions") &&
		           pk_typeof(d, v) == PK_T_DICT) {
			roundup_seen = 1;
			size_t m = pk_len(d, v);
			const pk_val *ri = pk_items(d, v);
			for (size_t j = 0; j < m; j++) {
				const char *rk;
				size_t rl;
				uint64_t div;
				if (!pk_str(d, ri[2 * j], &rk, &rl) ||
				    !get_u64(d, ri[2 * j + 1], &div))
					continue;
				char kbuf[16];
				snprintf(kbuf, sizeof kbuf, "%.*s", (int)MR_MIN(rl, 15), rk);
				unsigned long mib = strtoul(kbuf, NULL, 10);
				for (int e = 0; e < 16; e++)
					if (mib == (1ul << e))
						cfg->roundup_divisions[e] =
						    div > 1u << 20 ? 1u << 20 : (uint32_t)div;
			}
		}
	}
	return MR_OK;
}

static mr_status load_annotations(builder *b, pk_val list, mr_error *err)
{
	md_snapshot *s = b->s;
	const pk_decoder *d = b->d;
	size_t n = pk_len(d, list);
	const pk_val *it = pk_items(d, list);
	s->annotations = mr_alloc_array(n, sizeof *s->annotations);
	if (!s->annotations)
		return mr_oom(err);
	for (size_t i = 0; i < n; i++) {
		pk_val v;
		md_annotation a = {0, MD_TIME_NONE, 0, 0};
		if (pk_typeof(d, it[i]) != PK_T_DICT || pk_len(d, it[i]) > SN_MAX_RECORD_KEYS)
			continue;
		int64_t x;
		if (pk_dict_get(d, it[i], "device", &v) && pk_int(d, v, &x))
			a.device = (int32_t)MR_MAX(MR_MIN(x, 1024), -1);
		if (pk_dict_get(d, it[i], "time_us", &v) && pk_int(d, v, &x))
			a.time_us = x;
		if (pk_dict_get(d, it[i], "name", &v))
			a.name = intern_val(b, v);
		if (pk_dict_get(d, it[i], "stage", &v))
			a.is_end = (uint8_t)pk_str_eq(d, v, "END");
		if (a.name == UINT32_MAX)
			return mr_oom(err);
		s->annotations[s->annotation_count++] = a;
	}
	return MR_OK;
}

static const char *type_word(pk_type t)
{
	switch (t) {
	case PK_T_NONE: return "None";
	case PK_T_BOOL: return "a bool";
	case PK_T_INT:
	case PK_T_UINT64:
	case PK_T_BIGINT: return "an int";
	case PK_T_FLOAT: return "a float";
	case PK_T_STR: return "a str";
	case PK_T_BYTES: return "bytes";
	case PK_T_LIST: return "a list";
	case PK_T_TUPLE: return "a tuple";
	case PK_T_DICT: return "a dict";
	case PK_T_SET: return "a set";
	default: return "a trace entry";
	}
}

static mr_status build(builder *b, pk_val top, mr_error *err)
{
	md_snapshot *s = b->s;
	const pk_decoder *d = b->d;
	pk_val segs = 0, v;
	size_t seg_cap = 0, blk_cap = 0, dev_cap = 0;
	mr_status st;
	pk_type tt = pk_typeof(d, top);
	if (tt == PK_T_LIST) {
		segs = top;
		s->era = MD_ERA_SEGMENT_LIST;
	} else if (tt == PK_T_DICT) {
		if (!pk_dict_get(d, top, "segments", &segs)) {
			char keys[160] = "";
			size_t n = pk_len(d, top), off = 0;
			const pk_val *it = pk_items(d, top);
			for (size_t i = 0; i < n && i < 6 && off < sizeof keys - 40; i++) {
				const char *ks;
				size_t kl;
				if (pk_str(d, it[2 * i], &ks, &kl))
					off += (size_t)snprintf(keys + off, sizeof keys - off,
					                        "%s'%.*s'", off ? ", " : "",
					                        (int)MR_MIN(kl, 24), ks);
			}
			/* The keys are the stranger's bytes: the message stays one printable line.
			 */
			for (char *c = keys; *c; c++)
				if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
					*c = '?';
			return mr_fail(err, MR_EINPUT,
			               "not a PyTorch memory snapshot: the top-level dict has no "
			               "'segments' key (it has %zu keys%s%s)",
			               n, off ? ": " : "", keys);
		}
		if (pk_typeof(d, segs) != PK_T_LIST)
			return mr_fail(
			    err, MR_EINPUT,
			    "not a PyTorch memory snapshot: 'segments' is %s, not a list",
			    type_word(pk_typeof(d, segs)));
	} else {
		return mr_fail(
		    err, MR_EINPUT,
		    "not a PyTorch memory snapshot: the pickle holds %s, not a dict or a "
		    "list of segments",
		    type_word(tt));
	}
	size_t n = pk_len(d, segs);
	const pk_val *items = pk_items(d, segs);
	for (size_t i = 0; i < n; i++) {
		if (tt == PK_T_LIST && pk_typeof(d, items[i]) != PK_T_DICT)
			return mr_fail(
			    err, MR_EINPUT,
			    "not a PyTorch memory snapshot: the pickle is a list of %s, not "
			    "of segment dicts",
			    type_word(pk_typeof(d, items[i])));
		if ((st = add_segment(b, items[i], &seg_cap, &blk_cap, err)))
			return st;
	}
	if ((st = sort_segments(s, err)))
		return st;
	if (s->era != MD_ERA_SEGMENT_LIST && b->saw_history)
		s->era = MD_ERA_HISTORY;
	if (tt == PK_T_DICT) {
		if (pk_dict_get(d, top, "device_traces", &v) && pk_typeof(d, v) == PK_T_LIST &&
		    (st = load_traces(b, v, &dev_cap, err)))
			return st;
		if (pk_dict_get(d, top, "allocator_settings", &v) && pk_typeof(d, v) == PK_T_DICT &&
		    (st = load_settings(b, v, err)))
			return st;
		if (pk_dict_get(d, top, "external_annotations", &v) &&
		    pk_typeof(d, v) == PK_T_LIST && (st = load_annotations(b, v, err)))
			return st;
	}
	for (size_t i = 0; i < s->segment_count; i++) {
		md_device *dv = NULL;
		if ((st = ensure_device(s, s->segments[i].device, &dev_cap, &dv, err)))
			return st;
	}
	/* Event slices were stored as 1-based offsets while the store could still move. */
	for (size_t i = 0; i < s->device_count; i++) {
		md_device *dv = &s->devices[i];
		if (dv->event_count) {
			dv->first = (uintptr_t)dv->events - 1;
			dv->events = s->event_store + dv->first;
			dv->times = s->times;
		}
	}
	if (s->device_count > 1) /* qsort(NULL, 0, ...) is undefined */
		qsort(s->devices, s->device_count, sizeof *s->devices, dev_cmp);
	return MR_OK;
}

mr_status sn_load(const uint8_t *data, size_t len, md_snapshot *out, pk_progress_fn progress,
                  void *progress_ctx, mr_error *err)
{
	builder b;
	memset(&b, 0, sizeof b);
	md_init(out);
	b.s = out;
	b.prev_stack = MD_NO_STACK;
	mr_status st = MR_OK;
	if (out->strings.count == 0 || out->stack_count == 0) {
		st = mr_oom(err);
		goto done;
	}
	b.d = pk_new(NULL);
	if (!b.d) {
		st = mr_oom(err);
		goto done;
	}
	pk_set_dict_hook(b.d, event_hook, &b);
	pk_set_list_hook(b.d, list_hook, &b);
	if (progress)
		pk_set_progress(b.d, progress, progress_ctx);
	if (dc_sniff(data, len) != DC_PICKLE) {
		st =
		    mr_fail(err, MR_EINPUT, "not a pickle (protocol 2 to 5): %s",
		            len ? "it does not start with the PROTO opcode" : "the input is empty");
		goto done;
	}
	/* The dict hook makes at most one event of a dict, when it receives its first items, and
	 * a trace entry's dict takes at least 6 input bytes (a mark or an empty dict, the key
	 * "action" and its string value, each a 2-byte memo read at least, and the opcode that
	 * sets them): a quarter of the input bounds the events, with room to spare. */
	md_reserve_events(out, len / 4 + 1);
	if ((st = pk_run(b.d, data, len, err)))
		goto done;
	st = build(&b, pk_result(b.d), err);
done:
	pk_free(b.d);
	free(b.frame_cache);
	free(b.tmp_frames);
	free(b.prev_frames);
	free(b.meta_hash);
	free(b.long_strs);
	if (st)
		md_free(out);
	return st;
}
