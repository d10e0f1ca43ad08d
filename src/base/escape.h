/* escape.h: text from an input, made safe for the format it is written into. Every one of them
 * replaces invalid UTF-8 with U+FFFD, so a report stays well-formed whatever a snapshot holds.
 *
 * Ownership: each appends to a caller-owned mr_buf and allocates nothing else. */
#ifndef MR_ESCAPE_H
#define MR_ESCAPE_H

#include <stddef.h>

#include "base/buf.h"

/* HTML element content and attribute values (& < > " '); control characters other than
 * newline and tab become U+FFFD. */
void mr_buf_html(mr_buf *b, const char *s, size_t len);
/* The same for text that is only ever element content, never an attribute value (Markdown
 * prose): quotes stay as they are. */
void mr_buf_html_text(mr_buf *b, const char *s, size_t len);
/* A terminal: control characters (an ESC sequence in a stranger's function name would drive
 * the terminal), DEL, C1 controls and bidirectional controls become U+FFFD. */
void mr_buf_plain(mr_buf *b, const char *s, size_t len);
/* In place, one '?' per byte, so the length stays: what a terminal would act on (control
 * characters, newlines and ESC included, DEL, C1 controls, bidirectional overrides) and invalid
 * UTF-8. A message that quotes a path or a name from an input (a file name, a zip member, a
 * dict key) stays one harmless line. The one helper for every message that names an input. */
void mr_one_line(char *s);

/* The length of the bidirectional control at s (at most n bytes: U+061C, U+200E, U+200F,
 * U+202A to U+202E, U+2066 to U+2069), or 0. Such a character reorders the text around it on
 * screen: a right-to-left override in a frame name makes it read as another. */
size_t mr_bidi_control_len(const char *s, size_t n);
/* A JSON string body (without the quotes); '<', '>' and '&' are written \u003c, \u003e and
 * \u0026, so that neither "</script>" nor "<!--" can end or change a <script> element the
 * JSON is embedded in. */
void mr_buf_json(mr_buf *b, const char *s, size_t len);
/* The one JSON string writer: s quoted and escaped, or null when s is NULL. */
void mr_json_str(mr_buf *b, const char *s);

#endif
