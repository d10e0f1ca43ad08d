/* members.h: the bytes of a run's members (plain files and zip members), within the limits.
 *
 * A reader keeps the archive it opened last, so that the rows of one zip do not reopen it (and
 * re-parse its central directory) one by one. It is not shared between threads: one per
 * worker. The functions accept a NULL reader for a one-off read.
 *
 * Inflated zip members are heap memory: every sr_read of the process draws the declared sizes
 * of its zip members from one budget (sr_limits.max_inflight_bytes) and gives them back in
 * sr_contents_free, waiting while other reads hold it. Hold at most one sr_contents per thread
 * at a time.
 *
 * Ownership: sr_read fills an sr_contents that sr_contents_free releases (the names stay
 * borrowed from the members). Nothing here prints. */
#ifndef MR_MEMBERS_H
#define MR_MEMBERS_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/hash128.h"
#include "source/limits.h"

typedef struct {
	char *name;        /* "<run label>/<path inside the input>": what reports show */
	char *path;        /* the file on disk: the member itself, or its zip archive */
	int64_t zip_index; /* -1 for a plain file, else the member's index in the archive */
	uint64_t size;     /* bytes (as declared, for zip members) */
} sr_member;

typedef struct sr_reader sr_reader;
sr_reader *sr_reader_new(void); /* NULL when memory runs out */
void sr_reader_free(sr_reader *rd);

/* The bytes of members[0..n), in order. */
typedef struct {
	const char **names; /* borrowed from the members */
	const uint8_t **data;
	size_t *lens;
	size_t count;
	void *owned; /* private: mappings and heap copies */
} sr_contents;

/* Reads every member; a failure names the member. */
mr_status sr_read(sr_reader *rd, const sr_member *members, size_t n, const sr_limits *lim,
                  sr_contents *out, mr_error *err);
/* After the bytes were used: MR_EINPUT naming the member when a file (or the archive it came
 * from) changed while being read (source/input.h, in_check). */
mr_status sr_contents_check(const sr_contents *c, mr_error *err);
void sr_contents_free(sr_contents *c);

/* Adds the content of every member to h, cheaply: plain files by their bytes, zip members by
 * their stored (compressed) bytes with method, CRC and size, so nothing is inflated. The same
 * bytes give the same digest wherever the run lies. */
mr_status sr_digest(sr_reader *rd, const sr_member *members, size_t n, const sr_limits *lim,
                    h128_state *h, mr_error *err);

#endif
