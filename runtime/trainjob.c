/* A board's training job (see sky_trainjob.h): plan -> stage + transport
 * in one sealed arena -> start barrier -> steps with metrics -> part. */
#include "sky_trainjob.h"

#include "sky_clock.h"
#include "sky_file.h"
#include "sky_log.h"
#include "sky_partchunk.h"
#include "sky_json.h"
#include "sky_safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sky_trainjob_model(const sky_planmsg *p, sky_model_cfg *c)
{
	if (p->hf.on) {
		/* a config.json's model: every number from the plan */
		memset(c, 0, sizeof *c);
		snprintf(c->name, sizeof c->name, "%s", p->shape.name);
		c->vocab = p->hf.vocab;
		c->max_pos = p->hf.max_pos;
		c->type_vocab = p->hf.type_vocab;
		c->classes = p->hf.classes;
		c->act = p->hf.act;
		c->ln_eps = (float)p->hf.ln_eps;
		c->hidden_drop = (float)p->hf.hidden_drop;
		c->attn_drop = (float)p->hf.attn_drop;
	} else if (sky_model_preset(p->shape.name, c) != 0) {
		return SKY_ENOTFOUND;
	}
	c->hidden = p->shape.hidden;
	c->heads = p->shape.heads;
	c->ffn = p->shape.ffn;
	c->layers = p->layers;
	c->seq = p->shape.seq;
	c->batch = p->shape.batch;
	if (c->seq > c->max_pos)
		c->max_pos = c->seq;
	return sky_model_validate(c) == 0 ? 0 : SKY_EINVAL;
}

/* The stage and transport configurations of plan p for stage k. */
static int configs(const sky_planmsg *p, int k, sky_stage_cfg *sc, sky_transport_cfg *tc,
		   int *first, int *last, const char **site, const char **boards, sky_diag *d)
{
	const sky_plan_train *t = &p->train;
	memset(sc, 0, sizeof *sc);
	memset(tc, 0, sizeof *tc);
	if (k < 0 || k >= p->n_stages)
		return sky_diag_set(d, SKY_EINVAL, "plan %s: no stage %d", p->job, k);
	int rc = sky_trainjob_model(p, &sc->model);
	if (rc)
		return sky_diag_set(d, rc, "plan %s: model %s is not known to this build", p->job,
				    p->shape.name);
	sc->stage = k;
	sc->n_stages = p->n_stages;
	sc->first = p->stages[k].first;
	sc->last = p->stages[k].last;
	sc->micro = p->micro_batches;
	sc->in_flight = p->stages[k].in_flight;
	sc->data_owner = p->train.owner[0] != 0;
	sky_optim_kind kind = SKY_OPTIM_ADAMW;
	if (t->steps > 0) {
		sky_schedule_parse(t->sched, &sc->sched);
		sky_optim_parse(t->optim, &kind);
	} else {
		/* a plan without training: the planner's in_flight says which */
		sc->sched = sc->in_flight >= sc->micro ? SKY_SCHEDULE_GPIPE : SKY_SCHEDULE_1F1B;
	}
	sky_optim_default(&sc->optim, kind);
	if (t->steps > 0) {
		sc->optim.lr = (float)t->lr; /* as `sky train` turns --lr into a float */
		sc->clip_norm = (float)t->clip;
		sc->seed = (uint64_t)t->seed;
	}
	for (int i = 0; i < p->n_stages; i++) {
		first[i] = p->stages[i].first;
		last[i] = p->stages[i].last;
		site[i] = p->stages[i].site;
		boards[i] = p->stages[i].board;
	}
	tc->job = p->job;
	tc->epoch = p->epoch;
	tc->stage = k;
	tc->n_stages = p->n_stages;
	tc->micro = p->micro_batches;
	tc->batch = sc->model.batch;
	tc->seq = sc->model.seq;
	tc->hidden = sc->model.hidden;
	tc->fwd_slots = k > 0 ? p->stages[k - 1].in_flight : 1;
	tc->bwd_slots = p->stages[k].in_flight;
	tc->first = first;
	tc->last = last;
	tc->site = site;
	tc->boards = boards;
	/* generous: a loaded machine may run a step many times slower than
	 * the planner predicted */
	tc->stall_s = t->stall_s > 0 ? t->stall_s : 10.0 * t->predicted_step_s + 30.0;
	tc->fwd_extra = sc->data_owner; /* the attention mask rides with the activation */
	return 0;
}

int sky_trainjob_owner_last(const sky_planmsg *p, int stage)
{
	int last = p->n_stages - 1;
	if (!p->train.owner[0] || stage != 0 || last < 2 ||
	    strcmp(p->stages[0].board, p->train.owner) != 0 ||
	    strcmp(p->stages[last].board, p->stages[0].board) != 0)
		return -1;
	return last;
}

static int carve_all(sky_trainjob *j, const sky_planmsg *p, int k, const unsigned char *key,
		     const sky_transport_net *net, sky_arena *a, const char *board, sky_diag *d)
{
	sky_stage_cfg sc;
	sky_transport_cfg tc;
	j->stage2 = -1;
	int rc = configs(p, k, &sc, &tc, j->first, j->last, j->site, j->boards, d);
	if (rc)
		return rc;
	tc.board = board;
	tc.key = key;
	/* a plan that asks for it sums in fixed point without replicas too */
	sc.fx_sum = p->train.exact_sum != 0;
	if (p->n_reps > 0) {
		/* stage replicas: every stage sums in fixed point (so the job is
		 * `sky train --exact-sum`); a replicated stage runs its route */
		int r = 0;
		if (sky_planmsg_find_replica(p, board, &r) != k)
			return sky_diag_set(d, SKY_EINVAL, "plan %s: board %s is no replica of stage %d",
					    p->job, board, k);
		const sky_plan_stage *ps = &p->stages[k];
		sc.fx_sum = 1;
		if (ps->n_reps > 0) {
			sc.route = p->route[ps->route_row];
			sc.replica = r;
			if (r > 0)
				sc.in_flight = p->reps[ps->rep0 + r - 1].in_flight;
			tc.bwd_slots = sc.in_flight;
		}
		/* frames for this replica may come from any replica of stage k-1 */
		if (k > 0) {
			int n = 0;
			for (int i = 0; i < sky_planmsg_n_replicas(p, k - 1); i++)
				n += i == 0 ? p->stages[k - 1].in_flight
					    : p->reps[p->stages[k - 1].rep0 + i - 1].in_flight;
			tc.fwd_slots = n < p->micro_batches ? n : p->micro_batches;
		}
		tc.plan = p;
		tc.replica = r;
		j->replica = r;
		/* a test hook (sky_transport.h): one frame sent again for a
		 * micro-batch routed through a sibling replica */
		const char *w = getenv("SKY_TEST_WRONG_REPLICA");
		tc.test_wrong_replica = w && *w && strcmp(w, "0") != 0;
	}
	if ((rc = sky_stage_carve(&j->st, &sc, a, d)) != 0)
		return rc;
	tc.reduce_n = j->st.n_params;
	j->stage2 = sky_trainjob_owner_last(p, k);
	if (j->stage2 >= 0) {
		/* the data owner's last stage, beside its first, and its op order */
		sky_stage_cfg sc2;
		sky_transport_cfg tc2;
		if ((rc = configs(p, j->stage2, &sc2, &tc2, j->first, j->last, j->site, j->boards, d)) != 0)
			return rc;
		tc2.board = board;
		tc2.key = key;
		if ((rc = sky_stage_carve(&j->st2, &sc2, a, d)) != 0 ||
		    (rc = sky_transport_carve(&j->tr2, &tc2, net, a, d)) != 0)
			return rc;
		int n4 = 4 * p->micro_batches;
		j->owner_ops = sky_arena_alloc(a, (size_t)n4 * sizeof *j->owner_ops, SKY_LIFE_PERSIST);
		if (j->owner_ops)
			j->n_owner_ops = sky_schedule_owner_ops(sc.sched, p->n_stages, p->micro_batches,
								 p->train.owner_lag, j->owner_ops, n4);
		if ((rc = sky_arena_status(a)) != 0)
			return sky_diag_set(d, rc, "owner: arena: %s", sky_strerror(rc));
		if (j->owner_ops && j->n_owner_ops != n4)
			return sky_diag_set(d, SKY_EINVAL, "owner: no op order for %d stages",
					    p->n_stages);
	}
	if (p->train.ckpt_every > 0 || p->train.resume_step > 0) {
		int nvec = sky_optim_state_vectors(sc.optim.kind);
		j->ckpt_nt = j->st.n_blk * (1 + nvec);
		j->ckpt_cap = sky_ckpt_bound(j->ckpt_nt, (size_t)(1 + nvec) * j->st.n_params);
		j->ckpt_buf = sky_arena_alloc(a, j->ckpt_cap, SKY_LIFE_PERSIST);
		j->ckpt_t = sky_arena_alloc(a, (size_t)j->ckpt_nt * sizeof *j->ckpt_t,
					    SKY_LIFE_PERSIST);
	}
	return sky_transport_carve(&j->tr, &tc, net, a, d);
}

int64_t sky_trainjob_bytes(const sky_planmsg *p, int stage, sky_diag *d)
{
	return sky_trainjob_bytes_as(p, stage, NULL, d);
}

int64_t sky_trainjob_bytes_as(const sky_planmsg *p, int stage, const char *board, sky_diag *d)
{
	static sky_trainjob j; /* big (two stage tables); measuring only */
	static const unsigned char dummy[SKY_FRAME_KEY_BYTES];
	sky_arena a;
	sky_arena_init(&a, NULL, 0);
	if (!board) /* the stage's own board (a plan with replicas checks who) */
		board = stage >= 0 && stage < p->n_stages ? p->stages[stage].board : "measure";
	int rc = carve_all(&j, p, stage, p->train.sealed ? dummy : NULL, NULL, &a, board, d);
	if (rc)
		return rc;
	return (int64_t)sky_arena_required(&a);
}

int sky_trainjob_setup(sky_trainjob *j, const sky_planmsg *p, int stage, const char *board,
		       const unsigned char *key, const sky_transport_net *net, sky_diag *d)
{
	memset(j, 0, sizeof *j);
	j->stage2 = -1;
	if (p->train.sealed && !key)
		return sky_diag_set(d, SKY_EINVAL, "plan %s: sealed frames but no key", p->job);
	int64_t need = sky_trainjob_bytes_as(p, stage, board, d);
	if (need < 0)
		return (int)need;
	if (key) {
		memcpy(j->key, key, sizeof j->key);
		j->sealed = 1;
	}
	/* measured; allocate once, carve, seal */
	j->mem = malloc((size_t)need);
	if (!j->mem)
		return sky_diag_set(d, SKY_ENOMEM, "cannot allocate the %lld-byte arena",
				    (long long)need);
	j->bytes = (size_t)need;
	sky_arena a;
	sky_arena_init(&a, j->mem, j->bytes);
	int rc = carve_all(j, p, stage, j->sealed ? j->key : NULL, net, &a, board, d);
	if (!rc && (rc = sky_arena_seal(&a)) != 0)
		sky_diag_set(d, rc, "arena: %s", sky_strerror(rc));
	if (rc) {
		sky_trainjob_free(j);
		return rc;
	}
	j->plan = p;
	j->stage = stage;
	j->weights_pending = p->hf.on && p->hf.init;
	sky_stage_init(&j->st);
	if (j->stage2 >= 0)
		sky_stage_init(&j->st2);
	if (p->train.owner[0])
		SKY_INFO("job %s: data owner %s; %s", p->job, p->train.owner,
			 j->stage2 >= 0  ? "this board makes the data and holds stages 0 and the last"
			 : j->st.has_data ? "this board makes the data and holds the only stage"
					  : "this stage holds no data (no tokens or labels): masks "
					    "come with the activations");
	return 0;
}

int sky_trainjob_data(sky_trainjob *j, const char *path, sky_diag *d)
{
	const sky_planmsg *p = j->plan;
	const sky_model_cfg *m = &j->st.cfg.model;
	sky_ds_init(&j->ds);
	int rc = sky_ds_open(&j->ds, path, d);
	if (rc)
		return rc;
	j->has_ds = 1;
	if (j->ds.meta.seq != m->seq)
		return sky_diag_set(d, SKY_EINVAL,
				    "data set '%s' has rows of %d tokens, the plan's model %d",
				    p->train.dataset, j->ds.meta.seq, m->seq);
	if (j->ds.meta.nlabels > m->classes)
		return sky_diag_set(d, SKY_EINVAL, "data set '%s' has %d labels, the model %d classes",
				    p->train.dataset, j->ds.meta.nlabels, m->classes);
	/* the order's one buffer, made with the plan (a step allocates nothing) */
	j->perm = malloc((size_t)(j->ds.meta.rows > 0 ? j->ds.meta.rows : 1) * sizeof *j->perm);
	if (!j->perm)
		return sky_diag_set(d, SKY_ENOMEM, "data set '%s': no memory for its order",
				    p->train.dataset);
	if (sky_trainorder_init(&j->ord, j->ds.meta.rows, (uint64_t)p->train.seed, m->batch,
				p->micro_batches, j->perm) != 0)
		return sky_diag_set(d, SKY_EINVAL,
				    "data set '%s' has %lld rows, fewer than one step's %d x %d",
				    p->train.dataset, (long long)j->ds.meta.rows, m->batch,
				    p->micro_batches);
	if (j->st.has_data) {
		j->st.cfg.data = &j->ds;
		j->st.cfg.order = &j->ord;
	}
	if (j->stage2 >= 0 && j->st2.has_data) {
		j->st2.cfg.data = &j->ds;
		j->st2.cfg.order = &j->ord; /* both read the same step's rows */
	}
	return 0;
}

/* Copies every tensor of stage st from the slice f. */
static int init_stage(sky_stage *st, const sky_st_file *f, const char *path, sky_diag *d)
{
	enum { NAME_CAP = 96 };
	int cap = sky_stage_max_entries(&st->cfg.model, &st->cfg), rc = 0;
	sky_st_entry *e = calloc((size_t)cap, sizeof *e);
	char *names = calloc((size_t)cap, NAME_CAP);
	if (!e || !names) {
		rc = sky_diag_set(d, SKY_ENOMEM, "slice: out of memory");
		goto exit;
	}
	int n = sky_stage_entries(st, e, cap, names, NAME_CAP, d);
	if (n < 0) {
		rc = n;
		goto exit;
	}
	for (int i = 0; i < n && !rc; i++) {
		const sky_st_tensor *t = sky_st_find(f, e[i].name);
		uint64_t count = 1;
		for (int k = 0; k < e[i].ndim; k++)
			count *= (uint64_t)e[i].shape[k];
		if (!t)
			rc = sky_diag_set(d, SKY_EFORMAT, "%s: no tensor %s", path, e[i].name);
		else if (t->dtype != SKY_ST_F32 || t->count != count || t->ndim != e[i].ndim ||
			 memcmp(t->shape, e[i].shape, (size_t)t->ndim * sizeof t->shape[0]) != 0)
			rc = sky_diag_set(d, SKY_EFORMAT,
					  "%s: tensor %s is %s of %llu elements, the stage's F32 of "
					  "%llu",
					  path, e[i].name, sky_st_dtype_name(t->dtype),
					  (unsigned long long)t->count, (unsigned long long)count);
		else /* the entry points into the stage's parameters */
			memcpy((void *)e[i].data, t->data, t->nbytes);
	}
exit:
	free(e);
	free(names);
	return rc;
}

int sky_trainjob_init_from(sky_trainjob *j, const char *path, sky_diag *d)
{
	sky_st_file f;
	sky_st_init(&f);
	int rc = sky_st_open(&f, path, d);
	if (!rc)
		rc = init_stage(&j->st, &f, path, d);
	if (!rc && j->stage2 >= 0)
		rc = init_stage(&j->st2, &f, path, d);
	sky_st_close(&f);
	if (!rc) {
		j->weights_pending = 0;
		SKY_INFO("job %s: stage %d starts from the checkpoint's slice %s", j->plan->job,
			 j->stage, path);
	}
	return rc;
}

void sky_trainjob_free(sky_trainjob *j)
{
	if (!j)
		return;
	if (j->has_ds)
		sky_ds_close(&j->ds);
	j->has_ds = 0;
	free(j->perm);
	j->perm = NULL;
	sky_transport_free(&j->tr);
	sky_transport_free(&j->tr2);
	free(j->mem);
	j->mem = NULL;
	memset(j->key, 0, sizeof j->key);
}

/* ---- running ------------------------------------------------------------------ */

/* snprintf into the metrics buffer, tracking the length; stops at the cap */
#define PUT(...) \
	do { \
		if (n < cap) { \
			int w_ = snprintf(b + n, cap - n, __VA_ARGS__); \
			n = w_ < 0 ? cap : n + (size_t)w_; \
		} \
	} while (0)

static void publish_metrics(sky_trainjob *j, int stage, sky_transport *t, const sky_stage *st,
			    double step_s, float loss)
{
	char *b = j->metrics;
	const size_t cap = sizeof j->metrics - 64; /* room to close the arrays */
	size_t n = 0;
	PUT("{\"v\":1,\"job\":\"%s\",\"epoch\":%lld,\"stage\":%d,\"board\":\"%s\",\"step\":%ld,"
	    "\"steps\":%d",
	    j->plan->job, (long long)j->plan->epoch, stage, t->board, j->steps_done,
	    j->plan->train.steps);
	if (st->has_head)
		PUT(",\"loss\":%.9g", (double)loss);
	PUT(",\"step_s\":%.6f,\"busy\":%.4f,\"wait_s\":%.6f,\"send_s\":%.6f,\"predicted_step_s\":%g,"
	    "\"frames_in\":%ld,\"frames_out\":%ld,\"bytes_out\":%.0f,\"drops\":{",
	    step_s, step_s > 0 ? t->busy_s / step_s : 0.0, t->wait_s, t->send_s,
	    j->plan->train.predicted_step_s, t->frames_in, t->frames_out, t->bytes_out);
	int first = 1;
	for (int i = 0; i < SKY_TDROP_N; i++)
		if (t->drops[i]) {
			PUT("%s\"%s\":%ld", first ? "" : ",", sky_transport_drop_name(i), t->drops[i]);
			first = 0;
		}
	PUT("},\"ops\":[");
	for (int i = 0; i < t->n_ev; i++)
		PUT("%s[\"%c\",%d,%.3f,%.3f]", i ? "," : "", t->ev[i].kind, t->ev[i].mb,
		    (double)t->ev[i].t0_ms, (double)t->ev[i].t1_ms);
	if (n >= cap) /* too many ops for one message: drop them, keep the figures */
		n = (size_t)(strstr(b, ",\"ops\":[") - b) + 8;
	n += (size_t)snprintf(b + n, sizeof j->metrics - n, "]}");
	t->net.publish(t->net.ctx, t->topic_metrics, b, n, 0, 0);
}

/* A part over the message limit: its chunks, chunk i retained on
 * sky/v1/job/<job>/part/<board>/<i> (sky_partchunk.h). */
static int publish_part_chunks(sky_trainjob *j, const unsigned char *img, size_t len,
			       sky_diag *d)
{
	const sky_planmsg *p = j->plan;
	if (len > SKY_PART_MAX_BYTES)
		return sky_diag_set(d, SKY_ERANGE, "part: %zu bytes, more than the %llu a part may have",
				    len, SKY_PART_MAX_BYTES);
	unsigned char sha[32];
	sky_sha256(img, len, sha);
	uint32_t n = sky_chunk_count(len, SKY_PART_CHUNK_BYTES);
	unsigned char *msg = malloc(SKY_CHUNK_HEADER_BYTES + SKY_PART_CHUNK_BYTES);
	if (!msg)
		return sky_diag_set(d, SKY_ENOMEM, "part: out of memory for a chunk");
	int rc = 0;
	for (uint32_t i = 0; i < n && !rc; i++) {
		char topic[SKY_TOPIC_BUF], idx[16];
		snprintf(idx, sizeof idx, "%u", i);
		int m = sky_chunk_encode(SKY_CHUNK_PART, img, len, sha, SKY_PART_CHUNK_BYTES, i, msg,
					 SKY_CHUNK_HEADER_BYTES + SKY_PART_CHUNK_BYTES);
		if (m < 0)
			rc = sky_diag_set(d, m, "part: cannot cut chunk %u", i);
		else if (sky_topic_job_pair(topic, sizeof topic, p->job, SKY_TOPIC_PART, j->tr.board,
					    idx) != 0)
			rc = sky_diag_set(d, SKY_EINVAL, "part: no topic for chunk %u", i);
		else if ((rc = j->tr.net.publish(j->tr.net.ctx, topic, msg, (size_t)m, 1, 1)) != 0)
			sky_diag_set(d, rc, "part: cannot publish on %s", topic);
	}
	free(msg);
	if (!rc)
		SKY_INFO("job %s: part of %zu bytes is over the %u-byte message limit: sent in %u "
			 "chunks",
			 p->job, len, SKY_FRAME_MAX_PAYLOAD_DEFAULT, n);
	return rc;
}

/* The part: this stage's tensors as a safetensors image, retained on
 * sky/v1/job/<job>/part/<board> (the collector reads it with the planner
 * identity; the ACL lets only that board write there)
 * and written to <state>/parts/. Uses the heap: the job is over. */
static int publish_part(sky_trainjob *j, const char *state_dir, size_t *bytes, sky_diag *d)
{
	const sky_planmsg *p = j->plan;
	int cap1 = sky_stage_max_entries(&j->st.cfg.model, &j->st.cfg), rc;
	int cap = cap1 + (j->stage2 >= 0 ? sky_stage_max_entries(&j->st2.cfg.model, &j->st2.cfg) : 0);
	enum { NAME_CAP = 96 };
	sky_st_entry *e = calloc((size_t)cap, sizeof *e);
	char *names = calloc((size_t)cap, NAME_CAP), epoch[32], stage[16], path[1024];
	void *img = NULL;
	size_t size = 0, len = 0;
	if (!e || !names) {
		rc = sky_diag_set(d, SKY_ENOMEM, "part: out of memory");
		goto exit;
	}
	int n = sky_stage_entries(&j->st, e, cap, names, NAME_CAP, d);
	if (n < 0) {
		rc = n;
		goto exit;
	}
	if (j->stage2 >= 0) {
		/* a data owner's part holds both of its stages */
		int n2 = sky_stage_entries(&j->st2, e + n, cap - n, names + (size_t)n * NAME_CAP,
					   NAME_CAP, d);
		if (n2 < 0) {
			rc = n2;
			goto exit;
		}
		n += n2;
	}
	snprintf(epoch, sizeof epoch, "%lld", (long long)p->epoch);
	snprintf(stage, sizeof stage, "%d", j->stage);
	/* the stage that read a data set names its labels (the set's label
	 * names, metadata the capability report leaves out; never a row), so
	 * `sky job collect --out-dir` can write the model's id2label */
	static char labels[SKY_DS_MAX_LABELS * (SKY_DS_LABEL_CAP + 4) + 4];
	labels[0] = '\0';
	if (j->has_ds && j->st.has_data) {
		size_t ln = 0;
		char esc[2 * SKY_DS_LABEL_CAP + 8];
		for (int i = 0; i < j->ds.meta.nlabels; i++) {
			if (sky_json_escape(j->ds.meta.label[i], esc, sizeof esc) < 0)
				break;
			ln += (size_t)snprintf(labels + ln, sizeof labels - ln, "%s\"%s\"", i ? "," : "[",
					       esc);
			if (ln >= sizeof labels - 2)
				break;
		}
		if (ln > 0 && ln < sizeof labels - 2)
			snprintf(labels + ln, sizeof labels - ln, "]");
		else
			labels[0] = '\0';
	}
	const sky_st_meta meta[] = {{"format", "pt"}, {"sky_model", p->shape.name},
				    {"sky_job", p->job}, {"sky_epoch", epoch}, {"sky_stage", stage},
				    {"sky_labels", labels}};
	const int nmeta = labels[0] ? 6 : 5;
	if ((rc = sky_st_encoded_size(e, n, meta, nmeta, &size, d)) != 0)
		goto exit;
	if (!(img = malloc(size))) {
		rc = sky_diag_set(d, SKY_ENOMEM, "part: %zu bytes", size);
		goto exit;
	}
	if ((rc = sky_st_encode(e, n, meta, nmeta, img, size, &len, d)) != 0)
		goto exit;
	char topic[SKY_TOPIC_BUF];
	sky_topic_job_to(topic, sizeof topic, p->job, SKY_TOPIC_PART, j->tr.board);
	if (len > SKY_FRAME_MAX_PAYLOAD_DEFAULT) {
		if ((rc = publish_part_chunks(j, img, len, d)) != 0)
			goto exit;
	} else if ((rc = j->tr.net.publish(j->tr.net.ctx, topic, img, len, 1, 1)) != 0) {
		sky_diag_set(d, rc, "part: cannot publish on %s", topic);
		goto exit;
	}
	if (state_dir) {
		snprintf(path, sizeof path, "%s/parts", state_dir);
		sky_file_mkdirs(path, 0700);
		snprintf(path, sizeof path, "%s/parts/%s-e%lld-stage%d.safetensors", state_dir, p->job,
			 (long long)p->epoch, j->stage);
		if (sky_file_write(path, img, len, 0644) != 0)
			SKY_WARN("job %s: cannot write %s", p->job, path);
	}
	*bytes = len;
exit:
	free(e);
	free(names);
	free(img);
	return rc;
}

/* The stage's blocks as checkpoint tensors (parameters, then each state
 * vector), in j->ckpt_t. Returns the count. */
static int ckpt_tensors(sky_trainjob *j, int nvec)
{
	const sky_stage *st = &j->st;
	int n = 0;
	for (int v = -1; v < nvec; v++)
		for (int i = 0; i < st->n_blk; i++) {
			const float *base = v < 0 ? st->params : st->opt_state + (size_t)v * st->n_params;
			j->ckpt_t[n++] = (sky_ckpt_tensor){v, st->blk0 + i, base + st->blk_off[i],
							   st->blk_len[i]};
		}
	return n;
}

/* The checkpoint after a step: the stage's blocks, optimizer state and
 * step, on sky/v1/job/<job>/ckpt/<board> (QoS 1: the planner must get
 * it). Encoded into the arena's buffer; allocates nothing. */
static int publish_ckpt(sky_trainjob *j, sky_diag *d)
{
	const sky_planmsg *p = j->plan;
	sky_ckpt_meta m;
	memset(&m, 0, sizeof m);
	snprintf(m.job, sizeof m.job, "%s", p->job);
	m.epoch = p->epoch;
	m.step = j->st.step;
	m.blk0 = j->st.blk0;
	m.nblk = j->st.n_blk;
	m.nvec = sky_optim_state_vectors(j->st.cfg.optim.kind);
	int nt = ckpt_tensors(j, m.nvec);
	size_t len = 0;
	char topic[SKY_TOPIC_BUF];
	int rc = sky_ckpt_encode(&m, j->ckpt_t, nt, j->ckpt_buf, j->ckpt_cap, &len, d);
	if (rc)
		return rc;
	if ((rc = sky_topic_job_to(topic, sizeof topic, p->job, SKY_TOPIC_CKPT, j->tr.board)) ||
	    (rc = j->tr.net.publish(j->tr.net.ctx, topic, j->ckpt_buf, len, 1, 0)))
		return sky_diag_set(d, rc, "job %s: checkpoint of step %lld not published", p->job,
				    (long long)m.step);
	j->ckpts_sent++;
	SKY_DEBUG("job %s: checkpoint of step %lld sent (%zu bytes, sha256 %.12s)", p->job,
		  (long long)m.step, len, m.sha);
	return 0;
}

int sky_trainjob_load(sky_trainjob *j, const unsigned char *img, size_t len, sky_diag *d)
{
	const sky_planmsg *p = j->plan;
	sky_stage *st = &j->st;
	sky_ckpt_meta m;
	int nt = 0, nvec = sky_optim_state_vectors(st->cfg.optim.kind);
	if (!j->ckpt_t)
		return sky_diag_set(d, SKY_EINVAL, "job %s: this plan has no checkpoints", p->job);
	int rc = sky_ckpt_parse(img, len, &m, j->ckpt_t, j->ckpt_nt, &nt, d);
	if (rc)
		return rc;
	if (strcmp(m.job, p->job) || m.epoch != p->epoch || m.step != p->train.resume_step ||
	    m.blk0 != st->blk0 || m.nblk != st->n_blk || m.nvec != nvec || nt != j->ckpt_nt)
		return sky_diag_set(d, SKY_EINVAL,
				    "checkpoint of job %s epoch %lld step %lld blocks %d+%d (%d "
				    "tensors) is not this stage's (job %s epoch %lld step %d blocks "
				    "%d+%d)",
				    m.job, (long long)m.epoch, (long long)m.step, m.blk0, m.nblk, nt,
				    p->job, (long long)p->epoch, p->train.resume_step, st->blk0,
				    st->n_blk);
	/* every (vector, block) once with the right length, then copy */
	for (int v = -1; v < nvec; v++)
		for (int i = 0; i < st->n_blk; i++) {
			int hit = 0;
			for (int k = 0; k < nt; k++)
				hit += j->ckpt_t[k].vec == v && j->ckpt_t[k].blk == st->blk0 + i &&
				       j->ckpt_t[k].n == st->blk_len[i];
			if (hit != 1)
				return sky_diag_set(d, SKY_EINVAL,
						    "checkpoint: block %d vector %d is missing or "
						    "has the wrong length",
						    st->blk0 + i, v);
		}
	for (int k = 0; k < nt; k++) {
		const sky_ckpt_tensor *t = &j->ckpt_t[k];
		int i = t->blk - st->blk0;
		float *base = t->vec < 0 ? st->params : st->opt_state + (size_t)t->vec * st->n_params;
		memcpy(base + st->blk_off[i], t->data, t->n * sizeof(float));
	}
	memset(st->grads, 0, st->n_params * sizeof *st->grads);
	st->step = m.step;
	j->steps_done = m.step;
	return 0;
}

int sky_trainjob_on_msg(sky_trainjob *j, const char *topic, const unsigned char *p, size_t len)
{
	int took = sky_transport_on_msg(&j->tr, topic, p, len);
	if (j->stage2 >= 0)
		took |= sky_transport_on_msg(&j->tr2, topic, p, len);
	return took;
}

/* One step of a data owner: both of its stages' ops in the owner order,
 * then both norms posted before either waits (each waits for the other's,
 * through the broker), then both optimizer steps. */
static int owner_step(sky_trainjob *j, const sky_stage_io *io0, const sky_stage_io *io1, float lr,
		      float *loss)
{
	sky_stage *a = &j->st, *b = &j->st2;
	sky_transport *ta = &j->tr, *tb = &j->tr2;
	int rc = 0;
	sky_stage_step_begin(a);
	sky_stage_step_begin(b);
	for (int i = 0; i < j->n_owner_ops && !rc; i++) {
		sky_schedule_op op = j->owner_ops[i];
		/* skyd --speed: an op's CPU time counts from here, whichever
		 * stage ran last */
		ta->cpu_mark = tb->cpu_mark = sky_clock_thread_cpu_s();
		rc = op.last ? sky_stage_run_op(b, io1, op) : sky_stage_run_op(a, io0, op);
	}
	if (rc)
		return rc;
	sky_stage_step_sums(a);
	sky_stage_step_sums(b);
	if (a->cfg.clip_norm > 0) {
		const int n_all = 2 * a->cfg.model.layers + 2;
		if ((rc = sky_transport_norm_post(ta, a->step, a->norm_mine, a->blk0, a->n_blk)) ||
		    (rc = sky_transport_norm_post(tb, b->step, b->norm_mine, b->blk0, b->n_blk)) ||
		    (rc = sky_transport_norm_wait(ta, a->step, a->norm_all, n_all)) ||
		    (rc = sky_transport_norm_wait(tb, b->step, b->norm_all, n_all)))
			return rc;
	}
	sky_stage_step_finish(a, a->norm_all, lr, NULL);
	sky_stage_step_finish(b, b->norm_all, lr, loss);
	return 0;
}

int sky_trainjob_run(sky_trainjob *j, const char *state_dir, double start_s, sky_diag *d)
{
	const sky_planmsg *p = j->plan;
	const sky_plan_train *t = &p->train;
	sky_transport *tr = &j->tr;
	char topics[16][SKY_TOPIC_BUF];
	int rc = 0;
	const int owner = j->stage2 >= 0;
	int nt = sky_transport_topics(tr, topics, 8);
	if (owner)
		nt += sky_transport_topics(&j->tr2, topics + nt, 8);
	for (int i = 0; i < nt && !rc; i++)
		if (tr->net.subscribe && (rc = tr->net.subscribe(tr->net.ctx, topics[i])) != 0)
			return sky_diag_set(d, rc, "job %s: cannot subscribe to %s", p->job, topics[i]);
	if (owner)
		SKY_INFO("job %s epoch %lld: data owner: stages 0 and %d of %d waiting for the "
			 "others",
			 p->job, (long long)p->epoch, j->stage2, p->n_stages);
	else
		SKY_INFO("job %s epoch %lld: stage %d of %d waiting for the other stages", p->job,
			 (long long)p->epoch, j->stage, p->n_stages);
	/* both of an owner's stages announce before either waits */
	if ((rc = sky_transport_announce(tr, d)) != 0 ||
	    (owner && (rc = sky_transport_announce(&j->tr2, d)) != 0) ||
	    (rc = sky_transport_wait_ready(tr, start_s, d)) != 0 ||
	    (owner && (rc = sky_transport_wait_ready(&j->tr2, start_s, d)) != 0))
		return rc;
	SKY_INFO("job %s: all %d stages ready; %d steps, %s, %d micro-batches, %s frames", p->job,
		 p->n_stages, t->steps, t->sched, p->micro_batches, j->sealed ? "sealed" : "plaintext");
	sky_stage_io io = sky_transport_io(tr), io2 = sky_transport_io(&j->tr2);
	const float lr = (float)t->lr;
	for (long s = j->st.step; s < t->steps; s++) {
		float loss = 0, step_lr = sky_optim_lr_at(lr, s, t->steps, t->warmup);
		sky_transport_begin_step(tr, s);
		if (owner)
			sky_transport_begin_step(&j->tr2, s);
		double t0 = sky_clock_s();
		rc = owner ? owner_step(j, &io, &io2, step_lr, &loss)
			   : sky_stage_step(&j->st, &io, step_lr, &loss);
		double el = sky_clock_s() - t0;
		if (rc) {
			const char *why = tr->stall[0] ? tr->stall : owner ? j->tr2.stall : "";
			if (why[0])
				return sky_diag_set(d, rc, "job %s stopped: %s", p->job, why);
			return sky_diag_set(d, rc, "job %s stopped at step %ld: %s", p->job, s + 1,
					    sky_strerror(rc));
		}
		j->steps_done = s + 1;
		j->last_loss = loss;
		publish_metrics(j, j->stage, tr, &j->st, el, loss);
		if (owner)
			publish_metrics(j, j->stage2, &j->tr2, &j->st2, el, loss);
		const int k = t->ckpt_every;
		/* a replica's weights are its stage board's: that board alone
		 * sends checkpoints and the part */
		if (((k > 0 && ((s + 1) % k == 0 || s + 1 == t->steps)) || j->ckpt_at == s + 1) &&
		    j->ckpt_buf && j->replica == 0 && (rc = publish_ckpt(j, d)) != 0)
			return rc;
		if (j->st.has_head || owner)
			SKY_INFO("job %s step %ld loss %.4f (%.1f ms)", p->job, s + 1, (double)loss,
				 el * 1e3);
	}
	size_t part = 0;
	if (j->replica == 0 && (rc = publish_part(j, state_dir, &part, d)) != 0)
		return rc;
	char done[256];
	for (int k = 0; k < 1 + owner; k++) {
		int n = snprintf(done, sizeof done,
				 "{\"v\":1,\"job\":\"%s\",\"epoch\":%lld,\"stage\":%d,\"board\":\"%s\","
				 "\"step\":%ld,\"steps\":%d,\"done\":true,\"part_bytes\":%zu}",
				 p->job, (long long)p->epoch, k ? j->stage2 : j->stage, tr->board,
				 j->steps_done, t->steps, part);
		tr->net.publish(tr->net.ctx, tr->topic_metrics, done, (size_t)n, 1, 0);
	}
	SKY_INFO("job %s: stage %d done after %ld steps; part of %zu bytes published", p->job,
		 j->stage, j->steps_done, part);
	return 0;
}
