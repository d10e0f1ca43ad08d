/* replay_main.c: a plain main() for a fuzz target, so that `make check` (and `make asan`, under
 * ASan+UBSan) feeds it every saved input forever, as zstd's tests/fuzz does.
 *
 *   replay_NAME [PATH...]
 *
 * Each PATH is a file or a folder (every file in it, sorted by name, dot files skipped). With no
 * PATH it replays tests/fuzz/NAME/, NAME being taken from the program's name (replay_NAME),
 * relative to the current folder (the repository root). Each input is read into a buffer of
 * exactly its size, so a read past the end is caught. A crash or a sanitizer report is the
 * failure; otherwise it prints "replay_NAME: N inputs" and exits 0 (1 when a path is missing). */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *prog = "replay";

static int replay_file(const char *path, size_t *count)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
		return -1;
	}
	size_t cap = 4096, len = 0;
	uint8_t *buf = malloc(cap);
	size_t n;
	while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap) {
			uint8_t *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	int bad = ferror(f) || !buf;
	fclose(f);
	if (bad) {
		fprintf(stderr, "%s: %s: cannot read\n", prog, path);
		free(buf);
		return -1;
	}
	/* An exact-size copy: ASan then sees a read one byte past the input. */
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	(*count)++;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_path(const char *path, size_t *count)
{
	struct stat st;
	if (stat(path, &st) != 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return replay_file(path, count);
	DIR *dir = opendir(path);
	if (!dir) {
		fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
		return -1;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	struct dirent *e;
	while ((e = readdir(dir)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			char **nn = realloc(names, ncap * sizeof *names);
			if (!nn) {
				rc = -1;
				break;
			}
			names = nn;
			cap = ncap;
		}
		size_t plen = strlen(path) + strlen(e->d_name) + 2;
		names[n] = malloc(plen);
		if (!names[n]) {
			rc = -1;
			break;
		}
		snprintf(names[n], plen, "%s/%s", path, e->d_name);
		n++;
	}
	closedir(dir);
	if (n)
		qsort(names, n, sizeof *names, cmp_names);
	for (size_t i = 0; i < n; i++) {
		struct stat fst;
		if (rc == 0 && stat(names[i], &fst) == 0 && S_ISREG(fst.st_mode) &&
		    replay_file(names[i], count) != 0)
			rc = -1;
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	const char *base = strrchr(argv[0], '/');
	base = base ? base + 1 : argv[0];
	prog = base;
	size_t count = 0;
	int rc = 0;
	if (argc > 1) {
		for (int i = 1; i < argc; i++)
			if (replay_path(argv[i], &count) != 0)
				rc = 1;
	} else {
		const char *name = strncmp(base, "replay_", 7) == 0 ? base + 7 : base;
		char dir[512];
		snprintf(dir, sizeof dir, "tests/fuzz/%s", name);
		if (replay_path(dir, &count) != 0)
			rc = 1;
	}
	printf("%s: %zu inputs\n", prog, count);
	return rc;
}
