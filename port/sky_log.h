/* Logging with levels, to stderr, one line per call:
 *   2026-11-30T14:00:00.123Z skyd[1234] warn: message
 * The level comes from sky_log_set_level() or the SKY_LOG environment
 * variable (error, warn, info, debug); the default is info.
 *
 * When stderr is the systemd journal ($JOURNAL_STREAM names stderr's device
 * and inode, as systemd sets it for StandardError=journal) or after
 * sky_log_set_journal(1), lines carry a syslog priority prefix instead of
 * the time, name and pid, which journald adds itself:
 *   <4>message            (<3> error, <4> warn, <6> info, <7> debug)
 *
 * A message cannot forge a line: control characters in it (a newline, a
 * carriage return, an escape sequence, NUL's neighbours, DEL) are written as
 * \n, \r, \t or \xNN, so whatever a board or client sent and Sky logs, it
 * stays inside its own line, and a "<3>" it carries is never at a line's
 * start where journald would read it as a priority. */
#ifndef SKY_LOG_H
#define SKY_LOG_H

#include <stddef.h>

typedef enum { SKY_LOG_ERROR, SKY_LOG_WARN, SKY_LOG_INFO, SKY_LOG_DEBUG } sky_log_level;

void sky_log_set_level(sky_log_level level);
/* Parses "error|warn|info|debug"; returns 0, or SKY_EINVAL for other text. */
int sky_log_parse_level(const char *text, sky_log_level *out);
/* Program name shown in each line (default "sky"). Keeps the pointer. */
void sky_log_set_name(const char *name);
int sky_log_enabled(sky_log_level level);
/* 1: journald lines from now on; 0: plain lines (overrides $JOURNAL_STREAM). */
void sky_log_set_journal(int on);
/* 1 if env ("DEV:INO", the $JOURNAL_STREAM format) names the file open on
 * fd, else 0 (NULL or malformed env, or fstat fails). Exposed for tests. */
int sky_log_journal_stream(const char *env, int fd);
void sky_log(sky_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The escaping sky_log applies, for text printed elsewhere (a terminal, a
 * table): in copied to out with control characters as \n, \r, \t, \xNN
 * and a backslash doubled only where it would read as one of those, a "<"
 * and digit where in starts as \x3c (a line of its own cannot carry a
 * journald priority); at most
 * cap bytes, always terminated, cut at a whole escape. Returns out. */
char *sky_log_escape(const char *in, char *out, size_t cap);

#define SKY_ERROR(...) sky_log(SKY_LOG_ERROR, __VA_ARGS__)
#define SKY_WARN(...) sky_log(SKY_LOG_WARN, __VA_ARGS__)
#define SKY_INFO(...) sky_log(SKY_LOG_INFO, __VA_ARGS__)
#define SKY_DEBUG(...) \
	do { \
		if (sky_log_enabled(SKY_LOG_DEBUG)) \
			sky_log(SKY_LOG_DEBUG, __VA_ARGS__); \
	} while (0)

#endif
