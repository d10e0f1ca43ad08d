/* util.h: errors, growable buffers and small helpers shared by every module.
 *
 * Ownership: an mr_buf owns its bytes; mr_buf_free releases them. Functions that can fail
 * return an mr_status and describe the failure in an mr_error supplied by the caller; they
 * never print. Only main.c prints errors. */
#ifndef MR_UTIL_H
#define MR_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* Exit-status classes of the command-line contract. */
typedef enum {
	MR_OK = 0,
	MR_EFAIL = 1,  /* I/O, out of memory, anything not the input's fault */
	MR_EINPUT = 2, /* the input is unusable: truncated, hostile, not a snapshot */
} mr_status;

typedef struct {
	mr_status status;
	char msg[512];
} mr_error;

/* Records a message (printf-style) and returns status, so callers can write
 * `return mr_fail(err, MR_EINPUT, "...")`. The first message recorded wins: a later call
 * does not overwrite it, which keeps the innermost, most precise explanation. */
mr_status mr_fail(mr_error *err, mr_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
mr_status mr_oom(mr_error *err);
/* Replaces control characters (newlines, escapes) in place: a message that quotes a name from
 * an input (a zip member, a dict key) stays one harmless line. */
void mr_one_line(char *s);

/* Allocation wrappers: return NULL on failure (never abort); counts are checked for overflow. */
void *mr_alloc_array(size_t count, size_t size);
void *mr_realloc_array(void *ptr, size_t count, size_t size);
char *mr_strndup(const char *s, size_t n);

/* Grows *items (element size `size`) so that at least `need` elements fit. Returns 0 or -1. */
int mr_grow(void **items, size_t *cap, size_t need, size_t size);
#define MR_GROW(arr, cap, need) mr_grow((void **)&(arr), &(cap), (need), sizeof(*(arr)))

/* A growable byte buffer, always NUL-terminated after a successful append. */
typedef struct {
	char *data;
	size_t len, cap;
	int failed; /* set once an allocation failed; later appends are no-ops */
} mr_buf;

void mr_buf_free(mr_buf *b);
void mr_buf_append(mr_buf *b, const void *data, size_t len);
void mr_buf_puts(mr_buf *b, const char *s);
void mr_buf_putc(mr_buf *b, char c);
void mr_buf_printf(mr_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void mr_buf_vprintf(mr_buf *b, const char *fmt, va_list ap);

/* Escapes text for HTML element content and attribute values (& < > " '). Invalid UTF-8 bytes
 * become U+FFFD so a report stays well-formed whatever a snapshot holds. */
void mr_buf_html(mr_buf *b, const char *s, size_t len);
/* Appends text for a terminal: control characters (an ESC sequence in a stranger's function
 * name would drive the terminal), C1 controls and invalid UTF-8 become U+FFFD. */
void mr_buf_plain(mr_buf *b, const char *s, size_t len);
/* Escapes text for a JSON string body (without the quotes); invalid UTF-8 becomes U+FFFD. */
void mr_buf_json(mr_buf *b, const char *s, size_t len);

/* Human-readable size with binary units: "1.52 GiB", "204.00 MiB", "512 B". */
void mr_format_bytes(char *out, size_t outsz, uint64_t bytes);

/* Parses "4GiB", "4G", "512MiB", "123" (bytes). Returns 0 on success. */
int mr_parse_size(const char *s, uint64_t *out);

#define MR_MIN(a, b) ((a) < (b) ? (a) : (b))
#define MR_MAX(a, b) ((a) > (b) ? (a) : (b))
#define MR_KIB ((uint64_t)1024)
#define MR_MIB ((uint64_t)1024 * 1024)
#define MR_GIB ((uint64_t)1024 * 1024 * 1024)

#endif
