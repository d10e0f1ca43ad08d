/* units.c: formatting and parsing byte sizes. */
#include "base/units.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mr_format_bytes(char *out, size_t outsz, uint64_t bytes)
{
	static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	if (bytes < 1024) {
		snprintf(out, outsz, "%" PRIu64 " B", bytes);
		return;
	}
	double v = (double)bytes;
	int u = 0;
	while (v >= 1024.0 && u < 6) {
		v /= 1024.0;
		u++;
	}
	snprintf(out, outsz, "%.2f %s", v, units[u]);
}

int mr_parse_size(const char *s, uint64_t *out)
{
	errno = 0;
	char *end;
	double v = strtod(s, &end);
	/* strtod also reads "nan", "inf" and hex floats: only plain decimal numbers are sizes. */
	if (end == s || errno || !isfinite(v) || !(v >= 0) || strpbrk(s, "xXnN"))
		return -1;
	while (*end == ' ')
		end++;
	double mult = 1;
	char u = *end;
	if (u == 'k' || u == 'K')
		mult = 1024.0;
	else if (u == 'm' || u == 'M')
		mult = 1024.0 * 1024;
	else if (u == 'g' || u == 'G')
		mult = 1024.0 * 1024 * 1024;
	else if (u == 't' || u == 'T')
		mult = 1024.0 * 1024 * 1024 * 1024;
	else if (u != '\0' && u != 'b' && u != 'B')
		return -1;
	if (u != '\0' && u != 'b' && u != 'B') {
		end++;
		if (*end == 'i')
			end++;
		if (*end == 'B' || *end == 'b')
			end++;
	} else if (u) {
		end++;
	}
	if (*end != '\0')
		return -1;
	double bytes = v * mult;
	if (!(bytes < 18446744073709551616.0)) /* 2^64; also false for NaN */
		return -1;
	*out = (uint64_t)bytes;
	return 0;
}
