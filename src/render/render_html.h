/* render_html.h: the self-contained HTML report (render_html.c says what it holds and promises).
 *
 * Ownership: appends to a caller-owned mr_buf; reads the report. Nothing here prints. */
#ifndef MR_RENDER_HTML_H
#define MR_RENDER_HTML_H

#include "base/buf.h"
#include "base/error.h"
#include "render/options.h"
#include "report/report.h"

mr_status rd_render_html(const rp_report *run, const rd_options *opt, mr_buf *out, mr_error *err);

#endif
