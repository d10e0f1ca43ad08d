/* casts.h: autocast's half-precision copies of float32 weights, told apart from activations.
 *
 * Under torch.autocast every weight is cast to half precision once per forward, inside the
 * model: a block of half a parameter's bytes that does not scale with the batch. An activation
 * can happen to have that size too, so the copies are told apart by count: in each iteration at
 * most one per parameter of that size, and only when the first iteration shows (nearly) every
 * parameter's copy, as autocast makes them.
 *
 * Ownership: an_casts owns its arrays; an_casts_free releases them. */
#ifndef MR_CASTS_H
#define MR_CASTS_H

#include <stddef.h>
#include <stdint.h>

#include "analyze/frames.h"
#include "base/error.h"
#include "model/model.h"

typedef struct {
	uint64_t *size; /* the half sizes of the parameters, sorted, each once */
	size_t *quota;  /* parameters of each */
	size_t *used;   /* copies seen in the current iteration */
	size_t count;
	int on;                /* the first iteration shows (nearly: 80%) every parameter's copy */
	uint64_t param_bytes;  /* the half sizes of the parameters, summed */
	uint64_t copied_bytes; /* of those, copied in the first iteration */
	size_t copied_count;
	/* Of the copies, those made as autocast makes them: the next allocation is the same call's
	 * (the op that reads the copy allocates its output on the same stack), or the copy is in a
	 * compiled graph, whose casts are kernels of their own. A layer output that has half a
	 * weight's size by chance is followed by the next op's allocation instead. */
	uint64_t adjacent_bytes;
	size_t adjacent_count;
	/* Of those, the ones that are weights' copies by more than their size: made in a
	 * compiled graph, or by one of torch.nn's layers (which read their weights), or kept
	 * after the op (alive four allocations later: autocast caches its copy of a weight that
	 * requires grad until the autocast region ends, and autograd saves it for the
	 * backward). A bf16 model's own activation of a weight's half size made in the model's
	 * code (rotary halves, its attention) is a temporary the next op frees. */
	uint64_t kept_bytes;
	size_t kept_count;
} an_casts;

/* The half sizes of the parameters allocated before event `first` of md's trace (of a
 * truncated trace, also those live at the snapshot that were made before its window), and
 * whether events [first, end) (the first iteration) copy at least 80% of their bytes. */
mr_status an_casts_find(const md_snapshot *s, const md_device *md, const an_stack_info *info,
                        size_t first, size_t end, int truncated, an_casts *out, mr_error *err);

/* Whether `bytes` of copies are (nearly: 80%) the half sizes of all the parameters allocated
 * before event `first` and still live there (a weight a later flattening replaced, as cuDNN's
 * LSTM does, is no longer read). One pass with a map of the live ones; 0 when memory runs out. */
int an_casts_copy_all(const md_snapshot *s, const md_device *md, const an_stack_info *info,
                      size_t first, uint64_t bytes);

/* Whether allocation e is a weight's copy, counting it against the current iteration's quota.
 * Only meaningful when k->on. */
int an_casts_take(an_casts *k, const md_snapshot *s, const an_stack_info *info, const md_event *e);

/* A new iteration: every parameter may be copied again. */
void an_casts_next_iteration(an_casts *k);

void an_casts_free(an_casts *k);

#endif
