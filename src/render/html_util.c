/* html_util.c: escaping with caps, template placeholders, SHA-256 for CSP hashes. */
#include "render/html_util.h"

#include <string.h>

#include "base/buf.h"
#include "base/escape.h"
#include "base/mem.h"

/* Largest n <= max such that s[0..n) does not end inside a UTF-8 sequence. */
static size_t utf8_cut(const char *s, size_t len, size_t max)
{
	if (len <= max)
		return len;
	size_t n = max;
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return n;
}

void hu_text(mr_buf *b, const char *s, size_t max)
{
	size_t len = strlen(s), n = utf8_cut(s, len, max);
	mr_buf_html(b, s, n);
	if (n < len)
		mr_buf_puts(b, "\xe2\x80\xa6");
}

/* GitHub links text twice: while parsing (GFM's autolink extension: `https://`, `http://`,
 * `ftp://`, `www.`, mail addresses) and after it, on the parsed text where backslash escapes
 * and entities no longer count (`@user` pings, `#12` and `GH-12` cross-link, mail addresses).
 * What breaks both is a character inside the pattern: a word joiner (U+2060, invisible, written
 * as an entity so the Markdown stays ASCII). md_link_break returns how many bytes at s[i] to
 * write before it, or 0 when nothing there would become a link. */
#define MD_WORD_JOINER "&#x2060;"

static int md_is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static int md_at_ci(const char *s, size_t i, size_t n, const char *lit)
{
	size_t k = strlen(lit);
	if (n - i < k)
		return 0;
	for (size_t j = 0; j < k; j++)
		if ((s[i + j] | 0x20) != lit[j])
			return 0;
	return 1;
}

static size_t md_link_break(const char *s, size_t i, size_t n)
{
	char c = s[i], next = i + 1 < n ? s[i + 1] : '\0';
	if (c == '@' && md_is_alnum(next))
		return 1; /* @user, user@host.org */
	if (c == '#' && next >= '0' && next <= '9')
		return 1; /* #12, owner/repo#12 */
	if (c == ':' && next == '/' && i + 2 < n && s[i + 2] == '/')
		return 1; /* https://, ftp://, any scheme */
	if ((c | 0x20) == 'w' && md_at_ci(s, i, n, "www."))
		return 3;
	if ((c | 0x20) == 'g' && md_at_ci(s, i, n, "gh-") && i + 3 < n && s[i + 3] >= '0' &&
	    s[i + 3] <= '9')
		return 2;
	return 0;
}

void hu_md_text(mr_buf *b, const char *s, size_t max)
{
	size_t len = strlen(s), n = utf8_cut(s, len, max), run = 0;
	for (size_t i = 0; i < n;) {
		char c = s[i];
		size_t bidi = (unsigned char)c >= 0x80 ? mr_bidi_control_len(s + i, n - i) : 0;
		size_t brk = bidi ? 0 : md_link_break(s, i, n);
		int punct = strchr("\\`*_[]|~", c) != NULL;
		int html = strchr("<>&", c) != NULL;
		int space = c == '\n' || c == '\r' || c == '\t';
		if (!bidi && !brk && !punct && !html && !space) {
			i++;
			continue;
		}
		mr_buf_html_text(b, s + run,
		                 i - run); /* plain text: validates UTF-8, drops controls */
		if (bidi) {
			mr_buf_puts(b, "\xEF\xBF\xBD");
			i += bidi;
		} else if (brk) {
			mr_buf_append(b, s + i, brk);
			mr_buf_puts(b, MD_WORD_JOINER);
			i += brk;
		} else {
			if (space)
				mr_buf_putc(b, ' ');
			else if (html)
				mr_buf_html_text(b, s + i, 1);
			else {
				mr_buf_putc(b, '\\');
				mr_buf_putc(b, c);
			}
			i++;
		}
		run = i;
	}
	mr_buf_html_text(b, s + run, n - run);
	if (n < len)
		mr_buf_puts(b, "\xe2\x80\xa6");
}

void hu_fill(mr_buf *b, const char *tmpl, size_t len, const hu_slot *slots, size_t nslots)
{
	size_t i = 0, run = 0;
	while (i + 1 < len) {
		if (tmpl[i] != '{' || tmpl[i + 1] != '{') {
			i++;
			continue;
		}
		const char *end = memchr(tmpl + i + 2, '}', len - i - 2);
		if (!end || (size_t)(end - tmpl) + 1 >= len || end[1] != '}' ||
		    (size_t)(end - tmpl) - i - 2 > 40) {
			i++;
			continue;
		}
		size_t nlen = (size_t)(end - tmpl) - i - 2;
		mr_buf_append(b, tmpl + run, i - run);
		for (size_t k = 0; k < nslots; k++) {
			if (strlen(slots[k].name) == nlen &&
			    memcmp(slots[k].name, tmpl + i + 2, nlen) == 0) {
				mr_buf_append(b, slots[k].value, slots[k].len);
				break;
			}
		}
		i = (size_t)(end - tmpl) + 2;
		run = i;
	}
	mr_buf_append(b, tmpl + run, len - run);
}

void hu_moment_name(mr_buf *b, const an_moments *m, size_t k)
{
	int n = 0;
	for (size_t i = 0; i < m->mark_count; i++) {
		const an_mark *mk = &m->marks[i];
		if (mk->moment != k)
			continue;
		mr_buf_puts(b, n++ ? " and " : "");
		switch (mk->kind) {
		case AN_MARK_PEAK: mr_buf_puts(b, "the peak"); break;
		case AN_MARK_OOM: mr_buf_puts(b, "the out-of-memory moment"); break;
		case AN_MARK_ITERATION: mr_buf_printf(b, "the end of iteration %zu", mk->n); break;
		default: mr_buf_puts(b, "the snapshot"); break;
		}
	}
	if (!n)
		mr_buf_puts(b, "the snapshot"); /* a device without a trace: its only moment */
}
