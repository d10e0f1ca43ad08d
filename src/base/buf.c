/* buf.c: the growable byte buffer. */
#include "base/buf.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

void mr_buf_free(mr_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

void mr_buf_append(mr_buf *b, const void *data, size_t len)
{
	if (b->failed)
		return;
	if (len > SIZE_MAX - b->len - 1 ||
	    mr_grow_fast((void **)&b->data, &b->cap, b->len + len + 1, 1)) {
		b->failed = 1;
		return;
	}
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
}

void mr_buf_puts(mr_buf *b, const char *s)
{
	mr_buf_append(b, s, strlen(s));
}

void mr_buf_u64(mr_buf *b, uint64_t v)
{
	char d[20], *p = d + sizeof d;
	do {
		*--p = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	mr_buf_append(b, p, (size_t)(d + sizeof d - p));
}

void mr_buf_i64(mr_buf *b, int64_t v)
{
	if (v < 0)
		mr_buf_putc(b, '-');
	mr_buf_u64(b, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
}

/* "%.1f": the decimal nearest to v's exact value, an exact tie to the even digit, as glibc
 * rounds. v * 10 is exact in a long double of 64 or more mantissa bits (53 + 4 bits), so the
 * tie test is too; anything else (no such long double, huge or not finite) goes to printf. */
void mr_buf_fixed1(mr_buf *b, double v)
{
#if LDBL_MANT_DIG >= 57
	if (v > -1e15 && v < 1e15) {
		long double t = (long double)v * 10, a = t < 0 ? -t : t;
		uint64_t n = (uint64_t)a; /* floor of |v| * 10 */
		long double frac = a - (long double)n;
		if (frac > 0.5L || (frac == 0.5L && (n & 1)))
			n++;
		if (signbit(v))
			mr_buf_putc(b, '-'); /* printf keeps the sign of -0.0 and of -0.04 */
		mr_buf_u64(b, n / 10);
		char tail[2] = {'.', (char)('0' + n % 10)};
		mr_buf_append(b, tail, 2);
		return;
	}
#endif
	mr_buf_printf(b, "%.1f", v);
}

void mr_buf_vprintf(mr_buf *b, const char *fmt, va_list ap)
{
	char small[256];
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(small, sizeof small, fmt, ap);
	if (n < 0) {
		b->failed = 1;
	} else if ((size_t)n < sizeof small) {
		mr_buf_append(b, small, (size_t)n);
	} else if (!b->failed && !mr_grow((void **)&b->data, &b->cap, b->len + (size_t)n + 1, 1)) {
		vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
		b->len += (size_t)n;
	} else {
		b->failed = 1;
	}
	va_end(ap2);
}

void mr_buf_printf(mr_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	mr_buf_vprintf(b, fmt, ap);
	va_end(ap);
}

char *mr_format(const char *fmt, ...)
{
	mr_buf b = {0};
	va_list ap;
	va_start(ap, fmt);
	mr_buf_vprintf(&b, fmt, ap);
	va_end(ap);
	if (b.failed) {
		mr_buf_free(&b);
		return NULL;
	}
	return b.data ? b.data : mr_strndup("", 0);
}
