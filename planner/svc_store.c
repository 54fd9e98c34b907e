/* The service's own state on disk (svc_internal.h), so a restart (of it,
 * of the broker, or both) forgets nothing the fleet depends on: each job's
 * newest signed plan (<state>/plans/<job>.env, republished when the broker
 * lacks it), the epoch (<state>/epoch, only grows), and fleet.json /
 * jobs.json for `sky fleet status`. */
#include "svc_internal.h"

#include "sky_clock.h"
#include "sky_file.h"
#include "sky_metrics.h"

#include <stdio.h>
#include <string.h>

/* the broker sends retained plans right after the subscription; what has
 * not come within this grace is missing there */
#define REPUBLISH_GRACE_S 2.0

int svc_state_file(const svc *s, const char *name, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s/%s", s->state_dir, name);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

/* <state>/plans/<job>.env: the newest signed plan of each job, exactly as
 * published, so a planner restarted after the broker lost its retained
 * messages can publish it again. Returns 0 or SKY_E*. */
int svc_store_plan_file(const svc *s, const char *job, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s/plans/%s.env", s->state_dir, job);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

int svc_store_save(svc *s, const char *job, const char *env, size_t len)
{
	char path[700];
	int rc = svc_store_plan_file(s, job, path, sizeof path);
	if (rc == 0) {
		char dir[640];
		snprintf(dir, sizeof dir, "%s/plans", s->state_dir);
		rc = sky_file_mkdirs(dir, 0700);
	}
	if (rc == 0)
		rc = sky_file_write(path, env, len, 0600);
	if (rc)
		SKY_ERROR("cannot save the plan of job %s in %s: %s", job, path, sky_strerror(rc));
	return rc;
}

/* A signed plan of ours into s->store.msg. Returns 0 or SKY_E*. */
static int verify(svc *s, const char *env, size_t len)
{
	size_t plen = 0;
	int rc = sky_verify_envelope(&s->planner_crt, env, len, s->store.payload,
				     sizeof s->store.payload, &plen, NULL);
	if (rc == 0)
		rc = sky_planmsg_decode(s->store.payload, plen, &s->store.msg, NULL);
	return rc;
}

long svc_store_load(svc *s, const char *job, const sky_planmsg **plan, const char **env)
{
	char path[700];
	long n = svc_store_plan_file(s, job, path, sizeof path);
	*plan = NULL;
	if (env)
		*env = NULL;
	if (n == 0)
		n = sky_file_read(path, s->store.envelope, sizeof s->store.envelope);
	if (n <= 0)
		return n < 0 ? n : SKY_EFORMAT;
	int rc = verify(s, s->store.envelope, (size_t)n);
	if (rc == 0 && strcmp(s->store.msg.job, job) != 0)
		rc = SKY_EFORMAT;
	if (rc)
		return rc;
	*plan = &s->store.msg;
	if (env)
		*env = s->store.envelope;
	return n;
}

static int job_index(const sky_registry *r, const char *job)
{
	for (int j = 0; j < r->n_jobs; j++)
		if (strcmp(r->jobs[j].job, job) == 0)
			return j;
	return -1;
}

/* Our own plans, read back (retained ones at every connect): they restore
 * the assignments and keep the epoch above every plan ever published, even
 * if <state>/epoch was lost; one newer than our saved copy is saved. The
 * epoch of a retained one is noted, so the republish check knows what the
 * broker holds. Anything that does not verify is ignored. */
void svc_store_on_plan(svc *s, const char *topic, const char *p, size_t len, int retained)
{
	const sky_planmsg *m = &s->store.msg;
	if (len == 0 || verify(s, p, len) != 0)
		return;
	char want[SKY_TOPIC_BUF];
	if (sky_topic_job(want, sizeof want, m->job, SKY_TOPIC_PLAN) != 0 || strcmp(want, topic) != 0)
		return; /* signed for another job's topic */
	if (m->epoch > s->store.epoch) {
		SKY_INFO("plan %s epoch %lld found on the broker; next epoch follows it", m->job,
			 (long long)m->epoch);
		s->store.epoch = m->epoch;
	}
	int j = job_index(&s->reg, m->job);
	if (j < 0 || m->epoch > s->reg.jobs[j].epoch)
		svc_store_save(s, m->job, p, len);
	sky_registry_assign(&s->reg, m);
	sky_nojob_note(&s->nojob, m->job, svc_relay_nojob_kind(s, m));
	j = job_index(&s->reg, m->job);
	if (retained && j >= 0 && m->epoch > s->store.on_broker[j])
		s->store.on_broker[j] = m->epoch;
}

void svc_store_published(svc *s, const sky_planmsg *plan)
{
	int j = job_index(&s->reg, plan->job);
	if (j >= 0)
		s->store.on_broker[j] = plan->epoch;
}

/* Publishes again (retained) every saved plan that the broker does not hold
 * at its epoch: after a broker restart without persistence, or a retained
 * message cleared by hand. */
static void republish_missing(svc *s)
{
	char topic[SKY_TOPIC_BUF];
	for (int j = 0; j < s->reg.n_jobs; j++) {
		const char *job = s->reg.jobs[j].job, *env;
		const sky_planmsg *m;
		if (s->store.on_broker[j] >= s->reg.jobs[j].epoch)
			continue;
		long n = svc_store_load(s, job, &m, &env);
		if (n < 0) {
			SKY_WARN("job %s epoch %lld: the broker does not hold its plan and the "
				 "saved copy cannot be used (%s)",
				 job, (long long)s->reg.jobs[j].epoch, sky_strerror((int)n));
			continue;
		}
		if (m->epoch != s->reg.jobs[j].epoch ||
		    sky_topic_job(topic, sizeof topic, job, SKY_TOPIC_PLAN) != 0)
			continue;
		int had = s->store.on_broker[j] > 0;
		if (svc_publish(s, topic, env, (size_t)n, 1, 1, NULL) == 0) {
			s->store.on_broker[j] = m->epoch;
			SKY_INFO("job %s epoch %lld: the broker %s; republished the saved plan "
				 "(retained)",
				 job, (long long)m->epoch, had ? "held an older plan" : "held no plan");
		}
	}
}

void svc_store_connecting(svc *s, int end)
{
	if (end) {
		/* publishing a plan the broker does hold is harmless: boards
		 * re-acknowledge it */
		s->store.republish_at = sky_clock_s() + REPUBLISH_GRACE_S;
		return;
	}
	memset(s->store.on_broker, 0, sizeof s->store.on_broker);
	s->store.republish_at = 0;
}

void svc_store_tick(svc *s, double now)
{
	if (s->store.republish_at > 0 && now >= s->store.republish_at && s->m && !s->lost) {
		s->store.republish_at = 0;
		republish_missing(s);
	}
}

int svc_store_next_epoch(svc *s, int64_t *epoch, char *path, size_t cap)
{
	/* the epoch only grows, across restarts too: persist it before use */
	int64_t e = s->store.epoch + 1;
	int rc = svc_state_file(s, "epoch", path, cap);
	if (rc == 0)
		rc = sky_file_write_count(path, e, 0644);
	if (rc)
		return rc;
	s->store.epoch = e;
	*epoch = e;
	return 0;
}

int64_t svc_store_epoch(const svc *s)
{
	return s->store.epoch;
}

void svc_store_save_state(svc *s)
{
	char path[640];
	char *buf = s->store.status_buf;
	int64_t unix_s = sky_clock_unix();
	int n = sky_registry_to_json(&s->reg, unix_s, buf, sizeof s->store.status_buf);
	/* the scrape's snapshot from the same registry and clock as fleet.json */
	sky_metrics_publish(sky_metrics_default(), &s->reg, unix_s);
	s->reg.changed = 0;
	if (svc_state_file(s, "fleet.json", path, sizeof path) != 0 || n < 0 ||
	    sky_file_write(path, buf, (size_t)n, 0644) != 0)
		SKY_WARN("cannot write %s", path);
	/* training jobs beside it, once there are any (sky fleet status shows them) */
	int jn = s->jobs.n ? sky_jobstat_to_json(&s->jobs, buf, sizeof s->store.status_buf) : 0;
	s->jobs.changed = 0;
	if (jn > 0 && (svc_state_file(s, "jobs.json", path, sizeof path) != 0 ||
		       sky_file_write(path, buf, (size_t)jn, 0644) != 0))
		SKY_WARN("cannot write %s", path);
	svc_relay_save_operators(s);
}

/* Boards enrolled before a restart are still part of the fleet, with their
 * boot and session order and their assignments. */
static void restore_fleet(svc *s)
{
	char path[640];
	if (svc_state_file(s, "fleet.json", path, sizeof path) != 0)
		return;
	long n = sky_file_read(path, s->store.status_buf, sizeof s->store.status_buf);
	if (n <= 0)
		return;
	int k = sky_registry_restore(&s->reg, s->store.status_buf, (size_t)n, NULL);
	if (k >= 0)
		SKY_INFO("restored %d boards and %d jobs from %s", k, s->reg.n_jobs, path);
	else
		SKY_WARN("%s is damaged; the registry starts empty", path);
}

/* The site paths as given, until measured figures replace them. */
static int restore_links(svc *s, const char *file, sky_diag *d)
{
	sky_fleet *lf = &s->store.links;
	int rc = sky_fleet_load_links(file, lf, d);
	if (rc)
		return rc;
	for (int i = 0; i < lf->n_links; i++)
		if ((rc = sky_registry_set_link(&s->reg, lf->link[i].a, lf->link[i].b,
						lf->link[i].bw_Bps, lf->link[i].lat_s, 0)) != 0)
			return sky_diag_set(d, rc, "%s: link %d: the registry cannot take it", file, i);
	SKY_INFO("%d site paths from %s", lf->n_links, file);
	return 0;
}

static void restore_epoch(svc *s)
{
	char path[640];
	int64_t e = 0;
	int erc = svc_state_file(s, "epoch", path, sizeof path);
	if (erc == 0)
		erc = sky_file_read_count(path, &e);
	if (erc == 0)
		s->store.epoch = e;
	else if (erc != SKY_ENOTFOUND || s->reg.n_jobs > 0)
		SKY_WARN("plan epoch state lost: %s is %s; the saved plans and the "
			 "broker's retained plans set the floor",
			 path, erc == SKY_ENOTFOUND ? "missing" : "damaged");
}

/* The saved plans: their ranges back into the registry, their epochs into
 * the floor. */
static void restore_plans(svc *s)
{
	for (int j = 0; j < s->reg.n_jobs; j++) {
		const sky_planmsg *m;
		long n = svc_store_load(s, s->reg.jobs[j].job, &m, NULL);
		if (n < 0) {
			SKY_WARN("job %s: saved plan unusable (%s)", s->reg.jobs[j].job,
				 sky_strerror((int)n));
			continue;
		}
		if (m->epoch > s->store.epoch)
			s->store.epoch = m->epoch;
		sky_nojob_note(&s->nojob, m->job, svc_relay_nojob_kind(s, m));
		if (m->epoch >= s->reg.jobs[j].epoch) {
			s->reg.jobs[j].epoch = m->epoch - 1; /* so that assign takes it */
			sky_registry_assign(&s->reg, m);
		}
	}
}

int svc_store_restore(svc *s, sky_diag *d)
{
	restore_fleet(s);
	if (s->o->links_file) {
		int rc = restore_links(s, s->o->links_file, d);
		if (rc)
			return rc;
	}
	restore_epoch(s);
	restore_plans(s);
	return 0;
}
