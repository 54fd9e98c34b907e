#include "sky_log.h"

#include "sky_clock.h"
#include "sky_err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_level = -1; /* -1: not yet read from the environment */
static const char *g_name = "sky";

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

void sky_log_set_level(sky_log_level level) { g_level = (int)level; }
void sky_log_set_name(const char *name) { g_name = name ? name : "sky"; }

int sky_log_enabled(sky_log_level level)
{
	if (g_level < 0) {
		sky_log_level l = SKY_LOG_INFO;
		sky_log_parse_level(getenv("SKY_LOG"), &l);
		g_level = (int)l;
	}
	return (int)level <= g_level;
}

void sky_log(sky_log_level level, const char *fmt, ...)
{
	if (!sky_log_enabled(level))
		return;
	char when[32];
	sky_clock_utc_iso(when, sizeof when);
	char line[1024];
	int n = snprintf(line, sizeof line, "%s %s[%d] %s: ", when, g_name, (int)getpid(),
			 k_names[level]);
	va_list ap;
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof line)
		vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
	va_end(ap);
	/* one fputs per line so lines from threads do not interleave */
	size_t len = strlen(line);
	if (len + 1 < sizeof line) {
		line[len] = '\n';
		line[len + 1] = '\0';
	}
	fputs(line, stderr);
}
