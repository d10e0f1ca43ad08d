/* util.c: errors, growable buffers, escaping and size formatting. */
#include "base/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mr_status mr_fail(mr_error *err, mr_status status, const char *fmt, ...)
{
	if (err && err->status == MR_OK) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err->msg, sizeof err->msg, fmt, ap);
		va_end(ap);
		err->status = status;
	}
	return status;
}

void mr_one_line(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

mr_status mr_oom(mr_error *err)
{
	return mr_fail(err, MR_EFAIL, "out of memory");
}

void *mr_alloc_array(size_t count, size_t size)
{
	if (size && count > SIZE_MAX / size)
		return NULL;
	return calloc(count ? count : 1, size ? size : 1);
}

void *mr_realloc_array(void *ptr, size_t count, size_t size)
{
	if (size && count > SIZE_MAX / size)
		return NULL;
	size_t bytes = count * size;
	return realloc(ptr, bytes ? bytes : 1);
}

char *mr_strndup(const char *s, size_t n)
{
	char *p = malloc(n + 1);
	if (!p)
		return NULL;
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

int mr_grow(void **items, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap : 16;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return -1;
		ncap *= 2;
	}
	void *p = mr_realloc_array(*items, ncap, size);
	if (!p)
		return -1;
	*items = p;
	*cap = ncap;
	return 0;
}

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

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 when it is invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned min;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF) {
		len = 2;
		min = 0x80;
	} else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		min = 0x800;
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	unsigned cp = c & (0x7F >> len);
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return len;
}

void mr_buf_html(mr_buf *b, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, run = 0;
	while (i < len) {
		const char *rep = NULL;
		size_t n = 1;
		switch (p[i]) {
		case '&': rep = "&amp;"; break;
		case '<': rep = "&lt;"; break;
		case '>': rep = "&gt;"; break;
		case '"': rep = "&quot;"; break;
		case '\'': rep = "&#39;"; break;
		default:
			if (p[i] < 0x20 && p[i] != '\n' && p[i] != '\t')
				rep = "\xEF\xBF\xBD";
			else if ((n = utf8_len(p + i, len - i)) == 0) {
				rep = "\xEF\xBF\xBD";
				n = 1;
			}
		}
		if (rep) {
			mr_buf_append(b, s + run, i - run);
			mr_buf_puts(b, rep);
			i += n;
			run = i;
		} else {
			i += n;
		}
	}
	mr_buf_append(b, s + run, i - run);
}

void mr_buf_plain(mr_buf *b, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, run = 0;
	while (i < len) {
		size_t n = utf8_len(p + i, len - i);
		int bad = n == 0 || p[i] < 0x20 || p[i] == 0x7F ||
		          (n == 2 && p[i] == 0xC2 && p[i + 1] < 0xA0); /* C1 controls */
		if (bad) {
			mr_buf_append(b, s + run, i - run);
			mr_buf_puts(b, "\xEF\xBF\xBD");
			i += n ? n : 1;
			run = i;
		} else {
			i += n;
		}
	}
	mr_buf_append(b, s + run, i - run);
}

void mr_buf_json(mr_buf *b, const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, run = 0;
	while (i < len) {
		char esc[8];
		const char *rep = NULL;
		size_t n = 1;
		if (p[i] == '"')
			rep = "\\\"";
		else if (p[i] == '\\')
			rep = "\\\\";
		else if (p[i] == '\n')
			rep = "\\n";
		else if (p[i] == '\t')
			rep = "\\t";
		else if (p[i] < 0x20 || p[i] == 0x7F) {
			snprintf(esc, sizeof esc, "\\u%04x", p[i]);
			rep = esc;
		} else if (p[i] == '<') {
			rep = "\\u003c"; /* keeps "</script>" inert when JSON is embedded in HTML */
		} else if ((n = utf8_len(p + i, len - i)) == 0) {
			rep = "\\ufffd";
			n = 1;
		}
		if (rep) {
			mr_buf_append(b, s + run, i - run);
			mr_buf_puts(b, rep);
			i += n;
			run = i;
		} else {
			i += n;
		}
	}
	mr_buf_append(b, s + run, i - run);
}

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
	if (end == s || errno || v < 0)
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
	if (bytes >= 18446744073709551615.0)
		return -1;
	*out = (uint64_t)bytes;
	return 0;
}
