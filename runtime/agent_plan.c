/* Plan acceptance (step 5 of sky_agent.h): a plan is verified (size,
 * signature, topic), admitted (a stage for this board, newer than the last
 * run, within the board's budget, its frame key unwrapped) and installed
 * (the stage set up in the spare slot, swapped in, persisted, answered).
 * Also: the plan that stops a running job, the saved plan at start, and
 * the slice a serving plan waits for. */
#include "agent_internal.h"

#include "sky_file.h"
#include "sky_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t sky_agent_stage_bytes(const sky_planmsg *p, int stage)
{
	if (stage < 0 || stage >= p->n_stages)
		return SKY_EINVAL;
	if (p->infer.on)
		return sky_servejob_bytes(p, stage, 1, NULL);
	return sky_trainjob_bytes(p, stage, NULL);
}

/* ---- answers to the planner (plan-acks) ----------------------------------- */

/* Encodes k stamped with the current session and publishes it. */
static void send_ack(agent *a, sky_planack *k)
{
	char topic[SKY_TOPIC_BUF], buf[SKY_PLAN_ACK_MAX_BYTES];
	if (!a->m)
		return;
	k->session = a->session;
	snprintf(k->boot, sizeof k->boot, "%s", a->boot);
	int n = sky_planack_encode(k, buf, sizeof buf, NULL);
	if (n <= 0)
		return;
	sky_topic_board(topic, sizeof topic, a->idn.id, SKY_TOPIC_PLAN_ACK);
	/* retained, so a planner that restarts learns what each board holds */
	sky_mqtt_publish(a->m, topic, buf, (size_t)n, 1, 1, NULL);
}

/* Re-sends the acceptance of the plan we hold (after a reconnect, or when
 * the same plan is delivered again), with the current session: an ack from
 * an older session would be ignored by the planner as stale. */
void agent_publish_ack(agent *a)
{
	if (a->has_ack)
		send_ack(a, &a->ack);
}

/* The budget a plan is admitted against: the one the board reports, or,
 * under the test knob SKY_TEST_REAL_MEM_BYTES (a board that accepts less
 * than it reports, tests/integration/test_train_refused.sh), less. */
static int64_t admit_budget(const agent *a)
{
	const char *e = getenv("SKY_TEST_REAL_MEM_BYTES");
	long long real = e && *e ? atoll(e) : 0;
	return real > 0 && (a->caps.mem_bytes <= 0 || real < a->caps.mem_bytes) ? real
										 : a->caps.mem_bytes;
}

static void fill_ack(agent *a, sky_planack *k, const sky_planmsg *p, int stage, int ok,
		     int64_t bytes, const char *reason)
{
	memset(k, 0, sizeof *k);
	snprintf(k->board, sizeof k->board, "%s", a->idn.id);
	snprintf(k->job, sizeof k->job, "%s", p->job);
	k->epoch = p->epoch;
	k->session = a->session;
	k->stage = stage;
	k->ok = ok;
	k->arena_bytes = bytes;
	/* the figure the plan gave this board's role (a replica's own) */
	int rep = 0;
	k->expected_bytes = sky_planmsg_find_replica(p, a->idn.id, &rep) == stage && rep > 0
				    ? p->reps[p->stages[stage].rep0 + rep - 1].arena_bytes
				    : p->stages[stage].arena_bytes;
	k->budget_bytes = admit_budget(a);
	snprintf(k->reason, sizeof k->reason, "%s", reason ? reason : "");
}

/* A refusal goes out once; the plan we hold (and its ack) stays. */
static void refuse(agent *a, const sky_planmsg *p, int stage, int64_t bytes, const char *reason)
{
	sky_planack k;
	fill_ack(a, &k, p, stage, 0, bytes, reason);
	send_ack(a, &k);
}

/* A refusal said in the log with its reason, then sent. */
static void refuse_said(agent *a, const sky_planmsg *p, int stage, int64_t bytes,
			const char *reason)
{
	SKY_WARN("plan %s epoch %lld refused: %s", p->job, (long long)p->epoch, reason);
	refuse(a, p, stage, bytes, reason);
}

/* A serving job for stage of p, with the frame key (NULL: plaintext).
 * Returns it (heap, the caller's), or NULL with *rc and d saying why. */
static sky_servejob *serve_setup(agent *a, const sky_planmsg *p, int stage,
				 const unsigned char *key, int *rc, sky_diag *d)
{
	sky_transport_net net = agent_net(a);
	sky_servejob *sj = calloc(1, sizeof *sj);
	*rc = sj ? sky_servejob_setup(sj, p, stage, a->idn.id, a->o->state_dir, a->prof.threads,
				      key, &net, d)
		 : SKY_ENOMEM;
	if (*rc) {
		sky_servejob_free(sj);
		free(sj);
		return NULL;
	}
	return sj;
}

/* ---- verify ------------------------------------------------------------- */

/* The one plan check: msg within the size limit, signed by the planner,
 * decoded into a->incoming. Returns 0, SKY_ERANGE (too big, not parsed), or
 * the envelope's or the decoder's error with d saying why. */
static int plan_open(agent *a, const char *msg, size_t len, sky_diag *d)
{
	size_t plen = 0;
	if (len > SKY_PLAN_MAX_BYTES)
		return SKY_ERANGE;
	int rc = sky_verify_envelope(&a->idn.planner, msg, len, a->payload, sizeof a->payload,
				     &plen, d);
	if (rc == 0)
		rc = sky_planmsg_decode(a->payload, plen, &a->incoming, d);
	return rc;
}

/* plan_open, with a rejection said and counted; from the network, the
 * plan must also be signed for the job its topic names. */
static int plan_verify(agent *a, const char *topic, const char *msg, size_t len, int from_disk)
{
	sky_diag d;
	sky_diag_clear(&d);
	if (len > SKY_PLAN_MAX_BYTES) {
		SKY_WARN("plan rejected on %s: %zu bytes over the %u-byte limit (refused unparsed); "
			 "keeping epoch %lld",
			 topic, len, SKY_PLAN_MAX_BYTES, (long long)a->epoch);
		a->plans_rejected++;
		return SKY_ERANGE;
	}
	int rc = plan_open(a, msg, len, &d);
	if (rc) {
		SKY_WARN("plan rejected on %s: %s (%s); keeping epoch %lld", topic,
			 rc == SKY_EAUTH ? "bad or missing signature" : "malformed", d.msg,
			 (long long)a->epoch);
		a->plans_rejected++;
		return rc;
	}
	const sky_planmsg *p = &a->incoming;
	char want[SKY_TOPIC_BUF];
	if (!from_disk && (sky_topic_job(want, sizeof want, p->job, SKY_TOPIC_PLAN) != 0 ||
			   strcmp(want, topic) != 0)) {
		SKY_WARN("plan rejected on %s: it is signed for job %s (topic mismatch); keeping "
			 "epoch %lld",
			 topic, p->job, (long long)a->epoch);
		a->plans_rejected++;
		return SKY_EAUTH;
	}
	return 0;
}

/* ---- admit -------------------------------------------------------------- */

/* A newer plan of the job we hold with no stage for this board: the held
 * epoch must stop (not train, not serve). */
static void plan_without_us(agent *a, const sky_planmsg *p)
{
	if (a->job && a->train_pending && !strcmp(p->job, a->plan.job) && p->epoch > a->epoch) {
		/* re-planned without us: the held epoch must not run any more */
		SKY_INFO("plan %s epoch %lld has no stage for %s: epoch %lld will not run", p->job,
			 (long long)p->epoch, a->idn.id, (long long)a->epoch);
		a->train_pending = 0;
		return;
	}
	if (a->sj && !strcmp(p->job, a->plan.job) && p->epoch > a->epoch) {
		/* a serving job re-planned without us: its old epoch must
		 * not take requests (the new first stage does) */
		SKY_INFO("plan %s epoch %lld has no stage for %s: stops serving epoch %lld", p->job,
			 (long long)p->epoch, a->idn.id, (long long)a->epoch);
		sky_servejob_free(a->sj);
		free(a->sj);
		a->sj = NULL;
		return;
	}
	SKY_DEBUG("plan %s epoch %lld has no stage for %s", p->job, (long long)p->epoch, a->idn.id);
}

/* Is the verified plan a->incoming one for this board to take? Returns 1
 * with *stage set when it goes on, 0 when it is answered already (no stage
 * here, or the plan held delivered again), or the rejection (said). */
static int plan_admit(agent *a, const char *topic, const char *msg, size_t len, int from_disk,
		      int *stage)
{
	const sky_planmsg *p = &a->incoming;
	/* a stage's own board, or (a plan with stage replicas) one of its replicas */
	*stage = sky_planmsg_find_replica(p, a->idn.id, NULL);
	if (*stage < 0) {
		plan_without_us(a, p);
		return 0;
	}
	if (p->infer.on && p->epoch <= agent_cancelled_epoch(a->o->state_dir)) {
		/* the planner stopped it here (agent_cmd.c): the retained plan
		 * after a reconnect, the saved one after a restart */
		SKY_INFO("plan %s epoch %lld: the job was cancelled at this epoch; not serving it",
			 p->job, (long long)p->epoch);
		if (p->epoch > a->epoch)
			a->epoch = p->epoch;
		return 0;
	}
	if (p->epoch > a->epoch)
		return 1;
	if (p->epoch == a->epoch && a->plan_env && len == a->plan_env_len &&
	    memcmp(msg, a->plan_env, len) == 0) {
		/* the same plan again (retained, after a reconnect): say we hold it */
		if (!from_disk)
			agent_publish_ack(a);
		return 0;
	}
	SKY_WARN("plan rejected on %s: epoch %lld is not newer than %lld, the last plan run "
		 "(replayed or stale); keeping it",
		 topic, (long long)p->epoch, (long long)a->epoch);
	a->plans_rejected++;
	return SKY_EAUTH;
}

/* A plan on its way in: what admit and install learn about it. */
typedef struct taking {
	const sky_planmsg *p; /* a->incoming */
	int stage;
	int64_t need;  /* the stage's arena bytes */
	int sealed;    /* frames are sealed: key holds the job's frame key */
	unsigned char key[SKY_JOBKEY_BYTES];
	sky_trainjob *next; /* the spare slot of a->jobs */
	sky_servejob *sj;   /* an infer plan's serving job, once set up */
	int slice_ready;    /* an infer plan's slice is in the cache */
} taking;

/* The stage's bytes against the board's budget, and the job's frame key,
 * wrapped for this board's certificate key. Returns 0 with t->need,
 * t->sealed and t->key set, or the refusal (said and sent). */
static int plan_fit(agent *a, taking *t)
{
	const sky_planmsg *p = t->p;
	sky_diag d;
	sky_diag_clear(&d);
	if (p->train.steps > 0 && p->train.dataset[0]) {
		/* the stage that reads the data: the first (and, under a data
		 * owner, the last) */
		char why[320];
		int reads = t->stage == 0 || (p->train.owner[0] && t->stage == p->n_stages - 1);
		if (reads && !sky_boardsets_find(&a->sets, p->train.dataset))
			snprintf(why, sizeof why, "this board does not hold data set '%.64s'",
				 p->train.dataset);
		why[0] = '\0';
		if (reads && !sky_boardsets_find(&a->sets, p->train.dataset))
			snprintf(why, sizeof why, "this board does not hold data set '%.64s'",
				 p->train.dataset);
		else if (reads && p->train.eval_dataset[0] &&
			 !sky_boardsets_find(&a->sets, p->train.eval_dataset))
			snprintf(why, sizeof why, "this board does not hold eval set '%.64s'",
				 p->train.eval_dataset);
		else if (!p->train.owner[0] && p->n_stages > 1)
			/* said, never run as the synthetic task instead */
			snprintf(why, sizeof why,
				 "training on data set '%.64s' across the fleet without a data owner "
				 "is not built yet (the labels' way to the last stage; submit with "
				 "--data-owner)",
				 p->train.dataset);
		else if (!p->hf.on)
			snprintf(why, sizeof why,
				 "data set '%.64s' with preset model %s: fine-tuning needs the "
				 "model's config (sky job submit --model-dir)",
				 p->train.dataset, p->shape.name);
		if (why[0]) {
			refuse_said(a, p, t->stage, 0, why);
			return SKY_EUNSUPPORTED;
		}
	}
	t->need = (p->n_reps > 0 || p->train.exact_sum) && !p->infer.on
			  ? sky_trainjob_bytes_as(p, t->stage, a->idn.id, NULL)
						 : sky_agent_stage_bytes(p, t->stage);
	if (t->need < 0) {
		SKY_WARN("plan %s epoch %lld refused: model %s is unknown to this build", p->job,
			 (long long)p->epoch, p->shape.name);
		refuse(a, p, t->stage, 0, "unknown model preset");
		return (int)t->need;
	}
	if (admit_budget(a) > 0 && t->need > admit_budget(a)) {
		char why[160];
		snprintf(why, sizeof why, "stage needs %lld bytes, the board's budget is %lld",
			 (long long)t->need, (long long)admit_budget(a));
		SKY_WARN("plan %s epoch %lld refused: %s; keeping epoch %lld", p->job,
			 (long long)p->epoch, why, (long long)a->epoch);
		refuse(a, p, t->stage, t->need, why);
		return SKY_ENOMEM;
	}
	t->sealed = (p->train.steps > 0 && p->train.sealed) || (p->infer.on && p->infer.sealed);
	if (!t->sealed)
		return 0;
	sky_jobkey_refusal why = SKY_JOBKEY_OK;
	int rep = 0;
	sky_planmsg_find_replica(p, a->idn.id, &rep);
	const char *blob = rep > 0 ? p->reps[p->stages[t->stage].rep0 + rep - 1].key
				   : p->stages[t->stage].key;
	if (sky_jobkey_unwrap(&a->idn.key, blob, strlen(blob), p->job, a->idn.id, p->epoch, t->key,
			      &why, &d) != 0) {
		char r[320];
		snprintf(r, sizeof r, "frame key refused (%s): %s", sky_jobkey_refusal_name(why),
			 d.msg);
		refuse_said(a, p, t->stage, t->need, r);
		return SKY_EAUTH;
	}
	return 0;
}

/* ---- install ------------------------------------------------------------ */

/* A training job in the spare slot; fine-tuning (plan train.dataset, hf):
 * the stages that read data open the board's set, and a job starting from
 * the checkpoint gets its stage's slice through the slice cache (the
 * weights are set when it is in place: agent_slice_in_place; until then
 * the plan is not acknowledged and the job does not start). */
static int train_setup(agent *a, taking *t, const sky_transport_net *net, sky_diag *d)
{
	const sky_planmsg *p = t->p;
	int rc = sky_trainjob_setup(t->next, p, t->stage, a->idn.id, t->sealed ? t->key : NULL,
				    net, d);
	if (rc)
		return rc;
	const sky_boardset *bs = p->train.dataset[0] ? sky_boardsets_find(&a->sets, p->train.dataset)
						     : NULL;
	if (bs && (t->next->st.has_data || t->next->stage2 >= 0) &&
	    (rc = sky_trainjob_data(t->next, bs->path, d)) != 0)
		return rc;
	if (!(p->hf.on && p->hf.init))
		return 0;
	char sp[700];
	int hit = sky_slicefetch_start(&a->fetch, p->job, p->epoch, &p->stages[t->stage].slice, net,
				       sp, sizeof sp, d);
	if (hit < 0)
		return rc = hit;
	t->slice_ready = hit == 1;
	if (hit == 1)
		rc = sky_trainjob_init_from(t->next, sp, d);
	return rc;
}

/* Sets the stage up, the one arena allocated, carved and sealed here: a
 * training job in the spare slot, or a serving job from the slice in the
 * board's cache; a slice not there yet is fetched first
 * (sky_slicefetch.h), and the job is set up when it is in place
 * (agent_slice_in_place), with the frame key kept until then. Returns 0,
 * or the refusal (said and sent). */
static int plan_setup(agent *a, taking *t)
{
	const sky_planmsg *p = t->p;
	sky_diag d;
	sky_diag_clear(&d);
	t->next = a->job == &a->jobs[0] ? &a->jobs[1] : &a->jobs[0];
	sky_transport_net net = agent_net(a);
	t->slice_ready = 1;
	if (p->infer.on) {
		char sp[700];
		int hit = sky_slicefetch_start(&a->fetch, p->job, p->epoch, &p->stages[t->stage].slice,
					       &net, sp, sizeof sp, &d);
		if (hit < 0)
			SKY_WARN("plan %s epoch %lld: slice: %s", p->job, (long long)p->epoch, d.msg);
		t->slice_ready = hit == 1;
		sky_diag_clear(&d);
	}
	int rc = 0;
	if (p->infer.on && t->slice_ready)
		t->sj = serve_setup(a, p, t->stage, t->sealed ? t->key : NULL, &rc, &d);
	else if (!p->infer.on)
		rc = train_setup(a, t, &net, &d);
	memcpy(a->slice_key, t->key, sizeof t->key);
	a->slice_sealed = t->sealed;
	memset(t->key, 0, sizeof t->key);
	if (rc)
		refuse_said(a, p, t->stage, t->need, d.msg);
	return rc;
}

/* Swaps the set-up stage in for the plan we held, then persists the plan
 * (epoch, <state>/plan.env) and answers it unless it came from disk.
 * Returns 0 or SKY_ENOMEM. */
static int plan_install(agent *a, taking *t, const char *msg, size_t len, int from_disk)
{
	const sky_planmsg *p = t->p;
	sky_trainjob *next = t->next;
	/* skyd --speed: the stage computes as slowly as it probed (both of a
	 * data owner's) */
	next->tr.prof = &a->prof;
	if (next->stage2 >= 0)
		next->tr2.prof = &a->prof;
	char *env = malloc(len);
	if (!env) {
		sky_trainjob_free(next);
		sky_servejob_free(t->sj);
		free(t->sj);
		return SKY_ENOMEM;
	}
	memcpy(env, msg, len);
	if (a->job)
		sky_trainjob_free(a->job);
	sky_servejob_free(a->sj);
	free(a->sj);
	a->sj = t->sj;
	free(a->plan_env);
	a->job = p->infer.on ? NULL : next;
	a->arena_bytes = t->need;
	a->plan_env = env;
	a->plan_env_len = len;
	a->plan = *p;
	if (a->job)
		a->job->plan = &a->plan; /* the job keeps pointing at the plan we hold */
	if (a->sj) {
		a->sj->plan = &a->plan;
		a->sj->prof = &a->prof; /* skyd --speed: it serves as slowly as it probed */
	}
	a->stage = t->stage;
	a->epoch = p->epoch;
	a->train_pending = p->train.steps > 0 && agent_trained_epoch(a->o->state_dir) < p->epoch;
	/* serving, and fine-tuning from a checkpoint: the plan is
	 * acknowledged once the stage's slice is in the cache (at once on a
	 * hit; else when the download completes) */
	if (t->slice_ready || !p->infer.on)
		memset(a->slice_key, 0, sizeof a->slice_key);
	fill_ack(a, &a->ack, p, t->stage, 1, t->need, NULL);
	a->has_ack = t->slice_ready;
	SKY_INFO("plan %s epoch %lld accepted: stage %d of %d, half-layers %d-%d, arena %lld bytes "
		 "reserved (planner expected %lld)",
		 p->job, (long long)p->epoch, t->stage, p->n_stages, p->stages[t->stage].first,
		 p->stages[t->stage].last, (long long)t->need,
		 (long long)p->stages[t->stage].arena_bytes);
	if (!from_disk) {
		char path[1024];
		agent_write_counter(a->o->state_dir, "epoch", a->epoch);
		if (agent_state_path(a->o->state_dir, "plan.env", path, sizeof path) == 0)
			sky_file_write(path, msg, len, 0644);
		agent_publish_ack(a);
	}
	return 0;
}

int agent_take_plan(agent *a, const char *topic, const char *msg, size_t len, int from_disk)
{
	taking t;
	memset(&t, 0, sizeof t);
	t.p = &a->incoming;
	int rc = plan_verify(a, topic, msg, len, from_disk);
	if (rc)
		return rc;
	rc = plan_admit(a, topic, msg, len, from_disk, &t.stage);
	if (rc <= 0)
		return rc;
	if ((rc = plan_fit(a, &t)) != 0 || (rc = plan_setup(a, &t)) != 0)
		return rc;
	return plan_install(a, &t, msg, len, from_disk);
}

/* ---- plans that come while the held plan runs ------------------------------ */

void agent_plan_while_training(agent *a, const char *topic, const unsigned char *p, size_t len)
{
	/* the running job owns the arena: a newer, verified plan of the same
	 * job stops it at once (the job's polls see `abandon`), and is taken
	 * when it has stopped */
	sky_diag vd;
	sky_diag_clear(&vd);
	if (!a->abandon && plan_open(a, (const char *)p, len, &vd) == 0 &&
	    !strcmp(a->incoming.job, a->plan.job) && a->incoming.epoch > a->epoch &&
	    (a->next_env = malloc(len)) != NULL) {
		memcpy(a->next_env, p, len);
		a->next_env_len = len;
		a->abandon = 1;
		SKY_INFO("job %s: plan epoch %lld (generation %d, resume from step %d) arrived "
			 "while epoch %lld trains; stopping it",
			 a->plan.job, (long long)a->incoming.epoch, a->incoming.train.generation,
			 a->incoming.train.resume_step, (long long)a->epoch);
		return;
	}
	if (a->cancelled && len <= SKY_PLAN_MAX_BYTES) {
		/* the job is stopping (cancelled): this plan is taken after it */
		char *env = malloc(len ? len : 1);
		if (env) {
			memcpy(env, p, len);
			free(a->pending_env);
			a->pending_env = env;
			a->pending_len = len;
			snprintf(a->pending_topic, sizeof a->pending_topic, "%s", topic);
		}
		return;
	}
	if (!a->abandon)
		SKY_WARN("plan on %s ignored: job %s is training", topic, a->plan.job);
}

void agent_plan_while_serving(agent *a, const char *topic, const unsigned char *p, size_t len)
{
	/* a plan ends the serving loop and is taken after it */
	char *env = malloc(len ? len : 1);
	if (env && len <= SKY_PLAN_MAX_BYTES) {
		memcpy(env, p, len);
		free(a->pending_env);
		a->pending_env = env;
		a->pending_len = len;
		snprintf(a->pending_topic, sizeof a->pending_topic, "%s", topic);
		atomic_store(&a->sj->stop, 1);
	} else {
		free(env);
	}
}

void agent_take_next_plan(agent *a)
{
	char *env = a->next_env;
	size_t len = a->next_env_len;
	char topic[SKY_TOPIC_BUF];
	a->next_env = NULL;
	a->abandon = 0;
	if (!env)
		return;
	sky_topic_job(topic, sizeof topic, a->plan.job, SKY_TOPIC_PLAN);
	sky_mutex_lock(&a->lock);
	agent_take_plan(a, topic, env, len, 0);
	sky_mutex_unlock(&a->lock);
	free(env);
}

/* ---- the saved plan and the slice ------------------------------------------ */

/* The plan epoch is the board's guard against replayed plans. The saved
 * plan (<state>/plan.env, signed) is re-verified; if <state>/epoch is lost or
 * damaged, that plan's own epoch is the floor, said out loud. */
void agent_load_saved_plan(agent *a)
{
	char path[1024];
	static char buf[SKY_PLAN_MAX_BYTES];
	const char *why;
	int64_t epoch = 0;
	long n = agent_state_path(a->o->state_dir, "plan.env", path, sizeof path) == 0
			 ? sky_file_read(path, buf, sizeof buf)
			 : SKY_ERANGE;
	int rc = agent_read_counter(a->o->state_dir, "epoch", &epoch, &why);
	int known = rc == 0;
	if (rc != 0 && (rc != SKY_ENOTFOUND || n > 0))
		SKY_WARN("plan epoch state lost: %s/epoch is %s; %s", a->o->state_dir, why,
			 n > 0 ? "the saved plan's own (signed) epoch is the floor now"
			       : "no saved plan either: any signed plan will be taken");
	if (n <= 0) {
		a->epoch = known ? epoch : 0;
		return;
	}
	a->epoch = known ? epoch - 1 : 0; /* only a newer plan is taken; the saved one is `epoch` */
	sky_mutex_lock(&a->lock);
	rc = agent_take_plan(a, path, buf, (size_t)n, 1);
	sky_mutex_unlock(&a->lock);
	if (rc != 0 || a->epoch < epoch || a->epoch <= 0) {
		SKY_WARN("saved plan %s not usable; waiting for a new one", path);
		a->epoch = known ? epoch : 0;
		return;
	}
	if (!known || a->epoch > epoch) {
		SKY_WARN("plan epoch recovered from the saved plan: %lld", (long long)a->epoch);
		agent_write_counter(a->o->state_dir, "epoch", a->epoch);
	}
}

void agent_slice_in_place(agent *a, const char *path)
{
	sky_mutex_lock(&a->lock);
	if (a->has_ack == 0 && a->ack.ok && !strcmp(a->fetch.job, a->plan.job) &&
	    a->fetch.epoch == a->plan.epoch) {
		if (!a->plan.infer.on && a->job && a->job->weights_pending) {
			/* fine-tuning: the stage starts from the checkpoint's slice */
			sky_diag d;
			sky_diag_clear(&d);
			if (sky_trainjob_init_from(a->job, path, &d) != 0) {
				refuse_said(a, &a->plan, a->stage, a->arena_bytes, d.msg);
				a->train_pending = 0;
				a->has_ack = 1; /* answered: the refusal */
				sky_mutex_unlock(&a->lock);
				return;
			}
		}
		if (a->plan.infer.on && agent_cancelled_epoch(a->o->state_dir) >= a->plan.epoch) {
			/* stopped while its slice was coming (agent_cmd.c) */
			sky_mutex_unlock(&a->lock);
			return;
		}
		if (a->plan.infer.on && !a->sj) {
			sky_diag d;
			sky_diag_clear(&d);
			int rc;
			sky_servejob *sj = serve_setup(a, &a->plan, a->stage,
						       a->slice_sealed ? a->slice_key : NULL, &rc, &d);
			memset(a->slice_key, 0, sizeof a->slice_key);
			if (rc) {
				refuse_said(a, &a->plan, a->stage, a->arena_bytes, d.msg);
				a->has_ack = 1; /* answered: the refusal */
				sky_mutex_unlock(&a->lock);
				return;
			}
			sj->plan = &a->plan;
			sj->prof = &a->prof; /* skyd --speed, as a training stage */
			a->sj = sj;
		}
		a->has_ack = 1;
		SKY_INFO("plan %s epoch %lld: slice in place (%s); acknowledging", a->plan.job,
			 (long long)a->plan.epoch, path);
		agent_publish_ack(a);
	}
	sky_mutex_unlock(&a->lock);
}
