/* zip.h: zip archives, read member by member within the limits (limits.h): libzip over a
 * mapping of the archive's bytes (libzip reading a file by path stats it again and again, once
 * per entry, which made cached batches of zips slow).
 *
 * Ownership: zp_open fills a zp_archive that zp_close releases; zp_read_member fills an
 * in_data that in_release frees. Nothing here prints. */
#ifndef MR_ZIP_H
#define MR_ZIP_H

#include <stddef.h>
#include <stdint.h>
#include <zip.h>

#include "base/error.h"
#include "source/input.h"
#include "source/limits.h"

typedef struct {
	zip_t *za;
	in_data map;
} zp_archive;

/* Opens the archive at path. MR_EINPUT with libzip's words when it is not one. */
mr_status zp_open(zp_archive *a, const char *path, mr_error *err);
void zp_close(zp_archive *a); /* safe on a zeroed or closed zp_archive */

/* The archive as a whole against the limits, before any member is read: its number of entries
 * and the sum of their declared sizes. Returns the entry count, or -1 with the reason in msg. */
int64_t zp_entries(const zp_archive *a, const sr_limits *lim, char *msg, size_t msgsz);

typedef struct {
	const char *name; /* as stored (borrowed from the archive) */
	uint64_t size;    /* declared, inflated */
	uint64_t comp_size;
	int encrypted;
} zp_entry;

/* Entry i; 0 when it has a name to read, -1 when it has none (skip it). */
int zp_entry_at(const zp_archive *a, int64_t i, zp_entry *e);

/* 1 when a member name is absolute, has a drive letter, or has a ".." component. */
int zp_name_unsafe(const char *name);

/* Why entry e must not be read (encrypted, inflating past the member limit, a zip bomb's
 * ratio), written into buf; NULL when it may be read. */
const char *zp_problem(const zp_entry *e, const sr_limits *lim, char *buf, size_t bufsz);

/* Up to n bytes from the start of entry i, for sniffing. Returns the count, or -1 when the
 * member cannot be read (a corrupt archive). */
int64_t zp_read_head(const zp_archive *a, int64_t i, uint8_t *buf, size_t n);

/* Inflates entry i whose declared size is `size`, never past it nor the member limit: a member
 * holding more or fewer bytes than it declares fails (MR_EINPUT). */
mr_status zp_read_member(const zp_archive *a, int64_t i, uint64_t size, const sr_limits *lim,
                         in_data *out, mr_error *err);

#endif
