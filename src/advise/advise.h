/* advise.h: findings and ranked recommendations, from the analysis and the recorded settings.
 *
 * Rules read numbers, never sample or file names. Prose lives in
 * templates/recommendations/<id>.md; what is here are the facts and the short reason with its
 * numbers, which every output format shows.
 *
 * Ownership: ad_advice owns its strings and arrays; ad_free releases them. */
#ifndef MR_ADVISE_H
#define MR_ADVISE_H

#include <stddef.h>
#include <stdint.h>

#include "advise/cause.h"
#include "analyze/analyze.h"

typedef enum { AD_INFO, AD_WARNING, AD_CRITICAL } ad_severity;

typedef struct {
	char id[40]; /* contract id: oom_fragmentation, memory_growth, ... */
	ad_severity severity;
	char *message; /* one or two sentences with the numbers */
} ad_finding;

typedef struct {
	char id[40];  /* contract id: expandable_segments, reduce_microbatch, ... */
	int rank;     /* 1 = do this first */
	char *title;  /* short imperative: "Turn on expandable segments" */
	char *reason; /* why, with the numbers */
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
	uint64_t limit;        /* bytes the allocator could have used; 0 = unknown */
	uint64_t reserved, allocated;
	ad_cause cause;
} ad_oom;

/* The categories of analyze.h, named for the advice's readers. */
enum {
	AD_CAT_PARAMETERS = AN_CAT_PARAMETERS,
	AD_CAT_GRADIENTS = AN_CAT_GRADIENTS,
	AD_CAT_OPTIMIZER = AN_CAT_OPTIMIZER,
	AD_CAT_ACTIVATIONS = AN_CAT_ACTIVATIONS,
	AD_CAT_OTHER = AN_CAT_OTHER,
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
	size_t divergence_event; /* where a replay parted from the recording */
	char divergence[48];     /* what differed there */
} ad_replay;

/* Replays far longer than this are left to `memreport simulate`: a report stays fast. */
enum { AD_EXACT_REPLAY_EVENTS = 300000 };

typedef struct {
	int32_t device; /* the device diagnosed, -1 when none (no snapshot) */
	char *verdict;  /* one sentence with its key number */
	ad_oom oom;
	ad_categories categories;
	ad_finding *findings;
	size_t finding_count;
	ad_recommendation *recs; /* sorted by rank */
	size_t rec_count;
	ad_replay replays[4]; /* empty unless an allocator setting is recommended */
	size_t replay_count;
	char replay_note[256]; /* why no prediction is shown, or how the limit was chosen */
} ad_advice;

const char *ad_severity_name(ad_severity s);
const char *ad_category_name(int cat); /* "parameters", "gradients", ... */
void ad_free(ad_advice *a);

#endif
