/* archive.h: finding the runs in batch inputs (run folders, single files, zip archives), and
 * reading a run's members.
 *
 * Discovery walks folders (iteratively, not following links to folders) and lists zip members
 * (libzip), sniffs every file's kind from its first bytes (never from its name), and groups the
 * files of one run: the files of one folder are one run; the naming conventions of training
 * frameworks split a folder into ranks (`snapshot_{rank}.pickle`, `oom_rank{N}.pickle`,
 * `rank{N}/` folders) and `iteration_N/` folders into moments of one run. Each resulting row is
 * one report.
 *
 * Archives are hostile until proven otherwise: member sizes, the total size and the number of
 * members are capped (ar_limits), a member may not inflate past its declared size or an absurd
 * ratio, and a member name that is absolute or climbs out with `..` makes its row an error
 * instead of being read. Output names (ar_run.slug) are built from [A-Za-z0-9._-] only.
 *
 * Ownership: ar_discover fills an ar_set that ar_set_free releases; ar_read fills an
 * ar_contents that ar_contents_free releases. Nothing here prints. Reading is thread-safe:
 * each call opens the archive it needs. */
#ifndef MR_ARCHIVE_H
#define MR_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/hash128.h"
#include "load/load.h"

typedef struct {
	char *name;        /* "<run label>/<path inside the input>": what reports show */
	char *path;        /* the file on disk: the member itself, or its zip archive */
	int64_t zip_index; /* -1 for a plain file, else the member's index in the archive */
	uint64_t size;     /* bytes (as declared, for zip members) */
} ar_member;

typedef struct {
	char *name;     /* row name: "<run>[/iteration_N][ rank R][ (file)]" */
	char *group;    /* the run the row belongs to: the same for every rank and iteration */
	int rank;       /* -1 when unknown */
	long iteration; /* -1 when unknown */
	char *slug;     /* unique output stem, [A-Za-z0-9._-], never "index" */
	ar_member *members;
	size_t member_count;
	char *error; /* set when discovery already knows the row is unusable */
	mr_status error_status;
} ar_run;

typedef struct {
	ar_run *runs;
	size_t count;
} ar_set;

typedef struct {
	uint64_t max_member_bytes; /* one member, inflated */
	uint64_t max_total_bytes;  /* all members of one archive, inflated (declared sizes) */
	uint64_t max_ratio;        /* inflated / compressed, for members over 1 MiB */
	size_t max_members;        /* entries of one archive */
	size_t max_depth;          /* folder depth of a walk */
	/* Folders a walk does not enter (the batch's output and cache folders, when they lie
	 * inside an input), as (device, inode) pairs. */
	uint64_t skip_dev[2], skip_ino[2];
	size_t skip_count;
} ar_limits;

/* 2 GiB per member, 64 GiB per archive, ratio 1000, 100 000 entries, depth 32, no skips. */
void ar_default_limits(ar_limits *lim);
/* Adds a folder to skip; ignored when it does not exist or two are set already. */
void ar_skip_folder(ar_limits *lim, const char *path);

/* Finds the runs of every input, in input order, then path order. An input that cannot be read
 * (missing, a corrupt archive) becomes a row with its error; only running out of memory fails
 * the call. */
mr_status ar_discover(const char *const *inputs, size_t count, const ar_limits *lim, ar_set *out,
                      mr_error *err);
void ar_set_free(ar_set *set);

/* A reader keeps the archive it opened last, so that the rows of one zip do not reopen it (and
 * re-parse its central directory) one by one. Not shared between threads: one per worker.
 * Functions below accept NULL for a one-off reader. */
typedef struct ar_reader ar_reader;
ar_reader *ar_reader_new(void); /* NULL when memory runs out */
void ar_reader_free(ar_reader *rd);

/* The bytes of a row's members, in member order. */
typedef struct {
	const char **names; /* borrowed from the ar_run */
	const uint8_t **data;
	size_t *lens;
	size_t count;
	void *owned; /* private: mappings and heap copies */
} ar_contents;

mr_status ar_read(ar_reader *rd, const ar_run *run, const ar_limits *lim, ar_contents *out,
                  mr_error *err);
void ar_contents_free(ar_contents *c);

/* Adds the content of every member of the row to h, cheaply: plain files by their bytes, zip
 * members by their stored (compressed) bytes with method, CRC and size, so nothing is
 * inflated. The same bytes give the same digest wherever the run lies. */
mr_status ar_digest(ar_reader *rd, const ar_run *run, const ar_limits *lim, h128_state *h,
                    mr_error *err);

/* Reads and loads a row into *out (see ld_load_buffers). */
mr_status ar_load(ar_reader *rd, const ar_run *run, const ar_limits *lim, ld_evidence *out,
                  mr_error *err);

/* Helpers exposed for the tests. */
/* Rank named by a file or folder name ("snapshot_3.pickle", "oom_rank3.pickle", "rank3"):
 * returns it, or -1. */
int ar_rank_of(const char *name);
/* 1 when a member name is absolute, has a drive letter, or has a ".." component. */
int ar_name_unsafe(const char *name);

#endif
