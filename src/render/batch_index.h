/* batch_index.h: the index of a batch: one row per run or rank, with the facts that let a
 * reader compare runs (settings, peaks, fragmentation, OOM cause, first recommendation) and
 * the run's own memreport/1 document. JSON (schema memreport-batch/1) and an HTML table,
 * sortable, and complete without its script.
 *
 * Ownership: ix_row_of allocates the row's strings, which ix_row_free releases; the renderers
 * read the lines and append to a caller-owned mr_buf. */
#ifndef MR_BATCH_INDEX_H
#define MR_BATCH_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "load/discover.h"
#include "render/options.h"
#include "report/report.h"

/* The facts of one run, as its row shows them. */
typedef struct {
	char *settings; /* PYTORCH_CUDA_ALLOC_CONF as recorded, "" when none */
	int has_snapshot;
	int has_peaks;            /* peaks recorded (a trace, a memory_stats() dump) */
	uint64_t peak_reserved;   /* with has_peaks; else reserved at the snapshot */
	uint64_t peak_allocated;  /* with has_peaks; else allocated at the snapshot */
	double fragmentation;     /* of the device with the most reserved memory; < 0 unknown */
	uint64_t device_count;    /* devices shown */
	char *oom_cause;          /* NULL: no OOM recorded */
	char *rec_id, *rec_title; /* first recommendation; NULL: none */
	char *verdict;            /* NULL or "" when none */
} ix_row;

mr_status ix_row_of(const rp_report *run, const rd_options *opt, ix_row *row, mr_error *err);
void ix_row_free(ix_row *row);

/* One run of the index (the rows follow the ar_set's runs, in order). */
typedef struct {
	int done;          /* reported: row and json hold */
	const char *error; /* else why not; NULL: "not processed" */
	const ix_row *row;
	const char *json; /* the run's memreport/1 document */
	size_t json_len;
} ix_line;

/* A run's memreport/1 document as the index embeds it: without its trailing newline; null when
 * empty. */
void ix_put_document(mr_buf *b, const char *json, size_t len);

mr_status rd_index_json(const ar_set *set, const ix_line *lines, mr_buf *out, mr_error *err);
mr_status rd_index_html(const ar_set *set, const ix_line *lines, mr_buf *out, mr_error *err);

#endif
