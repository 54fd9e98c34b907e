/* skyplan's answer to inference requests for jobs that do not serve; see
 * sky_nojob.h. */
#include "sky_nojob.h"

#include "sky_json.h"

#include <stdio.h>
#include <string.h>

void sky_nojob_init(sky_nojob *g)
{
	memset(g, 0, sizeof *g);
	sky_bucket_init(&g->all, SKY_NOJOB_ALL_BURST, SKY_NOJOB_ALL_PER_S);
	sky_keyed_init(&g->per_client, SKY_NOJOB_CLIENT_BURST, SKY_NOJOB_CLIENT_PER_S);
}

static int find(const sky_nojob *g, const char *job)
{
	for (int i = 0; i < g->n_jobs; i++)
		if (strcmp(g->jobs[i].job, job) == 0)
			return i;
	return -1;
}

int sky_nojob_note(sky_nojob *g, const char *job, sky_nojob_kind kind)
{
	if (!sky_topic_segment_ok(job))
		return SKY_EINVAL;
	int i = find(g, job);
	if (i < 0 && g->n_jobs < SKY_NOJOB_MAX_JOBS)
		i = g->n_jobs++;
	/* full: a job that does not serve gives up its slot (forgetting it
	 * only turns "training job" into "not known"); a serving one never */
	for (int k = 0; i < 0 && k < g->n_jobs; k++)
		if (g->jobs[k].kind != SKY_NOJOB_SERVING)
			i = k;
	if (i < 0)
		return 0;
	snprintf(g->jobs[i].job, sizeof g->jobs[i].job, "%s", job);
	g->jobs[i].kind = kind;
	return 0;
}

sky_nojob_kind sky_nojob_kind_of(const sky_nojob *g, const char *job)
{
	int i = find(g, job);
	return i < 0 ? SKY_NOJOB_UNKNOWN : (sky_nojob_kind)g->jobs[i].kind;
}

/* The request's id if it is a JSON object with a valid "id", else "". */
static void read_id(const char *p, size_t len, char id[SKY_INFER_ID_MAX + 1])
{
	id[0] = '\0';
	if (len > SKY_INFER_REQ_MAX_BYTES)
		return; /* oversize: not parsed */
	cJSON *doc = sky_json_parse(p, len, NULL);
	if (!doc || !cJSON_IsObject(doc) ||
	    sky_json_str(doc, "id", id, SKY_INFER_ID_MAX + 1, "request", NULL) != 0 ||
	    !sky_infer_id_ok(id))
		id[0] = '\0';
	sky_json_free(doc);
}

int sky_nojob_on_request(sky_nojob *g, const char *topic, size_t topic_len, const char *p,
			 size_t len, double now, char *resp_topic, size_t tcap, char *out,
			 size_t cap, int *limited, sky_diag *why)
{
	char job[SKY_TOPIC_SEGMENT_MAX + 1], to[SKY_TOPIC_SEGMENT_MAX + 1],
		client[SKY_TOPIC_SEGMENT_MAX + 1];
	*limited = 0;
	if (sky_topic_parse_job_pair(topic, topic_len, SKY_TOPIC_REQ, job, sizeof job, to,
				     sizeof to, client, sizeof client) != 0)
		return SKY_EINVAL;
	sky_nojob_kind kind = sky_nojob_kind_of(g, job);
	if (kind == SKY_NOJOB_SERVING) {
		g->silent++;
		return 0;
	}
	/* before anything is parsed: a flood costs a table look-up a message
	 * (the client CN is vouched for by the ACL, so it is a fair key) */
	if (!sky_keyed_take(&g->per_client, client, now) || !sky_bucket_take(&g->all, now)) {
		g->limited++;
		*limited = 1;
		sky_diag_set(why, SKY_ERANGE, "request from %s for job %s dropped unread: over the "
					     "rate limit (%ld dropped so far)",
			     client, job, g->limited);
		return 0;
	}
	int rc = sky_topic_job_pair(resp_topic, tcap, job, SKY_TOPIC_RESP, client,
				    SKY_TOPIC_PLANNER_CN);
	if (rc)
		return rc;
	sky_infer_resp *r = &g->resp;
	char id[SKY_INFER_ID_MAX + 1], error[SKY_INFER_ERROR_MAX];
	read_id(p, len, id);
	snprintf(error, sizeof error, "job %s %s", job,
		 kind == SKY_NOJOB_QUEUED     ? "is queued at the planner and not serving yet"
		 : kind == SKY_NOJOB_TRAINING ? "is not a serving job (its plan trains)"
		 : kind == SKY_NOJOB_CANCELLED ? "was cancelled by its operator"
					      : "is not known to the planner");
	sky_infer_resp_error(r, id, job, SKY_INFER_UNKNOWN_JOB, error);
	int n = sky_infer_resp_encode(r, out, cap, why);
	if (n < 0)
		return n;
	g->answered++;
	sky_diag_set(why, SKY_ENOTFOUND, "request %s from %s: %s", id[0] ? id : "(no id)", client,
		     error);
	return n;
}
