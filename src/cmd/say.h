/* say.h: the one way a command prints a message on standard error.
 *
 * A message is one line, "memreport: " and the formatted text. Paths and names in it come from
 * the command line, folders and archives: the whole line goes through mr_one_line
 * (base/escape.h), so a newline in a file name cannot split it and an ESC sequence never reaches
 * the terminal.
 *
 * Ownership: nothing is kept; nothing is allocated past the call. */
#ifndef MR_SAY_H
#define MR_SAY_H

/* "memreport: <message>\n". */
void cmd_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "<who>: <message>\n" then the usage text as it is (who is "memreport", "memreport batch"...);
 * returns MR_EINPUT, the exit status of bad usage. */
int cmd_usage_error(const char *who, const char *msg, const char *usage);

#endif
