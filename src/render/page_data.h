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
};

/* Appends the whole <script> element for the devices of view (nothing when the run has no
 * snapshot). band_budget: bands per page (0: PD_BAND_BUDGET); *bands_written gets how many
 * were written (may be NULL). */
mr_status rd_page_data(const rp_report *run, const rp_view *view, const rd_options *opt,
                       size_t band_budget, size_t *bands_written, mr_buf *out, mr_error *err);

#endif
