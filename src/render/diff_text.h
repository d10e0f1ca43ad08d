/* diff_text.h: the diff of two runs (report/diff.h) as Markdown for a ticket and as text for a
 * terminal: the allocator settings that changed, both runs at their peaks, the sites that
 * changed at the peak, the totals and the sites at the end. Strings from the snapshots are
 * escaped for the format (hu_md_text, mr_buf_plain) and obey --redact-paths.
 *
 * Ownership: appends to a caller-owned mr_buf. */
#ifndef MR_DIFF_TEXT_H
#define MR_DIFF_TEXT_H

#include <stddef.h>

#include "base/buf.h"
#include "base/error.h"
#include "render/options.h"
#include "report/diff.h"
#include "report/report.h"

/* max_changes: sites listed per moment (0: all). */
mr_status rd_diff_md(const df_result *d, const rp_report *before, const rp_report *after,
                     const rd_options *opt, size_t max_changes, mr_buf *out, mr_error *err);
mr_status rd_diff_text(const df_result *d, const rp_report *before, const rp_report *after,
                       const rd_options *opt, size_t max_changes, mr_buf *out, mr_error *err);

#endif
