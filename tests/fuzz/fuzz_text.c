/* fuzz_text.c: the text readers (evidence.h) on arbitrary bytes: memory_summary() tables,
 * out-of-memory messages, memory_stats() JSON dumps and the amount parser.
 *
 * The input is handed over in a buffer of exactly its size (not NUL-terminated), so a reader
 * that runs past the end is caught by ASan. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "advise/cause.h"
#include "base/error.h"
#include "decode/amount.h"
#include "decode/stats_json.h"
#include "decode/text.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_text: check failed: %s (line %d)\n", #cond,          \
			        __LINE__);                                                         \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static void check_error(mr_status st, const mr_error *err)
{
	CHECK(st == MR_EINPUT || st == MR_EFAIL);
	CHECK(err->status == st && err->msg[0] != '\0');
	CHECK(strchr(err->msg, '\n') == NULL);
}

static int nul_terminated(const char *s, size_t cap)
{
	return memchr(s, '\0', cap) != NULL;
}

volatile uint64_t fuzz_text_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;

	ev_text t;
	mr_error err = {0};
	mr_status st = ev_parse_text(text, size, &t, &err);
	if (st == MR_OK) {
		CHECK(t.summary_count + t.oom_count > 0);
		for (size_t i = 0; i < t.summary_count; i++) {
			const ev_summary *s = &t.summaries[i];
			CHECK(nul_terminated(s->backend, sizeof s->backend));
			CHECK(s->line >= 1);
			for (int m = 0; m < EV_METRIC_COUNT; m++)
				for (int p = 0; p < EV_POOL_COUNT; p++)
					for (int c = 0; c < EV_COL_COUNT; c++)
						fuzz_text_sink += s->cells[m][p][c].value;
		}
		for (size_t i = 0; i < t.oom_count; i++) {
			const ev_oom *o = &t.ooms[i];
			CHECK(nul_terminated(o->backend, sizeof o->backend));
			CHECK(o->line >= 1);
			CHECK(ev_oom_era_name(o->era) != NULL);
			ad_cause c = ad_message_cause(o);
			CHECK(ad_cause_name(c) != NULL);
			fuzz_text_sink += ev_oom_limit(o) + (uint64_t)c;
			CHECK(o->other_process_count == 0 || o->other_processes != NULL);
			for (size_t k = 0; k < o->other_process_count; k++)
				fuzz_text_sink += o->other_processes[k].bytes;
		}
		ev_text_free(&t);
	} else {
		check_error(st, &err);
		CHECK(t.summary_count == 0 && t.oom_count == 0);
		ev_text_free(&t); /* must be safe on a failed parse */
	}

	ev_stats stats;
	mr_error err2 = {0};
	st = ev_parse_stats_json(text, size, &stats, &err2);
	if (st == MR_OK) {
		CHECK(stats.count > 0);
		for (size_t i = 0; i < stats.count; i++) {
			uint64_t v;
			CHECK(stats.items[i].key != NULL);
			fuzz_text_sink += (uint64_t)ev_stats_get(&stats, stats.items[i].key, &v);
		}
		uint64_t v;
		fuzz_text_sink += (uint64_t)ev_stats_get(&stats, "allocated_bytes.all.current", &v);
		ev_stats_free(&stats);
	} else {
		check_error(st, &err2);
		ev_stats_free(&stats);
	}

	/* The amount parser on every suffix of a short prefix. */
	size_t lim = size < 64 ? size : 64;
	for (size_t i = 0; i < lim; i++) {
		uint64_t v = 0;
		int overflow = 0;
		size_t used = ev_parse_amount(text + i, size - i, &v, &overflow);
		CHECK(used <= size - i);
		if (overflow)
			CHECK(v == UINT64_MAX);
	}
	return 0;
}
