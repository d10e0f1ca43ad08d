/* render_text.h: a summary for a terminal: every string from the inputs made harmless (no control
 * characters), every line at most RD_TEXT_COLUMNS characters wide.
 *
 * Ownership: appends to a caller-owned mr_buf; reads the report. Nothing here prints. */
#ifndef MR_RENDER_TEXT_H
#define MR_RENDER_TEXT_H

#include "base/buf.h"
#include "base/error.h"
#include "render/options.h"
#include "report/report.h"

enum { RD_TEXT_COLUMNS = 80 };

mr_status rd_render_text(const rp_report *run, const rd_options *opt, mr_buf *out, mr_error *err);

/* Appends text[0..len) with every line longer than `columns` characters (UTF-8 characters, not
 * bytes) broken at its last space that fits, or inside a word longer than the line; the rest
 * continues two columns deeper than the line's own indentation. Shorter lines are copied as
 * they are. For every text memreport prints for a terminal (the text report, simulate). */
void rd_wrap(mr_buf *out, const char *text, size_t len, size_t columns);

#endif
