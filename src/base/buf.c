/* buf.c: the growable byte buffer. */
#include "base/buf.h"

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
	    mr_grow((void **)&b->data, &b->cap, b->len + len + 1, 1)) {
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

void mr_buf_putc(mr_buf *b, char c)
{
	mr_buf_append(b, &c, 1);
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
