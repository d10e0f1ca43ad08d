/* test_evidence.c: memory_summary() tables, OOM messages and memory_stats() dumps.
 *
 * The corpus (../shared/corpus) gives real PyTorch 2.11 texts with their ground truth
 * (memory_stats.json, facts.json); tests/fixtures/text/ holds the other eras and shapes: written
 * by hand (oom_*.txt/log, garbage_readme.txt) or by tests/fixtures/gen_text_fixtures.py from the
 * corpus stats (tables in 1.x units, abbreviated, MLU words, log prefixes, hard wraps, several
 * tables per log); the stats of the two large shared samples they were printed from
 * (resnet_amp, gpt_varlen) are kept beside them as NAME.memory_stats.json. Expected byte figures of
 * the hand-written messages were computed apart (Python Decimal, round half up), not with the code
 * under test. */
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <sys/stat.h>
#include <time.h>

#include "advise/cause.h"
#include "decode/amount.h"
#include "decode/stats_json.h"
#include "decode/text.h"
#include "base/error.h"
#include "base/units.h"

#define FIX "tests/fixtures/text/"
#define UNK UINT64_MAX

/* ---- helpers ----------------------------------------------------------------------------- */

static char *read_text(const char *path, size_t *len)
{
	char *d = (char *)tu_read(path, len);
	if (!d)
		fail_msg("cannot read %s", path);
	return d;
}

static void parse_file(const char *path, ev_text *t)
{
	size_t len = 0;
	char *d = read_text(path, &len);
	mr_error err = {0};
	mr_status st = ev_parse_text(d, len, t, &err);
	if (st != MR_OK)
		fail_msg("%s: %s", path, err.msg);
	free(d);
}

static void load_stats(const char *path, ev_stats *s)
{
	size_t len = 0;
	char *d = read_text(path, &len);
	mr_error err = {0};
	if (ev_parse_stats_json(d, len, s, &err) != MR_OK)
		fail_msg("%s: %s", path, err.msg);
	free(d);
}

static uint64_t stat_of(const ev_stats *s, const char *key)
{
	uint64_t v = 0;
	if (!ev_stats_get(s, key, &v))
		fail_msg("stats lack %s", key);
	return v;
}

/* The cells of a table against the memory_stats it was printed from: every cell of a metric in
 * `metrics` (bits 1 << EV_*), a column in `cols` (bits 1 << EV_CUR ...) and a pool the table has
 * (pool rows unless abbreviated; oversize rows have none) is known with value <= truth <
 * value + unit (exact when unit is 1, and for small counts); every other cell is unknown. */
static void check_cells(const ev_summary *sm, const ev_stats *st, unsigned metrics, unsigned cols,
                        int pooled, const char *what)
{
	static const char *pools[] = {"all", "large_pool", "small_pool"};
	static const char *names[] = {"current", "peak", "allocated", "freed"};
	char key[128];
	for (int m = 0; m < EV_METRIC_COUNT; m++) {
		int oversize = m == EV_OVERSIZE_ALLOCS || m == EV_OVERSIZE_SEGMENTS;
		for (int p = 0; p < EV_POOL_COUNT; p++)
			for (int c = 0; c < EV_COL_COUNT; c++) {
				const ev_cell *cell = &sm->cells[m][p][c];
				int want = (metrics >> m & 1) && (cols >> c & 1) &&
				           (p == EV_POOL_ALL || (pooled && !oversize));
				if (oversize)
					snprintf(key, sizeof key, "%s.%s", ev_metric_stat_key(m),
					         names[c]);
				else
					snprintf(key, sizeof key, "%s.%s.%s", ev_metric_stat_key(m),
					         pools[p], names[c]);
				if (cell->known != want)
					fail_msg("%s: %s %s", what, key,
					         want ? "not parsed" : "should be unknown");
				if (!want)
					continue;
				uint64_t truth = stat_of(st, key);
				if (!(cell->value <= truth && truth - cell->value < cell->unit))
					fail_msg("%s: %s parsed %llu (unit %llu), truth %llu", what,
					         key, (unsigned long long)cell->value,
					         (unsigned long long)cell->unit,
					         (unsigned long long)truth);
				/* small counts are exact: memory_summary() picks one prefix per
				 * metric and column, by its "all" row (a pool row of 53 000 shows
				 * as "53 K" under an all row of 1 113 386) */
				char row[128];
				snprintf(row, sizeof row, "%s.all.%s", ev_metric_stat_key(m),
				         names[c]);
				uint64_t by = oversize ? truth : stat_of(st, row);
				if (!ev_metric_is_bytes(m) && by < 750000)
					assert_int_equal(cell->unit, 1);
			}
	}
}

#define ALL_METRICS ((1u << EV_METRIC_COUNT) - 1)
#define ALL_COLS ((1u << EV_COL_COUNT) - 1)

/* A whole table, header included, against memory_stats. */
static void check_summary(const ev_summary *sm, const ev_stats *st, int pooled, int has_requested,
                          int has_oversize, const char *what)
{
	unsigned metrics = ALL_METRICS;
	if (!has_requested)
		metrics &= ~(1u << EV_REQUESTED);
	if (!has_oversize)
		metrics &= ~(1u << EV_OVERSIZE_ALLOCS | 1u << EV_OVERSIZE_SEGMENTS);
	assert_int_equal(sm->abbreviated, !pooled);
	assert_int_equal((uint64_t)sm->num_ooms, stat_of(st, "num_ooms"));
	assert_int_equal((uint64_t)sm->num_alloc_retries, stat_of(st, "num_alloc_retries"));
	check_cells(sm, st, metrics, ALL_COLS, pooled, what);
}

/* An amount such as "192.00 MiB" converted apart from the code under test. */
static uint64_t amount_ref(const char *s)
{
	double v;
	char unit[8];
	if (sscanf(s, "%lf %7s", &v, unit) != 2)
		fail_msg("bad amount %s", s);
	long double mult = 1;
	if (!strncmp(unit, "KiB", 3))
		mult = 1024.0L;
	else if (!strncmp(unit, "MiB", 3))
		mult = 1048576.0L;
	else if (!strncmp(unit, "GiB", 3) || !strcmp(unit, "GB"))
		mult = 1073741824.0L; /* MPS writes GB for 2^30 */
	else if (!strcmp(unit, "MB"))
		mult = 1048576.0L;
	return (uint64_t)llroundl((long double)v * mult);
}

/* 1-based number of the first line of `text` that contains `needle`. */
static size_t line_of(const char *text, const char *needle)
{
	const char *p = strstr(text, needle);
	assert_non_null(p);
	/* the last one: a log where the program caught an OOM and died of the next holds two */
	for (const char *q = p; (q = strstr(q + 1, needle)) != NULL;)
		p = q;
	size_t line = 1;
	for (const char *q = text; q < p; q++)
		line += *q == '\n';
	return line;
}

/* Calls fn(folder path, folder name, count) for every sample folder of both corpora (testutil.h)
 * that has a memory_stats.json. */
typedef struct {
	void (*fn)(const char *dir, const char *name, int *count);
	int *count;
} each_ctx;

static void each_one(const char *dir, const char *name, void *ctx)
{
	const each_ctx *c = ctx;
	char probe[2100];
	struct stat sb;
	snprintf(probe, sizeof probe, "%s/memory_stats.json", dir);
	if (stat(probe, &sb) == 0)
		c->fn(dir, name, c->count);
}

static void each_sample(void (*fn)(const char *dir, const char *name, int *count), int *count)
{
	each_ctx c = {fn, count};
	tu_each_sample(each_one, &c);
}

/* ---- corpus --------------------------------------------------------------------------------- */

static void corpus_summary_one(const char *dir, const char *name, int *count)
{
	char path[1200];
	ev_stats st;
	snprintf(path, sizeof path, "%s/memory_stats.json", dir);
	load_stats(path, &st);
	for (int abbrev = 0; abbrev < 2; abbrev++) {
		ev_text t;
		snprintf(path, sizeof path, "%s/%s", dir,
		         abbrev ? "memory_summary_abbrev.txt" : "memory_summary.txt");
		/* tools/record_runs.py kept the full table only */
		if (abbrev && !tu_exists(path))
			continue;
		parse_file(path, &t);
		assert_int_equal(t.summary_count, 1);
		assert_int_equal(t.oom_count, 0);
		const ev_summary *sm = &t.summaries[0];
		assert_int_equal(sm->line, 1);
		assert_int_equal(sm->device, 0);
		assert_string_equal(sm->backend, "CUDA");
		assert_int_equal(sm->legacy_units, 0);
		check_summary(sm, &st, !abbrev, 1, 1, path);
		/* the four figures the brief names, spelled out */
		assert_true(sm->cells[EV_RESERVED][0][EV_CUR].value <=
		            stat_of(&st, "reserved_bytes.all.current"));
		assert_true(sm->cells[EV_ALLOCATED][0][EV_PEAK].value <=
		            stat_of(&st, "allocated_bytes.all.peak"));
		assert_int_equal(sm->cells[EV_SEGMENTS][0][EV_CUR].value,
		                 stat_of(&st, "segment.all.current"));
		assert_int_equal(sm->cells[EV_INACTIVE_SPLIT_ALLOCS][0][EV_CUR].value,
		                 stat_of(&st, "inactive_split.all.current"));
		ev_text_free(&t);
	}
	(void)name;
	ev_stats_free(&st);
	(*count)++;
}

static void test_corpus_summaries(void **state)
{
	(void)state;
	int n = 0;
	each_sample(corpus_summary_one, &n);
	assert_true(n >= (int)tu_project_samples());
}

static void corpus_stats_one(const char *dir, const char *name, int *count)
{
	char path[1200];
	ev_stats st;
	snprintf(path, sizeof path, "%s/memory_stats.json", dir);
	load_stats(path, &st);
	assert_int_equal(st.count, 122);
	snprintf(path, sizeof path, "%s/facts.json", dir);
	size_t len = 0;
	char *facts = read_text(path, &len);
	/* facts.json "stats": what torch returned when memory_stats.json was written (the runs
	 * of tools/record_runs.py also keep "oom_observer_stats", of another moment) */
	const char *at = strstr(facts, "\"stats\": {");
	long long want;
	assert_non_null(at);
	assert_true(tu_json_int(at, "reserved_bytes.all.current", &want));
	assert_int_equal(stat_of(&st, "reserved_bytes.all.current"), (uint64_t)want);
	assert_true(tu_json_int(at, "allocated_bytes.all.current", &want));
	assert_int_equal(stat_of(&st, "allocated_bytes.all.current"), (uint64_t)want);
	free(facts);
	ev_stats_free(&st);
	(void)name;
	(*count)++;
}

static void test_corpus_stats(void **state)
{
	(void)state;
	int n = 0;
	each_sample(corpus_stats_one, &n);
	assert_true(n >= (int)tu_project_samples());
}

static void corpus_oom_one(const char *dir, const char *name, int *count)
{
	char path[1200];
	struct stat sb;
	snprintf(path, sizeof path, "%s/oom_message.txt", dir);
	if (stat(path, &sb) != 0)
		return;
	snprintf(path, sizeof path, "%s/facts.json", dir);
	size_t len = 0;
	char *facts = read_text(path, &len);
	const char *msg = strstr(facts, "\"oom_message\": \"");
	assert_non_null(msg);
	const char *async = strstr(msg, "would exceed allowed memory");
	if (async) {
		/* cudaMallocAsync's own format (cudamallocasync_oom): its Requested figure, and
		 * capacity where it says the allocated bytes and the request pass the limit */
		const char *req = strstr(async, "Requested");
		assert_non_null(req);
		req = strstr(req, ": ");
		assert_non_null(req);
		uint64_t want = amount_ref(req + 2);
		static const char *afiles[] = {"oom_message.txt", "train.log"};
		for (int f = 0; f < 2; f++) {
			ev_text t;
			snprintf(path, sizeof path, "%s/%s", dir, afiles[f]);
			parse_file(path, &t);
			assert_true(t.oom_count >= 1);
			const ev_oom *o = &t.ooms[t.oom_count - 1];
			assert_int_equal(o->era, EV_OOM_ERA_ASYNC_ALLOCATOR);
			assert_true(o->has_requested);
			assert_int_equal(o->requested_bytes, want);
			if (ad_message_cause(o) != AD_CAUSE_CAPACITY)
				fail_msg("%s: cause %s", path, ad_cause_name(ad_message_cause(o)));
			ev_text_free(&t);
		}
		free(facts);
		(*count)++;
		return;
	}
	const char *tried = strstr(msg, "Tried to allocate ");
	/* "N GiB allowed" only where the run set a memory fraction (other_process did not) */
	const char *allowed = strstr(msg, " allowed; ");
	assert_non_null(tried);
	uint64_t want_req = amount_ref(tried + strlen("Tried to allocate "));
	uint64_t want_limit = 0;
	if (allowed) {
		const char *a = allowed - 1; /* back over "<unit>" and "<number> " */
		while (*a != ' ')
			a--;
		a--;
		while (*a != ' ')
			a--;
		want_limit = amount_ref(a + 1);
	}
	/* fragmentation where the sample says so, or where PyTorch's own figures at the OOM (the
	 * observer's, facts.json) had at least the request and a tenth of the cap reserved but
	 * unallocated: what the message alone can tell, whatever the trace adds */
	ad_cause want_cause =
	    strstr(name, "fragmentation") ? AD_CAUSE_FRAGMENTATION : AD_CAUSE_CAPACITY;
	const char *observer = strstr(facts, "\"oom_observer_stats\": {");
	long long res = 0, alloc = 0;
	/* the message counts private pools' free blocks as allocated ("with X allocated in
	 * private pools"): the observer's unallocated less them is what the message can see */
	const char *pp = strstr(msg, "is allocated by PyTorch, with ");
	long long priv =
	    pp ? (long long)amount_ref(pp + strlen("is allocated by PyTorch, with ")) : 0;
	int have = observer && tu_json_int(observer, "reserved_bytes.all.current", &res) &&
	           tu_json_int(observer, "allocated_bytes.all.current", &alloc);
	alloc += priv;
	if (have && (uint64_t)(res - alloc) >= want_req &&
	    (uint64_t)(res - alloc) >= want_limit / 10)
		want_cause = AD_CAUSE_FRAGMENTATION;
	/* neither: the cache could not hold the request, yet live tensors and the request leave
	 * over a tenth of the cap (the rest cached in pieces or not yet reserved): from the
	 * message alone, packing might or might not have made room, so it cannot tell */
	else if (have && res && want_limit && (uint64_t)(res - alloc) < want_req &&
	         (uint64_t)alloc + want_req + want_limit / 10 < want_limit)
		want_cause = AD_CAUSE_UNKNOWN;
	/* the device itself had less free than the request (torch.cuda.mem_get_info() at the
	 * OOM), and what PyTorch did not reserve of its used memory is 1 GiB or more and more
	 * than PyTorch reserved: memory outside PyTorch, another process's where the message
	 * lists one (cupy_pool_cached_outside_oom: CuPy's pool, under a fraction not reached) */
	const char *info = strstr(facts, "\"mem_get_info\": {");
	long long dev_free = 0, dev_total = 0;
	if (have && info && tu_json_int(info, "free", &dev_free) &&
	    tu_json_int(info, "total", &dev_total) && dev_free < (long long)want_req &&
	    dev_total - dev_free - res >= (1ll << 30) && dev_total - dev_free - res > res)
		want_cause =
		    strstr(msg, "Process ") ? AD_CAUSE_OTHER_PROCESSES : AD_CAUSE_NON_PYTORCH;

	static const char *files[] = {"oom_message.txt", "train.log"};
	for (int f = 0; f < 2; f++) {
		ev_text t;
		snprintf(path, sizeof path, "%s/%s", dir, files[f]);
		parse_file(path, &t);
		assert_int_equal(t.summary_count, 0);
		/* the OOM the run died of: the last (a handled one may come before it in the log)
		 */
		if (f == 0)
			assert_int_equal(t.oom_count, 1);
		assert_true(t.oom_count >= 1);
		const ev_oom *o = &t.ooms[t.oom_count - 1];
		assert_int_equal(o->era, EV_OOM_ERA_CURRENT);
		assert_string_equal(o->backend, "CUDA");
		assert_int_equal(o->device, 0);
		assert_true(o->has_requested);
		assert_int_equal(o->requested_bytes, want_req);
		assert_int_equal(o->has_allowed, allowed != NULL);
		if (allowed) {
			assert_int_equal(ev_oom_limit(o), want_limit);
			assert_int_equal(o->allowed, want_limit);
		}
		assert_true(o->has_total_capacity && o->has_device_free && o->has_this_process &&
		            o->has_allocated && o->has_reserved_unallocated);
		/* the card the run was recorded on (facts: torch.cuda.get_device_properties),
		 * as the message prints it, to two decimals of GiB */
		long long card = 0;
		assert_true(tu_json_int(facts, "total_memory", &card));
		char cap[32];
		snprintf(cap, sizeof cap, "%.2f GiB", (double)card / (double)(1ll << 30));
		assert_int_equal(o->total_capacity, amount_ref(cap));
		/* the cause of a device that really ran out is issue 13's table-driven test */
		if (allowed && ad_message_cause(o) != want_cause)
			fail_msg("%s: cause %s", path, ad_cause_name(ad_message_cause(o)));
		size_t tl = 0;
		char *text = read_text(path, &tl);
		assert_int_equal(o->line, f == 0 ? 1 : line_of(text, "OutOfMemoryError"));
		free(text);
		ev_text_free(&t);
	}
	free(facts);
	(*count)++;
}

static void test_corpus_ooms(void **state)
{
	(void)state;
	int n = 0;
	each_sample(corpus_oom_one, &n);
	assert_true(n >= 17); /* the OOM runs of tests/corpus, each with its message */
}

/* oom_fragmentation: the exact figures of its message. */
static void test_corpus_oom_fragmentation_figures(void **state)
{
	(void)state;
	char path[512];
	ev_text t;
	parse_file(tu_sample("oom_fragmentation", "oom_message.txt", path, sizeof path), &t);
	const ev_oom *o = &t.ooms[0];
	assert_int_equal(o->requested_bytes, 213909504ull); /* 204.00 MiB */
	assert_int_equal(o->device_free, amount_ref("135.48 GiB"));
	assert_int_equal(o->this_process_in_use, amount_ref("4.31 GiB"));
	assert_int_equal(o->allowed, 4294967296ull);
	assert_int_equal(o->allocated_by_pytorch, amount_ref("2.29 GiB"));
	assert_int_equal(o->reserved_unallocated, amount_ref("1.52 GiB"));
	assert_false(o->has_private_pools);
	assert_int_equal(o->other_process_count, 0);
	ev_text_free(&t);
}

/* ---- generated table fixtures ---------------------------------------------------------------- */

static void load_sample_stats(const char *sample, ev_stats *st)
{
	char path[1024];
	load_stats(tu_sample(sample, "memory_stats.json", path, sizeof path), st);
}

/* The memory_stats.json of a large shared sample, as kept in tests/fixtures/text/. */
static void load_fixture_stats(const char *sample, ev_stats *st)
{
	char path[512];
	snprintf(path, sizeof path, FIX "%s.memory_stats.json", sample);
	load_stats(path, st);
}

/* 1.x tables (KB/MB, no Requested or Oversize rows) for two GPUs in a fairseq log with a prefix on
 * every line, and a 1.x "reserved in total" OOM line before them. */
static void test_fixture_legacy_fairseq_2gpu(void **state)
{
	(void)state;
	ev_text t;
	ev_stats s0, s1;
	parse_file(FIX "legacy_fairseq_2gpu.log", &t);
	load_sample_stats("mlp_healthy", &s0);
	load_fixture_stats("resnet_amp", &s1);
	assert_int_equal(t.summary_count, 2);
	assert_int_equal(t.summaries[0].line, 3);
	assert_int_equal(t.summaries[1].line, 42);
	assert_int_equal(t.summaries[0].device, 0);
	assert_int_equal(t.summaries[1].device, 1);
	for (int i = 0; i < 2; i++) {
		assert_true(t.summaries[i].legacy_units);
		check_summary(&t.summaries[i], i ? &s1 : &s0, 1, 0, 0, "legacy");
	}
	/* "|    1225 MB |" = 1225 MiB */
	const ev_cell *c = &t.summaries[0].cells[EV_ALLOCATED][EV_POOL_ALL][EV_CUR];
	assert_int_equal(c->value, 1225ull << 20);
	assert_int_equal(c->unit, 1ull << 20);

	assert_int_equal(t.oom_count, 1);
	const ev_oom *o = &t.ooms[0];
	assert_int_equal(o->line, 2);
	assert_int_equal(o->era, EV_OOM_ERA_LEGACY_RESERVED);
	assert_string_equal(o->backend, "CUDA");
	assert_int_equal(o->device, 0);
	assert_int_equal(o->requested_bytes, 155189248ull);
	assert_int_equal(o->total_capacity, 11553462026ull);
	assert_int_equal(o->allocated_by_pytorch, 10103910564ull);
	assert_int_equal(o->device_free, 102299075ull);
	assert_int_equal(o->reserved_total, 10522669875ull);
	assert_int_equal(o->reserved_unallocated, 10522669875ull - 10103910564ull);
	assert_false(o->has_allowed);
	assert_int_equal(ev_oom_limit(o), 11553462026ull);
	/* 400 MiB cached < 10% of 10.76 GiB; the device ran dry (97.56 MiB free < 148 MiB) with
	 * 9.41 GiB of live tensors */
	assert_int_equal(ad_message_cause(o), AD_CAUSE_CAPACITY);
	ev_stats_free(&s0);
	ev_stats_free(&s1);
	ev_text_free(&t);
}

static void test_fixture_mlu_abbrev(void **state)
{
	(void)state;
	ev_text t;
	ev_stats st;
	parse_file(FIX "mlu_abbrev.txt", &t);
	load_fixture_stats("gpt_varlen", &st);
	assert_int_equal(t.summary_count, 1);
	assert_int_equal(t.oom_count, 0);
	const ev_summary *sm = &t.summaries[0];
	assert_string_equal(sm->backend, "MLU");
	assert_int_equal(sm->device, 3);
	assert_true(sm->abbreviated);
	check_summary(sm, &st, 0, 1, 1, "mlu");
	assert_int_equal(sm->cells[EV_ALLOCATED][0][EV_CUR].value, 66560ull * 1024);
	assert_int_equal(sm->cells[EV_ALLOCATED][0][EV_CUR].unit, 1024);
	assert_int_equal(sm->cells[EV_ALLOCATED][0][EV_TOT_ALLOC].value, 652681ull << 20);
	assert_true(sm->cells[EV_RESERVED][0][EV_CUR].known); /* "MLU reserved memory" */
	assert_true(sm->cells[EV_SEGMENTS][0][EV_CUR].known); /* "MLU reserved segments" */
	assert_true(sm->cells[EV_OVERSIZE_SEGMENTS][0][EV_CUR].known);
	ev_stats_free(&st);
	ev_text_free(&t);
}

/* Hard-wrapped at 78 columns with trailing blanks: every table row and the OOM message (split
 * inside "CUDA") are broken. */
static void test_fixture_wrapped_78(void **state)
{
	(void)state;
	ev_text t;
	ev_stats st;
	parse_file(FIX "wrapped_78.log", &t);
	load_sample_stats("oom_fragmentation", &st);
	assert_int_equal(t.summary_count, 1);
	assert_int_equal(t.summaries[0].line, 1);
	check_summary(&t.summaries[0], &st, 1, 1, 1, "wrapped");
	assert_int_equal(t.oom_count, 1);
	const ev_oom *o = &t.ooms[0];
	assert_int_equal(o->line, 95);
	assert_string_equal(o->backend, "CUDA");
	assert_int_equal(o->requested_bytes, 213909504ull);
	assert_int_equal(ev_oom_limit(o), 4294967296ull);
	assert_int_equal(o->reserved_unallocated, amount_ref("1.52 GiB"));
	assert_int_equal(ad_message_cause(o), AD_CAUSE_FRAGMENTATION);
	ev_stats_free(&st);
	ev_text_free(&t);
}

/* ComfyUI + cudaMallocAsync: its OOM text (with an NVML-sized "PyTorch limit" that overflows and
 * must be ignored) and "Memory summary: |===" on one line. */
static void test_fixture_comfy_async(void **state)
{
	(void)state;
	ev_text t;
	parse_file(FIX "comfy_async.log", &t);
	assert_int_equal(t.oom_count, 1);
	const ev_oom *o = &t.ooms[0];
	assert_int_equal(o->line, 3);
	assert_int_equal(o->era, EV_OOM_ERA_ASYNC_ALLOCATOR);
	assert_int_equal(o->device, 0);
	assert_int_equal(o->allocated_by_pytorch, 22945862779ull);
	assert_int_equal(o->requested_bytes, 1342177280ull);
	assert_int_equal(o->total_capacity, 25759066358ull);
	assert_int_equal(o->device_free, 19985859ull);
	assert_false(o->has_allowed);
	assert_false(o->has_reserved_unallocated);
	assert_int_equal(ev_oom_limit(o), 25759066358ull);
	assert_int_equal(ad_message_cause(o), AD_CAUSE_CAPACITY);

	assert_int_equal(t.summary_count, 1);
	const ev_summary *sm = &t.summaries[0];
	assert_int_equal(sm->line, 14);
	assert_false(sm->abbreviated);
	assert_int_equal(sm->cells[EV_ALLOCATED][0][EV_CUR].value, 66560ull * 1024);
	assert_int_equal(sm->cells[EV_ALLOCATED][0][EV_PEAK].value, 19864ull << 20);
	assert_int_equal(sm->cells[EV_ALLOCATED][0][EV_TOT_ALLOC].value, 0);
	assert_int_equal(sm->cells[EV_ALLOCATED][0][EV_TOT_ALLOC].unit, 1);
	assert_int_equal(sm->cells[EV_ALLOCATED][EV_POOL_LARGE][EV_CUR].value, 0);
	assert_int_equal(sm->cells[EV_ALLOCATED][EV_POOL_LARGE][EV_CUR].unit, 1024);
	assert_true(sm->cells[EV_OVERSIZE_SEGMENTS][0][EV_TOT_FREED].known);
	ev_text_free(&t);
}

static void test_fixture_rocm_hip(void **state)
{
	(void)state;
	ev_text t;
	ev_stats st;
	parse_file(FIX "rocm_hip.log", &t);
	load_sample_stats("leak_val_graph", &st);
	assert_int_equal(t.summary_count, 1);
	assert_int_equal(t.summaries[0].line, 4);
	assert_int_equal(t.summaries[0].device, 7);
	check_summary(&t.summaries[0], &st, 1, 1, 1, "rocm");
	assert_int_equal(t.oom_count, 1);
	const ev_oom *o = &t.ooms[0];
	assert_int_equal(o->line, 1);
	assert_int_equal(o->era, EV_OOM_ERA_CURRENT);
	assert_string_equal(o->backend, "HIP");
	assert_int_equal(o->device, 7);
	assert_int_equal(o->requested_bytes, 2147483648ull);
	assert_int_equal(o->total_capacity, 206136955372ull);
	assert_int_equal(o->device_free, 1342177280ull);
	assert_true(o->has_allocated && o->allocated_by_pytorch == 0);
	assert_true(o->has_reserved_unallocated && o->reserved_unallocated == 0);
	assert_false(o->has_this_process);
	/* PyTorch holds nothing, the device is full: something else holds it */
	assert_int_equal(ad_message_cause(o), AD_CAUSE_OTHER_PROCESSES);
	ev_stats_free(&st);
	ev_text_free(&t);
}

/* Counts of 750000 and more print with K (and M) suffixes. */
static void test_fixture_counts_km(void **state)
{
	(void)state;
	ev_text t;
	ev_stats base;
	parse_file(FIX "counts_km.txt", &t);
	load_sample_stats("mlp_healthy", &base);
	assert_int_equal(t.summary_count, 1);
	const ev_summary *sm = &t.summaries[0];
	/* "|    6094 K  |" */
	assert_int_equal(sm->cells[EV_ALLOCATIONS][0][EV_TOT_ALLOC].value, 6094000);
	assert_int_equal(sm->cells[EV_ALLOCATIONS][0][EV_TOT_ALLOC].unit, 1000);
	assert_int_equal(sm->cells[EV_ALLOCATIONS][0][EV_CUR].value, 410287);
	assert_int_equal(sm->cells[EV_ALLOCATIONS][0][EV_CUR].unit, 1);
	assert_int_equal(sm->cells[EV_ALLOCATIONS][EV_POOL_SMALL][EV_TOT_ALLOC].value, 1791000);
	static const int counts[] = {EV_ALLOCATIONS, EV_ACTIVE_ALLOCS, EV_SEGMENTS,
	                             EV_INACTIVE_SPLIT_ALLOCS};
	static const char *pools[] = {"all", "large_pool", "small_pool"};
	static const char *cols[] = {"current", "peak", "allocated", "freed"};
	for (size_t i = 0; i < 4; i++)
		for (int p = 0; p < 3; p++)
			for (int c = 0; c < 4; c++) {
				char key[128];
				snprintf(key, sizeof key, "%s.%s.%s", ev_metric_stat_key(counts[i]),
				         pools[p], cols[c]);
				uint64_t truth = stat_of(&base, key) * 10007;
				const ev_cell *cell = &sm->cells[counts[i]][p][c];
				assert_true(cell->known);
				assert_true(cell->value <= truth &&
				            truth - cell->value < cell->unit);
			}
	ev_stats_free(&base);
	ev_text_free(&t);
}

static void test_fixture_before_after(void **state)
{
	(void)state;
	ev_text t;
	ev_stats a, b;
	parse_file(FIX "before_after.log", &t);
	load_sample_stats("leak_val_graph", &a);
	load_sample_stats("leak_val_fixed", &b);
	assert_int_equal(t.summary_count, 2);
	assert_int_equal(t.oom_count, 0);
	assert_int_equal(t.summaries[0].line, 2);
	assert_int_equal(t.summaries[1].line, 50);
	check_summary(&t.summaries[0], &a, 1, 1, 1, "before");
	check_summary(&t.summaries[1], &b, 1, 1, 1, "after");
	ev_stats_free(&a);
	ev_stats_free(&b);
	ev_text_free(&t);
}

/* memory_summary() pasted without its header lines (from "| Allocated memory |" on), the same
 * cut before the reserved rows, and a table without its Peak Usage column: each value lands in
 * its own cell and what the text does not give stays unknown (issue 14). */
static void test_fixture_partial_tables(void **state)
{
	(void)state;
	ev_text t;
	ev_stats st;
	load_sample_stats("mlp_healthy", &st);

	parse_file(FIX "summary_fragment.txt", &t);
	assert_int_equal(t.summary_count, 1);
	assert_int_equal(t.summaries[0].line, 2);
	assert_int_equal(t.summaries[0].device, -1);
	assert_int_equal(t.summaries[0].num_ooms, -1);
	assert_int_equal(t.summaries[0].num_alloc_retries, -1);
	assert_string_equal(t.summaries[0].backend, "");
	check_cells(&t.summaries[0], &st, ALL_METRICS, ALL_COLS, 1, "fragment");
	ev_text_free(&t);

	parse_file(FIX "summary_fragment_no_reserved.txt", &t);
	assert_int_equal(t.summary_count, 1);
	assert_int_equal(t.summaries[0].line, 1);
	check_cells(&t.summaries[0], &st, 1u << EV_ALLOCATED | 1u << EV_ACTIVE | 1u << EV_REQUESTED,
	            ALL_COLS, 1, "no reserved");
	ev_text_free(&t);

	parse_file(FIX "summary_no_peak.txt", &t);
	assert_int_equal(t.summary_count, 1);
	assert_int_equal(t.summaries[0].device, 0);
	check_cells(&t.summaries[0], &st, ALL_METRICS, ALL_COLS & ~(1u << EV_PEAK), 1, "no peak");
	ev_text_free(&t);
	ev_stats_free(&st);
}

/* ---- hand-written OOM fixtures ------------------------------------------------------------- */

typedef struct {
	const char *file;
	size_t index; /* which OOM of the file */
	size_t count; /* OOMs in the file */
	size_t line;
	int era;
	const char *backend;
	int device;
	uint64_t req, total, free_, allowed, this_proc, alloc, unalloc, priv, restot;
	size_t nproc;
	ad_cause cause;
	uint64_t limit;
} oom_case;

static const oom_case oom_cases[] = {
    {"oom_legacy_cached.log", 0, 1, 7, EV_OOM_ERA_LEGACY_CACHED, "CUDA", 0, 25165824ull,
     4230542787ull, 13044285ull, UNK, UNK, 3081639035ull, 55700357ull, UNK,
     3081639035ull + 55700357ull, 0, AD_CAUSE_CAPACITY, 4230542787ull},
    {"oom_fairseq_cached.log", 0, 1, 2, EV_OOM_ERA_LEGACY_CACHED, "CUDA", 1, 100663296ull,
     8514772664ull, 64487424ull, UNK, UNK, 7462505677ull, 326599967ull, UNK,
     7462505677ull + 326599967ull, 0, AD_CAUSE_CAPACITY, 8514772664ull},
    {"oom_nospace_reserved.txt", 0, 1, 1, EV_OOM_ERA_LEGACY_RESERVED, "CUDA", 1, 536870912ull,
     11553462026ull, 316208579ull, UNK, UNK, 9567039652ull, 10060960891ull - 9567039652ull, UNK,
     10060960891ull, 0, AD_CAUSE_CAPACITY, 11553462026ull},
    /* a fraction was set: the limit is the 12 GiB allowed */
    {"oom_legacy_allowed_hint.txt", 0, 1, 1, EV_OOM_ERA_LEGACY_HINT, "CUDA", 0, 1642824991ull,
     25436943811ull, 11832634900ull, 12884901888ull, UNK, 11671573627ull,
     12713103196ull - 11671573627ull, UNK, 12713103196ull, 0, AD_CAUSE_CAPACITY, 12884901888ull},
    /* starts at "Tried to allocate"; 2.41 GiB reserved-unallocated (15%) could serve 64 MiB */
    {"oom_tried_only.txt", 0, 1, 3, EV_OOM_ERA_LEGACY_RESERVED, "", 0, 67108864ull, 16943645983ull,
     46923776ull, UNK, UNK, 12992276070ull, 15579993866ull - 12992276070ull, UNK, 15579993866ull, 0,
     AD_CAUSE_FRAGMENTATION, 16943645983ull},
    /* "capacty"; 108 MiB unallocated is < 10% of 7.79 GiB: not fragmentation */
    {"oom_v21_capacty.txt", 0, 1, 1, EV_OOM_ERA_V21_SENTENCE, "CUDA", 0, 2097152ull, 8364448809ull,
     1373635ull, UNK, 8353711391ull, 8074538516ull, 113917297ull, UNK, UNK, 0, AD_CAUSE_CAPACITY,
     8364448809ull},
    /* two other processes hold 16.6 of 23.65 GiB */
    {"oom_v21_processes.txt", 0, 1, 1, EV_OOM_ERA_V21_SENTENCE, "CUDA", 0, 52428800ull,
     25393994138ull, 3208643ull, UNK, 7537667604ull, 6979321856ull, 125829120ull, UNK, UNK, 2,
     AD_CAUSE_OTHER_PROCESSES, 25393994138ull},
    /* inside a container, PyTorch's own process listed by the host's PID: the one process
     * holds what PyTorch does, so live tensors filling the card are the cause */
    {"oom_container_self_listed.txt", 0, 1, 3, EV_OOM_ERA_CURRENT, "CUDA", 0, 2104533975ull,
     84975927951ull, 1170378588ull, UNK, UNK, 79983028470ull, 3092376453ull, UNK, UNK, 1,
     AD_CAUSE_CAPACITY, 84975927951ull},
    /* the same with another process beside it holding less than PyTorch does */
    {"oom_container_shared.txt", 0, 1, 1, EV_OOM_ERA_CURRENT, "CUDA", 1, 2147483648ull,
     84975927951ull, 1288490189ull, UNK, UNK, 43057047142ull, 5690831667ull, UNK, UNK, 2,
     AD_CAUSE_CAPACITY, 84975927951ull},
    {"oom_v21_zero_free.txt", 0, 1, 1, EV_OOM_ERA_V21_SENTENCE, "CUDA", 0, 20971520ull,
     12627203850ull, 0, UNK, UNK, 11789685228ull, 336645325ull, UNK, UNK, 0, AD_CAUSE_CAPACITY,
     12627203850ull},
    /* 8.41 GiB unallocated >= 10% of 79.25 GiB and >= 1 GiB */
    {"oom_private_pools.txt", 0, 1, 1, EV_OOM_ERA_CURRENT, "CUDA", 0, 1073741824ull, 85094039552ull,
     327879229ull, UNK, 84761179587ull, 75183402516ull, 9030168740ull, 4831838208ull, UNK, 0,
     AD_CAUSE_FRAGMENTATION, 85094039552ull},
    /* "this process has 17179869184.00 GiB" overflows 64 bits: left unknown */
    {"oom_nvml_nonsense.txt", 0, 1, 1, EV_OOM_ERA_CURRENT, "CUDA", 0, 402653184ull, 17169131766ull,
     0, UNK, UNK, 15902116413ull, 426990633ull, UNK, UNK, 0, AD_CAUSE_CAPACITY, 17169131766ull},
    {"oom_driver_error.txt", 0, 1, 4, EV_OOM_ERA_DRIVER_ERROR, "CUDA", -1, UNK, UNK, UNK, UNK, UNK,
     UNK, UNK, UNK, UNK, 0, AD_CAUSE_UNKNOWN, 0},
    {"oom_xpu.txt", 0, 1, 1, EV_OOM_ERA_GENERIC, "XPU", 0, 4294967296ull, 16224238961ull, UNK, UNK,
     UNK, 10791105331ull, 12582912ull, UNK, UNK, 0, AD_CAUSE_CAPACITY, 16224238961ull},
    {"oom_generic_1eb.txt", 0, 1, 1, EV_OOM_ERA_GENERIC, "", -1, 1ull << 60, UNK, UNK, UNK, UNK,
     UNK, UNK, UNK, UNK, 0, AD_CAUSE_UNKNOWN, 0},
    /* torch_npu's extra "current active" item is skipped */
    {"oom_npu.txt", 0, 1, 2, EV_OOM_ERA_LEGACY_HINT, "NPU", 3, 2147483648ull, 65466039009ull,
     1385126953ull, UNK, UNK, 61310658150ull, 62760209613ull - 61310658150ull, UNK, 62760209613ull,
     0, AD_CAUSE_CAPACITY, 65466039009ull},
    /* wrapped inside "GPU", inside "13.19", inside "PyTorch" and "unallocated"; the figures
     * are inconsistent (13 GiB free) so no cause fits */
    {"oom_split_lines.txt", 0, 1, 1, EV_OOM_ERA_CURRENT, "CUDA", 2, 3758096384ull, 42294690447ull,
     14162654659ull, UNK, 23815593656ull, 20132659200ull, 3124588708ull, UNK, UNK, 1,
     AD_CAUSE_UNKNOWN, 42294690447ull},
    {"oom_multi.log", 0, 3, 2, EV_OOM_ERA_CURRENT, "CUDA", 0, 4294967296ull, 84975927951ull,
     3768833802ull, UNK, 80831284511ull, 70920647475ull, 9266391941ull, UNK, UNK, 0,
     AD_CAUSE_FRAGMENTATION, 84975927951ull},
    {"oom_multi.log", 1, 3, 4, EV_OOM_ERA_CURRENT, "CUDA", 0, 2147483648ull, 84975927951ull,
     1148903752ull, 64424509440ull, 83816286781ull, 64327872676ull, 18371052ull, UNK, UNK, 0,
     AD_CAUSE_CAPACITY, 64424509440ull},
    {"oom_multi.log", 2, 3, 5, EV_OOM_ERA_DRIVER_ERROR, "CUDA", -1, UNK, UNK, UNK, UNK, UNK, UNK,
     UNK, UNK, UNK, 0, AD_CAUSE_UNKNOWN, 0},
    /* line 1 ends in "PYTORCH_CUDA_ALLOC_CONF" (2.1, no full stop): its CONF is not line 2's */
    {"oom_conf_no_stop.log", 1, 2, 2, EV_OOM_ERA_V21_SENTENCE, "CUDA", 0, 805306368ull,
     25393994138ull, 316208579ull, UNK, 25061134172ull, 24492051005ull, 126248550ull, UNK, UNK, 0,
     AD_CAUSE_CAPACITY, 25393994138ull},
    {"oom_cublas.txt", 0, 1, 6, EV_OOM_ERA_LIBRARY, "CUDA", -1, UNK, UNK, UNK, UNK, UNK, UNK, UNK,
     UNK, UNK, 0, AD_CAUSE_UNKNOWN, 0},
    /* THCudaCheck's line and the RuntimeError after the traceback are one failure */
    {"oom_thcudacheck.log", 0, 1, 2, EV_OOM_ERA_LEGACY_RUNTIME, "CUDA", -1, UNK, UNK, UNK, UNK, UNK,
     UNK, UNK, UNK, UNK, 0, AD_CAUSE_UNKNOWN, 0},
    {"oom_cuda_runtime_error.txt", 0, 1, 1, EV_OOM_ERA_LEGACY_RUNTIME, "CUDA", -1, UNK, UNK, UNK,
     UNK, UNK, UNK, UNK, UNK, UNK, 0, AD_CAUSE_UNKNOWN, 0},
    /* MPS: max allowed is the limit; this process = MPS allocated + other allocations */
    {"oom_mps.txt", 0, 1, 1, EV_OOM_ERA_MPS, "MPS", -1, 536870912ull, UNK, UNK, 19466939269ull,
     18468359373ull + 1138166333ull, 18468359373ull, UNK, UNK, UNK, 0, AD_CAUSE_CAPACITY,
     19466939269ull},
    /* a 36 GiB memory fraction on a 79.15 GiB card with 41.20 GiB free */
    {"oom_allowed_far_free.txt", 0, 1, 1, EV_OOM_ERA_CURRENT, "CUDA", 0, 4294967296ull,
     84986665370ull, 44238163149ull, 38654705664ull, UNK, 35970351104ull, 1181116006ull, UNK, UNK,
     0, AD_CAUSE_CAPACITY, 38654705664ull},
    /* 21.56 MiB free and 143 MiB unallocated, both more than the 20 MiB asked: still capacity */
    {"oom_free_ge_request.txt", 0, 1, 1, EV_OOM_ERA_LEGACY_RESERVED, "CUDA", 0, 20971520ull,
     11553462026ull, 22607299ull, UNK, UNK, 10415295693ull, 10565619548ull - 10415295693ull, UNK,
     10565619548ull, 0, AD_CAUSE_CAPACITY, 11553462026ull},
};

static void expect_field(const char *file, const char *name, int has, uint64_t got, uint64_t want)
{
	if (want == UNK) {
		if (has)
			fail_msg("%s: %s should be unknown, got %llu", file, name,
			         (unsigned long long)got);
		return;
	}
	if (!has)
		fail_msg("%s: %s not parsed", file, name);
	if (got != want)
		fail_msg("%s: %s = %llu, want %llu", file, name, (unsigned long long)got,
		         (unsigned long long)want);
}

static void test_oom_fixtures(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof oom_cases / sizeof oom_cases[0]; i++) {
		const oom_case *c = &oom_cases[i];
		char path[256];
		ev_text t;
		snprintf(path, sizeof path, FIX "%s", c->file);
		parse_file(path, &t);
		assert_int_equal(t.summary_count, 0);
		if (t.oom_count != c->count)
			fail_msg("%s: %zu OOMs, want %zu", c->file, t.oom_count, c->count);
		const ev_oom *o = &t.ooms[c->index];
		if (o->line != c->line || o->era != c->era || strcmp(o->backend, c->backend) != 0 ||
		    o->device != c->device)
			fail_msg("%s #%zu: line %zu era %s backend '%s' device %d", c->file,
			         c->index, o->line, ev_oom_era_name(o->era), o->backend, o->device);
		expect_field(c->file, "requested", o->has_requested, o->requested_bytes, c->req);
		expect_field(c->file, "total", o->has_total_capacity, o->total_capacity, c->total);
		expect_field(c->file, "free", o->has_device_free, o->device_free, c->free_);
		expect_field(c->file, "allowed", o->has_allowed, o->allowed, c->allowed);
		expect_field(c->file, "this_process", o->has_this_process, o->this_process_in_use,
		             c->this_proc);
		expect_field(c->file, "allocated", o->has_allocated, o->allocated_by_pytorch,
		             c->alloc);
		expect_field(c->file, "unallocated", o->has_reserved_unallocated,
		             o->reserved_unallocated, c->unalloc);
		expect_field(c->file, "private_pools", o->has_private_pools, o->private_pools,
		             c->priv);
		expect_field(c->file, "reserved_total", o->has_reserved_total, o->reserved_total,
		             c->restot);
		assert_int_equal(o->other_process_count, c->nproc);
		if (ad_message_cause(o) != c->cause)
			fail_msg("%s #%zu: cause %s, want %s", c->file, c->index,
			         ad_cause_name(ad_message_cause(o)), ad_cause_name(c->cause));
		assert_int_equal(ev_oom_limit(o), c->limit);
		ev_text_free(&t);
	}
}

static void test_oom_processes(void **state)
{
	(void)state;
	ev_text t;
	parse_file(FIX "oom_v21_processes.txt", &t);
	const ev_oom *o = &t.ooms[0];
	assert_int_equal(o->other_process_count, 2);
	assert_int_equal(o->other_processes[0].pid, 20398);
	assert_int_equal(o->other_processes[0].bytes, 15590731284ull); /* 14.52 GiB */
	assert_int_equal(o->other_processes[1].pid, 31337);
	assert_int_equal(o->other_processes[1].bytes, 2254857830ull); /* 2.10 GiB */
	ev_text_free(&t);
	parse_file(FIX "oom_split_lines.txt", &t);
	assert_int_equal(t.ooms[0].other_processes[0].pid, 4242);
	assert_int_equal(t.ooms[0].other_processes[0].bytes, 4294967296ull);
	ev_text_free(&t);
	parse_file(FIX "oom_generic_1eb.txt", &t);
	assert_true(t.ooms[0].requested_more_than_1eb);
	ev_text_free(&t);
	parse_file(FIX "oom_cublas.txt", &t);
	assert_string_equal(t.ooms[0].status, "CUBLAS_STATUS_ALLOC_FAILED");
	assert_true(ev_oom_without_sizes(&t.ooms[0]));
	ev_text_free(&t);
	parse_file(FIX "oom_conf_no_stop.log", &t);
	assert_string_equal(t.ooms[0].backend, "CUDA");
	assert_int_equal(t.ooms[0].line, 1);
	assert_int_equal(t.ooms[0].requested_bytes, amount_ref("1.50 GiB"));
	ev_text_free(&t);
	parse_file(FIX "oom_mps.txt", &t);
	assert_int_equal(t.ooms[0].allocated_by_pytorch, amount_ref("17.20 GB"));
	assert_int_equal(t.ooms[0].this_process_in_use,
	                 amount_ref("17.20 GB") + amount_ref("1.06 GB"));
	assert_false(ev_oom_without_sizes(&t.ooms[0]));
	ev_text_free(&t);
}

static void test_garbage_is_einput(void **state)
{
	(void)state;
	size_t len = 0;
	char *d = read_text(FIX "garbage_readme.txt", &len);
	ev_text t;
	mr_error err = {0};
	assert_int_equal(ev_parse_text(d, len, &t, &err), MR_EINPUT);
	assert_int_equal(err.status, MR_EINPUT);
	assert_non_null(
	    strstr(err.msg, "no memory_summary() table or CUDA out-of-memory message found"));
	assert_int_equal(t.summary_count, 0);
	assert_int_equal(t.oom_count, 0);
	free(d);
	mr_error err2 = {0};
	assert_int_equal(ev_parse_text("", 0, &t, &err2), MR_EINPUT);
}

/* Windows line ends (CRLF) and old Mac ones (CR) give the same tables, messages and lines. */
static void test_line_endings(void **state)
{
	(void)state;
	static const char *files[] = {"before_after.log", "oom_multi.log", "wrapped_78.log"};
	for (size_t f = 0; f < 3; f++) {
		char path[256];
		size_t len = 0;
		snprintf(path, sizeof path, FIX "%s", files[f]);
		char *d = read_text(path, &len);
		ev_text ref;
		mr_error err = {0};
		assert_int_equal(ev_parse_text(d, len, &ref, &err), MR_OK);
		for (int mode = 0; mode < 2; mode++) {
			char *conv = malloc(2 * len + 1);
			size_t n = 0;
			for (size_t i = 0; i < len; i++) {
				if (d[i] == '\n') {
					conv[n++] = '\r';
					if (mode == 0)
						conv[n++] = '\n';
				} else {
					conv[n++] = d[i];
				}
			}
			ev_text t;
			assert_int_equal(ev_parse_text(conv, n, &t, &err), MR_OK);
			assert_int_equal(t.summary_count, ref.summary_count);
			assert_int_equal(t.oom_count, ref.oom_count);
			for (size_t i = 0; i < t.summary_count; i++) {
				assert_int_equal(t.summaries[i].line, ref.summaries[i].line);
				assert_memory_equal(t.summaries[i].cells, ref.summaries[i].cells,
				                    sizeof t.summaries[i].cells);
			}
			for (size_t i = 0; i < t.oom_count; i++) {
				assert_int_equal(t.ooms[i].line, ref.ooms[i].line);
				assert_int_equal(t.ooms[i].requested_bytes,
				                 ref.ooms[i].requested_bytes);
				assert_int_equal(t.ooms[i].reserved_unallocated,
				                 ref.ooms[i].reserved_unallocated);
			}
			ev_text_free(&t);
			free(conv);
		}
		ev_text_free(&ref);
		free(d);
	}
}

/* Every prefix of a few fixtures, and corrupted copies, parse without a fault (ASan/UBSan). */
static void test_truncations_and_corruption(void **state)
{
	(void)state;
	static const char *files[] = {"wrapped_78.log", "comfy_async.log", "oom_multi.log",
	                              "legacy_fairseq_2gpu.log"};
	uint32_t rng = 12345;
	for (size_t f = 0; f < 4; f++) {
		char path[256];
		size_t len = 0;
		snprintf(path, sizeof path, FIX "%s", files[f]);
		char *d = read_text(path, &len);
		for (size_t cut = 0; cut <= len; cut += (len > 4000 ? 7 : 1)) {
			char *copy =
			    malloc(cut ? cut : 1); /* exact size so ASan sees any over-read */
			memcpy(copy, d, cut);
			ev_text t;
			mr_error err = {0};
			mr_status st = ev_parse_text(copy, cut, &t, &err);
			assert_true(st == MR_OK || st == MR_EINPUT);
			ev_text_free(&t);
			free(copy);
		}
		for (int round = 0; round < 200; round++) {
			char *copy = malloc(len);
			memcpy(copy, d, len);
			for (int k = 0; k < 20; k++) {
				rng = rng * 1103515245u + 12345u;
				size_t at = (rng >> 8) % len;
				rng = rng * 1103515245u + 12345u;
				copy[at] = (char)(rng >> 16);
			}
			ev_text t;
			mr_error err = {0};
			mr_status st = ev_parse_text(copy, len, &t, &err);
			assert_true(st == MR_OK || st == MR_EINPUT);
			ev_text_free(&t);
			free(copy);
		}
		free(d);
	}
}

/* ---- amounts, causes, stats ---------------------------------------------------------------- */

static void test_parse_amount(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		uint64_t want;
		size_t used;
	} cases[] = {
	    {"204.00 MiB", 213909504ull, 10},
	    {"130.01 MiB", 136325366ull, 10}, /* 130.01 * 2^20 = 136325365.76 */
	    {"0 bytes", 0, 7},
	    {"1024 bytes", 1024, 10},
	    {"1024.00 KiB", 1048576ull, 11},
	    {"1024.00 GiB", 1ull << 40, 11},
	    {"1.5GiB", 3ull << 29, 6},
	    {"146836 KB", 146836ull * 1024, 9},
	    {"2.46 GB", 2641404887ull, 7},
	    {"7 B", 7, 3},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		uint64_t v = 0;
		int ovf = -1;
		size_t used = ev_parse_amount(cases[i].s, strlen(cases[i].s), &v, &ovf);
		if (used != cases[i].used || v != cases[i].want || ovf != 0)
			fail_msg("%s: used %zu value %llu", cases[i].s, used,
			         (unsigned long long)v);
	}
	uint64_t v;
	int ovf = 0;
	assert_int_equal(ev_parse_amount("17179869184.00 GiB", 18, &v, &ovf), 18);
	assert_int_equal(ovf, 1);
	assert_int_equal(v, UINT64_MAX);
	assert_int_equal(ev_parse_amount("99999999999999999999999 bytes", 29, &v, &ovf), 29);
	assert_int_equal(ovf, 1);
	assert_int_equal(ev_parse_amount("MiB", 3, &v, &ovf), 0);
	assert_int_equal(ev_parse_amount("12 apples", 9, &v, &ovf), 0);
	assert_int_equal(ev_parse_amount("12.5", 4, &v, &ovf), 0);
}

static void test_cause_thresholds(void **state)
{
	(void)state;
	ev_oom o;
	memset(&o, 0, sizeof o);
	o.device = 0;
	o.has_requested = o.has_total_capacity = o.has_allocated = o.has_reserved_unallocated = 1;
	o.total_capacity = 100 * MR_GIB;
	o.requested_bytes = 1 * MR_GIB;
	o.allocated_by_pytorch = 80 * MR_GIB;
	/* exactly 10% of the limit unallocated: fragmentation */
	o.reserved_unallocated = 10 * MR_GIB;
	assert_int_equal(ad_message_cause(&o), AD_CAUSE_FRAGMENTATION);
	/* just under 10%: not fragmentation; 80 + 1 GiB < 90 GiB: not capacity either */
	o.reserved_unallocated = 10 * MR_GIB - 1;
	assert_int_equal(ad_message_cause(&o), AD_CAUSE_UNKNOWN);
	/* big, but smaller than the request: cannot serve it */
	o.requested_bytes = 12 * MR_GIB;
	o.reserved_unallocated = 11 * MR_GIB;
	assert_int_equal(ad_message_cause(&o), AD_CAUSE_CAPACITY); /* 80 + 12 >= 90 */
	/* a fraction: the limit is `allowed`, and 10% of it counts */
	o.has_allowed = 1;
	o.allowed = 20 * MR_GIB;
	o.allocated_by_pytorch = 15 * MR_GIB;
	o.requested_bytes = 1 * MR_GIB;
	o.reserved_unallocated = 2 * MR_GIB;
	assert_int_equal(ev_oom_limit(&o), 20 * MR_GIB);
	assert_int_equal(ad_message_cause(&o), AD_CAUSE_FRAGMENTATION);
	/* an `allowed` above the total is ignored */
	o.allowed = 200 * MR_GIB;
	assert_int_equal(ev_oom_limit(&o), 100 * MR_GIB);
	/* other processes: total - free - reserved > 50% of the total */
	o.has_allowed = 0;
	o.has_device_free = 1;
	o.device_free = 100 * MR_MIB;
	o.allocated_by_pytorch = 30 * MR_GIB;
	o.reserved_unallocated = 1 * MR_GIB;
	o.requested_bytes = 2 * MR_GIB;
	assert_int_equal(ad_message_cause(&o), AD_CAUSE_OTHER_PROCESSES);
	/* no figures at all */
	memset(&o, 0, sizeof o);
	o.era = EV_OOM_ERA_DRIVER_ERROR;
	assert_int_equal(ad_message_cause(&o), AD_CAUSE_UNKNOWN);
	assert_int_equal(ev_oom_limit(&o), 0);
	assert_string_equal(ad_cause_name(AD_CAUSE_OTHER_PROCESSES), "other_processes");
}

static const ev_stat *find_stat(const ev_stats *s, const char *key)
{
	for (size_t i = 0; i < s->count; i++)
		if (!strcmp(s->items[i].key, key))
			return &s->items[i];
	return NULL;
}

static void test_stats_variants(void **state)
{
	(void)state;
	ev_stats flat, nested, repr;
	load_sample_stats("oom_capacity", &flat);
	load_stats(FIX "stats_nested.json", &nested);
	load_stats(FIX "stats_python_repr.txt", &repr);
	assert_int_equal(nested.count, flat.count);
	assert_int_equal(repr.count, flat.count);
	for (size_t i = 0; i < flat.count; i++) {
		const ev_stat *it = &flat.items[i];
		const ev_stat *a = find_stat(&nested, it->key), *b = find_stat(&repr, it->key);
		if (!a || !b)
			fail_msg("missing %s", it->key);
		assert_true(a->value == it->value && b->value == it->value);
		assert_true(a->is_uint == it->is_uint && b->is_uint == it->is_uint);
		assert_int_equal(a->uvalue, it->uvalue);
		assert_int_equal(b->uvalue, it->uvalue);
	}
	/* "max_split_size": -1 is kept as a number, but is no byte count */
	uint64_t ms;
	assert_non_null(find_stat(&flat, "max_split_size"));
	assert_true(find_stat(&flat, "max_split_size")->value == -1.0);
	assert_false(ev_stats_get(&flat, "max_split_size", &ms));
	assert_int_equal(stat_of(&nested, "reserved_bytes.all.current"), 6375342080ull);
	ev_stats_free(&flat);
	ev_stats_free(&nested);
	ev_stats_free(&repr);

	/* values of other types are skipped; a float is kept but not as an integer */
	static const char mixed[] =
	    "{\"a\": 1, \"b\": \"x\", \"c\": [1, {\"d\": 2}], \"e\": null, \"f\": 2.5, "
	    "\"g\": {\"h\": {\"i\": 18446744073709551615}}, \"a\": 9}";
	ev_stats s;
	mr_error err = {0};
	assert_int_equal(ev_parse_stats_json(mixed, sizeof mixed - 1, &s, &err), MR_OK);
	assert_int_equal(s.count, 4);
	uint64_t v;
	assert_true(ev_stats_get(&s, "a", &v) && v == 1);
	assert_false(ev_stats_get(&s, "f", &v));
	assert_true(ev_stats_get(&s, "g.h.i", &v) && v == UINT64_MAX);
	assert_false(ev_stats_get(&s, "b", &v));
	ev_stats_free(&s);
}

static void expect_stats_error(const char *text, const char *needle)
{
	ev_stats s;
	mr_error err = {0};
	assert_int_equal(ev_parse_stats_json(text, strlen(text), &s, &err), MR_EINPUT);
	if (!strstr(err.msg, needle))
		fail_msg("'%s': message '%s' lacks '%s'", text, err.msg, needle);
	assert_int_equal(s.count, 0);
	assert_null(s.items);
}

static void test_stats_errors(void **state)
{
	(void)state;
	expect_stats_error("[1, 2]", "expected '{' at byte 0");
	expect_stats_error("", "expected '{' at byte 0");
	expect_stats_error("{\"a\": }", "expected a number at byte 6");
	expect_stats_error("{\"a\" 1}", "expected ':' at byte 5");
	expect_stats_error("{\"a\": 1", "unexpected end of input");
	expect_stats_error("{\"a\": 1 \"b\": 2}", "expected ',' or '}' at byte 8");
	expect_stats_error("{\"a", "unterminated string");
	expect_stats_error("{}", "no numeric value");
	expect_stats_error("{\"a\": wat}", "unexpected value at byte 6");
	char deep[400];
	size_t k = 0;
	deep[k++] = '{';
	for (int i = 0; i < 40; i++) {
		memcpy(deep + k, "\"x\":{", 5);
		k += 5;
	}
	deep[k] = '\0';
	expect_stats_error(deep, "nested too deeply");
}

/* The traceback above a message: the frame that asked (innermost) and the user's own. On a real
 * log (cat_grow_loop_oom's train.log: its facts.json names the line that grows the buffer), on
 * a framework's deep traceback, and on text that only looks like one. */
static void parse_buf(const char *d, ev_text *t)
{
	mr_error err = {0};
	if (ev_parse_text(d, strlen(d), t, &err) != MR_OK)
		fail_msg("%s", err.msg);
}

#define OOM_LINE                                                                                   \
	"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a "    \
	"total capacity of 79.15 GiB of which 3.00 MiB is free. Including non-PyTorch memory, "    \
	"this process has 79.14 GiB memory in use. Of the allocated memory 78.00 GiB is "          \
	"allocated "                                                                               \
	"by PyTorch, and 500.00 MiB is reserved by PyTorch but unallocated.\n"

static void test_oom_traceback(void **state)
{
	(void)state;
	ev_text t = {0};
	char path[1024];
	size_t len = 0;
	char *facts =
	    read_text(tu_sample("cat_grow_loop_oom", "facts.json", path, sizeof path), &len);
	char *grow = strstr(facts, "\"grow\": \"");
	assert_non_null(grow);
	grow += strlen("\"grow\": \"");
	*strchr(grow, '"') = '\0';
	parse_file(tu_sample("cat_grow_loop_oom", "train.log", path, sizeof path), &t);
	assert_int_equal(t.oom_count, 1);
	const ev_oom *o = &t.ooms[0];
	assert_string_equal(o->raised.code, grow); /* the line facts.json says grows the buffer */
	assert_string_equal(o->raised.function, "body");
	assert_true(o->raised.line > 0);
	assert_int_equal(o->user.line, o->raised.line); /* the user's own line asked */
	ev_text_free(&t);
	free(facts);

	/* a library's frame asked; the user's is further up, past caret lines */
	parse_buf("Traceback (most recent call last):\n"
	          "  File \"/home/me/train.py\", line 40, in <module>\n"
	          "    trainer.train()\n"
	          "  File \"/usr/lib/python3/site-packages/transformers/trainer.py\", line 9, in "
	          "train\n"
	          "    return inner()\n"
	          "           ^^^^^^^\n"
	          "  File \"/usr/lib/python3/site-packages/torch/nn/functional.py\", line 77, in "
	          "silu\n"
	          "    return torch._C._nn.silu(input)\n" OOM_LINE,
	          &t);
	o = &t.ooms[0];
	assert_string_equal(o->raised.function, "silu");
	assert_int_equal(o->raised.line, 77);
	assert_string_equal(o->raised.code, "return torch._C._nn.silu(input)");
	assert_string_equal(o->user.file, "/home/me/train.py");
	assert_int_equal(o->user.line, 40);
	assert_string_equal(o->user.code, "trainer.train()");
	ev_text_free(&t);

	/* no traceback: a line that is not one, or a message alone */
	parse_buf("  File \"x.py\", line 3, in f\nsome other output\n" OOM_LINE OOM_LINE, &t);
	assert_int_equal(t.oom_count, 2);
	assert_int_equal(t.ooms[0].raised.line, 0);
	assert_int_equal(t.ooms[1].raised.line, 0); /* the first message is no traceback */
	ev_text_free(&t);
}

/* Many messages, each with a traceback: each walk stops at the message before it, so the log
 * is read a bounded number of times, not once per message (a cap only against quadratic
 * work). */
static void test_oom_traceback_linear(void **state)
{
	(void)state;
	enum { N = 20000 };
	static const char unit[] = "  File \"/w/t.py\", line 5, in f\n    x = g()\n" OOM_LINE;
	size_t u = sizeof unit - 1;
	char *d = malloc(u * N + 1);
	assert_non_null(d);
	for (size_t i = 0; i < N; i++)
		memcpy(d + i * u, unit, u);
	d[u * N] = '\0';
	ev_text t = {0};
	clock_t c0 = clock();
	parse_buf(d, &t);
	double secs = (double)(clock() - c0) / CLOCKS_PER_SEC;
	assert_int_equal(t.oom_count, N);
	assert_int_equal(t.ooms[N - 1].raised.line, 5);
	assert_string_equal(t.ooms[N - 1].user.code, "x = g()");
	assert_true(secs < 20);
	ev_text_free(&t);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_corpus_summaries),
	    cmocka_unit_test(test_corpus_stats),
	    cmocka_unit_test(test_corpus_ooms),
	    cmocka_unit_test(test_corpus_oom_fragmentation_figures),
	    cmocka_unit_test(test_fixture_legacy_fairseq_2gpu),
	    cmocka_unit_test(test_fixture_mlu_abbrev),
	    cmocka_unit_test(test_fixture_wrapped_78),
	    cmocka_unit_test(test_fixture_comfy_async),
	    cmocka_unit_test(test_fixture_rocm_hip),
	    cmocka_unit_test(test_fixture_counts_km),
	    cmocka_unit_test(test_fixture_before_after),
	    cmocka_unit_test(test_fixture_partial_tables),
	    cmocka_unit_test(test_oom_fixtures),
	    cmocka_unit_test(test_oom_processes),
	    cmocka_unit_test(test_garbage_is_einput),
	    cmocka_unit_test(test_line_endings),
	    cmocka_unit_test(test_truncations_and_corruption),
	    cmocka_unit_test(test_parse_amount),
	    cmocka_unit_test(test_cause_thresholds),
	    cmocka_unit_test(test_stats_variants),
	    cmocka_unit_test(test_stats_errors),
	    cmocka_unit_test(test_oom_traceback),
	    cmocka_unit_test(test_oom_traceback_linear),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
