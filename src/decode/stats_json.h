/* stats_json.h: memory_stats() dumps: a JSON object of "key": number (nested objects are
 * flattened with '.', Python dict reprs with single quotes are accepted too).
 *
 * Ownership: ev_parse_stats_json fills an ev_stats whose keys and array it allocates;
 * ev_stats_free releases them. It keeps no pointer into the input. Nothing here prints. */
#ifndef MR_STATS_JSON_H
#define MR_STATS_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct {
	char *key; /* NUL-terminated, owned */
	double value;
	uint64_t uvalue; /* exact value when is_uint */
	int is_uint;     /* the literal was a non-negative integer that fits in 64 bits */
} ev_stat;

typedef struct {
	ev_stat *items; /* in input order */
	size_t count;
} ev_stats;

/* Parses a memory_stats() dump: a JSON object whose values are numbers; nested objects (as
 * from memory_stats_as_nested_dict) are flattened to "a.b.c" keys; Python dict reprs
 * ('key': 1) are accepted; true/false/null/strings are skipped. MR_EINPUT with the byte offset
 * when it is not such an object, or when it holds no numeric value. */
mr_status ev_parse_stats_json(const char *data, size_t len, ev_stats *out, mr_error *err);
/* Returns 1 and sets *out when `key` is present with a non-negative integral value (the first
 * occurrence wins), else 0. */
int ev_stats_get(const ev_stats *s, const char *key, uint64_t *out);
void ev_stats_free(ev_stats *s);

#endif
