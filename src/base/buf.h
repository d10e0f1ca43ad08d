/* buf.h: a growable byte buffer, always NUL-terminated after a successful append.
 *
 * Ownership: an mr_buf owns its bytes; mr_buf_free releases them. A zeroed mr_buf is empty and
 * valid. An allocation failure sets `failed`, after which appends do nothing: callers append
 * freely and check `failed` once at the end. */
#ifndef MR_BUF_H
#define MR_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
	char *data; /* NULL until the first append */
	size_t len, cap;
	int failed; /* set once an allocation failed; later appends are no-ops */
} mr_buf;

void mr_buf_free(mr_buf *b);
void mr_buf_append(mr_buf *b, const void *data, size_t len);
void mr_buf_puts(mr_buf *b, const char *s);
/* Inline: the page's data block puts millions of separators. */
static inline void mr_buf_putc(mr_buf *b, char c)
{
	if (b->data && b->len + 2 <= b->cap && !b->failed) {
		b->data[b->len++] = c;
		b->data[b->len] = '\0';
	} else {
		mr_buf_append(b, &c, 1);
	}
}
void mr_buf_printf(mr_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mr_buf_vprintf(mr_buf *b, const char *fmt, va_list ap);
/* The same bytes as "%" PRIu64, "%" PRId64 and "%.1f" print (the C locale's), without the cost
 * of a format string: the page's data block and the timeline print millions of numbers. */
void mr_buf_u64(mr_buf *b, uint64_t v);
void mr_buf_i64(mr_buf *b, int64_t v);
void mr_buf_fixed1(mr_buf *b, double v);

/* A formatted string of its own (the caller frees it); NULL when memory runs out. */
char *mr_format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
