/* run_input.h: the evidence of one run as the command line names it, for `memreport INPUT...`
 * and each side of `memreport diff`: files (a snapshot, logs, summaries, a stats dump), or one
 * run folder or zip archive given alone, found with the discovery batch uses (load/discover.h).
 * A folder or zip that holds several runs is refused (MR_EINPUT), naming a few of them.
 *
 * In three steps, so that the guard runs before anything is decoded: cmd_run_find (cheap: for a
 * folder or zip, discovery), cmd_run_guard (the output may not be any file the run reads:
 * base/output.h), cmd_run_load.
 *
 * Ownership: a cmd_run borrows the paths (argv) and owns what discovery found; cmd_run_free
 * releases it, and is safe after a failed find. cmd_run_load fills an ld_evidence that ld_free
 * releases. Nothing here prints.
 *
 * The evidence must also have the device --device names: cmd_run_check_device, once the run is
 * built. */
#ifndef MR_RUN_INPUT_H
#define MR_RUN_INPUT_H

#include <stddef.h>

#include "base/error.h"
#include "load/discover.h"
#include "load/load.h"
#include "report/report.h"
#include "source/limits.h"

typedef struct {
	const char *const *paths;
	size_t count;
	int container; /* paths[0] is a run folder or a zip archive: set holds its one run */
	ar_set set;
	sr_limits lim;
} cmd_run;

mr_status cmd_run_find(cmd_run *r, const char *const *paths, size_t count, mr_error *err);
/* MR_EINPUT when output is one of the inputs, or one of a folder's or zip's files. */
mr_status cmd_run_guard(const cmd_run *r, const char *output, mr_error *err);
/* progress may be NULL (it is not called for a folder or zip). */
mr_status cmd_run_load(const cmd_run *r, ld_progress_fn progress, void *progress_ctx,
                       ld_evidence *ev, mr_error *err);
void cmd_run_free(cmd_run *r);

/* --device N (device >= 0) must name a device of the report's evidence (a snapshot's devices,
 * or the devices its tables, stats and OOM messages name): MR_EINPUT otherwise, "no device 3 in
 * the evidence (it has devices 0, 1)". */
mr_status cmd_run_check_device(const rp_report *r, int device, mr_error *err);

#endif
