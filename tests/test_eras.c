/* test_eras.c: every format era normalises into one model (fixtures from
 * tests/fixtures/gen_era_fixtures.py; the numbers below are the ones designed in there). */
#include "testutil.h"

#include "render/render_html.h"
#include "render/render_json.h"
#include "report/report.h"
#include "base/error.h"
#include "base/buf.h"

#define MiB (1024ull * 1024)

static void load(const char *name, rp_report *run)
{
	char path[512];
	snprintf(path, sizeof path, "tests/fixtures/eras/%s", name);
	const char *paths[] = {path};
	if (tu_load(paths, 1, run))
		fail();
}

/* Event times are kept in 4 bytes an event: every time comes back exactly, the ones that fit
 * no offset from their chunk's first (none, earlier, 2^32 us later, the int64 extremes) too,
 * also in a later chunk whose first event has no time. */
static void test_event_times(void **state)
{
	(void)state;
	const int64_t far = (int64_t)UINT32_MAX;
	const int64_t t[] = {5,         5 + far - 1,   5 + far, 4, MD_TIME_NONE,
	                     INT64_MAX, INT64_MIN + 1, -7,      0, 6};
	const size_t nt = sizeof t / sizeof *t, n = 3 * MD_TIME_CHUNK + 5;
	md_times times = {0};
	for (size_t i = 0; i < n; i++) {
		int64_t v = i < nt ? t[i] : i == MD_TIME_CHUNK ? MD_TIME_NONE : (int64_t)i * 1000;
		assert_int_equal(md_times_push(&times, v), 0);
	}
	md_device md = {.times = times, .first = 2, .event_count = n - 2};
	for (size_t i = 2; i < n; i++) {
		int64_t v = i < nt ? t[i] : i == MD_TIME_CHUNK ? MD_TIME_NONE : (int64_t)i * 1000;
		assert_true(md_event_time(&md, i - 2) == v);
	}
	/* 5 + far, 4, none, the extremes, -7 and 0; then the second chunk's first */
	assert_int_equal(times.far_count, 8);
	md_times_free(&times);
}

static void test_v1_segment_list(void **state)
{
	(void)state;
	rp_report run;
	load("v1_segment_list.pickle", &run);
	assert_int_equal(run.ev.snap.era, MD_ERA_SEGMENT_LIST);
	assert_int_equal(run.an.device_count, 1);
	const an_device *dv = &run.an.devices[0];
	const an_pool *all = &dv->pool[AN_POOL_ALL];
	assert_int_equal(all->reserved, 22 * MiB);
	assert_int_equal(all->allocated, 8 * MiB + 512);
	assert_int_equal(all->inactive_split, 12 * MiB + 2 * MiB - 512);
	assert_int_equal(all->inactive_split_blocks, 2);
	assert_int_equal(dv->pool[AN_POOL_SMALL].segments, 1);
	/* block addresses are rebuilt from the segment address */
	assert_int_equal(run.ev.snap.blocks[1].address, (1ull << 40) + 8 * MiB);
	assert_false(dv->has_trace);
	assert_int_equal(run.ev.snap.inconsistent_segments, 0);
	rp_free(&run);
}

static void test_v20_history(void **state)
{
	(void)state;
	rp_report run;
	load("v20_history.pickle", &run);
	assert_int_equal(run.ev.snap.era, MD_ERA_HISTORY);
	const an_device *dv = &run.an.devices[0];
	assert_int_equal(dv->pool[AN_POOL_ALL].requested, 6 * MiB - 100); /* history real_size */
	assert_int_equal(dv->trace_events, 2);
	assert_int_equal(md_event_time(&run.ev.snap.devices[0], 0), MD_TIME_NONE);
	/* the block's stack comes from its history */
	const md_block *b = &run.ev.snap.blocks[0];
	assert_int_not_equal(b->stack, MD_NO_STACK);
	const md_stack *st = &run.ev.snap.stacks[b->stack];
	assert_int_equal(st->count, 2);
	assert_string_equal(md_str(&run.ev.snap, run.ev.snap.frames[st->first].name), "forward");
	rp_free(&run);
}

static void test_multi_device(void **state)
{
	(void)state;
	rp_report run;
	load("multi_device.pickle", &run);
	assert_int_equal(run.an.device_count, 2);
	const an_device *d0 = &run.an.devices[0], *d1 = &run.an.devices[1];
	assert_int_equal(d0->device, 0);
	assert_int_equal(d1->device, 1);
	assert_int_equal(d0->pool[AN_POOL_ALL].requested, 4 * MiB - 1);
	assert_int_equal(d0->pool[AN_POOL_ALL].inactive_split, 16 * MiB);
	assert_int_equal(d0->trace_events, 3); /* the unknown action is kept, and ignored */
	assert_int_equal(run.ev.snap.unknown_actions, 1);
	assert_int_equal(d0->peak_allocated, 4 * MiB);
	/* "active_awaiting_free" is the pending-free state */
	assert_int_equal(d1->pool[AN_POOL_ALL].allocated, 10 * MiB);
	assert_int_equal(d1->pool[AN_POOL_ALL].active, 20 * MiB);
	assert_int_equal(d1->pool[AN_POOL_ALL].pending_free_blocks, 1);
	assert_int_equal(d1->trace_events, 4);
	assert_int_equal(d1->peak_allocated, 20 * MiB);
	assert_int_equal(md_event_time(&run.ev.snap.devices[1], 0), MD_TIME_NONE);
	/* 2^64-1 written as a 9-byte LONG1 means unlimited */
	assert_int_equal(run.ev.snap.settings.max_split_size, UINT64_MAX);
	assert_int_equal(run.ev.snap.settings.roundup_divisions[8], 4);
	assert_int_equal(run.ev.snap.streams[run.ev.snap.devices[1].events[0].stream], 77);
	rp_free(&run);
}

/* --device N diagnoses that device: device 1 holds the pending-free block. */
static void test_device_option(void **state)
{
	(void)state;
	rp_report run;
	const char *paths[] = {"tests/fixtures/eras/multi_device.pickle"};
	assert_int_equal(tu_build(paths, 1, 1, &run), 0);
	assert_int_equal(run.advice.device, 1);
	int pending = 0;
	for (size_t i = 0; i < run.advice.finding_count; i++)
		pending |= strcmp(run.advice.findings[i].id, "pending_free_blocks") == 0;
	assert_true(pending);
	rp_free(&run);
	assert_int_equal(tu_build(paths, 1, 0, &run), 0);
	assert_int_equal(run.advice.device, 0);
	for (size_t i = 0; i < run.advice.finding_count; i++)
		assert_string_not_equal(run.advice.findings[i].id, "pending_free_blocks");
	rp_free(&run);
}

static void test_empty(void **state)
{
	(void)state;
	rp_report run;
	load("empty.pickle", &run);
	assert_int_equal(run.ev.snap.segment_count, 0);
	assert_int_equal(run.an.device_count, 0);
	assert_non_null(run.advice.verdict);
	mr_buf b = {0};
	rd_options opt = {.device = -1};
	mr_error err = {0};
	assert_int_equal(rd_render_json(&run, &opt, &b, &err), 0);
	assert_non_null(strstr(b.data, "\"devices\": []"));
	mr_buf_free(&b);
	assert_int_equal(rd_render_html(&run, &opt, &b, &err), 0);
	assert_non_null(strstr(b.data, "</html>"));
	mr_buf_free(&b);
	rp_free(&run);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_v1_segment_list), cmocka_unit_test(test_v20_history),
	    cmocka_unit_test(test_multi_device),    cmocka_unit_test(test_device_option),
	    cmocka_unit_test(test_empty),           cmocka_unit_test(test_event_times),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
