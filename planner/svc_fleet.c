/* The fleet (svc_internal.h): board messages into the registry and the
 * online/offline transitions they and the liveness tick make, oversize
 * messages, the CA's revoked list, and probe asks. */
#include "svc_internal.h"

#include "sky_clock.h"

#include <stdio.h>
#include <string.h>

#define REVOKED_CHECK_S 1.0
/* a tick later than this after the one before: the loop itself stalled */
#define LOOP_STALL_S 1.0

/* Which boards are online now, for diff. */
static void note_online(svc *s)
{
	for (int i = 0; i < s->reg.n; i++)
		s->fleet.was_online[i] = s->reg.b[i].state == SKY_REG_ONLINE;
	s->fleet.was_n = s->reg.n;
}

/* What a transition is said with: a board's message (leaf) or its
 * silence (leaf NULL: only going offline is said, with its deadline). */
static void say_transition(const sky_reg_board *b, const char *leaf, double now)
{
	int online = b->state == SKY_REG_ONLINE;
	if (leaf)
		SKY_INFO("board %s %s (boot %s session %lld, %s)", b->id,
			 online ? "online" : "offline", b->boot[0] ? b->boot : "-",
			 (long long)b->session, online ? leaf : "its will or shutdown status");
	else if (b->state == SKY_REG_OFFLINE)
		SKY_WARN("board %s offline: nothing heard for %.2f s (keepalive %d s, deadline 1.5x)",
			 b->id, now - b->last_heard, b->keepalive_s);
}

/* The one online/offline diff: every board (or only board `only`, >= 0)
 * whose state changed since note_online. */
static void diff(svc *s, int only, const char *leaf, double now)
{
	for (int i = only >= 0 ? only : 0; i < s->reg.n && (only < 0 || i == only); i++) {
		int was = i < s->fleet.was_n && s->fleet.was_online[i];
		if (was != (s->reg.b[i].state == SKY_REG_ONLINE))
			say_transition(&s->reg.b[i], leaf, now);
	}
}

/* A plan-ack: what the board holds now, or why it refused. */
static void say_ack(svc *s, const char *id)
{
	sky_reg_board *b = sky_registry_find(&s->reg, id);
	if (b && sky_reg_ack(b) > 0)
		SKY_INFO("board %s holds job %s epoch %lld stage %d: %lld bytes reserved", id,
			 b->job, (long long)b->epoch, b->stage, (long long)b->ack_bytes);
	else if (b && b->ack < 0)
		SKY_WARN("board %s refused job %s epoch %lld: %s", id, b->ack_job,
			 (long long)b->ack_epoch, b->ack_reason);
}

/* 1 if the followed plan of r gives board id stage k (its board or a
 * replica). */
static int holds_role(const run_job *r, const char *id, int k)
{
	if (k < 0 || k >= r->n_stages)
		return 0;
	if (!strcmp(r->board[k], id))
		return 1;
	for (int i = 0; i < r->n_rep; i++)
		if (r->rep_stage[i] == k && !strcmp(r->rep_board[i], id))
			return 1;
	return 0;
}

/* 1 if b's last ack refused a role for memory: more bytes than its budget. */
static int over_budget(const sky_reg_board *b)
{
	return b->ack < 0 && b->ack_budget > 0 && b->ack_bytes > b->ack_budget;
}

/* Learns b's budget from its refusal for memory: the budget its ack
 * names, less what it needed beyond the figure the plan gave it; returns
 * that. *reported: the figure b reports (the learned budget holds while
 * it reports that). */
static int64_t learn_budget(svc *s, const sky_reg_board *b, int64_t *reported)
{
	*reported = b->caps.mem_bytes > 0 ? b->caps.mem_bytes : (1ll << 40);
	int64_t beyond = b->ack_expected > 0 && b->ack_bytes > b->ack_expected
				 ? b->ack_bytes - b->ack_expected
				 : 0;
	svc_plan_learn_budget(s, b->id, *reported, b->ack_budget - beyond);
	return b->ack_budget - beyond;
}

/* A refusal for memory of a plan of a job not followed (a training job
 * without checkpoints, a serving job with --no-replan): nothing re-plans
 * it, but the board's budget is learned, so the job submitted again is
 * planned within it (before, the same plan went out and was refused
 * again). Who may send this: any board, of itself only: the budget
 * learned is the sender's own (the topic's identity level), as the memory
 * it reports in its caps is; the plan must be one the planner published
 * (the registry's newest epoch of the job), so a board cannot teach
 * anything with a refusal of a plan that never was. */
static void learn_unfollowed(svc *s, const sky_reg_board *b)
{
	if (!over_budget(b))
		return;
	const sky_registry *reg = &s->reg;
	int j = 0;
	while (j < reg->n_jobs && strcmp(reg->jobs[j].job, b->ack_job) != 0)
		j++;
	if (j == reg->n_jobs || reg->jobs[j].epoch != b->ack_epoch) {
		SKY_WARN("refusal from %s of job %s epoch %lld ignored: no such plan was published",
			 b->id, b->ack_job, (long long)b->ack_epoch);
		return;
	}
	int64_t reported, learned = learn_budget(s, b, &reported);
	SKY_WARN("job %s is not re-planned (it is not followed: no checkpoints); board %s's budget "
		 "is now %lld bytes (it reports %lld): a job submitted again is planned within it",
		 b->ack_job, b->id, (long long)learned, (long long)reported);
}

/* A board's refusal of its role in a followed job's current plan because
 * the role does not fit its memory (arena_bytes over budget_bytes): that
 * budget is learned (less what the board needs beyond the figure the plan
 * gave it), and the job is re-planned at once without the role on that
 * board (svc_replan: with no plan left it is paused, its reason naming
 * the boards and bytes). Who may send this: the board the plan gives that
 * role, known from the topic's identity level (the broker's ACL pins it
 * to the certificate's CN, and the registry refused an ack whose payload
 * names another board); a refusal from a board that holds no such role
 * in that epoch is said and ignored, so no board can take a third out of
 * a plan. A refusal for anything else is left as before (said). */
static void on_refusal(svc *s, const sky_reg_board *b)
{
	run_job *r = svc_follow_find(s, b->ack_job);
	if (!r) {
		learn_unfollowed(s, b);
		return;
	}
	if (r->job.req.infer || b->ack_epoch != r->epoch)
		return;
	if (!holds_role(r, b->id, b->ack_stage)) {
		SKY_WARN("job %s epoch %lld: refusal from %s for stage %d ignored: the plan gives "
			 "%s no such role",
			 b->ack_job, (long long)b->ack_epoch, b->id, b->ack_stage, b->id);
		return;
	}
	if (!over_budget(b))
		return;
	int64_t reported;
	learn_budget(s, b, &reported);
	char reason[200];
	snprintf(reason, sizeof reason,
		 "board %s refused stage %d: it needs %lld bytes, its budget is %lld (it reports "
		 "%lld)",
		 b->id, b->ack_stage, (long long)b->ack_bytes, (long long)b->ack_budget,
		 (long long)reported);
	svc_replan(s, r, reason, sky_clock_s());
}

void svc_fleet_on_board(svc *s, const char *id, const char *leaf, const char *p, size_t len)
{
	sky_diag d;
	sky_diag_clear(&d);
	sky_reg_board *prev = sky_registry_find(&s->reg, id);
	char was_boot[SKY_BOOT_ID_MAX + 1] = "";
	int64_t was_session = prev ? prev->session : 0;
	if (prev)
		snprintf(was_boot, sizeof was_boot, "%s", prev->boot);
	note_online(s);
	int rc = sky_registry_on_board_msg(&s->reg, id, leaf, p, len, sky_clock_s(),
					   sky_clock_unix(), &d);
	sky_reg_board *now_b = sky_registry_find(&s->reg, id);
	if (now_b && was_boot[0] && strcmp(was_boot, now_b->boot) != 0)
		SKY_INFO("board %s: new boot %s at session %lld replaces boot %s (session "
			 "%lld), whose late messages are now stale",
			 id, now_b->boot, (long long)now_b->session, was_boot, (long long)was_session);
	if (now_b)
		diff(s, (int)(now_b - s->reg.b), leaf, 0);
	if (rc < 0)
		SKY_WARN("rejected %s from %s: %s", leaf, id, d.msg);
	else if (rc == 1 && now_b && now_b->state == SKY_REG_REVOKED)
		svc_warn(s, SVC_LOG_REVOKED, "%s", d.msg);
	else if (rc == 1)
		SKY_INFO("%s", d.msg);
	else if (strcmp(leaf, SKY_TOPIC_PLAN_ACK) == 0) {
		say_ack(s, id);
		if (now_b && now_b->ack < 0)
			on_refusal(s, now_b);
	}
}

/* A message over its topic class's limit, dropped on arrival (sky_mqtt.h):
 * counted where the registry counts oversize messages, and logged through
 * a throttle. */
void svc_fleet_on_oversize(void *ctx, const char *topic, size_t tl, size_t len)
{
	svc *s = ctx;
	char seg[SKY_TOPIC_SEGMENT_MAX + 1], leaf[16];
	sky_diag d;
	sky_diag_clear(&d);
	if (strlen(topic) != tl)
		return;
	if (sky_topic_parse(topic, tl, "board", seg, sizeof seg, leaf, sizeof leaf) == 0 &&
	    sky_registry_on_board_msg(&s->reg, seg, leaf, NULL, len, sky_clock_s(),
				      sky_clock_unix(), &d) < 0) {
		svc_warn(s, SVC_LOG_OVERSIZE, "rejected %s from %s: %s", leaf, seg, d.msg);
	} else {
		s->reg.c.oversize++;
		if (sky_topic_parse_enroll(topic, tl, seg, sizeof seg, leaf, sizeof leaf) == 0)
			s->reg.c.enroll_refused++;
		svc_warn(s, SVC_LOG_OVERSIZE, "%s: %zu bytes over the %zu limit of its kind, dropped unread",
			 topic, len, sky_topic_max_bytes(topic));
	}
	s->reg.changed = 1;
}

void svc_fleet_on_retained(void *ctx, const char *topic, size_t tl, size_t len)
{
	svc *s = ctx;
	(void)topic;
	(void)tl;
	(void)len;
	s->reg.c.retained_dropped++;
	s->reg.changed = 1;
}

/* Reads the CA's revoked list and drops every board on it that the
 * registry does not hold as revoked yet: marked revoked (shown in sky
 * fleet status, its messages ignored from now on) and its job re-planned
 * without it: a job followed by svc_follow_tick (the board is not online
 * any more), any other queued again. */
static void check_revoked(svc *s)
{
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_crl_list_load(s->o->pki_dir, &s->fleet.revoked, &d) != 0) {
		svc_warn(s, SVC_LOG_REVOKED, "cannot read the revoked list: %s", d.msg);
		return;
	}
	for (int i = 0; i < s->fleet.revoked.n; i++) {
		const sky_crl_entry *e = &s->fleet.revoked.e[i];
		sky_reg_board *b = sky_registry_find(&s->reg, e->id);
		if (b && b->state == SKY_REG_REVOKED)
			continue;
		char job[SKY_TOPIC_SEGMENT_MAX + 1] = "";
		int stage = b ? b->stage : -1;
		if (b)
			snprintf(job, sizeof job, "%s", b->job);
		const char *why = e->reason >= 0 ? sky_crl_reason_name(e->reason) : "revoked";
		if (sky_registry_revoke(&s->reg, e->id, why) != 1)
			continue;
		SKY_WARN("board %s revoked (%s; on the CA's CRL): dropped from the fleet%s%s", e->id,
			 why, job[0] ? ", it held a stage of job " : "", job);
		if (job[0] && !svc_follow_find(s, job)) {
			char what[96];
			snprintf(what, sizeof what, "board %s revoked, it held stage %d", e->id, stage);
			svc_submit_requeue(s, job, what);
		}
	}
}

void svc_fleet_tick(svc *s, double now, double gap, int behind)
{
	note_online(s);
	/* a board is offline when nothing came from it for 1.5 keepalives;
	 * time this loop did not run is not its silence, and while a
	 * backlog waits unread (the last poll ran out of its budget) its
	 * last message may be among them */
	if (gap > LOOP_STALL_S) {
		sky_registry_excuse(&s->reg, gap);
		SKY_WARN("this planner's loop did not run for %.1f s (a loaded machine?); the "
			 "boards' deadlines move on by as much",
			 gap);
	}
	if (!behind && sky_registry_tick(&s->reg, now) > 0)
		diff(s, -1, NULL, now);
	if (now >= s->fleet.revoked_check_at) {
		s->fleet.revoked_check_at = now + REVOKED_CHECK_S;
		check_revoked(s);
	}
}

void svc_fleet_ask_probe(svc *s, const char *id, const svc_job *job)
{
	char topic[SKY_TOPIC_BUF], buf[SKY_CMD_MAX_BYTES];
	const sky_model_cfg *m = &job->model;
	int n = snprintf(buf, sizeof buf, "{\"cmd\":\"probe\",\"model\":\"%s\",\"seq\":%d,\"batch\":%d",
			 m->name, m->seq, m->batch);
	/* a config.json's model (not a preset): its shapes, which the board
	 * probes at and reports back (sky_caps.h shape) */
	if (job->req.hf.on && n > 0 && (size_t)n < sizeof buf)
		n += snprintf(buf + n, sizeof buf - (size_t)n,
			      ",\"hidden\":%d,\"heads\":%d,\"ffn\":%d,\"act\":%d,"
			      "\"hidden_drop\":%.9g,\"attn_drop\":%.9g",
			      m->hidden, m->heads, m->ffn, m->act, (double)m->hidden_drop,
			      (double)m->attn_drop);
	if (n > 0 && (size_t)n < sizeof buf - 1)
		n += snprintf(buf + n, sizeof buf - (size_t)n, "}");
	if (n <= 0 || (size_t)n >= sizeof buf)
		return;
	if (sky_topic_board(topic, sizeof topic, id, SKY_TOPIC_CMD) == 0)
		svc_publish(s, topic, buf, (size_t)n, 1, 0, NULL);
	SKY_INFO("asked board %s to probe %s (seq %d, batch %d) for job %s", id, job->model.name,
		 job->model.seq, job->model.batch, job->req.job);
}
