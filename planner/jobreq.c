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
	sky_job_req_resolve(j);
	if (j->warmup > j->steps)
		return sky_diag_set(d, SKY_ERANGE, "job %s: warmup %d is more than steps %d", j->job,
				    j->warmup, j->steps);
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
	if (cJSON_GetObjectItemCaseSensitive(doc, "wait_s") &&
	    (rc = sky_json_num(doc, "wait_s", 0, 3600, &j->wait_s, "job", d)))
		goto exit;
	if ((rc = parse_train(doc, j, d)) != 0)
		goto exit;
	if (!sky_topic_segment_ok(j->job))
		rc = sky_diag_set(d, SKY_EINVAL, "job: id '%s' is not 1-64 of [A-Za-z0-9_.-]", j->job);
	else if (sky_model_preset(j->model, &m) != 0)
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
	int n = snprintf(buf, cap,
			 "{\"job\":\"%s\",\"model\":\"%s\"%s,\"micro_batches\":%d,\"algo\":\"%s\","
			 "\"sched\":\"%s\",\"objective\":\"%s\",\"min_boards\":%d,\"wait_s\":%g%s%s%s%s%s}",
			 j->job, j->model, shapes, j->micro_batches, j->algo, j->sched, j->objective,
			 j->min_boards, j->wait_s, j->link_blind ? ",\"link_blind\":true" : "", sid,
			 train, infer, j->no_replicas ? ",\"replicas\":false" : "");
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
