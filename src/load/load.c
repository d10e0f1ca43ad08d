/* load.c: reading the inputs of one run and merging what they say. */
#include "load/load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "base/addrmap.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/hash128.h"
#include "base/mem.h"
#include "base/units.h"
#include "decode/snapshot.h"
#include "decode/sniff.h"
#include "source/compressed.h"
#include "source/input.h"
#include "source/limits.h"

const char *ld_kind_name(ld_kind k)
{
	switch (k) {
	case LD_SNAPSHOT: return "snapshot";
	case LD_MEMORY_SUMMARY: return "memory_summary";
	case LD_OOM_MESSAGE: return "oom_message";
	default: return "memory_stats";
	}
}

/* A message's figures and flags, its line and process list aside. */
enum { OOM_FIELDS = 21 };
static void oom_fields(const ev_oom *o, uint64_t f[OOM_FIELDS])
{
	const uint64_t v[OOM_FIELDS] = {o->requested_bytes,
	                                o->total_capacity,
	                                o->device_free,
	                                o->allowed,
	                                o->this_process_in_use,
	                                o->allocated_by_pytorch,
	                                o->reserved_unallocated,
	                                o->private_pools,
	                                o->reserved_total,
	                                (uint64_t)o->has_requested,
	                                (uint64_t)o->has_total_capacity,
	                                (uint64_t)o->has_device_free,
	                                (uint64_t)o->has_allowed,
	                                (uint64_t)o->has_this_process,
	                                (uint64_t)o->has_allocated,
	                                (uint64_t)o->has_reserved_unallocated,
	                                (uint64_t)o->has_private_pools,
	                                (uint64_t)o->has_reserved_total,
	                                (uint64_t)o->requested_more_than_1eb,
	                                (uint64_t)(int64_t)o->era,
	                                (uint64_t)(int64_t)o->device};
	memcpy(f, v, sizeof v);
}

/* Whether two messages say the same, wherever they were found (their lines aside). */
static int same_oom(const ev_oom *a, const ev_oom *b)
{
	uint64_t fa[OOM_FIELDS], fb[OOM_FIELDS];
	oom_fields(a, fa);
	oom_fields(b, fb);
	if (memcmp(fa, fb, sizeof fa) || strcmp(a->backend, b->backend) ||
	    strcmp(a->status, b->status) || a->other_process_count != b->other_process_count)
		return 0;
	for (size_t i = 0; i < a->other_process_count; i++)
		if (a->other_processes[i].pid != b->other_processes[i].pid ||
		    a->other_processes[i].bytes != b->other_processes[i].bytes)
			return 0;
	return 1;
}

/* A key for a message's content (never UINT64_MAX, which am_map cannot hold). */
static uint64_t oom_key(const ev_oom *o)
{
	uint64_t f[OOM_FIELDS];
	oom_fields(o, f);
	h128_state h;
	h128_init(&h, 0);
	h128_update(&h, f, sizeof f);
	h128_str(&h, o->backend);
	h128_str(&h, o->status);
	h128_digest d;
	h128_final(&h, &d);
	uint64_t k;
	memcpy(&k, d.bytes, sizeof k);
	return k == UINT64_MAX ? 0 : k;
}

/* Moves the tables and messages of src to the end of dst; src keeps only what it must free.
 * A message an earlier input already holds is the same one twice (train.log and the
 * oom_message.txt cut from it): it is kept once. Repeats inside one input are real. */
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
	dst->summary_count += src->summary_count;
	/* the earlier inputs' messages by content: one look-up a message, not a scan */
	am_map earlier = {0};
	uint64_t at;
	for (size_t i = 0; i < dst->oom_count; i++)
		if (am_put(&earlier, oom_key(&oo[i]), i)) {
			am_free(&earlier);
			return mr_oom(err);
		}
	for (size_t i = 0; i < src->oom_count; i++) {
		if (am_get(&earlier, oom_key(&src->ooms[i]), &at) &&
		    same_oom(&oo[at], &src->ooms[i])) {
			/* the message cut out alone has lost its traceback: the log's copy has it
			 */
			ev_oom *kept = &oo[at], *o = &src->ooms[i];
			if (!kept->raised.line) {
				kept->raised = o->raised;
				kept->user = o->user;
			}
			continue; /* its process list stays with src, freed with it */
		}
		oo[dst->oom_count++] = src->ooms[i];
		/* the message's process list now belongs to dst */
		src->ooms[i].other_processes = NULL;
		src->ooms[i].other_process_count = 0;
	}
	am_free(&earlier);
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
	in_data *in; /* the mapped input, for dropping pages already read; may be NULL */
	ld_progress_fn progress;
	void *progress_ctx;
} add_ctx;

static mr_status skip_or_fail(const add_ctx *ac, mr_error *err, const char *why)
{
	return ac->strict ? mr_fail(err, MR_EINPUT, "%s", why) : MR_OK;
}

/* The decoder's progress: pages already decoded are given back, and the caller is told. */
static void on_progress(void *ctx, size_t done, size_t total)
{
	const add_ctx *ac = ctx;
	in_drop_before(ac->in, done > (1u << 20) ? done - (1u << 20) : 0);
	if (ac->progress)
		ac->progress(ac->progress_ctx, done, total);
}

static mr_status add_snapshot(ld_evidence *ev, const uint8_t *data, size_t len, const add_ctx *ac,
                              mr_error *err)
{
	mr_status st;
	if (ev->has_snapshot)
		return mr_fail(err, MR_EINPUT,
		               "a second snapshot in one run (give several runs to `memreport "
		               "batch`, or compare two with `memreport diff`)");
	if (ac->strict && (st = check_memory(len, err)))
		return st;
	if (ac->in && ac->in->data == data)
		in_read_ahead(ac->in);
	st = sn_load(data, len, &ev->snap, ac->in ? on_progress : NULL, (void *)ac, err);
	if (ac->in)
		in_read_ahead_stop(ac->in);
	if (st)
		return st;
	ev->has_snapshot = 1;
	return MR_OK;
}

/* A memory_stats() dump; *used is 0 when the JSON is something else (in a lenient load). */
static mr_status add_stats(ld_evidence *ev, const uint8_t *data, size_t len, const add_ctx *ac,
                           int *used, mr_error *err)
{
	ev_stats stats;
	mr_error perr = {0};
	*used = 0;
	if (ev_parse_stats_json((const char *)data, len, &stats, &perr))
		return ac->strict ? mr_fail(err, perr.status, "%s", perr.msg) : MR_OK;
	if (!is_memory_stats(&stats) || ev->has_stats) {
		ev_stats_free(&stats);
		return skip_or_fail(ac, err,
		                    ev->has_stats ? "a second memory_stats() dump in one run"
		                                  : "JSON, but not a memory_stats() dump (no "
		                                    "allocated_bytes.all.current or "
		                                    "reserved_bytes.all.current)");
	}
	ev->stats = stats;
	ev->has_stats = 1;
	*used = 1;
	return MR_OK;
}

/* Tables and OOM messages of a text; *kind says which it mostly is. */
static mr_status add_text(ld_evidence *ev, const uint8_t *data, size_t len, const add_ctx *ac,
                          ld_kind *kind, int *used, mr_error *err)
{
	ev_text text;
	mr_error perr = {0};
	*used = 0;
	if (ev_parse_text((const char *)data, len, &text, &perr))
		return ac->strict || perr.status != MR_EINPUT
		           ? mr_fail(err, perr.status, "%s", perr.msg)
		           : MR_OK;
	*kind = text.oom_count ? LD_OOM_MESSAGE : LD_MEMORY_SUMMARY;
	mr_status st = merge_text(&ev->text, &text, err);
	ev_text_free(&text);
	*used = st == MR_OK;
	return st;
}

/* Adds one buffer's evidence to the run, under the name the reports show. */
static mr_status add_plain(ld_evidence *ev, const char *name, const uint8_t *data, size_t len,
                           const add_ctx *ac, mr_error *err)
{
	ld_kind kind = LD_SNAPSHOT;
	mr_status st = MR_OK;
	int used = 1;
	if (len == 0)
		return skip_or_fail(ac, err, "the file is empty");
	switch (dc_sniff(data, len)) {
	case DC_PICKLE: st = add_snapshot(ev, data, len, ac, err); break;
	case DC_JSON:
		kind = LD_MEMORY_STATS;
		st = add_stats(ev, data, len, ac, &used, err);
		break;
	case DC_TEXT: st = add_text(ev, data, len, ac, &kind, &used, err); break;
	case DC_GZIP:
	case DC_XZ: return skip_or_fail(ac, err, "compressed twice: unpack it once first");
	case DC_ZIP:
		return skip_or_fail(ac, err,
		                    "a compressed zip archive: unpack it, and give the zip itself");
	default:
		return skip_or_fail(ac, err,
		                    "binary data that is not a pickle (protocol 2 to 5), nor text");
	}
	if (st || !used)
		return st;
	ld_input *slot = &ev->inputs[ev->input_count];
	slot->kind = kind;
	slot->path = mr_strdup(name);
	if (!slot->path)
		return mr_oom(err);
	ev->input_count++;
	/* In a run folder the snapshot is listed first, as the run's main input. */
	if (!ac->strict && kind == LD_SNAPSHOT && ev->input_count > 1) {
		ld_input snap = *slot;
		memmove(ev->inputs + 1, ev->inputs, (ev->input_count - 1) * sizeof *slot);
		ev->inputs[0] = snap;
	}
	return MR_OK;
}

/* Adds one buffer's evidence; a gzip or xz buffer is inflated first, within the limits of a
 * zip member (source/limits.h), and what it holds is added. */
static mr_status add_buffer(ld_evidence *ev, const char *name, const uint8_t *data, size_t len,
                            const add_ctx *ac, mr_error *err)
{
	dc_kind kind = dc_sniff(data, len);
	if (kind != DC_GZIP && kind != DC_XZ)
		return add_plain(ev, name, data, len, ac, err);
	sr_limits lim;
	sr_default_limits(&lim);
	in_data plain;
	mr_status st = sr_inflate(kind == DC_GZIP ? SR_GZIP : SR_XZ, data, len, &lim, &plain, err);
	if (st)
		return st;
	add_ctx inner = *ac;
	inner.in = &plain; /* pages of the compressed file are not the decoder's to drop */
	st = add_plain(ev, name, plain.data, plain.len, &inner, err);
	in_release(&plain);
	return st;
}

/* The same, with the failure named after the input. */
static mr_status add_named(ld_evidence *ev, const char *name, const uint8_t *data, size_t len,
                           const add_ctx *ac, mr_error *err)
{
	mr_error local = {0};
	mr_status st = add_buffer(ev, name, data, len, ac, &local);
	return st ? mr_fail(err, st, "%s: %s", name, local.msg) : MR_OK;
}

static mr_status begin(ld_evidence *ev, size_t count, mr_error *err)
{
	memset(ev, 0, sizeof *ev);
	ev->inputs = mr_alloc_array(count ? count : 1, sizeof *ev->inputs);
	return ev->inputs ? MR_OK : mr_oom(err);
}

mr_status ld_load(ld_evidence *ev, const char *const *paths, size_t count, ld_progress_fn progress,
                  void *progress_ctx, mr_error *err)
{
	mr_status st = begin(ev, count, err);
	for (size_t i = 0; i < count && !st; i++) {
		mr_error local = {0}, changed = {0};
		in_data in;
		if ((st = in_read(paths[i], &in, &local))) {
			mr_fail(err, st, "%s: %s", paths[i], local.msg);
			break;
		}
		add_ctx ac = {1, &in, progress, progress_ctx};
		st = add_buffer(ev, paths[i], in.data, in.len, &ac, &local);
		/* A file cut while it was decoded explains whatever the decoder said about it. */
		if (in_check(&in, &changed))
			st = changed.status, local = changed;
		in_release(&in);
		if (st)
			mr_fail(err, st, "%s: %s", paths[i], local.msg);
	}
	if (st)
		ld_free(ev);
	return st;
}

/* The failure of a run folder without evidence: its first few file names. */
static mr_status no_evidence(const char *const *names, size_t count, mr_error *err)
{
	mr_buf list = {0};
	for (size_t i = 0; i < count && i < 8; i++)
		mr_buf_printf(&list, "%s%s", i ? ", " : "", names[i]);
	if (count > 8)
		mr_buf_puts(&list, ", ...");
	mr_status st = mr_fail(err, MR_EINPUT,
	                       "no snapshot pickle, memory_summary() table, OOM message or "
	                       "memory_stats() JSON among: %s",
	                       list.data ? list.data : "(no files)");
	mr_buf_free(&list);
	return st;
}

mr_status ld_load_buffers(ld_evidence *ev, const char *const *names, const uint8_t *const *data,
                          const size_t *lens, size_t count, mr_error *err)
{
	add_ctx ac = {0, NULL, NULL, NULL};
	mr_status st = begin(ev, count, err);
	for (size_t i = 0; i < count && !st; i++)
		st = add_named(ev, names[i], data[i], lens[i], &ac, err);
	if (!st && ev->input_count == 0)
		st = no_evidence(names, count, err);
	if (st)
		ld_free(ev);
	return st;
}

int ld_buffer_kind(const uint8_t *data, size_t len, ld_kind *kind)
{
	ld_evidence probe;
	add_ctx ac = {0, NULL, NULL, NULL};
	mr_error err = {0};
	/* Only cheap checks for pickles: the decoder is not run to classify (nor, for a
	 * compressed one, more than its first bytes inflated). */
	dc_kind k = dc_sniff(data, len);
	uint8_t head[DC_SNIFF_BYTES];
	int64_t got = k == DC_GZIP || k == DC_XZ ? sr_inflate_head(k == DC_GZIP ? SR_GZIP : SR_XZ,
	                                                           data, len, head, sizeof head)
	                                         : -1;
	if (k == DC_PICKLE || (got > 0 && dc_sniff(head, (size_t)got) == DC_PICKLE)) {
		*kind = LD_SNAPSHOT;
		return 1;
	}
	if (begin(&probe, 1, &err))
		return 0;
	int used = add_buffer(&probe, "", data, len, &ac, &err) == MR_OK && probe.input_count;
	if (used)
		*kind = probe.inputs[0].kind;
	ld_free(&probe);
	return used;
}

void ld_free(ld_evidence *ev)
{
	for (size_t i = 0; i < ev->input_count; i++)
		free(ev->inputs[i].path);
	free(ev->inputs);
	ev_text_free(&ev->text);
	if (ev->has_stats)
		ev_stats_free(&ev->stats);
	if (ev->has_snapshot)
		md_free(&ev->snap);
	memset(ev, 0, sizeof *ev);
}
