/* run.c: loading the inputs of one run and merging what they say. */
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "input.h"
#include "snapshot.h"

const char *rp_kind_name(rp_kind k)
{
	switch (k) {
	case RP_SNAPSHOT:
		return "snapshot";
	case RP_MEMORY_SUMMARY:
		return "memory_summary";
	case RP_OOM_MESSAGE:
		return "oom_message";
	default:
		return "memory_stats";
	}
}

typedef struct {
	in_data *in;
	int tty;
	size_t last_pct;
} progress_state;

static void on_progress(void *ctx, size_t done, size_t total)
{
	progress_state *p = ctx;
	in_drop_before(p->in, done > (1u << 20) ? done - (1u << 20) : 0);
	if (!p->tty || !total)
		return;
	size_t pct = (size_t)((double)done * 100.0 / (double)total);
	if (pct == p->last_pct)
		return;
	p->last_pct = pct;
	int bar = (int)(pct / 4);
	fprintf(stderr, "\rdecoding [%-25.*s] %3zu%% of %.1f MiB", bar, "#########################",
		pct, (double)total / (1024.0 * 1024.0));
	if (done >= total)
		fputc('\n', stderr);
}

static mr_status load_one(rp_run *run, const char *path, const rp_options *opt, mr_error *err)
{
	in_data in;
	mr_status st = in_read(path, &in, err);
	if (st)
		return st;
	rp_input *slot = &run->inputs[run->input_count];
	slot->path = mr_strndup(path, strlen(path));
	if (!slot->path) {
		st = mr_oom(err);
		goto done;
	}
	if (sn_is_pickle(in.data, in.len) || in.len == 0 || in.data[0] == 0x80) {
		if (run->has_snapshot) {
			st = mr_fail(err, MR_EINPUT,
				     "a second snapshot in one run (give several runs to `memreport "
				     "batch`, or compare two with `memreport diff`)");
			goto done;
		}
		progress_state ps = {&in, !opt->quiet && isatty(STDERR_FILENO) && in.len > (64u << 20),
				     (size_t)-1};
		st = sn_load(in.data, in.len, &run->snap, on_progress, &ps, err);
		if (st)
			goto done;
		run->has_snapshot = 1;
		slot->kind = RP_SNAPSHOT;
	} else {
		st = mr_fail(err, MR_EINPUT,
			     "not a snapshot pickle, memory_summary() table, OOM message or "
			     "memory_stats() JSON");
		goto done;
	}
	run->input_count++;
done:
	if (st) {
		free(slot->path);
		slot->path = NULL;
	}
	in_release(&in);
	return st;
}

mr_status rp_load(rp_run *run, const char *const *paths, size_t count, const rp_options *opt,
		  mr_error *err)
{
	memset(run, 0, sizeof *run);
	mr_status st = MR_OK;
	run->inputs = mr_alloc_array(count, sizeof *run->inputs);
	if (!run->inputs)
		return mr_oom(err);
	for (size_t i = 0; i < count; i++) {
		mr_error local = {0};
		st = load_one(run, paths[i], opt, &local);
		if (st) {
			mr_fail(err, st, "%s: %s", paths[i], local.msg);
			goto fail;
		}
	}
	if (run->has_snapshot && (st = an_analyze(&run->snap, 0, &run->an, err)))
		goto fail;
	if ((st = ad_advise(run, &run->advice, err)))
		goto fail;
	return MR_OK;
fail:
	rp_free(run);
	return st;
}

void rp_free(rp_run *run)
{
	for (size_t i = 0; i < run->input_count; i++)
		free(run->inputs[i].path);
	free(run->inputs);
	ad_free(&run->advice);
	if (run->has_snapshot) {
		an_free(&run->an);
		md_free(&run->snap);
	}
	memset(run, 0, sizeof *run);
}

const char *rp_path(const rp_options *opt, const char *path, char *buf, size_t bufsz)
{
	if (!opt || !opt->redact_paths) {
		snprintf(buf, bufsz, "%s", path);
		return buf;
	}
	/* Keep what identifies the code (package-relative path), drop where it lived. */
	static const char *const anchors[] = {"site-packages/", "dist-packages/", "site-packages\\",
					      "dist-packages\\"};
	for (size_t i = 0; i < sizeof anchors / sizeof *anchors; i++) {
		const char *p = strstr(path, anchors[i]);
		if (p) {
			snprintf(buf, bufsz, "<site-packages>/%s", p + strlen(anchors[i]));
			return buf;
		}
	}
	const char *py = strstr(path, "/lib/python");
	if (py && path[0] == '/') {
		const char *rest = strchr(py + 11, '/');
		if (rest) {
			snprintf(buf, bufsz, "<python>%s", rest);
			return buf;
		}
	}
	int absolute = path[0] == '/' || path[0] == '~' || path[0] == '\\' ||
		       (path[0] && path[1] == ':');
	if (!absolute) {
		snprintf(buf, bufsz, "%s", path);
		return buf;
	}
	const char *base = path;
	for (const char *p = path; *p; p++)
		if (*p == '/' || *p == '\\')
			base = p + 1;
	snprintf(buf, bufsz, "<redacted>/%s", base);
	return buf;
}
