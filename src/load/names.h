/* names.h: what file and folder names say about a run (training frameworks' conventions), and
 * the names of the rows a batch lists.
 *
 * Ownership: ar_name_rows replaces the strings it renames (freeing the old ones). */
#ifndef MR_NAMES_H
#define MR_NAMES_H

#include <stddef.h>

#include "base/error.h"
#include "load/discover.h"

/* Rank named by a file or folder name ("snapshot_3.pickle", "oom_rank3.pickle", "rank3"):
 * returns it, or -1. */
int ar_rank_of(const char *name);
/* "iteration_100", "iteration-100", "iter_100", "step_100" (the first n bytes of comp): the
 * number, or -1. */
long ar_iteration_of(const char *comp, size_t n);
/* Makes row names unique (" (2)", ...) and gives every row a unique, safe slug. */
mr_status ar_name_rows(ar_set *set, mr_error *err);

#endif
