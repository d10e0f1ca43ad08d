/* limits.h: how much of an input may be read. Inputs, archives above all, are hostile until
 * proven otherwise: member sizes, an archive's total size and its number of members are
 * capped, a member may not inflate past its declared size or an absurd ratio, and a walk has a
 * depth limit and folders it does not enter.
 *
 * Ownership: a plain value. */
#ifndef MR_LIMITS_H
#define MR_LIMITS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

typedef struct {
	uint64_t max_member_bytes; /* one member, inflated */
	uint64_t max_total_bytes;  /* all members of one archive, inflated (declared sizes) */
	uint64_t max_ratio;        /* inflated / compressed, for members over 1 MiB */
	size_t max_members;        /* entries of one archive */
	/* Inflated zip member bytes held at once by every reader of the process together (a
	 * read larger than this runs alone): batch jobs wait for each other instead of adding
	 * up. */
	uint64_t max_inflight_bytes;
	size_t max_depth; /* folder depth of a walk */
	/* Folders a walk does not enter (the batch's output and cache folders, when they lie
	 * inside an input), as (device, inode) pairs. */
	uint64_t skip_dev[2], skip_ino[2];
	size_t skip_count;
} sr_limits;

/* 2 GiB per member, 64 GiB per archive, ratio 1000, 100 000 entries, 1 GiB in flight (or
 * MEMREPORT_ZIP_MEMORY, a size such as "4GiB"), depth 32, no skips. */
void sr_default_limits(sr_limits *lim);
/* Adds a folder to skip; ignored when it does not exist or two are set already. */
void sr_skip_folder(sr_limits *lim, const char *path);
/* Whether a walk skips the folder st describes. */
int sr_skipped(const sr_limits *lim, const struct stat *st);

#endif
