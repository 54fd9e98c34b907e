#include "sky_registry.h"

#include "sky_clock.h"
#include "sky_json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void sky_registry_init(sky_registry *r) { memset(r, 0, sizeof *r); }

const char *sky_reg_state_name(sky_reg_state s)
{
	return s == SKY_REG_ONLINE    ? "online"
	       : s == SKY_REG_OFFLINE ? "offline"
	       : s == SKY_REG_REVOKED ? "revoked"
				      : "enrolled";
}

sky_reg_board *sky_registry_find(sky_registry *r, const char *id)
{
	for (int i = 0; i < r->n; i++)
		if (strcmp(r->b[i].id, id) == 0)
			return &r->b[i];
	return NULL;
}

sky_reg_board *sky_registry_add(sky_registry *r, const char *id)
{
	sky_reg_board *b = sky_registry_find(r, id);
	if (b)
		return b;
	if (!sky_topic_segment_ok(id) || r->n >= SKY_REG_MAX_BOARDS)
		return NULL;
	b = &r->b[r->n++];
	memset(b, 0, sizeof *b);
	snprintf(b->id, sizeof b->id, "%s", id);
	b->state = SKY_REG_ENROLLED;
	b->stage = -1;
	r->changed = 1;
	return b;
}

static void heard(sky_reg_board *b, double now, int64_t unix_s)
{
	b->last_heard = now;
	b->last_seen = unix_s;
}

/* Where (boot, session) stands against what b holds (the rule in
 * sky_registry.h). */
enum { PLACE_CURRENT, PLACE_STALE, PLACE_NEW };

static int is_retired(const sky_reg_board *b, const char *boot)
{
	for (int i = 0; i < SKY_REG_RETIRED_BOOTS; i++)
		if (b->retired[i][0] && strcmp(b->retired[i], boot) == 0)
			return 1;
	return 0;
}

static int place(const sky_reg_board *b, const char *boot, int64_t session)
{
	if (!b->boot[0] && b->session == 0 && !b->retired[0][0])
		return PLACE_CURRENT; /* never heard: the first message defines it */
	if (strcmp(boot, b->boot) == 0)
		return session < b->session ? PLACE_STALE : PLACE_CURRENT;
	if (boot[0] && is_retired(b, boot))
		return PLACE_STALE;
	if (!boot[0])
		return PLACE_STALE; /* a board without boot ids cannot follow one that has them */
	return PLACE_NEW;
}

/* Makes boot the current one (retiring the old) at this session. */
static void take_boot(sky_registry *r, sky_reg_board *b, const char *boot, int64_t session)
{
	if (strcmp(b->boot, boot) != 0) {
		if (b->boot[0]) {
			memmove(b->retired[1], b->retired[0],
				sizeof b->retired[0] * (SKY_REG_RETIRED_BOOTS - 1));
			snprintf(b->retired[0], sizeof b->retired[0], "%s", b->boot);
			r->c.boots++;
		}
		snprintf(b->boot, sizeof b->boot, "%s", boot);
		r->changed = 1;
	}
	b->session = session;
}

static void stale(sky_registry *r, const sky_reg_board *b, const char *what, const char *boot,
		  int64_t session, sky_diag *d)
{
	r->c.stale_ignored++;
	sky_diag_set(d, 1, "board %s: %s from boot %s session %lld ignored (%s), current boot %s "
			   "session %lld",
		     b->id, what, boot[0] ? boot : "-", (long long)session,
		     strcmp(boot, b->boot) == 0 ? "older session" : "retired boot",
		     b->boot[0] ? b->boot : "-", (long long)b->session);
}

static void apply_caps(sky_registry *r, sky_reg_board *b, const sky_caps *c, double now,
		       int64_t unix_s)
{
	b->session = c->session;
	b->caps = *c;
	b->has_caps = 1;
	b->keepalive_s = c->keepalive_s;
	if (b->state == SKY_REG_ONLINE)
		heard(b, now, unix_s);
	r->c.caps_ok++;
	r->changed = 1;
}

static void apply_ack(sky_registry *r, sky_reg_board *b, const sky_planack *a, double now,
		      int64_t unix_s)
{
	b->session = a->session;
	snprintf(b->ack_job, sizeof b->ack_job, "%s", a->job);
	b->ack_epoch = a->epoch;
	b->ack = a->ok ? 1 : -1;
	b->ack_bytes = a->arena_bytes;
	b->ack_budget = a->budget_bytes;
	b->ack_stage = a->stage;
	b->ack_expected = a->expected_bytes;
	snprintf(b->ack_reason, sizeof b->ack_reason, "%s", a->reason);
	if (a->epoch > b->epoch) {
		/* the board answers a plan newer than the one we assigned (we
		 * restarted, or missed it): that is what it holds now */
		snprintf(b->job, sizeof b->job, "%s", a->job);
		b->epoch = a->epoch;
		b->stage = a->stage;
		b->first = b->last = -1;
		b->expected_bytes = a->expected_bytes;
	}
	if (a->ok)
		r->c.acks_ok++;
	else
		r->c.acks_refused++;
	if (b->state == SKY_REG_ONLINE)
		heard(b, now, unix_s);
	r->changed = 1;
}

/* A report or ack from a boot not proven yet: kept, applied by
 * release_held() when that boot says it is online. */
static int hold(const sky_reg_board *b, const char *what, const char *boot, sky_diag *d)
{
	return sky_diag_set(d, 1, "board %s: %s from new boot %s held until that boot is seen "
				  "online (current boot %s)",
			    b->id, what, boot, b->boot[0] ? b->boot : "-");
}

static void release_held(sky_registry *r, sky_reg_board *b, double now, int64_t unix_s)
{
	if (b->has_held_caps && strcmp(b->held_caps.boot, b->boot) == 0 &&
	    b->held_caps.session >= b->session)
		apply_caps(r, b, &b->held_caps, now, unix_s);
	if (b->has_held_ack && strcmp(b->held_ack.boot, b->boot) == 0 &&
	    b->held_ack.session >= b->session && b->held_ack.epoch >= b->ack_epoch)
		apply_ack(r, b, &b->held_ack, now, unix_s);
	b->has_held_caps = b->has_held_ack = 0;
}

static int on_status(sky_registry *r, sky_reg_board *b, const char *p, size_t len, int heartbeat,
		     double now, int64_t unix_s, sky_diag *d)
{
	sky_status s;
	int rc = sky_status_decode(p, len, &s, d);
	if (rc) {
		r->c.status_rejected++;
		return rc;
	}
	int pl = place(b, s.boot, s.session);
	if (pl == PLACE_STALE) {
		/* a will (or anything) from an older connection or boot: the board
		 * has reconnected since, so this says nothing about it now */
		stale(r, b, s.online ? "online message" : "offline (late will)", s.boot, s.session,
		      d);
		return 1;
	}
	if (pl == PLACE_NEW && !s.online) {
		r->c.stale_ignored++;
		sky_diag_set(d, 1,
			     "board %s: offline (will) from boot %s session %lld ignored: that boot "
			     "was never seen online (current boot %s session %lld; the heartbeat "
			     "deadline still applies)",
			     b->id, s.boot, (long long)s.session, b->boot[0] ? b->boot : "-",
			     (long long)b->session);
		return 1;
	}
	if (heartbeat && !s.online) {
		r->c.status_rejected++;
		return sky_diag_set(d, SKY_EFORMAT, "board %s: a heartbeat must say online", b->id);
	}
	take_boot(r, b, s.boot, s.session);
	if (s.online) {
		if (b->state != SKY_REG_ONLINE)
			r->changed = 1;
		b->state = SKY_REG_ONLINE;
		b->why[0] = '\0';
		b->keepalive_s = s.keepalive_s;
	} else {
		if (b->state != SKY_REG_OFFLINE)
			r->changed = 1;
		b->state = SKY_REG_OFFLINE;
		snprintf(b->why, sizeof b->why, "offline message");
	}
	heard(b, now, unix_s);
	release_held(r, b, now, unix_s);
	return 0;
}

static int on_caps(sky_registry *r, sky_reg_board *b, const char *p, size_t len, double now,
		   int64_t unix_s, sky_diag *d)
{
	sky_caps c;
	int rc = sky_caps_decode(p, len, &c, d);
	if (rc == 0 && strcmp(c.id, b->id) != 0)
		rc = sky_diag_set(d, SKY_EAUTH, "caps on board %s's topic claim to be from %s", b->id,
				  c.id);
	if (rc) {
		r->c.caps_rejected++;
		return rc;
	}
	int pl = place(b, c.boot, c.session);
	if (pl == PLACE_STALE) {
		stale(r, b, "caps", c.boot, c.session, d);
		return 1;
	}
	if (pl == PLACE_NEW) {
		b->held_caps = c;
		b->has_held_caps = 1;
		return hold(b, "caps", c.boot, d);
	}
	take_boot(r, b, c.boot, c.session);
	apply_caps(r, b, &c, now, unix_s);
	return 0;
}

static int on_ack(sky_registry *r, sky_reg_board *b, const char *p, size_t len, double now,
		  int64_t unix_s, sky_diag *d)
{
	sky_planack a;
	int rc = sky_planack_decode(p, len, &a, d);
	if (rc == 0 && strcmp(a.board, b->id) != 0)
		rc = sky_diag_set(d, SKY_EAUTH, "plan-ack on board %s's topic names %s", b->id,
				  a.board);
	if (rc) {
		r->c.acks_rejected++;
		return rc;
	}
	int pl = place(b, a.boot, a.session);
	if (pl == PLACE_NEW) {
		b->held_ack = a;
		b->has_held_ack = 1;
		return hold(b, "plan-ack", a.boot, d);
	}
	if (pl == PLACE_STALE || a.epoch < b->ack_epoch) {
		r->c.stale_ignored++;
		sky_diag_set(d, 1, "board %s: ack for epoch %lld (boot %s session %lld) is stale",
			     b->id, (long long)a.epoch, a.boot[0] ? a.boot : "-",
			     (long long)a.session);
		return 1;
	}
	take_boot(r, b, a.boot, a.session);
	apply_ack(r, b, &a, now, unix_s);
	return 0;
}

int sky_registry_on_board_msg(sky_registry *r, const char *id, const char *leaf,
			      const char *payload, size_t len, double now, int64_t unix_s,
			      sky_diag *d)
{
	size_t limit = strcmp(leaf, SKY_TOPIC_CAPS) == 0       ? SKY_CAPS_MAX_BYTES
		       : strcmp(leaf, SKY_TOPIC_PLAN_ACK) == 0 ? SKY_PLAN_ACK_MAX_BYTES
							       : SKY_STATUS_MAX_BYTES;
	int is_caps = strcmp(leaf, SKY_TOPIC_CAPS) == 0;
	int is_status = strcmp(leaf, SKY_TOPIC_STATUS) == 0;
	int is_hb = strcmp(leaf, SKY_TOPIC_HEARTBEAT) == 0;
	int is_ack = strcmp(leaf, SKY_TOPIC_PLAN_ACK) == 0;
	if (!is_caps && !is_status && !is_hb && !is_ack)
		return 0;
	if (len == 0 && (is_caps || is_status))
		return 0; /* an empty retained message clears the topic: nothing to learn */
	if (len > limit) {
		r->c.oversize++;
		if (is_caps)
			r->c.caps_rejected++;
		return sky_diag_set(d, SKY_ERANGE, "board %s: %s of %zu bytes over the %zu limit "
						   "(refused unparsed)",
				    id, leaf, len, limit);
	}
	sky_reg_board *b = sky_registry_add(r, id);
	if (!b)
		return sky_diag_set(d, SKY_ENOMEM, "registry full (%d boards) or bad id",
				    SKY_REG_MAX_BOARDS);
	if (b->state == SKY_REG_REVOKED) {
		/* it may still hold a connection the broker opened before the
		 * CRL: nothing it says counts */
		r->c.revoked_ignored++;
		sky_diag_set(d, 0, "board %s is revoked: its %s ignored", id, leaf);
		return 1;
	}
	if (is_caps)
		return on_caps(r, b, payload, len, now, unix_s, d);
	if (is_ack)
		return on_ack(r, b, payload, len, now, unix_s, d);
	return on_status(r, b, payload, len, is_hb, now, unix_s, d);
}

int sky_registry_revoke(sky_registry *r, const char *id, const char *why)
{
	sky_reg_board *b = sky_registry_add(r, id);
	if (!b)
		return SKY_EINVAL;
	if (b->state == SKY_REG_REVOKED)
		return 0;
	b->state = SKY_REG_REVOKED;
	snprintf(b->why, sizeof b->why, "%s", why && why[0] ? why : "revoked");
	b->has_caps = b->has_held_caps = b->has_held_ack = 0;
	b->job[0] = '\0';
	b->stage = -1;
	b->epoch = 0;
	r->c.revoked++;
	r->changed = 1;
	return 1;
}

int sky_registry_tick(sky_registry *r, double now)
{
	int marked = 0;
	for (int i = 0; i < r->n; i++) {
		sky_reg_board *b = &r->b[i];
		int ka = b->keepalive_s > 0 ? b->keepalive_s : 60;
		if (b->state == SKY_REG_ONLINE && now - b->last_heard > 1.5 * ka) {
			b->state = SKY_REG_OFFLINE;
			snprintf(b->why, sizeof b->why, "timeout");
			r->c.timeouts++;
			r->changed = 1;
			marked++;
		}
	}
	return marked;
}

void sky_registry_excuse(sky_registry *r, double seconds)
{
	for (int i = 0; i < r->n && seconds > 0; i++)
		if (r->b[i].state == SKY_REG_ONLINE)
			r->b[i].last_heard += seconds;
}

int sky_reg_ack(const sky_reg_board *b)
{
	if (!b->job[0] || strcmp(b->ack_job, b->job) != 0 || b->ack_epoch != b->epoch)
		return 0;
	return b->ack;
}

void sky_registry_assign(sky_registry *r, const sky_planmsg *p)
{
	int j = 0;
	while (j < r->n_jobs && strcmp(r->jobs[j].job, p->job) != 0)
		j++;
	if (j < r->n_jobs && r->jobs[j].epoch > p->epoch)
		return; /* superseded */
	if (j == r->n_jobs && r->n_jobs < SKY_REG_MAX_JOBS)
		snprintf(r->jobs[r->n_jobs++].job, sizeof r->jobs[0].job, "%s", p->job);
	if (j < r->n_jobs)
		r->jobs[j].epoch = p->epoch;
	for (int i = 0; i < r->n; i++) {
		sky_reg_board *b = &r->b[i];
		if (strcmp(b->job, p->job) == 0 && b->epoch < p->epoch &&
		    sky_planmsg_find_replica(p, b->id, NULL) < 0) {
			b->job[0] = '\0';
			b->stage = -1;
			b->replica = 0;
		}
	}
	/* each stage's board and its replicas (the same stage, range and
	 * expectation, their own arena figure) */
	for (int i = 0; i < p->n_stages + p->n_reps; i++) {
		int s = i, rep = -1;
		if (i >= p->n_stages) {
			rep = i - p->n_stages;
			s = sky_planmsg_find_replica(p, p->reps[rep].board, NULL);
			if (s < 0)
				continue;
		}
		sky_reg_board *b = sky_registry_add(r, rep < 0 ? p->stages[s].board : p->reps[rep].board);
		if (!b || b->epoch > p->epoch)
			continue; /* an older plan (read back after a restart) */
		snprintf(b->job, sizeof b->job, "%s", p->job);
		b->epoch = p->epoch;
		b->stage = s;
		b->first = p->stages[s].first;
		b->last = p->stages[s].last;
		b->expected_bytes = rep < 0 ? p->stages[s].arena_bytes : p->reps[rep].arena_bytes;
		b->replica = 0;
		b->plan_batch = p->shape.batch;
		if (rep >= 0)
			sky_planmsg_find_replica(p, b->id, &b->replica);
	}
	r->changed = 1;
}

int sky_registry_set_link(sky_registry *r, const char *a, const char *b, double bw_Bps,
			  double lat_s, int64_t measured_unix)
{
	char na[SKY_SITE_MAX + 1], nb[SKY_SITE_MAX + 1];
	if (!a || !b || strlen(a) > SKY_SITE_MAX || strlen(b) > SKY_SITE_MAX)
		return SKY_EINVAL;
	snprintf(na, sizeof na, "%s", a);
	snprintf(nb, sizeof nb, "%s", b);
	sky_site_norm(na);
	sky_site_norm(nb);
	if (!sky_site_ok(na) || !sky_site_ok(nb) || sky_site_eq(na, nb) || !isfinite(bw_Bps) ||
	    !(bw_Bps > 0) || !isfinite(lat_s) || lat_s < 0)
		return SKY_EINVAL;
	int i = 0;
	while (i < r->n_links && !((sky_site_eq(r->links[i].a, na) && sky_site_eq(r->links[i].b, nb)) ||
				   (sky_site_eq(r->links[i].a, nb) && sky_site_eq(r->links[i].b, na))))
		i++;
	if (i == r->n_links) {
		if (r->n_links == SKY_REG_MAX_LINKS)
			return SKY_ENOMEM;
		r->n_links++;
	}
	sky_reg_link *l = &r->links[i];
	memset(l, 0, sizeof *l);
	snprintf(l->a, sizeof l->a, "%s", na);
	snprintf(l->b, sizeof l->b, "%s", nb);
	l->bw_Bps = bw_Bps;
	l->lat_s = lat_s;
	l->measured_unix = measured_unix;
	r->changed = 1;
	return 0;
}

/* The registry's counters as "counters" in doc. */
static void counters_json(cJSON *doc, const sky_registry *r)
{
	cJSON *c = cJSON_AddObjectToObject(doc, "counters");
	if (c) {
		cJSON_AddNumberToObject(c, "caps_ok", r->c.caps_ok);
		cJSON_AddNumberToObject(c, "caps_rejected", r->c.caps_rejected);
		cJSON_AddNumberToObject(c, "status_rejected", r->c.status_rejected);
		cJSON_AddNumberToObject(c, "stale_ignored", r->c.stale_ignored);
		cJSON_AddNumberToObject(c, "boots", r->c.boots);
		cJSON_AddNumberToObject(c, "oversize", r->c.oversize);
		cJSON_AddNumberToObject(c, "retained_dropped", r->c.retained_dropped);
		cJSON_AddNumberToObject(c, "acks_ok", r->c.acks_ok);
		cJSON_AddNumberToObject(c, "acks_refused", r->c.acks_refused);
		cJSON_AddNumberToObject(c, "acks_rejected", r->c.acks_rejected);
		cJSON_AddNumberToObject(c, "timeouts", r->c.timeouts);
		cJSON_AddNumberToObject(c, "enrolled", r->c.enrolled);
		cJSON_AddNumberToObject(c, "enroll_refused", r->c.enroll_refused);
		cJSON_AddNumberToObject(c, "plans_published", r->c.plans_published);
		cJSON_AddNumberToObject(c, "revoked", r->c.revoked);
		cJSON_AddNumberToObject(c, "revoked_ignored", r->c.revoked_ignored);
	}
}

/* Board b's measured capabilities as "caps" in o (null before its first
 * caps message). */
static void caps_json(cJSON *o, const sky_reg_board *b)
{
	if (b->has_caps) {
		const sky_caps *k = &b->caps;
		cJSON *cc = cJSON_AddObjectToObject(o, "caps");
		if (cc) {
			cJSON_AddStringToObject(cc, "board", k->board);
			cJSON_AddStringToObject(cc, "model", k->shape.name);
			cJSON_AddNumberToObject(cc, "seq", k->shape.seq);
			cJSON_AddNumberToObject(cc, "batch", k->shape.batch);
			cJSON_AddNumberToObject(cc, "threads", k->threads);
			cJSON_AddNumberToObject(cc, "fwd_s", k->fp32.fwd_attn_s + k->fp32.fwd_ffn_s);
			cJSON_AddNumberToObject(cc, "bwd_s", k->fp32.bwd_attn_s + k->fp32.bwd_ffn_s);
			if (k->has_int8)
				cJSON_AddNumberToObject(cc, "int8_fwd_s", k->int8_fwd_s);
			else
				cJSON_AddNullToObject(cc, "int8_fwd_s");
			cJSON_AddNumberToObject(cc, "mem_bytes", (double)k->mem_bytes);
			cJSON_AddNumberToObject(cc, "bw_Bps", k->link_bw);
			cJSON_AddNumberToObject(cc, "lat_s", k->link_lat_s);
			cJSON_AddStringToObject(cc, "site", sky_site_name(k->site));
			cJSON_AddNumberToObject(cc, "probe_s", k->probe_s);
			/* the sets it holds: their summaries, as reported */
			cJSON *ds = k->n_datasets ? cJSON_AddArrayToObject(cc, "datasets") : NULL;
			for (int i = 0; ds && i < k->n_datasets; i++) {
				const sky_caps_dataset *e = &k->datasets[i];
				char tok[9];
				cJSON *x = cJSON_CreateObject();
				if (!x)
					break;
				cJSON_AddItemToArray(ds, x);
				snprintf(tok, sizeof tok, "%08x", (unsigned)e->tokenizer);
				cJSON_AddStringToObject(x, "name", e->name);
				cJSON_AddNumberToObject(x, "rows", (double)e->rows);
				cJSON_AddNumberToObject(x, "labels", e->labels);
				cJSON_AddNumberToObject(x, "seq", e->seq);
				cJSON_AddStringToObject(x, "sha256", e->sha256);
				cJSON_AddStringToObject(x, "tokenizer", tok);
			}
		}
	} else {
		cJSON_AddNullToObject(o, "caps");
	}
}

/* Board b's stage of a plan and its ack as "assignment" in o (null when
 * it holds none). */
static void assignment_json(cJSON *o, const sky_reg_board *b)
{
	if (b->job[0]) {
		cJSON *a = cJSON_AddObjectToObject(o, "assignment");
		if (a) {
			cJSON_AddStringToObject(a, "job", b->job);
			cJSON_AddNumberToObject(a, "epoch", (double)b->epoch);
			cJSON_AddNumberToObject(a, "stage", b->stage);
			cJSON_AddNumberToObject(a, "first", b->first);
			cJSON_AddNumberToObject(a, "last", b->last);
			int k = sky_reg_ack(b);
			cJSON_AddStringToObject(a, "ack", k > 0 ? "accepted"
							  : k < 0 ? "refused"
								  : "pending");
			cJSON_AddNumberToObject(a, "arena_bytes", k ? (double)b->ack_bytes : 0);
			cJSON_AddNumberToObject(a, "expected_bytes", (double)b->expected_bytes);
			cJSON_AddStringToObject(a, "reason", k ? b->ack_reason : "");
		}
	} else {
		cJSON_AddNullToObject(o, "assignment");
	}
}

/* Board b as one more object of arr. Returns 0, or SKY_ENOMEM (the
 * boards after it are left out then). */
static int board_json(cJSON *arr, const sky_reg_board *b)
{
	char ts[32];
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return SKY_ENOMEM;
	cJSON_AddItemToArray(arr, o);
	cJSON_AddStringToObject(o, "id", b->id);
	cJSON_AddStringToObject(o, "state", sky_reg_state_name(b->state));
	cJSON_AddStringToObject(o, "why", b->why);
	if (b->last_seen) {
		sky_clock_format_utc(b->last_seen, ts, sizeof ts);
		cJSON_AddStringToObject(o, "last_seen", ts);
		cJSON_AddNumberToObject(o, "last_seen_unix", (double)b->last_seen);
	} else {
		cJSON_AddNullToObject(o, "last_seen");
	}
	cJSON_AddNumberToObject(o, "session", (double)b->session);
	cJSON_AddStringToObject(o, "boot", b->boot);
	cJSON *ret = cJSON_AddArrayToObject(o, "retired_boots");
	for (int k = 0; ret && k < SKY_REG_RETIRED_BOOTS && b->retired[k][0]; k++)
		cJSON_AddItemToArray(ret, cJSON_CreateString(b->retired[k]));
	cJSON_AddNumberToObject(o, "keepalive_s", b->keepalive_s);
	cJSON_AddStringToObject(o, "version", b->has_caps ? b->caps.version : "");
	caps_json(o, b);
	assignment_json(o, b);
	return 0;
}

int sky_registry_to_json(const sky_registry *r, int64_t unix_s, char *buf, size_t cap)
{
	char ts[32];
	cJSON *doc = sky_json_new_object();
	if (!doc)
		return SKY_ENOMEM;
	cJSON_AddNumberToObject(doc, "v", 1);
	sky_clock_format_utc(unix_s, ts, sizeof ts);
	cJSON_AddStringToObject(doc, "updated_at", ts);
	cJSON_AddNumberToObject(doc, "updated_unix", (double)unix_s);
	counters_json(doc, r);
	cJSON *jobs = cJSON_AddArrayToObject(doc, "jobs");
	for (int j = 0; jobs && j < r->n_jobs; j++) {
		cJSON *o = cJSON_CreateObject();
		if (!o)
			break;
		cJSON_AddItemToArray(jobs, o);
		cJSON_AddStringToObject(o, "job", r->jobs[j].job);
		cJSON_AddNumberToObject(o, "epoch", (double)r->jobs[j].epoch);
	}
	cJSON *links = r->n_links ? cJSON_AddArrayToObject(doc, "links") : NULL;
	for (int i = 0; links && i < r->n_links; i++) {
		cJSON *o = cJSON_CreateObject();
		if (!o)
			break;
		cJSON_AddItemToArray(links, o);
		cJSON_AddStringToObject(o, "a", sky_site_name(r->links[i].a));
		cJSON_AddStringToObject(o, "b", sky_site_name(r->links[i].b));
		cJSON_AddNumberToObject(o, "bw_Bps", r->links[i].bw_Bps);
		cJSON_AddNumberToObject(o, "lat_s", r->links[i].lat_s);
		cJSON_AddNumberToObject(o, "measured_unix", (double)r->links[i].measured_unix);
	}
	cJSON *arr = cJSON_AddArrayToObject(doc, "boards");
	for (int i = 0; arr && i < r->n && board_json(arr, &r->b[i]) == 0; i++)
		;
	int n = sky_json_print(doc, buf, cap);
	sky_json_free(doc);
	return n;
}

/* The saved assignment of one board (see sky_registry_to_json); a damaged
 * one is left out rather than half restored. */
static void restore_assignment(sky_reg_board *b, const cJSON *a)
{
	char job[SKY_TOPIC_SEGMENT_MAX + 1];
	int64_t epoch, expected;
	int stage, first, last;
	if (!cJSON_IsObject(a) ||
	    sky_json_str(a, "job", job, sizeof job, "fleet.json", NULL) != 0 ||
	    !sky_topic_segment_ok(job) ||
	    sky_json_i64(a, "epoch", 1, SKY_JSON_INT_MAX, &epoch, "fleet.json", NULL) != 0 ||
	    sky_json_int(a, "stage", 0, SKY_PLANMSG_MAX_STAGES - 1, &stage, "fleet.json", NULL) ||
	    sky_json_int(a, "first", -1, 2 * SKY_PLANMSG_MAX_LAYERS, &first, "fleet.json", NULL) ||
	    sky_json_int(a, "last", -1, 2 * SKY_PLANMSG_MAX_LAYERS, &last, "fleet.json", NULL) ||
	    sky_json_i64(a, "expected_bytes", 0, SKY_CAPS_MAX_MEM_BYTES, &expected, "fleet.json",
			 NULL) != 0)
		return;
	snprintf(b->job, sizeof b->job, "%s", job);
	b->epoch = epoch;
	b->stage = stage;
	b->first = first;
	b->last = last;
	b->expected_bytes = expected;
}

/* Boot, session and retired boots of one board, so that what was stale
 * before a planner restart stays stale after it. */
static void restore_order(sky_reg_board *b, const cJSON *o)
{
	char boot[SKY_BOOT_ID_MAX + 1];
	int64_t session = 0;
	if (cJSON_GetObjectItemCaseSensitive(o, "session") &&
	    sky_json_i64(o, "session", 0, SKY_JSON_INT_MAX, &session, "fleet.json", NULL) == 0)
		b->session = session;
	if (cJSON_GetObjectItemCaseSensitive(o, "boot") &&
	    sky_json_str(o, "boot", boot, sizeof boot, "fleet.json", NULL) == 0 &&
	    sky_boot_id_ok(boot))
		snprintf(b->boot, sizeof b->boot, "%s", boot);
	const cJSON *ret = cJSON_GetObjectItemCaseSensitive(o, "retired_boots"), *e;
	int k = 0;
	cJSON_ArrayForEach(e, ret)
	{
		if (k >= SKY_REG_RETIRED_BOOTS)
			break;
		if (cJSON_IsString(e) && e->valuestring && e->valuestring[0] &&
		    strlen(e->valuestring) <= SKY_BOOT_ID_MAX && sky_boot_id_ok(e->valuestring))
			snprintf(b->retired[k++], sizeof b->retired[0], "%s", e->valuestring);
	}
}

int sky_registry_restore(sky_registry *r, const char *buf, size_t len, sky_diag *d)
{
	cJSON *doc = sky_json_parse(buf, len, d);
	if (!doc)
		return SKY_EFORMAT;
	const cJSON *jobs = cJSON_GetObjectItemCaseSensitive(doc, "jobs");
	const cJSON *o;
	cJSON_ArrayForEach(o, jobs)
	{
		char job[SKY_TOPIC_SEGMENT_MAX + 1];
		int64_t epoch;
		if (r->n_jobs >= SKY_REG_MAX_JOBS)
			break;
		if (sky_json_str(o, "job", job, sizeof job, "fleet.json", NULL) != 0 ||
		    !sky_topic_segment_ok(job) ||
		    sky_json_i64(o, "epoch", 1, SKY_JSON_INT_MAX, &epoch, "fleet.json", NULL) != 0)
			continue;
		snprintf(r->jobs[r->n_jobs].job, sizeof r->jobs[0].job, "%s", job);
		r->jobs[r->n_jobs++].epoch = epoch;
	}
	/* site paths: kept until --links or a measurement replaces them */
	cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(doc, "links"))
	{
		char a[SKY_SITE_MAX + 1], b[SKY_SITE_MAX + 1];
		double bw, lat;
		int64_t when = 0;
		if (sky_json_str(o, "a", a, sizeof a, "fleet.json", NULL) == 0 &&
		    sky_json_str(o, "b", b, sizeof b, "fleet.json", NULL) == 0 &&
		    sky_json_num(o, "bw_Bps", 0, 1e300, &bw, "fleet.json", NULL) == 0 &&
		    sky_json_num(o, "lat_s", 0, 1e300, &lat, "fleet.json", NULL) == 0 &&
		    (!cJSON_GetObjectItemCaseSensitive(o, "measured_unix") ||
		     sky_json_i64(o, "measured_unix", 0, 1ll << 40, &when, "fleet.json", NULL) == 0))
			sky_registry_set_link(r, a, b, bw, lat, when); /* refuses bad ones */
	}
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "boards");
	int n = 0;
	cJSON_ArrayForEach(o, arr)
	{
		char id[SKY_TOPIC_SEGMENT_MAX + 1], state[16];
		int64_t seen = 0;
		if (sky_json_str(o, "id", id, sizeof id, "fleet.json", NULL) != 0 ||
		    sky_json_str(o, "state", state, sizeof state, "fleet.json", NULL) != 0 ||
		    !sky_topic_segment_ok(id))
			continue;
		sky_reg_board *b = sky_registry_add(r, id);
		if (!b)
			break;
		if (cJSON_GetObjectItemCaseSensitive(o, "last_seen_unix"))
			sky_json_i64(o, "last_seen_unix", 0, 1ll << 40, &seen, "fleet.json", NULL);
		b->last_seen = seen;
		/* nothing is known to be alive until it speaks again; a revoked
		 * board stays revoked (the planner also reads the CRL's list) */
		if (strcmp(state, "revoked") == 0) {
			char why[sizeof b->why];
			if (sky_json_str(o, "why", why, sizeof why, "fleet.json", NULL) != 0)
				why[0] = '\0';
			sky_registry_revoke(r, id, why);
			r->c.revoked--; /* counted when it happened, not again */
			n++;
			continue;
		} else if (strcmp(state, "enrolled") != 0) {
			b->state = SKY_REG_OFFLINE;
			snprintf(b->why, sizeof b->why, "not heard yet");
		}
		restore_order(b, o);
		restore_assignment(b, cJSON_GetObjectItemCaseSensitive(o, "assignment"));
		n++;
	}
	sky_json_free(doc);
	return n;
}
