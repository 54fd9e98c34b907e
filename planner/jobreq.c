#include "sky_jobreq.h"

#include "sky_caps.h"
#include "sky_json.h"
#include "sky_model.h"
#include "sky_plan.h"
#include "sky_planmsg.h"
#include "sky_registry.h"
#include "sky_topics.h"

#include <stdio.h>
#include <string.h>

void sky_job_req_defaults(sky_job_req *j, const char *task)
{
	memset(j, 0, sizeof *j);
	j->micro_batches = 4;
	snprintf(j->algo, sizeof j->algo, "optimal");
	snprintf(j->sched, sizeof j->sched, "1f1b");
	snprintf(j->objective, sizeof j->objective, "step");
	j->wait_s = 30;
	int all = task && strcmp(task, "*") == 0;
	if (all || (task && strcmp(task, "train") == 0)) {
		/* `sky train`'s */
		j->steps = 10;
		j->seed = 1;
		j->warmup = -1;
		j->clip = 1.0;
		j->lr = -1;
		j->ckpt_every = 10;
		snprintf(j->optim, sizeof j->optim, "adamw");
	}
	if (all || (task && strcmp(task, "infer") == 0)) {
		j->wait_ms = 2;
		j->queue = 64;
	}
}

void sky_job_req_resolve(sky_job_req *j)
{
	if (j->lr < 0)
		j->lr = strcmp(j->optim, "sgd") == 0 ? 0.05 : 1e-3;
	if (j->warmup < 0)
		j->warmup = j->steps / 10;
}

static int opt_int(const cJSON *doc, const char *key, int lo, int hi, int *out, sky_diag *d)
{
	if (!cJSON_GetObjectItemCaseSensitive(doc, key))
		return 0;
	return sky_json_int(doc, key, lo, hi, out, "job", d);
}

static int opt_str(const cJSON *doc, const char *key, char *buf, size_t cap, sky_diag *d)
{
	if (!cJSON_GetObjectItemCaseSensitive(doc, key))
		return 0;
	return sky_json_str(doc, key, buf, cap, "job", d);
}

static int opt_num(const cJSON *doc, const char *key, double lo, double hi, double *out,
		   sky_diag *d)
{
	if (!cJSON_GetObjectItemCaseSensitive(doc, key))
		return 0;
	return sky_json_num(doc, key, lo, hi, out, "job", d);
}

/* The serving settings (sky_service.h): the model's hash is required. */
static int parse_infer(const cJSON *doc, sky_job_req *j, sky_diag *d)
{
	int rc;
	j->infer = 1;
	if (!cJSON_GetObjectItemCaseSensitive(doc, "weights"))
		return sky_diag_set(d, SKY_EINVAL,
				    "job %s: task infer needs weights (the SHA-256 of the int8 model "
				    "uploaded with it)",
				    j->job);
	if ((rc = sky_json_str(doc, "weights", j->weights, sizeof j->weights, "job", d)) ||
	    (rc = opt_int(doc, "serve_batch", 1, SKY_CAPS_MAX_BATCH, &j->serve_batch, d)) ||
	    (rc = opt_int(doc, "wait_ms", 0, SKY_PLAN_MAX_WAIT_MS, &j->wait_ms, d)) ||
	    (rc = opt_int(doc, "queue", 1, SKY_PLAN_MAX_QUEUE, &j->queue, d)))
		return rc;
	if (!sky_plan_sha256_ok(j->weights))
		return sky_diag_set(d, SKY_EFORMAT, "job %s: weights must be 64 lower-case hex digits",
				    j->job);
	if (cJSON_GetObjectItemCaseSensitive(doc, "tokenizer") &&
	    ((rc = sky_json_str(doc, "tokenizer", j->tokenizer, sizeof j->tokenizer, "job", d)) ||
	     !sky_plan_tokhash_ok(j->tokenizer)))
		return rc ? rc
			  : sky_diag_set(d, SKY_EFORMAT,
					 "job %s: tokenizer must be 8 lower-case hex digits (the "
					 "tokenizer's hash)",
					 j->job);
	const cJSON *rp = cJSON_GetObjectItemCaseSensitive(doc, "replan");
	if (rp && !cJSON_IsBool(rp))
		return sky_diag_set(d, SKY_EFORMAT, "job %s: replan must be true or false", j->job);
	j->no_replan = rp && cJSON_IsFalse(rp);
	const cJSON *cl = cJSON_GetObjectItemCaseSensitive(doc, "clients"), *c;
	if (!cl)
		return 0;
	if (!cJSON_IsArray(cl) || cJSON_GetArraySize(cl) > SKY_JOB_MAX_CLIENTS)
		return sky_diag_set(d, SKY_EFORMAT, "job %s: clients must be a list of at most %d CNs",
				    j->job, SKY_JOB_MAX_CLIENTS);
	cJSON_ArrayForEach(c, cl)
	{
		if (!cJSON_IsString(c) || !sky_topic_segment_ok(c->valuestring) ||
		    strncmp(c->valuestring, SKY_TOPIC_CLIENT_PREFIX,
			    sizeof SKY_TOPIC_CLIENT_PREFIX - 1) != 0)
			return sky_diag_set(d, SKY_EINVAL,
					    "job %s: clients[%d] is not a client CN (" SKY_TOPIC_CLIENT_PREFIX
					    "<name>)",
					    j->job, j->n_clients);
		snprintf(j->clients[j->n_clients++], sizeof j->clients[0], "%s", c->valuestring);
	}
	return 0;
}

/* The task and its settings (their defaults are in j already). */
/* ---- federated training ("federated":{...}) ---- */

static int hex64(const char *s)
{
	return strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

static int parse_fed(const cJSON *doc, sky_job_req *j, sky_diag *d)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(doc, "federated");
	if (!f)
		return 0;
	if (!cJSON_IsObject(f))
		return sky_diag_set(d, SKY_EFORMAT, "job %s: federated must be an object", j->job);
	char straggler[8] = "wait";
	const cJSON *ow = cJSON_GetObjectItemCaseSensitive(f, "owners");
	const cJSON *sa = cJSON_GetObjectItemCaseSensitive(f, "secure_agg");
	int rc;
	j->fed.on = 1;
	j->fed.fraction = 1;
	j->fed.min_owners = 1;
	snprintf(j->fed.server_opt, sizeof j->fed.server_opt, "avg");
	if ((rc = sky_json_str(f, "model", j->fed.model, sizeof j->fed.model, "federated", d)) ||
	    (rc = sky_json_int(f, "rounds", 1, 100000, &j->fed.rounds, "federated", d)) ||
	    (rc = sky_json_int(f, "local_steps", 1, 1000000, &j->fed.local_steps, "federated",
			       d)) ||
	    (rc = opt_num(f, "fraction", 1e-6, 1, &j->fed.fraction, d)) ||
	    (rc = opt_int(f, "min_owners", 1, SKY_JOB_MAX_FED_OWNERS, &j->fed.min_owners, d)) ||
	    (rc = opt_num(f, "deadline_s", 0, 86400, &j->fed.deadline_s, d)) ||
	    (rc = opt_str(f, "straggler", straggler, sizeof straggler, d)) ||
	    (rc = opt_str(f, "server_opt", j->fed.server_opt, sizeof j->fed.server_opt, d)) ||
	    (rc = opt_num(f, "server_lr", 0, 100, &j->fed.server_lr, d)) ||
	    (rc = opt_num(f, "prox_mu", 0, 1e6, &j->fed.prox_mu, d)) ||
	    (rc = opt_num(f, "dp_clip", 0, 1e9, &j->fed.dp_clip, d)) ||
	    (rc = opt_num(f, "dp_noise", 0, 1e6, &j->fed.dp_noise, d)))
		return rc == SKY_ENOTFOUND ? SKY_EINVAL : rc;
	if (!hex64(j->fed.model))
		return sky_diag_set(d, SKY_EINVAL,
				    "job %s: federated.model must be 64 lower-case hex digits",
				    j->job);
	if ((long)j->fed.rounds * j->fed.local_steps > SKY_PLANMSG_MAX_STEPS)
		return sky_diag_set(d, SKY_ERANGE, "job %s: %d rounds x %d local steps is over %d",
				    j->job, j->fed.rounds, j->fed.local_steps,
				    SKY_PLANMSG_MAX_STEPS);
	if (strcmp(straggler, "wait") && strcmp(straggler, "close"))
		return sky_diag_set(d, SKY_EINVAL, "job %s: straggler '%s' (wait, close)", j->job,
				    straggler);
	j->fed.straggler_close = straggler[0] == 'c';
	if (strcmp(j->fed.server_opt, "avg") && strcmp(j->fed.server_opt, "avgm") &&
	    strcmp(j->fed.server_opt, "adam"))
		return sky_diag_set(d, SKY_EINVAL, "job %s: server_opt '%s' (avg, avgm, adam)",
				    j->job, j->fed.server_opt);
	if (sa && !cJSON_IsBool(sa))
		return sky_diag_set(d, SKY_EFORMAT, "job %s: secure_agg must be true or false",
				    j->job);
	j->fed.secure = cJSON_IsTrue(sa);
	if ((j->fed.dp_noise > 0) != (j->fed.dp_clip > 0))
		return sky_diag_set(d, SKY_EINVAL, "job %s: dp_noise and dp_clip go together",
				    j->job);
	if (cJSON_IsString(ow) && strcmp(ow->valuestring, "all") == 0) {
		j->fed.all_owners = 1;
	} else if (cJSON_IsArray(ow) && cJSON_GetArraySize(ow) >= 1 &&
		   cJSON_GetArraySize(ow) <= SKY_JOB_MAX_FED_OWNERS) {
		for (int i = 0; i < cJSON_GetArraySize(ow); i++) {
			const cJSON *o = cJSON_GetArrayItem(ow, i);
			if (!cJSON_IsString(o) || !sky_topic_segment_ok(o->valuestring) ||
			    strlen(o->valuestring) >= sizeof j->fed.owners[0])
				return sky_diag_set(d, SKY_EINVAL,
						    "job %s: federated owner %d is not a board id",
						    j->job, i);
			for (int k = 0; k < i; k++)
				if (!strcmp(j->fed.owners[k], o->valuestring))
					return sky_diag_set(d, SKY_EINVAL,
							    "job %s: owner %s named twice", j->job,
							    o->valuestring);
			snprintf(j->fed.owners[i], sizeof j->fed.owners[i], "%s", o->valuestring);
			j->fed.n_owners = i + 1;
		}
	} else {
		return sky_diag_set(d, SKY_EINVAL,
				    "job %s: federated.owners must be \"all\" or a list of 1-%d "
				    "board ids", j->job, SKY_JOB_MAX_FED_OWNERS);
	}
	if (!j->fed.all_owners && j->fed.min_owners > j->fed.n_owners)
		return sky_diag_set(d, SKY_EINVAL, "job %s: min_owners %d is more than the %d owners",
				    j->job, j->fed.min_owners, j->fed.n_owners);
	if (!j->dataset[0])
		return sky_diag_set(d, SKY_EINVAL,
				    "job %s: a federated job needs dataset (each owner's shard)",
				    j->job);
	j->steps = j->fed.rounds * j->fed.local_steps;
	return 0;
}

/* "federated":{...} of j, or "" (the block parse_fed reads). */
static void encode_fed(const sky_job_req *j, char *out, size_t cap)
{
	out[0] = '\0';
	if (!j->fed.on)
		return;
	int k = snprintf(out, cap,
			 ",\"federated\":{\"model\":\"%s\",\"rounds\":%d,\"local_steps\":%d,"
			 "\"fraction\":%.17g,\"min_owners\":%d,\"deadline_s\":%.17g,"
			 "\"straggler\":\"%s\",\"server_opt\":\"%s\",\"server_lr\":%.17g,"
			 "\"prox_mu\":%.17g,\"secure_agg\":%s,\"dp_clip\":%.17g,"
			 "\"dp_noise\":%.17g,\"owners\":",
			 j->fed.model, j->fed.rounds, j->fed.local_steps, j->fed.fraction,
			 j->fed.min_owners, j->fed.deadline_s, j->fed.straggler_close ? "close" : "wait",
			 j->fed.server_opt, j->fed.server_lr, j->fed.prox_mu,
			 j->fed.secure ? "true" : "false", j->fed.dp_clip, j->fed.dp_noise);
	if (j->fed.all_owners && k > 0 && (size_t)k < cap)
		k += snprintf(out + k, cap - (size_t)k, "\"all\"");
	for (int i = 0; !j->fed.all_owners && i < j->fed.n_owners && k > 0 && (size_t)k < cap; i++)
		k += snprintf(out + k, cap - (size_t)k, "%s\"%s\"", i ? "," : "[", j->fed.owners[i]);
	if (!j->fed.all_owners && k > 0 && (size_t)k < cap)
		k += snprintf(out + k, cap - (size_t)k, "]");
	if (k > 0 && (size_t)k < cap)
		snprintf(out + k, cap - (size_t)k, "}");
}

static int parse_train(const cJSON *doc, sky_job_req *j, sky_diag *d)
{
	char task[16] = "";
	int rc;
	const cJSON *pt = cJSON_GetObjectItemCaseSensitive(doc, "plaintext_frames");
	if ((rc = opt_str(doc, "task", task, sizeof task, d)) != 0)
		return rc;
	if (!task[0])
		return 0;
	if (strcmp(task, "infer") == 0)
		return parse_infer(doc, j, d);
	if (strcmp(task, "train") != 0)
		return sky_diag_set(d, SKY_EINVAL, "job %s: unknown task '%s' (train, infer)", j->job,
				    task);
	j->train = 1;
	if ((rc = opt_int(doc, "steps", 1, SKY_PLANMSG_MAX_STEPS, &j->steps, d)) ||
	    (rc = opt_str(doc, "optim", j->optim, sizeof j->optim, d)) ||
	    (rc = opt_num(doc, "lr", 1e-9, 100, &j->lr, d)) ||
	    (rc = opt_int(doc, "seed", 0, 0x7fffffff, &j->seed, d)) ||
	    (rc = opt_int(doc, "warmup", 0, SKY_PLANMSG_MAX_STEPS, &j->warmup, d)) ||
	    (rc = opt_num(doc, "clip", 0, 1e9, &j->clip, d)) ||
	    (rc = opt_num(doc, "stall_s", 0, 1e5, &j->stall_s, d)) ||
	    (rc = opt_int(doc, "checkpoint_every", 0, SKY_PLANMSG_MAX_STEPS, &j->ckpt_every, d)) ||
	    (rc = opt_str(doc, "data_owner", j->data_owner, sizeof j->data_owner, d)))
		return rc;
	if (j->data_owner[0] && !sky_topic_segment_ok(j->data_owner))
		return sky_diag_set(d, SKY_EINVAL, "job %s: data_owner is not a board id", j->job);
	if ((rc = opt_str(doc, "dataset", j->dataset, sizeof j->dataset, d)) ||
	    (rc = opt_str(doc, "eval_dataset", j->eval_dataset, sizeof j->eval_dataset, d)) ||
	    (rc = opt_str(doc, "tokenizer", j->tokenizer, sizeof j->tokenizer, d)) ||
	    (rc = opt_str(doc, "dataset_sha256", j->dataset_sha256, sizeof j->dataset_sha256, d)))
		return rc;
	size_t nh = strlen(j->dataset_sha256);
	for (size_t i = 0; i < nh; i++)
		if (!((j->dataset_sha256[i] >= '0' && j->dataset_sha256[i] <= '9') ||
		      (j->dataset_sha256[i] >= 'a' && j->dataset_sha256[i] <= 'f')))
			nh = 1;
	if (nh != 0 && (nh != 64 || !j->dataset[0]))
		return sky_diag_set(d, SKY_EINVAL,
				    "job %s: dataset_sha256 is 64 lower-case hex digits, with dataset",
				    j->job);
	if ((j->dataset[0] && !sky_topic_segment_ok(j->dataset)) ||
	    (j->eval_dataset[0] && !sky_topic_segment_ok(j->eval_dataset)))
		return sky_diag_set(d, SKY_EINVAL,
				    "job %s: a data set name is 1-64 of [A-Za-z0-9_.-]", j->job);
	if (j->eval_dataset[0] && !j->dataset[0])
		return sky_diag_set(d, SKY_EINVAL, "job %s: eval_dataset needs dataset", j->job);
	for (int i = 0; j->tokenizer[i]; i++)
		if (!((j->tokenizer[i] >= '0' && j->tokenizer[i] <= '9') ||
		      (j->tokenizer[i] >= 'a' && j->tokenizer[i] <= 'f')))
			j->tokenizer[0] = 'X'; /* refused below */
	if (j->tokenizer[0] && strlen(j->tokenizer) != 8)
		j->tokenizer[0] = 'X';
	if (j->tokenizer[0] == 'X')
		return sky_diag_set(d, SKY_EINVAL,
				    "job %s: tokenizer is not 8 lower-case hex digits", j->job);
	if (j->data_owner[0])
		j->ckpt_every = 0; /* a U-shaped plan is not re-planned from checkpoints */
	if (pt && !cJSON_IsBool(pt))
		return sky_diag_set(d, SKY_EFORMAT, "job %s: plaintext_frames must be true or false",
				    j->job);
	j->plaintext = pt && cJSON_IsTrue(pt);
	/* the runtime's sky_optim_parse, which the planner does not link */
	int sgd = strcmp(j->optim, "sgd") == 0;
	if (!sgd && strcmp(j->optim, "adamw") != 0)
		return sky_diag_set(d, SKY_EINVAL, "job %s: unknown optim '%s' (adamw, sgd)", j->job,
				    j->optim);
	if ((rc = parse_fed(doc, j, d)) != 0) /* sets steps: before the warm-up's default */
		return rc;
	sky_job_req_resolve(j);
	if (j->warmup > j->steps)
		return sky_diag_set(d, SKY_ERANGE, "job %s: warmup %d is more than steps %d", j->job,
				    j->warmup, j->steps);
	return 0;
}

/* The Hugging Face model block ("model":"hf"): every number required. */
static int parse_hf(const cJSON *doc, sky_job_req *j, sky_diag *d)
{
	const cJSON *h = cJSON_GetObjectItemCaseSensitive(doc, "hf");
	int rc;
	if (!h)
		return strcmp(j->model, "hf") == 0
			       ? sky_diag_set(d, SKY_EINVAL,
					      "job %s: model hf needs its 'hf' block (the config's "
					      "sizes)",
					      j->job)
			       : 0;
	if (!cJSON_IsObject(h) || strcmp(j->model, "hf") != 0)
		return sky_diag_set(d, SKY_EFORMAT,
				    "job %s: 'hf' must be an object, with \"model\":\"hf\"", j->job);
	j->hf.on = 1;
	if ((rc = sky_json_int(h, "hidden", 1, SKY_CAPS_MAX_DIM, &j->hf.hidden, "job.hf", d)) ||
	    (rc = sky_json_int(h, "heads", 1, SKY_CAPS_MAX_DIM, &j->hf.heads, "job.hf", d)) ||
	    (rc = sky_json_int(h, "ffn", 1, SKY_CAPS_MAX_DIM, &j->hf.ffn, "job.hf", d)) ||
	    (rc = sky_json_int(h, "vocab", 1, SKY_PLAN_HF_MAX_VOCAB, &j->hf.vocab, "job.hf", d)) ||
	    (rc = sky_json_int(h, "max_pos", 1, SKY_CAPS_MAX_DIM, &j->hf.max_pos, "job.hf", d)) ||
	    (rc = sky_json_int(h, "type_vocab", 1, 1024, &j->hf.type_vocab, "job.hf", d)) ||
	    (rc = sky_json_int(h, "classes", 1, 256, &j->hf.classes, "job.hf", d)) ||
	    (rc = sky_json_int(h, "act", 0, 1, &j->hf.act, "job.hf", d)) ||
	    (rc = sky_json_num(h, "ln_eps", 0, 0.999, &j->hf.ln_eps, "job.hf", d)) ||
	    (rc = sky_json_num(h, "hidden_drop", 0, 0.999, &j->hf.hidden_drop, "job.hf", d)) ||
	    (rc = sky_json_num(h, "attn_drop", 0, 0.999, &j->hf.attn_drop, "job.hf", d)))
		return rc;
	if (j->hf.hidden % j->hf.heads != 0)
		return sky_diag_set(d, SKY_EINVAL, "job %s: hf.heads %d does not divide hidden %d",
				    j->job, j->hf.heads, j->hf.hidden);
	if (cJSON_GetObjectItemCaseSensitive(h, "init") &&
	    ((rc = sky_json_str(h, "init", j->hf.init, sizeof j->hf.init, "job.hf", d)) ||
	     !sky_plan_sha256_ok(j->hf.init)))
		return rc ? rc
			  : sky_diag_set(d, SKY_EFORMAT,
					 "job %s: hf.init must be 64 lower-case hex digits", j->job);
	return 0;
}

/* The model of a request: its preset with the request's sizes, or the
 * hf block's config. Returns 0 or SKY_EINVAL (unknown preset). */
int sky_job_req_model(const sky_job_req *r, sky_model_cfg *c)
{
	if (r->hf.on) {
		memset(c, 0, sizeof *c);
		snprintf(c->name, sizeof c->name, "hf");
		c->hidden = r->hf.hidden;
		c->heads = r->hf.heads;
		c->ffn = r->hf.ffn;
		c->layers = 1;
		c->seq = 128;
		c->batch = 8;
		c->vocab = r->hf.vocab;
		c->max_pos = r->hf.max_pos;
		c->type_vocab = r->hf.type_vocab;
		c->classes = r->hf.classes;
		c->act = r->hf.act;
		c->ln_eps = (float)r->hf.ln_eps;
		c->hidden_drop = (float)r->hf.hidden_drop;
		c->attn_drop = (float)r->hf.attn_drop;
	} else if (sky_model_preset(r->model, c) != 0) {
		return SKY_EINVAL;
	}
	if (r->layers)
		c->layers = r->layers;
	if (r->seq)
		c->seq = r->seq;
	if (r->batch)
		c->batch = r->batch;
	return 0;
}

int sky_job_req_parse(const char *buf, size_t len, sky_job_req *j, sky_diag *d)
{
	int rc;
	sky_job_req_defaults(j, NULL);
	if (!buf || len > SKY_JOB_MAX_BYTES)
		return sky_diag_set(d, SKY_ERANGE, "job: %zu bytes, limit %u", len, SKY_JOB_MAX_BYTES);
	cJSON *doc = sky_json_parse(buf, len, d);
	if (!doc)
		return SKY_EFORMAT;
	/* a look ahead at the task, for its defaults; parse_train checks it */
	const cJSON *task = cJSON_GetObjectItemCaseSensitive(doc, "task");
	if (cJSON_IsString(task))
		sky_job_req_defaults(j, task->valuestring);
	sky_model_cfg m;
	sky_algo algo;
	sky_sched sched;
	sky_objective objective;
	/* first, so that even a refusal can name the submission it answers */
	if ((rc = opt_str(doc, "submit_id", j->submit_id, sizeof j->submit_id, d)))
		goto exit;
	for (size_t i = 0; j->submit_id[i]; i++)
		if (!((j->submit_id[i] >= '0' && j->submit_id[i] <= '9') ||
		      (j->submit_id[i] >= 'a' && j->submit_id[i] <= 'f')) ||
		    (j->submit_id[i + 1] == '\0' && i < 7)) {
			j->submit_id[0] = '\0';
			rc = sky_diag_set(d, SKY_EINVAL, "job: submit_id must be 8-32 of [0-9a-f]");
			goto exit;
		}
	if ((rc = sky_json_str(doc, "job", j->job, sizeof j->job, "job", d)) ||
	    (rc = sky_json_str(doc, "model", j->model, sizeof j->model, "job", d)) ||
	    (rc = opt_int(doc, "layers", 1, SKY_PLANMSG_MAX_LAYERS, &j->layers, d)) ||
	    (rc = opt_int(doc, "seq", 1, SKY_CAPS_MAX_DIM, &j->seq, d)) ||
	    (rc = opt_int(doc, "batch", 1, SKY_CAPS_MAX_BATCH, &j->batch, d)) ||
	    (rc = opt_int(doc, "micro_batches", 1, SKY_PLANMSG_MAX_MICRO, &j->micro_batches, d)) ||
	    (rc = opt_int(doc, "min_boards", 0, SKY_REG_MAX_BOARDS, &j->min_boards, d)) ||
	    (rc = opt_str(doc, "algo", j->algo, sizeof j->algo, d)) ||
	    (rc = opt_str(doc, "sched", j->sched, sizeof j->sched, d)) ||
	    (rc = opt_str(doc, "objective", j->objective, sizeof j->objective, d)))
		goto exit;
	const cJSON *lb = cJSON_GetObjectItemCaseSensitive(doc, "link_blind");
	if (lb && !cJSON_IsBool(lb)) {
		rc = sky_diag_set(d, SKY_EFORMAT, "job: 'link_blind' must be true or false");
		goto exit;
	}
	j->link_blind = cJSON_IsTrue(lb);
	/* stage replicas: "replicas":false plans a pipeline only */
	const cJSON *rp = cJSON_GetObjectItemCaseSensitive(doc, "replicas");
	if (rp && !cJSON_IsBool(rp)) {
		rc = sky_diag_set(d, SKY_EFORMAT, "job: 'replicas' must be true or false");
		goto exit;
	}
	j->no_replicas = cJSON_IsFalse(rp);
	const cJSON *cm = cJSON_GetObjectItemCaseSensitive(doc, "choose_micro");
	if (cm && !cJSON_IsBool(cm)) {
		rc = sky_diag_set(d, SKY_EFORMAT, "job: 'choose_micro' must be true or false");
		goto exit;
	}
	j->choose_micro = cJSON_IsTrue(cm);
	if (cJSON_GetObjectItemCaseSensitive(doc, "wait_s") &&
	    (rc = sky_json_num(doc, "wait_s", 0, 3600, &j->wait_s, "job", d)))
		goto exit;
	if ((rc = parse_train(doc, j, d)) != 0 || (rc = parse_hf(doc, j, d)) != 0)
		goto exit;
	if (!sky_topic_segment_ok(j->job))
		rc = sky_diag_set(d, SKY_EINVAL, "job: id '%s' is not 1-64 of [A-Za-z0-9_.-]", j->job);
	else if (j->hf.on && (j->infer || (j->hf.init[0] && !j->train)))
		rc = sky_diag_set(d, SKY_EINVAL, "job %s: an hf model trains (task train)", j->job);
	else if (sky_job_req_model(j, &m) != 0)
		rc = sky_diag_set(d, SKY_EINVAL, "job %s: unknown model '%s' (%s)", j->job, j->model,
				  sky_model_preset_names());
	else if (sky_algo_parse(j->algo, &algo) != 0)
		rc = sky_diag_set(d, SKY_EINVAL, "job %s: unknown algo '%s' (even, sky, optimal)",
				  j->job, j->algo);
	else if (sky_sched_parse(j->sched, &sched) != 0)
		rc = sky_diag_set(d, SKY_EINVAL, "job %s: unknown sched '%s' (gpipe, 1f1b)", j->job,
				  j->sched);
	else if (sky_objective_parse(j->objective, &objective) != 0)
		rc = sky_diag_set(d, SKY_EINVAL, "job %s: unknown objective '%s' (step, bottleneck)",
				  j->job, j->objective);
exit:
	sky_json_free(doc);
	return rc;
}

int sky_job_req_encode(const sky_job_req *j, char *buf, size_t cap)
{
	char shapes[96] = "";
	int k = 0;
	/* 0 means "the preset's": leave such fields out */
	if (j->layers)
		k += snprintf(shapes + k, sizeof shapes - (size_t)k, ",\"layers\":%d", j->layers);
	if (j->seq)
		k += snprintf(shapes + k, sizeof shapes - (size_t)k, ",\"seq\":%d", j->seq);
	if (j->batch)
		snprintf(shapes + k, sizeof shapes - (size_t)k, ",\"batch\":%d", j->batch);
	char sid[64] = "";
	if (j->submit_id[0])
		snprintf(sid, sizeof sid, ",\"submit_id\":\"%s\"", j->submit_id);
	char train[720] = "";
	if (j->train) { /* %.17g: the lr a board uses is exactly the one asked for */
		int kt = snprintf(train, sizeof train,
			 ",\"task\":\"train\",\"steps\":%d,\"optim\":\"%s\",\"lr\":%.17g,"
			 "\"seed\":%d,\"warmup\":%d,\"clip\":%.17g,\"stall_s\":%g,"
			 "\"plaintext_frames\":%s,\"checkpoint_every\":%d%s%s%s",
			 j->steps, j->optim, j->lr, j->seed, j->warmup, j->clip, j->stall_s,
			 j->plaintext ? "true" : "false", j->ckpt_every,
			 j->data_owner[0] ? ",\"data_owner\":\"" : "", j->data_owner,
			 j->data_owner[0] ? "\"" : "");
		if (j->dataset[0] && kt > 0 && (size_t)kt < sizeof train)
			kt += snprintf(train + kt, sizeof train - (size_t)kt, ",\"dataset\":\"%s\"",
				       j->dataset);
		if (j->eval_dataset[0] && kt > 0 && (size_t)kt < sizeof train)
			kt += snprintf(train + kt, sizeof train - (size_t)kt,
				       ",\"eval_dataset\":\"%s\"", j->eval_dataset);
		if (j->tokenizer[0] && kt > 0 && (size_t)kt < sizeof train)
			kt += snprintf(train + kt, sizeof train - (size_t)kt, ",\"tokenizer\":\"%s\"",
				       j->tokenizer);
		if (j->dataset_sha256[0] && kt > 0 && (size_t)kt < sizeof train)
			snprintf(train + kt, sizeof train - (size_t)kt, ",\"dataset_sha256\":\"%s\"",
				 j->dataset_sha256);
	}
	char infer[SKY_JOB_MAX_CLIENTS * 68 + 256] = "";
	if (j->infer) {
		int k2 = snprintf(infer, sizeof infer,
				  ",\"task\":\"infer\",\"weights\":\"%s\",\"wait_ms\":%d,\"queue\":%d",
				  j->weights, j->wait_ms, j->queue);
		if (j->serve_batch)
			k2 += snprintf(infer + k2, sizeof infer - (size_t)k2, ",\"serve_batch\":%d",
				       j->serve_batch);
		if (j->no_replan)
			k2 += snprintf(infer + k2, sizeof infer - (size_t)k2, ",\"replan\":false");
		if (j->tokenizer[0])
			k2 += snprintf(infer + k2, sizeof infer - (size_t)k2, ",\"tokenizer\":\"%s\"",
				       j->tokenizer);
		if (j->n_clients)
			k2 += snprintf(infer + k2, sizeof infer - (size_t)k2, ",\"clients\":[");
		for (int i = 0; i < j->n_clients && k2 > 0 && (size_t)k2 < sizeof infer; i++)
			k2 += snprintf(infer + k2, sizeof infer - (size_t)k2, "%s\"%s\"", i ? "," : "",
				       j->clients[i]);
		if (j->n_clients && k2 > 0 && (size_t)k2 < sizeof infer)
			snprintf(infer + k2, sizeof infer - (size_t)k2, "]");
	}
	char fed[SKY_JOB_MAX_FED_OWNERS * 68 + 512];
	encode_fed(j, fed, sizeof fed);
	char hf[512] = "";
	if (j->hf.on) {
		int kh = snprintf(hf, sizeof hf,
				  ",\"hf\":{\"hidden\":%d,\"heads\":%d,\"ffn\":%d,\"vocab\":%d,"
				  "\"max_pos\":%d,\"type_vocab\":%d,\"classes\":%d,\"act\":%d,"
				  "\"ln_eps\":%.17g,\"hidden_drop\":%.17g,\"attn_drop\":%.17g",
				  j->hf.hidden, j->hf.heads, j->hf.ffn, j->hf.vocab, j->hf.max_pos,
				  j->hf.type_vocab, j->hf.classes, j->hf.act, j->hf.ln_eps,
				  j->hf.hidden_drop, j->hf.attn_drop);
		if (kh > 0 && (size_t)kh < sizeof hf)
			snprintf(hf + kh, sizeof hf - (size_t)kh, "%s%s%s}",
				 j->hf.init[0] ? ",\"init\":\"" : "", j->hf.init,
				 j->hf.init[0] ? "\"" : "");
	}
	int n = snprintf(buf, cap,
			 "{\"job\":\"%s\",\"model\":\"%s\"%s,\"micro_batches\":%d,\"algo\":\"%s\","
			 "\"sched\":\"%s\",\"objective\":\"%s\",\"min_boards\":%d,\"wait_s\":%g"
			 "%s%s%s%s%s%s%s%s}",
			 j->job, j->model, shapes, j->micro_batches, j->algo, j->sched, j->objective,
			 j->min_boards, j->wait_s, j->link_blind ? ",\"link_blind\":true" : "", sid,
			 train, infer, j->no_replicas ? ",\"replicas\":false" : "",
			 j->choose_micro ? ",\"choose_micro\":true" : "", fed, hf);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : n;
}

int sky_job_reply_encode(const sky_job_reply *r, char *buf, size_t cap)
{
	cJSON *doc = sky_json_new_object();
	int ok = doc && cJSON_AddNumberToObject(doc, "v", 1) &&
		 cJSON_AddStringToObject(doc, "submit_id", r->submit_id) &&
		 cJSON_AddStringToObject(doc, "job", r->job) && cJSON_AddBoolToObject(doc, "ok", r->ok);
	if (ok)
		ok = r->ok ? cJSON_AddStringToObject(doc, "state", r->state) != NULL
			   : cJSON_AddStringToObject(doc, "error", r->error) != NULL;
	int n = ok ? sky_json_print(doc, buf, cap < SKY_JOB_REPLY_MAX_BYTES ? cap : SKY_JOB_REPLY_MAX_BYTES)
		   : SKY_ERANGE;
	sky_json_free(doc);
	return n;
}

int sky_job_reply_decode(const char *buf, size_t len, sky_job_reply *r, sky_diag *d)
{
	memset(r, 0, sizeof *r);
	if (!buf || len > SKY_JOB_REPLY_MAX_BYTES)
		return sky_diag_set(d, SKY_ERANGE, "job reply: %zu bytes, limit %u", len,
				    SKY_JOB_REPLY_MAX_BYTES);
	cJSON *doc = sky_json_parse(buf, len, d);
	if (!doc)
		return SKY_EFORMAT;
	const cJSON *ok = cJSON_GetObjectItemCaseSensitive(doc, "ok");
	int rc = sky_json_str(doc, "submit_id", r->submit_id, sizeof r->submit_id, "job reply", d);
	if (!rc)
		rc = sky_json_str(doc, "job", r->job, sizeof r->job, "job reply", d);
	if (!rc && !cJSON_IsBool(ok))
		rc = sky_diag_set(d, SKY_EFORMAT, "job reply: field 'ok' must be true or false");
	if (!rc) {
		r->ok = cJSON_IsTrue(ok);
		rc = r->ok ? sky_json_str(doc, "state", r->state, sizeof r->state, "job reply", d)
			   : sky_json_str(doc, "error", r->error, sizeof r->error, "job reply", d);
	}
	sky_json_free(doc);
	return rc == SKY_ENOTFOUND ? SKY_EFORMAT : rc;
}
