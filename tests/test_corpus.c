/* test_corpus.c: the numbers memreport reads from real snapshots equal PyTorch's own.
 *
 * Every folder of ../shared/corpus holds a snapshot and the memory_stats.json that PyTorch
 * wrote for the same moment (for OOM runs: a moment later, in the except block, see
 * facts.json "oom_observer"). Third-party snapshots must decode and be self-consistent. */
#include <dirent.h>
#include <sys/stat.h>

#include "testutil.h"

#include "report/report.h"

typedef struct {
	const char *json_key, *stats_key;
} pair;

static const pair exact_pairs[] = {
    {"reserved", "reserved_bytes.all.current"},
    {"allocated", "allocated_bytes.all.current"},
    {"active", "active_bytes.all.current"},
    {"requested", "requested_bytes.all.current"},
    {"inactive_split", "inactive_split_bytes.all.current"},
    {"inactive_split_blocks", "inactive_split.all.current"},
    {"segments", "segment.all.current"},
};

static uint64_t pool_value(const an_pool *p, size_t i)
{
	const uint64_t v[] = {p->reserved,  p->allocated,      p->active,
	                      p->requested, p->inactive_split, p->inactive_split_blocks,
	                      p->segments};
	return v[i];
}

static int checked_samples, exact_peaks, exact_truncated;

/* The corpus README names the runs whose ring buffer wrapped: their peaks are lower bounds. */
static int known_truncated(const char *name)
{
	return strcmp(name, "gpt_large_trace") == 0 || strcmp(name, "infer_kv_oom") == 0;
}

/* One corpus folder: every number against memory_stats.json. */
static void check_sample(const char *dir, const char *name)
{
	char snap[2048], stats_path[2048];
	int oom = 0;
	snprintf(snap, sizeof snap, "%s/%s/snapshot.pickle", dir, name);
	if (!tu_exists(snap)) {
		snprintf(snap, sizeof snap, "%s/%s/oom_snapshot.pickle", dir, name);
		oom = 1;
	}
	if (!tu_exists(snap)) {
		/* the large sample is xz-compressed; tests/run.sh unpacks it under build/ */
		snprintf(snap, sizeof snap, "build/%s.pickle", name);
		oom = 0;
		if (!tu_exists(snap))
			return;
	}
	snprintf(stats_path, sizeof stats_path, "%s/%s/memory_stats.json", dir, name);
	size_t len;
	char *stats = (char *)tu_read(stats_path, &len);
	assert_non_null(stats);
	rp_report run;
	assert_int_equal(tu_load((const char *[]){snap}, 1, &run), 0);
	assert_true(run.an.device_count >= 1);
	const an_device *dv = &run.an.devices[0];
	const an_pool *all = &dv->pool[AN_POOL_ALL];
	const int is_expandable = dv->expandable;
	/* For OOM samples memory_stats.json was read in the except block, after the OOM: only
	 * reserved bytes (nothing is freed back to CUDA in between) and the trace's peaks are
	 * comparable; after a framework's teardown (Lightning frees its module first) only the
	 * peaks. */
	const int peaks_only = oom && strcmp(name, "lightning_oom") == 0;
	for (size_t i = 0; i < sizeof exact_pairs / sizeof *exact_pairs && !peaks_only; i++) {
		long long want = 0;
		assert_true(tu_json_int(stats, exact_pairs[i].stats_key, &want));
		uint64_t got = pool_value(all, i);
		/* PyTorch does not count split blocks or segments of expandable segments. */
		if ((is_expandable && i >= 4) || (oom && i != 0))
			continue;
		if ((long long)got != want) {
			print_error("%s: %s = %llu, memory_stats %lld\n", name,
			            exact_pairs[i].json_key, (unsigned long long)got, want);
			fail();
		}
	}
	/* Peaks from the trace, exact to the byte. */
	long long peak_reserved = 0, peak_alloc = 0;
	assert_true(tu_json_int(stats, "reserved_bytes.all.peak", &peak_reserved));
	assert_true(tu_json_int(stats, "allocated_bytes.all.peak", &peak_alloc));
	if (strcmp(name, "no_history") == 0) {
		assert_false(dv->has_trace);
	} else {
		assert_true(dv->has_trace);
		if (known_truncated(name)) {
			assert_true(dv->truncated);
			assert_true(dv->peak_reserved <= (uint64_t)peak_reserved);
			assert_true(dv->peak_allocated <= (uint64_t)peak_alloc);
			/* Replayed from the state its window starts in, whatever its length: exact
			 * within the window, which in these steady loops holds the run's peak. */
			exact_truncated += dv->peak_exact;
			if (dv->peak_exact && (dv->peak_allocated != (uint64_t)peak_alloc ||
			                       dv->peak_reserved != (uint64_t)peak_reserved)) {
				print_error(
				    "%s: truncated peaks %llu / %llu, memory_stats %lld / %lld\n",
				    name, (unsigned long long)dv->peak_allocated,
				    (unsigned long long)dv->peak_reserved, peak_alloc,
				    peak_reserved);
				fail();
			}
		} else {
			assert_false(dv->truncated);
			if (dv->peak_reserved != (uint64_t)peak_reserved) {
				print_error("%s: peak reserved %llu, memory_stats %lld\n", name,
				            (unsigned long long)dv->peak_reserved, peak_reserved);
				fail();
			}
			/* Where the allocator replay reproduced the trace the peaks are exact;
			 * elsewhere (a memory cap the snapshot does not record) within 1%. */
			exact_peaks += dv->peak_exact;
			double rel = (double)llabs((long long)dv->peak_allocated - peak_alloc) /
			             (double)peak_alloc;
			if (rel > (dv->peak_exact ? 0 : 0.01)) {
				print_error("%s: peak allocated %llu, memory_stats %lld\n", name,
				            (unsigned long long)dv->peak_allocated, peak_alloc);
				fail();
			}
		}
	}
	rp_free(&run);
	free(stats);
	checked_samples++;
}

static void test_corpus_numbers(void **state)
{
	(void)state;
	char dir[1024];
	snprintf(dir, sizeof dir, "%s/corpus", tu_shared());
	DIR *d = opendir(dir);
	if (!d)
		skip();
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			check_sample(dir, e->d_name);
	closedir(d);
	assert_true(checked_samples >= 16);
	/* every complete trace but the max_split_size one, whose 4 GiB cap is in no input */
	assert_true(exact_peaks >= 14);
	/* gpt_large_trace (1 M events) and infer_kv_oom: no trace is too long to replay */
	assert_true(exact_truncated >= 2);
}

/* Hand-checked facts of single samples, from their facts.json and README rows. */
static void test_corpus_features(void **state)
{
	(void)state;
	char path[1024];
	rp_report run;
	snprintf(path, sizeof path, "%s/corpus/multi_stream/snapshot.pickle", tu_shared());
	assert_int_equal(tu_load((const char *[]){path}, 1, &run), 0);
	assert_true(run.an.devices[0].pool[AN_POOL_ALL].pending_free_blocks > 0);
	assert_true(run.ev.snap.stream_count >= 2);
	rp_free(&run);

	snprintf(path, sizeof path, "%s/corpus/cuda_graph/snapshot.pickle", tu_shared());
	assert_int_equal(tu_load((const char *[]){path}, 1, &run), 0);
	assert_true(run.an.devices[0].pool[AN_POOL_PRIVATE].segments > 0);
	rp_free(&run);

	snprintf(path, sizeof path, "%s/corpus/gpt_varlen_expandable/snapshot.pickle", tu_shared());
	assert_int_equal(tu_load((const char *[]){path}, 1, &run), 0);
	assert_true(run.ev.snap.settings.expandable_segments);
	assert_true(run.an.devices[0].expandable);
	rp_free(&run);

	snprintf(path, sizeof path, "%s/corpus/oom_fragmentation/oom_snapshot.pickle", tu_shared());
	assert_int_equal(tu_load((const char *[]){path}, 1, &run), 0);
	const an_device *dv = &run.an.devices[0];
	assert_int_equal(dv->oom_events, 1);
	const md_event *oom = &run.ev.snap.devices[0].events[dv->last_oom_event];
	assert_int_equal(oom->action, MD_ACT_OOM);
	assert_int_equal(oom->size, 213909504);    /* facts.json ask_bytes */
	assert_int_equal(oom->addr, 145468030976); /* oom_observer device_free */
	assert_int_equal(dv->pool[AN_POOL_ALL].largest_free, 60817408);  /* facts largest_hole */
	assert_int_equal(dv->pool[AN_POOL_ALL].free_cached, 1635778560); /* holes_bytes */
	assert_false(run.ev.snap.settings.expandable_segments);
	assert_int_equal(run.ev.snap.settings.max_split_size, UINT64_MAX);
	rp_free(&run);

	snprintf(path, sizeof path, "%s/corpus/oom_fragmentation_maxsplit/snapshot.pickle",
	         tu_shared());
	assert_int_equal(tu_load((const char *[]){path}, 1, &run), 0);
	assert_int_equal(run.ev.snap.settings.max_split_size, 100 * 1024 * 1024);
	rp_free(&run);
}

/* Parses "1,234,567" at p into *out; returns the character after it. */
static const char *parse_commas(const char *p, unsigned long long *out)
{
	*out = 0;
	while (*p == ' ')
		p++;
	while ((*p >= '0' && *p <= '9') || *p == ',') {
		if (*p != ',')
			*out = *out * 10 + (unsigned long long)(*p - '0');
		p++;
	}
	return p;
}

/* SOURCES.md's "Measured content" row for a file: segments, reserved and active bytes as the
 * shared folder's curator measured them with Python. Returns 1 when found. */
static int measured(const char *sources, const char *file, unsigned long long *segments,
                    unsigned long long *reserved, unsigned long long *active)
{
	const char *table = strstr(sources, "## Measured content");
	if (!table)
		return 0;
	char key[512];
	snprintf(key, sizeof key, "| `%s` |", file);
	const char *row = strstr(table, key);
	if (!row)
		return 0;
	const char *p = row + strlen(key);
	p = parse_commas(p, segments);
	p = strchr(p, '|');
	if (!p)
		return 0;
	p = parse_commas(p + 1, reserved);
	p = strchr(p, '|');
	if (!p)
		return 0;
	parse_commas(p + 1, active);
	return 1;
}

/* Other people's snapshots, other PyTorch versions: decode, and every segment is tiled. */
static void test_third_party(void **state)
{
	(void)state;
	char dir[1024];
	snprintf(dir, sizeof dir, "%s/third_party/snapshots", tu_shared());
	DIR *d = opendir(dir);
	if (!d)
		skip();
	struct dirent *e;
	int n = 0, compared = 0;
	char sources_path[1200];
	snprintf(sources_path, sizeof sources_path, "%s/third_party/SOURCES.md", tu_shared());
	size_t slen;
	char *sources = (char *)tu_read(sources_path, &slen);
	assert_non_null(sources);
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[2048];
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		rp_report run;
		assert_int_equal(tu_load((const char *[]){path}, 1, &run), 0);
		unsigned long long segs, res, act;
		if (measured(sources, e->d_name, &segs, &res, &act)) {
			const an_pool *all = &run.an.devices[0].pool[AN_POOL_ALL];
			assert_int_equal(all->segments, segs);
			assert_int_equal(all->reserved, res);
			assert_int_equal(all->active, act);
			compared++;
		}
		assert_int_equal(run.ev.snap.inconsistent_segments, 0);
		uint64_t sum = 0, reserved = 0;
		for (size_t i = 0; i < run.ev.snap.segment_count; i++) {
			const md_segment *seg = &run.ev.snap.segments[i];
			reserved += seg->total_size;
			for (size_t j = 0; j < seg->block_count; j++)
				sum += run.ev.snap.blocks[seg->first_block + j].size;
		}
		assert_int_equal(sum, reserved);
		assert_int_equal(run.an.devices[0].pool[AN_POOL_ALL].reserved, reserved);
		rp_free(&run);
		n++;
	}
	closedir(d);
	free(sources);
	assert_true(n >= 19);
	assert_int_equal(compared, n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_corpus_numbers),
	    cmocka_unit_test(test_corpus_features),
	    cmocka_unit_test(test_third_party),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
