/* test_batch.c: run discovery (folders, naming conventions, zip archives, hostile archives),
 * the cache (round trip, corruption, staleness) and `memreport batch` over the corpus. */
#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zip.h>

#include "testutil.h"

#include "decode/sniff.h"
#include "load/discover.h"
#include "load/names.h"
#include "source/zip.h"
#include "cmd/cache.h"
#include "cmd/cmd_batch.h"
#include "base/error.h"
#include "base/mem.h"
#include "base/buf.h"

/* ---- helpers ---------------------------------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void rm_tree(const char *dir)
{
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static char *make_tmp(void)
{
	char *t = strdup("/tmp/mr_test_batch_XXXXXX");
	assert_non_null(t);
	assert_non_null(mkdtemp(t));
	return t;
}

static void write_file(const char *path, const void *data, size_t len)
{
	/* make the parent folders */
	char buf[2048];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p == '/') {
			*p = 0;
			mkdir(buf, 0755);
			*p = '/';
		}
	}
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static void copy_file(const char *from, const char *to)
{
	size_t len = 0;
	unsigned char *data = tu_read(from, &len);
	assert_non_null(data);
	write_file(to, data, len);
	free(data);
}

static size_t count_str(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static const ar_run *find_run(const ar_set *set, const char *name)
{
	for (size_t i = 0; i < set->count; i++)
		if (strcmp(set->runs[i].name, name) == 0)
			return &set->runs[i];
	return NULL;
}

static int run_batch(const char **args, size_t n)
{
	char *argv[192];
	int argc = 0;
	argv[argc++] = (char *)"batch";
	for (size_t i = 0; i < n && argc < 191; i++)
		argv[argc++] = (char *)args[i];
	argv[argc] = NULL;
	return cmd_batch(argc, argv);
}

/* ---- sniffing and names ------------------------------------------------------------------- */

static void test_sniff_and_names(void **state)
{
	(void)state;
	const uint8_t pk[] = {0x80, 0x04, 0x95, 0, 0};
	const uint8_t old[] = {0x80, 0x01};
	const uint8_t zip[] = {'P', 'K', 3, 4, 0};
	const uint8_t json[] = " \n{\"a\": 1}";
	const uint8_t text[] = "Tried to allocate 2.00 GiB\n";
	const uint8_t xz[] = {0xfd, '7', 'z', 'X', 'Z', 0, 1, 2};
	const uint8_t gz[] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0};
	const uint8_t bin[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0};
	assert_int_equal(dc_sniff(pk, sizeof pk), DC_PICKLE);
	/* PROTO of a protocol no snapshot uses: not a pickle; without a NUL, text (not evidence) */
	assert_int_equal(dc_sniff(old, sizeof old), DC_TEXT);
	assert_int_equal(dc_sniff(zip, sizeof zip), DC_ZIP);
	assert_int_equal(dc_sniff(json, sizeof json - 1), DC_JSON);
	assert_int_equal(dc_sniff(text, sizeof text - 1), DC_TEXT);
	assert_int_equal(dc_sniff(bin, sizeof bin), DC_BINARY);
	/* compressed: what they hold is sniffed once inflated */
	assert_int_equal(dc_sniff(xz, sizeof xz), DC_XZ);
	assert_int_equal(dc_sniff(gz, sizeof gz), DC_GZIP);
	assert_int_equal(dc_sniff(xz, 5), DC_TEXT); /* too short for the magic, no NUL */

	assert_int_equal(ar_rank_of("snapshot_3.pickle"), 3);
	assert_int_equal(ar_rank_of("oom_rank12.pickle"), 12);
	assert_int_equal(ar_rank_of("rank7"), 7);
	assert_int_equal(ar_rank_of("rank_2"), 2);
	assert_int_equal(ar_rank_of("train_rank1.log"), 1);
	assert_int_equal(ar_rank_of("memory_snapshot-0.pickle"), 0);
	assert_int_equal(ar_rank_of("snapshot.pickle"), -1);
	assert_int_equal(ar_rank_of("frank3.pickle"), -1);
	assert_int_equal(ar_rank_of("snapshot_v2.pickle"), -1);

	assert_true(zp_name_unsafe("../x.pickle"));
	assert_true(zp_name_unsafe("a/../../x"));
	assert_true(zp_name_unsafe("/etc/passwd"));
	assert_true(zp_name_unsafe("C:\\x"));
	assert_true(zp_name_unsafe("a\\..\\b"));
	assert_false(zp_name_unsafe("a/b..c/snapshot.pickle"));
	assert_false(zp_name_unsafe("run/snapshot.pickle"));
}

/* ---- discovery --------------------------------------------------------------------------------
 */

static void test_discover_conventions(void **state)
{
	(void)state;
	char snap[1024], path[2048];
	tu_snapshot("oom_fragmentation", snap, sizeof snap);
	char *tmp = make_tmp();
	/* one folder, ranks by file name, a shared log */
	const char *files[] = {"jobs/exp/snapshot_0.pickle",
	                       "jobs/exp/snapshot_1.pickle",
	                       "jobs/rk/rank0/snapshot.pickle",
	                       "jobs/rk/rank1/snapshot.pickle",
	                       "jobs/it/iteration_100/oom_rank2.pickle",
	                       "jobs/it/iteration_200/oom_rank2.pickle",
	                       "jobs/two/a.pickle",
	                       "jobs/two/b.pickle",
	                       "jobs/single/snapshot.pickle"};
	for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
		snprintf(path, sizeof path, "%s/%s", tmp, files[i]);
		copy_file(snap, path);
	}
	snprintf(path, sizeof path, "%s/jobs/rk/rank1/train.log", tmp);
	write_file(path, "CUDA out of memory. Tried to allocate 2.00 MiB\n", 47);
	snprintf(path, sizeof path, "%s/jobs/single/train.log", tmp);
	write_file(path, "step 1\nCUDA out of memory. Tried to allocate 2.00 MiB\n", 54);
	snprintf(path, sizeof path, "%s/jobs/single/picture.png", tmp);
	write_file(path, "\x89PNG\r\n\x1a\n\0\0\0", 11);
	snprintf(path, sizeof path, "%s/jobs/single/.hidden.pickle", tmp);
	copy_file(snap, path);

	snprintf(path, sizeof path, "%s/jobs", tmp);
	const char *inputs[] = {path};
	sr_limits lim;
	sr_default_limits(&lim);
	ar_set set;
	mr_error err = {0};
	assert_int_equal(ar_discover(inputs, 1, &lim, &set, &err), MR_OK);
	for (size_t i = 0; i < set.count; i++)
		print_message("row %zu: %s (%zu members) slug %s\n", i, set.runs[i].name,
		              set.runs[i].member_count, set.runs[i].slug);
	assert_int_equal(set.count, 9);
	const ar_run *r = find_run(&set, "jobs/exp rank 0");
	assert_non_null(r);
	assert_int_equal(r->rank, 0);
	assert_string_equal(r->group, "jobs/exp");
	assert_non_null(r = find_run(&set, "jobs/exp rank 1"));
	assert_non_null(r = find_run(&set, "jobs/rk rank 1"));
	assert_int_equal(r->member_count, 2); /* the rank's log joins it */
	assert_string_equal(r->group, "jobs/rk");
	assert_non_null(r = find_run(&set, "jobs/rk rank 0"));
	assert_int_equal(r->member_count, 1);
	assert_non_null(r = find_run(&set, "jobs/it/iteration_100 rank 2"));
	assert_int_equal(r->iteration, 100);
	assert_string_equal(r->group, "jobs/it");
	assert_non_null(find_run(&set, "jobs/it/iteration_200 rank 2"));
	assert_non_null(find_run(&set, "jobs/two (a.pickle)"));
	assert_non_null(find_run(&set, "jobs/two (b.pickle)"));
	assert_non_null(r = find_run(&set, "jobs/single"));
	assert_int_equal(r->member_count, 2); /* snapshot + log; not the picture nor hidden file */
	assert_string_equal(r->members[0].name, "jobs/single/snapshot.pickle");
	/* slugs: unique and safe */
	for (size_t i = 0; i < set.count; i++) {
		for (const char *c = set.runs[i].slug; *c; c++)
			assert_true(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			                   "0123456789._-",
			                   *c));
		for (size_t k = 0; k < i; k++)
			assert_true(strcasecmp(set.runs[i].slug, set.runs[k].slug) != 0);
	}
	/* a row loads */
	ld_evidence run;
	r = find_run(&set, "jobs/single");
	assert_int_equal(ar_load(NULL, r, &lim, &run, &err), MR_OK);
	assert_true(run.has_snapshot);
	ld_free(&run);
	ar_set_free(&set);
	rm_tree(tmp);
	free(tmp);
}

static void add_zip_member(zip_t *za, const char *name, const void *data, size_t len, int store)
{
	zip_source_t *src = zip_source_buffer(za, data, len, 0);
	assert_non_null(src);
	zip_int64_t idx = zip_file_add(za, name, src, ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8);
	if (idx < 0)
		zip_source_free(src);
	assert_true(idx >= 0);
	if (store)
		zip_set_file_compression(za, (zip_uint64_t)idx, ZIP_CM_STORE, 0);
}

static void test_hostile_zip(void **state)
{
	(void)state;
	char snap[1024], path[2048];
	tu_snapshot("oom_fragmentation", snap, sizeof snap);
	size_t len = 0;
	unsigned char *pickle = tu_read(snap, &len);
	assert_non_null(pickle);
	char *tmp = make_tmp();
	snprintf(path, sizeof path, "%s/hostile.zip", tmp);
	int code = 0;
	zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &code);
	assert_non_null(za);
	size_t zeros_len = 4u << 20;
	unsigned char *zeros = calloc(1, zeros_len);
	assert_non_null(zeros);
	zeros[0] = 0x80; /* a "pickle" that inflates 1000 times */
	zeros[1] = 0x04;
	add_zip_member(za, "good/snapshot.pickle", pickle, len, 0);
	add_zip_member(za, "../escape/snapshot.pickle", pickle, len, 0);
	add_zip_member(za, "/abs/snapshot.pickle", pickle, len, 0);
	add_zip_member(za, "bomb/snapshot.pickle", zeros, zeros_len, 0);
	add_zip_member(za, "trunc/snapshot.pickle", pickle, len / 2, 1);
	add_zip_member(za, "__MACOSX/good/._snapshot.pickle", "junk", 4, 0);
	assert_int_equal(zip_close(za), 0);
	free(zeros);

	const char *inputs[] = {path};
	sr_limits lim;
	sr_default_limits(&lim);
	lim.max_ratio = 100;
	ar_set set;
	mr_error err = {0};
	assert_int_equal(ar_discover(inputs, 1, &lim, &set, &err), MR_OK);
	for (size_t i = 0; i < set.count; i++)
		print_message("row %zu: %s: %s\n", i, set.runs[i].name,
		              set.runs[i].error ? set.runs[i].error : "ok");
	const ar_run *good = find_run(&set, "good");
	assert_non_null(good);
	assert_null(good->error);
	assert_string_equal(good->members[0].name, "good/snapshot.pickle");
	const ar_run *bomb = find_run(&set, "bomb");
	assert_non_null(bomb);
	assert_non_null(bomb->error);
	assert_non_null(strstr(bomb->error, "zip bomb"));
	size_t unsafe = 0;
	for (size_t i = 0; i < set.count; i++) {
		const ar_run *r = &set.runs[i];
		if (r->error && strstr(r->error, "unsafe member name"))
			unsafe++;
		/* nothing named after a hostile member gets read */
		for (size_t k = 0; k < r->member_count; k++)
			assert_false(zp_name_unsafe(r->members[k].name));
		assert_null(strstr(r->slug, ".."));
		assert_null(strchr(r->slug, '/'));
	}
	assert_int_equal(unsafe, 2);
	/* a member cut short fails to load, with its name, and nothing crashes */
	ld_evidence run;
	const ar_run *trunc = find_run(&set, "trunc");
	assert_non_null(trunc);
	assert_int_equal(ar_load(NULL, trunc, &lim, &run, &err), MR_EINPUT);
	assert_non_null(strstr(err.msg, "trunc/snapshot.pickle"));
	/* the good one loads from the archive */
	memset(&err, 0, sizeof err);
	assert_int_equal(ar_load(NULL, good, &lim, &run, &err), MR_OK);
	ld_free(&run);
	/* a member limit below the member's size refuses it at discovery */
	ar_set_free(&set);
	lim.max_member_bytes = 1000;
	assert_int_equal(ar_discover(inputs, 1, &lim, &set, &err), MR_OK);
	good = find_run(&set, "good");
	assert_non_null(good);
	assert_non_null(good->error);
	assert_non_null(strstr(good->error, "over the limit"));
	ar_set_free(&set);
	/* and a total limit refuses the archive */
	sr_default_limits(&lim);
	lim.max_total_bytes = 1000;
	assert_int_equal(ar_discover(inputs, 1, &lim, &set, &err), MR_OK);
	assert_int_equal(set.count, 1);
	assert_non_null(strstr(set.runs[0].error, "archive inflates"));
	ar_set_free(&set);

	/* not an archive at all, though named .zip; and a missing input */
	snprintf(path, sizeof path, "%s/broken.zip", tmp);
	write_file(path, "PK\3\4garbage", 10);
	char missing[2048];
	snprintf(missing, sizeof missing, "%s/nothing-here", tmp);
	const char *bad[] = {path, missing};
	assert_int_equal(ar_discover(bad, 2, &lim, &set, &err), MR_OK);
	assert_int_equal(set.count, 2);
	assert_non_null(set.runs[0].error);
	assert_non_null(set.runs[1].error);
	ar_set_free(&set);
	free(pickle);
	rm_tree(tmp);
	free(tmp);
}

/* ---- cache -------------------------------------------------------------------------------- */

static void test_hash(void **state)
{
	(void)state;
	h128_state a, b;
	h128_digest ka, kb;
	char buf[1000];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (char)(i * 7);
	/* streaming in pieces equals one call */
	h128_init(&a, 1);
	h128_update(&a, buf, sizeof buf);
	h128_final(&a, &ka);
	h128_init(&b, 1);
	for (size_t i = 0; i < sizeof buf;) {
		size_t n = MR_MIN((size_t)(i % 37 + 1), sizeof buf - i);
		h128_update(&b, buf + i, n);
		i += n;
	}
	h128_final(&b, &kb);
	assert_memory_equal(ka.bytes, kb.bytes, 16);
	/* one flipped bit, one byte more, another seed: all different */
	buf[500] ^= 1;
	h128_init(&b, 1);
	h128_update(&b, buf, sizeof buf);
	h128_final(&b, &kb);
	assert_memory_not_equal(ka.bytes, kb.bytes, 16);
	buf[500] ^= 1;
	h128_init(&b, 1);
	h128_update(&b, buf, sizeof buf - 1);
	h128_final(&b, &kb);
	assert_memory_not_equal(ka.bytes, kb.bytes, 16);
	h128_init(&b, 2);
	h128_update(&b, buf, sizeof buf);
	h128_final(&b, &kb);
	assert_memory_not_equal(ka.bytes, kb.bytes, 16);
	/* zero padding of the tail is not ambiguous */
	h128_init(&a, 0);
	h128_update(&a, "ab", 2);
	h128_final(&a, &ka);
	h128_init(&b, 0);
	h128_update(&b, "ab\0", 3);
	h128_final(&b, &kb);
	assert_memory_not_equal(ka.bytes, kb.bytes, 16);
	char hex[33];
	h128_hex(&ka, hex);
	assert_int_equal(strlen(hex), 32);
}

static void test_cache_entry(void **state)
{
	(void)state;
	h128_digest key = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}};
	ca_entry e = {0};
	e.row.settings = strdup("expandable_segments:True");
	e.row.has_snapshot = 1;
	e.row.has_peaks = 1;
	e.row.peak_reserved = 123456789012ull;
	e.row.peak_allocated = 42;
	e.row.fragmentation = 0.25;
	e.row.device_count = 2;
	e.row.oom_cause = strdup("fragmentation");
	e.row.rec_id = strdup("expandable_segments");
	e.row.rec_title = NULL;
	e.row.verdict = strdup("v");
	e.json = strdup("{\"schema\": \"memreport/1\"}");
	e.json_len = strlen(e.json);
	e.html = strdup("<html>\0binary</html>");
	e.html_len = 6;
	mr_buf bytes = {0};
	mr_error err = {0};
	assert_int_equal(ca_encode(&key, &e, &bytes, &err), MR_OK);
	ca_entry d;
	assert_int_equal(ca_decode((const uint8_t *)bytes.data, bytes.len, &key, &d), 0);
	assert_string_equal(d.row.settings, e.row.settings);
	assert_int_equal(d.row.peak_reserved, e.row.peak_reserved);
	assert_int_equal(d.row.peak_allocated, 42);
	assert_true(d.row.fragmentation == 0.25);
	assert_int_equal(d.row.device_count, 2);
	assert_string_equal(d.row.oom_cause, "fragmentation");
	assert_null(d.row.rec_title);
	assert_int_equal(d.json_len, e.json_len);
	assert_memory_equal(d.json, e.json, e.json_len);
	assert_int_equal(d.html_len, 6);
	ca_entry_free(&d);
	/* another key: stale */
	h128_digest other = key;
	other.bytes[15] ^= 1;
	assert_int_equal(ca_decode((const uint8_t *)bytes.data, bytes.len, &other, &d), -1);
	/* every single flipped byte and every truncation is refused, never trusted */
	for (size_t i = 0; i < bytes.len; i++) {
		bytes.data[i] ^= 0x5a;
		assert_int_equal(ca_decode((const uint8_t *)bytes.data, bytes.len, &key, &d), -1);
		bytes.data[i] ^= 0x5a;
		assert_int_equal(ca_decode((const uint8_t *)bytes.data, i, &key, &d), -1);
	}
	/* another version */
	bytes.data[8] ^= 0x7f;
	assert_int_equal(ca_decode((const uint8_t *)bytes.data, bytes.len, &key, &d), -1);
	mr_buf_free(&bytes);
	ca_entry_free(&e);
}

/* ---- batch over the corpus ------------------------------------------------------------------ */

static const char *const five[] = {"leak_val_fixed", "mlp_healthy", "no_history", "oom_capacity",
                                   "oom_fragmentation"};

static void check_index(const char *out, const char *const *names, size_t n, size_t expect_runs)
{
	char path[4096 + 64];
	snprintf(path, sizeof path, "%s/index.json", out);
	size_t len = 0;
	char *json = (char *)tu_read(path, &len);
	assert_non_null(json);
	assert_non_null(strstr(json, "\"schema\": \"memreport-batch/1\""));
	assert_int_equal(count_str(json, "\n{\"name\": "), expect_runs);
	assert_int_equal(count_str(json, "\"schema\": \"memreport/1\""), expect_runs);
	assert_int_equal(count_str(json, "\"error\": null"), expect_runs);
	snprintf(path, sizeof path, "%s/index.html", out);
	char *html = (char *)tu_read(path, &len);
	assert_non_null(html);
	assert_non_null(strstr(html, "</html>"));
	assert_null(strstr(html, "http://"));
	assert_null(strstr(html, "https://"));
	for (size_t i = 0; i < n; i++) {
		char want[512];
		snprintf(want, sizeof want, "{\"name\": \"%s\"", names[i]);
		if (!strstr(json, want)) {
			print_error("index.json lacks %s\n", names[i]);
			fail();
		}
		snprintf(want, sizeof want, "<tr><td>%s</td>", names[i]);
		assert_non_null(strstr(html, want));
		snprintf(want, sizeof want, "href=\"%s.html\"", names[i]);
		assert_non_null(strstr(html, want));
		snprintf(path, sizeof path, "%s/%s.html", out, names[i]);
		assert_true(tu_exists(path));
	}
	free(json);
	free(html);
}

typedef struct {
	char **names, **inputs;
	size_t n;
} run_list;

static void add_run(const char *dir, const char *name, void *ctx)
{
	run_list *l = ctx;
	if (strcmp(name, "gpt_large_trace") == 0)
		return;
	l->names = realloc(l->names, (l->n + 1) * sizeof *l->names);
	l->inputs = realloc(l->inputs, (l->n + 1) * sizeof *l->inputs);
	assert_non_null(l->names);
	assert_non_null(l->inputs);
	l->names[l->n] = strdup(name);
	l->inputs[l->n] = strdup(dir);
	l->n++;
}

/* Every sixth run folder of both corpora (the 88 MB one left out), in the order the corpora
 * list them: kinds of run of every set. The whole corpus goes through batch, its cache and
 * the cache's spoilt entries in tests/cli_batch.sh, and its outputs are golden.sh's. */
static void test_batch_corpus(void **state)
{
	(void)state;
	run_list l = {0};
	tu_each_sample(add_run, &l);
	assert_true(l.n >= tu_project_samples());
	size_t n = 0, all = l.n;
	for (size_t i = 0; i < all; i++) {
		if (i % 6 == 0) {
			l.names[n] = l.names[i];
			l.inputs[n++] = l.inputs[i];
		} else {
			free(l.names[i]);
			free(l.inputs[i]);
		}
	}
	char **names = l.names, **inputs = l.inputs;
	struct dirent *e;
	char *tmp = make_tmp();
	char out[1024], out2[1024], cache[1024];
	snprintf(out, sizeof out, "%s/out", tmp);
	snprintf(out2, sizeof out2, "%s/out2", tmp);
	snprintf(cache, sizeof cache, "%s/cache", tmp);
	const char **args = calloc(n + 5, sizeof *args); /* the inputs, -o DIR -q, --cache DIR */
	assert_non_null(args);
	size_t a = 0;
	for (size_t i = 0; i < n; i++)
		args[a++] = inputs[i];
	args[a++] = "-o";
	args[a++] = out;
	args[a++] = "-q";
	assert_int_equal(run_batch(args, a), 0);
	check_index(out, (const char *const *)names, n, n);

	/* with the cache, twice: the same bytes as without it */
	args[a - 2] = out2;
	args[a++] = "--cache";
	args[a++] = cache;
	assert_int_equal(run_batch(args, a), 0);
	assert_int_equal(run_batch(args, a), 0);
	char p1[2048], p2[2048];
	snprintf(p1, sizeof p1, "%s/index.json", out);
	snprintf(p2, sizeof p2, "%s/index.json", out2);
	size_t l1 = 0, l2 = 0;
	char *j1 = (char *)tu_read(p1, &l1), *j2 = (char *)tu_read(p2, &l2);
	assert_int_equal(l1, l2);
	assert_memory_equal(j1, j2, l1);
	free(j2);
	/* corrupt every fourth cache entry, flipped in its middle or cut short: those are rebuilt,
	 * the others read, and the result does not change */
	DIR *cd = opendir(cache);
	assert_non_null(cd);
	size_t entries = 0;
	while ((e = readdir(cd))) {
		if (e->d_name[0] == '.' || entries++ % 4)
			continue;
		char p[2048];
		snprintf(p, sizeof p, "%s/%s", cache, e->d_name);
		size_t len = 0;
		unsigned char *bytes = tu_read(p, &len);
		assert_non_null(bytes);
		bytes[len / 2] ^= 0xff;
		write_file(p, bytes, entries % 8 == 1 ? len : len / 3);
		free(bytes);
	}
	closedir(cd);
	assert_int_equal(entries, n);
	assert_int_equal(run_batch(args, a), 0);
	j2 = (char *)tu_read(p2, &l2);
	assert_int_equal(l1, l2);
	assert_memory_equal(j1, j2, l1);
	free(j1);
	free(j2);

	/* a broken input is listed with its error; the others are still reported; exit 2 */
	char junk[2048];
	snprintf(junk, sizeof junk, "%s/junk.pickle", tmp);
	write_file(junk, "\x80\x04garbage", 9);
	const char *args2[] = {inputs[0], junk, "-o", out, "-q"};
	assert_int_equal(run_batch(args2, 5), 2);
	snprintf(p1, sizeof p1, "%s/index.json", out);
	j1 = (char *)tu_read(p1, &l1);
	assert_non_null(j1);
	assert_int_equal(count_str(j1, "\n{\"name\": "), 2);
	assert_int_equal(count_str(j1, "\"error\": null"), 1);
	assert_non_null(strstr(j1, "junk.pickle"));
	free(j1);

	for (size_t i = 0; i < n; i++) {
		free(names[i]);
		free(inputs[i]);
	}
	free(names);
	free(inputs);
	free(args);
	rm_tree(tmp);
	free(tmp);
}

static void test_batch_zip(void **state)
{
	(void)state;
	char *tmp = make_tmp();
	char zpath[2048], out[2048];
	snprintf(zpath, sizeof zpath, "%s/five.zip", tmp);
	snprintf(out, sizeof out, "%s/out", tmp);
	int code = 0;
	zip_t *za = zip_open(zpath, ZIP_CREATE | ZIP_TRUNCATE, &code);
	assert_non_null(za);
	/* every file of each folder, as `zip -r` would store them */
	for (size_t i = 0; i < 5; i++) {
		char sub[2048];
		tu_sample(five[i], NULL, sub, sizeof sub);
		DIR *d = opendir(sub);
		assert_non_null(d);
		struct dirent *e;
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			char file[3072], name[1024];
			snprintf(file, sizeof file, "%s/%s", sub, e->d_name);
			snprintf(name, sizeof name, "%s/%s", five[i], e->d_name);
			zip_source_t *src = zip_source_file(za, file, 0, -1);
			assert_non_null(src);
			assert_true(zip_file_add(za, name, src, ZIP_FL_ENC_UTF_8) >= 0);
		}
		closedir(d);
	}
	assert_int_equal(zip_close(za), 0);
	const char *args[] = {zpath, "-o", out, "-q", "-j", "2"};
	assert_int_equal(run_batch(args, 6), 0);
	check_index(out, five, 5, 5);
	rm_tree(tmp);
	free(tmp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sniff_and_names), cmocka_unit_test(test_discover_conventions),
	    cmocka_unit_test(test_hostile_zip),     cmocka_unit_test(test_hash),
	    cmocka_unit_test(test_cache_entry),     cmocka_unit_test(test_batch_corpus),
	    cmocka_unit_test(test_batch_zip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
