/* pickle.h: a pickle decoder that can never run code.
 *
 * It understands protocols 2 to 5 as CPython's pickle.dump writes them for plain data: dicts,
 * lists, tuples, sets, str, bytes, int of any width, float, bool and None, with the memo. Every
 * opcode that would import or call something (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ,
 * NEWOBJ, NEWOBJ_EX, PERSID, BINPERSID, EXT1/2/4, out-of-band buffers) is refused with its name
 * and byte offset. The machine runs in a loop with explicit stacks: no recursion over input.
 *
 * Values are 64-bit tagged words. Small integers, None and booleans are stored inline; strings,
 * bytes, large integers, floats and containers live in nodes owned by the decoder. Memo
 * references share nodes (and can even make cycles): never walk it recursively.
 *
 * A dict the hook turns into a record while it is the newest dict, with nothing after it but
 * records (a trace entry and its frames list), gives its nodes back: the record is then stored
 * inline in the value (PK_TAG_RECORD) wherever the stack and the memo held the dict, so the
 * millions of trace entries of a large snapshot cost no node. Strings are never retired.
 *
 * Ownership: everything reachable from pk_result() belongs to the pk_decoder and is released
 * by pk_free(). Strings are copied out of the input, so the input may be unmapped after
 * pk_run() returns. */
#ifndef MR_PICKLE_H
#define MR_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef uint64_t pk_val;

enum pk_tag { PK_TAG_INT = 0, PK_TAG_REF = 1, PK_TAG_CONST = 2, PK_TAG_RECORD = 3 };
/* Records are numbers below 2^PK_RECORD_BITS. */
enum { PK_RECORD_BITS = 60 };
enum pk_const { PK_NONE = 0, PK_TRUE = 1, PK_FALSE = 2 };

typedef enum {
	PK_T_NONE,
	PK_T_BOOL,
	PK_T_INT,    /* fits in int64 */
	PK_T_UINT64, /* above INT64_MAX, fits in uint64 */
	PK_T_BIGINT, /* does not fit in 64 bits; pk_int() saturates */
	PK_T_FLOAT,
	PK_T_STR,
	PK_T_BYTES,
	PK_T_LIST,
	PK_T_TUPLE,
	PK_T_DICT, /* items alternate key, value */
	PK_T_SET,
	PK_T_RECORD, /* a dict turned into a caller's record by the dict hook */
} pk_type;

/* Limits; each is checked before the arithmetic it guards. */
typedef struct {
	size_t max_stack;  /* values pending on the stack: bounds nesting depth */
	size_t max_memo;   /* highest memo index + 1 */
	size_t max_nodes;  /* strings, containers, big numbers */
	size_t max_items;  /* container slots in total */
	size_t max_string; /* bytes in one str or bytes object */
} pk_limits;

typedef struct pk_decoder pk_decoder;

/* Called when a dict receives its first batch of items (SETITEMS, SETITEM or DICT). `items`
 * alternates keys and values, n is the number of words (2 per pair). Return 1 and set *record
 * to turn the dict into a PK_T_RECORD holding that number (below 2^PK_RECORD_BITS; its items
 * are then dropped, and the values it held may be retired with it), 0 to
 * keep the dict, or -1 to stop decoding with the error set in err. */
typedef int (*pk_dict_hook)(void *ctx, pk_decoder *d, const pk_val *items, size_t n,
                            uint64_t *record, mr_error *err);

/* Called when items are appended to a list (APPEND, APPENDS), with the list's value: return 1
 * to take them (the list does not store them: the hook keeps what it needs of them, and it
 * answers for that list's items itself), 0 to let the list store them. */
typedef int (*pk_list_hook)(void *ctx, const pk_decoder *d, pk_val list, const pk_val *items,
                            size_t n);

pk_decoder *pk_new(const pk_limits *limits); /* NULL limits: defaults; NULL on OOM */
void pk_free(pk_decoder *d);
void pk_set_dict_hook(pk_decoder *d, pk_dict_hook hook, void *ctx);
void pk_set_list_hook(pk_decoder *d, pk_list_hook hook, void *ctx);

/* Optional progress callback, called every few MiB with the bytes consumed so far. */
typedef void (*pk_progress_fn)(void *ctx, size_t done, size_t total);
void pk_set_progress(pk_decoder *d, pk_progress_fn fn, void *ctx);

/* Decodes data[0..len) up to STOP (trailing bytes, e.g. NUL padding, are ignored). On error
 * returns MR_EINPUT (or MR_EFAIL on allocation failure) with a message of the form
 * "byte N: ...". */
mr_status pk_run(pk_decoder *d, const uint8_t *data, size_t len, mr_error *err);
pk_val pk_result(const pk_decoder *d);

/* Statistics of the last run (for tests and benchmarks). */
size_t pk_memo_gets(const pk_decoder *d);
size_t pk_memo_room(const pk_decoder *d); /* bytes of the memo's room (mem.h), 0: none */

/* Accessors. All are safe on any value: a wrong type gives the neutral answer. */
pk_type pk_typeof(const pk_decoder *d, pk_val v);
int pk_is_none(pk_val v);
/* Integer value (bools count as 0/1). Returns 0 when v is not an integer. Big values
 * saturate to INT64_MAX/INT64_MIN; pk_uint gives uint64 values above INT64_MAX. */
int pk_int(const pk_decoder *d, pk_val v, int64_t *out);
int pk_uint(const pk_decoder *d, pk_val v, uint64_t *out);
int pk_float(const pk_decoder *d, pk_val v, double *out); /* ints convert too */
int pk_bool(const pk_decoder *d, pk_val v, int *out);
/* String bytes (UTF-8 for str), not NUL-terminated. Returns 0 if v is not str/bytes. */
int pk_str(const pk_decoder *d, pk_val v, const char **s, size_t *len);
int pk_str_eq(const pk_decoder *d, pk_val v, const char *lit);
/* Node identity of a shared object (for caches keyed by object), or UINT32_MAX. */
static inline uint32_t pk_node_id(pk_val v)
{
	if ((v & 7) != PK_TAG_REF || (v >> 3) >= UINT32_MAX)
		return UINT32_MAX;
	return (uint32_t)(v >> 3);
}
/* pk_int without a call, for the integers stored inline (tag PK_TAG_INT); 0 for any other. */
static inline int pk_inline_int(pk_val v, int64_t *out)
{
	if ((v & 7) != PK_TAG_INT)
		return 0;
	*out = (int64_t)v >> 3;
	return 1;
}
size_t pk_node_count(const pk_decoder *d);
/* Container items: list, tuple, set (n items) and dict (2n words, key then value). */
size_t pk_len(const pk_decoder *d, pk_val v);
const pk_val *pk_items(const pk_decoder *d, pk_val v);
/* Dict lookup by string key (linear: snapshot dicts are small). Returns 1 if found. */
int pk_dict_get(const pk_decoder *d, pk_val dict, const char *key, pk_val *out);
uint64_t pk_record(const pk_decoder *d, pk_val v); /* the number a hook gave a record */
/* Turns a container the caller has fully read into a record holding `record`, giving its item
 * storage back when it is the newest (so per-entry lists do not pile up). Later memo
 * references see the record. Returns 1 if v was a container. Call it only from a dict hook or
 * after pk_run: the container must not receive more items. */
int pk_convert(pk_decoder *d, pk_val v, uint64_t record);

#endif
