/* hash128.h: a non-cryptographic 128-bit content hash (four xxHash64-style lanes), fast
 * enough that hashing an input costs a small fraction of decoding it. For cache keys: it
 * protects against accidents, not against an adversary.
 *
 * Ownership: plain values; nothing is allocated. */
#ifndef MR_HASH128_H
#define MR_HASH128_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
	uint64_t lane[4];
	uint64_t total;
	uint8_t tail[32];
	size_t tail_len;
} h128_state;

typedef struct {
	uint8_t bytes[16];
} h128_digest;

void h128_init(h128_state *h, uint64_t seed);
void h128_update(h128_state *h, const void *data, size_t len);
/* Adds a length-prefixed string, so that ("ab","c") and ("a","bc") hash apart. */
void h128_str(h128_state *h, const char *s);
void h128_u64(h128_state *h, uint64_t v);
void h128_final(const h128_state *h, h128_digest *out);
/* 32 lowercase hex digits and a NUL. */
void h128_hex(const h128_digest *k, char out[33]);

#endif
