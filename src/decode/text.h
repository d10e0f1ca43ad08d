/* text.h: the text evidence of an input: every memory_summary() table and every out-of-memory
 * message in it (a whole training log is fine).
 *
 * Ownership: ev_parse_text fills an ev_text whose arrays it allocates; ev_text_free releases
 * them (and is safe on a zeroed or partially filled ev_text). It keeps no pointer into the
 * input. Nothing here prints. */
#ifndef MR_TEXT_H
#define MR_TEXT_H

#include <stddef.h>

#include "base/error.h"
#include "decode/oom_message.h"
#include "decode/summary.h"

typedef struct {
	ev_summary *summaries; /* in input order */
	size_t summary_count;
	ev_oom *ooms; /* in input order */
	size_t oom_count;
} ev_text;

/* Finds every memory_summary() table and every out-of-memory message in `data` (need not be
 * NUL-terminated). MR_EINPUT with "no memory_summary() table or CUDA out-of-memory message
 * found" when it holds neither; MR_EFAIL when memory runs out. On failure *out is left empty. */
mr_status ev_parse_text(const char *data, size_t len, ev_text *out, mr_error *err);
void ev_text_free(ev_text *t);

#endif
