/* redact.c: --redact-paths, for frames, input names and the paths prose quotes. */
#include "render/redact.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analyze/frames.h"
#include "base/buf.h"
#include "base/mem.h"

/* Length of the home-folder prefix of path ("/home/u/", "/Users/u/", "C:\Users\u\", "/root/")
 * and the user name's span inside it; 0 when path is not under a home folder. */
static size_t home_prefix(const char *path, const char **user, size_t *user_len)
{
	static const char *const homes[] = {"/home/", "/Users/", "/users/", "/u/", "/export/home/"};
	*user = NULL;
	*user_len = 0;
	for (size_t i = 0; i < sizeof homes / sizeof *homes; i++) {
		size_t n = strlen(homes[i]);
		if (strncmp(path, homes[i], n) != 0)
			continue;
		const char *end = strchr(path + n, '/');
		if (!end || end == path + n)
			return 0;
		*user = path + n;
		*user_len = (size_t)(end - *user);
		return (size_t)(end - path) + 1;
	}
	if (strncmp(path, "/root/", 6) == 0)
		return 6;
	/* C:\Users\name\ or C:/Users/name/ */
	if (path[0] && path[1] == ':' && (path[2] == '\\' || path[2] == '/') &&
	    strncasecmp(path + 3, "Users", 5) == 0 && (path[8] == '\\' || path[8] == '/')) {
		const char *u = path + 9, *end = u;
		while (*end && *end != '\\' && *end != '/')
			end++;
		if (!*end || end == u)
			return 0;
		*user = u;
		*user_len = (size_t)(end - u);
		return (size_t)(end - path) + 1;
	}
	return 0;
}

const char *rd_path(const rd_options *opt, const char *path, char *buf, size_t bufsz)
{
	if (!opt || !opt->redact_paths) {
		snprintf(buf, bufsz, "%s", path);
		return buf;
	}
	/* Installed packages keep their package-relative path: it names the code, not the
	 * machine (site-packages, dist-packages, a conda or virtualenv anywhere). */
	static const char *const anchors[] = {"site-packages/", "dist-packages/", "site-packages\\",
	                                      "dist-packages\\"};
	for (size_t i = 0; i < sizeof anchors / sizeof *anchors; i++) {
		const char *p = strstr(path, anchors[i]);
		if (p) {
			snprintf(buf, bufsz, "<site-packages>/%s", p + strlen(anchors[i]));
			return buf;
		}
	}
	int absolute = path[0] == '/' || path[0] == '\\' || (path[0] == '~' && path[1] == '/') ||
	               (path[0] && path[1] == ':' && (path[2] == '\\' || path[2] == '/'));
	if (!absolute) {
		/* Relative names and synthetic ones ("<frozen runpy>", "train.py") carry no
		 * machine. */
		snprintf(buf, bufsz, "%s", path);
		return buf;
	}
	const char *stdlib = an_python_stdlib(path);
	if (stdlib) {
		snprintf(buf, bufsz, "<python>/%s", stdlib);
		return buf;
	}
	/* Under a home folder: keep the path inside it, without the user name anywhere. */
	const char *user = NULL;
	size_t user_len = 0;
	size_t home = path[0] == '~' ? 2 : home_prefix(path, &user, &user_len);
	if (home) {
		size_t used = (size_t)snprintf(buf, bufsz, "<home>/");
		const char *rest = path + home;
		while (*rest && used + 1 < bufsz) {
			if (user_len && strncmp(rest, user, user_len) == 0) {
				used += (size_t)snprintf(buf + used, bufsz - used, "<user>");
				rest += user_len;
			} else {
				buf[used++] = *rest == '\\' ? '/' : *rest;
				rest++;
			}
			if (used >= bufsz)
				used = bufsz - 1;
		}
		buf[used < bufsz ? used : bufsz - 1] = '\0';
		return buf;
	}
	/* Anywhere else (/workspace, /opt, /scratch/<user>, a build tree): only the file name,
	 * since any folder above it may name a person, a project or a host. */
	const char *base = path;
	for (const char *p = path; *p; p++)
		if (*p == '/' || *p == '\\')
			base = p + 1;
	snprintf(buf, bufsz, "<redacted>/%s", base);
	return buf;
}

void rd_prose(mr_buf *b, const rd_options *opt, const char *text, const ad_paths *paths)
{
	if (!text)
		return;
	size_t len = strlen(text), at = 0;
	for (size_t i = 0; paths && opt && opt->redact_paths && i < paths->count; i++) {
		const ad_span *sp = &paths->at[i];
		if (sp->offset < at || sp->offset > len || sp->len > len - sp->offset)
			continue; /* spans come in order and inside the text; anything else is
			             ignored */
		char *path = mr_strndup(text + sp->offset, sp->len);
		if (!path) {
			b->failed = 1;
			return;
		}
		char buf[4096];
		mr_buf_append(b, text + at, sp->offset - at);
		mr_buf_puts(b, rd_path(opt, path, buf, sizeof buf));
		free(path);
		at = sp->offset + sp->len;
	}
	mr_buf_append(b, text + at, len - at);
}
