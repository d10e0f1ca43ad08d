/* frames.h: stacks read the way PyTorch's memory viewer and a person read them. Rules read
 * function and file names of frames, never sample names.
 *
 * Ownership: the frames returned point into the md_snapshot they came from. */
#ifndef MR_FRAMES_H
#define MR_FRAMES_H

#include <stdint.h>

#include "model/model.h"

/* Live memory by what it holds, from the allocation stacks (see an_category). */
enum {
	AN_CAT_PARAMETERS,
	AN_CAT_GRADIENTS,
	AN_CAT_OPTIMIZER,
	AN_CAT_ACTIVATIONS,
	AN_CAT_OTHER,
	AN_CAT_COUNT
};

/* Category of a stack: optimizer (torch/optim frames) before parameters (module _apply/to/cuda,
 * parameter creation, state-dict loading) before gradients (autograd frames, or no Python frame
 * at all when stacks_recorded says stacks are recorded: the autograd engine runs backward in
 * C++ threads) before
 * activations (any forward frame); the rest is "other". */
int an_category(const md_snapshot *s, uint32_t stack, int stacks_recorded);
const char *an_category_name(int cat);

/* PyTorch's own viewer hides these frames (unwinding, interpreter, dispatcher plumbing). */
int an_frame_hidden(const md_snapshot *s, const md_frame *f);

/* The frame a stack is grouped by as an allocation site: the innermost Python frame PyTorch's
 * viewer shows (with stacks="all" the innermost frames are the allocator's own C++), else the
 * first shown frame, else NULL. */
const md_frame *an_site_frame(const md_snapshot *s, uint32_t stack);
/* The first line of the user's own code in a stack: the innermost shown Python frame outside
 * torch (and functorch, triton), else the innermost Python frame, else the first shown, else
 * NULL. What `diff` groups by and what advice names. */
const md_frame *an_user_frame(const md_snapshot *s, uint32_t stack);
/* A file of torch itself (or functorch, triton), by path. */
int an_torch_internal(const char *filename);

#endif
