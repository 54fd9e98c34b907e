/* Submissions (svc_internal.h): a job from an operator (or --job) parsed,
 * checked and queued, every submission answered (a resend the same
 * again), and the queue planned once each job's boards are ready. */
#include "svc_internal.h"

#include "sky_clock.h"
#include "sky_file.h"
#include "sky_owner.h"

#include <stdio.h>
#include <string.h>

/* how long a job re-planned without a revoked board waits for the boards
 * it wants (every online board with matching capabilities) */
#define REPLAN_WAIT_S 10.0

void svc_job_from_req(svc_job *j, const sky_job_req *r)
{
	j->req = *r;
	sky_job_req_model(r, &j->model); /* a preset's, or the hf block's config */
}

/* An infer job's model: uploaded, int8, of the job's shapes; and its batch
 * within the model's. Returns 0 or the reason in d. */
static int check_infer(svc *s, svc_job *j, sky_diag *d)
{
	sky_job_req *r = &j->req;
	if (r->serve_batch == 0)
		r->serve_batch = j->model.batch;
	if (r->serve_batch > j->model.batch)
		return sky_diag_set(d, SKY_ERANGE,
				    "job %s: serve batch %d is above the model's batch %d (the "
				    "micro-batch the boards probe and serve)",
				    r->job, r->serve_batch, j->model.batch);
	sky_diag md;
	sky_diag_clear(&md);
	int rc = sky_deploy_check(&s->deploy, r->weights, &j->model, &md);
	if (rc)
		return sky_diag_set(d, rc, "job %s: %s", r->job, md.msg);
	return 0;
}

/* Where a board holding set name (of the job's tokenizer, when it names
 * one) is: 1 if board b holds it. *tok_seen is set to the tokenizer of a
 * holder whose set was prepared with another. */
static int holds_set(const sky_reg_board *b, const char *name, const char *tokenizer,
		     const char *sha256, uint32_t *other_tok, int *other_sha)
{
	if (b->state != SKY_REG_ONLINE || !b->has_caps)
		return 0;
	const sky_caps_dataset *e = sky_caps_dataset_find(&b->caps, name);
	if (!e)
		return 0;
	char tok[9];
	if (sha256 && sha256[0] && strcmp(e->sha256, sha256) != 0) {
		*other_sha = 1;
		return 0;
	}
	snprintf(tok, sizeof tok, "%08x", (unsigned)e->tokenizer);
	if (tokenizer[0] && strcmp(tok, tokenizer) != 0) {
		*other_tok = e->tokenizer;
		return 0;
	}
	return 1;
}

/* The boards holding set name, "b1, b2" into buf (at most cap bytes). */
static void holders(const svc *s, const char *name, char *buf, size_t cap)
{
	size_t k = 0;
	buf[0] = '\0';
	for (int i = 0; i < s->reg.n && k + 1 < cap; i++) {
		const sky_reg_board *b = &s->reg.b[i];
		if (b->state == SKY_REG_ONLINE && b->has_caps && sky_caps_dataset_find(&b->caps, name))
			k += (size_t)snprintf(buf + k, cap - k, "%s%s", k ? ", " : "", b->id);
	}
}

int svc_submit_check_data(svc *s, const sky_job_req *r, sky_diag *d)
{
	char who[160];
	uint32_t other = 0;
	int n = 0, both = 0, other_sha = 0;
	if (!r->dataset[0])
		return 0;
	for (int i = 0; i < s->reg.n; i++) {
		const sky_reg_board *b = &s->reg.b[i];
		if (!holds_set(b, r->dataset, r->tokenizer, r->dataset_sha256, &other, &other_sha))
			continue;
		n++;
		if (r->data_owner[0] && strcmp(b->id, r->data_owner) != 0)
			continue;
		both += !r->eval_dataset[0] ||
			holds_set(b, r->eval_dataset, r->tokenizer, NULL, &other, &other_sha);
	}
	holders(s, r->dataset, who, sizeof who);
	if (n == 0 && other_sha && who[0])
		return sky_diag_set(d, SKY_EINVAL,
				    "job %s refused: data set '%s' (on %s) is not the file the job "
				    "names (sha256 %.16s...)",
				    r->job, r->dataset, who, r->dataset_sha256);
	if (n == 0 && other && who[0])
		return sky_diag_set(d, SKY_EINVAL,
				    "job %s refused: data set '%s' (on %s) was prepared with tokenizer "
				    "%08x, the model's is %s",
				    r->job, r->dataset, who, (unsigned)other, r->tokenizer);
	if (n == 0)
		return sky_diag_set(d, SKY_ENOTFOUND,
				    "job %s refused: no online board holds data set '%s'", r->job,
				    r->dataset);
	const sky_reg_board *ob = r->data_owner[0] ? sky_registry_find(&s->reg, r->data_owner) : NULL;
	if (r->data_owner[0] &&
	    (!ob || !holds_set(ob, r->dataset, r->tokenizer, r->dataset_sha256, &other, &other_sha)))
		return sky_diag_set(d, SKY_EINVAL,
				    "job %s refused: data owner %s does not hold data set '%s' (held "
				    "by %s)",
				    r->job, r->data_owner, r->dataset, who);
	if (both == 0) {
		char ev[160];
		holders(s, r->eval_dataset, ev, sizeof ev);
		if (r->data_owner[0])
			return sky_diag_set(d, SKY_EINVAL,
					    "job %s refused: data owner %s does not hold eval set '%s' "
					    "(held by %s)",
					    r->job, r->data_owner, r->eval_dataset, ev[0] ? ev : "none");
		return sky_diag_set(d, SKY_EINVAL,
				    "job %s refused: no online board holds both data set '%s' (%s) and "
				    "its eval set '%s' (%s)",
				    r->job, r->dataset, who, r->eval_dataset, ev[0] ? ev : "none");
	}
	return 0;
}

/* A job on a data set trains at the set's sequence length: a job that
 * names none gets the set's, one that names another is refused. Returns 0
 * or SKY_EINVAL with d saying why. */
static int fit_set_seq(svc *s, svc_job *j, sky_diag *d)
{
	sky_job_req *r = &j->req;
	for (int pass = 0; pass < 2; pass++)
	for (int i = 0; i < s->reg.n; i++) {
		const sky_reg_board *b = &s->reg.b[i];
		const sky_caps_dataset *e =
			b->has_caps ? sky_caps_dataset_find(&b->caps, r->dataset) : NULL;
		/* first a holder of the file the job names, then any (whose
		 * refusal svc_submit_check_data says) */
		if (!e || (pass == 0 && r->dataset_sha256[0] && strcmp(e->sha256, r->dataset_sha256)))
			continue;
		if (pass == 1 && !r->seq) {
			j->model.seq = e->seq;
			return 0;
		}
		if (!r->seq) {
			r->seq = e->seq;
			j->model.seq = e->seq;
		}
		if (e->seq != j->model.seq || j->model.seq > j->model.max_pos)
			return sky_diag_set(d, SKY_EINVAL,
					    "job %s refused: data set '%s' has rows of %d tokens, the "
					    "job's model %d (max %d)",
					    r->job, r->dataset, e->seq, j->model.seq, j->model.max_pos);
		return 0;
	}
	/* nobody holds it: svc_submit_check_data says so, not the shapes */
	if (!r->seq && j->model.seq > j->model.max_pos)
		j->model.seq = j->model.max_pos;
	return 0;
}

int svc_board_holds_set(svc *s, const char *id, const char *name, const char *tokenizer,
			const char *sha256)
{
	uint32_t other = 0;
	int other_sha = 0;
	const sky_reg_board *b = sky_registry_find(&s->reg, id);
	return b && holds_set(b, name, tokenizer, sha256, &other, &other_sha);
}

/* Queues pj. Returns 0 or SKY_ESTATE (a full queue). */
static int enqueue(svc *s, const svc_pending *pj, const char *from, sky_diag *d)
{
	int rc = 0;
	const sky_job_req *r = &pj->job.req;
	if (s->submit.n_pending < MAX_PENDING) {
		s->submit.pending[s->submit.n_pending++] = *pj;
		if (sky_nojob_kind_of(&s->nojob, r->job) == SKY_NOJOB_UNKNOWN)
			sky_nojob_note(&s->nojob, r->job, SKY_NOJOB_QUEUED);
		SKY_INFO("job %s queued from %s (%s, %d layers, seq %d, batch %d, %s, min_boards %d)",
			 r->job, from, r->model, pj->job.model.layers, pj->job.model.seq,
			 pj->job.model.batch, r->algo, r->min_boards);
	} else {
		rc = sky_diag_set(d, SKY_ESTATE, "job %s refused: %d jobs already waiting", r->job,
				  MAX_PENDING);
		SKY_WARN("%s", d->msg);
	}
	return rc;
}

/* Jobs of op waiting for boards. */
static int pending_of(const svc *s, const char *op)
{
	int n = 0;
	for (int k = 0; k < s->submit.n_pending; k++)
		n += !strcmp(s->submit.pending[k].job.op, op);
	return n;
}

int svc_submit_queue(svc *s, const char *buf, size_t len, const char *from, sky_diag *d)
{
	/* a job file given to skyplan is the fleet's own operator's */
	return svc_submit_queue_op(s, buf, len, SKY_TOPIC_OPERATOR_CN, from, d);
}

int svc_submit_queue_op(svc *s, const char *buf, size_t len, const char *op, const char *from,
			sky_diag *d)
{
	svc_pending pj;
	sky_job_req req;
	memset(&pj, 0, sizeof pj);
	int rc = sky_job_req_parse(buf, len, &req, d);
	if (rc != 0) {
		SKY_WARN("job from %s refused: %s", from, d->msg);
		return rc;
	}
	/* the job id is its owner's, and a refused submit claims nothing */
	char owner[SKY_TOPIC_SEGMENT_MAX + 1];
	if (sky_owner_get(s->state_dir, req.job, owner, sizeof owner) != SKY_ENOTFOUND)
		rc = sky_owner_claim(s->state_dir, req.job, op, d);
	if (rc == 0)
		rc = sky_owner_quota(op, pending_of(s, op), s->o->pending_per_op,
				     "jobs waiting for boards", d);
	if (rc) {
		SKY_WARN("job %s from %s refused: %s", req.job, from, d->msg);
		return rc;
	}
	if (req.fed.on) { /* federated: no plan, a round loop (svc_fed.c) */
		if ((rc = sky_owner_claim(s->state_dir, req.job, op, d)) == 0)
			rc = svc_fed_submit(s, &req, op, d);
		if (rc)
			SKY_WARN("job %s from %s refused: %s", req.job, from, d->msg);
		return rc;
	}
	svc_job_from_req(&pj.job, &req);
	snprintf(pj.job.op, sizeof pj.job.op, "%s", op);
	if (req.train && req.dataset[0] && (rc = fit_set_seq(s, &pj.job, d)) != 0) {
		SKY_WARN("job %s from %s refused: %s", req.job, from, d->msg);
		return rc;
	}
	if (pj.job.model.seq > pj.job.model.max_pos || sky_model_validate(&pj.job.model) != 0) {
		rc = sky_diag_set(d, SKY_EINVAL, "job %s refused: model %s has invalid shapes",
				  req.job, req.model);
		SKY_WARN("%s", d->msg);
		return rc;
	}
	if (req.train && (rc = svc_submit_check_data(s, &req, d)) != 0) {
		SKY_WARN("job %s from %s refused: %s", req.job, from, d->msg);
		return rc;
	}
	if (req.infer && (rc = check_infer(s, &pj.job, d)) != 0) {
		SKY_WARN("job %s from %s refused: %s", req.job, from, d->msg);
		return rc;
	}
	pj.since = sky_clock_s();
	if (s->submit.n_pending < MAX_PENDING &&
	    (rc = sky_owner_claim(s->state_dir, req.job, op, d)) != 0) {
		SKY_WARN("job %s from %s refused: %s", req.job, from, d->msg);
		return rc;
	}
	rc = enqueue(s, &pj, from, d);
	if (rc == 0) /* what its owner read of an earlier run goes */
		svc_relay_clear(s, req.job, op);
	return rc;
}

/* A resend of a submission already answered: answered the same again.
 * Returns 1 when it was one. */
static int answer_again(svc *s, const char *op, const sky_job_req *req, const char *topic)
{
	if (!req->submit_id[0])
		return 0;
	for (int i = 0; i < MAX_RECENT; i++)
		if (s->submit.recent[i].len > 0 && !strcmp(s->submit.recent[i].op, op) &&
		    !strcmp(s->submit.recent[i].submit_id, req->submit_id)) {
			SKY_INFO("job %s from %s sent again (submit %s): answered again", req->job, op,
				 req->submit_id);
			svc_publish(s, topic, s->submit.recent[i].reply,
					 (size_t)s->submit.recent[i].len, 1, 0, NULL);
			return 1;
		}
	return 0;
}

/* A submission from operator op (its CN, from the topic the ACL let only
 * it publish on): queue it and answer on its reply topic, or, for a resend
 * of a submission already answered, answer the same again. */
void svc_submit_on_msg(svc *s, const char *op, const char *p, size_t len)
{
	char topic[SKY_TOPIC_BUF], from[96];
	sky_job_req req;
	sky_job_reply r;
	sky_diag d;
	sky_diag_clear(&d);
	memset(&r, 0, sizeof r);
	if (sky_topic_jobs(topic, sizeof topic, op, SKY_TOPIC_REPLY) != 0)
		return;
	int prc = sky_job_req_parse(p, len, &req, &d);
	if (answer_again(s, op, &req, topic))
		return;
	snprintf(from, sizeof from, "operator %s", op);
	int rc = prc ? prc : svc_submit_queue_op(s, p, len, op, from, &d);
	if (prc)
		SKY_WARN("job from %s refused: %s", from, d.msg);
	snprintf(r.submit_id, sizeof r.submit_id, "%s", req.submit_id);
	snprintf(r.job, sizeof r.job, "%s", req.job);
	r.ok = rc == 0;
	snprintf(r.state, sizeof r.state, "queued");
	snprintf(r.error, sizeof r.error, "%.200s", d.msg[0] ? d.msg : sky_strerror(rc));
	int slot = s->submit.next_recent;
	int n = sky_job_reply_encode(&r, s->submit.recent[slot].reply,
				     sizeof s->submit.recent[slot].reply);
	if (n <= 0) {
		SKY_WARN("job %s from %s: the answer does not fit", req.job, op);
		return;
	}
	svc_publish(s, topic, s->submit.recent[slot].reply, (size_t)n, 1, 0, NULL);
	if (req.submit_id[0]) {
		snprintf(s->submit.recent[slot].op, sizeof s->submit.recent[slot].op, "%s", op);
		snprintf(s->submit.recent[slot].submit_id, sizeof s->submit.recent[slot].submit_id,
			 "%s", req.submit_id);
		s->submit.recent[slot].len = n;
		s->submit.next_recent = (slot + 1) % MAX_RECENT;
	}
}

/* The request a plan answers (its model, shapes and training settings),
 * waiting REPLAN_WAIT_S for its boards. */
static void req_from_plan(sky_job_req *r, const sky_planmsg *p)
{
	memset(r, 0, sizeof *r);
	snprintf(r->job, sizeof r->job, "%s", p->job);
	snprintf(r->model, sizeof r->model, "%s", p->shape.name);
	r->layers = p->layers;
	r->seq = p->shape.seq;
	r->batch = p->shape.batch;
	r->micro_batches = p->micro_batches;
	snprintf(r->algo, sizeof r->algo, "%s", p->algo);
	snprintf(r->sched, sizeof r->sched, "%s", p->train.sched[0] ? p->train.sched : "1f1b");
	snprintf(r->objective, sizeof r->objective, "step");
	r->wait_s = REPLAN_WAIT_S;
	if (p->train.steps > 0) {
		r->train = 1;
		r->steps = p->train.steps;
		snprintf(r->optim, sizeof r->optim, "%s", p->train.optim);
		r->lr = p->train.lr;
		r->seed = (int)p->train.seed;
		r->warmup = p->train.warmup;
		r->clip = p->train.clip;
		r->stall_s = p->train.stall_s;
		r->plaintext = !p->train.sealed;
		snprintf(r->data_owner, sizeof r->data_owner, "%s", p->train.owner);
	}
}

void svc_submit_requeue(svc *s, const char *job, const char *why)
{
	for (int k = 0; k < s->submit.n_pending; k++)
		if (strcmp(s->submit.pending[k].job.req.job, job) == 0)
			return; /* already waiting to be planned */
	const sky_planmsg *p;
	long n = svc_store_load(s, job, &p, NULL);
	if (n < 0) {
		SKY_WARN("job %s: cannot re-plan (%s): its saved plan is unusable (%s)", job, why,
			 sky_strerror((int)n));
		return;
	}
	if (s->submit.n_pending >= MAX_PENDING) {
		SKY_WARN("job %s: cannot re-plan (%s): %d jobs already waiting", job, why,
			 MAX_PENDING);
		return;
	}
	svc_pending *pj = &s->submit.pending[s->submit.n_pending];
	sky_job_req r;
	memset(pj, 0, sizeof *pj);
	req_from_plan(&r, p);
	svc_job_from_req(&pj->job, &r);
	if (sky_owner_get(s->state_dir, job, pj->job.op, sizeof pj->job.op) != 0)
		pj->job.op[0] = '\0'; /* a job from before owners were kept */
	pj->since = sky_clock_s();
	s->submit.n_pending++;
	SKY_INFO("job %s epoch %lld: re-planning over the online boards (%s)", job,
		 (long long)p->epoch, why);
}

/* Plans pj if enough boards are ready. Returns 1 when the job is done with
 * (published or failed), 0 to keep waiting. */
static int try_pending(svc *s, svc_pending *pj)
{
	const sky_job_req *r = &pj->job.req;
	char why[200];
	int fit = 0;
	int online = svc_plan_fleet(s, &pj->job, &pj->notes, &fit, why, sizeof why);
	int need = r->min_boards > 0 ? r->min_boards : online;
	int timed_out = sky_clock_s() - pj->since >= r->wait_s;
	if ((fit < need || fit == 0) && !timed_out)
		return 0;
	if (fit == 0) {
		SKY_WARN("job %s dropped: %s within %g s", r->job, why, r->wait_s);
		return 1;
	}
	if (fit < need)
		SKY_WARN("job %s: planning with %d boards, %d wanted (waited %g s)", r->job, fit, need,
			 r->wait_s);
	svc_plan_req rq = {.job = &pj->job, .notes = &pj->notes};
	svc_plan_result res;
	svc_plan_job(s, &rq, &res);
	return 1;
}

int svc_submit_drop(svc *s, const char *job)
{
	int n = 0;
	for (int k = 0; k < s->submit.n_pending;) {
		if (!strcmp(s->submit.pending[k].job.req.job, job)) {
			s->submit.pending[k] = s->submit.pending[--s->submit.n_pending];
			n++;
		} else {
			k++;
		}
	}
	return n;
}

void svc_submit_tick(svc *s, double now)
{
	(void)now;
	for (int k = 0; k < s->submit.n_pending;) {
		svc_pending *pj = &s->submit.pending[k];
		if (try_pending(s, pj)) {
			/* dropped without a plan: no longer queued */
			if (sky_nojob_kind_of(&s->nojob, pj->job.req.job) == SKY_NOJOB_QUEUED)
				sky_nojob_note(&s->nojob, pj->job.req.job, SKY_NOJOB_UNKNOWN);
			*pj = s->submit.pending[--s->submit.n_pending];
		} else {
			k++;
		}
	}
}

int svc_submit_file(svc *s, const char *path, sky_diag *d)
{
	long n = sky_file_read(path, s->submit.job_file, sizeof s->submit.job_file - 1);
	if (n < 0)
		return sky_diag_set(d, (int)n, "job file %s: %s", path, sky_strerror((int)n));
	sky_diag jd;
	sky_diag_clear(&jd);
	svc_submit_queue(s, s->submit.job_file, (size_t)n, path, &jd);
	return 0;
}
