/* run_input.c: one run from the command line: files, or a run folder or zip of one run. */
#include "cmd/run_input.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/output.h"
#include "decode/sniff.h"
#include "report/view.h"
#include "source/walk.h"

/* A folder, or a file that is a zip archive by its content; "-" and missing paths are not
 * (the loader reports those). */
static int is_container(const char *path)
{
	struct stat st;
	if (strcmp(path, "-") == 0 || stat(path, &st) != 0)
		return 0;
	if (S_ISDIR(st.st_mode))
		return 1;
	uint8_t head[4] = {0};
	ssize_t n = S_ISREG(st.st_mode) ? wk_read_head(path, head, sizeof head) : -1;
	return n > 0 && dc_sniff(head, (size_t)n) == DC_ZIP;
}

/* "runs/ holds 3 runs ("a", "b", "c"): ..." */
static mr_status several_runs(const char *path, const ar_set *set, mr_error *err)
{
	if (set->count == 0)
		return mr_fail(
		    err, MR_EINPUT,
		    "%s holds no snapshot pickle, memory_summary() table, OOM message or "
		    "memory_stats() JSON",
		    path);
	mr_buf names = {0};
	for (size_t i = 0; i < set->count && i < 5; i++)
		mr_buf_printf(&names, "%s\"%s\"", i ? ", " : "", set->runs[i].name);
	mr_status st =
	    mr_fail(err, MR_EINPUT,
	            "%s holds %zu runs (%s%s): give one of them (a folder or a "
	            "snapshot), or all to `memreport batch`",
	            path, set->count, names.data ? names.data : "", set->count > 5 ? ", ..." : "");
	mr_buf_free(&names);
	return st;
}

mr_status cmd_run_find(cmd_run *r, const char *const *paths, size_t count, mr_error *err)
{
	memset(r, 0, sizeof *r);
	r->paths = paths;
	r->count = count;
	sr_default_limits(&r->lim);
	for (size_t i = 0; i < count; i++) {
		if (!is_container(paths[i]))
			continue;
		if (count > 1)
			return mr_fail(
			    err, MR_EINPUT,
			    "%s: a run folder or zip archive is one run by itself: give it "
			    "alone (or several runs to `memreport batch`)",
			    paths[i]);
		r->container = 1;
	}
	if (!r->container)
		return MR_OK;
	mr_status st = ar_discover(paths, 1, &r->lim, &r->set, err);
	if (!st && r->set.count != 1)
		st = several_runs(paths[0], &r->set, err);
	return st;
}

mr_status cmd_run_guard(const cmd_run *r, const char *output, mr_error *err)
{
	out_guard g = {0};
	mr_status st = MR_OK;
	for (size_t i = 0; i < r->count && !st; i++)
		st = out_guard_add(&g, r->paths[i], err);
	for (size_t i = 0; r->container && i < r->set.count && !st; i++)
		for (size_t m = 0; m < r->set.runs[i].member_count && !st; m++)
			st = out_guard_add(&g, r->set.runs[i].members[m].path, err);
	if (!st)
		st = out_guard_check(&g, output, err);
	out_guard_free(&g);
	return st;
}

mr_status cmd_run_load(const cmd_run *r, ld_progress_fn progress, void *progress_ctx,
                       ld_evidence *ev, mr_error *err)
{
	if (!r->container)
		return ld_load(ev, r->paths, r->count, progress, progress_ctx, err);
	return ar_load(NULL, &r->set.runs[0], &r->lim, ev, err);
}

void cmd_run_free(cmd_run *r)
{
	ar_set_free(&r->set);
	memset(r, 0, sizeof *r);
}

/* Adds id to ids[0..*n) unless it is there (or there are already cap of them). */
static void add_id(int32_t *ids, size_t *n, size_t cap, int32_t id)
{
	for (size_t i = 0; i < *n; i++)
		if (ids[i] == id)
			return;
	if (*n < cap)
		ids[(*n)++] = id;
}

mr_status cmd_run_check_device(const rp_report *r, int device, mr_error *err)
{
	if (device < 0)
		return MR_OK;
	rp_view all;
	mr_status st = rp_view_init(&all, r, -1, err);
	if (st)
		return st;
	int32_t ids[RP_VIEW_MAX_NUMBERS];
	size_t n = 0;
	for (size_t i = 0; i < all.device_count; i++)
		add_id(ids, &n, RP_VIEW_MAX_NUMBERS, all.devices[i]->device);
	for (size_t i = 0; i < all.number_count; i++)
		add_id(ids, &n, RP_VIEW_MAX_NUMBERS, all.numbers[i].device);
	for (size_t i = 0; i < r->ev.text.oom_count; i++)
		if (r->ev.text.ooms[i].device >= 0)
			add_id(ids, &n, RP_VIEW_MAX_NUMBERS, r->ev.text.ooms[i].device);
	rp_view_free(&all);
	mr_buf list = {0};
	for (size_t i = 0; i < n; i++) {
		if (ids[i] == device) {
			mr_buf_free(&list);
			return MR_OK;
		}
		mr_buf_printf(&list, "%s%d", i ? ", " : "", (int)ids[i]);
	}
	const char *first = r->ev.input_count ? r->ev.inputs[0].path : "the evidence";
	st = n ? mr_fail(err, MR_EINPUT,
	                 "%s: --device %d: the evidence has no device %d (it has %s %s)", first,
	                 device, device, n == 1 ? "device" : "devices", list.data ? list.data : "")
	       : mr_fail(err, MR_EINPUT,
	                 "%s: --device %d: the evidence names no device (leave --device out)",
	                 first, device);
	mr_buf_free(&list);
	return st;
}
