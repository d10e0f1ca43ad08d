/* templates.c: embedded templates, with an optional override folder. */
#include "render/templates.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "base/mem.h"

static const char *override_dir;

void tp_set_dir(const char *dir)
{
	override_dir = dir;
}

static char *read_override(const char *name, size_t *len)
{
	char path[4096];
	if (!override_dir || strstr(name, "..") ||
	    (size_t)snprintf(path, sizeof path, "%s/%s", override_dir, name) >= sizeof path)
		return NULL;
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	mr_buf b = {0};
	char chunk[8192];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		mr_buf_append(&b, chunk, n);
	int bad = ferror(f) || b.failed;
	fclose(f);
	if (bad) {
		mr_buf_free(&b);
		return NULL;
	}
	if (!b.data)
		b.data = mr_strndup("", 0);
	*len = b.len;
	return b.data;
}

char *tp_get(const char *name, size_t *len)
{
	char *s = read_override(name, len);
	if (s)
		return s;
	for (const tp_embedded *t = tp_embedded_files; t->name; t++) {
		if (strcmp(t->name, name) == 0) {
			*len = t->len;
			return mr_strndup((const char *)t->data, t->len);
		}
	}
	return NULL;
}
