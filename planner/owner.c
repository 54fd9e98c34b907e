/* Job owners and per-operator quotas (sky_owner.h). */
#include "sky_owner.h"

#include "sky_file.h"

#include <stdio.h>
#include <string.h>

int sky_owner_path(const char *state_dir, const char *job, char *buf, size_t cap)
{
	if (!sky_topic_segment_ok(job))
		return SKY_EINVAL;
	int n = snprintf(buf, cap, "%s/" SKY_OWNER_DIR "/%s", state_dir, job);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

int sky_owner_get(const char *state_dir, const char *job, char *op, size_t cap)
{
	char path[700], buf[SKY_TOPIC_SEGMENT_MAX + 2];
	int rc = sky_owner_path(state_dir, job, path, sizeof path);
	if (rc)
		return rc;
	long n = sky_file_read(path, buf, sizeof buf - 1);
	if (n == SKY_ERANGE)
		return SKY_EFORMAT; /* longer than any CN */
	if (n < 0)
		return (int)n;
	buf[n] = '\0';
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	/* exactly one CN and its newline: anything else is not ours */
	if (!sky_topic_segment_ok(buf) || (size_t)n >= cap)
		return SKY_EFORMAT;
	memcpy(op, buf, (size_t)n + 1);
	return 0;
}

static int not_yours(const char *job, sky_diag *d)
{
	/* the owner's CN is not said: it is not the asker's business */
	return sky_diag_set(d, SKY_EAUTH, "job %s belongs to another operator", job);
}

int sky_owner_claim(const char *state_dir, const char *job, const char *op, sky_diag *d)
{
	char owner[SKY_TOPIC_SEGMENT_MAX + 1], path[700];
	if (!sky_topic_segment_ok(op))
		return sky_diag_set(d, SKY_EINVAL, "job %s: the operator's name is not usable", job);
	int rc = sky_owner_get(state_dir, job, owner, sizeof owner);
	if (rc == 0)
		return strcmp(owner, op) == 0 ? 0 : not_yours(job, d);
	if (rc == SKY_EFORMAT)
		return not_yours(job, d);
	if (rc != SKY_ENOTFOUND)
		return sky_diag_set(d, rc, "job %s: its owner cannot be read (%s)", job,
				    sky_strerror(rc));
	char dir[640], line[SKY_TOPIC_SEGMENT_MAX + 2];
	snprintf(dir, sizeof dir, "%s/" SKY_OWNER_DIR, state_dir);
	int n = snprintf(line, sizeof line, "%s\n", op);
	if ((rc = sky_file_mkdirs(dir, 0700)) != 0 ||
	    (rc = sky_owner_path(state_dir, job, path, sizeof path)) != 0 ||
	    (rc = sky_file_write(path, line, (size_t)n, 0600)) != 0)
		return sky_diag_set(d, rc, "job %s: its owner cannot be recorded in %s (%s)", job, dir,
				    sky_strerror(rc));
	return 0;
}

int sky_owner_check(const char *state_dir, const char *job, const char *op, sky_diag *d)
{
	char owner[SKY_TOPIC_SEGMENT_MAX + 1];
	int rc = sky_owner_get(state_dir, job, owner, sizeof owner);
	if (rc == SKY_ENOTFOUND || rc == SKY_EINVAL)
		return sky_diag_set(d, SKY_ENOTFOUND, "no job %s", job);
	if (rc != 0 || strcmp(owner, op) != 0)
		return not_yours(job, d);
	return 0;
}

int sky_owner_quota(const char *op, int n, int limit, const char *what, sky_diag *d)
{
	if (limit <= 0 || n < limit)
		return 0;
	return sky_diag_set(d, SKY_ESTATE, "operator %s has %d %s (its limit is %d)", op, n, what,
			    limit);
}
