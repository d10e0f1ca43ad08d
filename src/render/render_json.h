/* render_json.h: the memreport/1 JSON document (../shared/CONTRACT.md).
 *
 * Ownership: appends to a caller-owned mr_buf; reads the report. Nothing here prints. */
#ifndef MR_RENDER_JSON_H
#define MR_RENDER_JSON_H

#include "base/buf.h"
#include "base/error.h"
#include "render/options.h"
#include "report/report.h"

mr_status rd_render_json(const rp_report *run, const rd_options *opt, mr_buf *out, mr_error *err);

#endif
