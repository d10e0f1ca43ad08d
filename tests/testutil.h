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

#include <sys/stat.h>

#include "load/load.h"
#include "report/report.h"
#include "base/error.h"

/* Folder of the shared corpus: $MEMREPORT_SHARED, else ../shared. */
static inline const char *tu_shared(void)
{
	const char *s = getenv("MEMREPORT_SHARED");
	return s && *s ? s : "../shared";
}

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

/* An integer of a corpus sample's JSON file: facts.json or memory_stats.json, as PyTorch wrote
 * them. Fails the test when it is missing. */
static inline long long tu_corpus_int(const char *sample, const char *file, const char *key)
{
	char path[1024];
	size_t len;
	long long v = -1;
	snprintf(path, sizeof path, "%s/corpus/%s/%s", tu_shared(), sample, file);
	char *json = (char *)tu_read(path, &len);
	assert_non_null(json);
	assert_true(tu_json_int(json, key, &v));
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
