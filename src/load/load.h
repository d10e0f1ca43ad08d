/* load.h: the inputs of one run, read and merged into one evidence struct; nothing is analysed
 * here (report/report.h runs the analysis).
 *
 * Several inputs in one call describe one run: a snapshot gives the layout, a log or a
 * memory_summary() table adds what they know, a memory_stats() dump exact totals. Each input's
 * kind is found by decode/sniff.h, from its content.
 *
 * Ownership: an ld_evidence owns everything it holds (paths, the snapshot, the text evidence,
 * the stats); ld_free releases it, and is safe on a zeroed or failed ld_evidence. Nothing is
 * kept pointing into the input bytes. Nothing here prints: progress goes to the caller's
 * callback. */
#ifndef MR_LOAD_H
#define MR_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "decode/stats_json.h"
#include "decode/text.h"
#include "model/model.h"

typedef enum {
	LD_SNAPSHOT,
	LD_MEMORY_SUMMARY,
	LD_OOM_MESSAGE,
	LD_MEMORY_STATS,
} ld_kind;

/* The contract's word for a kind: "snapshot", "memory_summary", "oom_message", "memory_stats". */
const char *ld_kind_name(ld_kind k);

typedef struct {
	char *path;   /* as given on the command line, or the member's name in a run folder */
	ld_kind kind; /* detected from content */
} ld_input;

typedef struct {
	ld_input *inputs; /* the inputs that were evidence, in order (a run's snapshot first) */
	size_t input_count;
	int has_snapshot;
	md_snapshot snap;
	ev_text text; /* every memory_summary() table and OOM message, in input order */
	int has_stats;
	ev_stats stats; /* a memory_stats() dump */
} ld_evidence;

/* Called while a snapshot decodes, every few MiB, with the bytes read so far of total. */
typedef void (*ld_progress_fn)(void *ctx, size_t done, size_t total);

/* Reads every input ("-" is standard input) into *ev. Every one must be evidence: anything else
 * fails with MR_EINPUT, and every failure names the input. progress may be NULL. On failure
 * *ev is left freed. */
mr_status ld_load(ld_evidence *ev, const char *const *paths, size_t count, ld_progress_fn progress,
                  void *progress_ctx, mr_error *err);

/* Loads the members of one run (for `batch` and `diff`): names[i] is what the report shows as
 * the input's path, data[i] and lens[i] its bytes (borrowed: nothing is kept after the call).
 * Unlike ld_load, members that are none of the known kinds (a README, facts.json, a picture)
 * are skipped: run folders hold other files. It fails with MR_EINPUT, naming the member, when
 * a snapshot is unusable, or when no member is usable evidence. On failure *ev is left freed. */
mr_status ld_load_buffers(ld_evidence *ev, const char *const *names, const uint8_t *const *data,
                          const size_t *lens, size_t count, mr_error *err);

/* 1 when the bytes are evidence ld_load_buffers uses (a snapshot pickle, a memory_summary()
 * table or OOM message anywhere in a text, a memory_stats() JSON dump), with its kind. A
 * pickle is not decoded to tell. */
int ld_buffer_kind(const uint8_t *data, size_t len, ld_kind *kind);

void ld_free(ld_evidence *ev);

#endif
