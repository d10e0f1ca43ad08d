/* render_text.h: a summary for a terminal: every string from the inputs made harmless (no control
 * characters).
 *
 * Ownership: appends to a caller-owned mr_buf; reads the report. Nothing here prints. */
#ifndef MR_RENDER_TEXT_H
#define MR_RENDER_TEXT_H

#include "base/buf.h"
#include "base/error.h"
#include "render/options.h"
#include "report/report.h"

mr_status rd_render_text(const rp_report *run, const rd_options *opt, mr_buf *out, mr_error *err);

#endif
