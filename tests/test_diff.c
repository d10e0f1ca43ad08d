/* test_diff.c: `memreport diff` by allocation site, against PyTorch's own numbers. */
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#include "cmd/cmd_diff.h"
#include "render/diff_text.h"
#include "render/options.h"
#include "render/render_diff.h"
#include "report/diff.h"
#include "report/report.h"
#include "base/error.h"
#include "base/buf.h"

static void test_torch_internal(void **state)
{
	(void)state;
	assert_true(
	    an_torch_internal("/opt/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py"));
	assert_true(an_torch_internal("torch/optim/adam.py"));
	assert_false(an_torch_internal("/workspace/train.py"));
	assert_false(an_torch_internal("/home/me/torchvision_models.py"));
	/* a path in either spelling: the attention rule's functional.py on Windows too */
	assert_true(an_path_has("C:\\venv\\Lib\\site-packages\\torch\\nn\\functional.py",
	                        "torch/nn/functional.py"));
	assert_true(an_path_has("/opt/venv/lib/site-packages/torch/nn/functional.py",
	                        "torch/nn/functional.py"));
	assert_false(an_path_has("/workspace/nn/functional.py", "torch/nn/functional.py"));
}

/* The acceptance case: the leak of autograd graphs in a validation loop. */
static void test_leak_diff(void **state)
{
	(void)state;
	char before_path[1024], after_path[1024];
	tu_snapshot("leak_val_fixed", before_path, sizeof before_path);
	tu_snapshot("leak_val_graph", after_path, sizeof after_path);
	rp_report before, after;
	assert_int_equal(tu_load((const char *[]){before_path}, 1, &before), 0);
	assert_int_equal(tu_load((const char *[]){after_path}, 1, &after), 0);
	df_result d;
	mr_error err = {0};
	assert_int_equal(df_compute(&before, &after, -1, &d, &err), MR_OK);

	long long want =
	    tu_corpus_int("leak_val_graph", "memory_stats.json", "allocated_bytes.all.current") -
	    tu_corpus_int("leak_val_fixed", "memory_stats.json", "allocated_bytes.all.current");
	assert_true(want > 0);
	assert_true(d.known[0][DF_ALLOCATED] && d.known[1][DF_ALLOCATED]);
	assert_int_equal((long long)(d.value[1][DF_ALLOCATED] - d.value[0][DF_ALLOCATED]), want);
	long long want_reserved =
	    tu_corpus_int("leak_val_graph", "memory_stats.json", "reserved_bytes.all.current") -
	    tu_corpus_int("leak_val_fixed", "memory_stats.json", "reserved_bytes.all.current");
	assert_int_equal((long long)(d.value[1][DF_RESERVED] - d.value[0][DF_RESERVED]),
	                 want_reserved);

	/* every allocated byte is in one site */
	long long sum = 0;
	for (size_t i = 0; i < d.change_count; i++)
		sum += d.changes[i].bytes_delta;
	assert_int_equal(sum, want);
	/* largest growth first, and it is the validation loop's forward pass */
	assert_true(d.change_count >= 2);
	for (size_t i = 1; i < d.change_count; i++)
		assert_true(d.changes[i - 1].bytes_delta >= d.changes[i].bytes_delta);
	const df_change *top = &d.changes[0];
	print_message("top: %s %lld of %lld\n", top->site, (long long)top->bytes_delta, want);
	assert_true(top->bytes_delta * 2 > want); /* most of the difference */
	assert_true(top->count_delta > 0);
	assert_string_equal(top->where.name, "val_loop");
	assert_non_null(strstr(top->where.filename, "train.py"));
	assert_false(an_torch_internal(top->where.filename));
	int through_forward = 0;
	for (size_t k = 0; k < top->frame_count; k++)
		through_forward |= strcmp(top->frames[k].name, "forward") == 0;
	assert_true(through_forward);

	/* the JSON document */
	rd_options opt = {.device = -1};
	mr_buf json = {0};
	assert_int_equal(rd_diff_json(&d, &before, &after, &opt, 0, &json, &err), MR_OK);
	char want_text[128];
	snprintf(want_text, sizeof want_text, "\"allocated_bytes\": %lld,", want);
	assert_non_null(strstr(json.data, "\"schema\": \"memreport-diff/1\""));
	assert_non_null(strstr(json.data, want_text));
	const char *tc = strstr(json.data, "\"top_changes\": [");
	assert_non_null(tc);
	assert_non_null(strstr(tc, "val_loop"));
	mr_buf_free(&json);
	mr_buf html = {0};
	assert_int_equal(rd_diff_html(&d, &before, &after, &opt, 0, &html, &err), MR_OK);
	assert_non_null(strstr(html.data, "</html>"));
	assert_null(strstr(html.data, "<module>")); /* escaped */
	mr_buf_free(&html);
	df_free(&d);

	/* a run against itself: nothing changed */
	assert_int_equal(df_compute(&after, &after, -1, &d, &err), MR_OK);
	assert_int_equal(d.change_count, 0);
	for (int m = 0; m < DF_METRIC_COUNT; m++)
		assert_int_equal(d.value[0][m], d.value[1][m]);
	df_free(&d);
	rp_free(&before);
	rp_free(&after);
}

/* The command line, as users call it. */
static void test_cmd_diff(void **state)
{
	(void)state;
	char before_path[1024], after_path[1024], out[64];
	tu_snapshot("leak_val_fixed", before_path, sizeof before_path);
	tu_sample("leak_val_graph", NULL, after_path, sizeof after_path);
	snprintf(out, sizeof out, "/tmp/mr_test_diff_%d.json", (int)getpid());
	/* AFTER as a run folder: discovery finds its one run */
	char *argv[] = {"diff", before_path, after_path, "--format", "json", "-o", out, NULL};
	assert_int_equal(cmd_diff(7, argv), 0);
	size_t len = 0;
	char *json = (char *)tu_read(out, &len);
	assert_non_null(json);
	long long delta = 0;
	const char *d = strstr(json, "\"delta\": {");
	assert_non_null(d);
	assert_true(tu_json_int(d, "allocated_bytes", &delta));
	assert_int_equal(delta, tu_corpus_int("leak_val_graph", "memory_stats.json",
	                                      "allocated_bytes.all.current") -
	                            tu_corpus_int("leak_val_fixed", "memory_stats.json",
	                                          "allocated_bytes.all.current"));
	free(json);
	unlink(out);

	/* a missing input: exit 2; a folder of many runs: exit 2 */
	char *corpus = TU_CORPUS;
	char *bad[] = {"diff", before_path, "/nonexistent/snapshot.pickle", "-o", out, NULL};
	assert_int_equal(cmd_diff(5, bad), 2);
	char *many[] = {"diff", before_path, corpus, "-o", out, NULL};
	assert_int_equal(cmd_diff(5, many), 2);
	char *one[] = {"diff", before_path, NULL};
	assert_int_equal(cmd_diff(2, one), 2);
	assert_false(tu_exists(out));
}

/* The case: expandable segments change the peak, not the end's live blocks. The diff
 * compares the peaks (PyTorch's own peak of reserved bytes on both sides) and names the
 * setting. */
static void test_expandable_peak_diff(void **state)
{
	(void)state;
	char a[1024], b[1024];
	snprintf(a, sizeof a, "%s/corpus/gpt_varlen/snapshot.pickle", tu_shared());
	snprintf(b, sizeof b, "%s/corpus/gpt_varlen_expandable/snapshot.pickle", tu_shared());
	if (!tu_exists(a) || !tu_exists(b))
		skip();
	rp_report before, after;
	assert_int_equal(tu_load((const char *[]){a}, 1, &before), 0);
	assert_int_equal(tu_load((const char *[]){b}, 1, &after), 0);
	df_result d;
	mr_error err = {0};
	assert_int_equal(df_compute(&before, &after, -1, &d, &err), MR_OK);
	long long want =
	    tu_corpus_int("gpt_varlen_expandable", "memory_stats.json", "reserved_bytes.all.peak") -
	    tu_corpus_int("gpt_varlen", "memory_stats.json", "reserved_bytes.all.peak");
	assert_true(want < -(1ll << 30)); /* more than a GiB less with expandable segments */
	assert_int_equal((long long)(d.value[1][DF_PEAK_RESERVED] - d.value[0][DF_PEAK_RESERVED]),
	                 want);
	/* at the peak the rebuilt layouts hold much less free cached memory after */
	assert_true(d.peak_known[0] && d.peak_known[1]);
	assert_true(d.peak_value[1][DF_PK_FREE_CACHED] * 4 < d.peak_value[0][DF_PK_FREE_CACHED]);
	int named = 0;
	for (size_t i = 0; i < d.setting_count; i++)
		named |= strcmp(d.settings[i].key, "expandable_segments") == 0 &&
		         strcmp(d.settings[i].before, "False") == 0 &&
		         strcmp(d.settings[i].after, "True") == 0;
	assert_true(named);
	rd_options opt = {.device = -1};
	mr_buf md = {0}, text = {0}, json = {0}, html = {0};
	assert_int_equal(rd_diff_md(&d, &before, &after, &opt, 5, &md, &err), MR_OK);
	assert_int_equal(rd_diff_text(&d, &before, &after, &opt, 5, &text, &err), MR_OK);
	assert_int_equal(rd_diff_json(&d, &before, &after, &opt, 0, &json, &err), MR_OK);
	assert_int_equal(rd_diff_html(&d, &before, &after, &opt, 0, &html, &err), MR_OK);
	assert_non_null(strstr(md.data, "expandable\\_segments False -> True"));
	assert_non_null(strstr(md.data, "| overhead at the peak | 17.4% | 2.6% |"));
	assert_non_null(strstr(text.data, "At the peak (each run at its own):"));
	assert_non_null(strstr(json.data, "\"settings_changes\": [{\"key\": "));
	assert_non_null(strstr(json.data, "\"at_peak\": {\"before\": {\"reserved_bytes\": "));
	assert_non_null(strstr(html.data, "<svg class=\"timeline overlay\""));
	assert_non_null(strstr(html.data, "<h2>At the peak</h2>"));
	mr_buf_free(&md);
	mr_buf_free(&text);
	mr_buf_free(&json);
	mr_buf_free(&html);
	df_free(&d);
	rp_free(&before);
	rp_free(&after);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_torch_internal),
	    cmocka_unit_test(test_leak_diff),
	    cmocka_unit_test(test_expandable_peak_diff),
	    cmocka_unit_test(test_cmd_diff),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
