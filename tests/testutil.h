/* testutil.h: what every cmocka test file includes. Tests run from the project root. */
#ifndef MR_TESTUTIL_H
#define MR_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <dirent.h>
#include <sys/stat.h>

#include "load/load.h"
#include "report/report.h"
#include "base/error.h"

/* Reads a whole file; returns NULL when it cannot. Caller frees. */
static inline unsigned char *tu_read(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, n = 0;
	unsigned char *buf = malloc(cap + 1);
	size_t got;
	while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n == cap) {
			unsigned char *nb = realloc(buf, cap * 2 + 1);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	fclose(f);
	if (buf)
		buf[n] = 0;
	*len = n;
	return buf;
}

/* Reads `"key": <integer>` from a flat JSON file such as memory_stats.json. Returns 1 if found. */
static inline int tu_json_int(const char *json, const char *key, long long *out)
{
	char pat[256];
	snprintf(pat, sizeof pat, "\"%s\":", key);
	const char *p = strstr(json, pat);
	if (!p)
		return 0;
	p += strlen(pat);
	while (*p == ' ')
		p++;
	char *end;
	*out = strtoll(p, &end, 10);
	return end != p;
}

static inline int tu_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

static inline int tu_is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---- corpus samples ----------------------------------------------------------------------------
 * A test names a sample; these find it, the project's own corpus first: tests/corpus, whose
 * pickles tests/unpack_corpus.sh (run by tests/run.sh) decompresses into TU_CORPUS, the copy
 * tests read. Then $MEMREPORT_SHARED/corpus (default ../shared), which also holds the large
 * samples and third_party/. A sample neither has skips the test (cmocka's skip(), counted apart
 * by tests/run.sh), unless it is one of the project's own: that one must be there. */

#define TU_CORPUS "build/corpus"

/* Folder of the shared samples: $MEMREPORT_SHARED, else ../shared. */
static inline const char *tu_shared(void)
{
	const char *s = getenv("MEMREPORT_SHARED");
	return s && *s ? s : "../shared";
}

/* Skips the running test, saying why in its log. */
#define tu_skip(...)                                                                               \
	do {                                                                                       \
		print_message("skipped: " __VA_ARGS__);                                            \
		print_message("\n");                                                               \
		skip();                                                                            \
	} while (0)

/* The folder of sample `name` into buf; 0 when neither corpus holds it. */
static inline int tu_find_sample(const char *name, char *buf, size_t bufsz)
{
	snprintf(buf, bufsz, "%s/%s", TU_CORPUS, name);
	if (tu_is_dir(buf))
		return 1;
	snprintf(buf, bufsz, "%s/corpus/%s", tu_shared(), name);
	return tu_is_dir(buf);
}

/* Path of `file` of sample `name` (file NULL: the folder) into buf. Skips the test when the
 * sample is absent; fails it when the sample is the project's own and was not unpacked. */
static inline const char *tu_sample(const char *name, const char *file, char *buf, size_t bufsz)
{
	if (!tu_find_sample(name, buf, bufsz)) {
		snprintf(buf, bufsz, "tests/corpus/%s", name);
		if (tu_is_dir(buf))
			fail_msg("%s is not unpacked into %s: run sh tests/unpack_corpus.sh "
			         "(make check does)",
			         name, TU_CORPUS);
		tu_skip("sample %s is in neither %s nor %s/corpus", name, TU_CORPUS, tu_shared());
	}
	size_t used = strlen(buf);
	if (file && used < bufsz)
		snprintf(buf + used, bufsz - used, "/%s", file);
	return buf;
}

/* The snapshot of sample `name` into buf: snapshot.pickle, else oom_snapshot.pickle, else
 * build/NAME.pickle (the large sample tests/unpack_corpus.sh decompresses from the shared
 * folder). Skips or fails as tu_sample does. */
static inline const char *tu_snapshot(const char *name, char *buf, size_t bufsz)
{
	static const char *const files[] = {"snapshot.pickle", "oom_snapshot.pickle"};
	for (size_t i = 0; i < 2; i++)
		if (tu_exists(tu_sample(name, files[i], buf, bufsz)))
			return buf;
	snprintf(buf, bufsz, "build/%s.pickle", name);
	if (!tu_exists(buf))
		tu_skip("sample %s has no unpacked snapshot", name);
	return buf;
}

/* Calls fn(folder, name, ctx) for every sample of both corpora, each name once (the project's
 * copy first), in name order within each; returns how many. */
static inline size_t tu_each_sample(void (*fn)(const char *dir, const char *name, void *ctx),
                                    void *ctx)
{
	char roots[2][512], dir[2048], seen[512];
	snprintf(roots[0], sizeof roots[0], "%s", TU_CORPUS);
	snprintf(roots[1], sizeof roots[1], "%s/corpus", tu_shared());
	size_t count = 0;
	for (int r = 0; r < 2; r++) {
		struct dirent **list = NULL;
		int n = scandir(roots[r], &list, NULL, alphasort);
		for (int i = 0; i < n; i++) {
			const char *name = list[i]->d_name;
			snprintf(dir, sizeof dir, "%s/%s", roots[r], name);
			snprintf(seen, sizeof seen, "%s/%s", TU_CORPUS, name);
			if (name[0] != '.' && tu_is_dir(dir) && (r == 0 || !tu_is_dir(seen))) {
				fn(dir, name, ctx);
				count++;
			}
			free(list[i]);
		}
		free(list);
	}
	return count;
}

/* How many samples the project's own corpus has (the folders of tests/corpus). */
static inline size_t tu_project_samples(void)
{
	struct dirent **list = NULL;
	int n = scandir("tests/corpus", &list, NULL, alphasort);
	size_t count = 0;
	for (int i = 0; i < n; i++) {
		char dir[1024];
		snprintf(dir, sizeof dir, "tests/corpus/%s", list[i]->d_name);
		count += list[i]->d_name[0] != '.' && tu_is_dir(dir);
		free(list[i]);
	}
	free(list);
	return count;
}

/* An integer of a corpus sample's JSON file: facts.json or memory_stats.json, as PyTorch wrote
 * them. Fails the test when the key is missing. */
static inline long long tu_corpus_int(const char *sample, const char *file, const char *key)
{
	char path[1024];
	size_t len;
	long long v = -1;
	char *json = (char *)tu_read(tu_sample(sample, file, path, sizeof path), &len);
	if (!json)
		fail_msg("cannot read %s", path);
	if (!tu_json_int(json, key, &v))
		fail_msg("%s has no %s", path, key);
	free(json);
	return v;
}

/* Loads one run from count inputs and runs the pipeline, diagnosing `device` (-1: the
 * default); prints the error and returns its status on failure. */
static inline int tu_build(const char *const *paths, size_t count, int device, rp_report *run)
{
	mr_error err = {0};
	ld_evidence ev;
	mr_status st = ld_load(&ev, paths, count, NULL, NULL, &err);
	if (!st)
		st = rp_build(run, &ev, &(rp_params){device, 0}, &err);
	if (st)
		print_error("%s: %s\n", paths[0], err.msg);
	return (int)st;
}

/* The same with the default device. */
static inline int tu_load(const char *const *paths, size_t count, rp_report *run)
{
	return tu_build(paths, count, -1, run);
}

#endif
