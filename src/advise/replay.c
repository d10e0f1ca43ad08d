/* replay.c: the recorded trace replayed through the allocator model (sim/): under the recorded
 * settings before the diagnosis, under each recommended setting after it. */
#include "advise/replay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/mem.h"
#include "base/pool.h"
#include "base/units.h"
#include "decode/oom_message.h"
#include "sim/config.h"
#include "sim/replay.h"

typedef struct {
	const md_snapshot *s;
	int32_t device;
	sim_config cfg;
	uint64_t limit;
	sim_result res;
	mr_error err;
	mr_status st;
} replay_job;

static void replay_one(replay_job *j)
{
	j->st = sim_replay(j->s, j->device, &j->cfg, j->limit, &j->res, &j->err);
}

static void replay_task(void *ctx, void *worker, size_t i)
{
	(void)worker;
	replay_one(&((replay_job *)ctx)[i]);
}

/* Runs the jobs in parallel, one thread each. */
static void run_jobs(replay_job *jobs, size_t n)
{
	mr_pool_run(n, n, replay_task, jobs, NULL, NULL);
}

static int is_allocator_rec(const ad_recommendation *r)
{
	return strcmp(r->id, "expandable_segments") == 0 ||
	       strcmp(r->id, "max_split_size_mb") == 0 ||
	       strcmp(r->id, "remove_max_split_size_mb") == 0;
}

/* The cap for replays of a device's trace: the log's "allowed" figure (or total capacity),
 * else for an OOM under a memory fraction the reserved bytes at the failure, the tightest cap
 * the recording allows (*guessed is then set); else none. */
static uint64_t replay_limit(const ld_evidence *ev, const an_device *dv, int *guessed)
{
	const ev_text *t = &ev->text;
	*guessed = 0;
	/* The device itself ran out (memory outside PyTorch, or no cap): this process could have
	 * had what it reserved plus what the device still had free at the OOM, whatever a log
	 * says of the card. */
	if (dv->oom.present && dv->oom.device_free < dv->oom.alloc_size)
		return dv->pool[AN_POOL_ALL].reserved + dv->oom.device_free;
	if (t->oom_count) {
		uint64_t l = ev_oom_limit(&t->ooms[t->oom_count - 1]);
		if (l)
			return l;
	}
	if (dv->oom.present && dv->oom.device_free > dv->oom.alloc_size) {
		*guessed = 1;
		return dv->pool[AN_POOL_ALL].reserved;
	}
	/* OOMs the run survived met a cap too: the highest the trace reserved, the level they
	 * failed at (uncapped, the replay would grant what the run was refused) */
	if (dv->oom_recovered)
		return dv->peak_reserved;
	return 0;
}

static void fill_replay(ad_replay *rp, const char *conf, const sim_result *r, uint64_t limit)
{
	snprintf(rp->conf, sizeof rp->conf, "%s", conf);
	rp->matches = r->matches_recording;
	rp->oom = r->oom_count > 0;
	rp->limit = limit;
	rp->peak_reserved = r->peak_reserved;
	rp->peak_allocated = r->peak_allocated;
	rp->peak_allocated_event = r->peak_allocated_event;
	rp->peak_reserved_event = r->peak_reserved_event;
	rp->divergence_event = r->first_divergence.event_index;
	rp->truncated = r->truncated;
	snprintf(rp->divergence, sizeof rp->divergence, "%s", r->first_divergence.what);
}

mr_status ad_replay_recorded(const ld_evidence *ev, const an_result *an, ad_replay **recorded,
                             mr_error *err)
{
	mr_status st = MR_OK;
	*recorded = NULL;
	if (!ev->has_snapshot || !an->device_count)
		return MR_OK;
	ad_replay *done = mr_alloc_array(an->device_count, sizeof *done);
	if (!done)
		return mr_oom(err);
	*recorded = done;
	sim_config base;
	sim_config_from_settings(&ev->snap, &base);
	for (size_t d0 = 0; d0 < an->device_count && !st; d0 += 4) {
		replay_job jobs[4];
		size_t idx[4], n = 0;
		memset(jobs, 0, sizeof jobs);
		int guessed[4] = {0};
		for (size_t d = d0; d < an->device_count && d < d0 + 4; d++) {
			const an_device *dv = &an->devices[d];
			if (!dv->has_trace)
				continue;
			uint64_t limit = replay_limit(ev, dv, &guessed[n]);
			jobs[n] = (replay_job){&ev->snap, dv->device, base, limit, {0}, {0}, MR_OK};
			idx[n++] = d;
		}
		run_jobs(jobs, n);
		/* A guessed cap (the reserved bytes at the OOM) is the lowest the recording allows;
		 * when the replay parts from the recording under it, try the highest (just short of
		 * reserved plus the failed segment), the other cap the recording allows. */
		for (size_t i = 0; i < n; i++) {
			const an_device *dv = &an->devices[idx[i]];
			if (!guessed[i] || jobs[i].st || jobs[i].res.matches_recording)
				continue;
			sim_result_free(&jobs[i].res);
			jobs[i].limit = dv->pool[AN_POOL_ALL].reserved + dv->oom.alloc_size - 1;
			replay_one(&jobs[i]);
		}
		for (size_t i = 0; i < n; i++) {
			if (jobs[i].st && !st)
				st = mr_fail(err, jobs[i].st, "replay: %s", jobs[i].err.msg);
			if (!jobs[i].st)
				fill_replay(&done[idx[i]], "recorded", &jobs[i].res, jobs[i].limit);
			sim_result_free(&jobs[i].res);
		}
	}
	return st;
}

void ad_replay_apply(an_result *an, const ad_replay *recorded)
{
	for (size_t d = 0; recorded && d < an->device_count; d++) {
		const ad_replay *rp = &recorded[d];
		an_device *dv = &an->devices[d];
		/* A replay that reproduced the trace knows the block sizes the backward walk could
		 * only estimate: of a truncated trace, from the state its window starts in, so
		 * exact within the window. */
		if (!rp->conf[0] || !rp->matches)
			continue;
		dv->peak_allocated = rp->peak_allocated;
		dv->peak_reserved = rp->peak_reserved;
		dv->peak_allocated_event = rp->peak_allocated_event;
		dv->peak_reserved_event = rp->peak_reserved_event;
		dv->peak_exact = 1;
		dv->peak_exact_limit = rp->limit;
	}
}

/* The replays that test the recommended allocator settings: the recorded settings first,
 * unless `done` has them already; rec_of[j] is the recommendation job j tests (SIZE_MAX: the
 * recorded settings). Returns how many jobs there are. */
static size_t settings_jobs(const ld_evidence *ev, const an_device *dv, const ad_advice *a,
                            const ad_replay *done, uint64_t limit, replay_job jobs[4],
                            size_t rec_of[4])
{
	size_t n = 0;
	sim_config base;
	sim_config_from_settings(&ev->snap, &base);
	memset(jobs, 0, 4 * sizeof *jobs);
	if (!done) {
		jobs[n] = (replay_job){&ev->snap, dv->device, base, limit, {0}, {0}, MR_OK};
		rec_of[n++] = SIZE_MAX;
	}
	for (size_t i = 0; i < a->rec_count && n < 4; i++) {
		const ad_recommendation *r = &a->recs[i];
		const char *eq = r->change ? strchr(r->change, '=') : NULL;
		if (!is_allocator_rec(r) || !eq)
			continue;
		/* the change is a complete PYTORCH_CUDA_ALLOC_CONF: what it does not name is
		 * PyTorch's default */
		mr_error perr = {0};
		if (sim_parse_conf(eq + 1, NULL, &jobs[n].cfg, &perr))
			continue;
		jobs[n].s = &ev->snap;
		jobs[n].device = dv->device;
		jobs[n].limit = limit;
		rec_of[n++] = i;
	}
	return n;
}

/* Whether a replay from a truncated trace's window cannot judge an allocator setting: the
 * window starts with the layout the recorded settings made before it, their fragmentation too,
 * so at a fragmentation OOM (that layout, read from the snapshot, is the cause) a replay that
 * starts from it shows nothing of what the setting does from the start. An OOM of capacity
 * fails whatever the layout; a run without one keeps withdrawing what costs it memory (less
 * advice where the window cannot tell). */
static int window_no_test(const ad_advice *a)
{
	return a->oom.present && a->oom.cause == AD_CAUSE_FRAGMENTATION;
}

/* Each setting's replay, quoted in the reason of the recommendation it tests; against a run that
 * ran out of memory the replay ends where the trace ends, and says so. With a cap the
 * snapshot does not record (guessed), the recording allows any from what its own replay
 * reserved: a setting that reserves more than that fitted only under the cap assumed. Where
 * the OOM was not fragmentation, its rule judged the setting at the OOM ("would not save this
 * run"), which a replay getting past the OOM does not contradict: the trace ends there. */
static mr_status quote_replays(ad_advice *a, const size_t rec_at[4], int guessed, mr_error *err)
{
	const ad_replay *recorded = &a->replays[0];
	for (size_t i = 1; i < a->replay_count; i++) {
		const ad_replay *rp = &a->replays[i];
		ad_recommendation *rec = &a->recs[rec_at[i]];
		char quote[448], b1[32], b2[32], b3[32];
		int unsure = guessed && rp->peak_reserved > recorded->peak_reserved;
		mr_format_bytes(b1, sizeof b1, rp->peak_reserved);
		mr_format_bytes(b2, sizeof b2, recorded->peak_reserved);
		mr_format_bytes(b3, sizeof b3, rp->limit);
		if (rp->truncated && window_no_test(a) &&
		    (rp->oom || rp->peak_reserved > recorded->peak_reserved))
			/* from the recorded settings' layout: no test of another */
			snprintf(
			    quote, sizeof quote,
			    " Replayed with %s from where the trace's window begins, so from the "
			    "layout the recorded settings had made by then: %s, peak reserved %s "
			    "(recorded: %s%s), which cannot show what the setting does to a run "
			    "from its start.",
			    rp->conf, rp->oom ? "still out of memory" : "no OOM", b1,
			    recorded->oom ? "out of memory at " : "", b2);
		else if (recorded->oom && !rp->oom && !unsure &&
		         a->oom.cause != AD_CAUSE_FRAGMENTATION)
			/* the rule judged the OOM's moment; the replay ends at it */
			snprintf(
			    quote, sizeof quote,
			    " Replayed from the start with %s (a layout of its own by then), the "
			    "request that failed would have fit (peak reserved %s against %s "
			    "recorded), but the replay ends there: whether the rest of the run "
			    "fits is not in the trace.",
			    rp->conf, b1, b2);
		else if (!rp->oom && unsure)
			snprintf(quote, sizeof quote,
			         " Replayed with %s: no OOM under the cap these replays assume "
			         "(%s), peak reserved %s (recorded: %s%s); but the snapshot does "
			         "not record the cap, and the recording allows one as low as %s, "
			         "below that peak: whether it fits is not known.",
			         rp->conf, b3, b1, recorded->oom ? "out of memory at " : "", b2,
			         b2);
		else if (recorded->oom && !rp->oom)
			/* the request that failed fits; what the run did after it is not recorded
			 */
			snprintf(
			    quote, sizeof quote,
			    " Replayed with %s: no OOM up to where the trace ends, peak reserved "
			    "%s (recorded: out of memory at %s); whether the rest of the run "
			    "fits is not in the trace.",
			    rp->conf, b1, b2);
		else
			snprintf(quote, sizeof quote,
			         " Replayed with %s: %s, peak reserved %s (recorded: %s%s).",
			         rp->conf, rp->oom ? "still out of memory" : "no OOM", b1,
			         recorded->oom ? "out of memory at " : "", b2);
		if (ad_append_reason(rec, quote))
			return mr_oom(err);
	}
	return MR_OK;
}

/* A setting the replay shows to fail or to need more memory is not advice: it becomes a
 * finding instead. Against a run that ran out of memory, surviving is the test; against one
 * that did not, needing more memory is worse. A truncated trace's replay is no such test
 * where the layout matters (window_no_test). */
static mr_status drop_worse(ad_advice *a, const size_t rec_at[4], mr_error *err)
{
	const ad_replay *recorded = &a->replays[0];
	int no_test = window_no_test(a);
	for (size_t i = a->replay_count; i-- > 1;) {
		const ad_replay *rp = &a->replays[i];
		if ((rp->truncated && no_test) ||
		    (!rp->oom && (recorded->oom || rp->peak_reserved <= recorded->peak_reserved)))
			continue;
		char b1[32], b2[32];
		mr_format_bytes(b1, sizeof b1, rp->peak_reserved);
		mr_format_bytes(b2, sizeof b2, recorded->peak_reserved);
		if (ad_add_findingf(
		        a, "setting_replayed_worse", AD_INFO,
		        "Replayed with %s the run would %s (peak reserved %s against %s "
		        "recorded), so it is not recommended here.",
		        rp->conf, rp->oom ? "still run out of memory" : "need more memory", b1, b2))
			return mr_oom(err);
		ad_remove_rec(a, rec_at[i]);
	}
	for (size_t i = 0; i < a->rec_count; i++)
		a->recs[i].rank = (int)i + 1;
	return MR_OK;
}

/* An OOM whose allocator settings the replays show would not have saved it, with no advice
 * left: what is left is asking for less memory at once (generate(): fewer or shorter
 * sequences, whose KV cache is what grows). */
static mr_status when_nothing_left(ad_advice *a, const an_device *dv, mr_error *err)
{
	if (!a->oom.present || a->rec_count)
		return MR_OK;
	int gen = (dv->run.flags_seen & AN_SF_GENERATE) != 0;
	ad_text t = {0};
	ad_text_printf(&t,
	               "The allocator settings replayed here would not have saved the run (the "
	               "findings say how far each got): what is left is asking for less memory at "
	               "once%s.",
	               gen ? ", and generate()'s KV cache grows with the sequences it runs at once "
	                     "(inputs times beams) and with their length"
	                   : "");
	if (ad_add_rec(a, "reduce_microbatch",
	               gen ? "Generate fewer sequences at once, or shorter ones"
	                   : "Put fewer samples through the model at once",
	               gen ? "model.generate(..., num_beams=k // 2)  # or fewer inputs per call, "
	                     "or fewer max_new_tokens"
	                   : "batch_size //= 2  # in training, accumulate gradients to keep the "
	                     "batch",
	               &t))
		return mr_oom(err);
	a->recs[a->rec_count - 1].rank = (int)a->rec_count;
	return MR_OK;
}

mr_status ad_replay_settings(const ld_evidence *ev, const an_result *an, const ad_replay *recorded,
                             ad_advice *a, mr_error *err)
{
	replay_job jobs[4];
	size_t rec_of[4];
	mr_status st = MR_OK;
	const an_device *dv = NULL;
	for (size_t i = 0; ev->has_snapshot && i < an->device_count && a->device >= 0; i++)
		if (an->devices[i].device == a->device)
			dv = &an->devices[i];
	int wanted = 0;
	for (size_t i = 0; dv && dv->has_trace && i < a->rec_count; i++)
		wanted |= is_allocator_rec(&a->recs[i]) && a->recs[i].change;
	if (!wanted)
		return MR_OK;
	int guessed;
	uint64_t limit = replay_limit(ev, dv, &guessed);
	/* The recorded settings' replay, unless ad_replay_recorded already ran it (perhaps with
	 * the other cap the recording allows). */
	const ad_replay *done = recorded ? &recorded[dv - an->devices] : NULL;
	if (done && !done->conf[0])
		done = NULL;
	if (done)
		limit = done->limit;
	if (guessed)
		snprintf(a->replay_note, sizeof a->replay_note,
		         "The cap is not in the snapshot; the replays use %llu bytes, a cap the "
		         "recording allows (between the reserved memory at the OOM and that plus "
		         "the failed segment).",
		         (unsigned long long)limit);
	size_t n = settings_jobs(ev, dv, a, done, limit, jobs, rec_of);
	run_jobs(jobs, n);
	for (size_t i = 0; i < n && !st; i++)
		if (jobs[i].st)
			st = mr_fail(err, jobs[i].st, "replay: %s", jobs[i].err.msg);
	/* replays[0] is the recorded settings'; rec_at[r] is the recommendation replays[r] tests */
	size_t rec_at[4] = {SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX};
	if (!st && done)
		a->replays[a->replay_count++] = *done;
	for (size_t i = 0; i < n && !st; i++) {
		const char *eq =
		    rec_of[i] != SIZE_MAX ? strchr(a->recs[rec_of[i]].change, '=') : NULL;
		rec_at[a->replay_count] = rec_of[i];
		fill_replay(&a->replays[a->replay_count++], eq ? eq + 1 : "recorded", &jobs[i].res,
		            limit);
	}
	if (!st && !a->replays[0].matches) {
		snprintf(
		    a->replay_note, sizeof a->replay_note,
		    "The replay of the recorded settings parted from the recording at event %zu "
		    "(%s), so no prediction for other settings is shown.",
		    a->replays[0].divergence_event, a->replays[0].divergence);
		a->replay_count = 1;
	} else if (!st && !(st = quote_replays(a, rec_at, guessed, err)) &&
	           !(st = drop_worse(a, rec_at, err))) {
		st = when_nothing_left(a, dv, err);
	}
	for (size_t i = 0; i < n; i++)
		sim_result_free(&jobs[i].res);
	return st;
}
