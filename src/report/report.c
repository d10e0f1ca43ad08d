/* report.c: the pipeline. */
#include "report/report.h"

#include <stdlib.h>
#include <string.h>

#include "advise/replay.h"
#include "advise/rules.h"
#include "base/mem.h"
#include "base/pool.h"

/* Per device, its allocations (what = 0) or, after the replay that settles its peak, its
 * moments (what = 1): the devices' are independent, so they are read side by side. */
typedef struct {
	rp_report *r;
	int what;
	mr_status *st;
	mr_error *err;
} per_device;

static void device_task(void *ctx, void *worker, size_t d)
{
	per_device *t = ctx;
	const md_snapshot *s = &t->r->ev.snap;
	const an_result *an = &t->r->an;
	const an_device *dv = &an->devices[d];
	const md_device *md = md_find_device(s, dv->device);
	(void)worker;
	t->st[d] = t->what == 0
	               ? an_allocs_read(s, md, dv->segment_first, dv->segment_count, an->stack_info,
	                                an->frame_kinds, &t->r->allocs[d], &t->err[d])
	               : an_moments_read(s, md, dv, an->frame_kinds, &t->r->allocs[d],
	                                 &t->r->moments[d], &t->err[d]);
}

/* Runs device_task for every device; the first device's failure is returned, as one thread
 * would meet it. */
static mr_status each_device(rp_report *r, int what, mr_error *err)
{
	size_t n = r->an.device_count;
	mr_status st = MR_OK;
	per_device t = {r, what, mr_alloc_array(n ? n : 1, sizeof *t.st),
	                mr_alloc_array(n ? n : 1, sizeof *t.err)};
	if (!t.st || !t.err)
		st = mr_oom(err);
	else
		mr_pool_run(n, n, device_task, &t, NULL, NULL);
	for (size_t d = 0; d < n && !st; d++)
		if ((st = t.st[d]))
			*err = t.err[d];
	free(t.st);
	free(t.err);
	return st;
}

static mr_status read_allocs(rp_report *r, mr_error *err)
{
	size_t n = r->an.device_count;
	r->allocs = mr_alloc_array(n ? n : 1, sizeof *r->allocs);
	return r->allocs ? each_device(r, 0, err) : mr_oom(err);
}

static mr_status read_moments(rp_report *r, mr_error *err)
{
	size_t n = r->an.device_count;
	r->moments = mr_alloc_array(n ? n : 1, sizeof *r->moments);
	return r->moments ? each_device(r, 1, err) : mr_oom(err);
}

/* The moments read beside the replay, settled once it is applied: a device whose peak moved is
 * read again, so the moments are what reading them after the replay gives. */
static mr_status settle_moments(rp_report *r, mr_error *err)
{
	for (size_t d = 0; d < r->an.device_count; d++) {
		const an_device *dv = &r->an.devices[d];
		const md_device *md = md_find_device(&r->ev.snap, dv->device);
		if (an_moments_settle_peak(&r->moments[d], md, dv))
			continue;
		an_moments_free(&r->moments[d]);
		mr_status st = an_moments_read(&r->ev.snap, md, dv, r->an.frame_kinds,
		                               &r->allocs[d], &r->moments[d], err);
		if (st)
			return st;
	}
	return MR_OK;
}

/* The replay of the recorded settings needs only the first half of the analysis
 * (an_analyze_base); the second half, the reading of the allocations and of the moments need
 * not wait for it: they run beside it, the moments with the peak the analysis found, and the
 * replay's exact peaks are applied after (settle_moments). */
typedef struct {
	rp_report *r;
	mr_status st[4]; /* the analysis's second half, the replay, the allocations, the moments */
	mr_error err[4];
} side_by_side;

static void replay_or_rest(void *ctx, void *worker, size_t i)
{
	side_by_side *t = ctx;
	rp_report *r = t->r;
	(void)worker;
	if (i == 0) {
		t->st[1] = ad_replay_recorded(&r->ev, &r->an, &r->recorded, &t->err[1]);
		return;
	}
	t->st[0] = an_analyze_rest(&r->ev.snap, &r->an, &t->err[0]);
	if (!t->st[0])
		t->st[2] = read_allocs(r, &t->err[2]);
	if (!t->st[0] && !t->st[2])
		t->st[3] = read_moments(r, &t->err[3]);
}

static mr_status analyze_and_replay(rp_report *r, mr_error *err)
{
	side_by_side t = {r, {MR_OK, MR_OK, MR_OK, MR_OK}, {{0}, {0}, {0}, {0}}};
	mr_status st = an_analyze_base(&r->ev.snap, 0, &r->an, err);
	if (st)
		return st;
	mr_pool_run(2, 2, replay_or_rest, &t, NULL, NULL);
	for (int i = 0; i < 4; i++)
		if (t.st[i]) {
			*err = t.err[i];
			return t.st[i];
		}
	ad_replay_apply(&r->an, r->recorded);
	return settle_moments(r, err);
}

static size_t device_index(const rp_report *r, const an_device *dv)
{
	size_t i = (size_t)(dv - r->an.devices);
	return dv >= r->an.devices && i < r->an.device_count ? i : SIZE_MAX;
}

const an_moments *rp_moments(const rp_report *r, const an_device *dv)
{
	size_t i = device_index(r, dv);
	return r->moments && i != SIZE_MAX ? &r->moments[i] : NULL;
}

size_t rp_verdict_moment(const rp_report *r, const an_device *dv)
{
	const an_moments *m = rp_moments(r, dv);
	if (!m)
		return AN_NO_MOMENT;
	ad_moment want = r->advice.verdict_moment;
	size_t k = want == AD_MOMENT_OOM ? m->oom : want == AD_MOMENT_PEAK ? m->peak : AN_NO_MOMENT;
	return k != AN_NO_MOMENT ? k : m->snapshot;
}

const an_allocs *rp_allocs(const rp_report *r, const an_device *dv)
{
	size_t i = device_index(r, dv);
	return r->allocs && i != SIZE_MAX ? &r->allocs[i] : NULL;
}

mr_status rp_build(rp_report *out, ld_evidence *ev, const rp_params *params, mr_error *err)
{
	mr_status st = MR_OK;
	memset(out, 0, sizeof *out);
	out->ev = *ev; /* the analysis points into out->ev.snap: it is moved first */
	memset(ev, 0, sizeof *ev);
	if (out->ev.has_snapshot && (st = analyze_and_replay(out, err)))
		goto done;
	if ((st = ad_advise(&out->ev, &out->an, out->moments, params->device, params->budget,
	                    &out->advice, err)))
		goto done;
	st = ad_replay_settings(&out->ev, &out->an, out->recorded, &out->advice, err);
done:
	if (st)
		rp_free(out);
	return st;
}

void rp_free(rp_report *r)
{
	ad_free(&r->advice);
	free(r->recorded);
	for (size_t i = 0; r->allocs && i < r->an.device_count; i++)
		an_allocs_free(&r->allocs[i]);
	for (size_t i = 0; r->moments && i < r->an.device_count; i++)
		an_moments_free(&r->moments[i]);
	free(r->allocs);
	free(r->moments);
	an_free(&r->an);
	ld_free(&r->ev);
	memset(r, 0, sizeof *r);
}
