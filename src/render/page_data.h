/* page_data.h: the data block the interactive page draws from, schema memreport-page/1
 * (docs/page-schema.md): per device the allocation timeline (bands, series, marks) and the
 * segments at its marked moments, and the shared tables of strings, frames and stacks.
 *
 * The block is JSON inside <script type="application/json" id="memreport-data">: compact,
 * integers only, with '<', '>' and '&' escaped everywhere so nothing in it can end or change
 * the element; strings from the snapshot obey --redact-paths. Output is deterministic.
 *
 * Ownership: appends to a caller-owned mr_buf; everything else it allocates is freed before it
 * returns. */
#ifndef MR_PAGE_DATA_H
#define MR_PAGE_DATA_H

#include <stddef.h>

#include "base/buf.h"
#include "base/error.h"
#include "render/options.h"
#include "report/report.h"
#include "report/view.h"

enum {
	PD_BAND_BUDGET = 40000, /* bands per page, shared by the devices that have a trace */
	PD_SERIES_POINTS = 2000,
	PD_MAX_FRAMES = 48, /* frames kept per stack, innermost first */
	PD_MIN_MARKS = 500, /* iteration ends still marked on a page too large for them all */
};

/* What rd_page_data wrote, against what the run has. */
typedef struct {
	size_t bands;                 /* bands written (every device) */
	size_t band_budget;           /* bands per page they were chosen under */
	size_t iteration_moments;     /* moments marking only an iteration end, written */
	size_t iteration_moments_all; /* ... that the analysis has */
	size_t iteration_marks;       /* iteration ends without a moment in the block, marked */
	size_t iteration_marks_all;   /* ... that there are */
	size_t left_out_bytes; /* nothing written: the smallest block tried had this many bytes */
} pd_fit;

/* Appends the whole <script> element for the devices of view (nothing when the run has no
 * snapshot), at most max_bytes long: past it, fewer moments at iteration ends, then fewer marks
 * of iteration ends without one (both evenly spaced, the last and the first kept longest),
 * then fewer bands; when even the least is too large, nothing (fit->left_out_bytes says how
 * large). *fit (may be NULL) says what was kept. */
mr_status rd_page_data(const rp_report *run, const rp_view *view, const rd_options *opt,
                       size_t max_bytes, pd_fit *fit, mr_buf *out, mr_error *err);

#endif
