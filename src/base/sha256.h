/* sha256.h: SHA-256, as the base64 text a Content-Security-Policy names ("sha256-<this>").
 *
 * Ownership: writes into the caller's array; allocates nothing that outlives the call. */
#ifndef MR_SHA256_H
#define MR_SHA256_H

#include <stddef.h>

/* The digest of data[0..len) in base64 (44 characters and a NUL); "" if memory ran out. */
void sha256_base64(const void *data, size_t len, char out[45]);

#endif
