/* test_corpus.c: the numbers memreport reads from real snapshots equal PyTorch's own.
 *
 * Every sample of the project's corpus (tests/corpus) and of $MEMREPORT_SHARED/corpus holds a
 * snapshot and the memory_stats.json that PyTorch wrote for the same moment; for OOM runs a
 * moment later, in the except block, so only reserved bytes and the trace's peaks compare with
 * it, but the runs recorded by tools/record_runs.py also keep facts.json "oom_observer_stats",
 * read inside the OOM observer at the moment of the snapshot: every number compares with those.
 * Third-party snapshots must decode and be self-consistent. */
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

typedef struct {
	size_t checked, exact_peaks, observer, wrapped;
	size_t exact_truncated, exact_long; /* long: over 300 000 events, the replay's old cap */
} tally;

/* The runs whose trace does not reach back to an empty allocator, as their READMEs say: the
 * ring buffer wrapped (gpt_large_trace and infer_kv_oom of the shared corpus, gen_small_oom_b96
 * and t5_beam_generate_oom, frcnn_varsize_healthy, hf_generate_kv_oom and
 * infer_server_varshape_healthy of tests/corpus), or history began after memory was in use
 * (cupy_non_pytorch and cudamalloc_outside_oom: after their warm-up, see tools/record_runs.py
 * and tools/record_heldout7.py; notebook_stale_model_oom: after its first model's cells,
 * tools/record_heldout11.py; ckpt_load_no_map_location_oom: after its setup's training,
 * tools/record_heldout17.py; hf_trainer_gradckpt_healthy's 20000 entries wrapped,
 * tools/record_heldout13.py; forward_hook_cache_oom: after its setup's steps, and the 20000
 * entries of varsize_images_native_healthy and varsize_images_expandable wrapped,
 * tools/record_heldout18.py; ema_deepcopy_each_eval_leak_oom's 20000 entries wrapped on
 * purpose, tools/record_heldout22.py: its first model copies are older than the trace; the
 * 25000 entries of hf_generate_num_return_sequences_oom and the 40000 of
 * hf_static_cache_generate_healthy wrapped, tools/record_heldout21.py; the 40000 entries of
 * hf_trainer_mlm_eval_accum_healthy wrapped, and late_history_feature_cache_oom's history began
 * after its feature cache was built, on purpose, tools/record_heldout29.py; the 30000 entries
 * of lightning_callback_feature_cache_leak_oom and the 40000 of rag_embed_then_generate_healthy
 * wrapped, tools/record_heldout30.py). Their peaks are lower bounds. */
static int known_truncated(const char *name)
{
	static const char *const names[] = {"gpt_large_trace",
	                                    "infer_kv_oom",
	                                    "gen_small_oom_b96",
	                                    "cupy_non_pytorch",
	                                    "t5_beam_generate_oom",
	                                    "frcnn_varsize_healthy",
	                                    "hf_generate_kv_oom",
	                                    "infer_server_varshape_healthy",
	                                    "cudamalloc_outside_oom",
	                                    "ppo_rlhf_train_oom",
	                                    "notebook_stale_model_oom",
	                                    "hf_trainer_gradckpt_healthy",
	                                    "vit_near_cap_healthy",
	                                    "gc_threshold_varlen_healthy",
	                                    "cudagraph_many_shapes_oom",
	                                    "maml_create_graph_oom",
	                                    "loss_list_tiny_growth_healthy",
	                                    "ckpt_load_no_map_location_oom",
	                                    "forward_hook_cache_oom",
	                                    "varsize_images_native_healthy",
	                                    "varsize_images_expandable",
	                                    "accelerate_grad_accum_healthy",
	                                    "ema_deepcopy_each_eval_leak_oom",
	                                    "hf_generate_num_return_sequences_oom",
	                                    "hf_static_cache_generate_healthy",
	                                    "hf_trainer_mlm_eval_accum_healthy",
	                                    "late_history_feature_cache_oom",
	                                    "lightning_callback_feature_cache_leak_oom",
	                                    "rag_embed_then_generate_healthy",
	                                    "hf_chat_lru_sessions_healthy"};
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strcmp(name, names[i]) == 0)
			return 1;
	return 0;
}

/* The integer `key` of the JSON object `section` of facts (the first of its name). */
static int section_int(const char *facts, const char *section, const char *key, long long *out)
{
	char pat[128];
	snprintf(pat, sizeof pat, "\"%s\": {", section);
	const char *p = facts ? strstr(facts, pat) : NULL;
	return p && tu_json_int(p, key, out);
}

/* The pool's numbers against stats (memory_stats.json or the observer's), all or reserved only;
 * PyTorch does not count split blocks or segments of expandable segments. */
static void check_pairs(const char *name, const char *what, const char *stats, const an_device *dv,
                        int reserved_only)
{
	const an_pool *all = &dv->pool[AN_POOL_ALL];
	for (size_t i = 0; i < sizeof exact_pairs / sizeof *exact_pairs; i++) {
		long long want = 0;
		if ((dv->expandable && i >= 4) || (reserved_only && i != 0))
			continue;
		if (!tu_json_int(stats, exact_pairs[i].stats_key, &want))
			fail_msg("%s: %s has no %s", name, what, exact_pairs[i].stats_key);
		uint64_t got = pool_value(all, i);
		if ((long long)got != want)
			fail_msg("%s: %s = %llu, %s %lld", name, exact_pairs[i].json_key,
			         (unsigned long long)got, what, want);
	}
}

/* Whether the trace is there and reaches back to an empty allocator, as the READMEs and
 * facts.json say. */
static void check_trace(const char *name, const char *facts, const an_device *dv, tally *t)
{
	long long max_entries = 0;
	if (strcmp(name, "no_history") == 0) {
		assert_false(dv->has_trace);
		return;
	}
	assert_true(dv->has_trace);
	/* the ring buffer keeps max_entries events (facts.json "history"): exactly that many when
	 * it wrapped, which only a run known to be truncated may have done */
	if (section_int(facts, "history", "max_entries", &max_entries)) {
		int wrapped = dv->trace_events == (size_t)max_entries;
		if (dv->trace_events > (size_t)max_entries || (wrapped && !known_truncated(name)))
			fail_msg("%s: %zu events of max_entries %lld", name, dv->trace_events,
			         max_entries);
		t->wrapped += (size_t)wrapped;
	}
	if (dv->truncated != known_truncated(name))
		fail_msg("%s: trace %s truncated", name, dv->truncated ? "is" : "is not");
	/* Where the allocator replay reproduced the trace the peaks are exact. */
	t->exact_peaks += (size_t)(dv->peak_exact && !dv->truncated);
	t->exact_truncated += (size_t)(dv->peak_exact && dv->truncated);
	t->exact_long += (size_t)(dv->peak_exact && dv->trace_events > 300000);
}

/* The trace's peaks against PyTorch's in stats: exact (within 1% for peak allocated where the
 * replay did not reproduce the trace: a memory cap the snapshot does not record), or lower
 * bounds where the trace is truncated. */
static void check_peaks(const char *name, const char *what, const char *stats, const an_device *dv)
{
	long long peak_reserved = 0, peak_alloc = 0;
	if (!tu_json_int(stats, "reserved_bytes.all.peak", &peak_reserved) ||
	    !tu_json_int(stats, "allocated_bytes.all.peak", &peak_alloc))
		fail_msg("%s: %s has no peaks", name, what);
	if (!dv->has_trace)
		return;
	if (dv->truncated) {
		assert_true(dv->peak_reserved <= (uint64_t)peak_reserved);
		assert_true(dv->peak_allocated <= (uint64_t)peak_alloc);
		/* replayed from the state its window starts in, whatever its length: exact
		 * within the window, which holds the run's peak unless reserved memory never
		 * grows inside it (the peak came before: lower bounds only) */
		if (dv->peak_exact && dv->initial_reserved < dv->peak_reserved &&
		    (dv->peak_allocated != (uint64_t)peak_alloc ||
		     dv->peak_reserved != (uint64_t)peak_reserved))
			fail_msg("%s: truncated, exact peaks %llu / %llu, %s %lld / %lld", name,
			         (unsigned long long)dv->peak_allocated,
			         (unsigned long long)dv->peak_reserved, what, peak_alloc,
			         peak_reserved);
		return;
	}
	if (dv->peak_reserved != (uint64_t)peak_reserved)
		fail_msg("%s: peak reserved %llu, %s %lld", name,
		         (unsigned long long)dv->peak_reserved, what, peak_reserved);
	double rel = (double)llabs((long long)dv->peak_allocated - peak_alloc) / (double)peak_alloc;
	if (rel > (dv->peak_exact ? 0 : 0.01))
		fail_msg("%s: peak allocated %llu, %s %lld", name,
		         (unsigned long long)dv->peak_allocated, what, peak_alloc);
}

/* One corpus folder: every number against memory_stats.json and the observer's stats. */
static void check_sample(const char *dir, const char *name, void *ctx)
{
	tally *t = ctx;
	char snap[2100], path[2100]; /* dir (at most 2047 bytes) and a file name */
	int oom = 0;
	snprintf(snap, sizeof snap, "%s/snapshot.pickle", dir);
	if (!tu_exists(snap)) {
		snprintf(snap, sizeof snap, "%s/oom_snapshot.pickle", dir);
		oom = 1;
	}
	snprintf(path, sizeof path, "%s/facts.json", dir);
	size_t nlen;
	char *nosnap = tu_exists(snap) ? NULL : (char *)tu_read(path, &nlen);
	/* a run whose allocator could not dump one (cudaMallocAsync): its facts.json says so,
	 * and its evidence is the log and the stats alone */
	int cannot = nosnap && strstr(nosnap, "\"dump_snapshot\": \"failed");
	free(nosnap);
	if (cannot) {
		t->checked++;
		return;
	}
	if (!tu_exists(snap)) {
		/* the shared large sample: tests/unpack_corpus.sh unpacks it under build/ */
		snprintf(snap, sizeof snap, "build/%s.pickle", name);
		oom = 0;
		if (!tu_exists(snap))
			fail_msg("%s: no snapshot in %s, nor %s", name, dir, snap);
	}
	size_t len;
	snprintf(path, sizeof path, "%s/memory_stats.json", dir);
	char *stats = (char *)tu_read(path, &len);
	if (!stats)
		fail_msg("cannot read %s", path);
	snprintf(path, sizeof path, "%s/facts.json", dir);
	char *facts = (char *)tu_read(path, &len);
	rp_report run;
	assert_int_equal(tu_load((const char *[]){snap}, 1, &run), 0);
	assert_true(run.an.device_count >= 1);
	const an_device *dv = &run.an.devices[0];
	/* For OOM samples memory_stats.json was read in the except block, after the OOM: only
	 * reserved bytes (nothing is freed back to CUDA in between) and the trace's peaks are
	 * comparable; after a framework's teardown (Lightning frees its module first: the shared
	 * lightning_oom, and the project's runs whose facts.json names Lightning) only the
	 * peaks. The observer's stats are the
	 * snapshot's moment: everything. */
	const char *observer = facts ? strstr(facts, "\"oom_observer_stats\": {") : NULL;
	/* more OOMs in memory_stats.json than the observer had seen: the snapshot is of an
	 * earlier OOM that the run survived (cuDNN falling back to an algorithm with a smaller
	 * workspace), and the run allocated (and reserved) more before the OOM the except block
	 * caught; its reserved bytes are of another moment, its peaks only bound the trace's from
	 * above */
	long long ooms_after = 0, ooms_at = 0;
	int later = oom && observer && tu_json_int(stats, "num_ooms", &ooms_after) &&
	            tu_json_int(observer, "num_ooms", &ooms_at) && ooms_after > ooms_at;
	if (!oom)
		check_pairs(name, "memory_stats", stats, dv, 0);
	else if (!later && strcmp(name, "lightning_oom") != 0 &&
	         !(facts && strstr(facts, "\"framework\": \"lightning")))
		check_pairs(name, "memory_stats", stats, dv, 1);
	if (oom && observer) {
		check_pairs(name, "oom_observer_stats", observer, dv, 0);
		check_peaks(name, "oom_observer_stats", observer, dv);
		t->observer++;
	}
	if (later) {
		long long peak_alloc = 0, peak_reserved = 0;
		assert_true(tu_json_int(stats, "allocated_bytes.all.peak", &peak_alloc));
		assert_true(tu_json_int(stats, "reserved_bytes.all.peak", &peak_reserved));
		assert_true(dv->peak_allocated <= (uint64_t)peak_alloc);
		assert_true(dv->peak_reserved <= (uint64_t)peak_reserved);
	} else
		check_peaks(name, "memory_stats", stats, dv);
	check_trace(name, facts, dv, t);
	rp_free(&run);
	free(stats);
	free(facts);
	t->checked++;
}

static void test_corpus_numbers(void **state)
{
	(void)state;
	tally t = {0};
	size_t samples = tu_each_sample(check_sample, &t);
	assert_int_equal(t.checked, samples);
	assert_true(samples >= tu_project_samples());
	assert_true(tu_project_samples() >= 36);
	/* the OOM runs of tests/corpus with the observer's stats, one of them wrapped on purpose */
	assert_true(t.observer >= 9);
	assert_true(t.wrapped >= 1);
	/* the allocator replay reproduces every complete trace of tests/corpus but two, whose
	 * memory caps are in no input (oom_fragmentation_maxsplit, infer_mode_oom) */
	print_message("%zu samples, %zu exact peaks\n", samples, t.exact_peaks);
	assert_true(t.exact_peaks >= 31);
	/* every trace is replayed: the truncated ones of tests/corpus (gen_small_oom_b96,
	 * cupy_non_pytorch) and, with the shared corpus, gpt_large_trace's 1 M events */
	assert_true(t.exact_truncated >= 2);
	char big[2048];
	snprintf(big, sizeof big, "%s/corpus/gpt_large_trace/facts.json", tu_shared());
	if (tu_exists(big))
		assert_true(t.exact_long >= 1 && t.exact_truncated >= 4);
}

/* Hand-checked facts of single samples, from their facts.json and README rows. */
static void test_corpus_features(void **state)
{
	(void)state;
	char path[1024];
	rp_report run;
	assert_int_equal(
	    tu_load((const char *[]){tu_snapshot("multi_stream", path, sizeof path)}, 1, &run), 0);
	assert_true(run.an.devices[0].pool[AN_POOL_ALL].pending_free_blocks > 0);
	assert_true(run.ev.snap.stream_count >= 2);
	rp_free(&run);

	assert_int_equal(
	    tu_load((const char *[]){tu_snapshot("cuda_graph", path, sizeof path)}, 1, &run), 0);
	assert_true(run.an.devices[0].pool[AN_POOL_PRIVATE].segments > 0);
	rp_free(&run);

	assert_int_equal(tu_load((const char *[]){tu_snapshot("oom_fragmentation_expandable", path,
	                                                      sizeof path)},
	                         1, &run),
	                 0);
	assert_true(run.ev.snap.settings.expandable_segments);
	assert_true(run.an.devices[0].expandable);
	rp_free(&run);

	assert_int_equal(
	    tu_load((const char *[]){tu_snapshot("oom_fragmentation", path, sizeof path)}, 1, &run),
	    0);
	const an_device *dv = &run.an.devices[0];
	assert_int_equal(dv->oom_events, 1);
	const md_event *oom = &run.ev.snap.devices[0].events[dv->last_oom_event];
	assert_int_equal(oom->action, MD_ACT_OOM);
	assert_int_equal(oom->size, tu_corpus_int("oom_fragmentation", "facts.json", "ask_bytes"));
	/* the trace's oom event carries the device's free bytes the observer saw */
	assert_int_equal(oom->addr,
	                 tu_corpus_int("oom_fragmentation", "facts.json", "device_free"));
	assert_int_equal(dv->pool[AN_POOL_ALL].largest_free,
	                 tu_corpus_int("oom_fragmentation", "facts.json", "largest_hole"));
	assert_int_equal(dv->pool[AN_POOL_ALL].free_cached,
	                 tu_corpus_int("oom_fragmentation", "facts.json", "holes_bytes"));
	assert_false(run.ev.snap.settings.expandable_segments);
	assert_int_equal(run.ev.snap.settings.max_split_size, UINT64_MAX);
	rp_free(&run);

	assert_int_equal(
	    tu_load((const char *[]){tu_snapshot("oom_fragmentation_maxsplit", path, sizeof path)},
	            1, &run),
	    0);
	assert_int_equal(run.ev.snap.settings.max_split_size, 100 * 1024 * 1024);
	rp_free(&run);
}

/* The shared corpus's twin of gpt_varlen records expandable segments too. */
static void test_corpus_features_shared(void **state)
{
	(void)state;
	char path[1024];
	rp_report run;
	assert_int_equal(
	    tu_load((const char *[]){tu_snapshot("gpt_varlen_expandable", path, sizeof path)}, 1,
	            &run),
	    0);
	assert_true(run.ev.snap.settings.expandable_segments);
	assert_true(run.an.devices[0].expandable);
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
	    cmocka_unit_test(test_corpus_features_shared),
	    cmocka_unit_test(test_third_party),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
