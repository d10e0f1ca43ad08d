/* test_sim.c: the caching-allocator replay (sim.h).
 *
 * Unit tests take their expectations from reference §0 (sizes measured on an H200 with
 * torch 2.11) and run the engine on small hand-made traces; the corpus tests replay real
 * recordings and compare with the memory_stats.json PyTorch wrote for the same run. */
#include <math.h>
#include <time.h>

#include "testutil.h"

#include "report/report.h"
#include "sim/config.h"
#include "sim/replay.h"
#include "sim/result_json.h"
#include "base/error.h"
#include "base/buf.h"

#define KiB ((uint64_t)1024)
#define MiB ((uint64_t)1024 * 1024)
#define GiB ((uint64_t)1024 * 1024 * 1024)

/* ---- hand-made traces ---- */

typedef struct {
	md_snapshot s;
	size_t cap;
} trace;

static void trace_init(trace *t)
{
	md_init(&t->s);
	t->s.devices = calloc(1, sizeof *t->s.devices);
	assert_non_null(t->s.devices);
	t->s.device_count = 1;
	t->s.stream_count = 1;
	t->cap = 0;
}

static void ev(trace *t, md_action action, uint64_t addr, uint64_t size)
{
	md_snapshot *s = &t->s;
	if (s->event_store_count == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 64;
		s->event_store = realloc(s->event_store, t->cap * sizeof *s->event_store);
		assert_non_null(s->event_store);
	}
	md_event e = {addr, size, 0, 0, 0, (uint8_t)action};
	s->event_store[s->event_store_count++] = e;
	assert_int_equal(md_times_push(&s->times, MD_TIME_NONE), 0);
	s->devices[0].events = s->event_store;
	s->devices[0].times = s->times;
	s->devices[0].event_count = s->event_store_count;
	s->devices[0].has_trace_list = 1;
}

/* The snapshot's state at the end, as far as the replay checks it: a segment and how many
 * of its bytes are allocated (one allocated block, then one inactive block). */
static void snap_segment(trace *t, uint64_t addr, uint64_t total, uint64_t allocated,
                         int expandable)
{
	md_snapshot *s = &t->s;
	s->segments = realloc(s->segments, (s->segment_count + 1) * sizeof *s->segments);
	s->blocks = realloc(s->blocks, (s->block_count + 2) * sizeof *s->blocks);
	assert_non_null(s->segments);
	assert_non_null(s->blocks);
	md_segment *sg = &s->segments[s->segment_count++];
	memset(sg, 0, sizeof *sg);
	sg->address = addr;
	sg->total_size = total;
	sg->pool = total == 2 * MiB ? MD_POOL_SMALL : MD_POOL_LARGE;
	sg->is_expandable = (uint8_t)expandable;
	sg->first_block = (uint32_t)s->block_count;
	md_block parts[2] = {{addr, allocated, allocated, 0, MD_BLOCK_ACTIVE_ALLOCATED, 1},
	                     {addr + allocated, total - allocated, 0, 0, MD_BLOCK_INACTIVE, 1}};
	for (int i = 0; i < 2; i++)
		if (parts[i].size) {
			s->blocks[s->block_count++] = parts[i];
			sg->block_count++;
		}
}

static void replay(trace *t, const char *conf, uint64_t limit, sim_result *r)
{
	sim_config base, cfg;
	mr_error err = {0};
	sim_config_from_settings(&t->s, &base);
	assert_int_equal(sim_parse_conf(conf, &base, &cfg, &err), MR_OK);
	mr_status st = sim_replay(&t->s, 0, &cfg, limit, r, &err);
	if (st)
		print_error("replay: %s\n", err.msg);
	assert_int_equal(st, MR_OK);
}

/* ---- configuration ---- */

static void test_conf_parse(void **state)
{
	(void)state;
	sim_config d, c;
	mr_error err = {0};
	sim_config_default(&d);
	assert_int_equal(sim_parse_conf("", NULL, &c, &err), MR_OK);
	assert_true(sim_config_equal(&c, &d));
	assert_int_equal(sim_parse_conf("recorded", &d, &c, &err), MR_OK);
	assert_true(sim_config_equal(&c, &d));

	assert_int_equal(
	    sim_parse_conf(" expandable_segments : True , max_split_size_mb:128,"
	                   "garbage_collection_threshold:0.6,max_non_split_rounding_mb:40",
	                   NULL, &c, &err),
	    MR_OK);
	assert_true(c.expandable_segments);
	assert_int_equal(c.max_split_size, 128 * MiB);
	assert_int_equal(c.max_non_split_rounding, 40 * MiB);
	assert_true(c.gc_threshold > 0.59 && c.gc_threshold < 0.61);

	/* Settings on top of a base: unmentioned keys keep the base's values. */
	sim_config base = c, c2;
	assert_int_equal(sim_parse_conf("expandable_segments:False", &base, &c2, &err), MR_OK);
	assert_false(c2.expandable_segments);
	assert_int_equal(c2.max_split_size, 128 * MiB);

	/* roundup_power2_divisions: N fills every interval; K governs [K, 2K) MiB; the first
	 * pair also fills the lower intervals, '>' those after the last key (reference §0). */
	assert_int_equal(sim_parse_conf("roundup_power2_divisions:4", NULL, &c, &err), MR_OK);
	for (int i = 0; i < 16; i++)
		assert_int_equal(c.roundup_divisions[i], 4);
	assert_int_equal(
	    sim_parse_conf("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", NULL, &c, &err),
	    MR_OK);
	for (int i = 0; i <= 8; i++)
		assert_int_equal(c.roundup_divisions[i], 1);
	assert_int_equal(c.roundup_divisions[9], 2);
	assert_int_equal(c.roundup_divisions[10], 4);
	for (int i = 11; i < 16; i++)
		assert_int_equal(c.roundup_divisions[i], 8);

	/* Accepted, no effect on the device allocator. */
	assert_int_equal(sim_parse_conf("pinned_use_cuda_host_register:True,"
	                                "release_lock_on_cudamalloc:False,backend:native",
	                                NULL, &c, &err),
	                 MR_OK);
	assert_true(sim_config_equal(&c, &d));

	/* Errors, worded like PyTorch's. */
	const char *bad[] = {"foo:1",
	                     "expandable_segments:true",
	                     "max_split_size_mb:10",
	                     "garbage_collection_threshold:1.5",
	                     "roundup_power2_divisions:3",
	                     "roundup_power2_divisions:[100:2]",
	                     "expandable_segments",
	                     "backend:cudaMallocAsync",
	                     "max_split_size_mb:abc"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		mr_error e2 = {0};
		if (sim_parse_conf(bad[i], NULL, &c, &e2) != MR_EINPUT) {
			print_error("'%s' was accepted\n", bad[i]);
			fail();
		}
		assert_true(e2.msg[0] != '\0');
	}
	mr_error e3 = {0};
	sim_parse_conf("expandable_segments:True,foo:1", NULL, &c, &e3);
	assert_string_equal(e3.msg, "Unrecognized key 'foo' in CUDA allocator config.");
}

static void test_conf_format_roundtrip(void **state)
{
	(void)state;
	const char *confs[] = {"", "expandable_segments:True",
	                       "max_split_size_mb:100,garbage_collection_threshold:0.5",
	                       "roundup_power2_divisions:[256:1,512:2,>:4]",
	                       "roundup_power2_divisions:8,large_segment_size_mb:40"};
	for (size_t i = 0; i < sizeof confs / sizeof *confs; i++) {
		sim_config a, b;
		mr_error err = {0};
		mr_buf out = {0};
		assert_int_equal(sim_parse_conf(confs[i], NULL, &a, &err), MR_OK);
		sim_config_format(&a, &out);
		assert_int_equal(sim_parse_conf(out.data ? out.data : "", NULL, &b, &err), MR_OK);
		assert_true(sim_config_equal(&a, &b));
		mr_buf_free(&out);
	}
}

/* ---- rounding and segment sizes (reference §0) ---- */

static void test_round_size(void **state)
{
	(void)state;
	sim_config c;
	mr_error err = {0};
	sim_config_default(&c);
	const uint64_t plain[][2] = {
	    {1, 512},
	    {511, 512},
	    {513, 1024},
	    {1200, 1536},
	    {3000, 3072},
	    {600 * KiB, 600 * KiB},
	    {MiB, MiB},
	    {MiB + 1, 1049088},
	    {5 * MiB, 5 * MiB},
	    {10 * MiB - 1, 10 * MiB},
	    {12 * MiB + 7, 12583424},
	};
	for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
		assert_int_equal(sim_round_size(&c, plain[i][0]), plain[i][1]);

	assert_int_equal(sim_parse_conf("roundup_power2_divisions:4", NULL, &c, &err), MR_OK);
	const uint64_t div4[][2] = {
	    {1200, 1536}, /* not 1280 as the docs say: 1200 <= 512 x 4 */
	    {3000, 3072},
	    {600 * KiB, 640 * KiB},
	    {MiB + 1, MiB + MiB / 4},
	    {12 * MiB + 7, 14 * MiB},
	    {21 * MiB, 24 * MiB},
	    {1100 * MiB + 1, 1280 * MiB},
	};
	for (size_t i = 0; i < sizeof div4 / sizeof *div4; i++)
		assert_int_equal(sim_round_size(&c, div4[i][0]), div4[i][1]);

	assert_int_equal(
	    sim_parse_conf("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]", NULL, &c, &err),
	    MR_OK);
	assert_int_equal(sim_round_size(&c, 200 * MiB + 1), 200 * MiB + 512);
	assert_int_equal(sim_round_size(&c, 300 * MiB + 1), 300 * MiB + 512);
	assert_int_equal(sim_round_size(&c, 600 * MiB + 1), 768 * MiB);
	assert_int_equal(sim_round_size(&c, 1100 * MiB + 1), 1280 * MiB);
	assert_int_equal(sim_round_size(&c, 2100 * MiB + 1), 2304 * MiB);
}

/* One request on an empty allocator: the block handed out and the segment behind it. */
static void test_block_and_segment_sizes(void **state)
{
	(void)state;
	const uint64_t table[][3] = {
	    /* request, block, segment */
	    {1, 512, 2 * MiB},
	    {511, 512, 2 * MiB},
	    {513, 1024, 2 * MiB},
	    {1200, 1536, 2 * MiB},
	    {3000, 3072, 2 * MiB},
	    {600 * KiB, 600 * KiB, 2 * MiB},
	    {MiB, MiB, 2 * MiB},
	    {MiB + 1, 1049088, 20 * MiB},
	    {5 * MiB, 5 * MiB, 20 * MiB},
	    {10 * MiB - 1, 10 * MiB, 10 * MiB},
	    {10 * MiB, 10 * MiB, 10 * MiB},
	    {12 * MiB + 7, 12583424, 14 * MiB},
	    {19 * MiB + MiB / 2, 20 * MiB, 20 * MiB}, /* not split: remainder <= 1 MiB */
	    {21 * MiB, 22 * MiB, 22 * MiB},           /* not split: remainder = 1 MiB */
	};
	for (size_t i = 0; i < sizeof table / sizeof *table; i++) {
		trace t;
		sim_result r;
		trace_init(&t);
		ev(&t, MD_ACT_ALLOC, 0x1000, table[i][0]);
		replay(&t, "", 0, &r);
		if (r.peak_allocated != table[i][1] || r.segment_size_count != 1 ||
		    r.segment_sizes[0] != table[i][2]) {
			print_error(
			    "request %llu: block %llu segment %llu\n",
			    (unsigned long long)table[i][0], (unsigned long long)r.peak_allocated,
			    (unsigned long long)(r.segment_size_count ? r.segment_sizes[0] : 0));
			fail();
		}
		assert_int_equal(r.final_reserved, table[i][2]);
		sim_result_free(&r);
		md_free(&t.s);
	}
}

/* With the segment addresses of a recording, every block must land where PyTorch put it:
 * the front of a split block is handed out, the remainder stays cached. */
static void test_should_split(void **state)
{
	(void)state;
	trace t;
	sim_result r;
	const uint64_t seg = 0x7f0000000000;
	trace_init(&t);
	/* large pool: split when the remainder is over 1 MiB */
	ev(&t, MD_ACT_SEGMENT_ALLOC, seg, 20 * MiB);
	ev(&t, MD_ACT_ALLOC, seg, 5 * MiB);
	ev(&t, MD_ACT_ALLOC, seg + 5 * MiB, 5 * MiB);
	ev(&t, MD_ACT_ALLOC, seg + 10 * MiB, 9 * MiB); /* remainder exactly 1 MiB: whole block */
	/* small pool: split while 512 bytes remain */
	ev(&t, MD_ACT_SEGMENT_ALLOC, seg + 32 * MiB, 2 * MiB);
	ev(&t, MD_ACT_ALLOC, seg + 32 * MiB, 1);
	ev(&t, MD_ACT_ALLOC, seg + 32 * MiB + 512, MiB);
	ev(&t, MD_ACT_ALLOC, seg + 33 * MiB + 512, 100);
	snap_segment(&t, seg, 20 * MiB, 20 * MiB, 0);
	snap_segment(&t, seg + 32 * MiB, 2 * MiB, MiB + 1024, 0);
	replay(&t, "", 0, &r);
	if (!r.matches_recording)
		print_error("diverged at %zu: %s: expected %s, got %s\n",
		            r.first_divergence.event_index, r.first_divergence.what,
		            r.first_divergence.expected, r.first_divergence.got);
	assert_true(r.matches_recording);
	assert_int_equal(r.final_allocated, 21 * MiB + 1024);
	assert_int_equal(r.segments_allocated, 2);
	sim_result_free(&r);

	/* A block at another address than recorded is reported. */
	t.s.event_store[2].addr = seg + 6 * MiB;
	replay(&t, "", 0, &r);
	assert_false(r.matches_recording);
	assert_int_equal(r.first_divergence.event_index, 2);
	assert_string_equal(r.first_divergence.what, "block address");
	sim_result_free(&r);
	md_free(&t.s);
}

/* Best fit by (stream, size, address): the smallest block that fits, ties to the lowest
 * address; frees merge with free neighbours. */
static void test_best_fit_and_merge(void **state)
{
	(void)state;
	trace t;
	sim_result r;
	const uint64_t a = 0x7f0000000000, b = 0x7f1000000000;
	trace_init(&t);
	ev(&t, MD_ACT_SEGMENT_ALLOC, b, 40 * MiB);
	ev(&t, MD_ACT_ALLOC, b, 40 * MiB);
	ev(&t, MD_ACT_SEGMENT_ALLOC, a, 40 * MiB);
	ev(&t, MD_ACT_ALLOC, a, 40 * MiB);
	ev(&t, MD_ACT_FREE_REQUESTED, b, 40 * MiB);
	ev(&t, MD_ACT_FREE_COMPLETED, b, 40 * MiB);
	ev(&t, MD_ACT_FREE_REQUESTED, a, 40 * MiB);
	ev(&t, MD_ACT_FREE_COMPLETED, a, 40 * MiB);
	ev(&t, MD_ACT_ALLOC, a, 12 * MiB); /* equal sizes: the lower address */
	ev(&t, MD_ACT_ALLOC, a + 12 * MiB, 12 * MiB);
	ev(&t, MD_ACT_FREE_REQUESTED, a, 12 * MiB);
	ev(&t, MD_ACT_FREE_COMPLETED, a, 12 * MiB);
	ev(&t, MD_ACT_ALLOC, a, 10 * MiB); /* 12 MiB hole beats 16 MiB tail and 40 MiB */
	ev(&t, MD_ACT_FREE_REQUESTED, a + 12 * MiB, 12 * MiB);
	ev(&t, MD_ACT_FREE_COMPLETED, a + 12 * MiB, 12 * MiB);
	ev(&t, MD_ACT_ALLOC, a + 10 * MiB, 30 * MiB); /* 2 + 12 + 16 merged into one 30 MiB */
	snap_segment(&t, a, 40 * MiB, 40 * MiB, 0);
	snap_segment(&t, b, 40 * MiB, 0, 0);
	replay(&t, "", 0, &r);
	if (!r.matches_recording)
		print_error("diverged at %zu: %s: expected %s, got %s\n",
		            r.first_divergence.event_index, r.first_divergence.what,
		            r.first_divergence.expected, r.first_divergence.got);
	assert_true(r.matches_recording);
	assert_int_equal(r.final_allocated, 40 * MiB);
	sim_result_free(&r);
	md_free(&t.s);
}

/* Reference §0, max_split_size_mb:100. */
static void test_max_split_size(void **state)
{
	(void)state;
	trace t;
	sim_result r;
	trace_init(&t);
	ev(&t, MD_ACT_ALLOC, 1, 150 * MiB);
	ev(&t, MD_ACT_FREE_REQUESTED, 1, 150 * MiB);
	ev(&t, MD_ACT_FREE_COMPLETED, 1, 150 * MiB);
	ev(&t, MD_ACT_ALLOC, 2, 140 * MiB); /* the cached 150 reused whole: 150 < 140 + 20 */
	ev(&t, MD_ACT_FREE_REQUESTED, 2, 140 * MiB);
	ev(&t, MD_ACT_FREE_COMPLETED, 2, 140 * MiB);
	ev(&t, MD_ACT_ALLOC, 3, 120 * MiB); /* not: 150 >= 120 + 20, a new segment */
	ev(&t, MD_ACT_FREE_REQUESTED, 3, 120 * MiB);
	ev(&t, MD_ACT_FREE_COMPLETED, 3, 120 * MiB);
	ev(&t, MD_ACT_ALLOC, 4, 60 * MiB); /* below max_split: never an oversize block */
	ev(&t, MD_ACT_FREE_REQUESTED, 4, 60 * MiB);
	ev(&t, MD_ACT_FREE_COMPLETED, 4, 60 * MiB);
	ev(&t, MD_ACT_ALLOC, 5, 30 * MiB); /* splits the free 60 MiB segment */
	replay(&t, "max_split_size_mb:100", 0, &r);
	assert_int_equal(r.segments_allocated, 3);
	assert_int_equal(r.segment_sizes[0], 150 * MiB);
	assert_int_equal(r.segment_sizes[1], 120 * MiB);
	assert_int_equal(r.segment_sizes[2], 60 * MiB);
	assert_int_equal(r.final_allocated, 30 * MiB);
	assert_int_equal(r.peak_allocated, 150 * MiB);
	sim_result_free(&r);

	/* The same without max_split_size: the 150 MiB block is split for everything. */
	replay(&t, "", 0, &r);
	assert_int_equal(r.segments_allocated, 1);
	assert_int_equal(r.final_allocated, 30 * MiB);
	sim_result_free(&r);

	/* Under a limit, oversize cached blocks are released before giving up. */
	replay(&t, "max_split_size_mb:100", 300 * MiB, &r);
	assert_int_equal(r.oom_count, 0);
	assert_true(r.segments_released >= 1);
	assert_true(r.peak_reserved <= 300 * MiB);
	sim_result_free(&r);
	md_free(&t.s);
}

/* Reference §0, expandable segments: 20 MiB pages in the large pool, 2 MiB in the small one;
 * a request grows the mapping from the free tail; a release unmaps only whole free pages. */
static void test_expandable_pages(void **state)
{
	(void)state;
	trace t;
	sim_result r;
	const uint64_t big = 0x1300000000, small = 0x2300000000;
	trace_init(&t);
	ev(&t, MD_ACT_SEGMENT_MAP, big, 40 * MiB);
	ev(&t, MD_ACT_ALLOC, big, 30 * MiB); /* 30 MiB maps two 20 MiB pages */
	ev(&t, MD_ACT_SEGMENT_MAP, small, 2 * MiB);
	ev(&t, MD_ACT_ALLOC, small, 1000); /* small pool: a 2 MiB page */
	ev(&t, MD_ACT_SEGMENT_MAP, big + 40 * MiB, 100 * MiB);
	ev(&t, MD_ACT_ALLOC, big + 30 * MiB, 100 * MiB); /* starts in the 10 MiB free tail */
	ev(&t, MD_ACT_FREE_REQUESTED, big, 30 * MiB);
	ev(&t, MD_ACT_FREE_COMPLETED, big, 30 * MiB);
	ev(&t, MD_ACT_SEGMENT_UNMAP, big, 20 * MiB); /* empty_cache(): the one whole free page */
	/* the snapshot: one 120 MiB expandable segment (10 free, 100 active, 10 free) */
	snap_segment(&t, big + 20 * MiB, 120 * MiB, 0, 1);
	t.s.blocks[t.s.block_count - 1].size = 10 * MiB;
	md_block active = {big + 30 * MiB, 100 * MiB, 100 * MiB, 0, MD_BLOCK_ACTIVE_ALLOCATED, 1};
	md_block tail = {big + 130 * MiB, 10 * MiB, 0, 0, MD_BLOCK_INACTIVE, 1};
	t.s.blocks = realloc(t.s.blocks, (t.s.block_count + 2) * sizeof *t.s.blocks);
	assert_non_null(t.s.blocks);
	t.s.blocks[t.s.block_count++] = active;
	t.s.blocks[t.s.block_count++] = tail;
	t.s.segments[0].block_count = 3;
	snap_segment(&t, small, 2 * MiB, 1024, 1);
	replay(&t, "", 0, &r); /* the recorded settings: defaults, so not expandable */
	assert_false(r.matches_recording);
	sim_result_free(&r);
	replay(&t, "expandable_segments:True", 0, &r);
	if (!r.matches_recording)
		print_error("diverged at %zu: %s: expected %s, got %s\n",
		            r.first_divergence.event_index, r.first_divergence.what,
		            r.first_divergence.expected, r.first_divergence.got);
	assert_true(r.matches_recording);
	assert_false(r.truncated);
	assert_int_equal(r.segment_size_count, 3);
	assert_int_equal(r.segment_sizes[0], 40 * MiB);
	assert_int_equal(r.segment_sizes[1], 2 * MiB);
	assert_int_equal(r.segment_sizes[2], 100 * MiB);
	assert_int_equal(r.peak_reserved, 142 * MiB);
	assert_int_equal(r.segments_released, 1);
	assert_int_equal(r.final_reserved, 122 * MiB);
	assert_int_equal(r.final_allocated, 100 * MiB + 1024);
	sim_result_free(&r);
	md_free(&t.s);
}

/* Pending frees: allocated drops at free_requested, the memory is reusable only after
 * free_completed. */
static void test_pending_free(void **state)
{
	(void)state;
	trace t;
	sim_result r;
	trace_init(&t);
	ev(&t, MD_ACT_ALLOC, 1, 30 * MiB);
	ev(&t, MD_ACT_FREE_REQUESTED, 1, 30 * MiB);
	ev(&t, MD_ACT_ALLOC, 2, 30 * MiB); /* cannot reuse: a second segment */
	ev(&t, MD_ACT_FREE_COMPLETED, 1, 30 * MiB);
	ev(&t, MD_ACT_ALLOC, 3, 30 * MiB); /* reuses the first */
	replay(&t, "", 0, &r);
	assert_int_equal(r.segments_allocated, 2);
	assert_int_equal(r.peak_allocated, 60 * MiB);
	assert_int_equal(r.final_allocated, 60 * MiB);
	sim_result_free(&r);
	md_free(&t.s);
}

/* A limit: the OOM is reported with the numbers of PyTorch's message. */
static void test_limit_oom(void **state)
{
	(void)state;
	trace t;
	sim_result r;
	trace_init(&t);
	ev(&t, MD_ACT_ALLOC, 1, 60 * MiB);
	ev(&t, MD_ACT_ALLOC, 2, 60 * MiB);
	ev(&t, MD_ACT_FREE_REQUESTED, 1, 60 * MiB);
	ev(&t, MD_ACT_FREE_COMPLETED, 1, 60 * MiB);
	ev(&t, MD_ACT_ALLOC, 3, 70 * MiB); /* 60 MiB cached cannot serve it */
	/* 120 MiB reserved; 60 cached cannot serve 70: the cached segment is released, and
	 * 60 + 70 still passes 125 */
	replay(&t, "", 125 * MiB, &r);
	assert_true(r.first_oom.present);
	assert_int_equal(r.first_oom.event_index, 4);
	assert_int_equal(r.first_oom.requested_bytes, 70 * MiB);
	assert_int_equal(r.first_oom.alloc_bytes, 70 * MiB);
	assert_int_equal(r.first_oom.reserved_bytes, 60 * MiB);
	assert_int_equal(r.first_oom.free_cached_bytes, 0);
	assert_int_equal(r.segments_released, 1);
	sim_result_free(&r);
	/* with room for both after the release, no OOM */
	replay(&t, "", 130 * MiB, &r);
	assert_false(r.first_oom.present);
	assert_int_equal(r.segments_released, 1);
	assert_int_equal(r.peak_reserved, 130 * MiB);
	sim_result_free(&r);
	md_free(&t.s);
}

/* A trace that starts mid-run: blocks freed in the window but never allocated there were
 * live before it; the snapshot's segments were already there. */
static void test_truncated_start(void **state)
{
	(void)state;
	trace t;
	sim_result r;
	const uint64_t seg = 0x7f0000000000;
	trace_init(&t);
	md_snapshot *s = &t.s;
	s->segments = calloc(1, sizeof *s->segments);
	s->blocks = calloc(1, sizeof *s->blocks);
	assert_non_null(s->segments);
	assert_non_null(s->blocks);
	s->segment_count = 1;
	s->block_count = 1;
	s->segments[0].address = seg;
	s->segments[0].total_size = 20 * MiB;
	s->segments[0].block_count = 1;
	s->segments[0].pool = MD_POOL_LARGE;
	s->blocks[0].address = seg;
	s->blocks[0].size = 20 * MiB;
	s->blocks[0].state = MD_BLOCK_INACTIVE;
	ev(&t, MD_ACT_FREE_REQUESTED, seg, 4 * MiB);
	ev(&t, MD_ACT_FREE_COMPLETED, seg, 4 * MiB);
	ev(&t, MD_ACT_ALLOC, seg, 6 * MiB);
	ev(&t, MD_ACT_FREE_REQUESTED, seg, 6 * MiB);
	ev(&t, MD_ACT_FREE_COMPLETED, seg, 6 * MiB);
	replay(&t, "", 0, &r);
	assert_true(r.truncated);
	assert_true(r.approximate);
	assert_int_equal(r.estimated_blocks, 1);
	assert_int_equal(r.initial_reserved, 20 * MiB);
	assert_int_equal(r.initial_allocated, 4 * MiB);
	assert_int_equal(r.peak_allocated, 6 * MiB);
	assert_int_equal(r.segments_allocated, 0);
	assert_true(r.matches_recording);
	sim_result_free(&r);
	md_free(&t.s);
}

/* ---- the corpus ---- */

/* The sample's snapshot replayed under conf (and limit, 0: none); skips when it is absent. */
static void replay_sample(const char *sample, const char *conf, uint64_t limit, sim_result *r)
{
	char path[1024];
	rp_report run;
	tu_snapshot(sample, path, sizeof path);
	assert_int_equal(tu_load((const char *[]){path}, 1, &run), 0);
	sim_config base, cfg;
	mr_error err = {0};
	sim_config_from_settings(&run.ev.snap, &base);
	assert_int_equal(sim_parse_conf(conf, &base, &cfg, &err), MR_OK);
	mr_status st = sim_replay(&run.ev.snap, run.ev.snap.devices[0].id, &cfg, limit, r, &err);
	if (st)
		print_error("%s: %s\n", sample, err.msg);
	assert_int_equal(st, MR_OK);
	rp_free(&run);
}

/* Issue 8's acceptance: the recorded settings replayed give PyTorch's own peaks, to the
 * byte, and the replay follows the recording. */
static void check_recorded_peaks(const char *const *samples, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		sim_result r;
		replay_sample(samples[i], "recorded", 0, &r);
		long long want_alloc =
		    tu_corpus_int(samples[i], "memory_stats.json", "allocated_bytes.all.peak");
		long long want_res =
		    tu_corpus_int(samples[i], "memory_stats.json", "reserved_bytes.all.peak");
		if ((long long)r.peak_allocated != want_alloc ||
		    (long long)r.peak_reserved != want_res || !r.matches_recording) {
			print_error(
			    "%s: peak allocated %llu (stats %lld), reserved %llu (stats %lld), "
			    "matches %d: %s %s %s\n",
			    samples[i], (unsigned long long)r.peak_allocated, want_alloc,
			    (unsigned long long)r.peak_reserved, want_res, r.matches_recording,
			    r.first_divergence.what, r.first_divergence.expected,
			    r.first_divergence.got);
			fail();
		}
		assert_int_equal(r.final_reserved, tu_corpus_int(samples[i], "memory_stats.json",
		                                                 "reserved_bytes.all.current"));
		assert_int_equal(r.final_allocated, tu_corpus_int(samples[i], "memory_stats.json",
		                                                  "allocated_bytes.all.current"));
		assert_int_equal(
		    r.segments_allocated,
		    tu_corpus_int(samples[i], "memory_stats.json", "num_device_alloc"));
		sim_result_free(&r);
	}
}

static void test_corpus_recorded_peaks(void **state)
{
	(void)state;
	/* healthy runs of both recorders without a memory cap, the ladders' recorded runs too */
	const char *samples[] = {"mlp_healthy",       "leak_val_graph",     "lbfgs_closure",
	                         "lightning_healthy", "ddp_one_rank",       "train_leak",
	                         "gpt8_s256_8g_b4",   "llama_s1024_16g_b2", "resnet50_10g_b16"};
	check_recorded_peaks(samples, sizeof samples / sizeof *samples);
}

static void test_corpus_recorded_peaks_shared(void **state)
{
	(void)state;
	const char *samples[] = {"gpt_varlen", "resnet_amp"};
	check_recorded_peaks(samples, sizeof samples / sizeof *samples);
}

/* gpt_varlen replayed with expandable segments against the same run measured with them. */
static void test_corpus_expandable_prediction(void **state)
{
	(void)state;
	sim_result r;
	replay_sample("gpt_varlen", "expandable_segments:True", 0, &r);
	long long twin =
	    tu_corpus_int("gpt_varlen_expandable", "memory_stats.json", "reserved_bytes.all.peak");
	double rel = fabs((double)r.peak_reserved - (double)twin) / (double)twin;
	if (rel > 0.05) {
		print_error("predicted %llu, measured %lld\n", (unsigned long long)r.peak_reserved,
		            twin);
		fail();
	}
	assert_false(r.first_oom.present);
	sim_result_free(&r);
}

/* oom_fragmentation under its 4 GiB: the recorded settings OOM where the run did (with the
 * numbers of its OOM message); expandable segments and max_split_size_mb:100 do not, like
 * the twin runs. */
static void test_corpus_oom_fragmentation(void **state)
{
	(void)state;
	sim_result r;
	replay_sample("oom_fragmentation", "recorded", 4 * GiB, &r);
	assert_true(r.first_oom.present);
	assert_true(r.matches_recording);
	char path[1024];
	size_t len;
	char *facts =
	    (char *)tu_read(tu_sample("oom_fragmentation", "facts.json", path, sizeof path), &len);
	assert_non_null(facts);
	long long ask, holes, largest;
	assert_true(tu_json_int(facts, "ask_bytes", &ask));
	assert_true(tu_json_int(facts, "holes_bytes", &holes));
	assert_true(tu_json_int(facts, "largest_hole", &largest));
	free(facts);
	assert_int_equal(r.first_oom.requested_bytes, ask);
	assert_int_equal(r.first_oom.free_cached_bytes, holes);
	assert_int_equal(r.first_oom.largest_free_bytes, largest);
	assert_int_equal(
	    r.first_oom.reserved_bytes,
	    tu_corpus_int("oom_fragmentation", "memory_stats.json", "reserved_bytes.all.current"));
	sim_result_free(&r);

	replay_sample("oom_fragmentation", "expandable_segments:True", 4 * GiB, &r);
	assert_false(r.first_oom.present);
	/* the twin run: same final reserved and allocated, as many maps and unmaps */
	assert_int_equal(r.final_reserved,
	                 tu_corpus_int("oom_fragmentation_expandable", "memory_stats.json",
	                               "reserved_bytes.all.current"));
	assert_int_equal(r.final_allocated,
	                 tu_corpus_int("oom_fragmentation_expandable", "memory_stats.json",
	                               "allocated_bytes.all.current"));
	assert_int_equal(
	    r.segments_allocated,
	    tu_corpus_int("oom_fragmentation_expandable", "memory_stats.json", "num_device_alloc"));
	assert_int_equal(
	    r.segments_released,
	    tu_corpus_int("oom_fragmentation_expandable", "memory_stats.json", "num_device_free"));
	sim_result_free(&r);

	replay_sample("oom_fragmentation", "max_split_size_mb:100", 4 * GiB, &r);
	assert_false(r.first_oom.present);
	sim_result_free(&r);
}

/* The memory cap a sample ran under: "N GiB allowed" in its OOM message (facts.json), else
 * facts.json "cap_bytes" (tools/record_runs.py's budget), else the 4 GiB of the twins of
 * oom_fragmentation (corpus README); 0: none. */
static uint64_t sample_limit(const char *sample)
{
	char path[1024];
	size_t len;
	long long cap = 0;
	char *facts = (char *)tu_read(tu_sample(sample, "facts.json", path, sizeof path), &len);
	assert_non_null(facts);
	uint64_t limit = 0;
	const char *at = strstr(facts, " GiB allowed");
	if (at) {
		const char *p = at;
		while (p > facts && (p[-1] == '.' || (p[-1] >= '0' && p[-1] <= '9')))
			p--;
		limit = (uint64_t)(strtod(p, NULL) * (double)GiB);
	} else if (tu_json_int(facts, "cap_bytes", &cap)) {
		limit = (uint64_t)cap;
	} else if (strncmp(sample, "oom_fragmentation", 17) == 0) {
		limit = 4 * GiB;
	}
	free(facts);
	return limit;
}

/* Each recording replayed under its own settings and memory cap follows the recording to the
 * end, with PyTorch's peaks (for OOM runs too: the peaks do not change after the OOM) and, where
 * it ran out of memory, an OOM. */
static void check_validate(const char *const *samples, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char path[1024];
		int oom =
		    strstr(tu_snapshot(samples[i], path, sizeof path), "oom_snapshot") != NULL;
		sim_result r;
		replay_sample(samples[i], "recorded", sample_limit(samples[i]), &r);
		if (!r.matches_recording)
			fail_msg("%s: diverged at %zu: %s: expected %s, got %s", samples[i],
			         r.first_divergence.event_index, r.first_divergence.what,
			         r.first_divergence.expected, r.first_divergence.got);
		assert_int_equal(r.peak_reserved, tu_corpus_int(samples[i], "memory_stats.json",
		                                                "reserved_bytes.all.peak"));
		assert_int_equal(r.peak_allocated, tu_corpus_int(samples[i], "memory_stats.json",
		                                                 "allocated_bytes.all.peak"));
		if (r.first_oom.present != oom)
			fail_msg("%s: the replay %s out of memory", samples[i],
			         r.first_oom.present ? "ran" : "did not run");
		sim_result_free(&r);
	}
}

/* Every recording of tests/corpus with a complete trace, but other_process (the device ran out,
 * not a cap) and those test_corpus_recorded_peaks replays. */
static void test_corpus_all_validate(void **state)
{
	(void)state;
	const char *samples[] = {"cuda_graph",
	                         "leak_val_fixed",
	                         "multi_stream",
	                         "oom_fragmentation_expandable",
	                         "oom_fragmentation_maxsplit",
	                         "stacks_all",
	                         "state_only",
	                         "oom_capacity",
	                         "oom_capacity_params",
	                         "hf_gpt2_oom",
	                         "oom_loss_logits",
	                         "fsdp_oom",
	                         "lightning_oom",
	                         "hf_llama_oom",
	                         "hf_trainer_oom",
	                         "compile_oom",
	                         "ckpt_on_oom",
	                         "infer_mode_oom",
	                         "eval_no_grad_missing_oom",
	                         "retries_survived",
	                         "t5_accum_oom_l4",
	                         "llama_infer_s1024_4g_b4"};
	check_validate(samples, sizeof samples / sizeof *samples);
}

static void test_corpus_all_validate_shared(void **state)
{
	(void)state;
	const char *samples[] = {"gpt_varlen_expandable", "hf_gpt2_b4", "hf_gpt2_empty_cache"};
	check_validate(samples, sizeof samples / sizeof *samples);
}

/* The 1 M-event trace whose ring buffer wrapped: replayed from a reconstructed start, in
 * under a second. */
static void test_corpus_large_trace(void **state)
{
	(void)state;
	rp_report run;
	char path[1024];
	tu_snapshot("gpt_large_trace", path, sizeof path);
	assert_int_equal(tu_load((const char *[]){path}, 1, &run), 0);
	sim_config cfg;
	sim_result r;
	mr_error err = {0};
	sim_config_from_settings(&run.ev.snap, &cfg);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(sim_replay(&run.ev.snap, run.ev.snap.devices[0].id, &cfg, 0, &r, &err),
	                 MR_OK);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	assert_true(r.events >= 1000000);
	assert_true(r.truncated);
	assert_true(r.approximate);
	assert_true(r.peak_reserved <= (uint64_t)tu_corpus_int("gpt_large_trace",
	                                                       "memory_stats.json",
	                                                       "reserved_bytes.all.peak"));
	assert_true(r.peak_allocated <= (uint64_t)tu_corpus_int("gpt_large_trace",
	                                                        "memory_stats.json",
	                                                        "allocated_bytes.all.peak"));
#if !defined(__SANITIZE_ADDRESS__) && !defined(__OPTIMIZE_SIZE__)
#ifdef __OPTIMIZE__
	if (secs > 1.0) {
		print_error("1 M events replayed in %.2f s\n", secs);
		fail();
	}
#endif
#endif
	(void)secs;
	sim_result_free(&r);
	rp_free(&run);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_conf_parse),
	    cmocka_unit_test(test_conf_format_roundtrip),
	    cmocka_unit_test(test_round_size),
	    cmocka_unit_test(test_block_and_segment_sizes),
	    cmocka_unit_test(test_should_split),
	    cmocka_unit_test(test_best_fit_and_merge),
	    cmocka_unit_test(test_max_split_size),
	    cmocka_unit_test(test_expandable_pages),
	    cmocka_unit_test(test_pending_free),
	    cmocka_unit_test(test_limit_oom),
	    cmocka_unit_test(test_truncated_start),
	    cmocka_unit_test(test_corpus_recorded_peaks),
	    cmocka_unit_test(test_corpus_recorded_peaks_shared),
	    cmocka_unit_test(test_corpus_expandable_prediction),
	    cmocka_unit_test(test_corpus_oom_fragmentation),
	    cmocka_unit_test(test_corpus_all_validate),
	    cmocka_unit_test(test_corpus_all_validate_shared),
	    cmocka_unit_test(test_corpus_large_trace),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
