/* chars.h: the character helpers of the text parsers (tables, OOM messages, stats dumps):
 * locale-free, safe on any byte, and bounded by the lengths they are given (the input need not
 * be NUL-terminated).
 *
 * Ownership: they read their arguments and write only where told; nothing is allocated. */
#ifndef MR_CHARS_H
#define MR_CHARS_H

#include <stddef.h>

/* The tests are inline: the parsers call them for every byte of a log. */
static inline int tc_isdigit(char c)
{
	return c >= '0' && c <= '9';
}

static inline int tc_isupper(char c)
{
	return c >= 'A' && c <= 'Z';
}

static inline int tc_isalpha(char c)
{
	return (c >= 'a' && c <= 'z') || tc_isupper(c);
}

static inline int tc_isblank(char c) /* space, tab, CR, LF, FF, VT */
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v';
}

static inline char tc_lower(char c)
{
	return tc_isupper(c) ? (char)(c - 'A' + 'a') : c;
}

/* Does s[pos..n) start with lit? tc_at_ci ignores ASCII case. */
int tc_at(const char *s, size_t n, size_t pos, const char *lit);
int tc_at_ci(const char *s, size_t n, size_t pos, const char *lit);
/* Case-insensitive search of lit in s[0..n); returns its offset or n. */
size_t tc_find_ci(const char *s, size_t n, const char *lit);
/* Reads decimal digits at s[*pos..n) into an int (saturating at 1e9) and advances *pos.
 * Returns 0 if there are none. */
int tc_read_int(const char *s, size_t n, size_t *pos, int *out);
/* Copies s[0..n) into dst as a NUL-terminated string, cut to dstsz - 1 bytes. */
void tc_copy_word(char *dst, size_t dstsz, const char *s, size_t n);

#endif
