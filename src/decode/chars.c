/* chars.c: locale-free character tests and matching, safe on any byte. */
#include "decode/chars.h"

#include <string.h>

/* Does s[pos..n) start with lit (case-sensitive)? */
int tc_at(const char *s, size_t n, size_t pos, const char *lit)
{
	size_t l = strlen(lit);
	return pos <= n && n - pos >= l && memcmp(s + pos, lit, l) == 0;
}

/* Same, ASCII case-insensitive. */
int tc_at_ci(const char *s, size_t n, size_t pos, const char *lit)
{
	size_t l = strlen(lit);
	if (pos > n || n - pos < l)
		return 0;
	for (size_t i = 0; i < l; i++)
		if (tc_lower(s[pos + i]) != tc_lower(lit[i]))
			return 0;
	return 1;
}

/* Case-insensitive search of lit in s[0..n); returns its offset or n. */
size_t tc_find_ci(const char *s, size_t n, const char *lit)
{
	size_t l = strlen(lit);
	for (size_t i = 0; l <= n && i <= n - l; i++)
		if (tc_at_ci(s, n, i, lit))
			return i;
	return n;
}

/* Reads decimal digits at s[*pos..n) into an int (saturating at 1e9). Returns 0 if none. */
int tc_read_int(const char *s, size_t n, size_t *pos, int *out)
{
	size_t p = *pos;
	long v = 0;
	while (p < n && tc_isdigit(s[p])) {
		if (v < 1000000000L)
			v = v * 10 + (s[p] - '0');
		p++;
	}
	if (p == *pos)
		return 0;
	*out = (int)(v > 1000000000L ? 1000000000L : v);
	*pos = p;
	return 1;
}

void tc_copy_word(char *dst, size_t dstsz, const char *s, size_t n)
{
	size_t k = n < dstsz - 1 ? n : dstsz - 1;
	memcpy(dst, s, k);
	dst[k] = '\0';
}
