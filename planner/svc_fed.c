/* Federated jobs at their aggregator (docs/federation.md): the owners
 * checked at submit, then the round loop. Each round the global model
 * goes out (a signed round naming its bundle's SHA-256, retained, then the
 * bundle in hashed chunks), every sampled owner trains on its own shard
 * and sends its weights in update chunks on sky/v1/job/<job>/fedupd/<its
 * CN> (the ACL pins the level; sky_fedround checks it against the job's
 * owners and refuses by reason), and when the round closes its mean moves
 * the global model by the server's optimizer (sky_fedopt.h), with
 * Gaussian noise and the accountant when DP is on. The job's owner reads
 * one line per round and, at the end, the global model, relayed to
 * sky/v1/jobs/<op>/job/<job>/{metrics,fedmodel,state}. */
#include "svc_internal.h"

#include "sky_chunk.h"
#include "sky_clock.h"
#include "sky_fedmsg.h"
#include "sky_fedopt.h"
#include "sky_fedround.h"
#include "sky_fedsum.h"
#include "sky_file.h"
#include "sky_json.h"
#include "sky_log.h"
#include "sky_owner.h"
#include "sky_rdp.h"
#include "sky_rng.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Each element of an owner's weights is clipped to this before the
 * fixed-point sum (sky_fedsum.h): far above any trained BERT weight, and
 * 2^62 / (rows x 64) leaves > 40 fraction bits for a million rows. */
#define FED_CLIP 64.0f
#define FED_DELTA 1e-5 /* DP's delta */
#define FED_RESEND_S 15.0
#define FED_REDO 2 /* a round that fails is opened again at most this often */

typedef struct fed_job {
	int active;
	sky_job_req req;
	char op[SKY_TOPIC_SEGMENT_MAX + 1];
	int nown;
	char owner[SKY_FED_MAX_OWNERS][SKY_FED_ID_CAP];
	uint32_t weight[SKY_FED_MAX_OWNERS];
	unsigned char *bundle; /* the global model: header, config, words */
	size_t bundle_len, words_at;
	uint64_t words;
	float *w, *mean, *state;
	sky_fedopt opt;
	sky_fedround fr;
	int round_open;
	uint64_t round;
	int redone; /* times this round failed and was opened again */
	double round_t0, resend_at;
	long long bytes_in, bytes_out;
	long refused_total[SKY_FEDR_N];
	sky_rdp acct;
	unsigned char dp_seed[32];
	char sha[65];
} fed_job;

/* The loop's thread only (every handler and tick run there). */
static fed_job g_fed[SVC_FED_MAX_JOBS];
static unsigned char g_msg[SKY_CHUNK_MAX_BYTES]; /* one model chunk being built */

static fed_job *find(const char *job)
{
	for (int i = 0; i < SVC_FED_MAX_JOBS; i++)
		if (g_fed[i].active && strcmp(g_fed[i].req.job, job) == 0)
			return &g_fed[i];
	return NULL;
}

static void fed_free(fed_job *f)
{
	sky_fedround_free(&f->fr);
	free(f->bundle), free(f->w), free(f->mean), free(f->state);
	memset(f, 0, sizeof *f);
}

/* The dataset summary of board b's set name, or NULL. */
static const sky_caps_dataset *set_of(const sky_reg_board *b, const char *name)
{
	if (!b || !b->has_caps)
		return NULL;
	for (int i = 0; i < b->caps.n_datasets; i++)
		if (strcmp(b->caps.datasets[i].name, name) == 0)
			return &b->caps.datasets[i];
	return NULL;
}

/* The owners of r: named ones each online with a shard of the set, or with
 * "all" every online board holding it; shards alike in labels, seq and
 * tokenizer. Fills f's owners and weights (sample counts). */
static int check_owners(svc *s, const sky_job_req *r, fed_job *f, sky_diag *d)
{
	const sky_caps_dataset *first = NULL;
	char first_id[SKY_TOPIC_SEGMENT_MAX + 1] = "";
	f->nown = 0;
	int n = r->fed.all_owners ? s->reg.n : r->fed.n_owners;
	for (int i = 0; i < n; i++) {
		const char *id = r->fed.all_owners ? s->reg.b[i].id : r->fed.owners[i];
		const sky_reg_board *b = sky_registry_find(&s->reg, id);
		const sky_caps_dataset *ds = set_of(b, r->dataset);
		if (r->fed.all_owners && (!ds || b->state != SKY_REG_ONLINE))
			continue;
		if (!b)
			return sky_diag_set(d, SKY_ENOTFOUND, "job %s: owner %s is not a board of "
							      "this fleet", r->job, id);
		if (b->state != SKY_REG_ONLINE)
			return sky_diag_set(d, SKY_ENOTFOUND, "job %s: owner %s is not online",
					    r->job, id);
		if (!ds)
			return sky_diag_set(d, SKY_ENOTFOUND,
					    "job %s: owner %s holds no data set named %s", r->job, id,
					    r->dataset);
		if (r->tokenizer[0] && strtoul(r->tokenizer, NULL, 16) != ds->tokenizer)
			return sky_diag_set(d, SKY_EINVAL,
					    "job %s: owner %s's %s was prepared with tokenizer %08x, "
					    "the model's is %s", r->job, id, r->dataset,
					    (unsigned)ds->tokenizer, r->tokenizer);
		if (first && (ds->labels != first->labels || ds->seq != first->seq ||
			      ds->tokenizer != first->tokenizer))
			return sky_diag_set(d, SKY_EINVAL,
					    "job %s: owner %s's shard of %s has %d labels, seq %d, "
					    "tokenizer %08x; %s's has %d, %d, %08x: the shards must "
					    "come from one set", r->job, id, r->dataset, ds->labels,
					    ds->seq, (unsigned)ds->tokenizer, first_id, first->labels,
					    first->seq, (unsigned)first->tokenizer);
		if (ds->rows < 1 || ds->rows > SKY_FX_MAX_WEIGHT)
			return sky_diag_set(d, SKY_ERANGE, "job %s: owner %s's shard has %lld rows",
					    r->job, id, (long long)ds->rows);
		if (f->nown >= SKY_FED_MAX_OWNERS)
			return sky_diag_set(d, SKY_ERANGE, "job %s: more than %d owners", r->job,
					    SKY_FED_MAX_OWNERS);
		if (!first) {
			first = ds;
			snprintf(first_id, sizeof first_id, "%s", id);
		}
		snprintf(f->owner[f->nown], sizeof f->owner[0], "%s", id);
		f->weight[f->nown++] = r->fed.dp_clip > 0 ? 1u : (uint32_t)ds->rows;
	}
	if (f->nown == 0)
		return sky_diag_set(d, SKY_ENOTFOUND, "job %s: no online board holds %s", r->job,
				    r->dataset);
	if (r->fed.min_owners > f->nown)
		return sky_diag_set(d, SKY_EINVAL, "job %s: min_owners %d, but %d owners", r->job,
				    r->fed.min_owners, f->nown);
	return 0;
}

/* ---- publishing a round ---------------------------------------------------- */

static int relay(svc *s, fed_job *f, const char *leaf, const void *p, size_t len, int retained)
{
	char topic[SKY_TOPIC_BUF];
	if (sky_topic_jobs_job(topic, sizeof topic, f->op, f->req.job, leaf, NULL) != 0)
		return SKY_EINVAL;
	return svc_publish(s, topic, p, len, 1, retained, NULL);
}

/* The global model's chunks on sky/v1/job/<job>/fedmodel. */
static void send_model(svc *s, fed_job *f)
{
	char topic[SKY_TOPIC_BUF];
	unsigned char sha[32];
	sky_topic_job(topic, sizeof topic, f->req.job, SKY_TOPIC_FEDMODEL);
	sky_sha256_parse(f->sha, sha);
	uint32_t total = sky_chunk_count(f->bundle_len, SKY_CHUNK_DEFAULT_BYTES);
	for (uint32_t i = 0; i < total; i++) {
		int n = sky_chunk_encode(SKY_CHUNK_MODEL, f->bundle, f->bundle_len, sha,
					 SKY_CHUNK_DEFAULT_BYTES, i, g_msg, sizeof g_msg);
		if (n > 0 && svc_publish(s, topic, g_msg, (size_t)n, 1, 0, NULL) == 0)
			f->bytes_out += n;
	}
}

/* Signs and publishes (retained) the round message: round f->round, or the
 * end with done. */
static int publish_round(svc *s, fed_job *f, int done)
{
	static sky_fedround_msg m;
	static char payload[SKY_FEDROUND_MAX_BYTES], env[SKY_SIGN_MAX_ENVELOPE];
	const sky_job_req *r = &f->req;
	memset(&m, 0, sizeof m);
	unsigned char sha[32];
	sky_sha256(f->bundle, f->bundle_len, sha);
	sky_sha256_hex(sha, f->sha);
	snprintf(m.job, sizeof m.job, "%s", r->job);
	m.round = f->round;
	m.rounds = (uint64_t)r->fed.rounds;
	m.done = done;
	snprintf(m.model_sha256, sizeof m.model_sha256, "%s", f->sha);
	m.model_bytes = f->bundle_len;
	m.words = f->words;
	m.chunk_bytes = SKY_CHUNK_DEFAULT_BYTES;
	snprintf(m.dataset, sizeof m.dataset, "%s", r->dataset);
	m.local_steps = r->fed.local_steps;
	m.batch = r->batch > 0 ? r->batch : 8;
	m.micro = r->micro_batches;
	snprintf(m.optim, sizeof m.optim, "%s", r->optim);
	m.lr = r->lr;
	m.clip = r->clip;
	m.prox_mu = r->fed.prox_mu;
	m.dp_clip = r->fed.dp_clip;
	m.seed = r->seed;
	m.warmup = r->warmup;
	m.nown = f->nown;
	for (int i = 0; i < f->nown; i++) {
		snprintf(m.owner[i], sizeof m.owner[i], "%s", f->owner[i]);
		m.sampled[i] = done ? 0 : f->fr.c.sampled[i];
	}
	int n = sky_fedround_msg_encode(&m, payload, sizeof payload);
	int e = n > 0 ? sky_sign_envelope(&s->signer, payload, (size_t)n, env, sizeof env, NULL)
		      : SKY_ERANGE;
	char topic[SKY_TOPIC_BUF];
	sky_topic_job(topic, sizeof topic, r->job, SKY_TOPIC_FEDROUND);
	if (e <= 0) {
		SKY_ERROR("fed job %s: the round message cannot be signed (%s)", r->job,
			  sky_strerror(e));
		return e ? e : SKY_ERANGE;
	}
	f->bytes_out += e;
	return svc_publish(s, topic, env, (size_t)e, 1, 1, NULL);
}

/* Opens round f->round: samples its owners (ceil(fraction x owners), at
 * least min_owners, drawn from (seed, round)), then publishes it. */
static int open_round(svc *s, fed_job *f, double now, sky_diag *d)
{
	const sky_job_req *r = &f->req;
	sky_fedround_cfg c;
	memset(&c, 0, sizeof c);
	snprintf(c.job, sizeof c.job, "%.63s", r->job);
	c.round = f->round;
	c.words = f->words;
	c.nown = f->nown;
	for (int i = 0; i < f->nown; i++) {
		snprintf(c.owner[i], sizeof c.owner[i], "%s", f->owner[i]);
		c.weight[i] = f->weight[i];
	}
	int want = (int)ceil(r->fed.fraction * f->nown - 1e-9);
	if (want < r->fed.min_owners)
		want = r->fed.min_owners;
	if (want > f->nown)
		want = f->nown;
	int idx[SKY_FED_MAX_OWNERS];
	for (int i = 0; i < f->nown; i++)
		idx[i] = i;
	sky_rng rng;
	sky_rng_seed(&rng, ((uint64_t)r->seed << 32) ^ (f->round * 0x9e3779b97f4a7c15ull));
	for (int i = 0; i < want && want < f->nown; i++) {
		int j = i + (int)sky_rng_below(&rng, (uint32_t)(f->nown - i));
		int t = idx[i];
		idx[i] = idx[j], idx[j] = t;
	}
	for (int i = 0; i < want; i++)
		c.sampled[idx[i]] = 1;
	c.clip = FED_CLIP;
	c.deadline_s = r->fed.deadline_s;
	c.policy = r->fed.straggler_close ? SKY_FED_CLOSE : SKY_FED_WAIT;
	c.min_owners = r->fed.min_owners;
	sky_fedround_free(&f->fr);
	int rc = sky_fedround_open(&f->fr, &c, now, d);
	if (rc)
		return rc;
	f->round_open = 1;
	f->round_t0 = now;
	f->resend_at = now + FED_RESEND_S;
	f->bytes_in = 0;
	f->bytes_out = 0;
	if ((rc = publish_round(s, f, 0)) != 0)
		return sky_diag_set(d, rc, "job %s: round %llu not published", r->job,
				    (unsigned long long)f->round);
	send_model(s, f);
	SKY_INFO("fed job %s round %llu/%d open: %d of %d owner(s) sampled, model %.12s... "
		 "(%zu bytes)", r->job, (unsigned long long)f->round + 1, r->fed.rounds, want,
		 f->nown, f->sha, f->bundle_len);
	return 0;
}

/* ---- closing a round --------------------------------------------------------- */

/* One line for the job's owner: {"fed_round":..}. */
static void round_line(svc *s, fed_job *f, double round_s, int have_eps, double eps)
{
	cJSON *doc = sky_json_new_object();
	cJSON *in = doc ? cJSON_AddArrayToObject(doc, "owners_in") : NULL;
	cJSON *out = doc ? cJSON_AddArrayToObject(doc, "owners_out") : NULL;
	cJSON *ref = doc ? cJSON_AddObjectToObject(doc, "refused") : NULL;
	if (!in || !out || !ref) {
		sky_json_free(doc);
		return;
	}
	cJSON_AddNumberToObject(doc, "fed_round", (double)f->round + 1);
	cJSON_AddNumberToObject(doc, "rounds", f->req.fed.rounds);
	for (int i = 0; i < f->nown; i++) {
		if (f->fr.state[i] == SKY_FEDO_IN)
			cJSON_AddItemToArray(in, cJSON_CreateString(f->owner[i]));
		else if (f->fr.state[i] != SKY_FEDO_NOT_SAMPLED)
			cJSON_AddItemToArray(out, cJSON_CreateString(f->owner[i]));
	}
	cJSON_AddNumberToObject(doc, "round_s", round_s);
	cJSON_AddNumberToObject(doc, "bytes_in", (double)f->bytes_in);
	cJSON_AddNumberToObject(doc, "bytes_out", (double)f->bytes_out);
	for (int k = 0; k < SKY_FEDR_N; k++)
		if (f->fr.refused[k])
			cJSON_AddNumberToObject(ref, sky_fedround_refuse_name((sky_fed_refuse)k),
						(double)f->fr.refused[k]);
	if (have_eps) {
		cJSON_AddNumberToObject(doc, "epsilon", eps);
		cJSON_AddNumberToObject(doc, "delta", FED_DELTA);
	}
	char buf[SKY_METRICS_MAX_BYTES];
	int n = sky_json_print(doc, buf, sizeof buf);
	sky_json_free(doc);
	if (n > 0)
		relay(s, f, SKY_TOPIC_METRICS, buf, (size_t)n, 0);
}

/* The job's end: the final model to its owner (retained), its state, and
 * a done round so the owners let the job go. */
static void finish(svc *s, fed_job *f, const char *state, const char *why)
{
	char buf[SKY_JOB_STATE_MAX_BYTES];
	if (!strcmp(state, "done"))
		relay(s, f, SKY_TOPIC_FEDMODEL, f->bundle, f->bundle_len, 1);
	int n = snprintf(buf, sizeof buf,
			 "{\"job\":\"%s\",\"epoch\":0,\"state\":\"%s\",\"federated\":true,"
			 "\"rounds\":%llu,\"model_sha256\":\"%s\",\"why\":\"%.160s\"}",
			 f->req.job, state, (unsigned long long)f->round, f->sha, why);
	if (n > 0 && (size_t)n < sizeof buf)
		relay(s, f, SKY_TOPIC_STATE, buf, (size_t)n, 1);
	publish_round(s, f, 1);
	SKY_INFO("fed job %s %s after %llu round(s)%s%s", f->req.job, state,
		 (unsigned long long)f->round, why[0] ? ": " : "", why);
	fed_free(f);
}

/* The closed round's mean (plus DP noise) moves the global model. */
static int step_round(svc *s, fed_job *f, double now, sky_diag *d)
{
	int rc = sky_fedround_mean(&f->fr, f->mean, d);
	if (rc)
		return rc;
	const sky_job_req *r = &f->req;
	int have_eps = 0;
	double eps = 0;
	if (r->fed.dp_noise > 0) {
		/* noise of deviation Z * C on the sum of the clipped updates: on
		 * the mean of n_in owners, Z * C / n_in; the sampling rate is the
		 * fraction of owners this round took */
		int in = f->fr.n_in > 0 ? f->fr.n_in : 1;
		for (uint64_t i = 0; i < f->words; i++)
			f->mean[i] -= f->w[i];
		static float *noise;
		static uint64_t noise_n;
		if (noise_n < f->words) {
			free(noise);
			noise = calloc(f->words, sizeof *noise);
			noise_n = noise ? f->words : 0;
			if (!noise)
				return sky_diag_set(d, SKY_ENOMEM, "no memory for the noise");
		}
		memset(noise, 0, f->words * sizeof *noise);
		if ((rc = sky_dp_noise(noise, f->words, r->fed.dp_noise * r->fed.dp_clip / in,
				       f->dp_seed, f->round, d)) != 0)
			return rc;
		for (uint64_t i = 0; i < f->words; i++)
			f->mean[i] += noise[i] + f->w[i];
		double q = (double)f->fr.n_sampled / f->nown;
		if (sky_rdp_add(&f->acct, q, r->fed.dp_noise, 1, d) == 0 &&
		    sky_rdp_epsilon(&f->acct, FED_DELTA, &eps, NULL, d) == 0)
			have_eps = 1;
	}
	if ((rc = sky_fedopt_step(&f->opt, f->w, f->mean, d)) != 0)
		return rc;
	sky_fedb_put_words(f->bundle + f->words_at, f->w, f->words);
	round_line(s, f, now - f->round_t0, have_eps, eps);
	SKY_INFO("fed job %s round %llu/%d closed in %.2f s: %d of %d sampled owner(s) in, "
		 "%lld bytes in", r->job, (unsigned long long)f->round + 1, r->fed.rounds,
		 now - f->round_t0, f->fr.n_in, f->fr.n_sampled, f->bytes_in);
	for (int k = 0; k < SKY_FEDR_N; k++)
		f->refused_total[k] += f->fr.refused[k];
	f->round_open = 0;
	f->round++;
	f->redone = 0;
	return 0;
}

void svc_fed_tick(svc *s, double now)
{
	for (int i = 0; i < SVC_FED_MAX_JOBS; i++) {
		fed_job *f = &g_fed[i];
		if (!f->active || !f->round_open)
			continue;
		sky_diag d;
		sky_diag_clear(&d);
		int rc = sky_fedround_tick(&f->fr, now, &d);
		if (rc == SKY_ETIMEOUT) {
			/* below min_owners at the deadline: the round is redone, at
			 * most FED_REDO times (owners that sent do not send a
			 * round again, so a round short of owners stays short) */
			SKY_WARN("fed job %s round %llu failed (%s)%s", f->req.job,
				 (unsigned long long)f->round + 1, d.msg,
				 f->redone < FED_REDO ? "; redoing it" : "");
			round_line(s, f, now - f->round_t0, 0, 0);
			if (f->redone++ >= FED_REDO)
				finish(s, f, "stalled", d.msg);
			else if (open_round(s, f, now, &d) != 0)
				finish(s, f, "stalled", d.msg);
			continue;
		}
		if (rc == 0) {
			if (now >= f->resend_at) { /* an owner that missed the model gets it again */
				send_model(s, f);
				f->resend_at = now + FED_RESEND_S;
			}
			continue;
		}
		if (step_round(s, f, now, &d) != 0) {
			finish(s, f, "stalled", d.msg);
			continue;
		}
		if (f->round >= (uint64_t)f->req.fed.rounds)
			finish(s, f, "done", "");
		else if (open_round(s, f, now, &d) != 0)
			finish(s, f, "stalled", d.msg);
	}
}

/* ---- the owners' updates ------------------------------------------------------- */

void svc_fed_on_update(svc *s, const char *job, const char *sender, const unsigned char *p,
		       size_t len)
{
	fed_job *f = find(job);
	if (!f || !f->round_open)
		return;
	static float x[SKY_FED_CHUNK_WORDS];
	sky_fedupd u;
	sky_diag d;
	sky_diag_clear(&d);
	int rc = sky_fedupd_decode(p, len, &u, &d);
	if (rc == 0 && u.words != f->words) {
		f->fr.refused[SKY_FEDR_SHAPE]++;
		rc = sky_diag_set(&d, SKY_EINVAL, "update of %llu words, the model has %llu",
				  (unsigned long long)u.words, (unsigned long long)f->words);
	} else if (rc == 0 && u.mode != 1) {
		f->fr.refused[SKY_FEDR_MODE]++;
		rc = sky_diag_set(&d, SKY_EINVAL, "a masked chunk in a plain round");
	} else if (rc == 0) {
		sky_fedb_get_words(u.payload, x, u.n);
		rc = sky_fedround_on_plain(&f->fr, sender, u.round, u.chunk, x, u.n, &d);
		if (rc == 0)
			f->bytes_in += (long long)len;
	} else {
		f->fr.refused[SKY_FEDR_SHAPE]++;
	}
	if (rc)
		svc_warn(s, SVC_LOG_REQ, "fed job %s: update chunk from %s refused: %s", job, sender,
			 d.msg);
}

/* ---- submission ------------------------------------------------------------------ */

int svc_fed_submit(svc *s, const sky_job_req *r, const char *op, sky_diag *d)
{
	if (find(r->job))
		return sky_diag_set(d, SKY_ESTATE, "job %s: a federated job of that id runs",
				    r->job);
	if (r->fed.secure)
		return sky_diag_set(d, SKY_EUNSUPPORTED,
				    "job %s: secure aggregation is not in the round loop yet "
				    "(docs/limits.md)", r->job);
	fed_job *f = NULL;
	for (int i = 0; i < SVC_FED_MAX_JOBS && !f; i++)
		if (!g_fed[i].active)
			f = &g_fed[i];
	if (!f)
		return sky_diag_set(d, SKY_ESTATE, "job %s: %d federated jobs run already", r->job,
				    SVC_FED_MAX_JOBS);
	memset(f, 0, sizeof *f);
	f->req = *r;
	snprintf(f->op, sizeof f->op, "%s", op);
	int rc = check_owners(s, r, f, d);
	char path[700];
	if (!rc)
		rc = sky_deploy_model_path(&s->deploy, r->fed.model, path, sizeof path, d);
	sky_file_map map;
	memset(&map, 0, sizeof map);
	const char *cfg;
	size_t cl;
	if (!rc && (rc = sky_file_map_open(&map, path)) != 0)
		sky_diag_set(d, rc, "job %s: the model %.12s... cannot be read", r->job,
			     r->fed.model);
	if (!rc) {
		rc = sky_fedb_parse(map.data, map.size, &cfg, &cl, &f->words_at, &f->words, d);
		if (!rc && !(f->bundle = malloc(map.size)))
			rc = sky_diag_set(d, SKY_ENOMEM, "no memory for the model");
		if (!rc) {
			memcpy(f->bundle, map.data, map.size);
			f->bundle_len = map.size;
		}
		sky_file_map_close(&map);
	}
	sky_fedopt_kind kind = SKY_FEDOPT_AVG;
	if (!rc)
		rc = sky_fedopt_parse(r->fed.server_opt, &kind, d);
	if (!rc) {
		sky_fedopt_opts oo = sky_fedopt_defaults(kind);
		if (r->fed.server_lr > 0)
			oo.lr = (float)r->fed.server_lr;
		f->w = malloc(f->words * sizeof *f->w);
		f->mean = malloc(f->words * sizeof *f->mean);
		size_t sn = (size_t)sky_fedopt_state_floats(kind) * f->words;
		f->state = sn ? calloc(sn, sizeof *f->state) : NULL;
		if (!f->w || !f->mean || (sn && !f->state))
			rc = sky_diag_set(d, SKY_ENOMEM, "no memory for the model");
		else
			rc = sky_fedopt_init(&f->opt, &oo, f->words, f->state, d);
	}
	if (!rc && r->fed.dp_noise > 0) {
		sky_sign_rng_func(&s->signer.rng, f->dp_seed, sizeof f->dp_seed);
		sky_rdp_init(&f->acct);
	}
	if (!rc) {
		sky_fedb_get_words(f->bundle + f->words_at, f->w, f->words);
		f->active = 1;
		rc = open_round(s, f, sky_clock_s(), d);
	}
	if (rc) {
		fed_free(f);
		return rc;
	}
	SKY_INFO("fed job %s from operator %s: %d owner(s) of %s, %d round(s) of %d local "
		 "step(s), server %s%s", r->job, op, f->nown, r->dataset, r->fed.rounds,
		 r->fed.local_steps, r->fed.server_opt, r->fed.dp_noise > 0 ? ", DP" : "");
	return 0;
}
