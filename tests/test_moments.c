/* test_moments.c: the state at the marked moments of real runs (analyze/moments.h) and the
 * sites that point at the user's code (analyze/sites.h).
 *
 * The state at the peak is rebuilt backwards from the snapshot; PyTorch's memory_stats.json
 * holds the peak of allocated bytes for the same run, so the rebuilt layout can be checked
 * against PyTorch's own number wherever the replay reproduced the trace; the overhead at the
 * peak against PyTorch's peaks of reserved and allocated bytes. */
#include <dirent.h>

#include "testutil.h"

#include "analyze/moments.h"
#include "analyze/sites.h"
#include "report/report.h"

/* The snapshot of a corpus sample (NULL when the sample is not there). */
static const char *sample_path(const char *name, char *buf, size_t n)
{
	snprintf(buf, n, "%s/corpus/%s/snapshot.pickle", tu_shared(), name);
	if (tu_exists(buf))
		return buf;
	snprintf(buf, n, "%s/corpus/%s/oom_snapshot.pickle", tu_shared(), name);
	return tu_exists(buf) ? buf : NULL;
}

static int rebuilt_peaks, overheads;

/* The overhead at the peak (devices[].overhead_at_peak: peak reserved minus peak allocated, as
 * a share of peak reserved) is PyTorch's own figure, from memory_stats.json's peaks. */
static void check_overhead(const char *name, const an_device *dv)
{
	double reserved =
	    (double)tu_corpus_int(name, "memory_stats.json", "reserved_bytes.all.peak");
	double allocated =
	    (double)tu_corpus_int(name, "memory_stats.json", "allocated_bytes.all.peak");
	double want = 1.0 - allocated / reserved, got = an_overhead_at_peak(dv);
	if (got < want - 5e-5 || got > want + 5e-5) {
		print_error("%s: overhead at the peak %.5f, memory_stats %.5f\n", name, got, want);
		fail();
	}
	overheads++;
}

/* One sample: the snapshot moment is the snapshot, the rebuilt peak holds PyTorch's peak. */
static void check_moments(const char *name)
{
	char path[2048];
	if (!sample_path(name, path, sizeof path))
		return;
	rp_report run;
	assert_int_equal(tu_load((const char *[]){path}, 1, &run), 0);
	for (size_t d = 0; d < run.an.device_count; d++) {
		const an_device *dv = &run.an.devices[d];
		const an_moments *m = rp_moments(&run, dv);
		assert_non_null(m);
		assert_true(m->snapshot != AN_NO_MOMENT);
		const an_moment *snap = &m->moments[m->snapshot];
		const an_pool *all = &dv->pool[AN_POOL_ALL];
		assert_true(snap->from_snapshot);
		assert_int_equal(snap->totals.reserved, all->reserved);
		assert_int_equal(snap->totals.allocated, all->allocated);
		assert_int_equal(snap->totals.free_cached, all->free_cached);
		assert_int_equal(snap->totals.largest_free, all->largest_free);
		if (!dv->has_trace) {
			assert_int_equal(m->moment_count, 1);
			continue;
		}
		assert_true(m->peak != AN_NO_MOMENT);
		assert_int_equal(m->moments[m->peak].event, dv->peak_allocated_event);
		if (run.an.device_count == 1)
			check_overhead(name, dv);
		/* The layout rebuilt at the peak holds what the exact replay found (in the default
		 * pools: expandable segments round otherwise), which is PyTorch's own peak. */
		if (dv->peak_exact && !dv->expandable && !dv->truncated) {
			long long want =
			    tu_corpus_int(name, "memory_stats.json", "allocated_bytes.all.peak");
			if ((long long)m->moments[m->peak].totals.allocated != want) {
				print_error(
				    "%s: allocated at the rebuilt peak %llu, memory_stats %lld\n",
				    name, (unsigned long long)m->moments[m->peak].totals.allocated,
				    want);
				fail();
			}
			rebuilt_peaks++;
		}
		/* one moment per marked event, in event order */
		for (size_t k = 1; k < m->moment_count; k++)
			assert_true(m->moments[k - 1].event < m->moments[k].event);
	}
	rp_free(&run);
}

static void test_corpus_moments(void **state)
{
	(void)state;
	char dir[2048];
	snprintf(dir, sizeof dir, "%s/corpus", tu_shared());
	DIR *d = opendir(dir);
	if (!d)
		skip();
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			check_moments(e->d_name);
	closedir(d);
	assert_true(rebuilt_peaks >= 15);
	assert_true(overheads >= 20);
}

static const char *file_base(const md_snapshot *s, const md_frame *f)
{
	const char *file = md_str(s, f->filename), *slash = strrchr(file, '/');
	return slash ? slash + 1 : file;
}

/* The acceptance: at the peak of gpt_varlen the top site is a line of train.py, the
 * autograd engine's backward work is under the backward() call, nothing is "no stack". */
static void test_gpt_varlen_peak_sites(void **state)
{
	(void)state;
	char path[2048];
	if (!sample_path("gpt_varlen", path, sizeof path))
		skip();
	rp_report run;
	assert_int_equal(tu_load((const char *[]){path}, 1, &run), 0);
	const an_moments *m = rp_moments(&run, &run.an.devices[0]);
	assert_true(m->peak != AN_NO_MOMENT);
	const an_moment *mo = &m->moments[m->peak];
	const md_snapshot *s = &run.ev.snap;
	assert_true(mo->site_count >= 5);
	const an_usite *top = &mo->sites[0];
	assert_non_null(top->user);
	assert_string_equal(file_base(s, top->user), "train.py");
	assert_true(top->user->line > 0 && md_str(s, top->user->name)[0]);
	uint64_t total = 0, autograd = 0;
	for (size_t i = 0; i < mo->site_count; i++) {
		assert_false(an_usite_unknown(&mo->sites[i]));
		assert_non_null(mo->sites[i].user);
		assert_string_equal(file_base(s, mo->sites[i].user), "train.py");
		total += mo->sites[i].bytes;
		if (mo->sites[i].autograd) {
			autograd += mo->sites[i].bytes;
			/* under loss.backward(): the call's stack holds autograd's backward */
			assert_true(mo->sites[i].call != MD_NO_STACK);
		}
	}
	assert_int_equal(total, mo->totals.active);
	/* the issue measured 30% of the peak in frame-less backward allocations */
	assert_true(autograd * 4 > total);
	rp_free(&run);
}

/* The verdict speaks of the OOM; its moment is the last OOM's, which is the snapshot's here
 * (the observer dumped it at the failure). */
static void test_oom_moment(void **state)
{
	(void)state;
	char path[2048];
	if (!sample_path("oom_capacity", path, sizeof path))
		skip();
	rp_report run;
	assert_int_equal(tu_load((const char *[]){path}, 1, &run), 0);
	const an_device *dv = &run.an.devices[0];
	const an_moments *m = rp_moments(&run, dv);
	assert_int_equal(run.advice.verdict_moment, AD_MOMENT_OOM);
	assert_true(m->oom != AN_NO_MOMENT);
	assert_int_equal(rp_verdict_moment(&run, dv), m->oom);
	assert_int_equal(m->moments[m->oom].event, dv->oom.event);
	assert_true(m->moments[m->peak].totals.allocated >= m->moments[m->oom].totals.allocated);
	rp_free(&run);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_corpus_moments),
	    cmocka_unit_test(test_gpt_varlen_peak_sites),
	    cmocka_unit_test(test_oom_moment),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
