/* discover.h: finding the runs in batch inputs (run folders, single files, zip archives), and
 * loading one.
 *
 * Discovery walks folders (iteratively, not following links to folders) and lists zip members
 * (libzip), sniffs every file's kind from its first bytes (never from its name), and groups the
 * files of one run: the files of one folder are one run; the naming conventions of training
 * frameworks split a folder into ranks (`snapshot_{rank}.pickle`, `oom_rank{N}.pickle`,
 * `rank{N}/` folders) and `iteration_N/` folders into moments of one run. Each resulting row is
 * one report.
 *
 * The bytes come from source/ (walk.h, zip.h, members.h) within its limits; a member name that
 * is absolute or climbs out with `..` makes its row an error instead of being read. Output
 * names (ar_run.slug) are built from [A-Za-z0-9._-] only (names.h).
 *
 * Ownership: ar_discover fills an ar_set that ar_set_free releases. Nothing here prints. */
#ifndef MR_DISCOVER_H
#define MR_DISCOVER_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "load/load.h"
#include "source/limits.h"
#include "source/members.h"

typedef struct {
	char *name;      /* row name: "<run>[/iteration_N][ rank R][ (file)]" */
	char *group;     /* the run the row belongs to: the same for every rank and iteration */
	size_t input_no; /* the input it was found in: inputs[input_no] of ar_discover */
	int rank;        /* -1 when unknown */
	long iteration;  /* -1 when unknown */
	char *slug;      /* unique output stem, [A-Za-z0-9._-], never "index" */
	sr_member *members;
	size_t member_count;
	char *error; /* set when discovery already knows the row is unusable */
	mr_status error_status;
} ar_run;

typedef struct {
	ar_run *runs;
	size_t count;
} ar_set;

/* Finds the runs of every input, in input order, then path order. An input that cannot be read
 * (missing, a corrupt archive) becomes a row with its error; only running out of memory fails
 * the call. */
mr_status ar_discover(const char *const *inputs, size_t count, const sr_limits *lim, ar_set *out,
                      mr_error *err);
void ar_set_free(ar_set *set);

/* Reads a row's members (rd may be NULL) and loads them as one run (ld_load_buffers): a row
 * discovery already knew to be unusable fails with its error. Messages stay on one line. */
mr_status ar_load(sr_reader *rd, const ar_run *run, const sr_limits *lim, ld_evidence *out,
                  mr_error *err);

#endif
