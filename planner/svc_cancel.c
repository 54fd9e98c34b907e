/* sky job cancel (svc_internal.h): a request on sky/v1/jobs/<op>/cancel,
 * {"job":"j1","cancel_id":"<hex>"}, from operator op (the CN the ACL pins
 * that topic to). Only the job's owner may cancel it (sky_owner.h). The job
 * is stopped as a finished one is let go: taken out of the queue, no
 * longer followed (no re-plans, no replays; its run file removed), its
 * boards free for other jobs, its requests answered as a job that does not
 * serve, and what was relayed to its owner cleared, with the retained
 * state "cancelled". The boards that hold it, training or serving, are
 * told to stop it (stop_boards). Every request is answered on sky/v1/jobs/<op>/reply
 * (a sky_job_reply whose submit_id is the cancel_id). */
#include "svc_internal.h"

#include "sky_json.h"
#include "sky_owner.h"

#include <stdio.h>
#include <string.h>

/* {"job":..,"cancel_id":..} into job and id. Returns 0 or the reason in d. */
static int parse(const char *p, size_t len, char *job, size_t jcap, char *id, size_t icap,
		 sky_diag *d)
{
	cJSON *doc = sky_json_parse(p, len, d);
	if (!doc)
		return SKY_EFORMAT;
	int rc = sky_json_str(doc, "job", job, jcap, "cancel", d);
	if (rc == 0 && !sky_topic_segment_ok(job))
		rc = sky_diag_set(d, SKY_EINVAL, "cancel: \"job\" is not a job id ([A-Za-z0-9_.-], "
						 "1-64 characters)");
	id[0] = '\0';
	if (rc == 0 && cJSON_GetObjectItemCaseSensitive(doc, "cancel_id") &&
	    sky_json_str(doc, "cancel_id", id, icap, "cancel", d) != 0)
		rc = SKY_EFORMAT;
	sky_json_free(doc);
	return rc;
}

/* The boards that hold the job stop it at once:
 * {"cmd":"stop","job":J,"epoch":E} on each one's command topic, which only
 * the planner may write (the ACL), E the epoch the board holds (from its
 * plan-ack, as the registry has it); a board stops only the job it holds
 * at that epoch, training or serving (agent_cmd.c). Whether the job is followed or not
 * (a training job without checkpoints is not). Returns how many boards
 * were told. */
static int stop_boards(svc *s, const char *job)
{
	char buf[SKY_CMD_MAX_BYTES], topic[SKY_TOPIC_BUF];
	int told = 0;
	for (int i = 0; i < s->reg.n; i++) {
		const sky_reg_board *b = &s->reg.b[i];
		if (strcmp(b->job, job) != 0 || b->epoch <= 0)
			continue;
		int n = snprintf(buf, sizeof buf, "{\"cmd\":\"stop\",\"job\":\"%s\",\"epoch\":%lld}",
				 job, (long long)b->epoch);
		if (n > 0 && (size_t)n < sizeof buf &&
		    sky_topic_board(topic, sizeof topic, b->id, SKY_TOPIC_CMD) == 0 &&
		    svc_publish(s, topic, buf, (size_t)n, 1, 0, NULL) == 0)
			told++;
	}
	return told;
}

static int64_t epoch_of(const svc *s, const char *job)
{
	for (int j = 0; j < s->reg.n_jobs; j++)
		if (!strcmp(s->reg.jobs[j].job, job))
			return s->reg.jobs[j].epoch;
	return 0;
}

void svc_cancel_on_msg(svc *s, const char *op, const char *p, size_t len)
{
	char topic[SKY_TOPIC_BUF], buf[SKY_JOB_REPLY_MAX_BYTES];
	sky_job_reply r;
	sky_diag d;
	sky_diag_clear(&d);
	memset(&r, 0, sizeof r);
	if (sky_topic_jobs(topic, sizeof topic, op, SKY_TOPIC_REPLY) != 0)
		return;
	int rc = parse(p, len, r.job, sizeof r.job, r.submit_id, sizeof r.submit_id, &d);
	if (rc == 0)
		rc = sky_owner_check(s->state_dir, r.job, op, &d);
	if (rc == 0) {
		int queued = svc_submit_drop(s, r.job);
		int told = stop_boards(s, r.job);
		int followed = svc_follow_drop(s, r.job);
		/* its requests are answered as a job that does not serve:
		 * the boards of a serving job stop taking them (stop_boards) */
		sky_nojob_note(&s->nojob, r.job, SKY_NOJOB_CANCELLED);
		int64_t epoch = epoch_of(s, r.job);
		svc_relay_cancel(s, r.job, op, epoch);
		SKY_INFO("job %s (epoch %lld) cancelled by operator %s%s%s%s", r.job,
			 (long long)epoch, op, queued ? "; taken out of the queue" : "",
			 followed ? "; no longer followed" : "",
			 told ? "; its boards told to stop" : "");
	} else {
		char esc[200];
		SKY_WARN("cancel from operator %s refused: %s", op,
			 sky_log_escape(d.msg, esc, sizeof esc));
	}
	r.ok = rc == 0;
	snprintf(r.state, sizeof r.state, "%s", rc == 0 ? "cancelled" : "refused");
	if (rc)
		snprintf(r.error, sizeof r.error, "%.200s", d.msg[0] ? d.msg : sky_strerror(rc));
	int n = sky_job_reply_encode(&r, buf, sizeof buf);
	if (n > 0)
		svc_publish(s, topic, buf, (size_t)n, 1, 0, NULL);
}
