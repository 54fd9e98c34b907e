#include "sky_log.h"

#include "sky_clock.h"
#include "sky_err.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* -1: not yet read from the environment. Atomic: Paho's thread logs too
 * (a lost connection), and may be the first to read it. */
static _Atomic int g_level = -1;
static const char *g_name = "sky";
/* -1: not yet decided from $JOURNAL_STREAM; 0 plain lines; 1 journald. */
static _Atomic int g_journal = -1;

static const char *const k_names[] = {"error", "warn", "info", "debug"};

int sky_log_parse_level(const char *text, sky_log_level *out)
{
	for (int i = 0; i < 4; i++) {
		if (text && strcmp(text, k_names[i]) == 0) {
			*out = (sky_log_level)i;
			return 0;
		}
	}
	return SKY_EINVAL;
}

/* syslog(3) priorities: LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG */
static const int k_prio[] = {3, 4, 6, 7};

void sky_log_set_journal(int on) { atomic_store(&g_journal, on ? 1 : 0); }

int sky_log_journal_stream(const char *env, int fd)
{
	unsigned long long dev = 0, ino = 0;
	struct stat st;
	if (!env || sscanf(env, "%llu:%llu", &dev, &ino) != 2 || fstat(fd, &st) != 0)
		return 0;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

static int journal_mode(void)
{
	int cur = atomic_load(&g_journal);
	if (cur < 0) {
		/* as sky_log_enabled: racing threads compute the same answer */
		int j = sky_log_journal_stream(getenv("JOURNAL_STREAM"), 2);
		atomic_compare_exchange_strong(&g_journal, &cur, j);
		cur = atomic_load(&g_journal);
	}
	return cur;
}

void sky_log_set_level(sky_log_level level) { atomic_store(&g_level, (int)level); }
void sky_log_set_name(const char *name) { g_name = name ? name : "sky"; }

int sky_log_enabled(sky_log_level level)
{
	int cur = atomic_load(&g_level);
	if (cur < 0) {
		/* two threads may both read the environment; they store the same
		 * value, and a level set meanwhile by sky_log_set_level wins */
		sky_log_level l = SKY_LOG_INFO;
		sky_log_parse_level(getenv("SKY_LOG"), &l);
		atomic_compare_exchange_strong(&g_level, &cur, (int)l);
		cur = atomic_load(&g_level);
	}
	return (int)level <= cur;
}

char *sky_log_escape(const char *in, char *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	if (cap == 0)
		return out;
	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		char esc[5];
		size_t k = 0;
		unsigned char c = *p;
		if (c == '\n' || c == '\r' || c == '\t') {
			esc[k++] = '\\';
			esc[k++] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
		} else if (c < 0x20 || c == 0x7f ||
			   (c == '<' && p == (const unsigned char *)in && p[1] >= '0' && p[1] <= '9')) {
			/* ... and a "<N>" where the text starts: printed as a line of
			 * its own, journald would read it as a priority */
			esc[k++] = '\\', esc[k++] = 'x', esc[k++] = hex[c >> 4], esc[k++] = hex[c & 15];
		} else if (c == '\\' && (p[1] == 'n' || p[1] == 'r' || p[1] == 't' || p[1] == 'x' ||
					 p[1] == '\\')) {
			esc[k++] = '\\', esc[k++] = '\\'; /* a literal "\n" stays readable as such */
		} else {
			esc[k++] = (char)c;
		}
		if (o + k >= cap)
			break;
		memcpy(out + o, esc, k);
		o += k;
	}
	out[o] = '\0';
	return out;
}

void sky_log(sky_log_level level, const char *fmt, ...)
{
	if (!sky_log_enabled(level))
		return;
	char line[1024];
	int n;
	if (journal_mode()) {
		/* journald reads the <N> as the priority and adds time, name and pid */
		n = snprintf(line, sizeof line, "<%d>", k_prio[level]);
	} else {
		char when[32];
		sky_clock_utc_iso(when, sizeof when);
		n = snprintf(line, sizeof line, "%s %s[%d] %s: ", when, g_name, (int)getpid(),
			     k_names[level]);
	}
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	/* the message may carry what a board or client sent: escaped, it
	 * cannot end this line or start a forged one */
	if (n > 0 && (size_t)n < sizeof line)
		sky_log_escape(msg, line + n, sizeof line - (size_t)n - 1);
	/* one fputs per line so lines from threads do not interleave */
	size_t len = strlen(line);
	if (len + 1 < sizeof line) {
		line[len] = '\n';
		line[len + 1] = '\0';
	}
	fputs(line, stderr);
}
