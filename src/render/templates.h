/* templates.h: the page skeleton, CSS and recommendation prose, compiled into the binary.
 *
 * Files under templates/ are embedded at build time (tools/embed.sh); `--templates DIR`
 * makes tp_get read DIR/<name> instead when that file exists.
 *
 * Ownership: tp_get returns a copy the caller frees; tp_set_dir keeps the caller's string. */
#ifndef MR_TEMPLATES_H
#define MR_TEMPLATES_H

#include <stddef.h>

typedef struct {
	const char *name; /* path relative to templates/, e.g. "report.css" */
	const unsigned char *data;
	size_t len;
} tp_embedded;

extern const tp_embedded tp_embedded_files[]; /* ends with a NULL name */

/* Sets the override folder (NULL: embedded only). The string must outlive all tp_get calls. */
void tp_set_dir(const char *dir);

/* Returns the template's bytes (NUL-terminated) and length, or NULL when there is none.
 * The caller frees the result with free(). */
char *tp_get(const char *name, size_t *len);

#endif
