/* advice.h: what the diagnosis says about a run: its verdict, the OOM facts, findings, ranked
 * recommendations and the allocator replays that test them; and the few functions every rule
 * uses to add to it.
 *
 * Text is data: the short reason with its numbers, which every output format shows (longer
 * prose lives in templates/recommendations/<id>.md). File paths that a text quotes are kept as
 * recorded and marked (ad_paths), so that renderers can apply --redact-paths: nothing below
 * render/ knows about redaction.
 *
 * Ownership: ad_advice owns its strings and arrays; ad_free releases them (and is safe on a
 * zeroed ad_advice). An ad_text owns its buffer until a finding or a recommendation takes it. */
#ifndef MR_ADVICE_H
#define MR_ADVICE_H

#include <stddef.h>
#include <stdint.h>

#include "advise/cause.h"
#include "advise/plan.h"
#include "analyze/analyze.h"
#include "base/buf.h"

typedef enum { AD_INFO, AD_WARNING, AD_CRITICAL } ad_severity;

/* A file path inside a text: text[offset, offset + len). */
typedef struct {
	uint32_t offset, len;
} ad_span;

enum { AD_MAX_PATHS = 2 };

/* The paths a text quotes, in text order. */
typedef struct {
	ad_span at[AD_MAX_PATHS];
	uint32_t count;
} ad_paths;

typedef struct {
	char id[40]; /* contract id: oom_fragmentation, memory_growth, ... */
	ad_severity severity;
	char *message;  /* one or two sentences with the numbers */
	ad_paths paths; /* file paths the message quotes */
} ad_finding;

typedef struct {
	char id[40];  /* contract id: expandable_segments, reduce_microbatch, ... */
	int rank;     /* 1 = do this first */
	char *title;  /* short imperative: "Turn on expandable segments" */
	char *reason; /* why, with the numbers */
	ad_paths reason_paths;
	char *change; /* the exact change: an environment line or a code line; may be NULL */
} ad_recommendation;

typedef struct {
	int present;
	int32_t device;
	uint64_t requested;    /* rounded request of the failed allocation */
	uint64_t free_cached;  /* free cached bytes usable for it (same stream and pool) */
	uint64_t largest_free; /* largest such block */
	int largest_unknown;   /* a log alone does not show the layout */
	uint64_t free_pieces;  /* how many such blocks */
	uint64_t limit;        /* what this process could have had: the memory fraction, else what
	                          it held plus what the device had free; 0 = unknown */
	uint64_t reserved, allocated;
	ad_cause cause;
	int by_growth; /* capacity, filled by memory that grew every iteration: the verdict says a
	                  leak or kept autograd graphs */
	int rebuilt;   /* what grew is one tensor made anew, larger, every iteration (growth.c) */
	/* Figures the evidence does not give (a message without sizes; MPS has no reserved
	 * total): AD_OOM_NO_* bits. Those fields are 0 and are shown as null or "unknown". */
	unsigned unknown;
	/* Who held the device (outside.c), from the trace's oom event and the message. */
	int device_full; /* the device had no room for the segment: not a memory fraction */
	int has_device_free, has_non_pytorch, has_others;
	uint64_t device_free;
	uint64_t non_pytorch;    /* this process's memory outside PyTorch's allocator */
	uint64_t others;         /* other processes' (listed, else total - free - this process) */
	uint64_t outside_grew;   /* with no message: how much more of the device was held outside
	                            PyTorch at the OOM than when the trace's peak was reserved
	                            (0: none seen) */
	ev_process processes[8]; /* the other processes the message lists */
	size_t process_count;
	int has_self_listed;       /* the message lists this process as another (ad_listed_self) */
	ev_process self_listed;    /* that entry */
	uint64_t self_listed_held; /* what PyTorch held then */
	uint64_t shared_others, shared_held; /* a full device that other processes share, though
	                                        less than PyTorch holds (0: not so) */
	char logits[192]; /* what the logits are to the failed request, in words (the logits
	                     rule), "" when it did not fire */
} ad_oom;

enum {
	AD_OOM_NO_REQUESTED = 1,
	AD_OOM_NO_FREE_CACHED = 2,
	AD_OOM_NO_RESERVED = 4,
	AD_OOM_NO_ALLOCATED = 8,
};

/* The categories of analyze.h, named for the advice's readers. */
enum {
	AD_CAT_PARAMETERS = AN_CAT_PARAMETERS,
	AD_CAT_GRADIENTS = AN_CAT_GRADIENTS,
	AD_CAT_OPTIMIZER = AN_CAT_OPTIMIZER,
	AD_CAT_ACTIVATIONS = AN_CAT_ACTIVATIONS,
	AD_CAT_OTHER = AN_CAT_OTHER,
	AD_CAT_UNKNOWN = AN_CAT_UNKNOWN,
	AD_CAT_COUNT = AN_CAT_COUNT
};

typedef struct {
	int present;
	uint64_t bytes[AD_CAT_COUNT];
	const char *moment; /* "oom", "snapshot" */
	int peak_present;
	uint64_t peak[AD_CAT_COUNT]; /* live at the trace's allocated peak */
} ad_categories;

/* One replay of the trace through the allocator model (sim.h): the recorded settings first,
 * then each recommended allocator change. */
typedef struct {
	char conf[128]; /* alloc-conf replayed; "recorded" for the recorded settings */
	int matches;    /* recorded settings only: the replay reproduced the recording */
	int oom;        /* the replay ran out of memory under `limit` */
	uint64_t limit; /* 0: none */
	uint64_t peak_reserved, peak_allocated;
	size_t peak_allocated_event, peak_reserved_event;
	size_t divergence_event; /* where a replay parted from the recording */
	char divergence[48];     /* what differed there */
	int truncated;           /* the trace's window starts mid-run: replayed from the layout the
	                            recorded settings had made by then */
} ad_replay;

/* The moment a figure is from: the snapshot's, the trace's peak, the OOM's. */
typedef enum { AD_MOMENT_SNAPSHOT, AD_MOMENT_PEAK, AD_MOMENT_OOM } ad_moment;
const char *ad_moment_name(ad_moment m); /* "snapshot", "peak", "oom" */

typedef struct {
	int32_t device;           /* the device diagnosed, -1 when none (no snapshot) */
	char *verdict;            /* one sentence with its key number */
	ad_moment verdict_moment; /* the moment the verdict speaks of */
	ad_oom oom;
	ad_categories categories;
	ad_finding *findings;
	size_t finding_count, finding_cap;
	ad_recommendation *recs; /* sorted by rank */
	size_t rec_count, rec_cap;
	ad_replay replays[4]; /* empty unless an allocator setting is recommended */
	size_t replay_count;
	char replay_note[256]; /* why no prediction is shown, or how the limit was chosen */
	char *what_ran;        /* one line: the kind of run and what it had on ("" unknown) */
	uint64_t growth_alive; /* what growth across iterations has left alive (growth.h
	                          ad_measure_growth); 0 without growth */
	ad_capacity capacity;  /* the microbatch that fits the budget (plan.h) */
	char *capacity_line;   /* one line: that plan in words ("" without a budget) */
} ad_advice;

const char *ad_severity_name(ad_severity s);
/* The OOM's cause in words for prose: the contract's word, and for a capacity OOM that memory
 * growing every iteration filled, that too. */
const char *ad_oom_cause_words(const ad_oom *o);
const char *ad_category_name(int cat); /* "parameters", "gradients", ... */
void ad_free(ad_advice *a);

/* A category "dominates" live memory from half of it (the rules and the verdict agree). */
enum { AD_DOMINANT_PERCENT = 50 };
/* part as a rounded percentage of whole (0 when whole is 0). */
int ad_pct(uint64_t part, uint64_t whole);
/* Live bytes over every category. */
uint64_t ad_live_total(const uint64_t cat[AN_CAT_COUNT]);

/* ---- adding to the advice ---------------------------------------------------------------- */

/* Text being written: printf pieces, and the paths it quotes. A zeroed ad_text is empty. */
typedef struct {
	mr_buf b;
	ad_paths paths;
} ad_text;

void ad_text_printf(ad_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends a file path as recorded, and marks it. */
void ad_text_path(ad_text *t, const char *path);
void ad_text_free(ad_text *t);

/* The first finding with this id, or NULL. */
const ad_finding *ad_finding_of(const ad_advice *a, const char *id);
/* Appends a finding made of t (taken over, left empty). Returns 0, -1 when memory ran out. */
int ad_add_finding(ad_advice *a, const char *id, ad_severity sev, ad_text *t);
int ad_add_findingf(ad_advice *a, const char *id, ad_severity sev, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Appends a recommendation (rank 0 until ranked) with the reason t (taken over); change may be
 * NULL. Returns 0, -1 when memory ran out. */
int ad_add_rec(ad_advice *a, const char *id, const char *title, const char *change, ad_text *t);
/* Appends more to a recommendation's reason (its marked paths stay where they are). */
int ad_append_reason(ad_recommendation *r, const char *more);
/* Removes recommendation k; the others keep their order. */
void ad_remove_rec(ad_advice *a, size_t k);

#endif
