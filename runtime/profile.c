#include "sky_profile.h"

#include "sky_caps.h"

#include "sky_clock.h"
#include "sky_cpu.h"
#include "sky_file.h"
#include "sky_log.h"

#include <cblas.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sky_profile_defaults(sky_profile *p)
{
	memset(p, 0, sizeof *p);
	snprintf(p->name, sizeof p->name, "default");
	p->threads = 1;
	p->mem_cap_mb = 0;
	p->speed = 1.0;
	snprintf(p->source, sizeof p->source, "built-in defaults");
}

static char *trim(char *s, char *end)
{
	while (s < end && isspace((unsigned char)*s))
		s++;
	while (end > s && isspace((unsigned char)end[-1]))
		end--;
	*end = '\0';
	return s;
}

static int valid_name(const char *v)
{
	if (!*v)
		return 0;
	for (; *v; v++)
		if (!isalnum((unsigned char)*v) && *v != '.' && *v != '_' && *v != '-')
			return 0;
	return 1;
}

/* One "key = value" line (comment and blanks already stripped). */
static int parse_line(sky_profile *p, char *line, unsigned *seen, const char *what, int ln,
		      sky_diag *d)
{
	static const char *const keys[] = {"name", "threads", "mem_cap_mb", "speed", "site"};
	_Static_assert(sizeof p->site == SKY_SITE_MAX + 1, "profile site holds a site name");
	char *eq = strchr(line, '=');
	if (!eq)
		return sky_diag_set(d, SKY_EFORMAT, "%.150s:%d: expected 'key = value'", what, ln);
	char *key = trim(line, eq);
	char *val = trim(eq + 1, eq + 1 + strlen(eq + 1));
	int k = -1;
	for (int i = 0; i < 5; i++)
		if (strcmp(key, keys[i]) == 0)
			k = i;
	if (k < 0)
		return sky_diag_set(d, SKY_EFORMAT,
				    "%.150s:%d: unknown key '%.32s' (known: name, threads, "
				    "mem_cap_mb, speed, site)",
				    what, ln, key);
	if (*seen & (1u << k))
		return sky_diag_set(d, SKY_EFORMAT, "%.150s:%d: '%s' given twice", what, ln, keys[k]);
	*seen |= 1u << k;
	if (!*val)
		return sky_diag_set(d, SKY_EFORMAT, "%.150s:%d: '%s' has no value", what, ln, keys[k]);

	char *end = NULL;
	errno = 0;
	switch (k) {
	case 0:
		if (!valid_name(val) || strlen(val) >= sizeof p->name)
			return sky_diag_set(d, SKY_EFORMAT,
					    "%.150s:%d: name '%.40s' must be 1-31 letters, digits, "
					    "'.', '_' or '-'",
					    what, ln, val);
		snprintf(p->name, sizeof p->name, "%s", val);
		return 0;
	case 1: {
		long v = strtol(val, &end, 10);
		if (*end || errno || v < 1 || v > SKY_PROFILE_MAX_THREADS)
			return sky_diag_set(d, SKY_ERANGE,
					    "%.150s:%d: threads must be an integer from 1 to %d, got "
					    "'%.40s'",
					    what, ln, SKY_PROFILE_MAX_THREADS, val);
		p->threads = (int)v;
		return 0;
	}
	case 2: {
		unsigned long long v = isdigit((unsigned char)val[0]) ? strtoull(val, &end, 10) : 0;
		if (!end || *end || errno || v > SKY_PROFILE_MAX_MEM_MB)
			return sky_diag_set(d, SKY_ERANGE,
					    "%.150s:%d: mem_cap_mb must be an integer from 0 (no cap) "
					    "to %llu, got '%.40s'",
					    what, ln, (unsigned long long)SKY_PROFILE_MAX_MEM_MB, val);
		p->mem_cap_mb = v;
		return 0;
	}
	case 4:
		if (!sky_topic_segment_ok(val))
			return sky_diag_set(d, SKY_EFORMAT,
					    "%.150s:%d: site '%.40s' must be 1-%d letters, digits, "
					    "'.', '_' or '-'",
					    what, ln, val, SKY_SITE_MAX);
		snprintf(p->site, sizeof p->site, "%s", val);
		sky_site_norm(p->site);
		return 0;
	default: {
		double v = strtod(val, &end);
		if (*end || errno || !isfinite(v) || !(v > 0.0) || v > 1.0)
			return sky_diag_set(d, SKY_ERANGE,
					    "%.150s:%d: speed must be a number in (0, 1], got '%.40s'",
					    what, ln, val);
		p->speed = v;
		return 0;
	}
	}
}

int sky_profile_parse(sky_profile *p, const char *text, size_t len, const char *what, sky_diag *d)
{
	sky_profile out = *p;
	unsigned seen = 0;
	char line[512];
	size_t at = 0;
	for (int ln = 1; at < len; ln++) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
		if (n >= sizeof line)
			return sky_diag_set(d, SKY_EFORMAT, "%.150s:%d: line longer than %zu bytes",
					    what, ln, sizeof line - 1);
		memcpy(line, text + at, n);
		line[n] = '\0';
		at += n + 1;
		if (memchr(line, '\0', n))
			return sky_diag_set(d, SKY_EFORMAT, "%.150s:%d: NUL byte", what, ln);
		char *hash = strchr(line, '#');
		char *s = trim(line, hash ? hash : line + n);
		if (!*s)
			continue;
		int rc = parse_line(&out, s, &seen, what, ln, d);
		if (rc)
			return rc;
	}
	*p = out;
	return 0;
}

int sky_profile_load_file(sky_profile *p, const char *path, sky_diag *d)
{
	static char buf[SKY_PROFILE_MAX_BYTES]; /* not reentrant; profiles load once at start */
	sky_profile_defaults(p);
	long n = sky_file_read(path, buf, sizeof buf);
	if (n == SKY_ERANGE)
		return sky_diag_set(d, SKY_ERANGE, "%.200s: larger than %d bytes", path,
				    SKY_PROFILE_MAX_BYTES);
	if (n < 0)
		return sky_diag_set(d, (int)n, "%.200s: %s", path,
				    n == SKY_ENOTFOUND ? "no such file" : "cannot read it");
	int rc = sky_profile_parse(p, buf, (size_t)n, path, d);
	if (rc)
		return rc;
	snprintf(p->source, sizeof p->source, "%s", path);
	SKY_DEBUG("profile: %s from %s (threads %d, mem_cap_mb %llu, speed %g)", p->name, path,
		  p->threads, (unsigned long long)p->mem_cap_mb, p->speed);
	return 0;
}

int sky_profile_load(sky_profile *p, const char *path, sky_diag *d)
{
	if (path)
		return sky_profile_load_file(p, path, d);
	const char *env = getenv("SKY_PROFILE");
	if (env && *env)
		return sky_profile_load_file(p, env, d);
	char dir[512], file[600] = "<exe dir>/../etc/sky/profile.conf";
	if (sky_file_exe_dir(dir, sizeof dir) == 0) {
		snprintf(file, sizeof file, "%s/../etc/sky/profile.conf", dir);
		if (sky_file_exists(file))
			return sky_profile_load_file(p, file, d);
	}
	sky_profile_defaults(p);
	SKY_DEBUG("profile: no --profile, no $SKY_PROFILE and no %s; using built-in defaults "
		  "(threads 1, no memory cap, speed 1.0)",
		  file);
	return 0;
}

uint64_t sky_profile_mem_budget(const sky_profile *p)
{
	uint64_t avail = sky_mem_available();
	uint64_t cap = p->mem_cap_mb << 20;
	if (p->mem_cap_mb == 0)
		return avail;
	if (avail == 0)
		return cap;
	return cap < avail ? cap : avail;
}

int sky_profile_set_cores(sky_profile *p, double f, sky_diag *d)
{
	if (!isfinite(f) || !(f > 0) || f > SKY_PROFILE_MAX_CORES)
		return sky_diag_set(d, SKY_ERANGE, "speed must be a number in (0, %g], got %g",
				    SKY_PROFILE_MAX_CORES, f);
	if (f > p->threads)
		return sky_diag_set(d, SKY_ERANGE,
				    "speed %g asks for %g cores' worth but profile %s gives this board "
				    "%d OpenBLAS thread%s; a board can be slowed, not sped up (use a "
				    "profile with threads >= %g)",
				    f, f, p->name, p->threads, p->threads == 1 ? "" : "s", ceil(f));
	p->speed = f / p->threads;
	return 0;
}

void sky_profile_apply_threads(const sky_profile *p) { openblas_set_num_threads(p->threads); }

double sky_profile_stretch(sky_profile *p, double elapsed_s)
{
	if (!(elapsed_s > 0) || !(p->speed > 0) || p->speed >= 1.0)
		return 0;
	p->owed_s += elapsed_s * (1.0 / p->speed - 1.0);
	double ms = floor(p->owed_s * 1000.0);
	if (ms < 1)
		return 0;
	if (ms > 4e9)
		ms = 4e9; /* sky_sleep_ms takes 32 bits; the rest stays owed */
	sky_sleep_ms((unsigned)ms);
	p->owed_s -= ms / 1000.0;
	return ms / 1000.0;
}

double sky_profile_stretch_cpu(sky_profile *p, double wall_s, double cpu_s)
{
	if (!(cpu_s > 0) || !(wall_s >= 0) || !(p->speed > 0) || p->speed >= 1.0)
		return 0;
	double owe = cpu_s / p->speed - wall_s;
	if (owe <= 0)
		return 0;
	p->owed_s += owe;
	double ms = floor(p->owed_s * 1000.0);
	if (ms < 1)
		return 0;
	if (ms > 4e9)
		ms = 4e9;
	sky_sleep_ms((unsigned)ms);
	p->owed_s -= ms / 1000.0;
	return ms / 1000.0;
}
