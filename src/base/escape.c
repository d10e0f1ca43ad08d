/* escape.c: one scanning loop, three rules (HTML, terminal, JSON). */
#include "base/escape.h"

#include <stdio.h>
#include <string.h>

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

#define REPLACEMENT "\xEF\xBF\xBD"

/* A rule looks at the bytes at p (left of them remain): it sets *n to how many it covers and
 * returns their replacement, or NULL to copy them as they are. tmp is scratch for the text. */
typedef const char *escape_rule(const unsigned char *p, size_t left, size_t *n, char tmp[8]);

static void escape(mr_buf *b, const char *s, size_t len, escape_rule *rule)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, run = 0;
	while (i < len) {
		char tmp[8];
		size_t n = 1;
		const char *rep = rule(p + i, len - i, &n, tmp);
		i += n;
		if (rep) {
			mr_buf_append(b, s + run, i - n - run);
			mr_buf_puts(b, rep);
			run = i;
		}
	}
	mr_buf_append(b, s + run, i - run);
}

/* & < > as entities, quotes too when `quotes` is set; controls and invalid UTF-8 as U+FFFD. */
static const char *html_common(const unsigned char *p, size_t left, size_t *n, int quotes)
{
	*n = 1;
	switch (*p) {
	case '&': return "&amp;";
	case '<': return "&lt;";
	case '>': return "&gt;";
	case '"': return quotes ? "&quot;" : NULL;
	case '\'': return quotes ? "&#39;" : NULL;
	default: break;
	}
	if (*p < 0x20 && *p != '\n' && *p != '\t')
		return REPLACEMENT;
	if ((*n = utf8_len(p, left)) == 0) {
		*n = 1;
		return REPLACEMENT;
	}
	return NULL;
}

static const char *html_rule(const unsigned char *p, size_t left, size_t *n, char tmp[8])
{
	(void)tmp;
	return html_common(p, left, n, 1);
}

static const char *text_rule(const unsigned char *p, size_t left, size_t *n, char tmp[8])
{
	(void)tmp;
	return html_common(p, left, n, 0);
}

size_t mr_bidi_control_len(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	if (n >= 2 && p[0] == 0xD8 && p[1] == 0x9C)
		return 2; /* U+061C ARABIC LETTER MARK */
	if (n < 3 || p[0] != 0xE2)
		return 0;
	if (p[1] == 0x80 && (p[2] == 0x8E || p[2] == 0x8F || (p[2] >= 0xAA && p[2] <= 0xAE)))
		return 3; /* U+200E, U+200F, U+202A..U+202E */
	if (p[1] == 0x81 && p[2] >= 0xA6 && p[2] <= 0xA9)
		return 3; /* U+2066..U+2069 */
	return 0;
}

static const char *plain_rule(const unsigned char *p, size_t left, size_t *n, char tmp[8])
{
	(void)tmp;
	size_t len = utf8_len(p, left);
	*n = len ? len : 1;
	if (len == 0 || *p < 0x20 || *p == 0x7F || (len == 2 && p[0] == 0xC2 && p[1] < 0xA0))
		return REPLACEMENT; /* the last: C1 controls */
	if (len > 1 && mr_bidi_control_len((const char *)p, len))
		return REPLACEMENT;
	return NULL;
}

static const char *json_rule(const unsigned char *p, size_t left, size_t *n, char tmp[8])
{
	*n = 1;
	switch (*p) {
	case '"': return "\\\"";
	case '\\': return "\\\\";
	case '\n': return "\\n";
	case '\t': return "\\t";
	case '<': return "\\u003c";
	case '>': return "\\u003e";
	case '&': return "\\u0026";
	default: break;
	}
	if (*p < 0x20 || *p == 0x7F) {
		snprintf(tmp, 8, "\\u%04x", *p);
		return tmp;
	}
	if ((*n = utf8_len(p, left)) == 0) {
		*n = 1;
		return "\\ufffd";
	}
	return NULL;
}

void mr_buf_html(mr_buf *b, const char *s, size_t len)
{
	escape(b, s, len, html_rule);
}

void mr_buf_html_text(mr_buf *b, const char *s, size_t len)
{
	escape(b, s, len, text_rule);
}

void mr_buf_plain(mr_buf *b, const char *s, size_t len)
{
	escape(b, s, len, plain_rule);
}

/* U+202A..U+202E and U+2066..U+2069: they reorder what follows them on the line. */
static int is_bidi_control(const unsigned char *p, size_t len)
{
	return len == 3 && p[0] == 0xE2 &&
	       ((p[1] == 0x80 && p[2] >= 0xAA && p[2] <= 0xAE) ||
	        (p[1] == 0x81 && p[2] >= 0xA6 && p[2] <= 0xA9));
}

void mr_one_line(char *s)
{
	unsigned char *p = (unsigned char *)s;
	size_t left = strlen(s);
	while (left) {
		size_t len = utf8_len(p, left);
		int bad = len == 0 || *p < 0x20 || *p == 0x7F ||
		          (len == 2 && p[0] == 0xC2 && p[1] < 0xA0) || is_bidi_control(p, len);
		if (len == 0)
			len = 1;
		if (bad)
			memset(p, '?', len);
		p += len;
		left -= len;
	}
}

void mr_buf_json(mr_buf *b, const char *s, size_t len)
{
	escape(b, s, len, json_rule);
}

void mr_json_str(mr_buf *b, const char *s)
{
	if (!s) {
		mr_buf_puts(b, "null");
		return;
	}
	mr_buf_putc(b, '"');
	mr_buf_json(b, s, strlen(s));
	mr_buf_putc(b, '"');
}
