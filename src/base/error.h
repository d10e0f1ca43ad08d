/* error.h: the error convention of every stage.
 *
 * Functions that can fail return an mr_status and describe the failure in an mr_error that the
 * caller supplies (and owns); they never print. Only the commands in src/cmd/ print errors. */
#ifndef MR_ERROR_H
#define MR_ERROR_H

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
 * does not overwrite it, which keeps the innermost, most precise explanation. err may be NULL. */
mr_status mr_fail(mr_error *err, mr_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
mr_status mr_oom(mr_error *err);
#endif
