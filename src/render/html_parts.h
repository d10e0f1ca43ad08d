/* html_parts.h: the pieces of the HTML report (render_html.c) that its files share: the
 * context every section writes through, the page's size caps, and the small helpers. Internal
 * to render/.
 *
 * Ownership: an hr_ctx borrows everything it points to; its left_out buffer belongs to the
 * page being written. */
#ifndef MR_HTML_PARTS_H
#define MR_HTML_PARTS_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "model/model.h"
#include "render/options.h"
#include "report/report.h"
#include "report/view.h"

enum {
	RP_HTML_MAX = 3000000,    /* the promise: never more than this */
	RP_HTML_BUDGET = 2300000, /* optional sections stop here; what follows is capped */
	RP_DATA_MAX = 1600000,    /* the interactive page's data block: fewer bands past it */
	HR_SCRIPT_BYTES = 60000,  /* room for timeline.js and timeline.css */
	HR_TEXT_CAP = 200,        /* bytes of one name, file name or setting shown */
	HR_MAX_SITES = 40,        /* allocation sites per device */
	HR_MAX_STACKS = 6,        /* distinct stacks shown per site */
	HR_MAX_FRAMES = 24,       /* frames shown per stack */
	HR_MAX_MAP_ROWS = 48,     /* segments drawn one by one per device */
	HR_MAX_MAP_GROUPS = 24,   /* aggregate rows for the remaining segments */
	HR_MAX_FINDINGS = 50,
	HR_MAX_SETTINGS = 32,
	HR_MAP_WIDTH = 640,
	HR_MAP_HEIGHT = 14,  /* drawn height (CSS px); every row of a map is the same */
	HR_MAP_PNG_ROWS = 1, /* so the PNG holds one row and is stretched, pixelated */
};

typedef struct {
	const rp_report *run;
	const rd_options *opt;
	const rp_view *view; /* the devices shown */
	const md_snapshot *s;
	mr_buf *b;       /* the page body */
	mr_buf left_out; /* <li> notes about capped sections */
	size_t fixed;    /* bytes the page holds outside the body: its data block, scripts */
	mr_error *err;
	mr_status st; /* first failure of a helper that cannot return one */
} hr_ctx;

/* The OOM facts the page shows: from the diagnosis, else from the trace. */
typedef struct {
	int present;
	int32_t device;
	uint64_t requested, largest_free, free_cached, free_pieces, limit, reserved, allocated;
	const char *cause;   /* NULL when unknown */
	int largest_unknown; /* a log alone: the free blocks' layout was not recorded */
} hr_oom;

/* Text from the inputs, escaped and cut to HR_TEXT_CAP bytes. */
void hr_text(hr_ctx *c, const char *s);
const char *hr_bytes(char out[32], uint64_t v);
/* A note for the "left out to keep this page under 3 MB" list. */
void hr_left_out(hr_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Optional sections stop once the page is this large (RP_HTML_BUDGET). */
int hr_over_budget(const hr_ctx *c);
/* A file path as the page shows it (--redact-paths), escaped. */
void hr_path_text(hr_ctx *c, const char *path);
/* A frame: its function name and file:line. */
void hr_frame_html(hr_ctx *c, const md_frame *f);
void hr_stream_label(char out[40], uint64_t stream);

#endif
