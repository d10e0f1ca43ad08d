/* sites.h: live memory grouped by the line of the user's own code that asked for it.
 *
 * A block belongs to the site of its stack's own frame (an_own_frame: the innermost Python
 * frame outside torch, installed packages and the standard library); the innermost library
 * frame of the site's largest stack is shown beside it. A block the autograd engine allocated
 * in backward (no Python frame: an_alloc.owner) belongs to the user's backward() call when the
 * trace shows it, and is marked autograd; a stack with no line of the user's own is grouped by
 * its library frame, then by its first shown frame. Only a block with no stack at all and no
 * owner is "no stack recorded".
 *
 * Ownership: an_sites_group returns an array the caller frees with free(); frame pointers in it
 * point into the md_snapshot. */
#ifndef MR_SITES_H
#define MR_SITES_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "model/model.h"

typedef struct {
	const md_frame *user; /* the user's own line (for autograd: the backward() call), NULL */
	const md_frame *lib;  /* the innermost library frame of the largest stack, NULL */
	int autograd;         /* the autograd engine's, in backward */
	uint64_t bytes;       /* block sizes */
	uint64_t requested, blocks;
	uint32_t stack; /* the stack holding most of the site's bytes (MD_NO_STACK: none) */
	uint32_t call;  /* autograd: the stack of its backward() call (MD_NO_STACK: not shown) */
} an_usite;

/* Groups the active blocks of blocks[0..count) (owners[i] is block i's an_alloc.owner, or
 * NULL when none is known) into sites, largest first; kinds: of s's frames (an_frame_kinds). *out
 * is NULL when there is none. */
mr_status an_sites_group(const md_snapshot *s, const uint8_t *kinds, const md_block *blocks,
                         const uint32_t *owners, size_t count, an_usite **out, size_t *out_count,
                         mr_error *err);

/* Whether the site has nothing to name it: no frame, not autograd. */
int an_usite_unknown(const an_usite *site);

#endif
