/* The board's persistent counters in its state directory: session (one a
 * connect), epoch (of the last plan taken), trained (of the last
 * training plan finished) and cancelled (of the last serving plan the
 * planner stopped), and the random boot id of this run. */
#include "agent_internal.h"

#include "sky_file.h"
#include "sky_log.h"

#include <stdio.h>
#include <string.h>

int agent_state_path(const char *dir, const char *file, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s/%s", dir, file);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

int agent_read_counter(const char *dir, const char *file, int64_t *out, const char **why)
{
	char path[1024];
	int rc = agent_state_path(dir, file, path, sizeof path);
	if (rc == 0)
		rc = sky_file_read_count(path, out);
	*why = rc == 0		       ? "read"
	       : rc == SKY_ENOTFOUND ? "missing"
	       : rc == SKY_EFORMAT   ? "empty or not a decimal counter"
	       : rc == SKY_ERANGE    ? "beyond 2^53 - 1"
				     : "unreadable";
	return rc;
}

/* <state>/trained, so a restart does not run a finished job again. A file
 * that cannot be read is said and taken as none. */
int64_t agent_trained_epoch(const char *dir)
{
	int64_t v = 0;
	const char *why = "";
	int rc = agent_read_counter(dir, "trained", &v, &why);
	if (rc && rc != SKY_ENOTFOUND)
		SKY_WARN("%s/trained is %s: taking it as no finished training job", dir, why);
	return rc ? 0 : v;
}

int64_t agent_cancelled_epoch(const char *dir)
{
	int64_t v = 0;
	const char *why = "";
	int rc = agent_read_counter(dir, "cancelled", &v, &why);
	if (rc && rc != SKY_ENOTFOUND)
		SKY_WARN("%s/cancelled is %s: taking it as no cancelled serving job", dir, why);
	return rc ? 0 : v;
}

int agent_write_counter(const char *dir, const char *file, int64_t v)
{
	char path[1024];
	if (agent_state_path(dir, file, path, sizeof path))
		return SKY_ERANGE;
	return sky_file_write_count(path, v, 0644);
}

/* A fresh identity has session 0 (written at enrollment). A missing or
 * damaged counter means the board's state was lost or restored from an old
 * image: start again at session 1, loudly; the new boot id is what lets the
 * planner accept the fresh numbers (planner/sky_registry.h). */
int agent_start_boot(agent *a, sky_diag *d)
{
	sky_sign_rng rng;
	unsigned char raw[8];
	const char *why;
	int64_t last = 0;
	memset(&rng, 0, sizeof rng);
	int rc = sky_sign_rng_init(&rng, "skyd-boot", d);
	if (rc == 0 && sky_sign_rng_func(&rng, raw, sizeof raw) != 0)
		rc = sky_diag_set(d, SKY_ECRYPTO, "no randomness for the boot id");
	sky_sign_rng_free(&rng);
	if (rc)
		return rc;
	for (size_t i = 0; i < sizeof raw; i++)
		snprintf(a->boot + 2 * i, 3, "%02x", raw[i]);
	rc = agent_read_counter(a->o->state_dir, "session", &last, &why);
	if (rc == SKY_EIO)
		return sky_diag_set(d, rc, "%s/session: %s", a->o->state_dir, why);
	if (rc) {
		SKY_WARN("session state lost: %s/session is %s although this board holds an "
			 "identity (state lost, damaged or restored from an old image); starting "
			 "again at session 1 under the new boot id %s",
			 a->o->state_dir, why, a->boot);
		last = 0;
	} else if (last >= SKY_FILE_COUNT_MAX - 1000000) {
		/* 2^53 connects do not happen; a number this big was written by hand */
		SKY_WARN("session state damaged: %s/session holds %lld, too near 2^53; starting "
			 "again at session 1 under the new boot id %s",
			 a->o->state_dir, (long long)last, a->boot);
		last = 0;
	}
	a->session = last;
	SKY_INFO("boot %s: sessions continue from %lld", a->boot, (long long)last);
	return 0;
}
