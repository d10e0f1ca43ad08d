/* html_util.h: small helpers of the HTML, Markdown and text renderers: escaping with a length
 * cap, template placeholders, the names of moments.
 *
 * Ownership: functions append to caller-owned mr_bufs; nothing else is allocated. */
#ifndef MR_HTML_UTIL_H
#define MR_HTML_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "analyze/moments.h"
#include "base/buf.h"

/* Appends s escaped for HTML text or attribute values, cut to at most max bytes (at a UTF-8
 * boundary) with "…" appended when it was cut. */
void hu_text(mr_buf *b, const char *s, size_t max);

/* Appends s escaped for Markdown (GitHub): & < > become entities (quotes stay: Markdown text
 * is never an attribute value) and the inline Markdown punctuation (\\ ` * _ [ ] | ~) is
 * backslash-escaped, so text from a snapshot can neither start markup nor raw HTML. What
 * GitHub would link or ping (`https://`, `www.`, `@user`, `#12`, `GH-12`, mail addresses) gets
 * an invisible word joiner that breaks the pattern, and bidirectional controls become U+FFFD.
 * Newlines become spaces. Cut like hu_text. */
void hu_md_text(mr_buf *b, const char *s, size_t max);

/* A template placeholder: {{name}} in the template becomes value (inserted verbatim). */
typedef struct {
	const char *name;
	const char *value;
	size_t len;
} hu_slot;

/* Appends tmpl with every known {{name}} replaced; unknown placeholders are dropped. The
 * template is scanned once, left to right: inserted values are never scanned again. */
void hu_fill(mr_buf *b, const char *tmpl, size_t len, const hu_slot *slots, size_t nslots);

/* Appends the name of moment k of m as prose: "the out-of-memory moment", "the peak", "the end
 * of iteration 3", "the snapshot", joined with " and " when one moment is several. Plain
 * ASCII, no markup. */
void hu_moment_name(mr_buf *b, const an_moments *m, size_t k);

#endif
