/* amount.c: "204.00 MiB" and friends, to bytes. */
#include "decode/amount.h"

#include <string.h>

#include "decode/chars.h"

typedef struct {
	const char *name;
	uint64_t mult;
	int legacy;
} ev_unit;

/* Longest spellings first where one is a prefix of another ("bytes" before "B"). */
static const ev_unit ev_units[] = {
    {"bytes", 1, 0},
    {"KiB", (uint64_t)1 << 10, 0},
    {"MiB", (uint64_t)1 << 20, 0},
    {"GiB", (uint64_t)1 << 30, 0},
    {"TiB", (uint64_t)1 << 40, 0},
    {"PiB", (uint64_t)1 << 50, 0},
    {"EiB", (uint64_t)1 << 60, 0},
    {"KB", (uint64_t)1 << 10, 1},
    {"MB", (uint64_t)1 << 20, 1},
    {"GB", (uint64_t)1 << 30, 1},
    {"TB", (uint64_t)1 << 40, 1},
    {"PB", (uint64_t)1 << 50, 1},
    {"EB", (uint64_t)1 << 60, 1},
    {"B", 1, 0},
};

size_t ev_unit_at(const char *s, size_t n, size_t pos, uint64_t *mult, int *legacy)
{
	for (size_t i = 0; i < sizeof ev_units / sizeof ev_units[0]; i++) {
		if (!tc_at(s, n, pos, ev_units[i].name))
			continue;
		*mult = ev_units[i].mult;
		*legacy = ev_units[i].legacy;
		return strlen(ev_units[i].name);
	}
	return 0;
}

size_t ev_parse_amount(const char *s, size_t len, uint64_t *out, int *overflow)
{
	size_t p = 0;
	uint64_t ip = 0, frac = 0, p10 = 1;
	int ovf = 0;
	while (p < len && tc_isdigit(s[p])) {
		unsigned d = (unsigned)(s[p] - '0');
		if (ip > (UINT64_MAX - d) / 10)
			ovf = 1;
		else
			ip = ip * 10 + d;
		p++;
	}
	if (p == 0)
		return 0;
	if (p < len && s[p] == '.') {
		p++;
		while (p < len && tc_isdigit(s[p])) {
			if (p10 < 1000000) { /* six decimals are plenty; the rest is ignored */
				frac = frac * 10 + (uint64_t)(s[p] - '0');
				p10 *= 10;
			}
			p++;
		}
	}
	while (p < len && (s[p] == ' ' || s[p] == '\t'))
		p++;
	uint64_t mult, bytes = 0;
	int legacy;
	size_t unit = ev_unit_at(s, len, p, &mult, &legacy);
	if (!unit)
		return 0;
	p += unit;
	if (!ovf && ip > UINT64_MAX / mult)
		ovf = 1;
	if (!ovf) {
		bytes = ip * mult;
		uint64_t fb;
		if (mult <= ((uint64_t)1 << 40)) /* frac < 1e6 < 2^20: the product fits */
			fb = (frac * mult + p10 / 2) / p10;
		else
			fb = (uint64_t)((double)frac / (double)p10 * (double)mult + 0.5);
		if (bytes > UINT64_MAX - fb)
			ovf = 1;
		else
			bytes += fb;
	}
	*out = ovf ? UINT64_MAX : bytes;
	if (overflow)
		*overflow = ovf;
	return p;
}
