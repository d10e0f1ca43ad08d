/* hash128.c: four xxHash64-style lanes and two finalisations. */
#include "base/hash128.h"

#include <string.h>

#include "base/mem.h"

static const uint64_t P1 = 0x9E3779B185EBCA87ull, P2 = 0xC2B2AE3D27D4EB4Full,
                      P3 = 0x165667B19E3779F9ull, P4 = 0x85EBCA77C2B2AE63ull,
                      P5 = 0x27D4EB2F165667C5ull;

static uint64_t rotl64(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static uint64_t read_le64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

static uint64_t lane_round(uint64_t acc, uint64_t input)
{
	acc += input * P2;
	acc = rotl64(acc, 31);
	return acc * P1;
}

static void stripe(uint64_t lane[4], const uint8_t *p)
{
	lane[0] = lane_round(lane[0], read_le64(p));
	lane[1] = lane_round(lane[1], read_le64(p + 8));
	lane[2] = lane_round(lane[2], read_le64(p + 16));
	lane[3] = lane_round(lane[3], read_le64(p + 24));
}

void h128_init(h128_state *h, uint64_t seed)
{
	memset(h, 0, sizeof *h);
	h->lane[0] = seed + P1 + P2;
	h->lane[1] = seed + P2;
	h->lane[2] = seed;
	h->lane[3] = seed - P1;
}

void h128_update(h128_state *h, const void *data, size_t len)
{
	const uint8_t *p = data;
	h->total += len;
	if (h->tail_len) {
		size_t take = MR_MIN(len, 32 - h->tail_len);
		memcpy(h->tail + h->tail_len, p, take);
		h->tail_len += take;
		p += take;
		len -= take;
		if (h->tail_len < 32)
			return;
		stripe(h->lane, h->tail);
		h->tail_len = 0;
	}
	while (len >= 32) {
		stripe(h->lane, p);
		p += 32;
		len -= 32;
	}
	if (len) {
		memcpy(h->tail, p, len);
		h->tail_len = len;
	}
}

void h128_u64(h128_state *h, uint64_t v)
{
	uint8_t b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	h128_update(h, b, sizeof b);
}

void h128_str(h128_state *h, const char *s)
{
	size_t n = strlen(s);
	h128_u64(h, n);
	h128_update(h, s, n);
}

static uint64_t merge(uint64_t acc, uint64_t v)
{
	acc ^= lane_round(0, v);
	return acc * P1 + P4;
}

static uint64_t avalanche(uint64_t h)
{
	h ^= h >> 33;
	h *= P2;
	h ^= h >> 29;
	h *= P3;
	h ^= h >> 32;
	return h;
}

void h128_final(const h128_state *h, h128_digest *out)
{
	uint64_t lane[4];
	memcpy(lane, h->lane, sizeof lane);
	if (h->tail_len) {
		/* The zero padding is unambiguous because the total length is mixed in below. */
		uint8_t pad[32] = {0};
		memcpy(pad, h->tail, h->tail_len);
		stripe(lane, pad);
	}
	uint64_t a =
	    rotl64(lane[0], 1) + rotl64(lane[1], 7) + rotl64(lane[2], 12) + rotl64(lane[3], 18);
	uint64_t b =
	    rotl64(lane[0], 29) + rotl64(lane[1], 19) + rotl64(lane[2], 11) + rotl64(lane[3], 3);
	for (int i = 0; i < 4; i++) {
		a = merge(a, lane[i]);
		b = merge(b ^ P5, lane[3 - i]);
	}
	a = avalanche(a + h->total);
	b = avalanche(b + h->total * P5 + a);
	for (int i = 0; i < 8; i++) {
		out->bytes[i] = (uint8_t)(a >> (8 * i));
		out->bytes[8 + i] = (uint8_t)(b >> (8 * i));
	}
}

void h128_hex(const h128_digest *k, char out[33])
{
	static const char digits[] = "0123456789abcdef";
	for (int i = 0; i < 16; i++) {
		out[2 * i] = digits[k->bytes[i] >> 4];
		out[2 * i + 1] = digits[k->bytes[i] & 15];
	}
	out[32] = 0;
}
