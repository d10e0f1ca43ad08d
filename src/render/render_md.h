/* render_md.h: a Markdown summary of at most 60 lines for a GitHub issue.
 *
 * Ownership: appends to a caller-owned mr_buf; reads the report. Nothing here prints. */
#ifndef MR_RENDER_MD_H
#define MR_RENDER_MD_H

#include "base/buf.h"
#include "base/error.h"
#include "render/options.h"
#include "report/report.h"

mr_status rd_render_md(const rp_report *run, const rd_options *opt, mr_buf *out, mr_error *err);

#endif
