/* test_advice.c: the diagnosis says what each corpus sample's README row says, from the numbers.
 *
 * Expected figures come from PyTorch's own files beside each sample (facts.json,
 * memory_stats.json, the OOM message), never from memreport. */
#include "testutil.h"

#include "base/units.h"
#include "render/redact.h"
#include "render/render_json.h"
#include "report/report.h"

#define TEXT_FIX "tests/fixtures/text/"

static int load2(const char *a, const char *b, rp_report *run)
{
	const char *paths[] = {a, b};
	return tu_load(paths, b ? 2 : 1, run);
}

/* Loads one file of a corpus sample (file NULL: its snapshot); skips when it is absent. */
static int load_sample(const char *sample, const char *file, rp_report *run)
{
	char path[1024];
	if (file)
		tu_sample(sample, file, path, sizeof path);
	else
		tu_snapshot(sample, path, sizeof path);
	return load2(path, NULL, run);
}

/* Loads a sample's snapshot with one more of its files (its train.log or oom_message.txt). */
static int load_with(const char *sample, const char *file, rp_report *run)
{
	char snap[1024], other[1024];
	tu_snapshot(sample, snap, sizeof snap);
	return load2(snap, tu_sample(sample, file, other, sizeof other), run);
}

static const ad_finding *find(const rp_report *run, const char *id)
{
	for (size_t i = 0; i < run->advice.finding_count; i++)
		if (strcmp(run->advice.findings[i].id, id) == 0)
			return &run->advice.findings[i];
	return NULL;
}

/* A recommendation by id, or NULL. */
static const ad_recommendation *rec_of(const rp_report *run, const char *id)
{
	for (size_t i = 0; i < run->advice.rec_count; i++)
		if (strcmp(run->advice.recs[i].id, id) == 0)
			return &run->advice.recs[i];
	return NULL;
}

/* Rank of a recommendation, or 0 when absent. */
static int rank_of(const rp_report *run, const char *id)
{
	const ad_recommendation *r = rec_of(run, id);
	return r ? r->rank : 0;
}

static int has_critical(const rp_report *run)
{
	for (size_t i = 0; i < run->advice.finding_count; i++)
		if (run->advice.findings[i].severity == AD_CRITICAL)
			return 1;
	return 0;
}

static void test_oom_fragmentation(void **state)
{
	(void)state;
	rp_report run;
	assert_int_equal(load_sample("oom_fragmentation", NULL, &run), 0);
	const ad_advice *a = &run.advice;
	assert_true(a->oom.present);
	assert_int_equal(a->oom.cause, AD_CAUSE_FRAGMENTATION);
	assert_int_equal(a->oom.requested,
	                 tu_corpus_int("oom_fragmentation", "facts.json", "ask_bytes"));
	assert_int_equal(a->oom.largest_free,
	                 tu_corpus_int("oom_fragmentation", "facts.json", "largest_hole"));
	assert_int_equal(a->oom.free_cached,
	                 tu_corpus_int("oom_fragmentation", "facts.json", "holes_bytes"));
	assert_non_null(find(&run, "oom_fragmentation"));
	assert_int_equal(rank_of(&run, "expandable_segments"), 1);
	assert_non_null(strstr(a->verdict, "fragmentation"));
	/* The advice quotes its replay: the recorded settings run out of memory as the run did,
	 * expandable segments do not, as the twin run did not. */
	assert_true(a->replay_count >= 2);
	assert_true(a->replays[0].matches);
	assert_true(a->replays[0].oom);
	assert_string_equal(a->replays[1].conf, "expandable_segments:True");
	assert_false(a->replays[1].oom);
	assert_true(a->replays[1].peak_reserved <=
	            (uint64_t)tu_corpus_int("oom_fragmentation_expandable", "memory_stats.json",
	                                    "reserved_bytes.all.peak"));
	assert_non_null(
	    strstr(a->recs[0].reason, "Replayed with expandable_segments:True: no OOM"));
	rp_free(&run);
}

/* The forward that failed, against the earlier ones. eval_bigger_batch_oom died in an evaluation
 * under no_grad at eval_batch samples after training at microbatch ones: its finished layers
 * freed their tensors, and its operations asked for eval_batch / microbatch times as much.
 * convnext_resize_oom died in a training forward (saving its layers) at 224-pixel images after
 * 128-pixel ones: (224 / 128)^2 times (facts.json's image_sizes). ckpt_on_oom's checkpointed blocks
 * free their tensors in any training forward: it cannot tell. */
static void test_failing_pass(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "eval_bigger_batch_oom";
	assert_int_equal(load_with(s, "train.log", &run), 0);
	const an_structure *r = &run.an.devices[0].run;
	double want = (double)tu_corpus_int(s, "facts.json", "eval_batch") /
	              (double)tu_corpus_int(s, "facts.json", "microbatch");
	assert_int_equal(r->oom_forward_graph, -1);
	assert_true(r->oom_input_ratio > want * 0.95 && r->oom_input_ratio < want * 1.05);
	assert_non_null(find(&run, "eval_pass_oom"));
	assert_non_null(find(&run, "larger_input"));
	assert_int_equal(rank_of(&run, "gradient_accumulation"), 0);
	assert_int_equal(rank_of(&run, "activation_checkpointing"), 0);
	/* the training forwards fit at their batch: this pass's batch comes first */
	assert_int_equal(rank_of(&run, "reduce_microbatch"), 1);
	assert_non_null(strstr(rec_of(&run, "reduce_microbatch")->change, "//= 8"));
	rp_free(&run);
	/* Lightning's validation inside fit() (evaluation_loop.py, under no_grad) died in its
	 * loss, after the forward: the loop says no_grad where the forward's layers could not */
	s = "lightning_val_bigger_batch_oom";
	assert_int_equal(load_with(s, "train.log", &run), 0);
	r = &run.an.devices[0].run;
	want = (double)tu_corpus_int(s, "facts.json", "val_batch") /
	       (double)tu_corpus_int(s, "facts.json", "train_batch");
	assert_int_equal(r->oom_forward_graph, -1);
	assert_true(r->oom_input_ratio > want * 0.95 && r->oom_input_ratio < want * 1.05);
	assert_non_null(find(&run, "eval_pass_oom"));
	assert_int_equal(rank_of(&run, "reduce_microbatch"), 1);
	assert_int_equal(rank_of(&run, "gradient_accumulation"), 0);
	rp_free(&run);
	assert_int_equal(load_sample("convnext_resize_oom", NULL, &run), 0);
	r = &run.an.devices[0].run;
	want = (224.0 / 128.0) * (224.0 / 128.0);
	assert_int_equal(r->oom_forward_graph, 1);
	assert_true(r->oom_input_ratio > want * 0.95 && r->oom_input_ratio < want * 1.05);
	assert_non_null(find(&run, "larger_input"));
	assert_null(find(&run, "eval_pass_oom"));
	rp_free(&run);
	/* wav2vec2_ctc_varlen_oom died on 15.5 s of audio after 9.8 s at most: the first conv's
	 * output (conv0_out_bytes_fp32) is the measure of the input */
	s = "wav2vec2_ctc_varlen_oom";
	assert_int_equal(load_sample(s, NULL, &run), 0);
	want = (double)tu_corpus_int(s, "facts.json", "15.5") /
	       (double)tu_corpus_int(s, "facts.json", "9.8");
	r = &run.an.devices[0].run;
	assert_true(r->oom_input_ratio > want * 0.95 && r->oom_input_ratio < want * 1.05);
	assert_non_null(find(&run, "larger_input"));
	rp_free(&run);
	assert_int_equal(load_sample("ckpt_on_oom", NULL, &run), 0);
	assert_int_equal(run.an.devices[0].run.oom_forward_graph, 0);
	assert_null(find(&run, "eval_pass_oom"));
	rp_free(&run);
}

/* generate()'s decoding loop is an inference run's iteration (hf_generate_kv_oom's KV cache
 * grows kv_bytes_per_token_per_seq x batch a token), not a training run's: the PPO step of
 * ppo_rlhf_train_oom generated new_tokens tokens and died in the first training forward after,
 * within its first step. */
static void test_generation_loop(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "hf_generate_kv_oom";
	assert_int_equal(load_sample(s, NULL, &run), 0);
	const an_structure *r = &run.an.devices[0].run;
	double per_token = (double)tu_corpus_int(s, "facts.json", "kv_bytes_per_token_per_seq") *
	                   (double)tu_corpus_int(s, "facts.json", "batch");
	assert_int_equal(r->kind, AN_RUN_INFERENCE);
	assert_true(r->start_count >= 3);
	assert_true((double)r->growth_per_iteration > per_token * 0.95 &&
	            (double)r->growth_per_iteration < per_token * 1.05);
	rp_free(&run);
	assert_int_equal(load_sample("ppo_rlhf_train_oom", NULL, &run), 0);
	r = &run.an.devices[0].run;
	assert_int_equal(r->kind, AN_RUN_TRAINING);
	assert_true(tu_corpus_int("ppo_rlhf_train_oom", "facts.json", "new_tokens") > 2);
	assert_true(r->start_count < 2);
	rp_free(&run);
}

/* The overhead at the peak is over the warning's bar (PyTorch's own peaks), but the free memory
 * at the peak is one block (a bounded memory bank, reused every step): cached, not cut up. */
static void test_cached_peak_free(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "moco_queue_healthy";
	assert_int_equal(load_sample(s, NULL, &run), 0);
	uint64_t reserved =
	    (uint64_t)tu_corpus_int(s, "memory_stats.json", "reserved_bytes.all.peak");
	uint64_t allocated =
	    (uint64_t)tu_corpus_int(s, "memory_stats.json", "allocated_bytes.all.peak");
	assert_true((reserved - allocated) * 100 >= reserved * 15);
	assert_true(reserved - allocated >= 256ull << 20);
	assert_false(run.advice.oom.present);
	assert_null(find(&run, "high_fragmentation"));
	assert_int_equal(rank_of(&run, "expandable_segments"), 0);
	assert_int_equal(strncmp(run.advice.verdict, "Healthy", 7), 0);
	rp_free(&run);
}

static void test_oom_capacity(void **state)
{
	(void)state;
	rp_report run;
	assert_int_equal(load_sample("oom_capacity", NULL, &run), 0);
	const ad_advice *a = &run.advice;
	assert_int_equal(a->oom.cause, AD_CAUSE_CAPACITY);
	assert_int_equal(a->oom.requested, tu_corpus_int("oom_capacity", "facts.json", "alloc"));
	uint64_t live = 0;
	for (int i = 0; i < AD_CAT_COUNT; i++)
		live += a->categories.bytes[i];
	assert_true(a->categories.bytes[AD_CAT_ACTIVATIONS] * 10 >= live * 6);
	int top2 = 0;
	for (size_t i = 0; i < a->rec_count && i < 2; i++)
		top2 |= strcmp(a->recs[i].id, "reduce_microbatch") == 0 ||
		        strcmp(a->recs[i].id, "activation_checkpointing") == 0 ||
		        strcmp(a->recs[i].id, "gradient_accumulation") == 0;
	assert_true(top2);
	assert_int_not_equal(rank_of(&run, "expandable_segments"), 1);
	rp_free(&run);
}

static void test_oom_capacity_params(void **state)
{
	(void)state;
	rp_report run;
	assert_int_equal(load_sample("oom_capacity_params", NULL, &run), 0);
	const ad_advice *a = &run.advice;
	assert_int_equal(a->oom.cause, AD_CAUSE_CAPACITY);
	const uint64_t six = 6ull << 30;
	uint64_t p = a->categories.bytes[AD_CAT_PARAMETERS],
	         g = a->categories.bytes[AD_CAT_GRADIENTS];
	assert_true(p > six * 95 / 100 && p < six * 105 / 100);
	assert_true(g > six * 95 / 100 && g < six * 105 / 100);
	assert_true(a->categories.bytes[AD_CAT_OPTIMIZER] >= 4ull << 30);
	assert_true(rank_of(&run, "fsdp") > 0);
	assert_true(rank_of(&run, "fsdp") < rank_of(&run, "reduce_microbatch"));
	rp_free(&run);
}

/* A no_grad validation between the loss and loss.backward() (held-out set 27): the training
 * forward's graph still live at the OOM is at least what the request lacked, and at most what
 * live memory held beyond the end of a finished step (PyTorch's memory_allocated() after a step,
 * facts.json, against its allocated bytes at the OOM, oom_observer_stats). */
static void test_graph_held_in_eval(void **state)
{
	(void)state;
	const char *s = "eval_before_backward_graph_held_oom";
	rp_report run;
	assert_int_equal(load_with(s, "train.log", &run), 0);
	const an_oom *o = &run.an.devices[0].oom;
	uint64_t held = run.an.devices[0].run.graph_held_at_oom;
	uint64_t at_oom = (uint64_t)tu_corpus_int(s, "facts.json", "allocated_bytes.all.current");
	uint64_t after_step = (uint64_t)tu_corpus_int(s, "facts.json", "allocated");
	assert_true(o->present && o->requested > o->usable_free);
	assert_true(held >= o->requested - o->usable_free);
	assert_true(held <= at_oom - after_step);
	assert_non_null(find(&run, "graph_held_in_eval"));
	assert_non_null(find(&run, "eval_pass_oom"));
	assert_int_equal(rank_of(&run, "release_references"), 1);
	rp_free(&run);
}

/* A message alone that says fragmentation: where packing would leave under a quarter of the
 * limit, the verdict says the message cannot tell whether the run would go on, and recording a
 * snapshot (which would tell) comes right after expandable segments. The corpus's
 * truth: global_feature_leak_oom is a leak (packed, 22% would be left), oom_fragmentation's twin
 * ran with expandable segments (38%). */
static void test_message_fragmentation_hedged(void **state)
{
	(void)state;
	rp_report run;
	assert_int_equal(load_sample("global_feature_leak_oom", "oom_message.txt", &run), 0);
	assert_int_equal(run.advice.oom.cause, AD_CAUSE_FRAGMENTATION);
	assert_non_null(strstr(run.advice.verdict, "is not in the message"));
	assert_non_null(strstr(find(&run, "oom_fragmentation")->message, "a snapshot would"));
	/* the try first, then what would tell a leak from fragmentation */
	assert_int_equal(rank_of(&run, "expandable_segments"), 1);
	assert_int_equal(rank_of(&run, "record_history"), 2);
	rp_free(&run);
	assert_int_equal(load_sample("oom_fragmentation", "oom_message.txt", &run), 0);
	assert_int_equal(run.advice.oom.cause, AD_CAUSE_FRAGMENTATION);
	assert_null(strstr(run.advice.verdict, "is not in the message"));
	assert_int_equal(rank_of(&run, "expandable_segments"), 1);
	assert_int_equal(rank_of(&run, "max_split_size_mb"), 2);
	rp_free(&run);
}

/* Lightning's BatchSizeFinder (held-out set 27): its trial at 16 ran out of memory and was
 * caught (facts.json: one OOM, PyTorch's num_ooms); the finding names the finder from its
 * tuner's frames. */
static void test_batch_size_finder_named(void **state)
{
	(void)state;
	const char *s = "lightning_batch_size_finder_healthy";
	rp_report run;
	assert_int_equal(load_sample(s, NULL, &run), 0);
	const ad_finding *f = find(&run, "oom_survived");
	assert_non_null(f);
	assert_non_null(
	    strstr(f->message, "Lightning's BatchSizeFinder or Tuner.scale_batch_size"));
	assert_int_equal(run.an.devices[0].oom_events,
	                 tu_corpus_int(s, "memory_stats.json", "num_ooms"));
	rp_free(&run);
}

/* PyTorch's own process in the message's list of processes, as NVML names it inside a
 * container (no "this process has" sentence): the listed process and what PyTorch held add up
 * to more than the device had in use, so that process is this one. Not memory of other
 * processes, then: capacity, with this process's memory outside PyTorch the difference. */
static void test_container_self_listed(void **state)
{
	(void)state;
	rp_report run;
	assert_int_equal(load2(TEXT_FIX "oom_container_self_listed.txt", NULL, &run), 0);
	const ad_oom *o = &run.advice.oom;
	const ev_oom *m = &run.ev.text.ooms[0];
	assert_int_equal(o->cause, AD_CAUSE_CAPACITY);
	assert_true(o->has_self_listed);
	assert_int_equal(o->self_listed.pid, 2286224);
	assert_int_equal(o->process_count, 0);
	assert_true(o->has_others);
	assert_int_equal(o->others, 0);
	assert_true(o->has_non_pytorch);
	assert_int_equal(o->non_pytorch, m->other_processes[0].bytes - m->allocated_by_pytorch -
	                                     m->reserved_unallocated);
	assert_non_null(find(&run, "oom_message_self_listed"));
	assert_null(find(&run, "oom_other_processes"));
	assert_null(find(&run, "shared_device"));
	assert_int_equal(rank_of(&run, "reduce_microbatch"), 1);
	assert_int_equal(rank_of(&run, "free_device_memory"), 0);
	rp_free(&run);

	/* beside another process of 30 GiB: this one is the smaller of those that hold PyTorch's
	 * 45.40 GiB; the other's share is a warning and advice ranked after the capacity fix */
	assert_int_equal(load2(TEXT_FIX "oom_container_shared.txt", NULL, &run), 0);
	o = &run.advice.oom;
	assert_int_equal(o->cause, AD_CAUSE_CAPACITY);
	assert_int_equal(o->self_listed.pid, 918301);
	assert_int_equal(o->process_count, 1);
	assert_int_equal(o->processes[0].pid, 918273);
	assert_int_equal(o->others, 32212254720ull);
	assert_int_equal(find(&run, "shared_device")->severity, AD_WARNING);
	assert_int_equal(rank_of(&run, "reduce_microbatch"), 1);
	assert_true(rank_of(&run, "free_device_memory") > 1);
	rp_free(&run);

	/* with its "this process has" sentence, every listed process is another one */
	assert_int_equal(load2(TEXT_FIX "oom_v21_processes.txt", NULL, &run), 0);
	assert_false(run.advice.oom.has_self_listed);
	assert_int_equal(run.advice.oom.cause, AD_CAUSE_OTHER_PROCESSES);
	assert_int_equal(run.advice.oom.process_count, 2);
	rp_free(&run);
}

static void test_fragmentation_without_oom(void **state)
{
	(void)state;
	rp_report run;
	assert_int_equal(load_sample("gpt_varlen", NULL, &run), 0);
	assert_false(run.advice.oom.present);
	/* 4 GiB held no tensor at the peak, but no retry nor OOM shows it cost anything: room to
	 * gain, an info remark, and expandable segments still the first advice */
	assert_non_null(find(&run, "high_fragmentation"));
	assert_int_equal(find(&run, "high_fragmentation")->severity, AD_INFO);
	assert_int_equal(rank_of(&run, "expandable_segments"), 1);
	/* The advice quotes its replay, and the replay predicts the real twin run. */
	const ad_advice *a = &run.advice;
	assert_true(a->replay_count >= 2);
	assert_true(a->replays[0].matches);
	assert_int_equal(
	    a->replays[0].peak_reserved,
	    tu_corpus_int("gpt_varlen", "memory_stats.json", "reserved_bytes.all.peak"));
	assert_string_equal(a->replays[1].conf, "expandable_segments:True");
	double twin = (double)tu_corpus_int("gpt_varlen_expandable", "memory_stats.json",
	                                    "reserved_bytes.all.peak");
	assert_true((double)a->replays[1].peak_reserved > twin * 0.95);
	assert_true((double)a->replays[1].peak_reserved < twin * 1.05);
	assert_non_null(
	    strstr(a->recs[0].reason, "Replayed with expandable_segments:True: no OOM"));
	rp_free(&run);
}

/* Expandable segments already on: neither they nor max_split_size_mb are advised again. */
static void check_expandable_not_advised(const char *sample)
{
	rp_report run;
	assert_int_equal(load_sample(sample, NULL, &run), 0);
	assert_true(run.ev.snap.settings.expandable_segments);
	assert_int_equal(rank_of(&run, "expandable_segments"), 0);
	assert_int_equal(rank_of(&run, "max_split_size_mb"), 0);
	rp_free(&run);
}

static void test_expandable_never_recommended(void **state)
{
	(void)state;
	check_expandable_not_advised("oom_fragmentation_expandable");
}

static void test_expandable_never_recommended_shared(void **state)
{
	(void)state;
	check_expandable_not_advised("gpt_varlen_expandable");
}

static void test_growth(void **state)
{
	(void)state;
	rp_report run;
	char path[1024];
	size_t len;
	char *json =
	    (char *)tu_read(tu_sample("leak_val_graph", "facts.json", path, sizeof path), &len);
	assert_non_null(json);
	/* PyTorch's allocated bytes after each validation step: the growth per step */
	const char *p = strstr(json, "\"allocated_per_step\"");
	assert_non_null(p);
	long long first = 0, last = 0, n = 0;
	p = strchr(p, '[');
	while (p && *p != ']') {
		char *end;
		long long v = strtoll(p + 1, &end, 10);
		if (end == p + 1)
			break;
		if (n++ == 0)
			first = v;
		last = v;
		p = end;
		while (*p == ' ' || *p == '\n')
			p++;
		if (*p != ',')
			break;
	}
	free(json);
	assert_true(n > 5);
	double per_step = (double)(last - first) / (double)(n - 1);
	assert_int_equal(load_sample("leak_val_graph", NULL, &run), 0);
	const ad_finding *f = find(&run, "memory_growth");
	assert_non_null(f);
	double got = (double)run.an.devices[0].run.growth_per_iteration;
	if (got < per_step * 0.95 || got > per_step * 1.05) {
		print_error("growth %.0f per iteration, PyTorch %.0f\n", got, per_step);
		fail();
	}
	assert_int_equal(rank_of(&run, "no_grad_eval"), 1);
	assert_true(rank_of(&run, "release_references") > 0);
	/* its settings advice is replayed first under the recorded settings: PyTorch's own peak */
	assert_true(run.advice.replay_count >= 1);
	assert_true(run.advice.replays[0].matches);
	assert_int_equal(
	    run.advice.replays[0].peak_reserved,
	    tu_corpus_int("leak_val_graph", "memory_stats.json", "reserved_bytes.all.peak"));
	rp_free(&run);
}

/* Runs that do not grow: no growth finding, nothing critical. */
static void check_flat(const char *const *samples, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		rp_report run;
		assert_int_equal(load_sample(samples[i], NULL, &run), 0);
		if (find(&run, "memory_growth") || has_critical(&run))
			fail_msg("%s: unexpected growth or critical finding", samples[i]);
		rp_free(&run);
	}
}

static void test_no_growth(void **state)
{
	(void)state;
	/* the twin of leak_val_graph, and training runs whose memory is flat after step 1 (the
	 * corpus READMEs; lbfgs_closure's optimizer state is bounded by its history_size) */
	const char *flat[] = {"leak_val_fixed", "mlp_healthy",  "lightning_healthy",
	                      "lbfgs_closure",  "ddp_one_rank", "llama_s1024_16g_b2"};
	check_flat(flat, sizeof flat / sizeof *flat);
}

static void test_no_growth_shared(void **state)
{
	(void)state;
	const char *flat[] = {"resnet_amp", "hf_gpt2_b4"};
	check_flat(flat, sizeof flat / sizeof *flat);
}

static void test_evidence_findings(void **state)
{
	(void)state;
	const struct {
		const char *sample, *finding;
	} cases[] = {
	    {"multi_stream", "pending_free_blocks"},
	    {"cuda_graph", "private_pools"},
	    {"no_history", "no_history"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		rp_report run;
		assert_int_equal(load_sample(cases[i].sample, NULL, &run), 0);
		if (!find(&run, cases[i].finding)) {
			print_error("%s: no %s finding\n", cases[i].sample, cases[i].finding);
			fail();
		}
		rp_free(&run);
	}
	rp_report run;
	assert_int_equal(load_sample("no_history", NULL, &run), 0);
	assert_true(rank_of(&run, "record_history") > 0);
	rp_free(&run);
}

/* Retries the allocator survived, counted by PyTorch's own statistics (memory_stats.json:
 * num_alloc_retries less num_ooms): how much they freed is said only where a trace shows the
 * flushes. */
static void test_retries_evidence(void **state)
{
	(void)state;
	rp_report run;
	char want[64];
	long long retries =
	    tu_corpus_int("adam_state_oom", "memory_stats.json", "num_alloc_retries") -
	    tu_corpus_int("adam_state_oom", "memory_stats.json", "num_ooms");
	assert_true(retries > 0);
	snprintf(want, sizeof want, "failed %lld time", retries);
	assert_int_equal(load_sample("adam_state_oom", "memory_stats.json", &run), 0);
	const ad_finding *f = find(&run, "allocator_retries");
	assert_non_null(f);
	assert_non_null(strstr(f->message, want));
	assert_null(strstr(f->message, "seen in the trace"));
	assert_non_null(strstr(f->message, "how much is not known"));
	rp_free(&run);
	assert_int_equal(load_sample("retries_survived", NULL, &run), 0);
	f = find(&run, "allocator_retries");
	assert_non_null(f);
	assert_non_null(strstr(f->message, "seen in the trace"));
	rp_free(&run);
}

/* Segment releases that are no cudaMalloc retry: deeplab_cudnn_benchmark_healthy ran with
 * cudnn.benchmark, whose algorithm search empties the cache from inside the convolution, and
 * PyTorch counted no retry (memory_stats.json); the trace still holds 172 segment frees.
 * Capped runs that did retry keep the finding, with no more retries than PyTorch counted
 * (num_alloc_retries less num_ooms). */
static void test_flushes_that_are_no_retries(void **state)
{
	(void)state;
	rp_report run;
	assert_int_equal(tu_corpus_int("deeplab_cudnn_benchmark_healthy", "memory_stats.json",
	                               "num_alloc_retries"),
	                 0);
	assert_true(tu_corpus_int("deeplab_cudnn_benchmark_healthy", "memory_stats.json",
	                          "num_device_free") > 100);
	assert_int_equal(load_sample("deeplab_cudnn_benchmark_healthy", NULL, &run), 0);
	assert_int_equal(run.an.devices[0].run.retry_releases, 0);
	assert_null(find(&run, "allocator_retries"));
	assert_null(find(&run, "empty_cache_churn"));
	assert_int_equal(run.advice.rec_count, 0);
	rp_free(&run);
	/* runs that did retry, under a cap: a small-pool segment after a large one's release too
	 * (gen_small_oom_b96) */
	static const char *const retrying[] = {"hf_generate_kv_oom", "gen_small_oom_b96",
	                                       "retries_survived"};
	for (size_t i = 0; i < sizeof retrying / sizeof *retrying; i++) {
		long long retried =
		    tu_corpus_int(retrying[i], "memory_stats.json", "num_alloc_retries") -
		    tu_corpus_int(retrying[i], "memory_stats.json", "num_ooms");
		assert_int_equal(load_sample(retrying[i], NULL, &run), 0);
		size_t seen = run.an.devices[0].run.retry_releases;
		assert_true(seen >= 1 && (long long)seen <= retried);
		assert_non_null(find(&run, "allocator_retries"));
		rp_free(&run);
	}
}

/* A capacity bound drawn while a leak fills memory says the leak is counted in it: each step of
 * grad_hook_leak_oom kept another set of gradients (kept_bytes_per_step) until the cap its log
 * shows (cap_bytes) ran out. A capacity OOM without growth (oom_capacity) says nothing of it. */
static void test_capacity_line_leak(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "grad_hook_leak_oom";
	assert_int_equal(load_with(s, "train.log", &run), 0);
	const ad_advice *a = &run.advice;
	assert_true(a->oom.by_growth);
	assert_int_equal(a->capacity.budget, (uint64_t)tu_corpus_int(s, "facts.json", "cap_bytes"));
	assert_int_equal(a->capacity.method, AD_PLAN_UPPER_BOUND);
	assert_non_null(find(&run, "memory_growth"));
	/* the growth it blames is the gradients kept each step, within 10% */
	double kept = (double)tu_corpus_int(s, "facts.json", "kept_bytes_per_step");
	double grew = (double)run.an.devices[0].run.growth_per_iteration;
	assert_true(grew > kept * 0.9 && grew < kept * 1.1);
	assert_non_null(strstr(a->capacity_line, "Memory grew every iteration until the OOM"));
	rp_free(&run);
	assert_int_equal(load_with("oom_capacity", "train.log", &run), 0);
	assert_false(run.advice.oom.by_growth);
	assert_null(strstr(run.advice.capacity_line, "grew every iteration"));
	rp_free(&run);
	/* forwards that kept graphs with no backward (an evaluation without no_grad): no
	 * "microbatch", a training word, in the bound */
	s = "eval_no_grad_missing_oom";
	assert_int_equal(load_with(s, "train.log", &run), 0);
	assert_int_equal(run.an.devices[0].run.kind, AN_RUN_EVALUATION);
	assert_non_null(strstr(run.advice.capacity_line, "this batch or more"));
	assert_null(strstr(run.advice.capacity_line, "microbatch"));
	rp_free(&run);
}

/* A request with no Python frame right after autograd's engine thread ran Python is the
 * backward's: ckpt_nonreentrant_recompute_oom died in loss.backward() (its log's traceback) just
 * after a checkpointed block was recomputed, and its OOM event has no frame at all. oom_capacity
 * died in the forward. */
static void test_died_in_engine_thread(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "ckpt_nonreentrant_recompute_oom";
	assert_int_equal(load_with(s, "train.log", &run), 0);
	assert_non_null(strstr(run.ev.text.ooms[0].raised.function, "run_backward"));
	assert_string_equal(run.advice.capacity.died_in, "the backward");
	assert_non_null(strstr(run.advice.capacity_line, "died in the backward"));
	rp_free(&run);
	assert_int_equal(load_with("oom_capacity", "train.log", &run), 0);
	assert_string_equal(run.advice.capacity.died_in, "the forward");
	rp_free(&run);
}

/* Expandable segments at a capacity OOM, from the snapshot alone: where the free pieces of the
 * cache, packed, would hold less than half the request (vae_decode_highres_oom asked 8 GiB with
 * 73.75 MiB cached free) the setting is not listed; where they come near it
 * (lightning_predict_oom: 1.5 GiB free for 2 GiB) it is, judged as not the fix. */
static void test_expandable_beside_capacity(void **state)
{
	(void)state;
	rp_report run;
	const char *none = "vae_decode_highres_oom", *some = "lightning_predict_oom";
	/* PyTorch's figures at the OOM (the observer's request and memory_stats()): reserved but
	 * unallocated against the request, on either side of half of it */
	long long req = tu_corpus_int(none, "facts.json", "alloc");
	long long unalloc = tu_corpus_int(none, "facts.json", "reserved_bytes.all.current") -
	                    tu_corpus_int(none, "facts.json", "allocated_bytes.all.current");
	assert_true(unalloc * 2 < req);
	assert_int_equal(load_sample(none, NULL, &run), 0);
	const ad_oom *o = &run.advice.oom;
	assert_int_equal(o->cause, AD_CAUSE_CAPACITY);
	assert_int_equal((long long)o->requested, req);
	assert_int_equal((long long)(o->reserved - o->allocated), unalloc);
	assert_true(o->free_cached * 2 < o->requested);
	assert_null(rec_of(&run, "expandable_segments"));
	rp_free(&run);
	req = tu_corpus_int(some, "facts.json", "alloc");
	unalloc = tu_corpus_int(some, "facts.json", "reserved_bytes.all.current") -
	          tu_corpus_int(some, "facts.json", "allocated_bytes.all.current");
	assert_true(unalloc * 2 >= req);
	assert_int_equal(load_sample(some, NULL, &run), 0);
	o = &run.advice.oom;
	assert_int_equal(o->cause, AD_CAUSE_CAPACITY);
	assert_int_equal((long long)o->requested, req);
	assert_int_equal((long long)(o->reserved - o->allocated), unalloc);
	assert_true(o->free_cached * 2 >= o->requested);
	const ad_recommendation *r = rec_of(&run, "expandable_segments");
	assert_non_null(r);
	assert_non_null(strstr(r->title, "would not save"));
	rp_free(&run);
}

/* FSDP computing in a lower param_dtype is mixed precision: fsdp2_fully_shard_bf16_oom
 * (MixedPrecisionPolicy(param_dtype=bf16), its all-gather inputs cast by _to_dtype_if_needed)
 * and lightning_fsdp_one_gpu_oom (FSDP1 under precision="bf16-mixed": _use_low_precision_shard)
 * are not told to run in bf16. fsdp_oom shards without a param_dtype (autocast instead). */
static void test_fsdp_param_dtype(void **state)
{
	(void)state;
	rp_report run;
	const char *on[] = {"fsdp2_fully_shard_bf16_oom", "lightning_fsdp_one_gpu_oom"};
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(load_sample(on[i], NULL, &run), 0);
		uint32_t t = run.an.devices[0].run.techniques;
		assert_true(t & AN_TECH_FSDP);
		assert_true(t & AN_TECH_FSDP_MIXED);
		assert_null(rec_of(&run, "mixed_precision"));
		assert_non_null(strstr(run.advice.what_ran, "param_dtype"));
		rp_free(&run);
	}
	assert_int_equal(load_sample("fsdp_oom", NULL, &run), 0);
	assert_true(run.an.devices[0].run.techniques & AN_TECH_FSDP);
	assert_false(run.an.devices[0].run.techniques & AN_TECH_FSDP_MIXED);
	rp_free(&run);
}

/* An inference loop that keeps a tensor per iteration (diffusion_keep_intermediates_oom: a
 * sampling loop under no_grad appending each step's latent, kept_bytes_per_step) is told to keep
 * them on the CPU, not to keep numbers from a loss it has not; its UNet's F.silu outputs, two
 * module calls deep, are no logits (no chunked_loss). */
static void test_inference_kept_outputs(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "diffusion_keep_intermediates_oom";
	assert_int_equal(load_sample(s, NULL, &run), 0);
	assert_int_equal(run.an.devices[0].run.kind, AN_RUN_INFERENCE);
	uint64_t per = (uint64_t)tu_corpus_int(s, "facts.json", "kept_bytes_per_step");
	uint64_t grew = run.an.devices[0].run.growth_per_iteration;
	assert_true(grew + per / 20 >= per && grew <= per + per / 20);
	const ad_recommendation *r = rec_of(&run, "release_references");
	assert_non_null(r);
	assert_int_equal(r->rank, 1);
	assert_non_null(strstr(r->title, "on the CPU"));
	assert_null(strstr(r->change, "loss.item()"));
	assert_null(rec_of(&run, "chunked_loss"));
	rp_free(&run);
	/* a training loop keeping every step's transitions on the GPU (replay_buffer_gpu_oom:
	 * growth_per_step_bytes a step, an iteration every train_every steps): its site is named;
	 * gradients a hook keeps, with no stack (grad_hook_leak_oom), are not */
	s = "replay_buffer_gpu_oom";
	assert_int_equal(load_sample(s, NULL, &run), 0);
	per = (uint64_t)tu_corpus_int(s, "facts.json", "growth_per_step_bytes") *
	      (uint64_t)tu_corpus_int(s, "facts.json", "train_every");
	grew = run.an.devices[0].run.growth_per_iteration;
	assert_true(grew + per / 20 >= per && grew <= per + per / 20);
	r = rec_of(&run, "release_references");
	assert_non_null(r);
	assert_int_equal(r->rank, 1);
	assert_non_null(strstr(r->reason, "per iteration in"));
	assert_non_null(strstr(r->reason, "is made at body"));
	rp_free(&run);
	assert_int_equal(load_sample("grad_hook_leak_oom", NULL, &run), 0);
	r = rec_of(&run, "release_references");
	assert_non_null(r);
	assert_null(strstr(r->reason, "is made at"));
	rp_free(&run);
}

/* generate(output_scores=True) keeps each decoding step's float32 scores (batch x vocabulary,
 * score_bytes_per_step), made in transformers/generation/utils.py, not by the model or its KV
 * cache: hf_generate_output_scores_oom's largest site is those, one block a step, and its first
 * advice is not to keep them. hf_generate_kv_oom's cache growth is not taken for them. */
static void test_generate_kept_scores(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "hf_generate_output_scores_oom";
	assert_int_equal(load_with(s, "train.log", &run), 0);
	const an_site *top = &run.an.devices[0].sites[0];
	uint64_t per = (uint64_t)tu_corpus_int(s, "facts.json", "score_bytes_per_step");
	uint64_t steps = (uint64_t)tu_corpus_int(s, "facts.json", "score_steps");
	assert_true(top->count + 1 >= steps && top->count <= steps);
	assert_int_equal(top->bytes, top->count * per);
	const ad_recommendation *r = rec_of(&run, "release_references");
	assert_non_null(r);
	assert_int_equal(r->rank, 1);
	assert_non_null(strstr(r->title, "scores in generate()"));
	assert_non_null(strstr(r->change, "output_scores=False"));
	rp_free(&run);
	assert_int_equal(load_sample("hf_generate_kv_oom", NULL, &run), 0);
	r = rec_of(&run, "release_references");
	assert_true(!r || !strstr(r->title, "scores in generate()"));
	rp_free(&run);
}

/* From the snapshot alone: the device had room for this run's peak (main_before_other's
 * step_peak_reserved, before another process took most of the card), and at the OOM what
 * PyTorch held plus what was free is far less: memory outside PyTorch grew, and freeing it
 * comes first. other_process holds its memory from the start: nothing grew, nothing said. */
static void test_outside_grew(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "other_process_grows_midrun_oom";
	assert_int_equal(load_sample(s, NULL, &run), 0);
	const an_device *dv = &run.an.devices[0];
	assert_int_equal((long long)dv->peak_reserved,
	                 tu_corpus_int(s, "facts.json", "step_peak_reserved"));
	assert_non_null(find(&run, "outside_grew"));
	/* PyTorch's own figures at the OOM: the observer's stats and cudaMemGetInfo's free bytes */
	long long grew = tu_corpus_int(s, "facts.json", "reserved_bytes.all.peak") -
	                 tu_corpus_int(s, "facts.json", "reserved_bytes.all.current") -
	                 tu_corpus_int(s, "facts.json", "device_free");
	assert_int_equal((long long)run.advice.oom.outside_grew, grew);
	assert_int_equal(rank_of(&run, "free_device_memory"), 1);
	rp_free(&run);
	assert_int_equal(load_sample("other_process", NULL, &run), 0);
	assert_null(find(&run, "outside_grew"));
	assert_int_equal(run.advice.oom.outside_grew, 0);
	rp_free(&run);
}

/* A Hugging Face text model's activations scale with its padded length: the microbatch advice
 * says to pad to each batch's longest (hf_bert_pad_max_length_oom pads 4.4-5.0% real tokens to
 * max_length 2048). A model of the project's own (oom_capacity) and a generation
 * (hf_generate_kv_oom) are not told. */
static void test_padding_tip(void **state)
{
	(void)state;
	rp_report run;
	assert_int_equal(load_sample("hf_bert_pad_max_length_oom", NULL, &run), 0);
	const ad_recommendation *r = rec_of(&run, "reduce_microbatch");
	assert_non_null(r);
	assert_int_equal(r->rank, 1);
	assert_non_null(strstr(r->reason, "padding=\"longest\""));
	rp_free(&run);
	/* one sequence of 16384 tokens (hf_llama_gradckpt_longseq_oom): its length is the lever */
	assert_int_equal(load_sample("hf_llama_gradckpt_longseq_oom", NULL, &run), 0);
	assert_int_equal(tu_corpus_int("hf_llama_gradckpt_longseq_oom", "facts.json", "microbatch"),
	                 1);
	r = rec_of(&run, "reduce_microbatch");
	assert_non_null(r);
	assert_non_null(strstr(r->reason, "a shorter sequence is the lever"));
	rp_free(&run);
	const char *none[] = {"oom_capacity", "hf_generate_kv_oom"};
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(load_sample(none[i], NULL, &run), 0);
		r = rec_of(&run, "reduce_microbatch");
		assert_true(!r || !strstr(r->reason, "padding="));
		rp_free(&run);
	}
}

/* The batch advice in the framework's words: the HF Trainer's evaluation at 8x its training
 * batch (eval_batch / microbatch) is told per_device_eval_batch_size // 8; Accelerate's run,
 * its Accelerator's accumulation; a generate() that died in its prefill (one iteration, no
 * token decoded), a shorter prompt, not fewer new tokens. */
static void test_framework_batch_words(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "hf_trainer_eval_bigger_batch_oom";
	assert_int_equal(load_with(s, "train.log", &run), 0);
	long long k = tu_corpus_int(s, "facts.json", "eval_batch") /
	              tu_corpus_int(s, "facts.json", "microbatch");
	char want[64];
	snprintf(want, sizeof want, "per_device_eval_batch_size=N // %lld", k);
	const ad_recommendation *r = rec_of(&run, "reduce_microbatch");
	assert_non_null(r);
	assert_int_equal(r->rank, 1);
	assert_non_null(strstr(r->change, want));
	assert_non_null(find(&run, "eval_pass_oom"));
	rp_free(&run);
	assert_int_equal(load_sample("accelerate_fp16_gradscaler_oom", NULL, &run), 0);
	assert_true(run.an.devices[0].run.frameworks & AN_FW_ACCELERATE);
	r = rec_of(&run, "reduce_microbatch");
	assert_non_null(r);
	assert_non_null(strstr(r->change, "Accelerator(gradient_accumulation_steps="));
	assert_null(rec_of(&run, "mixed_precision"));
	rp_free(&run);
	assert_int_equal(load_sample("hf_llama_long_prompt_prefill_oom", NULL, &run), 0);
	r = rec_of(&run, "reduce_microbatch");
	assert_non_null(r);
	assert_non_null(strstr(r->change, "prefill"));
	assert_null(strstr(r->change, "max_new_tokens"));
	rp_free(&run);
	assert_int_equal(load_sample("hf_generate_kv_oom", NULL, &run), 0);
	r = rec_of(&run, "reduce_microbatch");
	assert_true(!r || strstr(r->change, "max_new_tokens"));
	rp_free(&run);
}

/* The message a log holds and the oom_message.txt cut from it are one message, not two (the
 * figures PyTorch printed, compared whatever line they were on); repeats in one log are real. */
static void test_same_message_twice(void **state)
{
	(void)state;
	rp_report run;
	char log[1024], msg[1024];
	tu_sample("oom_capacity", "train.log", log, sizeof log);
	tu_sample("oom_capacity", "oom_message.txt", msg, sizeof msg);
	assert_int_equal(load2(log, msg, &run), 0);
	assert_int_equal(run.ev.text.oom_count, 1);
	assert_null(find(&run, "several_ooms"));
	/* the figures are train.log's message, as PyTorch wrote it */
	assert_int_equal(run.ev.text.ooms[0].requested_bytes,
	                 (uint64_t)tu_corpus_int("oom_capacity", "facts.json", "alloc"));
	rp_free(&run);
	assert_int_equal(load2(TEXT_FIX "oom_multi.log", NULL, &run), 0);
	size_t n = run.ev.text.oom_count;
	assert_true(n > 1);
	assert_non_null(find(&run, "several_ooms"));
	rp_free(&run);
	assert_int_equal(load2(TEXT_FIX "oom_multi.log", msg, &run), 0);
	assert_int_equal(run.ev.text.oom_count, n + 1); /* another run's message is another */
	rp_free(&run);
}

/* A request the optimizer makes for its state does not scale with the batch:
 * embedding_recsys_adam_oom died in Adam's first step asking for the item table's exp_avg
 * (12 M x 128 float32; facts.json's observer saw it rounded to 6144655360 bytes), with 33 MiB
 * of activations. The state's
 * levers come first, and a smaller batch is said not to help. */
static void test_state_request_is_state(void **state)
{
	(void)state;
	rp_report run;
	assert_int_equal(load_with("embedding_recsys_adam_oom", "train.log", &run), 0);
	const ad_advice *a = &run.advice;
	/* the observer's figure is the request rounded up to the 2 MiB the allocator asks for */
	long long asked = tu_corpus_int("embedding_recsys_adam_oom", "facts.json", "alloc");
	assert_int_equal(a->oom.requested, 12000000ull * 128 * 4);
	assert_true(asked >= (long long)a->oom.requested &&
	            asked - (long long)a->oom.requested < 2 << 20);
	assert_int_equal(run.an.devices[0].oom.category, AN_CAT_OPTIMIZER);
	assert_true(a->categories.bytes[AD_CAT_ACTIVATIONS] * 100 < (uint64_t)asked);
	assert_int_equal(a->oom.cause, AD_CAUSE_CAPACITY);
	const char *first = a->recs[0].id;
	assert_true(strcmp(first, "mixed_precision") == 0 || strcmp(first, "cpu_offload") == 0);
	assert_true(rank_of(&run, "reduce_microbatch") > rank_of(&run, "cpu_offload"));
	assert_null(rec_of(&run, "activation_checkpointing"));
	assert_null(rec_of(&run, "gradient_accumulation"));
	assert_non_null(strstr(a->verdict, "a smaller batch cannot help"));
	rp_free(&run);
}

/* Autocast is told from a whole first iteration by the share of weight bytes it copies: a model
 * cast to bf16 (bf16cast_gc_capped_healthy: facts.json model_param_dtype torch.bfloat16, amp
 * null) has activations of half a weight's size made as a cast is, but far fewer bytes of them,
 * so autocast is not claimed; lightning_healthy under bf16-mixed, the smallest share of the
 * corpus's autocast runs, still is. */
static void test_autocast_share_of_whole_iteration(void **state)
{
	(void)state;
	rp_report run;
	char path[1024];
	size_t len;
	char *facts = (char *)tu_read(
	    tu_sample("bf16cast_gc_capped_healthy", "facts.json", path, sizeof path), &len);
	assert_non_null(facts);
	assert_non_null(strstr(facts, "\"model_param_dtype\": \"torch.bfloat16\""));
	assert_non_null(strstr(facts, "\"amp\": null"));
	free(facts);
	assert_int_equal(load_sample("bf16cast_gc_capped_healthy", NULL, &run), 0);
	const an_structure *r = &run.an.devices[0].run;
	assert_true(r->start_count >= 2);
	assert_false(r->techniques & AN_TECH_AUTOCAST);
	assert_true(r->techniques & AN_TECH_CHECKPOINT);
	rp_free(&run);
	assert_int_equal(load_sample("lightning_healthy", NULL, &run), 0);
	assert_true(run.an.devices[0].run.start_count >= 2);
	assert_true(run.an.devices[0].run.techniques & AN_TECH_AUTOCAST);
	rp_free(&run);
}

/* A cap the snapshot does not record: accelerate_accum_oom ran under 6.27 GiB (facts.json
 * cap_bytes), and its replay with expandable segments reserves more than that, so the report
 * must not say the setting avoids the OOM: it fitted only under the higher cap the replays
 * assumed. */
static void test_replay_under_unknown_cap(void **state)
{
	(void)state;
	rp_report run;
	long long cap = tu_corpus_int("accelerate_accum_oom", "facts.json", "cap_bytes");
	assert_int_equal(load_sample("accelerate_accum_oom", NULL, &run), 0);
	const ad_replay *exp = NULL;
	for (size_t i = 1; i < run.advice.replay_count; i++)
		if (strcmp(run.advice.replays[i].conf, "expandable_segments:True") == 0)
			exp = &run.advice.replays[i];
	assert_non_null(exp);
	assert_true(run.advice.replays[0].matches);
	assert_true(run.advice.replays[0].peak_reserved <= (uint64_t)cap);
	assert_true(exp->peak_reserved > (uint64_t)cap); /* under the real cap it fails */
	const ad_recommendation *r = rec_of(&run, "expandable_segments");
	assert_non_null(r);
	assert_null(strstr(r->reason, "no OOM,"));
	assert_non_null(strstr(r->reason, "whether it fits is not known"));
	rp_free(&run);
}

/* A trace without one allocation (Yiyi-philosophy's 1.3b snapshot: one free_completed event,
 * 1.79 GiB inactive of 7.09 GiB reserved, per third_party/SOURCES.md) shows no peak: its
 * "overhead at the peak" would be the snapshot itself, so no fragmentation advice, no healthy
 * verdict, and the history is asked for. */
static void test_trace_without_allocations(void **state)
{
	(void)state;
	char path[2048];
	snprintf(path, sizeof path,
	         "%s/third_party/snapshots/Yiyi-philosophy__LLM-inference__1.3b_snapshot.pickle",
	         tu_shared());
	if (!tu_exists(path))
		tu_skip("%s is absent", path);
	rp_report run;
	assert_int_equal(load2(path, NULL, &run), 0);
	assert_int_equal(run.an.devices[0].trace_events, 1);
	assert_int_equal(run.an.devices[0].trace_allocs, 0);
	assert_null(find(&run, "high_fragmentation"));
	assert_null(find(&run, "trace_truncated"));
	assert_non_null(find(&run, "no_history"));
	assert_int_equal(rank_of(&run, "expandable_segments"), 0);
	assert_int_equal(rank_of(&run, "record_history"), 1);
	assert_null(strstr(run.advice.verdict, "Healthy"));
	rp_free(&run);
}

/* A capacity OOM that a leak filled says so wherever the cause is written in words (the JSON
 * keeps the contract's "capacity"); one without growth does not. */
static void test_cause_words(void **state)
{
	(void)state;
	rp_report run;
	assert_int_equal(load_sample("global_feature_leak_oom", NULL, &run), 0);
	assert_int_equal(run.advice.oom.cause, AD_CAUSE_CAPACITY);
	assert_true(run.advice.oom.by_growth);
	assert_non_null(strstr(run.advice.verdict, "from a leak"));
	assert_non_null(strstr(ad_oom_cause_words(&run.advice.oom), "grew every iteration"));
	rp_free(&run);
	assert_int_equal(load_sample("oom_capacity", NULL, &run), 0);
	assert_int_equal(run.advice.oom.cause, AD_CAUSE_CAPACITY);
	assert_false(run.advice.oom.by_growth);
	assert_string_equal(ad_oom_cause_words(&run.advice.oom), "capacity");
	rp_free(&run);
}

/* A setting its rule judged at the OOM ("would not save this run": the free cache could not
 * hold the request) whose replay from the start gets past the OOM: the replay ends there, so
 * the reason says so instead of a bare "no OOM" under a title that says the opposite. */
static void test_replay_past_the_oom(void **state)
{
	(void)state;
	rp_report run;
	assert_int_equal(load_sample("big_vocab_oom", NULL, &run), 0);
	const ad_recommendation *r = rec_of(&run, "expandable_segments");
	assert_non_null(r);
	assert_non_null(strstr(r->title, "would not save"));
	assert_true(run.advice.replays[0].matches && run.advice.replays[0].oom);
	assert_null(strstr(r->reason, "no OOM,"));
	assert_non_null(strstr(r->reason, "whether the rest of the run fits is not in the trace"));
	rp_free(&run);
}

/* A ring buffer that wrapped (tests/corpus README: gen_small_oom_b96 kept 3000 entries; the
 * shared gpt_large_trace 1 000 000): the report says the trace is truncated. */
static void check_truncated(const char *sample)
{
	rp_report run;
	assert_int_equal(load_sample(sample, NULL, &run), 0);
	assert_non_null(find(&run, "trace_truncated"));
	rp_free(&run);
}

static void test_trace_truncated(void **state)
{
	(void)state;
	check_truncated("gen_small_oom_b96");
}

static void test_trace_truncated_shared(void **state)
{
	(void)state;
	check_truncated("gpt_large_trace");
}

/* Issue 3: a log alone gives the request, the limit and a cause; with the snapshot, both. */
static void test_logs(void **state)
{
	(void)state;
	const char *samples[] = {"oom_fragmentation", "oom_capacity", "oom_capacity_params"};
	const ad_cause causes[] = {AD_CAUSE_FRAGMENTATION, AD_CAUSE_CAPACITY, AD_CAUSE_CAPACITY};
	for (size_t i = 0; i < 3; i++) {
		const char *files[] = {"train.log", "oom_message.txt"};
		for (size_t k = 0; k < 2; k++) {
			rp_report run;
			assert_int_equal(load_sample(samples[i], files[k], &run), 0);
			assert_int_equal(run.ev.inputs[0].kind, LD_OOM_MESSAGE);
			const ad_oom *o = &run.advice.oom;
			assert_true(o->present);
			/* "Tried to allocate 204.00 MiB": the rounded request the observer saw */
			assert_int_equal(o->requested,
			                 tu_corpus_int(samples[i], "facts.json", "alloc"));
			/* "N GiB allowed": the cap the observer reported */
			assert_int_equal(o->limit,
			                 tu_corpus_int(samples[i], "facts.json", "device_alloc"));
			assert_int_equal(o->cause, causes[i]);
			rp_free(&run);
		}
	}
	rp_report run;
	assert_int_equal(load_with("oom_fragmentation", "train.log", &run), 0);
	assert_int_equal(run.ev.input_count, 2);
	assert_int_equal(run.advice.oom.limit,
	                 tu_corpus_int("oom_fragmentation", "facts.json", "device_alloc"));
	assert_int_equal(run.advice.oom.largest_free,
	                 tu_corpus_int("oom_fragmentation", "facts.json", "largest_hole"));
	assert_int_equal(run.advice.oom.cause, AD_CAUSE_FRAGMENTATION);
	assert_null(find(&run, "evidence_disagrees"));
	rp_free(&run);
}

/* The diagnosis keeps quoted paths as recorded and marks them; only a renderer redacts. */
static void test_quoted_paths(void **state)
{
	(void)state;
	rp_report run;
	assert_int_equal(load_sample("leak_val_graph", NULL, &run), 0);
	const ad_finding *f = find(&run, "memory_growth");
	assert_non_null(f);
	assert_int_equal(f->paths.count, 1);
	const ad_span *sp = &f->paths.at[0];
	assert_true(sp->offset + sp->len <= strlen(f->message));
	char path[256];
	snprintf(path, sizeof path, "%.*s", (int)sp->len, f->message + sp->offset);
	assert_string_equal(path, "/workspace/train.py");
	assert_null(strstr(f->message, "<redacted>"));
	rd_options off = {.device = -1}, on = {.device = -1, .redact_paths = 1};
	mr_buf plain = {0}, redacted = {0};
	rd_prose(&plain, &off, f->message, &f->paths);
	rd_prose(&redacted, &on, f->message, &f->paths);
	assert_string_equal(plain.data, f->message);
	assert_non_null(strstr(redacted.data, "val_loop (<redacted>/train.py:273)"));
	assert_null(strstr(redacted.data, "/workspace"));
	mr_buf_free(&plain);
	mr_buf_free(&redacted);
	rp_free(&run);
}

/* The JSON of one input, for the keys a text may leave null. */
static char *json_of(const char *path, rp_report *run)
{
	assert_int_equal(load2(path, NULL, run), 0);
	rd_options opt = {.device = -1};
	mr_buf b = {0};
	mr_error err = {0};
	assert_int_equal(rd_render_json(run, &opt, &b, &err), MR_OK);
	return b.data;
}

/* Text evidence seen in the wild (issue 14): a finding never contradicts the message's own
 * figures, an OOM without sizes says so, and JSON writes null for what the text does not
 * give, with the backend it names. */
static void test_text_variants(void **state)
{
	(void)state;
	rp_report run;
	char *j = json_of(TEXT_FIX "oom_allowed_far_free.txt", &run);
	const ad_finding *f = find(&run, "oom_capacity");
	assert_non_null(f);
	/* the cap, with the message's own 36.00 GiB allowed and 41.20 GiB free */
	assert_non_null(strstr(f->message, "36.00 GiB a memory fraction allows this process"));
	assert_non_null(strstr(f->message, "CUDA still had 41.20 GiB free"));
	assert_int_equal(run.advice.oom.limit, 38654705664ull);
	assert_non_null(strstr(j, "\"oom\": {\"device\": 0, \"backend\": \"cuda\""));
	free(j);
	rp_free(&run);

	j = json_of(TEXT_FIX "oom_free_ge_request.txt", &run);
	f = find(&run, "oom_capacity");
	assert_non_null(f);
	assert_null(strstr(f->message, "only 143.36 MiB"));
	assert_non_null(strstr(f->message, "143.36 MiB reserved but unallocated is more than"));
	assert_non_null(
	    strstr(f->message, "CUDA reported 21.56 MiB free, no less than the 20.00 MiB"));
	assert_null(strstr(run.advice.verdict, "only"));
	free(j);
	rp_free(&run);

	j = json_of(TEXT_FIX "oom_cublas.txt", &run);
	f = find(&run, "library_oom");
	assert_non_null(f);
	assert_non_null(strstr(f->message, "CUBLAS_STATUS_ALLOC_FAILED"));
	assert_non_null(strstr(f->message, "gives no sizes"));
	assert_non_null(strstr(j, "\"requested_bytes\": null, \"cause\": \"unknown\", "
	                          "\"free_cached_bytes\": null"));
	assert_non_null(strstr(j, "\"reserved_bytes\": null, \"allocated_bytes\": null"));
	free(j);
	rp_free(&run);

	j = json_of(TEXT_FIX "oom_thcudacheck.log", &run);
	f = find(&run, "driver_oom");
	assert_non_null(f);
	assert_non_null(strstr(f->message, "cuda runtime error (2)"));
	assert_non_null(strstr(f->message, "gives no sizes"));
	assert_null(find(&run, "several_ooms"));
	free(j);
	rp_free(&run);

	/* MPS: its backend, its max allowed as the limit, no reserved figure */
	j = json_of(TEXT_FIX "oom_mps.txt", &run);
	assert_int_equal(run.advice.oom.cause, AD_CAUSE_CAPACITY);
	assert_int_equal(run.advice.oom.limit, 19466939269ull);
	assert_non_null(strstr(j, "\"backend\": \"mps\", \"requested_bytes\": 536870912"));
	assert_non_null(strstr(j, "\"free_cached_bytes\": null"));
	assert_non_null(strstr(j, "\"reserved_bytes\": null, \"allocated_bytes\": 18468359373"));
	assert_null(strstr(run.advice.verdict, "0 B"));
	assert_int_equal(rank_of(&run, "record_history"), 0); /* torch.cuda's, not MPS's */
	free(j);
	rp_free(&run);

	/* HIP and XPU keep their word */
	j = json_of(TEXT_FIX "rocm_hip.log", &run);
	assert_non_null(strstr(j, "{\"device\": 7, \"reserved_bytes\": 1696595968"));
	assert_non_null(strstr(j, "\"backend\": \"hip\", \"peak_allocated_bytes\""));
	assert_non_null(strstr(j, "\"oom\": {\"device\": 7, \"backend\": \"hip\""));
	free(j);
	rp_free(&run);
	j = json_of(TEXT_FIX "oom_xpu.txt", &run);
	assert_non_null(strstr(j, "\"oom\": {\"device\": 0, \"backend\": \"xpu\""));
	free(j);
	rp_free(&run);

	/* a table cut before its reserved rows: reserved, its peak and free cached are null */
	j = json_of(TEXT_FIX "summary_fragment_no_reserved.txt", &run);
	assert_non_null(strstr(j, "{\"device\": 0, \"reserved_bytes\": null, \"allocated_bytes\": "
	                          "1284505600"));
	assert_non_null(strstr(j, "\"free_cached_bytes\": null"));
	assert_non_null(strstr(j, "\"peak_allocated_bytes\": 2089811968, \"peak_reserved_bytes\": "
	                          "null"));
	free(j);
	rp_free(&run);
	/* a dropped Peak Usage column: no peaks, and Tot Alloc is not read as one */
	j = json_of(TEXT_FIX "summary_no_peak.txt", &run);
	assert_non_null(strstr(j, "\"peak_allocated_bytes\": null, \"peak_reserved_bytes\": null"));
	free(j);
	rp_free(&run);
}

/* within pct percent of want */
static void assert_near(const char *what, double got, double want, double pct)
{
	if (got < want * (1 - pct / 100) || got > want * (1 + pct / 100))
		fail_msg("%s: %.0f, PyTorch's figures say %.0f", what, got, want);
}

/* loss.backward(retain_graph=True) every step (retain_graph_step_oom): step 0's saved
 * activations are alive through step 1's forward, which dies. What is carried is what step 0
 * left allocated (facts.json) less the parameters and AdamW's two moments; it, not the
 * microbatch, is the thing to change: two thirds of live memory, so the batch's levers (which
 * would count it) are not offered. */
static void test_carried_activations(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "retain_graph_step_oom";
	assert_int_equal(load_sample(s, NULL, &run), 0);
	double params = (double)tu_corpus_int(s, "facts.json", "model_param_bytes");
	double after_step0 = (double)tu_corpus_int(s, "facts.json", "allocated");
	const an_structure *r = &run.an.devices[0].run;
	assert_int_equal(r->kind, AN_RUN_TRAINING);
	assert_false(r->growth_found);
	assert_near("carried activations", (double)r->carried_activations, after_step0 - 3 * params,
	            3);
	assert_non_null(find(&run, "activations_carried"));
	assert_int_equal(rank_of(&run, "release_references"), 1);
	assert_int_equal(rank_of(&run, "reduce_microbatch"), 0);
	assert_int_equal(rank_of(&run, "activation_checkpointing"), 0);
	assert_non_null(strstr(rec_of(&run, "release_references")->change, "retain_graph"));
	assert_int_equal(run.advice.oom.requested,
	                 tu_corpus_int(s, "facts.json", "alloc")); /* the observer's request */
	rp_free(&run);
	/* a first-step OOM carries nothing from an earlier step */
	assert_int_equal(load_sample("oom_capacity", NULL, &run), 0);
	assert_null(find(&run, "activations_carried"));
	rp_free(&run);
}

/* A new output head every task, registered with add_param_group (head_per_task_oom): the growth
 * per iteration is the head and its two AdamW moments (3 x head_bytes, facts.json), all of it
 * parameters and optimizer state; the advice is about the parameters made in the loop. */
static void test_state_growth(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "head_per_task_oom";
	assert_int_equal(load_sample(s, NULL, &run), 0);
	const an_structure *r = &run.an.devices[0].run;
	assert_true(r->growth_found);
	assert_near("growth per iteration", (double)r->growth_per_iteration,
	            3.0 * (double)tu_corpus_int(s, "facts.json", "head_bytes"), 2);
	assert_int_equal(rank_of(&run, "release_references"), 1);
	assert_non_null(strstr(rec_of(&run, "release_references")->change, "reset_parameters"));
	assert_true(rank_of(&run, "reduce_microbatch") > 1);
	rp_free(&run);
	/* a leak of kept tensors (train_leak keeps logits) keeps the tensor advice */
	assert_int_equal(load_sample("train_leak", NULL, &run), 0);
	const ad_recommendation *rr = rec_of(&run, "release_references");
	assert_non_null(rr);
	assert_null(strstr(rr->change, "reset_parameters"));
	rp_free(&run);
}

/* A run called training for its technique names the technique as the reason, once: fsdp_oom
 * died in its first forward (no backward yet) under FSDP and autocast. */
static void test_what_ran_names_the_technique(void **state)
{
	(void)state;
	rp_report run;
	assert_int_equal(load_sample("fsdp_oom", NULL, &run), 0);
	const an_structure *r = &run.an.devices[0].run;
	assert_int_equal(r->kind, AN_RUN_TRAINING);
	assert_int_equal(r->evidence, AN_KIND_TECHNIQUE);
	assert_string_equal(run.advice.what_ran,
	                    "Training (FSDP is on, a technique for training), one "
	                    "iteration; autocast (mixed precision).");
	rp_free(&run);
}

/* Growth that is all one kind of model state gets that kind's fix. A new AdamW every 4
 * iterations kept by its scheduler (optimizer_recreated_leak_oom): keep one optimizer. A
 * deepcopy of the model kept at each evaluation (ema_deepcopy_each_eval_leak_oom), its trace
 * wrapped so that only the last copies are in it: keep one copy, and the leak is measured by
 * what the copying sites hold at the snapshot (the copies the run kept, as it counted them),
 * so it fills the memory and no batch or precision lever is offered. A new head and its
 * AdamW state per task (head_per_task_oom) keeps the mixed wording. */
static void test_state_growth_by_kind(void **state)
{
	(void)state;
	rp_report run;
	assert_int_equal(load_sample("optimizer_recreated_leak_oom", NULL, &run), 0);
	const ad_recommendation *r = rec_of(&run, "release_references");
	assert_non_null(r);
	assert_int_equal(r->rank, 1);
	assert_string_equal(r->title, "Keep one optimizer");
	assert_non_null(strstr(r->change, "opt.state.clear()"));
	rp_free(&run);

	const char *s = "ema_deepcopy_each_eval_leak_oom";
	assert_int_equal(load_sample(s, NULL, &run), 0);
	r = rec_of(&run, "release_references");
	assert_non_null(r);
	assert_int_equal(r->rank, 1);
	assert_string_equal(r->title, "Keep one copy of the model");
	uint64_t kept = (uint64_t)tu_corpus_int(s, "facts.json", "copies_kept") *
	                (uint64_t)tu_corpus_int(s, "facts.json", "copy_bytes_each");
	assert_true(run.an.devices[0].truncated);
	assert_true(run.advice.growth_alive >= kept);
	assert_true(run.advice.growth_alive - kept < kept / 10);
	assert_true(run.advice.oom.by_growth);
	assert_null(rec_of(&run, "mixed_precision"));
	assert_null(rec_of(&run, "reduce_microbatch"));
	rp_free(&run);

	/* copy.deepcopy(model.state_dict()) each epoch: tensors, not parameters, but a copy of
	 * the weights each time (copy_bytes_each, the parameters' bytes) */
	s = "keep_all_checkpoints_leak_oom";
	assert_int_equal(load_sample(s, NULL, &run), 0);
	r = rec_of(&run, "release_references");
	assert_non_null(r);
	assert_int_equal(r->rank, 1);
	assert_string_equal(r->title, "Keep one copy of the model");
	uint64_t each = (uint64_t)tu_corpus_int(s, "facts.json", "copy_bytes_each");
	uint64_t grew = run.an.devices[0].run.growth_per_iteration;
	assert_true(grew + each / 100 >= each && grew <= each + each / 100);
	rp_free(&run);

	assert_int_equal(load_sample("head_per_task_oom", NULL, &run), 0);
	r = rec_of(&run, "release_references");
	assert_non_null(r);
	assert_string_equal(r->title, "Stop creating parameters every iteration");
	rp_free(&run);
}

/* A T x T tensor made by a scaled_dot_product_attention call given no mask: its math kernel
 * ran (sdpa_math_fallback_oom, the loop under sdpa_kernel([SDPBackend.MATH]): two 3 GiB fp32
 * score tensors at T=4096, 4x those at 2048, then the 768 MiB request failed). With the log
 * the call is named (its traceback, in train.log) and the fused kernels are the lever;
 * without it, the generic T x T wording. A call given an expanded float mask
 * (sdpa_float_mask_math_oom) keeps the generic wording: the mask is what is materialised. */
static void test_sdpa_math_kernel(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "sdpa_math_fallback_oom";
	assert_int_equal(load_with(s, "train.log", &run), 0);
	const an_structure *r = &run.an.devices[0].run;
	/* the score tensor's growth from T=2048 to 4096, as the recording computed its bytes */
	assert_near("T x T growth", r->oom_request_ratio,
	            (double)tu_corpus_int(s, "facts.json", "4096") /
	                (double)tu_corpus_int(s, "facts.json", "2048"),
	            2);
	const ad_recommendation *f = rec_of(&run, "fused_attention");
	assert_non_null(f);
	assert_int_equal(f->rank, 1);
	assert_string_equal(f->title, "Let scaled_dot_product_attention use a fused kernel");
	assert_non_null(strstr(f->change, "FLASH_ATTENTION"));
	rp_free(&run);

	assert_int_equal(load_sample(s, NULL, &run), 0);
	f = rec_of(&run, "fused_attention");
	assert_non_null(f);
	assert_null(strstr(f->title, "scaled_dot_product_attention"));
	rp_free(&run);

	s = "sdpa_float_mask_math_oom";
	assert_int_equal(load_with(s, "train.log", &run), 0);
	f = rec_of(&run, "fused_attention");
	assert_non_null(f);
	assert_null(strstr(f->title, "scaled_dot_product_attention"));
	rp_free(&run);
}

/* A WGAN-GP critic step (wgan_gp_double_backward_oom): the real pass and the fake pass each
 * backwarded, then the gradient penalty's autograd.grad(create_graph=True) died. Two backward
 * passes with no step between, but after forwards from different lines: the losses of one
 * step, not microbatches. The fragmentation replay ends at the OOM, and says so. A real
 * accumulation (accelerate_accum_oom, 4 microbatches of one loop line) stays one. */
static void test_losses_are_not_microbatches(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "wgan_gp_double_backward_oom";
	assert_int_equal(load_sample(s, NULL, &run), 0);
	const an_structure *r = &run.an.devices[0].run;
	assert_int_equal(r->kind, AN_RUN_TRAINING);
	assert_int_equal(r->backward_phases, 2); /* real, fake: no critic step finished */
	assert_false(r->accumulating);
	assert_null(strstr(run.advice.what_ran, "accumulated"));
	/* the observer's alloc is the request's cudaMalloc, rounded up to 2 MiB */
	uint64_t alloc = (uint64_t)tu_corpus_int(s, "facts.json", "alloc");
	assert_true(run.advice.oom.requested <= alloc);
	assert_true(alloc - run.advice.oom.requested < 2u << 20);
	const ad_recommendation *e = rec_of(&run, "expandable_segments");
	assert_non_null(e);
	assert_non_null(strstr(e->reason, "no OOM up to where the trace ends"));
	assert_non_null(strstr(e->reason, "not in the trace"));
	const ad_recommendation *m = rec_of(&run, "reduce_microbatch");
	assert_true(m == NULL || strstr(m->title, "accumulation steps") == NULL);
	rp_free(&run);
	assert_int_equal(load_sample("accelerate_accum_oom", NULL, &run), 0);
	assert_true(run.an.devices[0].run.accumulating);
	rp_free(&run);
}

/* DP-SGD with per-sample gradients by torch.func.vmap(grad) (dpsgd_vmap_pergrad_oom): at the OOM
 * of step 1 (batch 98, facts.json) the backward's gradients are fc2's and fc3's for every
 * sample, 98 x their parameters, dozens of times the model (model_param_bytes). They scale with
 * the batch, not with the model: the microbatch is the lever, and neither checkpointing nor
 * sharding or offloading the model state is advice. */
static void test_per_sample_gradients(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "dpsgd_vmap_pergrad_oom";
	assert_int_equal(load_sample(s, NULL, &run), 0);
	uint64_t params = (uint64_t)tu_corpus_int(s, "facts.json", "model_param_bytes");
	uint64_t fc1 = (3072u * 2048u + 2048u) * 4u; /* the layer whose gradient failed */
	uint64_t grads = run.an.devices[0].categories[AN_CAT_GRADIENTS];
	assert_true(grads >= 98 * (params - fc1));
	assert_true(grads < 98 * params);
	assert_int_equal(run.advice.oom.requested, tu_corpus_int(s, "facts.json", "alloc"));
	assert_int_equal(run.advice.oom.cause, AD_CAUSE_CAPACITY);
	assert_int_equal(rank_of(&run, "reduce_microbatch"), 1);
	assert_non_null(strstr(rec_of(&run, "reduce_microbatch")->reason, "per-sample"));
	assert_int_equal(rank_of(&run, "activation_checkpointing"), 0);
	assert_int_equal(rank_of(&run, "cpu_offload"), 0);
	assert_int_equal(rank_of(&run, "fsdp"), 0);
	rp_free(&run);
	/* gradients kept by a hook over steps (grad_hook_leak_oom) are a leak, not the batch's */
	assert_int_equal(load_sample("grad_hook_leak_oom", NULL, &run), 0);
	const ad_recommendation *m = rec_of(&run, "reduce_microbatch");
	assert_true(m == NULL || strstr(m->reason, "per-sample") == NULL);
	rp_free(&run);
}

/* A 3D conv net whose BatchNorm and MaxPool layers allocate through torch.nn.functional (and
 * torch/_jit_internal.py): their outputs are layers' activations, not logits
 * (conv3d_video_oom); the failing request is the conv3d's output (facts.json's observer). */
static void test_layers_through_functional(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "conv3d_video_oom";
	assert_int_equal(load_sample(s, NULL, &run), 0);
	assert_int_equal(run.advice.oom.requested, tu_corpus_int(s, "facts.json", "alloc"));
	assert_int_equal(run.advice.oom.cause, AD_CAUSE_CAPACITY);
	assert_int_equal(rank_of(&run, "chunked_loss"), 0);
	assert_int_equal(rank_of(&run, "reduce_microbatch"), 1);
	assert_null(strstr(run.advice.verdict, "logits"));
	rp_free(&run);
}

/* Inference that keeps every batch's scores with torch.cat (infer_cat_preds_oom): it grows by
 * one batch's float32 scores (facts.json) and dies in the cat, which is no loss: nothing
 * backward follows an inference forward. */
static void test_inference_after_forward(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "infer_cat_preds_oom";
	assert_int_equal(load_with(s, "oom_message.txt", &run),
	                 0); /* the message gives the cap to plan for */
	const an_structure *r = &run.an.devices[0].run;
	assert_int_equal(r->kind, AN_RUN_INFERENCE);
	assert_near("growth per batch", (double)r->growth_per_iteration,
	            (double)tu_corpus_int(s, "facts.json", "scores_bytes_per_batch"), 2);
	assert_int_equal(rank_of(&run, "release_references"), 1);
	assert_non_null(run.advice.capacity.died_in);
	assert_null(strstr(run.advice.capacity.died_in, "loss"));
	rp_free(&run);
}

/* A ninth held-out set (tools/record_heldout9.py). An RL-shaped step: generate(), then forwards
 * of its own that keep their graphs; it dies in the training forward. generate()'s frames in
 * the trace do not make it inference, and the batch advice does not speak of the KV cache. A
 * run that dies inside generate() is still inference. */
static void test_generate_then_train(void **state)
{
	(void)state;
	rp_report run;
	assert_int_equal(load_sample("ppo_rlhf_train_oom", NULL, &run), 0);
	assert_int_equal(run.an.devices[0].run.kind, AN_RUN_TRAINING);
	assert_int_equal(run.advice.oom.cause, AD_CAUSE_CAPACITY);
	const ad_recommendation *r = rec_of(&run, "reduce_microbatch");
	assert_non_null(r);
	assert_int_equal(r->rank, 1);
	assert_null(strstr(r->change, "generate()"));
	rp_free(&run);
	assert_int_equal(load_sample("t5_beam_generate_oom", NULL, &run), 0);
	assert_int_equal(run.an.devices[0].run.kind, AN_RUN_INFERENCE);
	rp_free(&run);
}

/* A request larger than the whole cap (PyTorch's own figures: the OOM observer's alloc and the
 * memory fraction's bytes), made inside a submodule's own code (a VAE's attention): it is not
 * the logits, and the batch advice says that freeing live memory cannot make it fit. */
static void test_request_over_limit(void **state)
{
	(void)state;
	rp_report run;
	long long req = tu_corpus_int("vae_decode_highres_oom", "facts.json", "alloc");
	long long cap = tu_corpus_int("vae_decode_highres_oom", "facts.json", "cap_bytes");
	assert_true(req > cap);
	assert_int_equal(load_with("vae_decode_highres_oom", "oom_message.txt", &run),
	                 0); /* the message says the cap */
	assert_int_equal((long long)run.advice.oom.limit, cap);
	assert_int_equal((long long)run.an.devices[0].oom.requested, req);
	assert_null(rec_of(&run, "chunked_loss"));
	const ad_recommendation *r = rec_of(&run, "reduce_microbatch");
	assert_non_null(r);
	assert_non_null(strstr(r->reason, "alone is larger than the 6.00 GiB allowed"));
	rp_free(&run);
	/* a request below the cap keeps the activations' reason */
	assert_int_equal(load_sample("oom_capacity", NULL, &run), 0);
	r = rec_of(&run, "reduce_microbatch");
	assert_non_null(r);
	assert_null(strstr(r->reason, "alone is larger"));
	rp_free(&run);
}

/* nn.MultiheadAttention called with its default need_weights=True takes the unfused path: the
 * failing request (PyTorch's OOM observer: one layer's fp32 probabilities, batch x heads x T x T)
 * is F.softmax under multi_head_attention_forward, and the lever is need_weights=False, not a
 * rewrite to scaled_dot_product_attention with a causal mask the encoder does not have. A
 * softmax in the model's own code keeps the generic change, with no causal mask asserted. */
static void test_mha_need_weights(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "mha_need_weights_longseq_oom";
	assert_int_equal(load_with(s, "oom_message.txt", &run), 0);
	assert_int_equal((long long)run.an.devices[0].oom.requested,
	                 tu_corpus_int(s, "facts.json", "alloc"));
	assert_int_equal(rank_of(&run, "fused_attention"), 1);
	const ad_recommendation *r = rec_of(&run, "fused_attention");
	assert_non_null(strstr(r->change, "need_weights=False"));
	assert_null(strstr(r->change, "is_causal=True,"));
	assert_non_null(strstr(r->reason, "multi_head_attention_forward"));
	rp_free(&run);
	assert_int_equal(load_sample("manual_attn_expandable_oom", NULL, &run), 0);
	r = rec_of(&run, "fused_attention");
	assert_non_null(r);
	assert_non_null(strstr(r->change, "scaled_dot_product_attention"));
	assert_null(strstr(r->change, "need_weights"));
	assert_null(strstr(r->change, "is_causal=True,"));
	rp_free(&run);
}

/* A sequence ladder whose last forward dies at a tensor that grew with the square of the input:
 * an additive float attention mask expanded to batch x heads x T x T for
 * F.scaled_dot_product_attention, which autocast's bf16 cast materialises per layer (PyTorch's
 * OOM observer: 2 x 16 x 8192^2 bf16). The failing request's own operation grew 4x where the
 * median grew 2x: finding quadratic_input, and the fused-attention lever first, with the
 * float-mask change; the need_weights run keeps its own change (the softmax rule names it). */
static void test_quadratic_input(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "sdpa_float_mask_math_oom";
	assert_int_equal(load_with(s, "oom_message.txt", &run), 0);
	assert_int_equal((long long)run.an.devices[0].oom.requested,
	                 tu_corpus_int(s, "facts.json", "alloc"));
	assert_non_null(find(&run, "quadratic_input"));
	assert_int_equal(rank_of(&run, "fused_attention"), 1);
	const ad_recommendation *r = rec_of(&run, "fused_attention");
	assert_non_null(strstr(r->change, "is_causal=True"));
	assert_non_null(strstr(r->reason, "square"));
	rp_free(&run);
	/* a batch-size OOM (no larger input than before) says nothing of squares */
	assert_int_equal(load_sample("expandable_on_capacity_oom", NULL, &run), 0);
	assert_null(find(&run, "quadratic_input"));
	assert_int_equal(rank_of(&run, "fused_attention"), 0);
	rp_free(&run);
}

/* An evaluation that carries a GRU's hidden state without detach, grad on: PyTorch's allocated
 * after each segment rises by the same bytes (facts.json steps), most of it the recurrent
 * module's outputs (torch/nn/modules/rnn.py). no_grad comes first; what keeps the memory is the
 * carried state, so the growth's lever says detach it, not "keep numbers" (the loop keeps
 * only float(loss)). A growth made elsewhere keeps the generic advice. */
static void test_recurrent_state_growth(void **state)
{
	(void)state;
	rp_report run;
	char path[1024];
	size_t len;
	const char *s = "gru_eval_carried_hidden_oom";
	char *json = (char *)tu_read(tu_sample(s, "facts.json", path, sizeof path), &len);
	assert_non_null(json);
	long long a0 = 0, a1 = 0;
	const char *p = strstr(json, "\"steps\"");
	assert_non_null(p);
	assert_true(tu_json_int(p, "allocated", &a0));
	p = strstr(p, "\"allocated\":") + 1;
	assert_true(tu_json_int(p, "allocated", &a1));
	free(json);
	assert_int_equal(load_sample(s, NULL, &run), 0);
	assert_int_equal((long long)run.an.devices[0].run.growth_per_iteration, a1 - a0);
	assert_int_equal(rank_of(&run, "no_grad_eval"), 1);
	const ad_recommendation *r = rec_of(&run, "release_references");
	assert_non_null(r);
	assert_non_null(strstr(r->change, "h.detach()"));
	assert_non_null(strstr(r->reason, "torch/nn/modules/rnn.py"));
	rp_free(&run);
	assert_int_equal(load_sample("train_leak", NULL, &run), 0);
	r = rec_of(&run, "release_references");
	assert_non_null(r);
	assert_null(strstr(r->change, "h.detach()"));
	rp_free(&run);
}

/* A bank of keys concatenated every step (16 MiB) and the step's logits against it: PyTorch's
 * allocated bytes rise 80 MiB a step, each step's peak faster. The free pieces would hold the
 * request, but the leak refills them within two iterations: the leak is the cause and its fix
 * comes before expandable segments. */
static void test_leak_peak_rise(void **state)
{
	(void)state;
	rp_report run;
	char path[1024];
	size_t len;
	char *json = (char *)tu_read(
	    tu_sample("memory_bank_grows_oom", "facts.json", path, sizeof path), &len);
	assert_non_null(json);
	long long a0 = 0, a1 = 0;
	const char *p = strstr(json, "\"steps\"");
	assert_non_null(p);
	assert_true(tu_json_int(p, "allocated", &a0));
	p = strstr(p, "\"allocated\":") + 1;
	assert_true(tu_json_int(p, "allocated", &a1));
	free(json);
	assert_int_equal(load_sample("memory_bank_grows_oom", NULL, &run), 0);
	assert_int_equal((long long)run.an.devices[0].run.growth_per_iteration, a1 - a0);
	assert_int_equal(run.advice.oom.cause, AD_CAUSE_CAPACITY);
	assert_true(run.advice.oom.by_growth);
	assert_int_equal(rank_of(&run, "release_references"), 1);
	assert_true(rank_of(&run, "expandable_segments") > 1);
	rp_free(&run);
}

/* Activations offloaded by torch.autograd.graph.save_on_cpu: no checkpointing advice. The
 * failing request in the backward is twice the bf16 logits' bytes (facts.json): the gradient
 * of their float32 copy, and the logits outweigh the other activations: chunked loss first. */
static void test_offloaded_activations(void **state)
{
	(void)state;
	rp_report run;
	long long logits =
	    tu_corpus_int("save_on_cpu_bigvocab_oom", "facts.json", "logits_bytes_bf16_last");
	assert_int_equal(load_sample("save_on_cpu_bigvocab_oom", NULL, &run), 0);
	assert_int_equal((long long)run.an.devices[0].oom.requested, 2 * logits);
	assert_null(rec_of(&run, "activation_checkpointing"));
	const ad_recommendation *r = rec_of(&run, "chunked_loss");
	assert_non_null(r);
	assert_int_equal(r->rank, 1);
	assert_non_null(strstr(r->reason, "is the gradient of the logits"));
	rp_free(&run);
}

/* A notebook: an earlier model and its AdamW state (facts.json `settings.held_bytes`) were
 * allocated before the history was recorded and are still referenced when a second model trains.
 * The blocks older than the trace outweigh both the new model's state and its activations: the
 * advice names them as memory from before the trace, not as blocks "with no stack recorded"
 * lumped with the autograd engine's gradients, and not as a batch or state problem. */
static void test_older_than_trace_first(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "notebook_stale_model_oom";
	long long held = tu_corpus_int(s, "facts.json", "model_a_param_bytes") +
	                 tu_corpus_int(s, "facts.json", "model_a_opt_state_bytes");
	assert_int_equal(load_sample(s, NULL, &run), 0);
	uint64_t older = run.advice.categories.bytes[AD_CAT_UNKNOWN];
	/* the earlier model's tensors, plus its workspaces: never less than them */
	assert_true(older >= (uint64_t)held);
	assert_true(older <= (uint64_t)held + 128 * 1048576ull);
	assert_int_equal(run.advice.oom.cause, AD_CAUSE_CAPACITY);
	const ad_recommendation *r = rec_of(&run, "release_references");
	assert_non_null(r);
	assert_int_equal(r->rank, 1);
	assert_non_null(strstr(r->reason, "allocated before the trace began"));
	assert_null(strstr(r->reason, "no stack recorded"));
	assert_int_equal(rank_of(&run, "reduce_microbatch"), 0);
	assert_int_equal(rank_of(&run, "mixed_precision"), 0);
	assert_int_equal(rank_of(&run, "cpu_offload"), 0);
	rp_free(&run);
}

/* One request larger than the whole memory fraction (retrieval_scores_oom: scores = q @ index.T
 * under inference_mode asks for more than `cap_bytes`): nothing freed
 * beside it can make room, so the operation is split, not "free the tensors". Its forwards
 * free their activations; the first one's cuBLAS workspace does not make them keep a graph. */
static void test_request_over_cap_split(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "retrieval_scores_oom";
	assert_int_equal(load_with(s, "oom_message.txt", &run), 0);
	long long cap = tu_corpus_int(s, "facts.json", "cap_bytes");
	/* the observer's `alloc` is the segment asked of CUDA for the request */
	assert_int_equal(run.an.devices[0].oom.alloc_size, tu_corpus_int(s, "facts.json", "alloc"));
	assert_int_equal(run.advice.oom.limit, cap);
	assert_true(run.advice.oom.requested > (uint64_t)cap);
	const an_structure *r = &run.an.devices[0].run;
	assert_int_equal(r->kind, AN_RUN_INFERENCE);
	assert_int_equal(r->evidence, AN_KIND_NO_GRAPH);
	assert_int_equal(rank_of(&run, "split_operation"), 1);
	assert_int_equal(rank_of(&run, "release_references"), 0);
	assert_non_null(strstr(run.advice.verdict, "larger than the limit"));
	rp_free(&run);
	/* a request under the limit (infer_cat_preds_oom's cat) is not split */
	s = "infer_cat_preds_oom";
	assert_int_equal(load_with(s, "oom_message.txt", &run), 0);
	assert_true(run.advice.oom.requested <
	            (uint64_t)tu_corpus_int(s, "facts.json", "cap_bytes"));
	assert_int_equal(rank_of(&run, "split_operation"), 0);
	rp_free(&run);
}

/* A request over the cap in a run whose memory is the model's state
 * (multihot_one_hot_history_oom: F.one_hot of the longest history asks more than `cap_bytes`,
 * weights and AdamW state hold most of live memory): nothing freed beside it helps, so no
 * checkpointing, offload or sharding; the one operation is split first, the batch after it. */
static void test_request_over_cap_state(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "multihot_one_hot_history_oom";
	assert_int_equal(load_with(s, "oom_message.txt", &run), 0);
	assert_true(run.advice.oom.requested >
	            (uint64_t)tu_corpus_int(s, "facts.json", "cap_bytes"));
	assert_int_equal(rank_of(&run, "split_operation"), 1);
	assert_int_equal(rank_of(&run, "reduce_microbatch"), 2);
	assert_int_equal(rank_of(&run, "activation_checkpointing"), 0);
	assert_int_equal(rank_of(&run, "cpu_offload"), 0);
	assert_int_equal(rank_of(&run, "fsdp"), 0);
	const ad_recommendation *r = rec_of(&run, "mixed_precision");
	assert_non_null(r);
	assert_non_null(strstr(r->reason, "halves the failing"));
	rp_free(&run);
}

/* One parameter trains in a mostly frozen model (lora_embedding_requires_grad_adam_oom: the
 * input embedding made trainable beside LoRA adapters; AdamW dies making its state): freezing it
 * comes first, with its gradient's size. A leak of new heads (head_per_task_oom), whose largest
 * gradient is the logits' in backward, is not told to freeze anything. */
static void test_one_trainable_tensor(void **state)
{
	(void)state;
	rp_report run;
	char want[64];
	const char *s = "lora_embedding_requires_grad_adam_oom";
	assert_int_equal(load_sample(s, NULL, &run), 0);
	const ad_recommendation *r = rec_of(&run, "freeze_parameters");
	assert_non_null(r);
	assert_int_equal(r->rank, 1);
	/* the gradient block: the embedding's bytes, rounded up to the allocator's 2 MiB */
	long long grad = tu_corpus_int(s, "facts.json", "embedding_grad_bytes");
	snprintf(want, sizeof want, "one gradient of %.2f MiB",
	         (double)((grad + 2097151) / 2097152 * 2097152) / 1048576.0);
	assert_non_null(strstr(r->reason, want));
	assert_non_null(strstr(r->reason, "optimizer's own"));
	rp_free(&run);
	assert_int_equal(load_sample("head_per_task_oom", NULL, &run), 0);
	assert_int_equal(rank_of(&run, "freeze_parameters"), 0);
	rp_free(&run);
}

/* No memory older than the trace (argsort_scores_oom: every live byte was allocated in the
 * trace, by torch.rand and torch.argsort, no model) is no "free what an earlier phase left":
 * the largest site is named instead, and the failing request (the observer's `alloc`) comes
 * from the same line as it. */
static void test_no_older_memory(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "argsort_scores_oom";
	assert_int_equal(load_sample(s, NULL, &run), 0);
	assert_int_equal(run.an.devices[0].oom.alloc_size, tu_corpus_int(s, "facts.json", "alloc"));
	assert_int_equal(run.advice.categories.bytes[AD_CAT_UNKNOWN], 0);
	assert_int_equal(run.advice.categories.bytes[AD_CAT_PARAMETERS], 0);
	assert_int_equal(run.advice.oom.cause, AD_CAUSE_CAPACITY);
	const ad_recommendation *r = rec_of(&run, "release_references");
	assert_non_null(r);
	assert_int_equal(r->rank, 1);
	assert_null(strstr(r->reason, "allocated before the trace began"));
	assert_non_null(strstr(r->reason, "comes from the same line"));
	rp_free(&run);
}

/* torch.cuda.empty_cache() called by Lightning's teardown between the fits of a batch ladder
 * (lightning_bf16true_ladder_oom) is no line of the user's to delete: the trace's releases are
 * counted, but neither the churn finding nor its advice follows. The failing request (the
 * observer's `alloc`, the bf16 log-softmax of 500 MiB logits) is as large as the logits: no
 * float32 upcast is claimed. */
static void test_library_empty_cache(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "lightning_bf16true_ladder_oom";
	assert_int_equal(load_with(s, "oom_message.txt", &run), 0);
	assert_int_equal(run.advice.oom.requested, tu_corpus_int(s, "facts.json", "alloc"));
	assert_true(run.an.devices[0].run.empty_cache_releases >= 2);
	assert_null(find(&run, "empty_cache_churn"));
	assert_int_equal(rank_of(&run, "remove_empty_cache"), 0);
	assert_int_equal(rank_of(&run, "reduce_microbatch"), 1);
	const ad_recommendation *r = rec_of(&run, "chunked_loss");
	assert_non_null(r);
	assert_null(strstr(r->reason, "float32"));
	assert_null(strstr(r->reason, "half the size"));
	rp_free(&run);
	/* the user's own call in the loop still is (empty_cache_each_step_healthy: 8 steps, each
	 * ending in empty_cache(): 7 releases the next step asks for again, and the last one, after
	 * the trace's last reservation, is the same call) */
	assert_int_equal(load_sample("empty_cache_each_step_healthy", NULL, &run), 0);
	assert_int_equal(run.an.devices[0].run.empty_cache_releases, 7);
	assert_int_equal(run.an.devices[0].run.empty_cache_last, 1);
	assert_non_null(find(&run, "empty_cache_churn"));
	assert_int_equal(rank_of(&run, "remove_empty_cache"), 1);
	rp_free(&run);
}

/* A dataset moved to the GPU whole before training (gpu_dataset_resident_oom: `dataset_bytes`
 * in one block) is named beside the batch's levers, after the first: it holds more than halving
 * the microbatch would free. */
static void test_resident_data_named(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "gpu_dataset_resident_oom";
	long long data = tu_corpus_int(s, "facts.json", "dataset_bytes");
	assert_int_equal(load_sample(s, NULL, &run), 0);
	assert_int_equal(run.advice.oom.cause, AD_CAUSE_CAPACITY);
	assert_true(run.advice.categories.bytes[AD_CAT_OTHER] >= (uint64_t)data);
	assert_int_equal(rank_of(&run, "reduce_microbatch"), 1);
	const ad_recommendation *r = rec_of(&run, "release_references");
	assert_non_null(r);
	assert_int_equal(r->rank, 2);
	char b[32];
	mr_format_bytes(b, sizeof b, (uint64_t)data);
	assert_non_null(strstr(r->reason, b));
	rp_free(&run);
}

/* An evaluation under no_grad inside a training run (eval_bigger_batch_oom) dies copying its
 * logits to float32 (the observer's `alloc` is `eval_logits_fp32_bytes`): the live activations
 * are the bf16 logits, which checkpointing would keep anyway, so it is not advised; a training
 * forward that keeps its graph (hf_llama_oom) still gets it. */
static void test_no_checkpointing_for_logits_alone(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "eval_bigger_batch_oom";
	assert_int_equal(load_sample(s, NULL, &run), 0);
	assert_int_equal(run.advice.oom.requested,
	                 tu_corpus_int(s, "facts.json", "eval_logits_fp32_bytes"));
	assert_int_equal(run.advice.oom.requested, tu_corpus_int(s, "facts.json", "alloc"));
	assert_int_equal(rank_of(&run, "chunked_loss"), 2); /* after this pass's batch */
	assert_int_equal(rank_of(&run, "activation_checkpointing"), 0);
	rp_free(&run);
	assert_int_equal(load_sample("hf_llama_oom", NULL, &run), 0);
	assert_true(rank_of(&run, "activation_checkpointing") > 0);
	rp_free(&run);
}

/* The verdict says what the logits are to the request that failed, as the recommendation
 * does: a float32 copy of them for the loss (oom_loss_logits, whose request facts.json gives),
 * their gradient in the backward (save_on_cpu_bigvocab_oom): not "the logits" whatever it was. */
static void test_logits_verdict(void **state)
{
	(void)state;
	rp_report run;
	assert_int_equal(load_sample("save_on_cpu_bigvocab_oom", NULL, &run), 0);
	assert_int_equal(rank_of(&run, "chunked_loss"), 1);
	assert_non_null(strstr(run.advice.verdict, "is the gradient of the logits"));
	rp_free(&run);
	assert_int_equal(load_sample("oom_loss_logits", NULL, &run), 0); /* a shared sample */
	assert_int_equal(rank_of(&run, "chunked_loss"), 1);
	assert_non_null(strstr(run.advice.verdict, "is a float32 copy of the logits"));
	rp_free(&run);
}

/* cat_grow_loop_oom rebuilds one buffer with torch.cat([feats, f]) every batch (facts.json:
 * chunk_bytes more each time): the verdict says growth of one tensor made anew, at the chunk's
 * size a step, not a leak, and the advice collects the pieces in a list. */
static void test_rebuilt_tensor_verdict(void **state)
{
	(void)state;
	rp_report run;
	const char *s = "cat_grow_loop_oom";
	char want[64], b[32];
	assert_int_equal(load_sample(s, NULL, &run), 0);
	mr_format_bytes(b, sizeof b, (uint64_t)tu_corpus_int(s, "facts.json", "chunk_bytes"));
	snprintf(want, sizeof want, "%s larger each time", b);
	assert_non_null(
	    strstr(run.advice.verdict, "Out of memory from growth: one tensor made anew"));
	assert_non_null(strstr(run.advice.verdict, want));
	assert_null(strstr(run.advice.verdict, "leak"));
	const ad_recommendation *r = rec_of(&run, "release_references");
	assert_non_null(r);
	assert_int_equal(r->rank, 1);
	assert_non_null(strstr(r->change, "torch.cat(parts)"));
	rp_free(&run);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_oom_fragmentation),
	    cmocka_unit_test(test_oom_capacity),
	    cmocka_unit_test(test_cached_peak_free),
	    cmocka_unit_test(test_failing_pass),
	    cmocka_unit_test(test_generation_loop),
	    cmocka_unit_test(test_capacity_line_leak),
	    cmocka_unit_test(test_oom_capacity_params),
	    cmocka_unit_test(test_fragmentation_without_oom),
	    cmocka_unit_test(test_graph_held_in_eval),
	    cmocka_unit_test(test_message_fragmentation_hedged),
	    cmocka_unit_test(test_container_self_listed),
	    cmocka_unit_test(test_batch_size_finder_named),
	    cmocka_unit_test(test_expandable_never_recommended),
	    cmocka_unit_test(test_expandable_never_recommended_shared),
	    cmocka_unit_test(test_growth),
	    cmocka_unit_test(test_no_growth),
	    cmocka_unit_test(test_no_growth_shared),
	    cmocka_unit_test(test_evidence_findings),
	    cmocka_unit_test(test_retries_evidence),
	    cmocka_unit_test(test_flushes_that_are_no_retries),
	    cmocka_unit_test(test_state_request_is_state),
	    cmocka_unit_test(test_autocast_share_of_whole_iteration),
	    cmocka_unit_test(test_replay_under_unknown_cap),
	    cmocka_unit_test(test_trace_without_allocations),
	    cmocka_unit_test(test_cause_words),
	    cmocka_unit_test(test_replay_past_the_oom),
	    cmocka_unit_test(test_trace_truncated),
	    cmocka_unit_test(test_trace_truncated_shared),
	    cmocka_unit_test(test_logs),
	    cmocka_unit_test(test_quoted_paths),
	    cmocka_unit_test(test_text_variants),
	    cmocka_unit_test(test_carried_activations),
	    cmocka_unit_test(test_state_growth),
	    cmocka_unit_test(test_losses_are_not_microbatches),
	    cmocka_unit_test(test_per_sample_gradients),
	    cmocka_unit_test(test_layers_through_functional),
	    cmocka_unit_test(test_inference_after_forward),
	    cmocka_unit_test(test_same_message_twice),
	    cmocka_unit_test(test_generate_then_train),
	    cmocka_unit_test(test_request_over_limit),
	    cmocka_unit_test(test_leak_peak_rise),
	    cmocka_unit_test(test_offloaded_activations),
	    cmocka_unit_test(test_request_over_cap_split),
	    cmocka_unit_test(test_request_over_cap_state),
	    cmocka_unit_test(test_one_trainable_tensor),
	    cmocka_unit_test(test_older_than_trace_first),
	    cmocka_unit_test(test_no_checkpointing_for_logits_alone),
	    cmocka_unit_test(test_logits_verdict),
	    cmocka_unit_test(test_rebuilt_tensor_verdict),
	    cmocka_unit_test(test_no_older_memory),
	    cmocka_unit_test(test_library_empty_cache),
	    cmocka_unit_test(test_resident_data_named),
	    cmocka_unit_test(test_mha_need_weights),
	    cmocka_unit_test(test_quadratic_input),
	    cmocka_unit_test(test_recurrent_state_growth),
	    cmocka_unit_test(test_what_ran_names_the_technique),
	    cmocka_unit_test(test_state_growth_by_kind),
	    cmocka_unit_test(test_sdpa_math_kernel),
	    cmocka_unit_test(test_died_in_engine_thread),
	    cmocka_unit_test(test_expandable_beside_capacity),
	    cmocka_unit_test(test_fsdp_param_dtype),
	    cmocka_unit_test(test_inference_kept_outputs),
	    cmocka_unit_test(test_generate_kept_scores),
	    cmocka_unit_test(test_outside_grew),
	    cmocka_unit_test(test_padding_tip),
	    cmocka_unit_test(test_framework_batch_words),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
