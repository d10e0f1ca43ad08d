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
/* A terminal: control characters (an ESC sequence in a stranger's function name would drive
 * the terminal), DEL and C1 controls become U+FFFD. */
void mr_buf_plain(mr_buf *b, const char *s, size_t len);
/* In place, one '?' per byte, so the length stays: what a terminal would act on (control
 * characters, newlines and ESC included, DEL, C1 controls, bidirectional overrides) and invalid
 * UTF-8. A message that quotes a path or a name from an input (a file name, a zip member, a
 * dict key) stays one harmless line. The one helper for every message that names an input. */
void mr_one_line(char *s);
/* A JSON string body (without the quotes); '<' is written \u003c so that "</script>" stays
 * inert when the JSON is embedded in HTML. */
void mr_buf_json(mr_buf *b, const char *s, size_t len);
/* The one JSON string writer: s quoted and escaped, or null when s is NULL. */
void mr_json_str(mr_buf *b, const char *s);

#endif
