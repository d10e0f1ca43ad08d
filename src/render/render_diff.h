/* render_diff.h: the result of report/diff.h as memreport-diff/1 JSON (before, after, delta,
 * top_changes) and as a self-contained HTML page.
 *
 * Ownership: appends to a caller-owned mr_buf; reads the diff and the two reports. */
#ifndef MR_RENDER_DIFF_H
#define MR_RENDER_DIFF_H

#include <stddef.h>

#include "base/buf.h"
#include "base/error.h"
#include "render/options.h"
#include "report/diff.h"
#include "report/report.h"

/* memreport-diff/1 JSON, and a self-contained HTML page. max_changes limits the listed
 * changes (0: all). */
mr_status rd_diff_json(const df_result *d, const rp_report *before, const rp_report *after,
                       const rd_options *opt, size_t max_changes, mr_buf *out, mr_error *err);
mr_status rd_diff_html(const df_result *d, const rp_report *before, const rp_report *after,
                       const rd_options *opt, size_t max_changes, mr_buf *out, mr_error *err);

/* The site a change is shown as ("file:line in name", the file name redacted when asked);
 * the caller frees it (NULL when memory runs out). */
char *rd_diff_site(const df_change *c, const rd_options *opt);

#endif
