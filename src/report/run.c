/* run.c: loading the inputs of one run and merging what they say. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/units.h"
#include "decode/snapshot.h"
#include "decode/sniff.h"
#include "render/templates.h"
#include "report/report.h"
#include "source/input.h"

int rp_parse_option(rp_options *opt, int argc, char **argv, int *i, mr_error *err)
{
	const char *a = argv[*i], *val = *i + 1 < argc ? argv[*i + 1] : NULL;
	if (strcmp(a, "--redact-paths") == 0) {
		opt->redact_paths = 1;
	} else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
		opt->quiet = 1;
	} else if (strcmp(a, "--device") == 0) {
		char *end = NULL;
		errno = 0;
		long v = val ? strtol(val, &end, 10) : -1;
		if (!val || errno || end == val || *end || v < 0 || v > 1024) {
			mr_fail(err, MR_EINPUT, "--device needs a device number, got '%s'",
			        val ? val : "");
			return -1;
		}
		opt->device = (int)v;
		(*i)++;
	} else if (strcmp(a, "--templates") == 0) {
		if (!val) {
			mr_fail(err, MR_EINPUT, "--templates needs a folder");
			return -1;
		}
		opt->templates = val;
		tp_set_dir(val);
		(*i)++;
	} else {
		return 0;
	}
	return 1;
}

const char *rp_kind_name(rp_kind k)
{
	switch (k) {
	case RP_SNAPSHOT: return "snapshot";
	case RP_MEMORY_SUMMARY: return "memory_summary";
	case RP_OOM_MESSAGE: return "oom_message";
	default: return "memory_stats";
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

/* Moves the tables and messages of src to the end of dst; src keeps nothing it must free. */
static mr_status merge_text(ev_text *dst, ev_text *src, mr_error *err)
{
	ev_summary *sm =
	    mr_realloc_array(dst->summaries, dst->summary_count + src->summary_count, sizeof *sm);
	if (!sm)
		return mr_oom(err);
	dst->summaries = sm;
	ev_oom *oo = mr_realloc_array(dst->ooms, dst->oom_count + src->oom_count, sizeof *oo);
	if (!oo)
		return mr_oom(err);
	dst->ooms = oo;
	if (src->summary_count)
		memcpy(sm + dst->summary_count, src->summaries, src->summary_count * sizeof *sm);
	if (src->oom_count)
		memcpy(oo + dst->oom_count, src->ooms, src->oom_count * sizeof *oo);
	dst->summary_count += src->summary_count;
	dst->oom_count += src->oom_count;
	/* the per-message process lists now belong to dst */
	for (size_t i = 0; i < src->oom_count; i++)
		src->ooms[i].other_processes = NULL, src->ooms[i].other_process_count = 0;
	return MR_OK;
}

/* Bytes of memory this process may still use: MemAvailable, bounded by address-space limits. */
static uint64_t memory_available(void)
{
	uint64_t avail = UINT64_MAX;
	FILE *f = fopen("/proc/meminfo", "r");
	if (f) {
		char line[256];
		unsigned long long kb;
		while (fgets(line, sizeof line, f))
			if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
				avail = (uint64_t)kb * 1024;
		fclose(f);
	}
	struct rlimit rl;
	if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (uint64_t)rl.rlim_cur < avail)
		avail = (uint64_t)rl.rlim_cur;
	if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (uint64_t)rl.rlim_cur < avail)
		avail = (uint64_t)rl.rlim_cur;
	return avail;
}

/* Decoding needs a little more than the file's size (docs/benchmarks.md: about 1.3x at peak
 * for trace-heavy snapshots); refuse up front rather than be killed half-way. */
static mr_status check_memory(size_t len, mr_error *err)
{
	uint64_t need = (uint64_t)len + (uint64_t)len / 2 + (64u << 20);
	uint64_t avail = memory_available();
	if (need <= avail)
		return MR_OK;
	char n[32], a[32], l[32];
	mr_format_bytes(l, sizeof l, len);
	mr_format_bytes(n, sizeof n, need);
	mr_format_bytes(a, sizeof a, avail);
	return mr_fail(err, MR_EFAIL,
	               "this %s snapshot needs about %s of memory to decode and only %s is "
	               "available",
	               l, n, a);
}

/* memory_stats() dumps name these keys (flat or nested); other JSON (facts.json, a config)
 * is not evidence. */
static int is_memory_stats(const ev_stats *st)
{
	uint64_t v;
	return ev_stats_get(st, "allocated_bytes.all.current", &v) ||
	       ev_stats_get(st, "reserved_bytes.all.current", &v);
}

/* How one buffer joins a run. Every command-line input must be evidence (anything else is an
 * error); a member of a run folder or zip may be anything and is then skipped. */
typedef struct {
	int strict;
	in_data *in; /* the mapped input, for progress and dropping read pages; may be NULL */
	const rp_options *opt;
} add_ctx;

static mr_status skip_or_fail(const add_ctx *ac, mr_error *err, const char *why)
{
	return ac->strict ? mr_fail(err, MR_EINPUT, "%s", why) : MR_OK;
}

/* Adds one buffer's evidence to the run; *used says whether it was evidence. */
static mr_status add_buffer(rp_run *run, const char *name, const uint8_t *data, size_t len,
                            const add_ctx *ac, int *used, mr_error *err)
{
	rp_input *slot = &run->inputs[run->input_count];
	mr_status st = MR_OK;
	*used = 0;
	if (len == 0)
		return skip_or_fail(ac, err, "the file is empty");
	dc_kind kind = dc_sniff(data, len);
	if (kind == DC_PICKLE) {
		if (run->has_snapshot)
			return mr_fail(
			    err, MR_EINPUT,
			    "a second snapshot in one run (give several runs to `memreport "
			    "batch`, or compare two with `memreport diff`)");
		if (ac->strict && (st = check_memory(len, err)))
			return st;
		progress_state ps = {
		    ac->in, ac->in && !ac->opt->quiet && isatty(STDERR_FILENO) && len > (64u << 20),
		    (size_t)-1};
		if ((st = sn_load(data, len, &run->snap, ac->in ? on_progress : NULL, &ps, err)))
			return st;
		run->show_progress = ps.tty;
		run->has_snapshot = 1;
		slot->kind = RP_SNAPSHOT;
	} else if (kind == DC_JSON) {
		ev_stats stats;
		mr_error perr = {0};
		if (ev_parse_stats_json((const char *)data, len, &stats, &perr))
			return ac->strict ? mr_fail(err, perr.status, "%s", perr.msg) : MR_OK;
		if (!is_memory_stats(&stats) || run->has_stats) {
			ev_stats_free(&stats);
			return skip_or_fail(ac, err,
			                    run->has_stats
			                        ? "a second memory_stats() dump in one run"
			                        : "JSON, but not a memory_stats() dump (no "
			                          "allocated_bytes.all.current or "
			                          "reserved_bytes.all.current)");
		}
		run->stats = stats;
		run->has_stats = 1;
		slot->kind = RP_MEMORY_STATS;
	} else if (kind != DC_TEXT) {
		return skip_or_fail(ac, err,
		                    "binary data that is not a pickle (protocol 2 to 5), nor text");
	} else {
		ev_text text;
		mr_error perr = {0};
		if (ev_parse_text((const char *)data, len, &text, &perr))
			return ac->strict || perr.status != MR_EINPUT
			           ? mr_fail(err, perr.status, "%s", perr.msg)
			           : MR_OK;
		slot->kind = text.oom_count ? RP_OOM_MESSAGE : RP_MEMORY_SUMMARY;
		st = merge_text(&run->text, &text, err);
		ev_text_free(&text);
		if (st)
			return st;
	}
	slot->path = mr_strndup(name, strlen(name));
	if (!slot->path)
		return mr_oom(err);
	run->input_count++;
	*used = 1;
	/* In a run folder the snapshot is listed first, as the run's main input. */
	if (!ac->strict && slot->kind == RP_SNAPSHOT && run->input_count > 1) {
		rp_input snap = *slot;
		memmove(run->inputs + 1, run->inputs, (run->input_count - 1) * sizeof *slot);
		run->inputs[0] = snap;
	}
	return MR_OK;
}

int rp_buffer_kind(const uint8_t *data, size_t len, rp_kind *kind)
{
	rp_run probe;
	rp_options opt = {.device = -1, .quiet = 1};
	add_ctx ac = {0, NULL, &opt};
	mr_error err = {0};
	int used = 0;
	/* Only cheap checks for pickles: the decoder is not run to classify. */
	if (dc_sniff(data, len) == DC_PICKLE) {
		*kind = RP_SNAPSHOT;
		return 1;
	}
	memset(&probe, 0, sizeof probe);
	probe.inputs = mr_alloc_array(1, sizeof *probe.inputs);
	if (!probe.inputs)
		return 0;
	if (add_buffer(&probe, "", data, len, &ac, &used, &err) == MR_OK && used)
		*kind = probe.inputs[0].kind;
	rp_free(&probe);
	return used;
}

/* Analysis, diagnosis and the settings replays, once every input is in. */
static mr_status finish(rp_run *run, const rp_options *opt, mr_error *err)
{
	mr_status st;
	if (run->show_progress)
		fprintf(stderr, "analysing %zu trace events...\n", run->snap.event_store_count);
	if (run->has_snapshot && ((st = an_analyze(&run->snap, 0, &run->an, err)) ||
	                          (st = ad_replay_recorded(run, err))))
		return st;
	if ((st = ad_advise(run, opt, &run->advice, err)))
		return st;
	return ad_replay_settings(run, &run->advice, err);
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
		in_data in;
		int used;
		st = in_read(paths[i], &in, &local);
		if (!st) {
			add_ctx ac = {1, &in, opt};
			st = add_buffer(run, paths[i], in.data, in.len, &ac, &used, &local);
			in_release(&in);
		}
		if (st) {
			mr_fail(err, st, "%s: %s", paths[i], local.msg);
			goto fail;
		}
	}
	if ((st = finish(run, opt, err)))
		goto fail;
	return MR_OK;
fail:
	rp_free(run);
	return st;
}

mr_status rp_load_buffers(rp_run *run, const char *const *names, const uint8_t *const *data,
                          const size_t *lens, size_t count, const rp_options *opt, mr_error *err)
{
	memset(run, 0, sizeof *run);
	mr_status st = MR_OK;
	run->inputs = mr_alloc_array(count ? count : 1, sizeof *run->inputs);
	if (!run->inputs)
		return mr_oom(err);
	add_ctx ac = {0, NULL, opt};
	for (size_t i = 0; i < count; i++) {
		mr_error local = {0};
		int used;
		if ((st = add_buffer(run, names[i], data[i], lens[i], &ac, &used, &local))) {
			mr_fail(err, st, "%s: %s", names[i], local.msg);
			goto fail;
		}
	}
	if (run->input_count == 0) {
		mr_buf list = {0};
		for (size_t i = 0; i < count && i < 8; i++)
			mr_buf_printf(&list, "%s%s", i ? ", " : "", names[i]);
		if (count > 8)
			mr_buf_puts(&list, ", ...");
		st = mr_fail(err, MR_EINPUT,
		             "no snapshot pickle, memory_summary() table, OOM message or "
		             "memory_stats() JSON among: %s",
		             list.data ? list.data : "(no files)");
		mr_buf_free(&list);
		goto fail;
	}
	if ((st = finish(run, opt, err)))
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
	free(run->recorded);
	ev_text_free(&run->text);
	if (run->has_stats)
		ev_stats_free(&run->stats);
	if (run->has_snapshot) {
		an_free(&run->an);
		md_free(&run->snap);
	}
	memset(run, 0, sizeof *run);
}

/* Length of the home-folder prefix of path ("/home/u/", "/Users/u/", "C:\Users\u\", "/root/")
 * and the user name's span inside it; 0 when path is not under a home folder. */
static size_t home_prefix(const char *path, const char **user, size_t *user_len)
{
	static const char *const homes[] = {"/home/", "/Users/", "/users/", "/u/", "/export/home/"};
	*user = NULL;
	*user_len = 0;
	for (size_t i = 0; i < sizeof homes / sizeof *homes; i++) {
		size_t n = strlen(homes[i]);
		if (strncmp(path, homes[i], n) != 0)
			continue;
		const char *end = strchr(path + n, '/');
		if (!end || end == path + n)
			return 0;
		*user = path + n;
		*user_len = (size_t)(end - *user);
		return (size_t)(end - path) + 1;
	}
	if (strncmp(path, "/root/", 6) == 0)
		return 6;
	/* C:\Users\name\ or C:/Users/name/ */
	if (path[0] && path[1] == ':' && (path[2] == '\\' || path[2] == '/') &&
	    strncasecmp(path + 3, "Users", 5) == 0 && (path[8] == '\\' || path[8] == '/')) {
		const char *u = path + 9, *end = u;
		while (*end && *end != '\\' && *end != '/')
			end++;
		if (!*end || end == u)
			return 0;
		*user = u;
		*user_len = (size_t)(end - u);
		return (size_t)(end - path) + 1;
	}
	return 0;
}

/* "/lib/python3.12/" (or python2.x): the interpreter's standard library. Returns the text after
 * it, or NULL. */
static const char *python_stdlib(const char *path)
{
	for (const char *p = strstr(path, "/lib/python"); p; p = strstr(p + 1, "/lib/python")) {
		const char *q = p + 11;
		if (*q != '2' && *q != '3')
			continue;
		while ((*q >= '0' && *q <= '9') || *q == '.')
			q++;
		if (*q == '/')
			return q + 1;
	}
	return NULL;
}

const char *rp_path(const rp_options *opt, const char *path, char *buf, size_t bufsz)
{
	if (!opt || !opt->redact_paths) {
		snprintf(buf, bufsz, "%s", path);
		return buf;
	}
	/* Installed packages keep their package-relative path: it names the code, not the
	 * machine (site-packages, dist-packages, a conda or virtualenv anywhere). */
	static const char *const anchors[] = {"site-packages/", "dist-packages/", "site-packages\\",
	                                      "dist-packages\\"};
	for (size_t i = 0; i < sizeof anchors / sizeof *anchors; i++) {
		const char *p = strstr(path, anchors[i]);
		if (p) {
			snprintf(buf, bufsz, "<site-packages>/%s", p + strlen(anchors[i]));
			return buf;
		}
	}
	int absolute = path[0] == '/' || path[0] == '\\' || (path[0] == '~' && path[1] == '/') ||
	               (path[0] && path[1] == ':' && (path[2] == '\\' || path[2] == '/'));
	if (!absolute) {
		/* Relative names and synthetic ones ("<frozen runpy>", "train.py") carry no
		 * machine. */
		snprintf(buf, bufsz, "%s", path);
		return buf;
	}
	const char *stdlib = python_stdlib(path);
	if (stdlib) {
		snprintf(buf, bufsz, "<python>/%s", stdlib);
		return buf;
	}
	/* Under a home folder: keep the path inside it, without the user name anywhere. */
	const char *user = NULL;
	size_t user_len = 0;
	size_t home = path[0] == '~' ? 2 : home_prefix(path, &user, &user_len);
	if (home) {
		size_t used = (size_t)snprintf(buf, bufsz, "<home>/");
		const char *rest = path + home;
		while (*rest && used + 1 < bufsz) {
			if (user_len && strncmp(rest, user, user_len) == 0) {
				used += (size_t)snprintf(buf + used, bufsz - used, "<user>");
				rest += user_len;
			} else {
				buf[used++] = *rest == '\\' ? '/' : *rest;
				rest++;
			}
			if (used >= bufsz)
				used = bufsz - 1;
		}
		buf[used < bufsz ? used : bufsz - 1] = '\0';
		return buf;
	}
	/* Anywhere else (/workspace, /opt, /scratch/<user>, a build tree): only the file name,
	 * since any folder above it may name a person, a project or a host. */
	const char *base = path;
	for (const char *p = path; *p; p++)
		if (*p == '/' || *p == '\\')
			base = p + 1;
	snprintf(buf, bufsz, "<redacted>/%s", base);
	return buf;
}

static uint64_t cell(const ev_summary *sm, int metric, int col, uint64_t *unit)
{
	const ev_cell *c = &sm->cells[metric][EV_POOL_ALL][col];
	if (c->known && c->unit > *unit)
		*unit = c->unit;
	return c->known ? c->value : 0;
}

size_t rp_text_devices(const rp_run *run, rp_numbers *out, size_t max)
{
	size_t n = 0;
	if (run->has_stats && max > 0) {
		rp_numbers *d = &out[n++];
		memset(d, 0, sizeof *d);
		const ev_stats *st = &run->stats;
		d->source = RP_MEMORY_STATS;
		d->precision = 1;
		ev_stats_get(st, "reserved_bytes.all.current", &d->reserved);
		ev_stats_get(st, "allocated_bytes.all.current", &d->allocated);
		ev_stats_get(st, "active_bytes.all.current", &d->active);
		d->has_requested = ev_stats_get(st, "requested_bytes.all.current", &d->requested);
		ev_stats_get(st, "inactive_split_bytes.all.current", &d->inactive_split);
		ev_stats_get(st, "inactive_split.all.current", &d->inactive_split_blocks);
		ev_stats_get(st, "segment.all.current", &d->segments);
		d->has_peaks = ev_stats_get(st, "allocated_bytes.all.peak", &d->peak_allocated) &
		               ev_stats_get(st, "reserved_bytes.all.peak", &d->peak_reserved);
		return n;
	}
	/* The last table of each device, devices in order of first appearance. */
	for (size_t i = 0; i < run->text.summary_count && n < max; i++) {
		const ev_summary *sm = &run->text.summaries[i];
		int seen = 0;
		for (size_t k = 0; k < n; k++)
			seen |= out[k].device == sm->device;
		if (seen)
			continue;
		for (size_t j = i + 1; j < run->text.summary_count; j++)
			if (run->text.summaries[j].device == sm->device)
				sm = &run->text.summaries[j];
		rp_numbers *d = &out[n++];
		memset(d, 0, sizeof *d);
		uint64_t unit = 1;
		d->device = sm->device < 0 ? 0 : sm->device;
		d->source = RP_MEMORY_SUMMARY;
		d->reserved = cell(sm, EV_RESERVED, EV_CUR, &unit);
		d->allocated = cell(sm, EV_ALLOCATED, EV_CUR, &unit);
		d->active = cell(sm, EV_ACTIVE, EV_CUR, &unit);
		d->has_requested = sm->cells[EV_REQUESTED][EV_POOL_ALL][EV_CUR].known;
		d->requested = cell(sm, EV_REQUESTED, EV_CUR, &unit);
		d->inactive_split = cell(sm, EV_INACTIVE_SPLIT, EV_CUR, &unit);
		d->inactive_split_blocks = cell(sm, EV_INACTIVE_SPLIT_ALLOCS, EV_CUR, &unit);
		d->segments = cell(sm, EV_SEGMENTS, EV_CUR, &unit);
		d->peak_allocated = cell(sm, EV_ALLOCATED, EV_PEAK, &unit);
		d->peak_reserved = cell(sm, EV_RESERVED, EV_PEAK, &unit);
		d->has_peaks = sm->cells[EV_RESERVED][EV_POOL_ALL][EV_PEAK].known;
		d->precision = unit;
	}
	return n;
}
