/* pickle.c: the safe pickle machine. See pickle.h for the contract. */
#include "decode/pickle.h"

#include <endian.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"

typedef struct {
	uint8_t type; /* pk_type */
	uint8_t pad[3];
	uint32_t len; /* items (words for dicts), or string bytes */
	union {
		struct {
			uint32_t off, cap; /* container slots / string arena offset */
		} c;
		int64_t i;
		uint64_t u;
		double f;
		const char *s; /* string bytes, NUL-terminated, owned by the decoder's chunks */
	} v;
} pk_node;

/* Strings longer than this get their own allocation; the rest share 1 MiB chunks. */
enum { PK_CHUNK = 1 << 20 };
/* Strings up to this length are shared by content through a direct-mapped table. */
enum { PK_SHORT_STR = 24, PK_SHORT_SLOTS = 4096 };

struct pk_decoder {
	pk_limits lim;
	pk_node *nodes;
	size_t node_count, node_cap;
	pk_val *slots; /* container items */
	size_t slot_count, slot_cap;
	char **chunks; /* string storage, 1 MiB chunks plus one allocation per long string */
	size_t chunk_count, chunk_cap;
	pk_val *stack;
	size_t sp, stack_cap;
	size_t *marks;
	size_t mark_count, mark_cap;
	uint32_t *memo;              /* 4-byte codes of values (see MEMO_WIDE) */
	size_t memo_count, memo_cap; /* memo_count: highest index stored + 1 */
	size_t memo_room;            /* bytes of memo's room (mr_room_new; memo_cap fixed), or 0 */
	pk_val *wide;                /* the values of memo entries that do not fit their code */
	size_t wide_count, wide_cap;
	size_t memo_len; /* entries stored: where MEMOIZE puts the next one */
	char *chunk_cur;
	size_t chunk_left;
	pk_val result;
	size_t memo_gets;
	pk_dict_hook hook;
	void *hook_ctx;
	pk_list_hook list_hook;
	void *list_hook_ctx;
	pk_progress_fn progress;
	void *progress_ctx;
	uint32_t short_strs[PK_SHORT_SLOTS]; /* node id + 1 of a recent short string */
	/* The newest dict, while it may still be retired (pickle.h): the memo entries stored
	 * since it was made start at dict_memo; dict_pinned when something older than it came to
	 * hold a value made after it (a BINPUT below dict_memo, an item added to an older
	 * container), which only a hand-made pickle does. */
	size_t last_dict, dict_memo, dict_sp; /* dict_sp: the stack's height when it was made */
	int dict_valid, dict_pinned;
	pk_val retired; /* the inline record of the dict retire() gave back last */
};

#define PK_INT_MIN (-((int64_t)1 << 60))
#define PK_INT_MAX (((int64_t)1 << 60) - 1)
/* A memo entry is 4 bytes: a value below 2^32 (tags 0-3) is its own code; any other is kept in
 * `wide` and its code is its index there with tag MEMO_WIDE. An unset entry is MEMO_UNSET,
 * a tag no value uses. Half the memory of a memo of values: a large snapshot's memo holds
 * more than one entry per trace entry. */
enum { MEMO_WIDE = 4, MEMO_UNSET = 0xFFFFFFFFu, MEMO_MAX_WIDE = (1u << 29) - 1 };

static pk_val mk_ref(size_t node)
{
	return ((pk_val)node << 3) | PK_TAG_REF;
}
static pk_val mk_const(enum pk_const c)
{
	return ((pk_val)c << 3) | PK_TAG_CONST;
}
static pk_val mk_small(int64_t i)
{
	return ((pk_val)i << 3) | PK_TAG_INT;
}

pk_decoder *pk_new(const pk_limits *limits)
{
	pk_decoder *d = calloc(1, sizeof *d);
	if (!d)
		return NULL;
	if (limits) {
		d->lim = *limits;
	} else {
		d->lim.max_stack = 1u << 18;
		d->lim.max_memo = (size_t)1 << 30;
		d->lim.max_nodes = (size_t)1 << 31;
		d->lim.max_items = (size_t)1 << 31;
		d->lim.max_string = (size_t)1 << 30;
	}
	d->result = mk_const(PK_NONE);
	return d;
}

void pk_free(pk_decoder *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->chunk_count; i++)
		free(d->chunks[i]);
	free(d->chunks);
	free(d->nodes);
	free(d->slots);
	free(d->stack);
	free(d->marks);
	mr_release(d->memo, d->memo_room);
	free(d->wide);
	free(d);
}

void pk_set_dict_hook(pk_decoder *d, pk_dict_hook hook, void *ctx)
{
	d->hook = hook;
	d->hook_ctx = ctx;
}

void pk_set_progress(pk_decoder *d, pk_progress_fn fn, void *ctx)
{
	d->progress = fn;
	d->progress_ctx = ctx;
}

void pk_set_list_hook(pk_decoder *d, pk_list_hook hook, void *ctx)
{
	d->list_hook = hook;
	d->list_hook_ctx = ctx;
}

pk_val pk_result(const pk_decoder *d)
{
	return d->result;
}

size_t pk_memo_gets(const pk_decoder *d)
{
	return d->memo_gets;
}

size_t pk_memo_room(const pk_decoder *d)
{
	return d->memo_room;
}

/* ---- the machine ---- */

typedef struct {
	pk_decoder *d;
	const uint8_t *p, *end, *start;
	mr_error *err;
	uint8_t op;
	const uint8_t *op_p; /* where the opcode being run starts */
} pk_run_state;

static const char *op_name(uint8_t op)
{
	switch (op) {
	case 0x80: return "PROTO";
	case 0x95: return "FRAME";
	case '.': return "STOP";
	case '(': return "MARK";
	case '}': return "EMPTY_DICT";
	case 'd': return "DICT";
	case 's': return "SETITEM";
	case 'u': return "SETITEMS";
	case ']': return "EMPTY_LIST";
	case 'l': return "LIST";
	case 'a': return "APPEND";
	case 'e': return "APPENDS";
	case ')': return "EMPTY_TUPLE";
	case 't': return "TUPLE";
	case 0x85: return "TUPLE1";
	case 0x86: return "TUPLE2";
	case 0x87: return "TUPLE3";
	case 0x8f: return "EMPTY_SET";
	case 0x90: return "ADDITEMS";
	case 0x91: return "FROZENSET";
	case 0x8c: return "SHORT_BINUNICODE";
	case 'X': return "BINUNICODE";
	case 0x8d: return "BINUNICODE8";
	case 'C': return "SHORT_BINBYTES";
	case 'B': return "BINBYTES";
	case 0x8e: return "BINBYTES8";
	case 0x96: return "BYTEARRAY8";
	case 'U': return "SHORT_BINSTRING";
	case 'T': return "BINSTRING";
	case 'J': return "BININT";
	case 'K': return "BININT1";
	case 'M': return "BININT2";
	case 0x8a: return "LONG1";
	case 0x8b: return "LONG4";
	case 'G': return "BINFLOAT";
	case 'N': return "NONE";
	case 0x88: return "NEWTRUE";
	case 0x89: return "NEWFALSE";
	case 0x94: return "MEMOIZE";
	case 'q': return "BINPUT";
	case 'r': return "LONG_BINPUT";
	case 'h': return "BINGET";
	case 'j': return "LONG_BINGET";
	case '0': return "POP";
	case '1': return "POP_MARK";
	case '2': return "DUP";
	case 'c': return "GLOBAL";
	case 0x93: return "STACK_GLOBAL";
	case 'R': return "REDUCE";
	case 'b': return "BUILD";
	case 'i': return "INST";
	case 'o': return "OBJ";
	case 0x81: return "NEWOBJ";
	case 0x92: return "NEWOBJ_EX";
	case 'P': return "PERSID";
	case 'Q': return "BINPERSID";
	case 0x82: return "EXT1";
	case 0x83: return "EXT2";
	case 0x84: return "EXT4";
	case 0x97: return "NEXT_BUFFER";
	case 0x98: return "READONLY_BUFFER";
	case 'I': return "INT";
	case 'L': return "LONG";
	case 'F': return "FLOAT";
	case 'S': return "STRING";
	case 'V': return "UNICODE";
	case 'p': return "PUT";
	case 'g': return "GET";
	default: return NULL;
	}
}

static mr_status bad(pk_run_state *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static mr_status bad(pk_run_state *r, const char *fmt, ...)
{
	char what[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	const char *name = op_name(r->op);
	if (name)
		return mr_fail(r->err, MR_EINPUT, "byte %zu: %s: %s", (size_t)(r->op_p - r->start),
		               name, what);
	return mr_fail(r->err, MR_EINPUT, "byte %zu: opcode 0x%02x: %s",
	               (size_t)(r->op_p - r->start), r->op, what);
}

static int need(pk_run_state *r, size_t n)
{
	return (size_t)(r->end - r->p) >= n;
}

static mr_status truncated(pk_run_state *r)
{
	return bad(r, "input ends inside this opcode (truncated file)");
}

static uint64_t rd_le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

static mr_status push_slow(pk_run_state *r, pk_val v)
{
	pk_decoder *d = r->d;
	if (d->sp >= d->lim.max_stack)
		return bad(r, "more than %zu values pending on the stack (nesting limit)",
		           d->lim.max_stack);
	size_t want = MR_MIN(d->lim.max_stack, MR_MAX(d->sp + 1, d->stack_cap * 2));
	if (MR_GROW(d->stack, d->stack_cap, want))
		return mr_oom(r->err);
	d->stack_cap = MR_MIN(d->stack_cap, d->lim.max_stack);
	d->stack[d->sp++] = v;
	return MR_OK;
}

/* The stack's capacity never exceeds the nesting limit, so one comparison covers both. */
static inline mr_status push(pk_run_state *r, pk_val v)
{
	pk_decoder *d = r->d;
	if (__builtin_expect(d->sp < d->stack_cap, 1)) {
		d->stack[d->sp++] = v;
		return MR_OK;
	}
	return push_slow(r, v);
}

static mr_status new_node(pk_run_state *r, pk_type type, size_t *out)
{
	pk_decoder *d = r->d;
	if (d->node_count >= d->lim.max_nodes)
		return bad(r, "more than %zu objects (object limit)", d->lim.max_nodes);
	if (d->node_count >= d->node_cap && MR_GROW(d->nodes, d->node_cap, d->node_count + 1))
		return mr_oom(r->err);
	pk_node *n = &d->nodes[d->node_count];
	memset(n, 0, sizeof *n);
	n->type = (uint8_t)type;
	if (type == PK_T_DICT) {
		d->last_dict = d->node_count;
		d->dict_memo = d->memo_count;
		d->dict_sp = d->sp;
		d->dict_valid = 1;
		d->dict_pinned = 0;
	}
	*out = d->node_count++;
	return MR_OK;
}

static mr_status push_container(pk_run_state *r, pk_type type)
{
	size_t id = 0;
	mr_status st = new_node(r, type, &id);
	return st ? st : push(r, mk_ref(id));
}

/* The short_strs slot of the string s[0..len). */
static size_t short_hash(const uint8_t *s, size_t len)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ s[i]) * 16777619u;
	return h & (PK_SHORT_SLOTS - 1);
}

/* Copies string bytes into decoder storage and pushes a str/bytes node. */
static mr_status push_string(pk_run_state *r, pk_type type, uint64_t len)
{
	pk_decoder *d = r->d;
	if (len > d->lim.max_string)
		return bad(r, "length %" PRIu64 " is over the %zu-byte string limit", len,
		           d->lim.max_string);
	if (!need(r, (size_t)len))
		return bad(r, "length %" PRIu64 " runs past the end of the input (%zu bytes left)",
		           len, (size_t)(r->end - r->p));
	if (len > UINT32_MAX)
		return bad(r, "string too long");
	/* Short strings repeat by the million (PyTorch writes a fresh "N/A" for every trace
	 * entry): equal bytes share one node. Strings are immutable, so no one can tell. */
	uint32_t *slot = NULL;
	if (type == PK_T_STR && len <= PK_SHORT_STR) {
		slot = &d->short_strs[short_hash(r->p, (size_t)len)];
		if (*slot) {
			const pk_node *n = &d->nodes[*slot - 1];
			if (n->type == PK_T_STR && n->len == len &&
			    memcmp(n->v.s, r->p, len) == 0) {
				r->p += len;
				return push(r, mk_ref(*slot - 1));
			}
		}
	}
	size_t id = 0;
	mr_status st = new_node(r, type, &id);
	if (st)
		return st;
	d->nodes[id].v.s = ""; /* valid even if storage below cannot be had */
	char *dst;
	if (len + 1 > PK_CHUNK / 16) {
		dst = malloc((size_t)len + 1);
		if (!dst || MR_GROW(d->chunks, d->chunk_cap, d->chunk_count + 1)) {
			free(dst);
			return mr_oom(r->err);
		}
		d->chunks[d->chunk_count++] = dst;
	} else {
		if (d->chunk_left < len + 1) {
			char *c = malloc(PK_CHUNK);
			if (!c || MR_GROW(d->chunks, d->chunk_cap, d->chunk_count + 1)) {
				free(c);
				return mr_oom(r->err);
			}
			d->chunks[d->chunk_count++] = c;
			d->chunk_cur = c;
			d->chunk_left = PK_CHUNK;
		}
		dst = d->chunk_cur;
		d->chunk_cur += len + 1;
		d->chunk_left -= (size_t)len + 1;
	}
	memcpy(dst, r->p, (size_t)len);
	dst[len] = '\0';
	r->p += len;
	d->nodes[id].v.s = dst;
	d->nodes[id].len = (uint32_t)len;
	if (slot && id < UINT32_MAX)
		*slot = (uint32_t)id + 1;
	return push(r, mk_ref(id));
}

/* Two's-complement little-endian integer of n bytes (LONG1/LONG4). */
static mr_status push_long(pk_run_state *r, size_t n)
{
	const uint8_t *b = r->p;
	r->p += n;
	if (n == 0)
		return push(r, mk_small(0));
	/* The common case, an address or a time: non-negative in at most 8 bytes, with 8 bytes of
	 * input to read at once (the bytes past n masked off). */
	if (n <= 8 && !(b[n - 1] & 0x80) && (size_t)(r->end - b) >= 8) {
		uint64_t u;
		memcpy(&u, b, 8);
		u = le64toh(u);
		if (n < 8)
			u &= ((uint64_t)1 << (8 * n)) - 1;
		if (u <= (uint64_t)PK_INT_MAX)
			return push(r, mk_small((int64_t)u));
	}
	int negative = (b[n - 1] & 0x80) != 0;
	/* Strip redundant sign bytes to find the real width. */
	size_t w = n;
	while (w > 1 && b[w - 1] == (negative ? 0xFF : 0x00) &&
	       ((b[w - 2] & 0x80) != 0) == negative)
		w--;
	pk_decoder *d = r->d;
	if (w <= 8) {
		uint64_t u = rd_le(b, (int)w);
		if (negative && w < 8)
			u |= ~(uint64_t)0 << (8 * w);
		int64_t i = (int64_t)u;
		if (i >= PK_INT_MIN && i <= PK_INT_MAX)
			return push(r, mk_small(i));
		size_t id = 0;
		mr_status st = new_node(r, PK_T_INT, &id);
		if (st)
			return st;
		d->nodes[id].v.i = i;
		return push(r, mk_ref(id));
	}
	size_t id = 0;
	mr_status st = new_node(r, PK_T_BIGINT, &id);
	if (st)
		return st;
	if (!negative && w == 9 && b[8] == 0) {
		d->nodes[id].type = PK_T_UINT64;
		d->nodes[id].v.u = rd_le(b, 8);
	} else {
		d->nodes[id].v.i = negative ? INT64_MIN : INT64_MAX;
	}
	return push(r, mk_ref(id));
}

static inline pk_val memo_value(const pk_decoder *d, uint32_t code)
{
	return (code & 7) == MEMO_WIDE ? d->wide[code >> 3] : code;
}

/* The code for v, adding it to `wide` when needed: the caller made room for one more there. */
static uint32_t memo_code_in_room(pk_decoder *d, pk_val v)
{
	if (v <= UINT32_MAX)
		return (uint32_t)v; /* tags 0-3: never MEMO_WIDE or MEMO_UNSET */
	d->wide[d->wide_count] = v;
	return (uint32_t)(d->wide_count++ << 3) | MEMO_WIDE;
}

/* Room in `wide` for n more values; 0 when there is none. */
static int wide_room(pk_decoder *d, size_t n)
{
	return d->wide_count + n <= MEMO_MAX_WIDE &&
	       !MR_GROW(d->wide, d->wide_cap, d->wide_count + n);
}

static mr_status memo_put(pk_run_state *r, uint64_t idx)
{
	pk_decoder *d = r->d;
	if (d->sp == 0)
		return bad(r, "nothing on the stack to store");
	if (idx >= d->lim.max_memo)
		return bad(r, "memo index %" PRIu64 " is over the memo limit", idx);
	/* Producers number memo entries densely from 0, and each entry costs at least one input
	 * byte, so an index far above the input size is hostile: without this check a 10-byte
	 * LONG_BINPUT would allocate and fill gigabytes of memo. Small inputs keep some slack for
	 * hand-made sparse indices. */
	size_t input = (size_t)(r->end - r->start);
	if (idx >= MR_MAX(input, (size_t)1 << 16))
		return bad(r, "memo index %" PRIu64 " is larger than a %zu-byte pickle can use",
		           idx, input);
	if (idx >= d->memo_count) {
		if (MR_GROW_IN(d->memo, d->memo_cap, d->memo_room, (size_t)idx + 1))
			return mr_oom(r->err);
		for (size_t i = d->memo_count; i < idx; i++) /* none, from MEMOIZE */
			d->memo[i] = MEMO_UNSET;
		d->memo[idx] = MEMO_UNSET;
		d->memo_count = (size_t)idx + 1;
	}
	pk_val v = d->stack[d->sp - 1];
	if (v > UINT32_MAX && !wide_room(d, 1))
		return d->wide_count + 1 > MEMO_MAX_WIDE
		           ? bad(r, "more memo entries of large values than this decoder holds")
		           : mr_oom(r->err);
	uint32_t code = memo_code_in_room(d, v);
	if (d->memo[idx] == MEMO_UNSET)
		d->memo_len++;
	if (idx < d->dict_memo)
		d->dict_pinned = 1;
	d->memo[idx] = code;
	return MR_OK;
}

static inline __attribute__((always_inline)) mr_status memo_get(pk_run_state *r, uint64_t idx)
{
	pk_decoder *d = r->d;
	if (idx >= d->memo_count || d->memo[idx] == MEMO_UNSET)
		return bad(r, "memo index %" PRIu64 " was never stored", idx);
	d->memo_gets++;
	return push(r, memo_value(d, d->memo[idx]));
}

static mr_status pop_mark(pk_run_state *r, size_t *mark)
{
	pk_decoder *d = r->d;
	if (d->mark_count == 0)
		return bad(r, "no MARK before this opcode");
	*mark = d->marks[--d->mark_count];
	if (*mark > d->sp)
		return bad(r, "MARK points past the stack");
	return MR_OK;
}

static pk_node *container_at(pk_run_state *r, size_t pos, pk_type want)
{
	pk_decoder *d = r->d;
	pk_val v = d->stack[pos];
	if ((v & 7) != PK_TAG_REF)
		return NULL;
	pk_node *n = &d->nodes[v >> 3];
	return n->type == want ? n : NULL;
}

/* Appends n words to a container node, growing its slot range by doubling. */
static mr_status add_items(pk_run_state *r, size_t node_id, const pk_val *items, size_t n)
{
	pk_decoder *d = r->d;
	pk_node *c = &d->nodes[node_id];
	if (n == 0)
		return MR_OK; /* also keeps memcpy away from a still-NULL slots array */
	if (d->dict_valid && node_id < d->last_dict)
		for (size_t i = 0; i < n; i++)
			if ((items[i] & 7) == PK_TAG_REF && (items[i] >> 3) >= d->last_dict)
				d->dict_pinned = 1;
	if (n > UINT32_MAX - c->len)
		return bad(r, "container too large");
	size_t len = c->len, need_len = len + n;
	if (need_len > c->v.c.cap) {
		size_t ncap = c->v.c.cap ? (size_t)c->v.c.cap * 2 : 4;
		if (ncap < need_len)
			ncap = need_len;
		if (ncap > UINT32_MAX)
			ncap = UINT32_MAX;
		if (d->slot_count > d->lim.max_items || ncap > d->lim.max_items - d->slot_count)
			return bad(r, "more than %zu container items (item limit)",
			           d->lim.max_items);
		size_t off;
		/* The last range can grow in place. */
		if (c->v.c.cap && (size_t)c->v.c.off + c->v.c.cap == d->slot_count) {
			off = c->v.c.off;
			size_t extra = ncap - c->v.c.cap;
			if (MR_GROW(d->slots, d->slot_cap, d->slot_count + extra))
				return mr_oom(r->err);
			d->slot_count += extra;
		} else {
			off = d->slot_count;
			if (off > UINT32_MAX - ncap)
				return bad(r, "more container items than this decoder can index");
			if (MR_GROW(d->slots, d->slot_cap, d->slot_count + ncap))
				return mr_oom(r->err);
			if (len)
				memcpy(d->slots + off, d->slots + c->v.c.off, len * sizeof(pk_val));
			d->slot_count += ncap;
		}
		if (off > UINT32_MAX)
			return bad(r, "more container items than this decoder can index");
		c = &d->nodes[node_id];
		c->v.c.off = (uint32_t)off;
		c->v.c.cap = (uint32_t)ncap;
	}
	memcpy(d->slots + c->v.c.off + len, items, n * sizeof(pk_val));
	c->len = (uint32_t)need_len;
	return MR_OK;
}

static pk_val inline_record(const pk_node *n)
{
	return (n->v.u << 3) | PK_TAG_RECORD;
}

/* The dict node `id`, just made a record by the hook (its items already popped): when it is
 * the newest dict and every node after it is a record too (its frames list), those nodes are
 * given back and the stack and memo entries made since the dict hold the records inline
 * (pickle.h). Only values made since the dict can name these nodes: older containers and memo
 * entries that came to hold one pin it (dict_pinned). A dict with more than a few stack or
 * memo entries to rewrite keeps its node: the work stays constant per dict. */
static void retire(pk_decoder *d, size_t id)
{
	enum { MAX_REWRITE = 16 };
	d->retired = mk_ref(id);
	if (!d->dict_valid || d->dict_pinned || id != d->last_dict || d->node_count - id > 2 ||
	    d->memo_count - d->dict_memo > MAX_REWRITE ||
	    (d->sp > d->dict_sp && d->sp - d->dict_sp > MAX_REWRITE))
		return;
	for (size_t k = id; k < d->node_count; k++)
		if (d->nodes[k].type != PK_T_RECORD || d->nodes[k].v.u >> PK_RECORD_BITS)
			return;
	if (!wide_room(d, MAX_REWRITE)) /* the memo entries below may each need one */
		return;
	for (size_t k = id; k < d->node_count; k++) {
		pk_val ref = mk_ref(k), val = inline_record(&d->nodes[k]);
		for (size_t m = d->dict_memo; m < d->memo_count; m++)
			if (d->memo[m] != MEMO_UNSET && memo_value(d, d->memo[m]) == ref)
				d->memo[m] = memo_code_in_room(d, val);
		for (size_t s = d->dict_sp; s < d->sp; s++)
			if (d->stack[s] == ref)
				d->stack[s] = val;
	}
	d->retired = inline_record(&d->nodes[id]);
	d->node_count = id;
	d->dict_valid = 0;
}

/* Gives the dict node its items stack[first..end): through the hook for a dict's first batch,
 * else appended. Pops the items. */
static mr_status dict_set(pk_run_state *r, size_t node_id, size_t first, size_t end)
{
	pk_decoder *d = r->d;
	size_t words = end - first;
	if (words % 2)
		return bad(r, "odd number of items for a dict");
	if (d->nodes[node_id].type == PK_T_RECORD)
		return bad(r, "a dict received items after it was complete");
	if (d->nodes[node_id].len == 0 && d->hook && words) {
		uint64_t rec;
		int h = d->hook(d->hook_ctx, d, d->stack + first, words, &rec, r->err);
		if (h < 0)
			return r->err->status ? r->err->status : bad(r, "rejected");
		if (h > 0) {
			d->nodes[node_id].type = PK_T_RECORD;
			d->nodes[node_id].v.u = rec;
			d->nodes[node_id].len = 0;
			d->sp = first;
			retire(d, node_id);
			return MR_OK;
		}
	}
	/* d->stack is still NULL when nothing was ever pushed ("(d"): no pointer arithmetic then */
	mr_status st = words ? add_items(r, node_id, d->stack + first, words) : MR_OK;
	d->sp = first;
	return st;
}

static mr_status dict_at(pk_run_state *r, size_t pos, size_t *node_id)
{
	if (!container_at(r, pos, PK_T_DICT))
		return bad(r, "target is not a dict");
	*node_id = (size_t)(r->d->stack[pos] >> 3);
	return MR_OK;
}

static mr_status build_tuple(pk_run_state *r, size_t first)
{
	pk_decoder *d = r->d;
	size_t n = d->sp - first, id = 0;
	mr_status st = new_node(r, PK_T_TUPLE, &id);
	if (!st && n)
		st = add_items(r, id, d->stack + first, n);
	if (st)
		return st;
	d->sp = first;
	return push(r, mk_ref(id));
}

static mr_status refused(pk_run_state *r)
{
	return bad(r, "refused: this opcode imports or calls Python code, and memreport never runs "
	              "code from a pickle (not plain snapshot data)");
}

/* The opcode handlers, one per family. They are inlined into step(): the dispatch stays one
 * jump per opcode (measured with tools/bench.py and a decode loop: as fast as the single
 * 272-line switch they replace). */

/* PROTO, FRAME, STOP and MARK: the framing of the stream. */
static inline __attribute__((always_inline)) mr_status op_frame(pk_run_state *r, uint8_t op,
                                                                int *stop)
{
	pk_decoder *d = r->d;
	switch (op) {
	case 0x80: /* PROTO */
		if (!need(r, 1))
			return truncated(r);
		if (*r->p > 5)
			return bad(r, "unsupported pickle protocol %u", *r->p);
		r->p++;
		return MR_OK;
	case 0x95: /* FRAME: a length hint; the bytes follow inline */
		if (!need(r, 8))
			return truncated(r);
		r->p += 8;
		return MR_OK;
	case '.':
		if (d->sp != 1)
			return bad(r, d->sp ? "more than one value left on the stack"
			                    : "nothing on the stack");
		if (d->mark_count)
			return bad(r, "unclosed MARK");
		d->result = d->stack[0];
		*stop = 1;
		return MR_OK;
	default: /* '(' MARK */
		if (d->mark_count >= d->lim.max_stack)
			return bad(r, "too many nested MARKs (nesting limit)");
		if (MR_GROW(d->marks, d->mark_cap, d->mark_count + 1))
			return mr_oom(r->err);
		d->marks[d->mark_count++] = d->sp;
		return MR_OK;
	}
}

/* Containers made from the values above a MARK (or the top few). */
static inline __attribute__((always_inline)) mr_status op_build(pk_run_state *r, uint8_t op)
{
	pk_decoder *d = r->d;
	size_t mark = 0, id = 0;
	mr_status st;
	switch (op) {
	case '}': return push_container(r, PK_T_DICT);
	case ']': return push_container(r, PK_T_LIST);
	case 0x8f: return push_container(r, PK_T_SET);
	case ')': return build_tuple(r, d->sp);
	case 'd': /* DICT */
		if ((st = pop_mark(r, &mark)) || (st = new_node(r, PK_T_DICT, &id)) ||
		    (st = dict_set(r, id, mark, d->sp)))
			return st;
		return push(r, id < d->node_count ? mk_ref(id) : d->retired);
	case 'l':  /* LIST */
	case 0x91: /* FROZENSET */
		if ((st = pop_mark(r, &mark)) ||
		    (st = new_node(r, op == 'l' ? PK_T_LIST : PK_T_SET, &id)))
			return st;
		if (d->sp > mark && (st = add_items(r, id, d->stack + mark, d->sp - mark)))
			return st;
		d->sp = mark;
		return push(r, mk_ref(id));
	case 't':
		if ((st = pop_mark(r, &mark)))
			return st;
		return build_tuple(r, mark);
	default: { /* TUPLE1, TUPLE2, TUPLE3 */
		size_t n = (size_t)(op - 0x84);
		if (d->sp < n)
			return bad(r, "stack has fewer than %zu values", n);
		if (d->mark_count && d->marks[d->mark_count - 1] > d->sp - n)
			return bad(r, "tuple items cross a MARK");
		return build_tuple(r, d->sp - n);
	}
	}
}

/* Items stack[first..sp) appended to the list at stack[at]: the list hook may take them. */
static mr_status append(pk_run_state *r, size_t at, size_t first)
{
	pk_decoder *d = r->d;
	const pk_val *items = d->stack + first;
	size_t n = d->sp - first;
	if (d->list_hook && d->list_hook(d->list_hook_ctx, d, d->stack[at], items, n))
		return MR_OK;
	return add_items(r, d->stack[at] >> 3, items, n);
}

/* Items added to a dict, list or set below them on the stack. */
static inline __attribute__((always_inline)) mr_status op_add(pk_run_state *r, uint8_t op)
{
	pk_decoder *d = r->d;
	size_t mark = 0, id = 0;
	mr_status st;
	switch (op) {
	case 's': /* SETITEM */
		if (d->sp < 3 || (d->mark_count && d->marks[d->mark_count - 1] > d->sp - 3))
			return bad(r, "needs a dict, a key and a value on the stack");
		if ((st = dict_at(r, d->sp - 3, &id)))
			return st;
		return dict_set(r, id, d->sp - 2, d->sp);
	case 'u': /* SETITEMS */
		if ((st = pop_mark(r, &mark)))
			return st;
		if (mark == 0)
			return bad(r, "no dict below the MARK");
		if ((st = dict_at(r, mark - 1, &id)))
			return st;
		return dict_set(r, id, mark, d->sp);
	case 'a': /* APPEND */
		if (d->sp < 2 || (d->mark_count && d->marks[d->mark_count - 1] > d->sp - 2))
			return bad(r, "needs a list and a value on the stack");
		if (!container_at(r, d->sp - 2, PK_T_LIST))
			return bad(r, "target is not a list");
		st = append(r, d->sp - 2, d->sp - 1);
		d->sp--;
		return st;
	default: /* 'e' APPENDS, 0x90 ADDITEMS */
		if ((st = pop_mark(r, &mark)))
			return st;
		if (mark == 0 || !container_at(r, mark - 1, op == 'e' ? PK_T_LIST : PK_T_SET))
			return bad(r,
			           op == 'e' ? "no list below the MARK" : "no set below the MARK");
		st = d->sp <= mark ? MR_OK
		     : op == 'e'
		         ? append(r, mark - 1, mark)
		         : add_items(r, d->stack[mark - 1] >> 3, d->stack + mark, d->sp - mark);
		d->sp = mark;
		return st;
	}
}

/* str and bytes, by the width of their length. */
static inline __attribute__((always_inline)) mr_status op_string(pk_run_state *r, uint8_t op)
{
	uint64_t n;
	switch (op) {
	case 0x8c: /* SHORT_BINUNICODE */
	case 'C':  /* SHORT_BINBYTES */
	case 'U':  /* SHORT_BINSTRING */
		if (!need(r, 1))
			return truncated(r);
		n = *r->p++;
		return push_string(r, op == 'C' ? PK_T_BYTES : PK_T_STR, n);
	case 'X': /* BINUNICODE */
	case 'B': /* BINBYTES */
	case 'T': /* BINSTRING */
		if (!need(r, 4))
			return truncated(r);
		n = rd_le(r->p, 4);
		r->p += 4;
		if (op == 'T' && n > INT32_MAX)
			return bad(r, "negative length");
		return push_string(r, op == 'B' ? PK_T_BYTES : PK_T_STR, n);
	default: /* 0x8d BINUNICODE8, 0x8e BINBYTES8, 0x96 BYTEARRAY8 */
		if (!need(r, 8))
			return truncated(r);
		n = rd_le(r->p, 8);
		r->p += 8;
		return push_string(r, op == 0x8d ? PK_T_STR : PK_T_BYTES, n);
	}
}

/* Integers, floats and the constants. */
static inline __attribute__((always_inline)) mr_status op_number(pk_run_state *r, uint8_t op)
{
	pk_decoder *d = r->d;
	uint64_t n;
	size_t id = 0;
	mr_status st;
	switch (op) {
	case 'J':
		if (!need(r, 4))
			return truncated(r);
		n = rd_le(r->p, 4);
		r->p += 4;
		return push(r, mk_small((int32_t)(uint32_t)n));
	case 'K':
		if (!need(r, 1))
			return truncated(r);
		return push(r, mk_small(*r->p++));
	case 'M':
		if (!need(r, 2))
			return truncated(r);
		n = rd_le(r->p, 2);
		r->p += 2;
		return push(r, mk_small((int64_t)n));
	case 0x8a: /* LONG1 */
		if (!need(r, 1))
			return truncated(r);
		n = *r->p++;
		if (!need(r, (size_t)n))
			return truncated(r);
		return push_long(r, (size_t)n);
	case 0x8b: /* LONG4 */
		if (!need(r, 4))
			return truncated(r);
		n = rd_le(r->p, 4);
		r->p += 4;
		if (n > INT32_MAX)
			return bad(r, "negative length");
		if (n > d->lim.max_string)
			return bad(r, "integer of %" PRIu64 " bytes is over the limit", n);
		if (!need(r, (size_t)n))
			return truncated(r);
		return push_long(r, (size_t)n);
	case 'G':
		if (!need(r, 8))
			return truncated(r);
		n = 0;
		for (int i = 0; i < 8; i++)
			n = (n << 8) | r->p[i];
		r->p += 8;
		if ((st = new_node(r, PK_T_FLOAT, &id)))
			return st;
		memcpy(&d->nodes[id].v.f, &n, sizeof(double));
		return push(r, mk_ref(id));
	case 'N': return push(r, mk_const(PK_NONE));
	case 0x88: return push(r, mk_const(PK_TRUE));
	default: /* 0x89 NEWFALSE */ return push(r, mk_const(PK_FALSE));
	}
}

/* The memo (PUT and GET in their widths) and the stack's own operations. */
static inline __attribute__((always_inline)) mr_status op_memo(pk_run_state *r, uint8_t op)
{
	pk_decoder *d = r->d;
	size_t mark = 0;
	mr_status st;
	uint64_t idx;
	switch (op) {
	case 0x94: /* MEMOIZE: index = entries stored so far, as CPython (len(memo)) */
		return memo_put(r, d->memo_len);
	case 'q':
	case 'h':
		if (!need(r, 1))
			return truncated(r);
		idx = *r->p++;
		return op == 'q' ? memo_put(r, idx) : memo_get(r, idx);
	case 'r':
	case 'j':
		if (!need(r, 4))
			return truncated(r);
		idx = rd_le(r->p, 4);
		r->p += 4;
		return op == 'r' ? memo_put(r, idx) : memo_get(r, idx);
	case '0': /* POP */
		if (d->mark_count && d->marks[d->mark_count - 1] == d->sp)
			d->mark_count--; /* POP of a mark, as CPython does */
		else if (d->sp == 0)
			return bad(r, "nothing on the stack");
		else
			d->sp--;
		return MR_OK;
	case '1': /* POP_MARK */
		if ((st = pop_mark(r, &mark)))
			return st;
		d->sp = mark;
		return MR_OK;
	default: /* '2' DUP */
		if (d->sp == 0)
			return bad(r, "nothing on the stack");
		return push(r, d->stack[d->sp - 1]);
	}
}

/* One opcode, dispatched to the handler of its family; everything that would import or call
 * code is refused by name. */
static mr_status step(pk_run_state *r, int *stop)
{
	uint8_t op = r->op;
	switch (op) {
	case 0x80:
	case 0x95:
	case '.':
	case '(': return op_frame(r, op, stop);
	case '}':
	case ']':
	case 0x8f:
	case ')':
	case 'd':
	case 'l':
	case 0x91:
	case 't':
	case 0x85:
	case 0x86:
	case 0x87: return op_build(r, op);
	case 's':
	case 'u':
	case 'a':
	case 'e':
	case 0x90: return op_add(r, op);
	case 0x8c:
	case 'C':
	case 'U':
	case 'X':
	case 'B':
	case 'T':
	case 0x8d:
	case 0x8e:
	case 0x96: return op_string(r, op);
	case 'J':
	case 'K':
	case 'M':
	case 0x8a:
	case 0x8b:
	case 'G':
	case 'N':
	case 0x88:
	case 0x89: return op_number(r, op);
	case 0x94:
	case 'q':
	case 'r':
	case 'h':
	case 'j':
	case '0':
	case '1':
	case '2': return op_memo(r, op);
	case 'c':
	case 0x93:
	case 'R':
	case 'b':
	case 'i':
	case 'o':
	case 0x81:
	case 0x92:
	case 'P':
	case 'Q':
	case 0x82:
	case 0x83:
	case 0x84: return refused(r);
	case 0x97:
	case 0x98: return bad(r, "out-of-band buffers are not plain snapshot data");
	default:
		if (op_name(op))
			return bad(
			    r, "text-mode (protocol 0/1) opcode is not supported; snapshots use "
			       "protocols 2 to 5");
		return bad(r, "not a pickle opcode");
	}
}

/* The opcodes that make up most of a snapshot (memo reads, MEMOIZE, MARK, small integers, empty
 * dicts and lists, short strings seen before), run with the machine's state in locals: stores
 * to the stack would otherwise make the compiler reload the decoder's fields after every push.
 * It stops before any opcode it does not take, and before any that would fail or need memory
 * (an error, a stack or memo to grow, a value the memo keeps wide): step() then runs that
 * opcode, with the same checks and messages as always. Leaves the last 16 bytes to step(), so
 * no opcode here can read past the end. Each handler jumps straight to the next opcode's (GNU
 * C's labels as values, like this file's attributes): an indirect jump per handler predicts the
 * opcode after it far better than one shared switch does (the decode 20% faster). */
enum {
	FAST_OUT,
	FAST_BINGET,
	FAST_LONG_BINGET,
	FAST_MEMOIZE,
	FAST_MARK,
	FAST_EMPTY,
	FAST_STR,
	FAST_BININT1,
	FAST_BININT2,
	FAST_BININT,
	FAST_LONG1
};
static const uint8_t fast_op[256] = {
    ['h'] = FAST_BINGET,  ['j'] = FAST_LONG_BINGET, [0x94] = FAST_MEMOIZE, ['('] = FAST_MARK,
    ['}'] = FAST_EMPTY,   [']'] = FAST_EMPTY,       [0x8c] = FAST_STR,     ['K'] = FAST_BININT1,
    ['M'] = FAST_BININT2, ['J'] = FAST_BININT,      [0x8a] = FAST_LONG1};

#define NEXT_OP                                                                                    \
	do {                                                                                       \
		if (p >= stop || sp >= cap)                                                        \
			goto out;                                                                  \
		goto *handler[fast_op[*p]];                                                        \
	} while (0)
#define PUSH_NEXT(val)                                                                             \
	do {                                                                                       \
		stack[sp++] = (val);                                                               \
		NEXT_OP;                                                                           \
	} while (0)

static void simple_ops(pk_run_state *r, size_t memo_limit)
{
	static void *const handler[] = {[FAST_OUT] = &&out,
	                                [FAST_BINGET] = &&binget,
	                                [FAST_LONG_BINGET] = &&long_binget,
	                                [FAST_MEMOIZE] = &&memoize,
	                                [FAST_MARK] = &&mark,
	                                [FAST_EMPTY] = &&empty,
	                                [FAST_STR] = &&short_str,
	                                [FAST_BININT1] = &&binint1,
	                                [FAST_BININT2] = &&binint2,
	                                [FAST_BININT] = &&binint,
	                                [FAST_LONG1] = &&long1};
	pk_decoder *d = r->d;
	const uint8_t *p = r->p, *stop = r->end - MR_MIN((size_t)(r->end - r->p), 16);
	pk_val *stack = d->stack;
	uint32_t *memo = d->memo;
	size_t sp = d->sp, cap = d->stack_cap, memo_count = d->memo_count, gets = d->memo_gets;
	uint64_t idx;
	uint32_t u32;
	NEXT_OP;
binget:
	idx = p[1];
	if (idx >= memo_count || memo[idx] == MEMO_UNSET)
		goto out;
	gets++;
	p += 2;
	PUSH_NEXT(memo_value(d, memo[idx]));
long_binget:
	memcpy(&u32, p + 1, 4);
	idx = le32toh(u32);
	if (idx >= memo_count || memo[idx] == MEMO_UNSET)
		goto out;
	gets++;
	p += 5;
	PUSH_NEXT(memo_value(d, memo[idx]));
memoize: /* while the memo is dense and has room */
	if (sp == 0 || d->memo_len != memo_count || memo_count >= d->memo_cap ||
	    memo_count >= memo_limit || stack[sp - 1] > UINT32_MAX)
		goto out;
	memo[memo_count++] = (uint32_t)stack[sp - 1];
	d->memo_len++;
	p++;
	NEXT_OP;
mark:
	if (d->mark_count >= d->mark_cap || d->mark_count >= d->lim.max_stack)
		goto out;
	d->marks[d->mark_count++] = sp;
	p++;
	NEXT_OP;
empty : { /* EMPTY_DICT and EMPTY_LIST, while there is room for their node */
	if (d->node_count >= d->node_cap || d->node_count >= d->lim.max_nodes)
		goto out;
	size_t id = d->node_count++;
	memset(&d->nodes[id], 0, sizeof d->nodes[id]);
	d->nodes[id].type = *p == '}' ? PK_T_DICT : PK_T_LIST;
	if (*p == '}') { /* as new_node() */
		d->last_dict = id;
		d->dict_memo = memo_count;
		d->dict_sp = sp;
		d->dict_valid = 1;
		d->dict_pinned = 0;
	}
	p++;
	PUSH_NEXT(mk_ref(id));
}
short_str : { /* SHORT_BINUNICODE of a short string the decoder already holds */
	size_t len = p[1];
	if (len > PK_SHORT_STR || len > d->lim.max_string || (size_t)(r->end - p) < 2 + len)
		goto out;
	uint32_t id = d->short_strs[short_hash(p + 2, len)];
	const pk_node *n = id ? &d->nodes[id - 1] : NULL;
	if (!n || n->type != PK_T_STR || n->len != len || memcmp(n->v.s, p + 2, len))
		goto out;
	p += 2 + len;
	PUSH_NEXT(mk_ref(id - 1));
}
binint1:
	p += 2;
	PUSH_NEXT(mk_small(p[-1]));
binint2:
	p += 3;
	PUSH_NEXT(mk_small((int64_t)p[-2] | (int64_t)p[-1] << 8));
binint:
	memcpy(&u32, p + 1, 4);
	p += 5;
	PUSH_NEXT(mk_small((int32_t)le32toh(u32)));
long1 : { /* LONG1 of at most 8 bytes, non-negative, fitting a small value */
	uint64_t u;
	unsigned n = p[1];
	if (n == 0 || n > 8 || (p[1 + n] & 0x80))
		goto out;
	memcpy(&u, p + 2, 8);
	u = le64toh(u);
	if (n < 8)
		u &= ((uint64_t)1 << (8 * n)) - 1;
	if (u > (uint64_t)PK_INT_MAX)
		goto out;
	p += 2 + n;
	PUSH_NEXT(mk_small((int64_t)u));
}
out:
	r->p = p;
	d->sp = sp;
	d->memo_count = memo_count;
	d->memo_gets = gets;
}
#undef PUSH_NEXT
#undef NEXT_OP

/* Room for a memo of up to `limit` entries, the most memo_put() lets this input use (each
 * entry costs an input byte), where that is worth a room (mem.h); else it grows as it fills.
 * An earlier run's memo is dropped either way: its entries never resolve in this run. */
static void reserve_memo(pk_decoder *d, size_t limit)
{
	if (d->memo_room && d->memo_cap >= limit)
		return;
	size_t bytes = limit * sizeof *d->memo; /* limit <= the input's length */
	void *room = mr_room_new(bytes);
	if (!room)
		return;
	mr_release(d->memo, d->memo_room);
	d->memo = room;
	d->memo_cap = limit;
	d->memo_room = bytes;
}

mr_status pk_run(pk_decoder *d, const uint8_t *data, size_t len, mr_error *err)
{
	pk_run_state r = {.d = d, .p = data, .end = data + len, .start = data, .err = err};
	int stop = 0;
	enum { PROGRESS_STEP = 8 << 20 };
	/* the address to report progress at next: never (UINTPTR_MAX) without a callback */
	uintptr_t report =
	    d->progress && len > PROGRESS_STEP ? (uintptr_t)(data + PROGRESS_STEP) : UINTPTR_MAX;
	d->sp = 0;
	d->mark_count = 0;
	d->memo_count = 0; /* a memo entry of an earlier run must not resolve in this one */
	d->wide_count = 0;
	d->memo_len = 0;
	d->memo_gets = 0;
	d->result = mk_const(PK_NONE);
	if (len == 0)
		return mr_fail(err, MR_EINPUT, "empty input");
	size_t memo_limit = MR_MIN(d->lim.max_memo, MR_MAX(len, (size_t)1 << 16));
	reserve_memo(d, memo_limit);
	while (!stop) {
		simple_ops(&r, memo_limit);
		if (r.p >= r.end)
			return mr_fail(
			    err, MR_EINPUT,
			    "byte %zu: input ends before the pickle's STOP (truncated file)", len);
		r.op_p = r.p;
		r.op = *r.p++;
		mr_status st = step(&r, &stop);
		if (st)
			return st;
		if ((uintptr_t)r.op_p >= report) {
			size_t at = (size_t)(r.op_p - data);
			d->progress(d->progress_ctx, at, len);
			report = len - at > PROGRESS_STEP ? (uintptr_t)(r.op_p + PROGRESS_STEP)
			                                  : UINTPTR_MAX;
		}
	}
	if (d->progress)
		d->progress(d->progress_ctx, len, len);
	return MR_OK;
}

/* ---- accessors ---- */

static const pk_node *node_of(const pk_decoder *d, pk_val v)
{
	if ((v & 7) != PK_TAG_REF || (v >> 3) >= d->node_count)
		return NULL;
	return &d->nodes[v >> 3];
}

pk_type pk_typeof(const pk_decoder *d, pk_val v)
{
	switch (v & 7) {
	case PK_TAG_INT: return PK_T_INT;
	case PK_TAG_RECORD: return PK_T_RECORD;
	case PK_TAG_CONST: return (v >> 3) == PK_NONE ? PK_T_NONE : PK_T_BOOL;
	default: {
		const pk_node *n = node_of(d, v);
		return n ? (pk_type)n->type : PK_T_NONE;
	}
	}
}

int pk_is_none(pk_val v)
{
	return v == mk_const(PK_NONE);
}

int pk_int(const pk_decoder *d, pk_val v, int64_t *out)
{
	switch (v & 7) {
	case PK_TAG_INT: *out = (int64_t)v >> 3; return 1;
	case PK_TAG_CONST:
		if ((v >> 3) == PK_NONE)
			return 0;
		*out = (v >> 3) == PK_TRUE;
		return 1;
	}
	const pk_node *n = node_of(d, v);
	if (!n)
		return 0;
	if (n->type == PK_T_INT || n->type == PK_T_BIGINT) {
		*out = n->v.i;
		return 1;
	}
	if (n->type == PK_T_UINT64) {
		*out = INT64_MAX;
		return 1;
	}
	return 0;
}

int pk_uint(const pk_decoder *d, pk_val v, uint64_t *out)
{
	const pk_node *n = node_of(d, v);
	if (n && n->type == PK_T_UINT64) {
		*out = n->v.u;
		return 1;
	}
	int64_t i;
	if (!pk_int(d, v, &i) || i < 0)
		return 0;
	*out = (uint64_t)i;
	return 1;
}

int pk_float(const pk_decoder *d, pk_val v, double *out)
{
	const pk_node *n = node_of(d, v);
	if (n && n->type == PK_T_FLOAT) {
		*out = n->v.f;
		return 1;
	}
	if (n && n->type == PK_T_UINT64) {
		*out = (double)n->v.u;
		return 1;
	}
	int64_t i;
	if (!pk_int(d, v, &i))
		return 0;
	*out = (double)i;
	return 1;
}

int pk_bool(const pk_decoder *d, pk_val v, int *out)
{
	int64_t i;
	if (!pk_int(d, v, &i))
		return 0;
	*out = i != 0;
	return 1;
}

int pk_str(const pk_decoder *d, pk_val v, const char **s, size_t *len)
{
	const pk_node *n = node_of(d, v);
	if (!n || (n->type != PK_T_STR && n->type != PK_T_BYTES))
		return 0;
	*s = d->nodes[v >> 3].v.s;
	*len = n->len;
	return 1;
}

int pk_str_eq(const pk_decoder *d, pk_val v, const char *lit)
{
	const char *s;
	size_t n;
	return pk_str(d, v, &s, &n) && strlen(lit) == n && memcmp(s, lit, n) == 0;
}

size_t pk_node_count(const pk_decoder *d)
{
	return d->node_count;
}

size_t pk_len(const pk_decoder *d, pk_val v)
{
	const pk_node *n = node_of(d, v);
	if (!n)
		return 0;
	switch (n->type) {
	case PK_T_LIST:
	case PK_T_TUPLE:
	case PK_T_SET: return n->len;
	case PK_T_DICT: return n->len / 2;
	default: return 0;
	}
}

const pk_val *pk_items(const pk_decoder *d, pk_val v)
{
	const pk_node *n = node_of(d, v);
	if (!n || !n->len ||
	    (n->type != PK_T_LIST && n->type != PK_T_TUPLE && n->type != PK_T_SET &&
	     n->type != PK_T_DICT))
		return NULL;
	return d->slots + n->v.c.off;
}

int pk_dict_get(const pk_decoder *d, pk_val dict, const char *key, pk_val *out)
{
	const pk_node *n = node_of(d, dict);
	if (!n || n->type != PK_T_DICT || n->len == 0)
		return 0;
	const pk_val *it = d->slots + n->v.c.off;
	size_t klen = strlen(key);
	for (size_t i = 0; i + 1 < n->len; i += 2) {
		const pk_node *k = node_of(d, it[i]);
		if (k && k->type == PK_T_STR && k->len == klen && memcmp(k->v.s, key, klen) == 0) {
			*out = it[i + 1];
			return 1;
		}
	}
	return 0;
}

int pk_convert(pk_decoder *d, pk_val v, uint64_t record)
{
	if ((v & 7) != PK_TAG_REF || (v >> 3) >= d->node_count)
		return 0;
	pk_node *n = &d->nodes[v >> 3];
	if (n->type != PK_T_LIST && n->type != PK_T_TUPLE && n->type != PK_T_DICT &&
	    n->type != PK_T_SET)
		return 0;
	/* The last slot range goes back to the pool; others stay allocated but unused. */
	if (n->v.c.cap && (size_t)n->v.c.off + n->v.c.cap == d->slot_count)
		d->slot_count = n->v.c.off;
	n->type = PK_T_RECORD;
	n->len = 0;
	n->v.u = record;
	return 1;
}

uint64_t pk_record(const pk_decoder *d, pk_val v)
{
	if ((v & 7) == PK_TAG_RECORD)
		return v >> 3;
	const pk_node *n = node_of(d, v);
	return n && n->type == PK_T_RECORD ? n->v.u : 0;
}
