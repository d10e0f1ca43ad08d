/* report.h: one run's evidence, loaded from one or more inputs, and the renderers.
 *
 * Several inputs in one call describe one run: a snapshot gives the layout, a log or a
 * memory_summary() table adds what they know. Renderers read an rp_run and append to an
 * mr_buf; they never print.
 *
 * Ownership: rp_run owns everything it holds; rp_free releases it. */
#ifndef MR_REPORT_H
#define MR_REPORT_H

#include <stddef.h>

#include "advise/advise.h"
#include "analyze/analyze.h"
#include "base/buf.h"
#include "base/error.h"
#include "decode/stats_json.h"
#include "decode/text.h"
#include "model/model.h"

typedef enum {
	RP_SNAPSHOT,
	RP_MEMORY_SUMMARY,
	RP_OOM_MESSAGE,
	RP_MEMORY_STATS,
} rp_kind;

typedef struct {
	char *path;   /* as given on the command line */
	rp_kind kind; /* detected from content */
} rp_input;

typedef struct {
	rp_input *inputs;
	size_t input_count;
	int has_snapshot;
	md_snapshot snap;
	an_result an;
	ev_text text; /* every memory_summary() table and OOM message, in input order */
	int has_stats;
	ev_stats stats;    /* a memory_stats() dump */
	int show_progress; /* a large input on a terminal: say what each stage does */
	ad_advice advice;  /* always computed, whatever the inputs */
	/* Per device of `an`: the recorded settings replayed (conf "" when not run: no trace, or
	 * more than AD_EXACT_REPLAY_EVENTS events). */
	ad_replay *recorded;
} rp_run;

typedef struct {
	int device;            /* -1: every device */
	int redact_paths;      /* --redact-paths */
	int quiet;             /* -q: no progress */
	const char *templates; /* --templates DIR, or NULL */
} rp_options;

/* Reads one of the options every report-writing command shares (--device N, --redact-paths,
 * -q, --templates DIR) at argv[*i]. Returns 1 when it was one (and *i is past its value), 0 when
 * it was not, -1 when its value is bad (the message is in err). */
int rp_parse_option(rp_options *opt, int argc, char **argv, int *i, mr_error *err);

/* Per-device numbers from text evidence (no snapshot): exact from a memory_stats() dump, lower
 * bounds from the last memory_summary() table of each device. */
typedef struct {
	int32_t device;
	rp_kind source;
	uint64_t reserved, allocated, active, requested, inactive_split, inactive_split_blocks,
	    segments, peak_allocated, peak_reserved;
	int has_requested, has_peaks;
	uint64_t precision; /* 1: exact; else each byte value v means [v, v + precision) */
} rp_numbers;

/* Fills out[0..max) and returns how many devices the text evidence describes. */
size_t rp_text_devices(const rp_run *run, rp_numbers *out, size_t max);

/* Reads every input into one run. On failure the message names the input. */
mr_status rp_load(rp_run *run, const char *const *paths, size_t count, const rp_options *opt,
                  mr_error *err);
void rp_free(rp_run *run);

/* Loads the members of one run (for `batch` and `diff`): names[i] is what the report shows as
 * the input's path, data[i] and lens[i] its bytes (borrowed: nothing is kept after the call).
 * Unlike rp_load, which treats every argument as evidence, members that are none of the known
 * kinds (a README, facts.json, a picture) are skipped: run folders hold other files. It fails
 * with MR_EINPUT, naming the member, when a snapshot is unusable, or when no member is usable
 * evidence. On failure *run is left freed. */
mr_status rp_load_buffers(rp_run *run, const char *const *names, const uint8_t *const *data,
                          const size_t *lens, size_t count, const rp_options *opt, mr_error *err);

/* 1 when the bytes are evidence rp_load_buffers uses (a snapshot pickle, a memory_summary()
 * table or OOM message anywhere in a text, a memory_stats() JSON dump), with its kind. */
int rp_buffer_kind(const uint8_t *data, size_t len, rp_kind *kind);

const char *rp_kind_name(rp_kind k);

/* Diagnosis of a loaded run (advise.c): verdict, OOM cause, categories, findings, ranked
 * recommendations. */
mr_status ad_advise(const rp_run *run, const rp_options *opt, ad_advice *out, mr_error *err);
/* Replays the recorded trace under each recommended allocator setting (after ad_advise) and
 * quotes the result in the recommendation's reason. */
mr_status ad_replay_settings(const rp_run *run, ad_advice *a, mr_error *err);
/* Replays each device's trace under its recorded settings (both cores) before the diagnosis:
 * where the replay reproduces a complete trace, the device's peaks become exact. */
mr_status ad_replay_recorded(rp_run *run, mr_error *err);

/* Renderers: append the whole report to out. */
mr_status rp_render_json(const rp_run *run, const rp_options *opt, mr_buf *out, mr_error *err);
mr_status rp_render_text(const rp_run *run, const rp_options *opt, mr_buf *out, mr_error *err);
mr_status rp_render_html(const rp_run *run, const rp_options *opt, mr_buf *out, mr_error *err);
mr_status rp_render_md(const rp_run *run, const rp_options *opt, mr_buf *out, mr_error *err);

/* A frame's file name as reports show it: with --redact-paths, home folders, user names and
 * host-specific prefixes become neutral placeholders. Writes into buf, returns buf. */
const char *rp_path(const rp_options *opt, const char *path, char *buf, size_t bufsz);

#endif
