/* shard_index.h: the rows a batch's index is built from, written as a shard index
 * (`index.shard-I-of-N.json`, schema memreport-shard/1) and read back.
 *
 * A batch discovers every run, reports the runs of its shard (the runs whose key hashes to I
 * modulo N, sx_shard_of), and writes their rows: the run's name, group, rank, iteration, output
 * name and inputs as discovery found them, the index-row facts (render/batch_index.h), and the
 * run's own memreport/1 document. `memreport merge` reads the shard indexes and builds the
 * index from the rows. An unsharded batch writes its rows as shard 0 of 1 into memory and reads
 * them back the same way, so its index and a merged one come from one function and are
 * byte-identical by construction.
 *
 * The reader treats the file as untrusted: keys in the order sx_write writes them, every value
 * of its type, the embedded documents well-formed JSON (checked without recursion), nothing
 * after the end; a mistake is MR_EINPUT "FILE: byte N: expected ...". Strings are read back
 * exactly, except that invalid UTF-8 was already written as U+FFFD.
 *
 * Ownership: sx_parse fills an sx_doc that sx_doc_free releases; the rows' documents (json)
 * point into the bytes parsed, which must outlive the doc. sx_write only reads. */
#ifndef MR_SHARD_INDEX_H
#define MR_SHARD_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"
#include "base/error.h"
#include "load/discover.h"
#include "render/batch_index.h"

/* What shapes the index besides the rows: every shard of one batch must agree on it. */
typedef struct {
	const char *const *inputs;
	size_t input_count;
	int device; /* -1: all */
	int redact_paths;
	const char *templates; /* NULL: the built-in ones */
} sx_shape;

/* One run's row: the run (members carry names only), and how its report went. */
typedef struct {
	uint64_t position; /* in discovery order, among every run of the batch */
	char *key;         /* sx_key of the run */
	ar_run run;
	int done;         /* reported: row and json hold */
	int status;       /* 0 when done, else the exit status its failure makes (1 or 2) */
	char *error;      /* when not done: why */
	ix_row row;       /* when done */
	const char *json; /* the run's memreport/1 document, into the parsed bytes; NULL: none */
	size_t json_len;
} sx_row;

typedef struct {
	unsigned index, count; /* shard I of N */
	char *version;         /* the memreport that wrote it */
	const char *shape;     /* the "shape" object's bytes, into the parsed bytes */
	size_t shape_len;
	char **inputs; /* from the shape */
	size_t input_count;
	char *templates;     /* from the shape; NULL: the built-in ones */
	uint64_t runs_total; /* runs the batch discovered, in every shard */
	char runs_digest[33];
	sx_row *rows; /* in position order */
	size_t row_count;
} sx_doc;

/* The key a run is sharded by: its input's position and its group (the run's path inside
 * that input; every rank and iteration of a run shares it). Malloc'd; NULL on OOM. */
char *sx_key(const ar_run *run);
/* The shard of a key: FNV-1a 64 of the key, modulo count. */
unsigned sx_shard_of(const char *key, unsigned count);
/* The digest of the runs discovered (names, groups, output names, inputs, in order), hex. */
void sx_runs_digest(const ar_set *set, char out[33]);

/* The lines of the set's runs whose take[i] is set, as shard index of count. lines and status
 * follow the set's runs; status[i] is the exit status of a run that failed (1 or 2). */
mr_status sx_write(mr_buf *out, unsigned index, unsigned count, const sx_shape *shape,
                   const ar_set *set, const unsigned char *take, const ix_line *lines,
                   const int *status, mr_error *err);

/* Reads a shard index; `file` names it in messages. */
mr_status sx_parse(const char *file, const char *data, size_t len, sx_doc *out, mr_error *err);
void sx_doc_free(sx_doc *doc);

/* The index's runs and lines from rows[0..n) in position order (what rd_index_json and
 * rd_index_html read): set->runs and lines are allocated (free both arrays with free(); the
 * strings stay the rows'). */
mr_status sx_index_view(const sx_row *const *rows, size_t n, ar_set *set, ix_line **lines,
                        mr_error *err);

#endif
