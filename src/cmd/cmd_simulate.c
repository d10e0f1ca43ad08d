/* cmd_simulate.c: `memreport simulate SNAPSHOT --alloc-conf CONF [--limit SIZE] [--device N]
 * [--format json|text] [-o FILE]`: replays the snapshot's trace under other allocator settings.
 *
 * The recorded settings are replayed first: that replay is the validation
 * (replay_matches_recording, first_divergence). When CONF changes anything, a second replay
 * gives the prediction. CONF is applied on top of the recorded settings; "" or "recorded"
 * replays them unchanged. */
#include "cmd/cmd_simulate.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/escape.h"
#include "base/mem.h"
#include "base/output.h"
#include "base/pool.h"
#include "base/units.h"
#include "base/version.h"
#include "cmd/options.h"
#include "cmd/say.h"
#include "load/load.h"
#include "render/render_text.h"
#include "sim/config.h"
#include "sim/replay.h"
#include "sim/result_json.h"

static const char sim_usage[] =
    "usage: memreport simulate SNAPSHOT --alloc-conf CONF [--limit SIZE] [--device N]\n"
    "                          [--format json|text] [-o FILE]\n"
    "\n"
    "Replays the snapshot's allocation trace through a model of PyTorch's caching\n"
    "allocator. CONF uses PYTORCH_CUDA_ALLOC_CONF syntax (expandable_segments:True,\n"
    "max_split_size_mb:128, roundup_power2_divisions:[256:1,>:4],\n"
    "garbage_collection_threshold:0.6, ...) and changes only the keys it names;\n"
    "\"recorded\" replays the recorded settings. --limit SIZE (4GiB, 512MiB, bytes)\n"
    "caps reserved memory like torch.cuda.set_per_process_memory_fraction. Output:\n"
    "JSON (schema memreport-sim/1, default) or text, to standard output unless\n"
    "-o FILE.\n";

typedef struct {
	const char *snapshot, *conf, *out_path;
	uint64_t limit;
	int device; /* -1: the first device with a trace */
	int text;
} sim_args;

/* "memreport: [PATH: ]<message>"; returns the exit status of bad usage. */
static int arg_error(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int arg_error(const char *path, const char *fmt, ...)
{
	char msg[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cmd_say("%s%s%s", path ? path : "", path ? ": " : "", msg);
	return MR_EINPUT;
}

/* Reads the command line into *a. Returns 0, -1 after --help, or the exit status of a mistake
 * (reported with the snapshot's name when it is known). */
static int parse_args(int argc, char **argv, sim_args *a)
{
	cmd_options opt;
	mr_error err = {0};
	memset(a, 0, sizeof *a);
	mr_status st = cmd_parse(CMD_SIMULATE, argc, argv, &opt, &err);
	int rc = 0;
	a->snapshot = opt.arg_count ? opt.args[0] : NULL;
	a->conf = opt.alloc_conf ? opt.alloc_conf : "recorded";
	a->out_path = opt.output ? opt.output : "-";
	a->limit = opt.limit;
	a->device = opt.device;
	a->text = opt.format == CMD_TEXT;
	if (st == MR_EFAIL) {
		cmd_say("%s", err.msg);
		rc = MR_EFAIL;
	} else if (opt.help) {
		fputs(sim_usage, stdout);
		rc = -1;
	} else if (st) {
		rc = arg_error(a->snapshot, "simulate: %s", err.msg);
	} else if (opt.arg_count > 1) {
		rc = arg_error(a->snapshot, "simulate: one snapshot at a time, got also '%s'",
		               opt.args[1]);
	} else if (!a->snapshot) {
		rc = arg_error(NULL, "%s",
		               "simulate: no snapshot given (see memreport simulate --help)");
	}
	cmd_options_free(&opt);
	return rc;
}

/* What a reader must know to trust (or not) the numbers. */
static void collect_notes(const sim_result *rec, const sim_result *pred, const char **notes,
                          size_t *count)
{
	*count = 0;
	if (!rec->matches_recording)
		notes[(*count)++] =
		    "the recorded settings, replayed, did not reproduce the recording "
		    "(see first_divergence): the prediction is an estimate";
	if (rec->recorded_ooms && !rec->limit)
		notes[(*count)++] =
		    "the recording ran out of memory under a limit the snapshot does "
		    "not record: give it with --limit (the OOM message's 'allowed', "
		    "or the GPU's capacity) to replay the OOM";
	if (pred->truncated)
		notes[(*count)++] =
		    pred->approximate ? "the trace starts mid-run: the allocator's state before "
		                        "it was reconstructed from the snapshot, with estimated "
		                        "block sizes"
		                      : "the trace starts mid-run: the allocator's state before it "
		                        "was reconstructed from the snapshot";
	if (pred->recorded_ooms_allocated)
		notes[(*count)++] = "requests that failed in the recording were served in the "
		                    "replay; they are counted as never freed";
}

static void render_json(const sim_args *a, const sim_result *rec, const sim_result *pred, mr_buf *b)
{
	mr_buf conf = {0};
	sim_config_format(&pred->config, &conf);
	mr_buf_puts(b, "{\"schema\": \"memreport-sim/1\", \"memreport\": \"" MEMREPORT_VERSION
	               "\", \"snapshot\": ");
	mr_json_str(b, a->snapshot);
	mr_buf_printf(b, ", \"device\": %d, \"alloc_conf\": ", (int)pred->device);
	mr_json_str(b, a->conf);
	mr_buf_puts(b, ", \"effective_alloc_conf\": ");
	mr_json_str(b, conf.data ? conf.data : "");
	if (a->limit)
		mr_buf_printf(b, ", \"limit_bytes\": %" PRIu64, a->limit);
	else
		mr_buf_puts(b, ", \"limit_bytes\": null");
	mr_buf_printf(b,
	              ", \"peak_reserved_bytes\": %" PRIu64 ", \"peak_allocated_bytes\": %" PRIu64
	              ", \"final_reserved_bytes\": %" PRIu64 ", \"final_allocated_bytes\": %" PRIu64
	              ", \"segments_allocated\": %" PRIu64 ", \"segments_released\": %" PRIu64
	              ", \"oom\": ",
	              pred->peak_reserved, pred->peak_allocated, pred->final_reserved,
	              pred->final_allocated, pred->segments_allocated, pred->segments_released);
	sim_oom_json(pred, b);
	mr_buf_printf(b, ", \"oom_count\": %" PRIu64 ", \"replay_matches_recording\": %s",
	              pred->oom_count, rec->matches_recording ? "true" : "false");
	mr_buf_puts(b, ", \"first_divergence\": ");
	sim_divergence_json(rec, b);
	mr_buf_puts(b, ", \"differs_from_recording_at\": ");
	if (pred != rec)
		sim_divergence_json(pred, b);
	else
		mr_buf_puts(b, "null");
	mr_buf_printf(b, ", \"events\": %zu, \"trace_truncated\": %s, \"approximate\": %s",
	              pred->events, pred->truncated ? "true" : "false",
	              pred->approximate ? "true" : "false");
	mr_buf_puts(b, ", \"recorded_settings_replay\": ");
	sim_result_json(rec, b);
	const char *notes[8];
	size_t n;
	collect_notes(rec, pred, notes, &n);
	mr_buf_puts(b, ", \"notes\": [");
	for (size_t i = 0; i < n; i++) {
		if (i)
			mr_buf_puts(b, ", ");
		mr_json_str(b, notes[i]);
	}
	mr_buf_puts(b, "]}\n");
	mr_buf_free(&conf);
}

static void text_line(mr_buf *b, const char *label, uint64_t bytes)
{
	char s[32];
	mr_format_bytes(s, sizeof s, bytes);
	mr_buf_printf(b, "  %-22s %s (%" PRIu64 " bytes)\n", label, s, bytes);
}

static void write_text(const sim_args *a, const sim_result *rec, const sim_result *pred, mr_buf *b)
{
	mr_buf conf = {0};
	sim_config_format(&pred->config, &conf);
	char s[32];
	char *shown = mr_strdup(a->snapshot); /* a path may hold a newline or an ESC */
	if (shown)
		mr_one_line(shown);
	mr_buf_printf(b, "memreport simulate: %s, device %d, %zu trace events\n",
	              shown ? shown : "?", (int)pred->device, pred->events);
	free(shown);
	mr_buf_printf(b, "settings: %s\n", conf.len ? conf.data : "(PyTorch defaults)");
	if (a->limit) {
		mr_format_bytes(s, sizeof s, a->limit);
		mr_buf_printf(b, "limit:    %s\n", s);
	} else {
		mr_buf_puts(b, "limit:    none\n");
	}
	mr_buf_puts(b, "replayed:\n");
	text_line(b, "peak reserved", pred->peak_reserved);
	text_line(b, "peak allocated", pred->peak_allocated);
	text_line(b, "final reserved", pred->final_reserved);
	mr_buf_printf(b, "  %-22s %" PRIu64 " allocated, %" PRIu64 " released\n", "segments",
	              pred->segments_allocated, pred->segments_released);
	if (pred->first_oom.present) {
		const sim_oom *o = &pred->first_oom;
		char req[32], res[32], cached[32];
		mr_format_bytes(req, sizeof req, o->requested_bytes);
		mr_format_bytes(res, sizeof res, o->reserved_bytes);
		mr_format_bytes(cached, sizeof cached, o->free_cached_bytes);
		mr_buf_printf(b,
		              "  OOM at event %zu: %s requested with %s reserved, %s of it "
		              "cached but unusable\n",
		              o->event_index, req, res, cached);
	} else {
		mr_buf_puts(b, "  no OOM\n");
	}
	if (pred != rec) {
		char delta[32];
		uint64_t x = rec->peak_reserved, y = pred->peak_reserved;
		mr_format_bytes(delta, sizeof delta, x > y ? x - y : y - x);
		mr_format_bytes(s, sizeof s, x);
		mr_buf_printf(
		    b, "recorded settings replayed: peak reserved %s; these settings: %s %s, %s\n",
		    s, delta, y <= x ? "less" : "more",
		    rec->first_oom.present && !pred->first_oom.present   ? "and no OOM"
		    : !rec->first_oom.present && pred->first_oom.present ? "but an OOM"
		    : rec->first_oom.present                             ? "and an OOM as well"
		                                                         : "no OOM either way");
	}
	if (rec->matches_recording) {
		mr_buf_puts(b,
		            "validation: the recorded settings, replayed, reproduce the recording "
		            "exactly (every segment and block address)\n");
	} else {
		const sim_divergence *d = &rec->first_divergence;
		mr_buf_printf(
		    b,
		    "validation: the replay departs from the recording at event %zu (%s): "
		    "expected %s, got %s\n",
		    d->event_index, d->what, d->expected, d->got);
	}
	const char *notes[8];
	size_t n;
	collect_notes(rec, pred, notes, &n);
	for (size_t i = 0; i < n; i++)
		mr_buf_printf(b, "note: %s\n", notes[i]);
	mr_buf_free(&conf);
}

/* The text, each line at most RD_TEXT_COLUMNS wide (rd_wrap). */
static void render_text(const sim_args *a, const sim_result *rec, const sim_result *pred,
                        mr_buf *out)
{
	mr_buf text = {0};
	write_text(a, rec, pred, &text);
	if (text.failed)
		out->failed = 1;
	rd_wrap(out, text.data ? text.data : "", text.len, RD_TEXT_COLUMNS);
	mr_buf_free(&text);
}

/* --device N must be a device of the snapshot. Returns 0, or the exit status after saying
 * which devices it has. */
static int check_device(const sim_args *a, const md_snapshot *snap)
{
	if (a->device < 0)
		return 0;
	mr_buf ids = {0};
	for (size_t i = 0; i < snap->device_count; i++) {
		if (snap->devices[i].id == a->device) {
			mr_buf_free(&ids);
			return 0;
		}
		mr_buf_printf(&ids, "%s%d", i ? ", " : "", (int)snap->devices[i].id);
	}
	int rc = arg_error(a->snapshot, "--device %d: the snapshot has no device %d (it has %s)",
	                   a->device, a->device, ids.data ? ids.data : "none");
	mr_buf_free(&ids);
	return rc;
}

/* One replay of the command: the recorded settings' and the asked-for ones run in parallel. */
typedef struct {
	const md_snapshot *s;
	int32_t device;
	const sim_config *cfg;
	uint64_t limit;
	sim_result *out;
	mr_error err;
	mr_status st;
} sim_job;

static void sim_task(void *ctx, void *worker, size_t i)
{
	(void)worker;
	sim_job *j = &((sim_job *)ctx)[i];
	j->st = sim_replay(j->s, j->device, j->cfg, j->limit, j->out, &j->err);
}

int cmd_simulate(int argc, char **argv)
{
	sim_args a;
	int rc = parse_args(argc, argv, &a);
	if (rc)
		return rc < 0 ? 0 : rc;
	ld_evidence run;
	mr_error err = {0};
	const char *paths[] = {a.snapshot};
	mr_status st = out_check_inputs(a.out_path, paths, 1, &err);
	if (st) {
		cmd_say("%s", err.msg);
		return (int)st;
	}
	st = ld_load(&run, paths, 1, NULL, NULL, &err);
	if (st) {
		cmd_say("%s", err.msg);
		return (int)st;
	}
	sim_result rec, pred;
	memset(&rec, 0, sizeof rec);
	memset(&pred, 0, sizeof pred);
	const sim_result *prediction = &rec;
	mr_buf out = {0};
	sim_config recorded, cfg;
	if (!run.has_snapshot) {
		rc = arg_error(a.snapshot, "%s",
		               "not a snapshot: simulate needs a snapshot pickle with "
		               "an allocation trace");
		goto done;
	}
	sim_config_from_settings(&run.snap, &recorded);
	if (sim_parse_conf(a.conf, &recorded, &cfg, &err)) {
		cmd_say("%s: --alloc-conf '%s': %s", a.snapshot, a.conf, err.msg);
		rc = MR_EINPUT;
		goto done;
	}
	if ((rc = check_device(&a, &run.snap)))
		goto done;
	int32_t device = a.device;
	for (size_t i = 0; device < 0 && i < run.snap.device_count; i++)
		if (run.snap.devices[i].event_count)
			device = run.snap.devices[i].id;
	if (device < 0)
		device = run.snap.device_count ? run.snap.devices[0].id : 0;
	sim_job jobs[2] = {{&run.snap, device, &recorded, a.limit, &rec, {0}, MR_OK},
	                   {&run.snap, device, &cfg, a.limit, &pred, {0}, MR_OK}};
	size_t n = sim_config_equal(&recorded, &cfg) ? 1 : 2;
	mr_pool_run(n, n, sim_task, jobs, NULL, NULL);
	if (n == 2)
		prediction = &pred;
	/* the recorded replay's error first, as if they had run one after the other */
	st = jobs[0].st ? jobs[0].st : jobs[n - 1].st;
	if (st)
		err = jobs[0].st ? jobs[0].err : jobs[n - 1].err;
	if (st) {
		cmd_say("%s: %s", a.snapshot, err.msg);
		rc = (int)st;
		goto done;
	}
	if (a.text)
		render_text(&a, &rec, prediction, &out);
	else
		render_json(&a, &rec, prediction, &out);
	if (out.failed) {
		cmd_say("out of memory");
		rc = MR_EFAIL;
		goto done;
	}
	st = out_write(a.out_path, out.data ? out.data : "", out.len, &err);
	if (st) {
		cmd_say("%s: %s", a.out_path, err.msg);
		rc = (int)st;
	}
done:
	mr_buf_free(&out);
	sim_result_free(&rec);
	sim_result_free(&pred);
	ld_free(&run);
	return rc;
}
