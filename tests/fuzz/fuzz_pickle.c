/* fuzz_pickle.c: the pickle decoder on arbitrary bytes.
 *
 * Each input is decoded twice: with the default limits and a dict hook that turns some dicts
 * into records (as the snapshot builder does), then with tiny limits and a hook that rejects
 * large batches, so every limit and every hook path is reached. A successful result is walked
 * through every accessor, iteratively and visiting each shared node once (the result is a DAG
 * and may hold cycles through the memo). Contract checks abort, so libFuzzer reports them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "decode/pickle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "fuzz_pickle: check failed: %s (line %d)\n", #cond,        \
			        __LINE__);                                                         \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static int keep_hook(void *ctx, pk_decoder *d, const pk_val *items, size_t n, uint64_t *record,
                     mr_error *err)
{
	size_t *count = ctx;
	(void)err;
	CHECK(n % 2 == 0 && n > 0);
	/* Touch every word the hook is given: they must all be valid values. */
	for (size_t i = 0; i < n; i++)
		(void)pk_typeof(d, items[i]);
	if (pk_str_eq(d, items[0], "action") || n >= 8) {
		*record = ++*count;
		return 1;
	}
	return 0;
}

static int reject_hook(void *ctx, pk_decoder *d, const pk_val *items, size_t n, uint64_t *record,
                       mr_error *err)
{
	(void)ctx;
	(void)d;
	(void)items;
	if (n > 6) {
		mr_fail(err, MR_EINPUT, "hook: too many items");
		return -1;
	}
	*record = 7;
	return n == 4;
}

/* Reads every accessor of every reachable value; returns a checksum so nothing is optimised
 * away. The work list holds values; `seen` marks nodes already expanded. */
static uint64_t walk(const pk_decoder *d, pk_val root)
{
	size_t nodes = pk_node_count(d);
	uint8_t *seen = calloc(nodes ? nodes : 1, 1);
	size_t cap = 64, top = 0;
	pk_val *work = malloc(cap * sizeof *work);
	uint64_t sum = 0;
	if (!seen || !work)
		goto done;
	work[top++] = root;
	while (top) {
		pk_val v = work[--top];
		pk_type t = pk_typeof(d, v);
		int64_t i;
		uint64_t u;
		double f;
		int b;
		const char *s;
		size_t len;
		sum += (uint64_t)t;
		if (pk_int(d, v, &i))
			sum += (uint64_t)i;
		if (pk_uint(d, v, &u))
			sum += u;
		if (pk_float(d, v, &f))
			sum += f == f;
		if (pk_bool(d, v, &b))
			sum += (uint64_t)b;
		sum += (uint64_t)pk_is_none(v) + pk_record(d, v);
		if (pk_str(d, v, &s, &len)) {
			CHECK(t == PK_T_STR || t == PK_T_BYTES);
			for (size_t k = 0; k < len; k++)
				sum += (uint8_t)s[k];
			CHECK(s[len] == '\0'); /* strings are NUL-terminated copies */
			sum += (uint64_t)pk_str_eq(d, v, "segments");
		}
		uint32_t id = pk_node_id(v);
		if (id == UINT32_MAX)
			continue;
		CHECK(id < nodes);
		if (seen[id])
			continue;
		seen[id] = 1;
		size_t n = pk_len(d, v);
		const pk_val *items = pk_items(d, v);
		size_t words = t == PK_T_DICT ? 2 * n : n;
		if (n) {
			CHECK(t == PK_T_LIST || t == PK_T_TUPLE || t == PK_T_SET || t == PK_T_DICT);
			CHECK(items != NULL);
		}
		if (t == PK_T_DICT) {
			pk_val out;
			sum += (uint64_t)pk_dict_get(d, v, "segments", &out);
			sum += (uint64_t)pk_dict_get(d, v, "action", &out);
		}
		if (words > cap - top) {
			size_t ncap = cap;
			while (words > ncap - top)
				ncap *= 2;
			pk_val *nw = realloc(work, ncap * sizeof *work);
			if (!nw)
				goto done;
			work = nw;
			cap = ncap;
		}
		for (size_t k = 0; k < words; k++)
			work[top++] = items[k];
	}
done:
	free(seen);
	free(work);
	return sum;
}

static void check_error(mr_status st, const mr_error *err)
{
	CHECK(st == MR_EINPUT || st == MR_EFAIL);
	CHECK(err->status == st);
	CHECK(err->msg[0] != '\0');
	CHECK(memchr(err->msg, '\n', strlen(err->msg)) == NULL); /* one line */
}

volatile uint64_t fuzz_pickle_sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t records = 0;
	pk_decoder *d = pk_new(NULL);
	if (!d)
		return 0;
	pk_set_dict_hook(d, keep_hook, &records);
	mr_error err = {0};
	mr_status st = pk_run(d, data, size, &err);
	if (st == MR_OK) {
		CHECK(err.status == MR_OK);
		fuzz_pickle_sink += walk(d, pk_result(d));
		CHECK(pk_memo_gets(d) <= size); /* each look-up costs at least one byte */
	} else {
		check_error(st, &err);
	}
	pk_free(d);

	pk_limits tiny = {
	    .max_stack = 16, .max_memo = 32, .max_nodes = 64, .max_items = 128, .max_string = 64};
	d = pk_new(&tiny);
	if (!d)
		return 0;
	pk_set_dict_hook(d, reject_hook, NULL);
	mr_error err2 = {0};
	st = pk_run(d, data, size, &err2);
	if (st == MR_OK) {
		CHECK(pk_node_count(d) <= tiny.max_nodes);
		fuzz_pickle_sink += walk(d, pk_result(d));
	} else {
		check_error(st, &err2);
	}
	pk_free(d);
	return 0;
}
