/* cache.h: a content-keyed cache of analysed runs for `memreport batch --cache DIR`.
 *
 * An entry holds what the batch needs to list a run in its index and to write its reports
 * without decoding the inputs again: the index-row facts, the memreport/1 JSON document and the
 * HTML report. Entries live in DIR/<key hex>.mrc, one file each:
 *
 *     "MRCACHE1" | u32 version | 16-byte key | u64 payload length | 16-byte payload hash | payload
 *
 * The payload is a msgpack map. The key covers the cache version, a fingerprint of the
 * memreport binary that wrote it (so a rebuilt tool never trusts an older tool's output), the
 * options that change a report, and the bytes of every input of the run. An entry whose header,
 * version, key, length, hash or msgpack structure is off is treated as a miss and rebuilt; it is
 * never trusted. Entries are written atomically (temporary file + rename), so concurrent
 * writers of the same key are harmless.
 *
 * The hash (base/hash128.h) protects against accidents, not against someone who can write into
 * the cache folder: whoever can write there can change the reports (README, "the cache"). An
 * entry is read only when it is a regular file (a link is not followed, a FIFO never blocks)
 * of at most CA_MAX_ENTRY_BYTES; anything else is a miss. A new cache folder is made 0700; an
 * existing one (shared by several machines) keeps its permissions.
 *
 * Ownership: ca_get fills a ca_entry whose strings it allocates; ca_entry_free releases them.
 * ca_put only reads the entry. Nothing here prints. */
#ifndef MR_CACHE_H
#define MR_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/hash128.h"
#include "render/batch_index.h"

/* Bump when the entry payload or the meaning of a field changes. */
#define CA_VERSION 1u
/* No entry is larger (one run's JSON and HTML report); a larger file is not read. */
#define CA_MAX_ENTRY_BYTES ((uint64_t)256 << 20)

/* Starts a cache key: the cache version and the fingerprint of this binary. */
void ca_key_begin(h128_state *h);

/* ---- entries ------------------------------------------------------------------------------ */

typedef struct {
	ix_row row; /* the index row's facts */
	/* The documents. */
	char *json; /* memreport/1 */
	size_t json_len;
	char *html;
	size_t html_len;
} ca_entry;

void ca_entry_free(ca_entry *e);

/* Creates DIR (one level, mode 0700) when missing; an existing DIR is left as it is. */
mr_status ca_prepare_dir(const char *dir, mr_error *err);

/* Looks the key up. *hit is 1 and *out filled when a valid entry exists; 0 otherwise (missing,
 * stale or corrupt: the caller rebuilds and ca_put replaces it). Fails only when memory runs
 * out. */
mr_status ca_get(const char *dir, const h128_digest *key, ca_entry *out, int *hit, mr_error *err);

/* Stores the entry under the key, atomically. */
mr_status ca_put(const char *dir, const h128_digest *key, const ca_entry *e, mr_error *err);

/* Encodes / decodes an entry file's bytes (exposed for the tests). ca_decode returns 0 and fills
 * *out for a valid entry of `key`, -1 for anything else (out left empty). */
mr_status ca_encode(const h128_digest *key, const ca_entry *e, mr_buf *out, mr_error *err);
int ca_decode(const uint8_t *data, size_t len, const h128_digest *key, ca_entry *out);

#endif
