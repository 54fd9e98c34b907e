#include "sky_planmsg.h"

#include "sky_json.h"

#include <string.h>

int sky_planmsg_find(const sky_planmsg *p, const char *board)
{
	for (int i = 0; i < p->n_stages; i++)
		if (strcmp(p->stages[i].board, board) == 0)
			return i;
	return -1;
}

int sky_planmsg_n_replicas(const sky_planmsg *p, int k)
{
	return k >= 0 && k < p->n_stages ? 1 + p->stages[k].n_reps : 0;
}

const char *sky_planmsg_replica_board(const sky_planmsg *p, int k, int r)
{
	if (k < 0 || k >= p->n_stages || r < 0 || r > p->stages[k].n_reps)
		return NULL;
	return r == 0 ? p->stages[k].board : p->reps[p->stages[k].rep0 + r - 1].board;
}

int sky_planmsg_route(const sky_planmsg *p, int k, int mb)
{
	if (k < 0 || k >= p->n_stages || mb < 0 || mb >= p->micro_batches)
		return -1;
	const sky_plan_stage *s = &p->stages[k];
	return s->n_reps ? p->route[s->route_row][mb] : 0;
}

int sky_planmsg_find_replica(const sky_planmsg *p, const char *board, int *replica)
{
	for (int k = 0; k < p->n_stages; k++)
		for (int r = 0; r <= p->stages[k].n_reps; r++)
			if (strcmp(sky_planmsg_replica_board(p, k, r), board) == 0) {
				if (replica)
					*replica = r;
				return k;
			}
	return -1;
}

int sky_planmsg_add_replica(sky_planmsg *p, int k, const sky_plan_replica *r)
{
	if (k < 0 || k >= p->n_stages || p->n_reps >= SKY_PLANMSG_MAX_REPLICAS)
		return SKY_ERANGE;
	sky_plan_stage *s = &p->stages[k];
	if (s->n_reps == 0) {
		if (p->n_routes >= SKY_PLANMSG_MAX_REPLICAS)
			return SKY_ERANGE;
		s->rep0 = p->n_reps;
		s->route_row = p->n_routes++;
		memset(p->route[s->route_row], 0, sizeof p->route[0]);
	} else if (s->rep0 + s->n_reps != p->n_reps) {
		return SKY_ERANGE; /* not the last stage given replicas */
	}
	p->reps[p->n_reps++] = *r;
	return ++s->n_reps;
}

void sky_planmsg_set_route(sky_planmsg *p, int k, const unsigned char *route)
{
	if (k >= 0 && k < p->n_stages && p->stages[k].n_reps > 0)
		memcpy(p->route[p->stages[k].route_row], route, (size_t)p->micro_batches);
}

/* Replicas: laid out in stage order (so a plan round-trips), every board
 * once in the whole plan, each replica a key when sealed, every replica
 * routed at least one micro-batch, training plans only. */
static int validate_replicas(const sky_planmsg *p, sky_diag *d)
{
	int reps = 0, rows = 0, any = 0;
	if (p->n_reps < 0 || p->n_reps > SKY_PLANMSG_MAX_REPLICAS || p->n_routes < 0 ||
	    p->n_routes > SKY_PLANMSG_MAX_REPLICAS)
		return sky_diag_set(d, SKY_ERANGE, "plan %s: %d replicas, allowed at most %d",
				    p->job, p->n_reps, SKY_PLANMSG_MAX_REPLICAS);
	/* every board once (stages' own boards are checked by the caller) */
	for (int i = 0; i < p->n_reps; i++) {
		for (int k = 0; k < p->n_stages; k++)
			if (strcmp(p->stages[k].board, p->reps[i].board) == 0)
				return sky_diag_set(d, SKY_EINVAL,
						    "plan %s: board %s is stage %d's and a replica",
						    p->job, p->reps[i].board, k);
		for (int j = 0; j < i; j++)
			if (strcmp(p->reps[j].board, p->reps[i].board) == 0)
				return sky_diag_set(d, SKY_EINVAL,
						    "plan %s: board %s is a replica twice", p->job,
						    p->reps[i].board);
	}
	for (int k = 0; k < p->n_stages; k++) {
		const sky_plan_stage *s = &p->stages[k];
		if (s->n_reps == 0)
			continue;
		any = 1;
		if (s->n_reps < 0 || s->rep0 != reps || s->route_row != rows ||
		    reps + s->n_reps > p->n_reps || rows >= p->n_routes)
			return sky_diag_set(d, SKY_EINVAL, "plan %s: stage %d replicas out of order",
					    p->job, k);
		int count[SKY_PLANMSG_MAX_REPLICAS + 1] = {0};
		for (int mb = 0; mb < p->micro_batches; mb++) {
			int r = p->route[rows][mb];
			if (r > s->n_reps)
				return sky_diag_set(d, SKY_ERANGE,
						    "plan %s: stage %d route[%d] is replica %d, the "
						    "stage has %d",
						    p->job, k, mb, r, 1 + s->n_reps);
			count[r]++;
		}
		for (int r = 0; r <= s->n_reps; r++) {
			if (count[r] == 0)
				return sky_diag_set(d, SKY_EINVAL,
						    "plan %s: stage %d replica %d (%s) runs no "
						    "micro-batch",
						    p->job, k, r, sky_planmsg_replica_board(p, k, r));
			if (r == 0) {
				if (s->in_flight > count[0])
					return sky_diag_set(d, SKY_ERANGE,
							    "plan %s: stage %d in_flight %d, allowed 1 "
							    "to %d (its micro-batches)",
							    p->job, k, s->in_flight, count[0]);
				continue;
			}
			const sky_plan_replica *x = &p->reps[s->rep0 + r - 1];
			if (!sky_topic_segment_ok(x->board) || !sky_site_ok(x->site))
				return sky_diag_set(d, SKY_EINVAL,
						    "plan %s: stage %d replica %d board id or site is "
						    "invalid",
						    p->job, k, r);
			if (x->in_flight < 1 || x->in_flight > count[r])
				return sky_diag_set(d, SKY_ERANGE,
						    "plan %s: stage %d replica %d in_flight %d, allowed "
						    "1 to %d (its micro-batches)",
						    p->job, k, r, x->in_flight, count[r]);
			if (x->arena_bytes < 0 || x->arena_bytes > SKY_CAPS_MAX_MEM_BYTES)
				return sky_diag_set(d, SKY_ERANGE,
						    "plan %s: stage %d replica %d arena_bytes %lld",
						    p->job, k, r, (long long)x->arena_bytes);
			if (p->train.sealed && !x->key[0])
				return sky_diag_set(d, SKY_EINVAL,
						    "plan %s: sealed frames but stage %d replica %d "
						    "has no key",
						    p->job, k, r);
		}
		reps += s->n_reps;
		rows++;
	}
	if (reps != p->n_reps || rows != p->n_routes)
		return sky_diag_set(d, SKY_EINVAL,
				    "plan %s: %d replicas listed, %d belong to stages", p->job,
				    p->n_reps, reps);
	if (!any)
		return 0;
	if (p->train.steps <= 0 || p->infer.on)
		return sky_diag_set(d, SKY_EINVAL,
				    "plan %s: stage replicas are for training plans only", p->job);
	if (p->train.owner[0])
		return sky_diag_set(d, SKY_EINVAL,
				    "plan %s: a plan with a data owner has no stage replicas", p->job);
	return 0;
}

int sky_plan_sha256_ok(const char *s)
{
	size_t n;
	for (n = 0; s && s[n]; n++)
		if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
			return 0;
	return n == SKY_PLAN_SHA256_HEX;
}

int sky_plan_tokhash_ok(const char *s)
{
	size_t n;
	for (n = 0; s && s[n]; n++)
		if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
			return 0;
	return n == 8;
}

int sky_planmsg_client_ok(const sky_planmsg *p, const char *cn)
{
	if (!cn || !sky_topic_segment_ok(cn))
		return 0;
	if (p->infer.n_clients == 0)
		return strncmp(cn, SKY_TOPIC_CLIENT_PREFIX, sizeof SKY_TOPIC_CLIENT_PREFIX - 1) == 0;
	for (int i = 0; i < p->infer.n_clients; i++)
		if (strcmp(p->infer.clients[i], cn) == 0)
			return 1;
	return 0;
}

/* Every stage's slice names 64 hex digits and a consistent chunking. */
static int validate_slices(const sky_planmsg *p, sky_diag *d)
{
	for (int i = 0; i < p->n_stages; i++) {
		const sky_plan_slice *sl = &p->stages[i].slice;
		if (!sky_plan_sha256_ok(sl->sha256))
			return sky_diag_set(d, SKY_EINVAL,
					    "plan %s: stage %d slice.sha256 is not 64 lower-case hex "
					    "digits",
					    p->job, i);
		if (sl->bytes < 1 || sl->bytes > SKY_CAPS_MAX_MEM_BYTES || sl->chunks < 1 ||
		    sl->chunk_bytes < 1 || (int64_t)sl->chunks * sl->chunk_bytes < sl->bytes ||
		    (int64_t)(sl->chunks - 1) * sl->chunk_bytes >= sl->bytes)
			return sky_diag_set(d, SKY_ERANGE,
					    "plan %s: stage %d slice of %lld bytes in %d chunks of %d",
					    p->job, i, (long long)sl->bytes, sl->chunks,
					    sl->chunk_bytes);
	}
	return 0;
}

/* A Hugging Face model's block: sizes in range; a train plan starting from
 * the checkpoint names every stage's slice. */
static int validate_hf(const sky_planmsg *p, sky_diag *d)
{
	const sky_plan_hf *h = &p->hf;
	if (!h->on)
		return 0;
	if (strcmp(p->shape.name, SKY_PLAN_HF_NAME) != 0)
		return sky_diag_set(d, SKY_EINVAL, "plan %s: an hf model is named '%s', not '%s'",
				    p->job, p->shape.name, SKY_PLAN_HF_NAME);
	if (h->vocab < 1 || h->vocab > SKY_PLAN_HF_MAX_VOCAB || h->max_pos < p->shape.seq ||
	    h->max_pos > SKY_CAPS_MAX_DIM || h->type_vocab < 1 || h->type_vocab > 1024 ||
	    h->classes < 1 || h->classes > 256 || h->act < 0 || h->act > 1 ||
	    !(h->ln_eps >= 0 && h->ln_eps < 1) || !(h->hidden_drop >= 0 && h->hidden_drop < 1) ||
	    !(h->attn_drop >= 0 && h->attn_drop < 1))
		return sky_diag_set(d, SKY_ERANGE, "plan %s: an hf model setting is out of range",
				    p->job);
	if (h->init && p->train.steps < 1)
		return sky_diag_set(d, SKY_EINVAL, "plan %s: hf.init without a train section",
				    p->job);
	return h->init ? validate_slices(p, d) : 0;
}

static int validate_infer(const sky_planmsg *p, sky_diag *d)
{
	const sky_plan_infer *in = &p->infer;
	if (!in->on) {
		for (int i = 0; i < p->n_stages && !(p->hf.on && p->hf.init); i++)
			if (p->stages[i].slice.sha256[0])
				return sky_diag_set(d, SKY_EINVAL,
						    "plan %s: stage %d has a slice but no infer section",
						    p->job, i);
		return validate_hf(p, d);
	}
	if (p->hf.on && p->hf.init)
		return sky_diag_set(d, SKY_EINVAL, "plan %s: hf.init in a serving plan", p->job);
	int rc;
	if (p->train.steps > 0)
		return sky_diag_set(d, SKY_EINVAL, "plan %s: has both train and infer", p->job);
	if (in->batch < 1 || in->batch > p->shape.batch)
		return sky_diag_set(d, SKY_ERANGE, "plan %s: infer.batch %d, allowed 1 to %d", p->job,
				    in->batch, p->shape.batch);
	if (in->wait_ms < 0 || in->wait_ms > SKY_PLAN_MAX_WAIT_MS || in->queue < 1 ||
	    in->queue > SKY_PLAN_MAX_QUEUE || in->threads < 0 || in->threads > 64 ||
	    !(in->predicted_seq_s >= 0 && in->predicted_seq_s < 1e9) || in->n_clients < 0 ||
	    in->n_clients > SKY_PLAN_MAX_CLIENTS)
		return sky_diag_set(d, SKY_ERANGE, "plan %s: an infer setting is out of range", p->job);
	if (in->tokenizer[0] && !sky_plan_tokhash_ok(in->tokenizer))
		return sky_diag_set(d, SKY_EFORMAT,
				    "plan %s: infer.tokenizer must be 8 lower-case hex digits", p->job);
	for (int i = 0; i < in->n_clients; i++)
		if (!sky_topic_segment_ok(in->clients[i]) ||
		    strncmp(in->clients[i], SKY_TOPIC_CLIENT_PREFIX,
			    sizeof SKY_TOPIC_CLIENT_PREFIX - 1) != 0)
			return sky_diag_set(d, SKY_EINVAL,
					    "plan %s: infer client %d is not a " SKY_TOPIC_CLIENT_PREFIX
					    "<name> id",
					    p->job, i);
	if ((rc = validate_slices(p, d)) != 0 || (rc = validate_hf(p, d)) != 0)
		return rc;
	for (int i = 0; i < p->n_stages; i++) {
		if (in->sealed && !p->stages[i].key[0])
			return sky_diag_set(d, SKY_EINVAL,
					    "plan %s: sealed frames but stage %d has no key", p->job, i);
	}
	return 0;
}

int sky_planmsg_validate(const sky_planmsg *p, sky_diag *d)
{
	int rc;
	if (!sky_topic_segment_ok(p->job))
		return sky_diag_set(d, SKY_EINVAL, "plan: job id is not 1-%d of [A-Za-z0-9_.-]",
				    SKY_TOPIC_SEGMENT_MAX);
	if (p->epoch < 1 || p->epoch > SKY_JSON_INT_MAX)
		return sky_diag_set(d, SKY_ERANGE, "plan %s: epoch %lld out of range", p->job,
				    (long long)p->epoch);
	if (p->layers < 1 || p->layers > SKY_PLANMSG_MAX_LAYERS)
		return sky_diag_set(d, SKY_ERANGE, "plan %s: model.layers %d, allowed 1 to %d", p->job,
				    p->layers, SKY_PLANMSG_MAX_LAYERS);
	if (p->micro_batches < 1 || p->micro_batches > SKY_PLANMSG_MAX_MICRO)
		return sky_diag_set(d, SKY_ERANGE, "plan %s: micro_batches %d, allowed 1 to %d",
				    p->job, p->micro_batches, SKY_PLANMSG_MAX_MICRO);
	const sky_caps_shape *s = &p->shape;
	if (!s->name[0] || s->hidden < 1 || s->hidden > SKY_CAPS_MAX_DIM || s->heads < 1 ||
	    s->hidden % s->heads != 0 || s->ffn < 1 || s->ffn > SKY_CAPS_MAX_DIM || s->seq < 1 ||
	    s->seq > SKY_CAPS_MAX_DIM || s->batch < 1 || s->batch > SKY_CAPS_MAX_BATCH)
		return sky_diag_set(d, SKY_ERANGE, "plan %s: model shape out of range", p->job);
	if (p->n_stages < 1 || p->n_stages > SKY_PLANMSG_MAX_STAGES)
		return sky_diag_set(d, SKY_ERANGE, "plan %s: %d stages, allowed 1 to %d", p->job,
				    p->n_stages, SKY_PLANMSG_MAX_STAGES);
	int next = 0;
	for (int i = 0; i < p->n_stages; i++) {
		const sky_plan_stage *st = &p->stages[i];
		if (!sky_site_ok(st->site))
			return sky_diag_set(d, SKY_EINVAL, "plan %s: stage %d site is invalid",
					    p->job, i);
		if (!sky_topic_segment_ok(st->board))
			return sky_diag_set(d, SKY_EINVAL, "plan %s: stage %d board id is invalid",
					    p->job, i);
		if (st->first != next || st->last < st->first || st->last >= 2 * p->layers)
			return sky_diag_set(d, SKY_ERANGE,
					    "plan %s: stage %d covers half-layers %d-%d, expected to "
					    "start at %d and end below %d",
					    p->job, i, st->first, st->last, next, 2 * p->layers);
		if (st->in_flight < 1 || st->in_flight > p->micro_batches)
			return sky_diag_set(d, SKY_ERANGE, "plan %s: stage %d in_flight %d, allowed 1 to %d",
					    p->job, i, st->in_flight, p->micro_batches);
		if (st->arena_bytes < 0 || st->arena_bytes > SKY_CAPS_MAX_MEM_BYTES)
			return sky_diag_set(d, SKY_ERANGE, "plan %s: stage %d arena_bytes %lld", p->job,
					    i, (long long)st->arena_bytes);
		for (int j = 0; j < i; j++)
			if (strcmp(p->stages[j].board, st->board) == 0 &&
			    !(p->train.owner[0] && strcmp(st->board, p->train.owner) == 0 && j == 0 &&
			      i == p->n_stages - 1))
				return sky_diag_set(d, SKY_EINVAL,
						    "plan %s: board %s has stages %d and %d", p->job,
						    st->board, j, i);
		next = st->last + 1;
	}
	if (next != 2 * p->layers)
		return sky_diag_set(d, SKY_ERANGE, "plan %s: stages end at half-layer %d, model has %d",
				    p->job, next - 1, 2 * p->layers);
	const sky_plan_train *t = &p->train;
	if (t->steps < 0 || t->steps > SKY_PLANMSG_MAX_STEPS)
		return sky_diag_set(d, SKY_ERANGE, "plan %s: train.steps %d", p->job, t->steps);
	if (t->steps > 0) {
		if (strcmp(t->sched, "gpipe") != 0 && strcmp(t->sched, "1f1b") != 0)
			return sky_diag_set(d, SKY_EINVAL, "plan %s: train.sched '%s'", p->job, t->sched);
		if (strcmp(t->optim, "adamw") != 0 && strcmp(t->optim, "sgd") != 0)
			return sky_diag_set(d, SKY_EINVAL, "plan %s: train.optim '%s'", p->job, t->optim);
		if (!(t->lr > 0 && t->lr <= 100) || !(t->clip >= 0 && t->clip <= 1e9) ||
		    t->seed < 0 || t->seed > 0x7fffffff || t->warmup < 0 || t->warmup > t->steps ||
		    !(t->predicted_step_s >= 0 && t->predicted_step_s < 1e6) ||
		    !(t->stall_s >= 0 && t->stall_s < 1e6) || t->ckpt_every < 0 ||
		    t->ckpt_every > SKY_PLANMSG_MAX_STEPS || t->resume_step < 0 ||
		    t->resume_step > t->steps || t->generation < 0)
			return sky_diag_set(d, SKY_ERANGE, "plan %s: a train setting is out of range",
					    p->job);
		if (t->owner[0] &&
		    (!sky_topic_segment_ok(t->owner) || p->n_stages == 2 ||
		     strcmp(p->stages[0].board, t->owner) != 0 ||
		     strcmp(p->stages[p->n_stages - 1].board, t->owner) != 0 || t->ckpt_every > 0 ||
		     t->resume_step > 0 || t->owner_lag < 0 || t->owner_lag > SKY_PLANMSG_MAX_MICRO))
			return sky_diag_set(d, SKY_EINVAL,
					    "plan %s: data owner %s must hold the first and the last of "
					    "at least 3 stages, or the only one (and the plan no "
					    "checkpoints)",
					    p->job, t->owner);
		if ((t->dataset[0] && !sky_topic_segment_ok(t->dataset)) ||
		    (t->eval_dataset[0] && (!t->dataset[0] || !sky_topic_segment_ok(t->eval_dataset))))
			return sky_diag_set(d, SKY_EINVAL,
					    "plan %s: a data set name is 1-64 of [A-Za-z0-9_.-] (and "
					    "eval_dataset needs dataset)",
					    p->job);
		for (int i = 0; i < p->n_stages; i++)
			if (t->sealed && !p->stages[i].key[0])
				return sky_diag_set(d, SKY_EINVAL,
						    "plan %s: sealed frames but stage %d has no key",
						    p->job, i);
	}
	if ((rc = validate_replicas(p, d)))
		return rc;
	return validate_infer(p, d);
}

int sky_planmsg_encode(const sky_planmsg *p, char *buf, size_t cap, sky_diag *d)
{
	int rc = sky_planmsg_validate(p, d);
	if (rc)
		return rc;
	cJSON *doc = sky_json_new_object();
	if (!doc)
		return sky_diag_set(d, SKY_ENOMEM, "plan: JSON pool full");
	cJSON_AddNumberToObject(doc, "v", SKY_PLANMSG_VERSION);
	cJSON_AddStringToObject(doc, "job", p->job);
	cJSON_AddNumberToObject(doc, "epoch", (double)p->epoch);
	cJSON_AddStringToObject(doc, "algo", p->algo);
	cJSON_AddNumberToObject(doc, "micro_batches", p->micro_batches);
	cJSON *m = cJSON_AddObjectToObject(doc, "model");
	if (m) {
		cJSON_AddStringToObject(m, "name", p->shape.name);
		cJSON_AddNumberToObject(m, "hidden", p->shape.hidden);
		cJSON_AddNumberToObject(m, "heads", p->shape.heads);
		cJSON_AddNumberToObject(m, "ffn", p->shape.ffn);
		cJSON_AddNumberToObject(m, "layers", p->layers);
		cJSON_AddNumberToObject(m, "seq", p->shape.seq);
		cJSON_AddNumberToObject(m, "batch", p->shape.batch);
	}
	const sky_plan_hf *hf = &p->hf;
	cJSON *ho = hf->on ? cJSON_AddObjectToObject(doc, "hf") : NULL;
	if (ho) {
		cJSON_AddNumberToObject(ho, "vocab", hf->vocab);
		cJSON_AddNumberToObject(ho, "max_pos", hf->max_pos);
		cJSON_AddNumberToObject(ho, "type_vocab", hf->type_vocab);
		cJSON_AddNumberToObject(ho, "classes", hf->classes);
		cJSON_AddNumberToObject(ho, "act", hf->act);
		cJSON_AddNumberToObject(ho, "ln_eps", hf->ln_eps);
		cJSON_AddNumberToObject(ho, "hidden_drop", hf->hidden_drop);
		cJSON_AddNumberToObject(ho, "attn_drop", hf->attn_drop);
		cJSON_AddBoolToObject(ho, "init", hf->init != 0);
	}
	const sky_plan_train *t = &p->train;
	cJSON *tr = t->steps > 0 ? cJSON_AddObjectToObject(doc, "train") : NULL;
	if (tr) {
		cJSON_AddNumberToObject(tr, "steps", t->steps);
		cJSON_AddStringToObject(tr, "sched", t->sched);
		cJSON_AddStringToObject(tr, "optim", t->optim);
		cJSON_AddNumberToObject(tr, "lr", t->lr);
		cJSON_AddNumberToObject(tr, "seed", (double)t->seed);
		cJSON_AddNumberToObject(tr, "warmup", t->warmup);
		cJSON_AddNumberToObject(tr, "clip", t->clip);
		cJSON_AddNumberToObject(tr, "predicted_step_s", t->predicted_step_s);
		cJSON_AddNumberToObject(tr, "stall_s", t->stall_s);
		cJSON_AddBoolToObject(tr, "sealed", t->sealed != 0);
		/* only when set: a plan without faults support encodes as before */
		if (t->ckpt_every > 0)
			cJSON_AddNumberToObject(tr, "ckpt_every", t->ckpt_every);
		if (t->resume_step > 0)
			cJSON_AddNumberToObject(tr, "resume_step", t->resume_step);
		if (t->generation > 0)
			cJSON_AddNumberToObject(tr, "generation", t->generation);
		if (t->owner[0]) {
			cJSON_AddStringToObject(tr, "owner", t->owner);
			cJSON_AddNumberToObject(tr, "owner_lag", t->owner_lag);
		}
		if (t->dataset[0])
			cJSON_AddStringToObject(tr, "dataset", t->dataset);
		if (t->eval_dataset[0])
			cJSON_AddStringToObject(tr, "eval_dataset", t->eval_dataset);
		if (t->exact_sum)
			cJSON_AddBoolToObject(tr, "exact_sum", 1);
	}
	const sky_plan_infer *in = &p->infer;
	cJSON *inf = in->on ? cJSON_AddObjectToObject(doc, "infer") : NULL;
	if (inf) {
		cJSON_AddNumberToObject(inf, "batch", in->batch);
		cJSON_AddNumberToObject(inf, "wait_ms", in->wait_ms);
		cJSON_AddNumberToObject(inf, "queue", in->queue);
		cJSON *cl = cJSON_AddArrayToObject(inf, "clients");
		for (int i = 0; cl && i < in->n_clients; i++)
			cJSON_AddItemToArray(cl, cJSON_CreateString(in->clients[i]));
		cJSON_AddNumberToObject(inf, "predicted_seq_s", in->predicted_seq_s);
		cJSON_AddNumberToObject(inf, "threads", in->threads);
		cJSON_AddBoolToObject(inf, "sealed", in->sealed != 0);
		if (in->tokenizer[0])
			cJSON_AddStringToObject(inf, "tokenizer", in->tokenizer);
	}
	cJSON *arr = cJSON_AddArrayToObject(doc, "stages");
	for (int i = 0; arr && i < p->n_stages; i++) {
		cJSON *st = cJSON_CreateObject();
		if (!st)
			break;
		cJSON_AddStringToObject(st, "board", p->stages[i].board);
		cJSON_AddNumberToObject(st, "first", p->stages[i].first);
		cJSON_AddNumberToObject(st, "last", p->stages[i].last);
		cJSON_AddNumberToObject(st, "in_flight", p->stages[i].in_flight);
		cJSON_AddNumberToObject(st, "arena_bytes", (double)p->stages[i].arena_bytes);
		if (p->stages[i].key[0])
			cJSON_AddStringToObject(st, "key", p->stages[i].key);
		const sky_plan_slice *sl = &p->stages[i].slice;
		cJSON *so = sl->sha256[0] ? cJSON_AddObjectToObject(st, "slice") : NULL;
		if (so) {
			cJSON_AddStringToObject(so, "sha256", sl->sha256);
			cJSON_AddNumberToObject(so, "bytes", (double)sl->bytes);
			cJSON_AddNumberToObject(so, "chunks", sl->chunks);
			cJSON_AddNumberToObject(so, "chunk_bytes", sl->chunk_bytes);
		}
		if (p->stages[i].site[0])
			cJSON_AddStringToObject(st, "site", p->stages[i].site);
		if (p->stages[i].n_reps > 0) {
			cJSON *ra = cJSON_AddArrayToObject(st, "replicas");
			for (int r = 0; ra && r < p->stages[i].n_reps; r++) {
				const sky_plan_replica *x = &p->reps[p->stages[i].rep0 + r];
				cJSON *ro = cJSON_CreateObject();
				if (!ro)
					break;
				cJSON_AddStringToObject(ro, "board", x->board);
				cJSON_AddNumberToObject(ro, "in_flight", x->in_flight);
				cJSON_AddNumberToObject(ro, "arena_bytes", (double)x->arena_bytes);
				if (x->key[0])
					cJSON_AddStringToObject(ro, "key", x->key);
				if (x->site[0])
					cJSON_AddStringToObject(ro, "site", x->site);
				cJSON_AddItemToArray(ra, ro);
			}
			cJSON *rt = cJSON_AddArrayToObject(st, "route");
			for (int mb = 0; rt && mb < p->micro_batches; mb++)
				cJSON_AddItemToArray(
					rt, cJSON_CreateNumber(p->route[p->stages[i].route_row][mb]));
		}
		cJSON_AddItemToArray(arr, st);
	}
	rc = sky_json_print(doc, buf, cap);
	sky_json_free(doc);
	if (rc < 0)
		return sky_diag_set(d, rc, "plan %s: JSON does not fit %zu bytes", p->job, cap);
	return rc;
}

/* A stage's "replicas" and "route" (both or neither), appended to p's
 * lists in stage order. */
static int decode_replicas(const cJSON *st, sky_planmsg *p, sky_plan_stage *s, const char *what,
			   sky_diag *d)
{
	const cJSON *ra = cJSON_GetObjectItemCaseSensitive(st, "replicas");
	const cJSON *rt = cJSON_GetObjectItemCaseSensitive(st, "route"), *x;
	int rc;
	if (!ra && !rt)
		return 0;
	if (!cJSON_IsArray(ra) || !cJSON_IsArray(rt) || cJSON_GetArraySize(ra) < 1)
		return sky_diag_set(d, SKY_EFORMAT,
				    "%s: 'replicas' (a non-empty array) and 'route' (an array) go "
				    "together",
				    what);
	int nr = cJSON_GetArraySize(ra);
	if (nr > SKY_PLANMSG_MAX_REPLICAS - p->n_reps || p->n_routes >= SKY_PLANMSG_MAX_REPLICAS)
		return sky_diag_set(d, SKY_ERANGE, "%s: more than %d replicas in the plan", what,
				    SKY_PLANMSG_MAX_REPLICAS);
	if (cJSON_GetArraySize(rt) != p->micro_batches)
		return sky_diag_set(d, SKY_EFORMAT, "%s: route has %d entries, micro_batches is %d",
				    what, cJSON_GetArraySize(rt), p->micro_batches);
	s->rep0 = p->n_reps;
	s->route_row = p->n_routes;
	cJSON_ArrayForEach(x, ra)
	{
		char rwhat[64];
		sky_plan_replica *r = &p->reps[p->n_reps];
		snprintf(rwhat, sizeof rwhat, "%s.replicas[%d]", what, s->n_reps);
		if (!cJSON_IsObject(x))
			return sky_diag_set(d, SKY_EFORMAT, "%s: must be an object", rwhat);
		if ((rc = sky_json_str(x, "board", r->board, sizeof r->board, rwhat, d)) ||
		    (rc = sky_json_int(x, "in_flight", 1, SKY_PLANMSG_MAX_MICRO, &r->in_flight, rwhat,
				       d)) ||
		    (rc = sky_json_i64(x, "arena_bytes", 0, SKY_CAPS_MAX_MEM_BYTES, &r->arena_bytes,
				       rwhat, d)))
			return rc;
		if (cJSON_GetObjectItemCaseSensitive(x, "key") &&
		    (rc = sky_json_str(x, "key", r->key, sizeof r->key, rwhat, d)))
			return rc;
		if (cJSON_GetObjectItemCaseSensitive(x, "site")) {
			if ((rc = sky_json_str(x, "site", r->site, sizeof r->site, rwhat, d)))
				return rc;
			sky_site_norm(r->site);
		}
		p->n_reps++;
		s->n_reps++;
	}
	int mb = 0;
	cJSON_ArrayForEach(x, rt)
	{
		if (!cJSON_IsNumber(x) || !(x->valuedouble >= 0 && x->valuedouble <= s->n_reps) ||
		    x->valuedouble != (double)(int)x->valuedouble)
			return sky_diag_set(d, SKY_ERANGE,
					    "%s: route[%d] must be a replica number 0 to %d", what,
					    mb, s->n_reps);
		p->route[s->route_row][mb++] = (unsigned char)(int)x->valuedouble;
	}
	p->n_routes++;
	return 0;
}

int sky_planmsg_decode(const char *buf, size_t len, sky_planmsg *p, sky_diag *d)
{
	int rc;
	int64_t v;
	memset(p, 0, sizeof *p);
	if (!buf || len > SKY_PLAN_MAX_BYTES)
		return sky_diag_set(d, SKY_ERANGE, "plan: %zu bytes, limit %u (refused unparsed)", len,
				    SKY_PLAN_MAX_BYTES);
	cJSON *doc = sky_json_parse(buf, len, d);
	if (!doc)
		return SKY_EFORMAT;
	if (!cJSON_IsObject(doc)) {
		rc = sky_diag_set(d, SKY_EFORMAT, "plan: not a JSON object");
		goto exit;
	}
	if ((rc = sky_json_i64(doc, "v", SKY_PLANMSG_VERSION, SKY_PLANMSG_VERSION, &v, "plan", d)) ||
	    (rc = sky_json_str(doc, "job", p->job, sizeof p->job, "plan", d)) ||
	    (rc = sky_json_i64(doc, "epoch", 1, SKY_JSON_INT_MAX, &p->epoch, "plan", d)) ||
	    (rc = sky_json_str(doc, "algo", p->algo, sizeof p->algo, "plan", d)) ||
	    (rc = sky_json_int(doc, "micro_batches", 1, SKY_PLANMSG_MAX_MICRO, &p->micro_batches,
			       "plan", d)))
		goto exit;
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(doc, "model");
	if (!cJSON_IsObject(m)) {
		rc = sky_diag_set(d, SKY_EFORMAT, "plan %s: 'model' must be an object", p->job);
		goto exit;
	}
	if ((rc = sky_json_str(m, "name", p->shape.name, sizeof p->shape.name, "plan.model", d)) ||
	    (rc = sky_json_int(m, "hidden", 1, SKY_CAPS_MAX_DIM, &p->shape.hidden, "plan.model", d)) ||
	    (rc = sky_json_int(m, "heads", 1, SKY_CAPS_MAX_DIM, &p->shape.heads, "plan.model", d)) ||
	    (rc = sky_json_int(m, "ffn", 1, SKY_CAPS_MAX_DIM, &p->shape.ffn, "plan.model", d)) ||
	    (rc = sky_json_int(m, "layers", 1, SKY_PLANMSG_MAX_LAYERS, &p->layers, "plan.model", d)) ||
	    (rc = sky_json_int(m, "seq", 1, SKY_CAPS_MAX_DIM, &p->shape.seq, "plan.model", d)) ||
	    (rc = sky_json_int(m, "batch", 1, SKY_CAPS_MAX_BATCH, &p->shape.batch, "plan.model", d)))
		goto exit;
	const cJSON *ho = cJSON_GetObjectItemCaseSensitive(doc, "hf");
	if (ho) {
		sky_plan_hf *h = &p->hf;
		const cJSON *init = cJSON_GetObjectItemCaseSensitive(ho, "init");
		if (!cJSON_IsObject(ho)) {
			rc = sky_diag_set(d, SKY_EFORMAT, "plan %s: 'hf' must be an object", p->job);
			goto exit;
		}
		h->on = 1;
		if ((rc = sky_json_int(ho, "vocab", 1, SKY_PLAN_HF_MAX_VOCAB, &h->vocab, "plan.hf", d)) ||
		    (rc = sky_json_int(ho, "max_pos", 1, SKY_CAPS_MAX_DIM, &h->max_pos, "plan.hf", d)) ||
		    (rc = sky_json_int(ho, "type_vocab", 1, 1024, &h->type_vocab, "plan.hf", d)) ||
		    (rc = sky_json_int(ho, "classes", 1, 256, &h->classes, "plan.hf", d)) ||
		    (rc = sky_json_int(ho, "act", 0, 1, &h->act, "plan.hf", d)) ||
		    (rc = sky_json_num(ho, "ln_eps", 0, 0.999, &h->ln_eps, "plan.hf", d)) ||
		    (rc = sky_json_num(ho, "hidden_drop", 0, 0.999, &h->hidden_drop, "plan.hf", d)) ||
		    (rc = sky_json_num(ho, "attn_drop", 0, 0.999, &h->attn_drop, "plan.hf", d)))
			goto exit;
		if (!cJSON_IsBool(init)) {
			rc = sky_diag_set(d, SKY_EFORMAT, "plan %s: hf.init must be true or false",
					  p->job);
			goto exit;
		}
		h->init = cJSON_IsTrue(init);
	}
	const cJSON *tr = cJSON_GetObjectItemCaseSensitive(doc, "train");
	if (tr) {
		sky_plan_train *t = &p->train;
		const cJSON *sealed = cJSON_GetObjectItemCaseSensitive(tr, "sealed");
		if (!cJSON_IsObject(tr)) {
			rc = sky_diag_set(d, SKY_EFORMAT, "plan %s: 'train' must be an object", p->job);
			goto exit;
		}
		if ((rc = sky_json_int(tr, "steps", 1, SKY_PLANMSG_MAX_STEPS, &t->steps, "plan.train", d)) ||
		    (rc = sky_json_str(tr, "sched", t->sched, sizeof t->sched, "plan.train", d)) ||
		    (rc = sky_json_str(tr, "optim", t->optim, sizeof t->optim, "plan.train", d)) ||
		    (rc = sky_json_num(tr, "lr", 0, 100, &t->lr, "plan.train", d)) ||
		    (rc = sky_json_i64(tr, "seed", 0, 0x7fffffff, &t->seed, "plan.train", d)) ||
		    (rc = sky_json_int(tr, "warmup", 0, SKY_PLANMSG_MAX_STEPS, &t->warmup, "plan.train", d)) ||
		    (rc = sky_json_num(tr, "clip", 0, 1e9, &t->clip, "plan.train", d)) ||
		    (rc = sky_json_num(tr, "predicted_step_s", 0, 1e6, &t->predicted_step_s, "plan.train", d)) ||
		    (rc = sky_json_num(tr, "stall_s", 0, 1e6, &t->stall_s, "plan.train", d)))
			goto exit;
		if (!cJSON_IsBool(sealed)) {
			rc = sky_diag_set(d, SKY_EFORMAT, "plan %s: train.sealed must be true or false",
					  p->job);
			goto exit;
		}
		t->sealed = cJSON_IsTrue(sealed);
		const cJSON *xs = cJSON_GetObjectItemCaseSensitive(tr, "exact_sum");
		if (xs && !cJSON_IsBool(xs)) {
			rc = sky_diag_set(d, SKY_EFORMAT, "plan %s: train.exact_sum must be true or false",
					  p->job);
			goto exit;
		}
		t->exact_sum = cJSON_IsTrue(xs);
		if ((cJSON_GetObjectItemCaseSensitive(tr, "ckpt_every") &&
		     (rc = sky_json_int(tr, "ckpt_every", 0, SKY_PLANMSG_MAX_STEPS, &t->ckpt_every,
					"plan.train", d))) ||
		    (cJSON_GetObjectItemCaseSensitive(tr, "resume_step") &&
		     (rc = sky_json_int(tr, "resume_step", 0, SKY_PLANMSG_MAX_STEPS, &t->resume_step,
					"plan.train", d))) ||
		    (cJSON_GetObjectItemCaseSensitive(tr, "generation") &&
		     (rc = sky_json_int(tr, "generation", 0, 0x7fffffff, &t->generation,
					"plan.train", d))) ||
		    (cJSON_GetObjectItemCaseSensitive(tr, "owner") &&
		     ((rc = sky_json_str(tr, "owner", t->owner, sizeof t->owner, "plan.train", d)) ||
		      (rc = sky_json_int(tr, "owner_lag", 0, SKY_PLANMSG_MAX_MICRO, &t->owner_lag,
					 "plan.train", d)))) ||
		    (cJSON_GetObjectItemCaseSensitive(tr, "dataset") &&
		     (rc = sky_json_str(tr, "dataset", t->dataset, sizeof t->dataset, "plan.train",
					d))) ||
		    (cJSON_GetObjectItemCaseSensitive(tr, "eval_dataset") &&
		     (rc = sky_json_str(tr, "eval_dataset", t->eval_dataset, sizeof t->eval_dataset,
					"plan.train", d))))
			goto exit;
	}
	const cJSON *inf = cJSON_GetObjectItemCaseSensitive(doc, "infer");
	if (inf) {
		sky_plan_infer *in = &p->infer;
		const cJSON *sealed = cJSON_GetObjectItemCaseSensitive(inf, "sealed");
		const cJSON *cl = cJSON_GetObjectItemCaseSensitive(inf, "clients"), *c;
		if (!cJSON_IsObject(inf)) {
			rc = sky_diag_set(d, SKY_EFORMAT, "plan %s: 'infer' must be an object", p->job);
			goto exit;
		}
		in->on = 1;
		if ((rc = sky_json_int(inf, "batch", 1, SKY_CAPS_MAX_BATCH, &in->batch, "plan.infer", d)) ||
		    (rc = sky_json_int(inf, "wait_ms", 0, SKY_PLAN_MAX_WAIT_MS, &in->wait_ms, "plan.infer", d)) ||
		    (rc = sky_json_int(inf, "queue", 1, SKY_PLAN_MAX_QUEUE, &in->queue, "plan.infer", d)) ||
		    (rc = sky_json_num(inf, "predicted_seq_s", 0, 1e9, &in->predicted_seq_s, "plan.infer", d)) ||
		    (rc = sky_json_int(inf, "threads", 0, 64, &in->threads, "plan.infer", d)))
			goto exit;
		if (!cJSON_IsBool(sealed)) {
			rc = sky_diag_set(d, SKY_EFORMAT, "plan %s: infer.sealed must be true or false",
					  p->job);
			goto exit;
		}
		in->sealed = cJSON_IsTrue(sealed);
		if (cJSON_GetObjectItemCaseSensitive(inf, "tokenizer") &&
		    (rc = sky_json_str(inf, "tokenizer", in->tokenizer, sizeof in->tokenizer,
				       "plan.infer", d)) != 0)
			goto exit;
		if (!cJSON_IsArray(cl) || cJSON_GetArraySize(cl) > SKY_PLAN_MAX_CLIENTS) {
			rc = sky_diag_set(d, SKY_EFORMAT,
					  "plan %s: infer.clients must be an array of at most %d ids",
					  p->job, SKY_PLAN_MAX_CLIENTS);
			goto exit;
		}
		cJSON_ArrayForEach(c, cl)
		{
			if (!cJSON_IsString(c) ||
			    strlen(c->valuestring) >= sizeof in->clients[0]) {
				rc = sky_diag_set(d, SKY_EFORMAT, "plan %s: infer.clients[%d] is not an id",
						  p->job, in->n_clients);
				goto exit;
			}
			strcpy(in->clients[in->n_clients++], c->valuestring);
		}
	}
	const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "stages");
	if (!cJSON_IsArray(arr)) {
		rc = sky_diag_set(d, SKY_EFORMAT, "plan %s: 'stages' must be an array", p->job);
		goto exit;
	}
	int n = cJSON_GetArraySize(arr);
	if (n < 1 || n > SKY_PLANMSG_MAX_STAGES) {
		rc = sky_diag_set(d, SKY_ERANGE, "plan %s: %d stages, allowed 1 to %d", p->job, n,
				  SKY_PLANMSG_MAX_STAGES);
		goto exit;
	}
	const cJSON *st;
	int i = 0;
	cJSON_ArrayForEach(st, arr)
	{
		char what[40];
		sky_plan_stage *s = &p->stages[i];
		snprintf(what, sizeof what, "plan.stages[%d]", i);
		if (!cJSON_IsObject(st)) {
			rc = sky_diag_set(d, SKY_EFORMAT, "%s: must be an object", what);
			goto exit;
		}
		if ((rc = sky_json_str(st, "board", s->board, sizeof s->board, what, d)) ||
		    (rc = sky_json_int(st, "first", 0, 2 * SKY_PLANMSG_MAX_LAYERS, &s->first, what, d)) ||
		    (rc = sky_json_int(st, "last", 0, 2 * SKY_PLANMSG_MAX_LAYERS, &s->last, what, d)) ||
		    (rc = sky_json_int(st, "in_flight", 1, SKY_PLANMSG_MAX_MICRO, &s->in_flight, what, d)) ||
		    (rc = sky_json_i64(st, "arena_bytes", 0, SKY_CAPS_MAX_MEM_BYTES, &s->arena_bytes,
				       what, d)))
			goto exit;
		if (cJSON_GetObjectItemCaseSensitive(st, "key") &&
		    (rc = sky_json_str(st, "key", s->key, sizeof s->key, what, d)))
			goto exit;
		const cJSON *so = cJSON_GetObjectItemCaseSensitive(st, "slice");
		if (so) {
			if (!cJSON_IsObject(so)) {
				rc = sky_diag_set(d, SKY_EFORMAT, "%s: 'slice' must be an object", what);
				goto exit;
			}
			if ((rc = sky_json_str(so, "sha256", s->slice.sha256, sizeof s->slice.sha256,
					       what, d)) ||
			    (rc = sky_json_i64(so, "bytes", 1, SKY_CAPS_MAX_MEM_BYTES, &s->slice.bytes,
					       what, d)) ||
			    (rc = sky_json_int(so, "chunks", 1, 0x7fffffff, &s->slice.chunks, what, d)) ||
			    (rc = sky_json_int(so, "chunk_bytes", 1, 0x7fffffff, &s->slice.chunk_bytes,
					       what, d)))
				goto exit;
			if (!s->slice.sha256[0]) {
				rc = sky_diag_set(d, SKY_EFORMAT, "%s: slice.sha256 is empty", what);
				goto exit;
			}
		}
		if (cJSON_GetObjectItemCaseSensitive(st, "site")) {
			if ((rc = sky_json_str(st, "site", s->site, sizeof s->site, what, d)))
				goto exit;
			sky_site_norm(s->site);
		}
		if ((rc = decode_replicas(st, p, s, what, d)))
			goto exit;
		i++;
	}
	p->n_stages = i;
	rc = sky_planmsg_validate(p, d);
exit:
	sky_json_free(doc);
	return rc;
}

int sky_planack_encode(const sky_planack *a, char *buf, size_t cap, sky_diag *d)
{
	if (!sky_topic_segment_ok(a->board) || !sky_topic_segment_ok(a->job) ||
	    !sky_boot_id_ok(a->boot))
		return sky_diag_set(d, SKY_EINVAL, "plan-ack: bad board, job or boot id");
	cJSON *doc = sky_json_new_object();
	if (!doc)
		return sky_diag_set(d, SKY_ENOMEM, "plan-ack: JSON pool full");
	cJSON_AddNumberToObject(doc, "v", 1);
	cJSON_AddStringToObject(doc, "board", a->board);
	cJSON_AddStringToObject(doc, "job", a->job);
	cJSON_AddNumberToObject(doc, "epoch", (double)a->epoch);
	cJSON_AddNumberToObject(doc, "session", (double)a->session);
	if (a->boot[0])
		cJSON_AddStringToObject(doc, "boot", a->boot);
	cJSON_AddNumberToObject(doc, "stage", a->stage);
	cJSON_AddBoolToObject(doc, "ok", a->ok != 0);
	cJSON_AddNumberToObject(doc, "arena_bytes", (double)a->arena_bytes);
	cJSON_AddNumberToObject(doc, "expected_bytes", (double)a->expected_bytes);
	cJSON_AddNumberToObject(doc, "budget_bytes", (double)a->budget_bytes);
	cJSON_AddStringToObject(doc, "reason", a->reason);
	int rc = sky_json_print(doc, buf, cap);
	sky_json_free(doc);
	return rc < 0 ? sky_diag_set(d, rc, "plan-ack: does not fit %zu bytes", cap) : rc;
}

int sky_planack_decode(const char *buf, size_t len, sky_planack *a, sky_diag *d)
{
	int rc;
	int64_t v;
	memset(a, 0, sizeof *a);
	if (!buf || len > SKY_PLAN_ACK_MAX_BYTES)
		return sky_diag_set(d, SKY_ERANGE, "plan-ack: %zu bytes, limit %u", len,
				    SKY_PLAN_ACK_MAX_BYTES);
	cJSON *doc = sky_json_parse(buf, len, d);
	if (!doc)
		return SKY_EFORMAT;
	const cJSON *ok = cJSON_GetObjectItemCaseSensitive(doc, "ok");
	if ((rc = sky_json_i64(doc, "v", 1, 1, &v, "plan-ack", d)) ||
	    (rc = sky_json_str(doc, "board", a->board, sizeof a->board, "plan-ack", d)) ||
	    (rc = sky_json_str(doc, "job", a->job, sizeof a->job, "plan-ack", d)) ||
	    (rc = sky_json_i64(doc, "epoch", 1, SKY_JSON_INT_MAX, &a->epoch, "plan-ack", d)) ||
	    (rc = sky_json_i64(doc, "session", 0, SKY_JSON_INT_MAX, &a->session, "plan-ack", d)) ||
	    (rc = sky_json_i64(doc, "stage", 0, SKY_PLANMSG_MAX_STAGES, &v, "plan-ack", d)) ||
	    (rc = sky_json_i64(doc, "arena_bytes", 0, SKY_CAPS_MAX_MEM_BYTES, &a->arena_bytes,
			       "plan-ack", d)) ||
	    (rc = sky_json_i64(doc, "expected_bytes", 0, SKY_CAPS_MAX_MEM_BYTES, &a->expected_bytes,
			       "plan-ack", d)) ||
	    (rc = sky_json_i64(doc, "budget_bytes", 0, SKY_CAPS_MAX_MEM_BYTES, &a->budget_bytes,
			       "plan-ack", d)) ||
	    (rc = sky_json_str(doc, "reason", a->reason, sizeof a->reason, "plan-ack", d)))
		goto exit;
	a->stage = (int)v;
	if (!cJSON_IsBool(ok)) {
		rc = sky_diag_set(d, SKY_EFORMAT, "plan-ack: 'ok' must be true or false");
		goto exit;
	}
	a->ok = cJSON_IsTrue(ok);
	if (cJSON_GetObjectItemCaseSensitive(doc, "boot") &&
	    ((rc = sky_json_str(doc, "boot", a->boot, sizeof a->boot, "plan-ack", d)) != 0 ||
	     !sky_boot_id_ok(a->boot))) {
		rc = rc ? rc : sky_diag_set(d, SKY_EFORMAT, "plan-ack: boot must be lowercase hex");
		goto exit;
	}
	if (!sky_topic_segment_ok(a->board) || !sky_topic_segment_ok(a->job))
		rc = sky_diag_set(d, SKY_EINVAL, "plan-ack: bad board or job id");
exit:
	sky_json_free(doc);
	return rc;
}
