/* text.c: the text evidence of one input: its tables and its OOM messages. */
#include "decode/text.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

void ev_text_free(ev_text *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->oom_count; i++)
		free(t->ooms[i].other_processes);
	free(t->ooms);
	free(t->summaries);
	memset(t, 0, sizeof *t);
}

mr_status ev_parse_text(const char *data, size_t len, ev_text *out, mr_error *err)
{
	memset(out, 0, sizeof *out);
	mr_status st = ev_find_summaries(data, len, &out->summaries, &out->summary_count, err);
	if (st == MR_OK)
		st = ev_find_ooms(data, len, &out->ooms, &out->oom_count, err);
	if (st == MR_OK && out->summary_count == 0 && out->oom_count == 0)
		st = mr_fail(err, MR_EINPUT,
		             "no memory_summary() table or CUDA out-of-memory message found");
	if (st != MR_OK)
		ev_text_free(out);
	return st;
}
