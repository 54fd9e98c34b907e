/* sky job submit: hands a job to skyplan over MQTT
 * (sky/v1/jobs/<operator CN>/submit), connected with the operator identity
 * from the PKI directory, and waits for the planner's answer on
 * sky/v1/jobs/<operator CN>/reply, sending again (same submit_id, so the
 * planner queues it once) until it comes or --ack-timeout runs out; with
 * --wait it then follows the job until every stage's board has
 * acknowledged the plan. sky job cancel asks skyplan to stop a job of this
 * operator's (sky/v1/jobs/<operator CN>/cancel, answered on .../reply).
 * sky job watch and sky job collect are in job_follow.c. */
#include "job_data.h"
#include "job_follow.h"
#include "job_frame.h"
#include "job_upload.h"
#include "sky_bert.h"
#include "sky_chunk.h"
#include "sky_caps.h"
#include "sky_cli.h"
#include "sky_clock.h"
#include "sky_err.h"
#include "sky_fedclient.h"
#include "sky_file.h"
#include "sky_hfmodel.h"
#include "sky_json.h"
#include "sky_log.h"
#include "sky_mqtt.h"
#include "sky_opt.h"
#include "sky_planmsg.h"
#include "sky_service.h"
#include "sky_sign.h"
#include "sky_thread.h"
#include "sky_tokenizer.h"
#include "sky_topics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ACKS 1024

typedef struct follow {
	sky_mutex lock;
	mbedtls_x509_crt planner;
	char plan_topic[SKY_TOPIC_BUF];
	char reply_topic[SKY_TOPIC_BUF];
	char submit_id[33];
	int answered;
	sky_job_reply reply;
	int have_plan;
	sky_planmsg plan;
	double plan_at;
	char payload[SKY_SIGN_MAX_PAYLOAD + 1];
	int n_acks;
	sky_planack acks[MAX_ACKS];
	double ack_at[MAX_ACKS];
} follow;

static follow g_f;

static void on_msg(void *ctx, const char *topic, size_t tl, const unsigned char *p, size_t len,
		   int retained)
{
	follow *f = ctx;
	sky_diag d;
	sky_diag_clear(&d);
	if (strlen(topic) != tl)
		return;
	sky_mutex_lock(&f->lock);
	if (strcmp(topic, f->reply_topic) == 0) {
		sky_job_reply r;
		/* a late answer to an earlier submission is not ours */
		if (!f->answered && sky_job_reply_decode((const char *)p, len, &r, &d) == 0 &&
		    strcmp(r.submit_id, f->submit_id) == 0) {
			f->reply = r;
			f->answered = 1;
		}
	} else if (strcmp(topic, f->plan_topic) == 0) {
		size_t plen = 0;
		/* a retained delivery is the plan from before this submission */
		if (!retained &&
		    sky_verify_envelope(&f->planner, (const char *)p, len, f->payload,
					sizeof f->payload, &plen, &d) == 0 &&
		    sky_planmsg_decode(f->payload, plen, &f->plan, &d) == 0) {
			f->have_plan = 1;
			f->plan_at = sky_clock_s();
		} else if (!retained) {
			fprintf(stderr, "sky job: plan on %s does not verify: %s\n", topic, d.msg);
		}
	} else if (f->n_acks < MAX_ACKS) {
		sky_planack a;
		if (sky_planack_decode((const char *)p, len, &a, NULL) == 0) {
			f->ack_at[f->n_acks] = sky_clock_s();
			f->acks[f->n_acks++] = a;
		}
	}
	sky_mutex_unlock(&f->lock);
}

/* The newest ack from board for (job, epoch), or NULL. */
static const sky_planack *find_ack(const follow *f, const char *board, const char *job,
				   int64_t epoch, double *at)
{
	for (int i = f->n_acks - 1; i >= 0; i--)
		if (!strcmp(f->acks[i].board, board) && !strcmp(f->acks[i].job, job) &&
		    f->acks[i].epoch == epoch) {
			*at = f->ack_at[i];
			return &f->acks[i];
		}
	return NULL;
}

static int upload_answered(void *ctx)
{
	follow *f = ctx;
	sky_mutex_lock(&f->lock);
	int a = f->answered;
	sky_mutex_unlock(&f->lock);
	return a;
}

/* Uploads the model and waits for the planner's answer, which carries the
 * first 32 hex digits of the model's hash as its submit_id. Returns 0 once
 * the planner holds the model, SKY_ENET (connection: try again), or an
 * error with d saying why (its refusal, or no answer in ack_s). */
static int upload_phase(follow *f, sky_mqtt *m, const char *op, const char *path,
			const unsigned char sha[32], sky_upload_opts *uo, double ack_s,
			const char *submit_id, int json, sky_diag *d)
{
	char topic[SKY_TOPIC_BUF], hex[65];
	sky_sha256_hex(sha, hex);
	if (sky_topic_jobs(topic, sizeof topic, op, SKY_TOPIC_WEIGHTS) != 0)
		return sky_diag_set(d, SKY_EINVAL, "no weights topic for %s", op);
	sky_mutex_lock(&f->lock);
	f->answered = 0;
	snprintf(f->submit_id, sizeof f->submit_id, "%.32s", hex);
	sky_mutex_unlock(&f->lock);
	uo->answered = upload_answered;
	uo->ctx = f;
	double t0 = sky_clock_s(), again = 0;
	int sent = 0;
	/* the chunks are not retained: a planner that was not listening (just
	 * starting, restarting) never answers, so the upload goes again */
	while (!upload_answered(f) && sky_clock_s() - t0 < ack_s && sky_mqtt_connected(m)) {
		if (sky_clock_s() >= again) {
			if (again > 0 && !json)
				fprintf(stderr, "sky job submit: no answer to the upload yet; sending the "
						"model again\n");
			int n = sky_upload(m, topic, path, sha, uo, d);
			if (n < 0)
				return n;
			sent += n;
			sky_mqtt_flush(m, 10000);
			again = sky_clock_s() + 5.0;
		}
		sky_mqtt_poll(m, 20);
	}
	int rc = 0;
	sky_mutex_lock(&f->lock);
	if (!f->answered)
		rc = sky_mqtt_connected(m)
			     ? sky_diag_set(d, SKY_ETIMEOUT,
					    "no answer to the model upload from the planner within %g s "
					    "(is skyplan running?)",
					    ack_s)
			     : SKY_ENET;
	else if (!f->reply.ok)
		rc = sky_diag_set(d, SKY_EINVAL, "the planner refused the model: %s", f->reply.error);
	f->answered = 0;
	snprintf(f->submit_id, sizeof f->submit_id, "%s", submit_id);
	sky_mutex_unlock(&f->lock);
	if (!rc && !json)
		fprintf(stderr, "sky job submit: model %.16s.. held by the planner (%d chunk%s sent in "
				"%.2f s)\n",
			hex, sent, sent == 1 ? "" : "s", sky_clock_s() - t0);
	return rc;
}

static void usage(FILE *to)
{
	fprintf(to,
		"usage: sky job submit --pki DIR --broker HOST:PORT (--model NAME | --file JOB.json)\n"
		"                      [--job ID] [--layers L] [--seq S] [--batch B]\n"
		"                      [--micro-batches M] [--algo even|sky|optimal] [--sched gpipe|1f1b]\n"
		"                      [--objective step|bottleneck] [--link-blind] [--no-replicas] [--choose-micro]\n"
		"                      [--min-boards N] [--wait-boards-s S] [--wait SECONDS]\n"
		"                      [--ack-timeout SECONDS] [--json]\n"
		"                      [--task train --steps N --micro M --optimizer adamw|sgd --lr X\n"
		"                       --seed S --warmup W --clip C --stall-s S --plaintext-frames\n"
		"                       --checkpoint-every K --data-owner BOARD\n"
		"                       --dataset NAME [--eval-dataset NAME] [--model-dir D]\n"
		"                       [--dataset-sha256 HEX]]\n"
		"                      [--task infer --weights F.safetensors [--batch B] [--wait-ms W]\n"
		"                       [--queue Q] [--clients a,b] [--chunk-bytes N] [--no-replan]\n"
		"                       [--tokenizer DIR]]\n"
		"                      [--task train --federated --model-dir D --dataset NAME\n"
		"                       --owners b1,b2 | --owners-all --rounds R --local-steps E\n"
		"                       [--fraction F] [--min-owners N] [--deadline-s T]\n"
		"                       [--straggler wait|close] [--server-opt fedavg|fedavgm|fedadam]\n"
		"                       [--server-lr X] [--prox-mu MU] [--dp-clip C --dp-noise Z]\n"
		"                       [--init-weights]]   (docs/federation.md)\n"
		"       sky job watch JOB --pki DIR --broker HOST:PORT [--timeout S] [--json]\n"
		"       sky job watch JOB --federated ...   one line per round\n"
		"       sky job collect JOB --out-dir D ... a federated job's model, a HF directory\n"
		"       sky job collect JOB --pki DIR --broker HOST:PORT --out F.safetensors [--timeout S]\n"
		"       sky job cancel --job JOB --pki DIR --broker HOST:PORT [--ack-timeout S] [--json]\n"
		"Publishes the job on sky/v1/jobs/<operator>/submit as the operator identity\n"
		"(DIR/operator.crt and operator.key with DIR/ca.crt: the PKI directory, or a\n"
		"bundle from `sky pki operator`) and waits for skyplan's answer on\n"
		"sky/v1/jobs/<operator>/reply, sending again every 2 s (and reconnecting) until\n"
		"it comes; no answer within --ack-timeout (default 30 s) or a refusal exits 1\n"
		"with the reason. skyplan plans the job once min-boards online boards (default\n"
		"all) have reported at its shapes (at most --wait-boards-s later, default 30)\n"
		"and publishes the signed plan. With --wait, follows the plan and each stage's\n"
		"plan-ack for up to SECONDS more (plans verified with DIR/planner.crt) and\n"
		"exits 0 only if every stage's board accepted it. A training job with\n"
		"--checkpoint-every is re-planned by skyplan when a board refuses its role for\n"
		"memory; --wait then follows the new plan too, and its boards' answers count.\n"
		"--task train makes the fleet train: the boards run --steps optimizer steps of\n"
		"--micro micro-batches under --sched, with `sky train`'s optimizer, seed, warm-up\n"
		"and clip (same defaults), frames AES-GCM sealed unless --plaintext-frames;\n"
		"--stall-s bounds the wait for one frame (default 10 x the predicted step + 30 s).\n"
		"--task infer makes the fleet serve the model in F: an int8 file from `sky\n"
		"quantize`, or an fp32 one from `sky train --save`, quantised first the same way\n"
		"(8 calibration micro-batches, seed 1). --model and --layers default to the\n"
		"file's. The int8 model is uploaded to skyplan in chunks of --chunk-bytes (default\n"
		"256 KiB), each with its SHA-256, on sky/v1/jobs/<operator>/weights; skyplan\n"
		"verifies and stores it, and the job names it by its SHA-256. skyplan plans on\n"
		"the boards' int8 times and sends each board its slice. --batch: requests per\n"
		"micro-batch (at most the model's batch, default it); --wait-ms: the first\n"
		"stage's wait for a batch to fill (default 2); --queue: its request queue\n"
		"(default 64); --clients: the client names (or sky-client-* CNs) allowed (default\n"
		"any). A board of the plan that dies or is revoked re-plans the job over the\n"
		"boards left, and the requests it had not answered are replayed to the new first\n"
		"stage; --no-replan leaves the plan waiting for the board instead.\n"
		"--tokenizer DIR: the model's Hugging Face directory (vocab.txt or\n"
		"tokenizer.json); its tokenizer's hash goes into the job and its plan, and `sky\n"
		"infer --model-dir D --text ...` refuses a directory whose tokenizer differs.\n"
		"Tests: --corrupt-chunk N damages chunk N after hashing it,\n"
		"--claim-sha256 HEX names another hash than the file's.\n"
		"--checkpoint-every K (default 0: off; a job file's default is 10): every K steps\n"
		"and after the last, each stage sends its weights and optimizer state to skyplan's\n"
		"checkpoint store; a board that dies then re-plans the job over the others from the\n"
		"last complete one.\n"
		"--link-blind has skyplan plan as if every board were in one site (for comparison).\n"
		"--no-replicas (training): optimal plans a pipeline only, one board a stage at the\n"
		"job's --batch and --micro; by default it may run a stage on several boards at once\n"
		"(stage replicas), at the job's --batch (micro-batch size).\n"
		"--choose-micro (training): with replicas, the planner also chooses the micro-batch\n"
		"size and count (B x M = batch x micro); its cost model is linear in B, so small B\n"
		"can run slower than predicted (docs/training.md).\n"
		"--data-owner BOARD keeps the job's data on BOARD: a U-shaped plan gives it the\n"
		"embeddings and first layers and the last layers, head, labels and loss; the\n"
		"other boards see only sealed activations (with the attention mask) and\n"
		"gradients. Planned with even or optimal; no checkpoints.\n"
		"--dataset NAME names a data set boards hold (skyd --dataset; sky fleet status\n"
		"lists them): the stage that reads it (the first, or the data owner's two) goes\n"
		"on a board holding it (and --eval-dataset's set); --model-dir D's tokenizer must\n"
		"be the one that prepared it, and --dataset-sha256 names the set's file (its\n"
		"sha256sum). No board holding it, another tokenizer or file: refused with the\n"
		"reason. (Boards do not train on such a set yet: they refuse the plan.)\n"
		"watch prints one line per step (loss, step time, predicted, busy per stage) until\n"
		"the job ends (exit 0) or stalls (exit 1). collect gathers every stage's part\n"
		"into one safetensors file with HuggingFace names, which `sky eval` reads.\n"
		"Only the operator that submitted a job id may submit it again, watch, collect\n"
		"or cancel it: another's submit is refused with the reason, and skyplan relays\n"
		"a job's metrics, parts and last state only to its owner\n"
		"(sky/v1/jobs/<operator>/job/<job>/...). watch on a job that has ended prints\n"
		"its last state and exits (0 if it was done).\n"
		"cancel stops a job: skyplan takes it out of its queue, no longer re-plans or\n"
		"follows it, frees its boards for other jobs and clears what it relayed.\n"
		"All four connect as the operator to the listener beside the fleet's (the\n"
		"broker's port + 1), with random client ids, so they may run at once.\n");
}

/* One `sky job submit`: its options, the request, the connection, and what
 * came back. */
typedef struct submit {
	sky_job_req j;
	const char *pki, *broker, *file, *weights, *clients;
	const char *model_dir; /* --model-dir: the tokenizer a data set must have been prepared with */
	int link_blind, json;
	int no_replicas; /* --no-replicas */
	int choose_micro; /* --choose-micro */
	double wait_s, ack_s;
	long batch; /* the model's micro-batch, or for infer the served batch */
	sky_upload_opts uo;
	/* an infer job's int8 model, uploaded before the request */
	char int8_path[600], tmp_path[600];
	int made_tmp;
	unsigned char wsha[32];
	/* the request, and the randomness naming it (8 bytes) and our client (4) */
	char doc[SKY_JOB_MAX_BYTES + 1];
	int n;
	unsigned char raw[12];
	/* the connection */
	char ca[600], crt[600], key[600], client[48], op[80];
	char submit_topic[SKY_TOPIC_BUF], tools_broker[300];
	sky_mqtt_opts mo;
	sky_mqtt *m;
	int sends;
} submit;

/* The defaults of a request on the command line: the planner's, and for
 * training `sky train`'s (lr and warm-up are filled in once the optimizer
 * and steps are known). */
static void submit_defaults(submit *s)
{
	memset(s, 0, sizeof *s);
	/* skyplan's defaults for a job document (planner/sky_jobreq.h), for
	 * either task: the task comes later, from the options */
	sky_job_req_defaults(&s->j, "*");
	/* from the command line a training job checkpoints only when asked
	 * (--checkpoint-every), as it always has; a job file leaves it at 10 */
	s->j.ckpt_every = 0;
	s->ack_s = 30;
	s->uo.corrupt_chunk = -1;
	s->uo.progress = 1;
}

enum {
	O_PKI = SKY_OPT_FIRST, O_BROKER, O_FILE, O_JOB, O_MODEL, O_ALGO, O_SCHED, O_OBJECTIVE,
	O_LAYERS, O_SEQ, O_BATCH, O_TASK, O_STEPS, O_OPTIM, O_LR, O_SEED, O_WARMUP, O_CLIP,
	O_STALL, O_MICRO, O_MIN_BOARDS, O_WAIT_BOARDS, O_ACK, O_WAIT, O_JSON, O_PLAINTEXT,
	O_WEIGHTS, O_WAIT_MS, O_QUEUE, O_CLIENTS, O_CHUNK, O_CORRUPT, O_CLAIM, O_CKPT, O_LINK_BLIND,
	O_NO_REPLICAS, O_CHOOSE_MICRO,
	O_OWNER, O_NO_REPLAN, O_DATASET, O_EVAL_DATASET, O_MODEL_DIR, O_DATASET_SHA, O_TOKENIZER,
	/* federated training (opt_fed) */
	O_FEDERATED, O_OWNERS, O_OWNERS_ALL, O_ROUNDS, O_LOCAL_STEPS, O_FRACTION, O_MIN_OWNERS,
	O_DEADLINE, O_STRAGGLER, O_SERVER_OPT, O_SERVER_LR, O_PROX_MU, O_SECURE, O_DP_CLIP,
	O_DP_NOISE, O_INIT_WEIGHTS
};
static const struct option k_submit_opts[] = {
	{"pki", required_argument, NULL, O_PKI},
	{"broker", required_argument, NULL, O_BROKER},
	{"file", required_argument, NULL, O_FILE},
	{"job", required_argument, NULL, O_JOB},
	{"model", required_argument, NULL, O_MODEL},
	{"algo", required_argument, NULL, O_ALGO},
	{"sched", required_argument, NULL, O_SCHED},
	{"objective", required_argument, NULL, O_OBJECTIVE},
	{"layers", required_argument, NULL, O_LAYERS},
	{"seq", required_argument, NULL, O_SEQ},
	{"batch", required_argument, NULL, O_BATCH},
	{"task", required_argument, NULL, O_TASK},
	{"steps", required_argument, NULL, O_STEPS},
	{"optimizer", required_argument, NULL, O_OPTIM},
	{"optim", required_argument, NULL, O_OPTIM},
	{"lr", required_argument, NULL, O_LR},
	{"seed", required_argument, NULL, O_SEED},
	{"warmup", required_argument, NULL, O_WARMUP},
	{"clip", required_argument, NULL, O_CLIP},
	{"stall-s", required_argument, NULL, O_STALL},
	{"micro-batches", required_argument, NULL, O_MICRO},
	{"micro", required_argument, NULL, O_MICRO},
	{"min-boards", required_argument, NULL, O_MIN_BOARDS},
	{"wait-boards-s", required_argument, NULL, O_WAIT_BOARDS},
	{"ack-timeout", required_argument, NULL, O_ACK},
	{"wait", required_argument, NULL, O_WAIT},
	{"json", no_argument, NULL, O_JSON},
	{"plaintext-frames", no_argument, NULL, O_PLAINTEXT},
	{"weights", required_argument, NULL, O_WEIGHTS},
	{"wait-ms", required_argument, NULL, O_WAIT_MS},
	{"queue", required_argument, NULL, O_QUEUE},
	{"clients", required_argument, NULL, O_CLIENTS},
	{"chunk-bytes", required_argument, NULL, O_CHUNK},
	{"corrupt-chunk", required_argument, NULL, O_CORRUPT},
	{"claim-sha256", required_argument, NULL, O_CLAIM},
	{"checkpoint-every", required_argument, NULL, O_CKPT},
	{"no-replan", no_argument, NULL, O_NO_REPLAN},
	{"dataset", required_argument, NULL, O_DATASET},
	{"eval-dataset", required_argument, NULL, O_EVAL_DATASET},
	{"model-dir", required_argument, NULL, O_MODEL_DIR},
	{"dataset-sha256", required_argument, NULL, O_DATASET_SHA},
	{"tokenizer", required_argument, NULL, O_TOKENIZER},
	{"link-blind", no_argument, NULL, O_LINK_BLIND},
	{"no-replicas", no_argument, NULL, O_NO_REPLICAS},
	{"choose-micro", no_argument, NULL, O_CHOOSE_MICRO},
	{"data-owner", required_argument, NULL, O_OWNER},
	/* federated training */
	{"federated", no_argument, NULL, O_FEDERATED},
	{"owners", required_argument, NULL, O_OWNERS},
	{"owners-all", no_argument, NULL, O_OWNERS_ALL},
	{"rounds", required_argument, NULL, O_ROUNDS},
	{"local-steps", required_argument, NULL, O_LOCAL_STEPS},
	{"fraction", required_argument, NULL, O_FRACTION},
	{"min-owners", required_argument, NULL, O_MIN_OWNERS},
	{"deadline-s", required_argument, NULL, O_DEADLINE},
	{"straggler", required_argument, NULL, O_STRAGGLER},
	{"server-opt", required_argument, NULL, O_SERVER_OPT},
	{"server-lr", required_argument, NULL, O_SERVER_LR},
	{"prox-mu", required_argument, NULL, O_PROX_MU},
	{"secure-agg", no_argument, NULL, O_SECURE},
	{"dp-clip", required_argument, NULL, O_DP_CLIP},
	{"dp-noise", required_argument, NULL, O_DP_NOISE},
	{"init-weights", no_argument, NULL, O_INIT_WEIGHTS},
	SKY_OPT_STD,
	{0}};

#define SUBMIT_CMD "job submit"
#define NOT_MINE 1 /* an option for the next opt_* function */

/* The options' functions below take one option c (name a, value val) into
 * s. They return 0, NOT_MINE, or non-zero after saying what is wrong. */

/* Training settings. */
static int opt_train(submit *s, int c, const char *a, const char *val)
{
	sky_job_req *j = &s->j;
	long v;
	int rc = 0;
	switch (c) {
	case O_PLAINTEXT:
		j->plaintext = 1;
		break;
	case O_OPTIM:
		snprintf(j->optim, sizeof j->optim, "%s", val);
		break;
	case O_STEPS:
		if (!(rc = sky_cli_int(SUBMIT_CMD, a, val, 1, SKY_PLANMSG_MAX_STEPS, &v)))
			j->steps = (int)v;
		break;
	case O_LR:
		rc = sky_cli_double(SUBMIT_CMD, a, val, 1e-9, 100, &j->lr);
		break;
	case O_SEED:
		if (!(rc = sky_cli_int(SUBMIT_CMD, a, val, 0, 0x7fffffffL, &v)))
			j->seed = (int)v;
		break;
	case O_WARMUP:
		if (!(rc = sky_cli_int(SUBMIT_CMD, a, val, 0, SKY_PLANMSG_MAX_STEPS, &v)))
			j->warmup = (int)v;
		break;
	case O_CLIP:
		rc = sky_cli_double(SUBMIT_CMD, a, val, 0, 1e9, &j->clip);
		break;
	case O_STALL:
		rc = sky_cli_double(SUBMIT_CMD, a, val, 0, 1e5, &j->stall_s);
		break;
	case O_CKPT:
		if (!(rc = sky_cli_int(SUBMIT_CMD, a, val, 0, SKY_PLANMSG_MAX_STEPS, &v)))
			j->ckpt_every = (int)v;
		break;
	case O_OWNER:
		if (!sky_topic_segment_ok(val)) {
			fprintf(stderr, "sky job submit: --data-owner %s is not a board id\n", val);
			return 2;
		}
		snprintf(j->data_owner, sizeof j->data_owner, "%s", val);
		break;
	case O_DATASET:
	case O_EVAL_DATASET:
		if (!sky_topic_segment_ok(val)) {
			fprintf(stderr, "sky job submit: %s %s is not a data set name (1-64 of "
					"[A-Za-z0-9_.-])\n", a, val);
			return 2;
		}
		snprintf(c == O_DATASET ? j->dataset : j->eval_dataset, sizeof j->dataset, "%s", val);
		break;
	case O_MODEL_DIR:
		s->model_dir = val;
		break;
	case O_DATASET_SHA:
		if (strlen(val) != 64 || strspn(val, "0123456789abcdef") != 64) {
			fprintf(stderr, "sky job submit: --dataset-sha256 expects 64 lower-case hex "
					"digits (sha256sum of the set's file)\n");
			return 2;
		}
		snprintf(j->dataset_sha256, sizeof j->dataset_sha256, "%s", val);
		break;
	default:
		return NOT_MINE;
	}
	return rc;
}

/* Federated training's settings (planner/sky_jobreq.h "federated"). */
static int g_init_weights; /* --init-weights: the bundle's weights from the seed */
static int opt_fed(submit *s, int c, const char *a, const char *val)
{
	sky_job_req *j = &s->j;
	long v;
	int rc = 0;
	switch (c) {
	case O_FEDERATED:
		j->fed.on = 1;
		break;
	case O_OWNERS:
		for (const char *p = val; *p;) {
			size_t n = strcspn(p, ",");
			if (j->fed.n_owners >= SKY_JOB_MAX_FED_OWNERS || n == 0 ||
			    n >= sizeof j->fed.owners[0]) {
				fprintf(stderr, "sky job submit: --owners takes up to %d board ids\n",
					SKY_JOB_MAX_FED_OWNERS);
				return 2;
			}
			snprintf(j->fed.owners[j->fed.n_owners++], sizeof j->fed.owners[0], "%.*s",
				 (int)n, p);
			p += n + (p[n] == ',');
		}
		break;
	case O_OWNERS_ALL:
		j->fed.all_owners = 1;
		break;
	case O_ROUNDS:
		if (!(rc = sky_cli_int(SUBMIT_CMD, a, val, 1, 100000, &v)))
			j->fed.rounds = (int)v;
		break;
	case O_LOCAL_STEPS:
		if (!(rc = sky_cli_int(SUBMIT_CMD, a, val, 1, 1000000, &v)))
			j->fed.local_steps = (int)v;
		break;
	case O_FRACTION:
		rc = sky_cli_double(SUBMIT_CMD, a, val, 1e-6, 1, &j->fed.fraction);
		break;
	case O_MIN_OWNERS:
		if (!(rc = sky_cli_int(SUBMIT_CMD, a, val, 1, SKY_JOB_MAX_FED_OWNERS, &v)))
			j->fed.min_owners = (int)v;
		break;
	case O_DEADLINE:
		rc = sky_cli_double(SUBMIT_CMD, a, val, 0, 86400, &j->fed.deadline_s);
		break;
	case O_STRAGGLER:
		if (strcmp(val, "wait") && strcmp(val, "close")) {
			fprintf(stderr, "sky job submit: --straggler wait or close, got '%s'\n", val);
			return 2;
		}
		j->fed.straggler_close = val[0] == 'c';
		break;
	case O_SERVER_OPT: /* fedavg, fedavgm, fedadam (or avg, avgm, adam) */
		snprintf(j->fed.server_opt, sizeof j->fed.server_opt, "%s",
			 strncmp(val, "fed", 3) == 0 ? val + 3 : val);
		break;
	case O_SERVER_LR:
		rc = sky_cli_double(SUBMIT_CMD, a, val, 0, 100, &j->fed.server_lr);
		break;
	case O_PROX_MU:
		rc = sky_cli_double(SUBMIT_CMD, a, val, 0, 1e6, &j->fed.prox_mu);
		break;
	case O_SECURE:
		j->fed.secure = 1;
		break;
	case O_DP_CLIP:
		rc = sky_cli_double(SUBMIT_CMD, a, val, 0, 1e9, &j->fed.dp_clip);
		break;
	case O_DP_NOISE:
		rc = sky_cli_double(SUBMIT_CMD, a, val, 0, 1e6, &j->fed.dp_noise);
		break;
	case O_INIT_WEIGHTS:
		g_init_weights = 1;
		break;
	default:
		return NOT_MINE;
	}
	return rc;
}

/* A federated job: the checks of its options, and its model bundled from
 * --model-dir into a temporary file that is uploaded like an infer job's
 * model (its SHA-256 names it in the request). Returns -1 to go on, or the
 * exit code after saying why not. */
static int submit_fed(submit *s)
{
	sky_job_req *j = &s->j;
	if (!j->fed.on)
		return -1;
	if (!j->train || !s->model_dir || !j->dataset[0] || !j->fed.rounds ||
	    !j->fed.local_steps || (!j->fed.n_owners && !j->fed.all_owners)) {
		fprintf(stderr, "sky job submit: --federated needs --task train, --model-dir D, "
				"--dataset NAME, --owners b1,b2 (or --owners-all), --rounds R and "
				"--local-steps E\n");
		return 2;
	}
	if (j->fed.n_owners && j->fed.all_owners) {
		fprintf(stderr, "sky job submit: --owners or --owners-all, not both\n");
		return 2;
	}
	if (!j->fed.fraction)
		j->fed.fraction = 1;
	if (!j->fed.min_owners)
		j->fed.min_owners = 1;
	if (!j->fed.server_opt[0])
		snprintf(j->fed.server_opt, sizeof j->fed.server_opt, "avg");
	if (!j->model[0])
		snprintf(j->model, sizeof j->model, "tiny"); /* unused: the shapes are the bundle's */
	j->steps = j->fed.rounds * j->fed.local_steps;
	unsigned char *b = NULL;
	size_t len = 0;
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_fedclient_bundle_dir(s->model_dir, g_init_weights, j->seed, &b, &len, &d) != 0) {
		fprintf(stderr, "sky job submit: --model-dir %s: %s\n", s->model_dir, d.msg);
		return 2;
	}
	const char *tmpdir = getenv("TMPDIR");
	snprintf(s->tmp_path, sizeof s->tmp_path, "%s/sky-submit-%ld.fedmodel",
		 tmpdir && *tmpdir ? tmpdir : "/tmp", (long)sky_clock_unix() ^ (long)(size_t)b);
	int rc = sky_file_write(s->tmp_path, b, len, 0600);
	free(b);
	if (rc) {
		fprintf(stderr, "sky job submit: cannot write %s: %s\n", s->tmp_path,
			sky_strerror(rc));
		return 1;
	}
	s->made_tmp = 1;
	snprintf(s->int8_path, sizeof s->int8_path, "%s", s->tmp_path);
	if (sky_upload_sha(s->int8_path, &s->uo, s->wsha, &d) != 0) {
		fprintf(stderr, "sky job submit: %s\n", d.msg);
		return 1;
	}
	sky_sha256_hex(s->wsha, j->fed.model);
	return -1;
}

/* Serving settings, and the model upload's. */
static int opt_infer(submit *s, int c, const char *a, const char *val)
{
	sky_job_req *j = &s->j;
	long v;
	int rc = 0;
	switch (c) {
	case O_WEIGHTS:
		s->weights = val;
		break;
	case O_WAIT_MS:
		if (!(rc = sky_cli_int(SUBMIT_CMD, a, val, 0, SKY_PLAN_MAX_WAIT_MS, &v)))
			j->wait_ms = (int)v;
		break;
	case O_QUEUE:
		if (!(rc = sky_cli_int(SUBMIT_CMD, a, val, 1, SKY_PLAN_MAX_QUEUE, &v)))
			j->queue = (int)v;
		break;
	case O_CLIENTS:
		s->clients = val;
		break;
	case O_CHUNK:
		if (!(rc = sky_cli_int(SUBMIT_CMD, a, val, SKY_CHUNK_MIN_BYTES, SKY_CHUNK_MAX_PAYLOAD,
				       &v)))
			s->uo.chunk_bytes = (uint32_t)v;
		break;
	case O_CORRUPT:
		rc = sky_cli_int(SUBMIT_CMD, a, val, 0, 0x7fffffffL, &s->uo.corrupt_chunk);
		break;
	case O_CLAIM:
		s->uo.claim_sha256 = val;
		break;
	case O_NO_REPLAN:
		j->no_replan = 1;
		break;
	case O_TOKENIZER: {
		/* the model's tokenizer: its hash goes into the plan, so a text
		 * client (sky infer --model-dir) can check it has the same one */
		sky_tokenizer t;
		sky_diag td;
		sky_diag_clear(&td);
		sky_tok_init(&t);
		if (sky_tok_load_dir(&t, val, &td) != 0) {
			fprintf(stderr, "sky job submit: --tokenizer %s: %s\n", val, td.msg);
			return 2;
		}
		snprintf(j->tokenizer, sizeof j->tokenizer, "%08x", (unsigned)t.hash);
		sky_tok_free(&t);
		break;
	}
	default:
		return NOT_MINE;
	}
	return rc;
}

/* The model's shapes and how to plan it. */
static int opt_plan(submit *s, int c, const char *a, const char *val)
{
	sky_job_req *j = &s->j;
	long v;
	int rc = 0;
	switch (c) {
	case O_LINK_BLIND:
		s->link_blind = 1;
		break;
	case O_CHOOSE_MICRO:
		s->choose_micro = 1;
		break;
	case O_NO_REPLICAS:
		s->no_replicas = 1;
		break;
	case O_JOB:
		snprintf(j->job, sizeof j->job, "%s", val);
		break;
	case O_MODEL:
		snprintf(j->model, sizeof j->model, "%s", val);
		break;
	case O_ALGO:
		snprintf(j->algo, sizeof j->algo, "%s", val);
		break;
	case O_SCHED:
		snprintf(j->sched, sizeof j->sched, "%s", val);
		break;
	case O_OBJECTIVE:
		snprintf(j->objective, sizeof j->objective, "%s", val);
		break;
	case O_LAYERS:
		if (!(rc = sky_cli_int(SUBMIT_CMD, a, val, 1, SKY_PLANMSG_MAX_LAYERS, &v)))
			j->layers = (int)v;
		break;
	case O_SEQ:
		if (!(rc = sky_cli_int(SUBMIT_CMD, a, val, 1, SKY_CAPS_MAX_DIM, &v)))
			j->seq = (int)v;
		break;
	case O_BATCH:
		rc = sky_cli_int(SUBMIT_CMD, a, val, 1, SKY_CAPS_MAX_BATCH, &s->batch);
		break;
	case O_MICRO:
		if (!(rc = sky_cli_int(SUBMIT_CMD, a, val, 1, SKY_PLANMSG_MAX_MICRO, &v)))
			j->micro_batches = (int)v;
		break;
	case O_MIN_BOARDS:
		if (!(rc = sky_cli_int(SUBMIT_CMD, a, val, 0, 1024, &v)))
			j->min_boards = (int)v;
		break;
	case O_WAIT_BOARDS:
		rc = sky_cli_double(SUBMIT_CMD, a, val, 0, 3600, &j->wait_s);
		break;
	default:
		return NOT_MINE;
	}
	return rc;
}

/* Where to submit, and how long to wait for what. */
static int opt_run(submit *s, int c, const char *a, const char *val)
{
	switch (c) {
	case O_JSON:
		s->json = 1;
		return 0;
	case O_PKI:
		s->pki = val;
		return 0;
	case O_BROKER:
		s->broker = val;
		return 0;
	case O_FILE:
		s->file = val;
		return 0;
	case O_TASK:
		if (strcmp(val, "train") != 0 && strcmp(val, "infer") != 0) {
			fprintf(stderr, "sky job submit: --task expects train or infer, got '%s'\n", val);
			return 2;
		}
		s->j.train = val[0] == 't';
		s->j.infer = val[0] == 'i';
		return 0;
	case O_ACK:
		return sky_cli_double(SUBMIT_CMD, a, val, 0.1, 3600, &s->ack_s);
	case O_WAIT:
		return sky_cli_double(SUBMIT_CMD, a, val, 0, 3600, &s->wait_s);
	default:
		return NOT_MINE;
	}
}

/* --clients a,b (names or full CNs) into the request. Returns 0, or 2
 * after saying what is wrong. */
static int parse_clients(sky_job_req *j, const char *clients)
{
	for (const char *c = clients; c && *c;) {
		size_t n = strcspn(c, ",");
		if (j->n_clients >= SKY_JOB_MAX_CLIENTS || n == 0 || n > 40) {
			fprintf(stderr, "sky job submit: --clients takes up to %d names of 1-40 characters\n",
				SKY_JOB_MAX_CLIENTS);
			return 2;
		}
		int full = n > sizeof SKY_TOPIC_CLIENT_PREFIX - 1 &&
			   !strncmp(c, SKY_TOPIC_CLIENT_PREFIX, sizeof SKY_TOPIC_CLIENT_PREFIX - 1);
		snprintf(j->clients[j->n_clients++], sizeof j->clients[0], "%s%.*s",
			 full ? "" : SKY_TOPIC_CLIENT_PREFIX, (int)n, c);
		c += n + (c[n] == ',');
	}
	return 0;
}

/* The command line into s. Returns -1 to go on, or the exit code (0 after
 * --help or --version, 2 on a bad option). */
static int submit_opts(submit *s, int argc, char **argv)
{
	sky_opt cli;
	sky_opt_begin(&cli, "sky job submit", argc, argv, k_submit_opts, 0);
	for (int c; (c = sky_opt_next(&cli)) != SKY_OPT_END;) {
		if (c == SKY_OPT_HELP) {
			usage(stdout);
			return 0;
		}
		if (c == SKY_OPT_VERSION)
			return 0;
		int rc = opt_run(s, c, cli.name, cli.arg);
		if (rc == NOT_MINE)
			rc = opt_plan(s, c, cli.name, cli.arg);
		if (rc == NOT_MINE)
			rc = opt_train(s, c, cli.name, cli.arg);
		if (rc == NOT_MINE)
			rc = opt_infer(s, c, cli.name, cli.arg);
		if (rc == NOT_MINE)
			rc = opt_fed(s, c, cli.name, cli.arg);
		if (rc)
			return 2;
	}
	if (sky_opt_no_args(&cli) != 0)
		return 2;
	if (s->j.infer)
		s->j.serve_batch = (int)s->batch;
	else
		s->j.batch = (int)s->batch;
	if (s->j.infer && !s->weights) {
		fprintf(stderr, "sky job submit: --task infer needs --weights F.safetensors\n");
		return 2;
	}
	if (s->weights && !s->j.infer) {
		fprintf(stderr, "sky job submit: --weights goes with --task infer\n");
		return 2;
	}
	if ((s->j.dataset[0] || s->j.eval_dataset[0] || s->model_dir) && !s->j.train) {
		fprintf(stderr, "sky job submit: --dataset, --eval-dataset and --model-dir go with "
				"--task train\n");
		return 2;
	}
	if ((s->j.eval_dataset[0] || s->j.dataset_sha256[0]) && !s->j.dataset[0]) {
		fprintf(stderr, "sky job submit: --eval-dataset and --dataset-sha256 need "
				"--dataset\n");
		return 2;
	}
	if (s->model_dir) { /* the set must come from the model's tokenizer */
		sky_tokenizer t;
		sky_diag td;
		sky_diag_clear(&td);
		sky_tok_init(&t);
		if (sky_tok_load_dir(&t, s->model_dir, &td) != 0) {
			fprintf(stderr, "sky job submit: --model-dir %s: %s\n", s->model_dir, td.msg);
			sky_tok_free(&t);
			return 2;
		}
		snprintf(s->j.tokenizer, sizeof s->j.tokenizer, "%08x", (unsigned)t.hash);
		sky_tok_free(&t);
	}
	return parse_clients(&s->j, s->clients) ? 2 : -1;
}

/* An infer job on the command line: its model as int8 (quantised first
 * into a temporary file if it is fp32) and its SHA-256, which names it in
 * the request. Returns -1 to go on, or 1 after saying why not. */
static int submit_weights(submit *s)
{
	sky_diag md;
	sky_diag_clear(&md);
	const char *tmpdir = getenv("TMPDIR");
	snprintf(s->tmp_path, sizeof s->tmp_path, "%s/sky-submit-%ld.int8.safetensors",
		 tmpdir && *tmpdir ? tmpdir : "/tmp", (long)sky_clock_unix() ^ (long)(size_t)&s->j);
	if (sky_job_model_prepare(s->weights, s->tmp_path, &s->j, s->int8_path, sizeof s->int8_path,
				  &s->made_tmp, &md) != 0 ||
	    sky_upload_sha(s->int8_path, &s->uo, s->wsha, &md) != 0) {
		fprintf(stderr, "sky job submit: %s\n", md.msg);
		return 1;
	}
	sky_sha256_hex(s->wsha, s->j.weights);
	return -1;
}

/* Fine-tuning (--task train --model-dir D --dataset NAME): the job's model
 * is the directory's config ("model":"hf" and its block), and the stages
 * start from its checkpoint: loaded as `sky train --model-dir` loads it
 * (F16 converted, a missing pooler or classifier from the seed), written
 * as one fp32 file and uploaded before the request, named by its SHA-256
 * (hf.init); the planner cuts each stage's slice from it. Returns -1 to
 * go on, or the exit code after saying why not. */
static int submit_hf(submit *s)
{
	static sky_hf_config hc; /* large: not on the stack */
	static sky_bert m;
	sky_job_req *j = &s->j;
	sky_diag d;
	sky_diag_clear(&d);
	void *buf = NULL;
	int ex = 1;
	if (sky_hf_config_read(s->model_dir, &hc, &d) != 0) {
		fprintf(stderr, "sky job submit: --model-dir %s: %s\n", s->model_dir, d.msg);
		return 2;
	}
	const sky_model_cfg *c0 = &hc.cfg;
	snprintf(j->model, sizeof j->model, "hf");
	j->hf.on = 1;
	j->hf.hidden = c0->hidden;
	j->hf.heads = c0->heads;
	j->hf.ffn = c0->ffn;
	j->hf.vocab = c0->vocab;
	j->hf.max_pos = c0->max_pos;
	j->hf.type_vocab = c0->type_vocab;
	j->hf.classes = c0->classes;
	j->hf.act = c0->act;
	j->hf.ln_eps = (double)c0->ln_eps;
	j->hf.hidden_drop = (double)c0->hidden_drop;
	j->hf.attn_drop = (double)c0->attn_drop;
	if (!j->layers)
		j->layers = c0->layers;
	if (j->layers != c0->layers) {
		fprintf(stderr, "sky job submit: --layers %d, but %s has %d\n", j->layers,
			s->model_dir, c0->layers);
		return 2;
	}
	/* the weights do not depend on the sequence or batch: carve small */
	sky_model_cfg c = *c0;
	c.seq = 1;
	c.batch = 1;
	sky_bert_opts o;
	memset(&o, 0, sizeof o);
	sky_optim_default(&o.optim, SKY_OPTIM_SGD);
	o.micro = 1;
	size_t bytes = 0;
	sky_arena ar;
	if (sky_bert_arena_bytes(&c, &o, &bytes) != 0 || !(buf = malloc(bytes))) {
		fprintf(stderr, "sky job submit: %s: cannot allocate the model\n", s->model_dir);
		goto exit;
	}
	sky_arena_init(&ar, buf, bytes);
	sky_hf_report rep;
	const char *tmpdir = getenv("TMPDIR");
	snprintf(s->tmp_path, sizeof s->tmp_path, "%s/sky-submit-%ld.fp32.safetensors",
		 tmpdir && *tmpdir ? tmpdir : "/tmp", (long)sky_clock_unix() ^ (long)(size_t)&s->j);
	if (sky_bert_carve(&m, &c, &o, &ar) != 0 || sky_arena_seal(&ar) != 0 ||
	    sky_hf_load_dir(&m, s->model_dir, (unsigned long long)j->seed, &rep, &d) != 0 ||
	    sky_bert_save(&m, s->tmp_path, &d) != 0) {
		fprintf(stderr, "sky job submit: --model-dir %s: %s\n", s->model_dir,
			d.msg[0] ? d.msg : "cannot carve the model");
		goto exit;
	}
	s->made_tmp = 1;
	snprintf(s->int8_path, sizeof s->int8_path, "%s", s->tmp_path);
	if (sky_upload_sha(s->int8_path, &s->uo, s->wsha, &d) != 0) {
		fprintf(stderr, "sky job submit: %s\n", d.msg);
		goto exit;
	}
	sky_sha256_hex(s->wsha, j->hf.init);
	ex = -1;
exit:
	free(buf);
	return ex;
}

/* The request: from --file (with --link-blind and --data-owner of the
 * command line) or from the options, named by a fresh submit_id, encoded
 * into s->doc and checked as skyplan will check it. Returns -1 to go on, or
 * the exit code after saying why not. */
static int submit_request(submit *s)
{
	sky_job_req *j = &s->j;
	sky_diag d;
	sky_diag_clear(&d);
	if (s->file) {
		long got = sky_file_read(s->file, s->doc, sizeof s->doc - 1);
		if (got < 0) {
			fprintf(stderr, "sky job submit: cannot read %s (%s)\n", s->file,
				sky_strerror((int)got));
			return 1;
		}
		/* the file's job, re-encoded below with a submit_id of this run */
		char owner[sizeof j->data_owner];
		snprintf(owner, sizeof owner, "%s", j->data_owner);
		if (sky_job_req_parse(s->doc, (size_t)got, j, &d) != 0) {
			fprintf(stderr, "sky job submit: %s: %s\n", s->file, d.msg);
			return 2;
		}
		j->link_blind |= s->link_blind;
		j->no_replicas |= s->no_replicas;
		j->choose_micro |= s->choose_micro;
		if (owner[0])
			snprintf(j->data_owner, sizeof j->data_owner, "%s", owner);
	} else {
		j->link_blind = s->link_blind;
		j->no_replicas = s->no_replicas;
		j->choose_micro = s->choose_micro;
		if (!j->job[0])
			snprintf(j->job, sizeof j->job, "job-%lld", (long long)sky_clock_unix());
		if (j->train)
			sky_job_req_resolve(j);
	}
	/* names this submission: a resend carries it too, so skyplan queues it
	 * once and answers each copy */
	sky_sign_rng srng;
	if (sky_sign_rng_init(&srng, "sky-job-submit", &d) != 0 ||
	    sky_sign_rng_func(&srng, s->raw, sizeof s->raw) != 0) {
		sky_sign_rng_free(&srng);
		fprintf(stderr, "sky job submit: no randomness for the submission id\n");
		return 1;
	}
	sky_sign_rng_free(&srng);
	for (int i = 0; i < 8; i++)
		snprintf(j->submit_id + 2 * i, 3, "%02x", s->raw[i]);
	s->n = sky_job_req_encode(j, s->doc, sizeof s->doc);
	/* check locally what skyplan will check, so a typo fails here */
	if (s->n < 0 || sky_job_req_parse(s->doc, (size_t)s->n, j, &d) != 0) {
		fprintf(stderr, "sky job submit: %s\n", d.msg[0] ? d.msg : "job does not fit");
		return 2;
	}
	return -1;
}

/* The operator identity (its CN names our topics; the ACL lets only us use
 * them), the planner's certificate for --wait, and the connection's
 * options. Returns -1 to go on, or the exit code after saying why not. */
static int submit_identity(submit *s, follow *f)
{
	char pcrt[600];
	sky_diag d;
	sky_diag_clear(&d);
	snprintf(s->ca, sizeof s->ca, "%s/ca.crt", s->pki);
	snprintf(s->crt, sizeof s->crt, "%s/operator.crt", s->pki);
	snprintf(s->key, sizeof s->key, "%s/operator.key", s->pki);
	snprintf(pcrt, sizeof pcrt, "%s/planner.crt", s->pki);
	snprintf(s->client, sizeof s->client, "job-%02x%02x%02x%02x", s->raw[8], s->raw[9],
		 s->raw[10], s->raw[11]);
	sky_topic_job(f->plan_topic, sizeof f->plan_topic, s->j.job, SKY_TOPIC_PLAN);
	snprintf(f->submit_id, sizeof f->submit_id, "%s", s->j.submit_id);
	mbedtls_x509_crt me;
	mbedtls_x509_crt_init(&me);
	int crc = sky_sign_load_cert(&me, s->crt, &d);
	if (!crc && (sky_sign_cert_cn(&me, s->op, sizeof s->op) != 0 ||
		     sky_topic_jobs(f->reply_topic, sizeof f->reply_topic, s->op, SKY_TOPIC_REPLY) != 0))
		crc = sky_diag_set(&d, SKY_EAUTH, "%s: no usable operator CN", s->crt);
	mbedtls_x509_crt_free(&me);
	if (crc) {
		fprintf(stderr, "sky job submit: %s (an operator identity from `sky pki init` "
				"or `sky pki operator`)\n",
			d.msg);
		return 1;
	}
	sky_topic_jobs(s->submit_topic, sizeof s->submit_topic, s->op, SKY_TOPIC_SUBMIT);
	if (s->wait_s > 0 && sky_sign_load_cert(&f->planner, pcrt, &d) != 0) {
		fprintf(stderr, "sky job submit: %s\n", d.msg);
		return 1;
	}
	/* operator tools use the listener beside the fleet's (port + 1), where
	 * their random client ids are kept: submit, watch and collect of one
	 * operator may run at once (sky_mqtt_claim_broker) */
	if (sky_mqtt_claim_broker(s->broker, s->tools_broker, sizeof s->tools_broker) != 0) {
		fprintf(stderr, "sky job submit: --broker must be HOST:PORT (port below 65535), got '%s'\n",
			s->broker);
		return 2;
	}
	sky_mqtt_opts mo = {.broker = s->tools_broker, .client_id = s->client, .ca_file = s->ca,
			    .cert_file = s->crt, .key_file = s->key, .keepalive_s = 30,
			    .on_msg = on_msg, .ctx = f};
	s->mo = mo;
	return -1;
}

/* (Re)connects and subscribes to the answers (and, for --wait, to the plan
 * and the boards' plan-acks). Returns 0, or the error with d saying why. */
static int submit_connect(submit *s, follow *f, sky_diag *d)
{
	sky_mqtt_close(s->m, 0);
	s->m = NULL;
	int crc = sky_mqtt_connect(&s->m, &s->mo, d);
	if (!crc)
		crc = sky_mqtt_subscribe(s->m, f->reply_topic, 1, 5000, d);
	if (!crc && s->wait_s > 0)
		crc = sky_mqtt_subscribe(s->m, f->plan_topic, 1, 5000, d);
	if (!crc && s->wait_s > 0)
		crc = sky_mqtt_subscribe(s->m, SKY_TOPIC_ROOT "/board/+/" SKY_TOPIC_PLAN_ACK, 1, 5000,
					 d);
	return crc;
}

/* Until answered: (re)connect, subscribe to the answers, upload the model
 * (once), send; a connection that drops, or a planner that did not hear,
 * gets it again. Returns 0 once answered (f->reply), or the error with d
 * saying why. */
static int submit_until_answered(submit *s, follow *f, sky_diag *d)
{
	int uploaded = !((s->j.infer || s->j.fed.on || s->j.hf.init[0]) && !s->file);
	char last_err[256] = "";
	double t0 = sky_clock_s(), next_send = t0;
	sky_mqtt_backoff backoff; /* 0.25 s doubling to 2 s, jittered */
	sky_mqtt_backoff_init(&backoff, 250, 2000, sky_clock_ns());
	for (;;) {
		if (upload_answered(f))
			return 0;
		if (sky_clock_s() - t0 >= s->ack_s)
			return sky_diag_set(d, SKY_ETIMEOUT,
					    "job %s NOT acknowledged: no answer from the planner within "
					    "%g s (%d sends%s%.120s); is skyplan running?",
					    s->j.job, s->ack_s, s->sends,
					    last_err[0] ? "; last error: " : "", last_err);
		sky_diag sd;
		sky_diag_clear(&sd);
		if (!sky_mqtt_connected(s->m)) {
			int crc = submit_connect(s, f, &sd);
			if (crc) {
				snprintf(last_err, sizeof last_err, "%s", sd.msg);
				if (crc == SKY_EAUTH) /* the ACL said no: asking again will not help */
					return sky_diag_set(d, crc, "%s", sd.msg);
				sky_mqtt_close(s->m, 0);
				s->m = NULL;
				sky_sleep_ms((unsigned)sky_mqtt_backoff_next(&backoff));
				continue;
			}
			sky_mqtt_backoff_reset(&backoff);
			next_send = sky_clock_s();
		}
		if (!uploaded) {
			sky_diag_clear(&sd);
			int urc = upload_phase(f, s->m, s->op, s->int8_path, s->wsha, &s->uo, s->ack_s,
					       s->j.submit_id, s->json, &sd);
			if (urc == SKY_ENET) {
				snprintf(last_err, sizeof last_err, "%s", sd.msg);
				continue; /* reconnect and send it again */
			}
			if (urc)
				return sky_diag_set(d, urc, "%s", sd.msg);
			uploaded = 1;
			next_send = sky_clock_s();
		}
		if (sky_clock_s() >= next_send) {
			sky_diag_clear(&sd);
			if (sky_mqtt_publish(s->m, s->submit_topic, s->doc, (size_t)s->n, 1, 0, &sd) == 0)
				s->sends++;
			else
				snprintf(last_err, sizeof last_err, "%s", sd.msg);
			next_send = sky_clock_s() + 2.0;
		}
		sky_mqtt_poll(s->m, 20);
	}
}

/* Boards of plan p: each stage's own, then the stage replicas; board i
 * of them, its stage in *stage. */
static int plan_boards(const sky_planmsg *p) { return p->n_stages + p->n_reps; }
static const char *plan_board(const sky_planmsg *p, int i, int *stage)
{
	if (i < p->n_stages) {
		*stage = i;
		return p->stages[i].board;
	}
	const char *b = p->reps[i - p->n_stages].board;
	*stage = sky_planmsg_find_replica(p, b, NULL);
	return b;
}

/* What the boards said of the plan: stages answered, accepted, refused,
 * and when the last answer came. */
typedef struct ack_count {
	int done, accepted, refused;
	double last_at;
} ack_count;

/* Follows the plan and its plan-acks until every stage answered or wait_s
 * has passed since t0. Returns with f->lock held. */
static void wait_acks(submit *s, follow *f, double t0, ack_count *k)
{
	memset(k, 0, sizeof *k);
	while (sky_clock_s() - t0 < s->wait_s) {
		sky_mutex_lock(&f->lock);
		if (f->have_plan) {
			memset(k, 0, sizeof *k);
			for (int i = 0; i < plan_boards(&f->plan); i++) {
				double at;
				int st;
				const sky_planack *a = find_ack(f, plan_board(&f->plan, i, &st),
								f->plan.job, f->plan.epoch, &at);
				if (a) {
					k->done++;
					k->accepted += a->ok;
					k->refused += !a->ok;
					if (at > k->last_at)
						k->last_at = at;
				}
			}
		}
		int all = f->have_plan && k->done == plan_boards(&f->plan);
		sky_mutex_unlock(&f->lock);
		if (all)
			break;
		sky_mqtt_poll(s->m, 20);
	}
	sky_mutex_lock(&f->lock);
}

static void print_acks_json(const follow *f, const ack_count *k, double t0)
{
	const sky_planmsg *p = &f->plan;
	printf("{\"job\":\"%s\",\"epoch\":%lld,\"stages\":%d,\"accepted\":%d,\"refused\":%d,"
	       "\"missing\":%d,\"plan_s\":%.3f,\"all_acked_s\":%.3f,\"boards\":[",
	       p->job, (long long)p->epoch, p->n_stages, k->accepted, k->refused,
	       plan_boards(p) - k->done, f->plan_at - t0,
	       k->done == plan_boards(p) ? k->last_at - t0 : -1.0);
	for (int i = 0; i < plan_boards(p); i++) {
		double at;
		int st = 0;
		const char *b = plan_board(p, i, &st);
		const sky_planack *a = find_ack(f, b, p->job, p->epoch, &at);
		/* (the keys before "stage" as they were before replicas) */
		printf("%s{\"board\":\"%s\",\"site\":\"%s\",\"first\":%d,\"last\":%d,"
		       "\"ack\":\"%s\",\"arena_bytes\":%lld,\"stage\":%d%s}",
		       i ? "," : "", b, sky_site_name(p->stages[st].site), p->stages[st].first,
		       p->stages[st].last, !a ? "missing" : a->ok ? "accepted" : "refused",
		       a ? (long long)a->arena_bytes : 0ll, st,
		       i >= p->n_stages ? ",\"replica\":true" : "");
	}
	printf("]");
	if (p->n_reps > 0)
		printf(",\"micro_batch\":%d,\"micro_batches\":%d", p->shape.batch, p->micro_batches);
	printf("}\n");
}

static void print_acks_text(const follow *f, const ack_count *k, double t0)
{
	const sky_planmsg *p = &f->plan;
	printf("job %s epoch %lld: %d stages, plan %.3f s after submit\n", p->job,
	       (long long)p->epoch, p->n_stages, f->plan_at - t0);
	if (p->n_reps > 0)
		printf("  stage replicas: %d boards besides the stages' own; %d micro-batches of %d\n",
		       p->n_reps, p->micro_batches, p->shape.batch);
	for (int i = 0; i < plan_boards(p); i++) {
		double at;
		int st = 0;
		const char *b = plan_board(p, i, &st);
		const sky_planack *a = find_ack(f, b, p->job, p->epoch, &at);
		printf("  stage %2d  %-16s half-layers %3d-%-3d  %s%s", st, b, p->stages[st].first,
		       p->stages[st].last, i >= p->n_stages ? "(replica) " : "",
		       !a ? "no ack" : a->ok ? "accepted" : "REFUSED");
		if (a)
			printf(" %lld bytes%s%s", (long long)a->arena_bytes, a->ok ? "" : ": ",
			       a->ok ? "" : a->reason);
		printf("\n");
	}
	printf("%d accepted, %d refused, %d missing\n", k->accepted, k->refused,
	       plan_boards(p) - k->done);
}

/* A board that refused its role in f's current plan for memory, or NULL.
 * The planner learns that board's budget; a training job with checkpoints,
 * which it follows, it re-plans at once (planner/svc_fleet.c on_refusal).
 * Called with f->lock. */
static const char *memory_refusal(const follow *f)
{
	for (int i = 0; i < plan_boards(&f->plan); i++) {
		double at;
		int st;
		const char *b = plan_board(&f->plan, i, &st);
		const sky_planack *a = find_ack(f, b, f->plan.job, f->plan.epoch, &at);
		if (a && !a->ok && a->budget_bytes > 0 && a->arena_bytes > a->budget_bytes)
			return b;
	}
	return NULL;
}

/* Waits (until --wait runs out, counted from t0) for a plan of a later
 * epoch than the refused one; 1 when it came. Progress and the outcome
 * on stderr, so a --json stdout stays one object per plan. */
static int wait_newer_plan(submit *s, follow *f, double t0, int64_t epoch, const char *board)
{
	fprintf(stderr,
		"sky job submit: board %s refused its role for memory; the planner re-plans job %s "
		"(it has checkpoints) without it: waiting for a plan after epoch %lld\n",
		board, s->j.job, (long long)epoch);
	while (sky_clock_s() - t0 < s->wait_s) {
		sky_mutex_lock(&f->lock);
		int newer = f->plan.epoch > epoch;
		sky_mutex_unlock(&f->lock);
		if (newer)
			return 1;
		sky_mqtt_poll(s->m, 20);
	}
	fprintf(stderr,
		"sky job submit: no plan after epoch %lld within --wait %g s: the planner found "
		"none without board %s's role (sky fleet status says why the job is paused)\n",
		(long long)epoch, s->wait_s, board);
	return 0;
}

/* After the planner's answer: say so, and with --wait follow the plan
 * until every stage's board answered it; when the planner re-plans a
 * refused plan (memory_refusal), the next plan too. Returns the exit
 * code: 0 when acknowledged (and, with --wait, every stage of the last
 * plan accepted), else 1 with d saying why when there is no plan. */
static int submit_answered(submit *s, follow *f, sky_diag *d)
{
	if (!f->reply.ok)
		return sky_diag_set(d, SKY_EINVAL, "job %s refused by the planner: %s", s->j.job,
				    f->reply.error);
	if (!s->json)
		fprintf(stderr, "sky job submit: job %s acknowledged by the planner (%s, %d send%s)\n",
			s->j.job, f->reply.state, s->sends, s->sends == 1 ? "" : "s");
	double t0 = sky_clock_s();
	if (s->wait_s <= 0) {
		if (s->json)
			printf("{\"job\":\"%s\",\"submitted\":true,\"acked\":true,\"sends\":%d}\n",
			       s->j.job, s->sends);
		else
			printf("job %s submitted and acknowledged\n", s->j.job);
		return 0;
	}
	ack_count k;
	for (;;) {
		wait_acks(s, f, t0, &k);
		if (!f->have_plan) {
			sky_mutex_unlock(&f->lock);
			return sky_diag_set(d, SKY_ETIMEOUT,
					    "no plan for job %s within %g s (is skyplan running?)",
					    s->j.job, s->wait_s);
		}
		if (s->json)
			print_acks_json(f, &k, t0);
		else
			print_acks_text(f, &k, t0);
		if (k.accepted == plan_boards(&f->plan)) {
			sky_mutex_unlock(&f->lock);
			return 0;
		}
		const char *who = memory_refusal(f);
		int64_t epoch = f->plan.epoch;
		int replanned = who && s->j.train && s->j.ckpt_every > 0;
		if (who && !replanned)
			fprintf(stderr,
				"sky job submit: board %s refused its role for memory; job %s is not "
				"re-planned (the planner follows only training jobs with "
				"--checkpoint-every), but it now plans within %s's budget: cancel the "
				"job and submit it again\n",
				who, s->j.job, who);
		char board[SKY_TOPIC_SEGMENT_MAX + 1];
		snprintf(board, sizeof board, "%s", who ? who : "");
		sky_mutex_unlock(&f->lock);
		if (!replanned || !wait_newer_plan(s, f, t0, epoch, board))
			return 1;
	}
}

static int cmd_submit(int argc, char **argv)
{
	static submit s;
	follow *f = &g_f;
	sky_diag d;
	int ex;
	sky_diag_clear(&d);
	submit_defaults(&s);
	memset(f, 0, sizeof *f);
	sky_mutex_init(&f->lock);
	mbedtls_x509_crt_init(&f->planner);
	if ((ex = submit_opts(&s, argc, argv)) >= 0)
		goto exit;
	if (s.j.infer && !s.file && (ex = submit_weights(&s)) >= 0)
		goto exit;
	if (!s.file && (ex = submit_fed(&s)) >= 0) /* federated: the model bundle */
		goto exit;
	/* a data set and a model directory, not federated: fine-tuning its checkpoint */
	if (s.j.train && !s.j.fed.on && s.j.dataset[0] && s.model_dir && !s.file &&
	    (ex = submit_hf(&s)) >= 0)
		goto exit;
	if (!s.pki || !s.broker || (!s.file && !s.j.model[0])) {
		fprintf(stderr, "sky job submit: --pki, --broker and --model (or --file) are required\n");
		ex = 2;
		goto exit;
	}
	if ((ex = submit_request(&s)) >= 0 || (ex = submit_identity(&s, f)) >= 0)
		goto exit;
	int rc = submit_until_answered(&s, f, &d);
	if (rc == 0)
		rc = submit_answered(&s, f, &d);
	/* 1 is a stage that did not accept, said in the table already */
	if (rc < 0)
		fprintf(stderr, "sky job submit: %s\n", d.msg);
	ex = rc ? 1 : 0;
exit:
	sky_mqtt_close(s.m, 1000);
	mbedtls_x509_crt_free(&f->planner);
	if (s.made_tmp)
		sky_file_remove(s.tmp_path);
	return ex;
}

static void cancel_usage(FILE *to)
{
	fprintf(to,
		"usage: sky job cancel --job JOB --pki DIR --broker HOST:PORT [--ack-timeout S] [--json]\n"
		"Asks skyplan to stop job JOB, which this operator (DIR/operator.crt) submitted:\n"
		"on sky/v1/jobs/<operator>/cancel, answered on sky/v1/jobs/<operator>/reply, sent\n"
		"again every 2 s until the answer comes. skyplan takes the job out of its queue,\n"
		"stops following it (no re-plans, no replays), frees its boards for other jobs\n"
		"and clears what it relayed of it (its retained state becomes \"cancelled\").\n"
		"Boards already training the job finish their running steps. Exits 0 once\n"
		"cancelled, 1 when refused (another operator's job, no such job) or with no\n"
		"answer within --ack-timeout (default 30 s), 2 on a bad option.\n");
}

static int cmd_cancel(int argc, char **argv)
{
	enum { C_PKI = SKY_OPT_FIRST, C_BROKER, C_JOB, C_ACK, C_JSON };
	static const struct option k_opts[] = {{"pki", required_argument, NULL, C_PKI},
					       {"broker", required_argument, NULL, C_BROKER},
					       {"job", required_argument, NULL, C_JOB},
					       {"ack-timeout", required_argument, NULL, C_ACK},
					       {"json", no_argument, NULL, C_JSON},
					       SKY_OPT_STD,
					       {0}};
	const char *pki = NULL, *broker = NULL, *job = NULL;
	double ack_s = 30;
	int json = 0;
	sky_opt cli;
	sky_opt_begin(&cli, "sky job cancel", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&cli)) != SKY_OPT_END;) {
		switch (c) {
		case SKY_OPT_HELP:
			cancel_usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case C_PKI:
			pki = cli.arg;
			break;
		case C_BROKER:
			broker = cli.arg;
			break;
		case C_JOB:
			job = cli.arg;
			break;
		case C_ACK:
			if (sky_cli_double("job cancel", cli.name, cli.arg, 0.1, 3600, &ack_s))
				return 2;
			break;
		case C_JSON:
			json = 1;
			break;
		default:
			return 2;
		}
	}
	if (sky_opt_no_args(&cli) != 0)
		return 2;
	if (!pki || !broker || !job) {
		fprintf(stderr, "sky job cancel: --job, --pki and --broker are required (see --help)\n");
		return 2;
	}
	if (!sky_topic_segment_ok(job)) {
		fprintf(stderr, "sky job cancel: --job '%s' is not a job id ([A-Za-z0-9_.-], 1-64 "
				"characters)\n", job);
		return 2;
	}
	follow *f = &g_f;
	memset(f, 0, sizeof *f);
	sky_mutex_init(&f->lock);
	mbedtls_x509_crt_init(&f->planner);
	char ca[600], crt[600], key[600], op[80], topic[SKY_TOPIC_BUF], tools[300], client[48];
	char doc[256];
	unsigned char raw[12];
	sky_diag d;
	sky_diag_clear(&d);
	int ex = 1;
	sky_mqtt *m = NULL;
	snprintf(ca, sizeof ca, "%s/ca.crt", pki);
	snprintf(crt, sizeof crt, "%s/operator.crt", pki);
	snprintf(key, sizeof key, "%s/operator.key", pki);
	mbedtls_x509_crt me;
	mbedtls_x509_crt_init(&me);
	int rc = sky_sign_load_cert(&me, crt, &d);
	if (!rc && sky_sign_cert_cn(&me, op, sizeof op) != 0)
		rc = sky_diag_set(&d, SKY_EAUTH, "%s: no usable operator CN", crt);
	mbedtls_x509_crt_free(&me);
	sky_sign_rng srng;
	if (!rc && (sky_sign_rng_init(&srng, "sky-job-cancel", &d) != 0 ||
		    sky_sign_rng_func(&srng, raw, sizeof raw) != 0))
		rc = sky_diag_set(&d, SKY_EIO, "no randomness for the cancel id");
	if (!rc)
		sky_sign_rng_free(&srng);
	if (rc) {
		fprintf(stderr, "sky job cancel: %s\n", d.msg);
		goto exit;
	}
	for (int i = 0; i < 8; i++)
		snprintf(f->submit_id + 2 * i, 3, "%02x", raw[i]);
	snprintf(client, sizeof client, "cancel-%02x%02x%02x%02x", raw[8], raw[9], raw[10], raw[11]);
	int n = snprintf(doc, sizeof doc, "{\"job\":\"%s\",\"cancel_id\":\"%s\"}", job,
			 f->submit_id);
	if (sky_topic_jobs(f->reply_topic, sizeof f->reply_topic, op, SKY_TOPIC_REPLY) != 0 ||
	    sky_topic_jobs(topic, sizeof topic, op, SKY_TOPIC_CANCEL) != 0) {
		fprintf(stderr, "sky job cancel: operator CN '%s' cannot name a topic\n", op);
		goto exit;
	}
	if (sky_mqtt_claim_broker(broker, tools, sizeof tools) != 0) {
		fprintf(stderr, "sky job cancel: --broker must be HOST:PORT (port below 65535), got '%s'\n",
			broker);
		ex = 2;
		goto exit;
	}
	sky_mqtt_opts mo = {.broker = tools, .client_id = client, .ca_file = ca, .cert_file = crt,
			    .key_file = key, .keepalive_s = 30, .on_msg = on_msg, .ctx = f};
	double t0 = sky_clock_s(), next_send = 0;
	int sends = 0;
	while (!upload_answered(f) && sky_clock_s() - t0 < ack_s) {
		if (!sky_mqtt_connected(m)) {
			sky_mqtt_close(m, 0);
			m = NULL;
			sky_diag_clear(&d);
			int crc = sky_mqtt_connect(&m, &mo, &d);
			if (!crc)
				crc = sky_mqtt_subscribe(m, f->reply_topic, 1, 5000, &d);
			if (crc) {
				if (crc == SKY_EAUTH) /* the ACL said no: asking again will not help */
					break;
				sky_sleep_ms(500);
				continue;
			}
			next_send = 0;
		}
		if (sky_clock_s() >= next_send) {
			if (sky_mqtt_publish(m, topic, doc, (size_t)n, 1, 0, &d) == 0)
				sends++;
			next_send = sky_clock_s() + 2.0;
		}
		sky_mqtt_poll(m, 20);
	}
	sky_mutex_lock(&f->lock);
	if (!f->answered) {
		fprintf(stderr, "sky job cancel: job %s: no answer from the planner within %g s (%d "
				"send%s%s%s); is skyplan running?\n",
			job, ack_s, sends, sends == 1 ? "" : "s", d.msg[0] ? "; last error: " : "", d.msg);
	} else if (!f->reply.ok) {
		if (json)
			printf("{\"job\":\"%s\",\"cancelled\":false}\n", job);
		fprintf(stderr, "sky job cancel: job %s refused by the planner: %s\n", job,
			f->reply.error);
	} else {
		if (json)
			printf("{\"job\":\"%s\",\"cancelled\":true}\n", job);
		else
			printf("job %s cancelled\n", job);
		ex = 0;
	}
	sky_mutex_unlock(&f->lock);
exit:
	sky_mqtt_close(m, 1000);
	mbedtls_x509_crt_free(&f->planner);
	return ex;
}

int sky_cmd_job(int argc, char **argv)
{
	static const sky_cmd subs[] = {
		{"submit", "hand a job to skyplan", cmd_submit},
		{"watch", "one line per training step", sky_job_watch},
		{"collect", "the trained parts into one safetensors file", sky_job_collect},
		{"cancel", "stop a job of this operator's", cmd_cancel},
		{"frame", "craft a tensor frame (tests)", sky_job_frame},
		{"data", "a training micro-batch's tokens and labels as hex (tests)", sky_job_data},
	};
	return sky_cli_dispatch("sky job", argc, argv, subs, sizeof subs / sizeof subs[0], usage);
}
