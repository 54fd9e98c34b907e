/* What a job's owner reads (svc_internal.h): the planner relays a job's
 * metrics, parts and last state to sky/v1/jobs/<owner>/job/<job>/...,
 * which the ACL lets only that operator read (operators no longer read the
 * job topics themselves). Parts and the last state are retained, so a
 * `sky job collect` or `sky job watch` after the job ended still gets them;
 * the topics retained for a job are listed in <state>/relayed/<job> and
 * cleared when its owner submits it again or cancels it. The owners
 * (sky_owner.h) are cached here, since each metrics message needs one. */
#include "svc_internal.h"

#include "sky_file.h"
#include "sky_json.h"
#include "sky_owner.h"

#include <stdio.h>
#include <string.h>

/* a relayed topic: sky/v1/jobs/<op>/job/<job>/part/<board> is longer than
 * SKY_TOPIC_BUF with 64-byte names */
#define RELAY_TOPIC_BUF 256

/* ---- owners ------------------------------------------------------------------ */

int svc_relay_owner(svc *s, const char *job, char *op, size_t cap)
{
	svc_relay_state *rs = &s->relay;
	rs->tick++;
	for (int i = 0; i < SVC_RELAY_OWNERS; i++)
		if (rs->owner[i].used && !strcmp(rs->owner[i].job, job)) {
			rs->owner[i].used = rs->tick;
			snprintf(op, cap, "%s", rs->owner[i].op);
			return 0;
		}
	char o[SKY_TOPIC_SEGMENT_MAX + 1];
	int rc = sky_owner_get(s->state_dir, job, o, sizeof o);
	if (rc)
		return rc;
	int lru = 0;
	for (int i = 1; i < SVC_RELAY_OWNERS; i++)
		if (rs->owner[i].used < rs->owner[lru].used)
			lru = i;
	snprintf(rs->owner[lru].job, sizeof rs->owner[lru].job, "%s", job);
	snprintf(rs->owner[lru].op, sizeof rs->owner[lru].op, "%s", o);
	rs->owner[lru].used = rs->tick;
	snprintf(op, cap, "%s", o);
	return 0;
}

/* ---- cancelled jobs ------------------------------------------------------------ */

int svc_relay_cancelled(const svc *s, const char *job)
{
	for (int i = 0; i < SVC_RELAY_CANCELLED; i++)
		if (!strcmp(s->relay.cancelled[i], job))
			return 1;
	return 0;
}

sky_nojob_kind svc_relay_nojob_kind(const svc *s, const sky_planmsg *m)
{
	/* a cancelled job's plan stays retained: seen again (a reconnect, a
	 * restart) it must not make the planner leave its requests to boards
	 * that stopped serving them */
	if (svc_relay_cancelled(s, m->job))
		return SKY_NOJOB_CANCELLED;
	return m->infer.on ? SKY_NOJOB_SERVING : SKY_NOJOB_TRAINING;
}

/* <state>/cancelled.txt: the remembered cancelled jobs, one a line, oldest
 * first, so that a restarted planner still answers their requests
 * `unknown_job` "cancelled" (their plans stay retained). */
static int cancelled_path(const svc *s, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s/cancelled.txt", s->state_dir);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

static void save_cancelled(const svc *s)
{
	const svc_relay_state *rs = &s->relay;
	char path[700], buf[SVC_RELAY_CANCELLED * (SKY_TOPIC_SEGMENT_MAX + 2) + 1];
	size_t k = 0;
	for (int i = 0; i < SVC_RELAY_CANCELLED; i++) {
		const char *j = rs->cancelled[(rs->next_cancelled + i) % SVC_RELAY_CANCELLED];
		if (j[0])
			k += (size_t)snprintf(buf + k, sizeof buf - k, "%s\n", j);
	}
	if (cancelled_path(s, path, sizeof path) != 0 || sky_file_write(path, buf, k, 0600) != 0)
		SKY_WARN("cannot write the cancelled jobs to %s", path);
}

static void set_cancelled(svc *s, const char *job, int on)
{
	svc_relay_state *rs = &s->relay;
	for (int i = 0; i < SVC_RELAY_CANCELLED; i++)
		if (!strcmp(rs->cancelled[i], job)) {
			if (!on) {
				rs->cancelled[i][0] = '\0';
				save_cancelled(s);
			}
			return;
		}
	if (!on)
		return;
	int slot = rs->next_cancelled;
	rs->next_cancelled = (slot + 1) % SVC_RELAY_CANCELLED;
	snprintf(rs->cancelled[slot], sizeof rs->cancelled[slot], "%s", job);
	save_cancelled(s);
}

void svc_relay_restore(svc *s)
{
	char path[700], buf[SVC_RELAY_CANCELLED * (SKY_TOPIC_SEGMENT_MAX + 2) + 1];
	if (cancelled_path(s, path, sizeof path) != 0)
		return;
	long got = sky_file_read(path, buf, sizeof buf - 1);
	if (got <= 0)
		return;
	buf[got] = '\0';
	int n = 0;
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		if (!sky_topic_segment_ok(line)) { /* not ours: a hand edit, a torn disk */
			SKY_WARN("%s: '%.64s' is not a job id; skipped", path, line);
			continue;
		}
		int slot = s->relay.next_cancelled;
		s->relay.next_cancelled = (slot + 1) % SVC_RELAY_CANCELLED;
		snprintf(s->relay.cancelled[slot], sizeof s->relay.cancelled[slot], "%s", line);
		n++;
	}
	if (n)
		SKY_INFO("%d cancelled job(s) remembered from %s", n, path);
}

/* ---- the retained topics of a job ---------------------------------------------- */

static int list_path(const svc *s, const char *job, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s/relayed/%s", s->state_dir, job);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

/* leaf ("part/<board>", "part/<board>/<chunk>", "state") noted as
 * retained for job, once. */
static void note_retained(svc *s, const char *job, const char *leaf)
{
	char path[700], dir[640], line[140];
	static char buf[16u << 10];
	if (list_path(s, job, path, sizeof path) != 0)
		return;
	int n = snprintf(line, sizeof line, "%s\n", leaf);
	long got = sky_file_read(path, buf, sizeof buf - 1);
	if (got > 0) {
		buf[got] = '\0';
		for (char *p = buf; (p = strstr(p, line)) != NULL; p++)
			if (p == buf || p[-1] == '\n')
				return;
	}
	snprintf(dir, sizeof dir, "%s/relayed", s->state_dir);
	if (sky_file_mkdirs(dir, 0700) != 0 || sky_file_append(path, line, (size_t)n, 0600) != 0)
		SKY_WARN("job %s: cannot note its retained %s in %s", job, leaf, path);
}

static void publish_retained(svc *s, const char *op, const char *job, const char *leaf,
			     const char *who, const void *p, size_t len)
{
	char topic[RELAY_TOPIC_BUF];
	if (sky_topic_jobs_job(topic, sizeof topic, op, job, leaf, who) != 0)
		return;
	svc_publish(s, topic, p, len, 1, 1, NULL);
}

void svc_relay_clear(svc *s, const char *job, const char *op)
{
	char path[700];
	static char buf[16u << 10];
	if (list_path(s, job, path, sizeof path) != 0)
		return;
	long got = sky_file_read(path, buf, sizeof buf - 1);
	if (got > 0) {
		buf[got] = '\0';
		for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
			/* "state", "part/<board>", "part/<board>/<chunk>": the
			 * last level is the who of the topic */
			char *slash = strrchr(line, '/');
			if (slash)
				*slash = '\0';
			/* an empty retained message clears the broker's copy */
			publish_retained(s, op, job, line, slash ? slash + 1 : NULL, "", 0);
		}
	}
	sky_file_remove(path);
	set_cancelled(s, job, 0);
}

void svc_relay_state_msg(svc *s, const char *job, const char *op, int64_t epoch,
			 const char *state, const char *extra)
{
	char msg[SKY_JOB_STATE_MAX_BYTES];
	int n = snprintf(msg, sizeof msg, "{\"job\":\"%s\",\"epoch\":%lld,\"state\":\"%s\"%s%s}", job,
			 (long long)epoch, state, extra && *extra ? "," : "", extra ? extra : "");
	if (n < 0 || (size_t)n >= sizeof msg)
		return;
	publish_retained(s, op, job, SKY_TOPIC_STATE, NULL, msg, (size_t)n);
	note_retained(s, job, SKY_TOPIC_STATE);
}

void svc_relay_cancel(svc *s, const char *job, const char *op, int64_t epoch)
{
	svc_relay_clear(s, job, op);
	set_cancelled(s, job, 1);
	svc_relay_state_msg(s, job, op, epoch, "cancelled", NULL);
}

/* ---- the relays ---------------------------------------------------------------- */

/* A board's words into a JSON string's inside: printable ASCII only, no
 * quote or backslash (each becomes '?'). */
static void json_safe(const char *in, char *out, size_t cap)
{
	size_t k = 0;
	for (; *in && k + 1 < cap; in++)
		out[k++] = (*in >= 0x20 && *in < 0x7f && *in != '"' && *in != '\\') ? *in : '?';
	out[k] = '\0';
}

/* The stages of job's plan at epoch (its boards in the registry). */
static int plan_stages(const svc *s, const char *job, int64_t epoch)
{
	int n = 0;
	for (int i = 0; i < s->reg.n; i++)
		n += !strcmp(s->reg.b[i].job, job) && s->reg.b[i].epoch == epoch;
	return n;
}

/* After a metrics message of job: every stage of its epoch done (or one
 * stalled) is its last state, retained for its owner. */
static void maybe_ended(svc *s, const char *job, const char *op, const char *p, size_t len)
{
	cJSON *doc = sky_json_parse(p, len, NULL);
	if (!doc)
		return;
	int64_t epoch = 0;
	int is_done = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "done"));
	int stalled = cJSON_GetObjectItemCaseSensitive(doc, "stall") != NULL;
	char why[200] = "";
	sky_json_i64(doc, "epoch", 0, SKY_JSON_INT_MAX, &epoch, "metrics", NULL);
	if (stalled)
		sky_json_str(doc, "message", why, sizeof why, "metrics", NULL);
	sky_json_free(doc);
	if (!is_done && !stalled)
		return;
	if (stalled) {
		char extra[300], esc[220];
		json_safe(why, esc, sizeof esc);
		snprintf(extra, sizeof extra, "\"message\":\"%s\"", esc);
		svc_relay_state_msg(s, job, op, epoch, "stalled", extra);
		return;
	}
	int n = plan_stages(s, job, epoch), done = 0, step = 0, has_loss = 0;
	double loss = 0;
	for (int k = 0; k < s->jobs.n; k++) {
		const sky_jobstat_row *r = &s->jobs.row[k];
		if (strcmp(r->job, job) || r->epoch != epoch || !r->done)
			continue;
		done++;
		if (r->step > step)
			step = r->step;
		if (r->has_loss)
			loss = r->loss, has_loss = 1;
	}
	if (n == 0 || done < n)
		return;
	char extra[160];
	snprintf(extra, sizeof extra, "\"stages\":%d,\"step\":%d%s", n, step,
		 has_loss ? ",\"loss\":" : "");
	if (has_loss)
		snprintf(extra + strlen(extra), sizeof extra - strlen(extra), "%.9g", loss);
	svc_relay_state_msg(s, job, op, epoch, "done", extra);
}

void svc_relay_metrics(svc *s, const char *job, const char *board, const char *p, size_t len)
{
	char op[SKY_TOPIC_SEGMENT_MAX + 1], topic[RELAY_TOPIC_BUF];
	(void)board;
	if (svc_relay_owner(s, job, op, sizeof op) != 0 || svc_relay_cancelled(s, job))
		return; /* no owner (a job from before owners were kept) or cancelled */
	if (sky_topic_jobs_job(topic, sizeof topic, op, job, SKY_TOPIC_METRICS, NULL) == 0)
		svc_publish(s, topic, p, len, 0, 0, NULL);
	maybe_ended(s, job, op, p, len);
}

void svc_relay_part(svc *s, const char *job, const char *board, const char *chunk,
		    const unsigned char *p, size_t len)
{
	char op[SKY_TOPIC_SEGMENT_MAX + 1], leaf[128], sub[96];
	if (len == 0 || svc_relay_owner(s, job, op, sizeof op) != 0 || svc_relay_cancelled(s, job))
		return;
	/* a chunk's topic is the part's with its index below: .../part/<board>/<i> */
	snprintf(sub, sizeof sub, SKY_TOPIC_PART "/%s", board);
	if (chunk)
		publish_retained(s, op, job, sub, chunk, p, len);
	else
		publish_retained(s, op, job, SKY_TOPIC_PART, board, p, len);
	snprintf(leaf, sizeof leaf, "%s%s%s", sub, chunk ? "/" : "", chunk ? chunk : "");
	note_retained(s, job, leaf);
}

/* ---- the operators' limits and usage ------------------------------------------- */

/* One operator's row; its index in names (adding it when new). */
static int op_row(char names[][SKY_TOPIC_SEGMENT_MAX + 1], int *n, int cap, const char *op)
{
	for (int i = 0; i < *n; i++)
		if (!strcmp(names[i], op))
			return i;
	if (*n >= cap || !op[0])
		return -1;
	snprintf(names[*n], sizeof names[0], "%s", op);
	return (*n)++;
}

void svc_relay_save_operators(svc *s)
{
	enum { ROWS = MAX_PENDING + SKY_DEPLOY_MAX_UPLOADS };
	static char names[ROWS][SKY_TOPIC_SEGMENT_MAX + 1];
	int pending[ROWS] = {0}, uploads[ROWS] = {0}, n = 0;
	for (int k = 0; k < s->submit.n_pending; k++) {
		int i = op_row(names, &n, ROWS, s->submit.pending[k].job.op);
		if (i >= 0)
			pending[i]++;
	}
	for (int k = 0; k < SKY_DEPLOY_MAX_UPLOADS; k++) {
		int i = s->deploy.up[k].active ? op_row(names, &n, ROWS, s->deploy.up[k].op) : -1;
		if (i >= 0)
			uploads[i]++;
	}
	char *buf = s->relay.ops_json;
	size_t cap = sizeof s->relay.ops_json, len = 0;
	int w = snprintf(buf, cap,
			 "{\"limits\":{\"pending_per_operator\":%d,\"pending_max\":%d,"
			 "\"uploads_per_operator\":%d,\"upload_slots\":%d,"
			 "\"stored_bytes_per_operator\":%lld,\"share_busy_boards\":%s},"
			 "\"operators\":[",
			 s->o->pending_per_op, MAX_PENDING, s->o->uploads_per_op, SKY_DEPLOY_MAX_UPLOADS,
			 s->o->stored_per_op, s->o->share_busy_boards ? "true" : "false");
	for (int i = 0; w > 0 && (size_t)w < cap - len && i < n; i++) {
		len += (size_t)w;
		w = snprintf(buf + len, cap - len, "%s{\"operator\":\"%s\",\"pending\":%d,\"uploads\":%d}",
			     i ? "," : "", names[i], pending[i], uploads[i]);
	}
	if (w < 0 || (size_t)w >= cap - len)
		return;
	len += (size_t)w;
	w = snprintf(buf + len, cap - len, "]}\n");
	if (w < 0 || (size_t)w >= cap - len)
		return;
	len += (size_t)w;
	/* written when it changed only: the loop saves its state often */
	if (len == s->relay.ops_len && !memcmp(buf, s->relay.ops_saved, len))
		return;
	char path[640];
	if (svc_state_file(s, "operators.json", path, sizeof path) != 0 ||
	    sky_file_write(path, buf, len, 0644) != 0) {
		SKY_WARN("cannot write %s", path);
		return;
	}
	memcpy(s->relay.ops_saved, buf, len);
	s->relay.ops_len = len;
}
