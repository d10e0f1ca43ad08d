/* names.c: what the names of files and folders say about a run, and the names of rows. */
#include "load/names.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/buf.h"
#include "base/error.h"
#include "base/mem.h"

static int is_digits(const char *s, size_t n)
{
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

static long parse_digits(const char *s, size_t n)
{
	long v = 0;
	for (size_t i = 0; i < n && v < 100000000; i++)
		v = v * 10 + (s[i] - '0');
	return v;
}

/* Length of the name without its extensions (".pickle", ".pkl", ".log", ".txt", ".json"...). */
static size_t stem_len(const char *name)
{
	const char *dot = strchr(name, '.');
	return dot ? (size_t)(dot - name) : strlen(name);
}

int ar_rank_of(const char *name)
{
	size_t n = stem_len(name);
	/* "rank3", "rank_3", "rank-3", "oom_rank3", "snapshot_rank3", "train_rank3" */
	for (size_t i = 0; i + 4 <= n; i++) {
		if (strncasecmp(name + i, "rank", 4) != 0)
			continue;
		if (i > 0 && name[i - 1] != '_' && name[i - 1] != '-' && name[i - 1] != '.')
			continue;
		size_t j = i + 4;
		if (j < n && (name[j] == '_' || name[j] == '-'))
			j++;
		size_t k = j;
		while (k < n && name[k] >= '0' && name[k] <= '9')
			k++;
		if (k > j && k - j <= 6 && (k == n || name[k] == '_' || name[k] == '-'))
			return (int)parse_digits(name + j, k - j);
	}
	/* "snapshot_3", "oom_snapshot_3", "memory_snapshot-3" */
	static const char *const stems[] = {"snapshot", "oom_snapshot", "memory_snapshot"};
	for (size_t s = 0; s < sizeof stems / sizeof *stems; s++) {
		size_t l = strlen(stems[s]);
		if (n > l + 1 && strncasecmp(name, stems[s], l) == 0 &&
		    (name[l] == '_' || name[l] == '-') && n - l - 1 <= 6 &&
		    is_digits(name + l + 1, n - l - 1))
			return (int)parse_digits(name + l + 1, n - l - 1);
	}
	return -1;
}

/* "iteration_100", "iteration-100", "iter_100", "step_100": the number, or -1. */
long ar_iteration_of(const char *comp, size_t n)
{
	static const char *const words[] = {"iteration", "iter", "step"};
	for (size_t w = 0; w < sizeof words / sizeof *words; w++) {
		size_t l = strlen(words[w]);
		if (n > l && strncasecmp(comp, words[w], l) == 0) {
			size_t j = l + (comp[l] == '_' || comp[l] == '-');
			if (n - j <= 9 && is_digits(comp + j, n - j))
				return parse_digits(comp + j, n - j);
		}
	}
	return -1;
}

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c >= 'A' && c <= 'Z')
			c = (unsigned char)(c - 'A' + 'a');
		h = (h ^ c) * 0x100000001b3ull;
	}
	return h;
}

typedef struct {
	char **slots;
	size_t cap;
} str_set;

/* Inserts s (case-insensitively) unless present. Returns 1 inserted, 0 present, -1 OOM. */
static int set_insert(str_set *set, char *s)
{
	for (size_t i = fnv1a(s) & (set->cap - 1);; i = (i + 1) & (set->cap - 1)) {
		if (!set->slots[i]) {
			set->slots[i] = s;
			return 1;
		}
		if (strcasecmp(set->slots[i], s) == 0)
			return 0;
	}
}

/* base[0..len) and a numbered suffix ("%u" in fmt); NULL when memory runs out. */
static char *rename_to(const char *base, size_t len, const char *fmt, unsigned k)
{
	mr_buf b = {0};
	mr_buf_append(&b, base, len);
	mr_buf_printf(&b, fmt, k);
	if (b.failed) {
		mr_buf_free(&b);
		return NULL;
	}
	return b.data;
}

static char *slug_of(const char *name)
{
	mr_buf b = {0};
	int last_sep = 1;
	for (const char *c = name; *c && b.len < 80; c++) {
		char ch = *c;
		int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		         (ch >= '0' && ch <= '9') || ch == '.' || ch == '-';
		if (ok && !(ch == '.' && last_sep)) {
			mr_buf_putc(&b, ch);
			last_sep = 0;
		} else if (!last_sep) {
			mr_buf_putc(&b, '_');
			last_sep = 1;
		}
	}
	while (b.len && (b.data[b.len - 1] == '_' || b.data[b.len - 1] == '.'))
		b.data[--b.len] = 0;
	if (b.failed) {
		mr_buf_free(&b);
		return NULL;
	}
	if (!b.len || strcasecmp(b.data, "index") == 0) {
		mr_buf_puts(&b, b.len ? "-run" : "run");
		if (b.failed) {
			mr_buf_free(&b);
			return NULL;
		}
	}
	return b.data;
}

mr_status ar_name_rows(ar_set *set, mr_error *err)
{
	str_set names = {0}, slugs = {0};
	names.cap = slugs.cap = 16;
	while (names.cap < set->count * 4)
		names.cap *= 2;
	slugs.cap = names.cap;
	names.slots = calloc(names.cap, sizeof *names.slots);
	slugs.slots = calloc(slugs.cap, sizeof *slugs.slots);
	mr_status st = MR_OK;
	if (!names.slots || !slugs.slots) {
		st = mr_oom(err);
		goto done;
	}
	for (size_t i = 0; i < set->count; i++) {
		ar_run *r = &set->runs[i];
		/* Row names are unique (" (2)" ...), so index rows can be told apart. */
		for (unsigned k = 2; set_insert(&names, r->name) == 0; k++) {
			char *base = r->name;
			size_t bl = strlen(base);
			if (k > 2) /* drop the previous " (k-1)" */
				bl = (size_t)(strrchr(base, '(') - base - 1);
			char *next = rename_to(base, bl, " (%u)", k);
			if (!next) {
				st = mr_oom(err);
				goto done;
			}
			free(r->name);
			r->name = next;
		}
		r->slug = slug_of(r->name);
		if (!r->slug) {
			st = mr_oom(err);
			goto done;
		}
		for (unsigned k = 2; set_insert(&slugs, r->slug) == 0; k++) {
			char *base = r->slug;
			size_t bl = strlen(base);
			if (k > 2)
				bl = (size_t)(strrchr(base, '-') - base);
			char *next = rename_to(base, bl, "-%u", k);
			if (!next) {
				st = mr_oom(err);
				goto done;
			}
			free(r->slug);
			r->slug = next;
		}
	}
done:
	free(names.slots);
	free(slugs.slots);
	return st;
}
