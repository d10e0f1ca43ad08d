/* cmd_merge.h: `memreport merge DIR`, and the index of a batch written from its rows (the one
 * function an unsharded batch and a merge both go through). */
#ifndef MR_CMD_MERGE_H
#define MR_CMD_MERGE_H

#include <stddef.h>

#include "base/error.h"

#include "cmd/shard_index.h"

int cmd_merge(int argc, char **argv);

/* Writes DIR/index.json and DIR/index.html from rows[0..n) (every run of a batch, in position
 * order). Returns 0, or MR_EFAIL after saying why. */
int cmd_write_index(const char *out_dir, const sx_row *const *rows, size_t n);

/* Writes the file (out_replace) unless it already holds exactly these bytes: a batch re-run
 * over unchanged runs then creates no files (creating them is most of what a cached run
 * costs). */
mr_status cmd_write_if_changed(const char *path, const char *data, size_t len, mr_error *err);

/* The exit status the rows make (as batch's): 1 when a run failed for memreport's reasons,
 * else 2 when a run's input was unusable or there were no runs, else 0. */
int cmd_rows_status(const sx_row *const *rows, size_t n);

#endif
