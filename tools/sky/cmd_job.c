/* sky job submit: hands a job to skyplan over MQTT
 * (sky/v1/jobs/<operator CN>/submit), connected with the operator identity
 * from the PKI directory, and waits for the planner's answer on
 * sky/v1/jobs/<operator CN>/reply, sending again (same submit_id, so the
 * planner queues it once) until it comes or --ack-timeout runs out; with
 * --wait it then follows the job until every stage's board has
 * acknowledged the plan. sky job watch and sky job collect are in
 * job_follow.c. */
#include "job_data.h"
#include "job_follow.h"
#include "job_upload.h"
#include "sky_chunk.h"
#include "sky_caps.h"
#include "sky_cli.h"
#include "sky_clock.h"
#include "sky_err.h"
#include "sky_file.h"
#include "sky_json.h"
#include "sky_log.h"
#include "sky_mqtt.h"
#include "sky_opt.h"
#include "sky_planmsg.h"
#include "sky_service.h"
#include "sky_sign.h"
#include "sky_thread.h"
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
		"                      [--objective step|bottleneck] [--link-blind]\n"
		"                      [--min-boards N] [--wait-boards-s S] [--wait SECONDS]\n"
		"                      [--ack-timeout SECONDS] [--json]\n"
		"                      [--task train --steps N --micro M --optimizer adamw|sgd --lr X\n"
		"                       --seed S --warmup W --clip C --stall-s S --plaintext-frames\n"
		"                       --checkpoint-every K --data-owner BOARD]\n"
		"                      [--task infer --weights F.safetensors [--batch B] [--wait-ms W]\n"
		"                       [--queue Q] [--clients a,b] [--chunk-bytes N] [--no-replan]]\n"
		"       sky job watch JOB --pki DIR --broker HOST:PORT [--timeout S] [--json]\n"
		"       sky job collect JOB --pki DIR --broker HOST:PORT --out F.safetensors [--timeout S]\n"
		"Publishes the job on sky/v1/jobs/<operator>/submit as the operator identity\n"
		"(DIR/operator.crt and operator.key with DIR/ca.crt: the PKI directory, or a\n"
		"bundle from `sky pki operator`) and waits for skyplan's answer on\n"
		"sky/v1/jobs/<operator>/reply, sending again every 2 s (and reconnecting) until\n"
		"it comes; no answer within --ack-timeout (default 30 s) or a refusal exits 1\n"
		"with the reason. skyplan plans the job once min-boards online boards (default\n"
		"all) have reported at its shapes (at most --wait-boards-s later, default 30)\n"
		"and publishes the signed plan. With --wait, follows the plan and each stage's\n"
		"plan-ack for up to SECONDS more (plans verified with DIR/planner.crt) and\n"
		"exits 0 only if every stage's board accepted it.\n"
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
		"Tests: --corrupt-chunk N damages chunk N after hashing it,\n"
		"--claim-sha256 HEX names another hash than the file's.\n"
		"--checkpoint-every K (default 10; 0 off): every K steps and after the last, each\n"
		"stage sends its weights and optimizer state to skyplan's checkpoint store; a board\n"
		"that dies then re-plans the job over the others from the last complete one.\n"
		"--link-blind has skyplan plan as if every board were in one site (for comparison).\n"
		"--data-owner BOARD keeps the job's data on BOARD: a U-shaped plan gives it the\n"
		"embeddings and first layers and the last layers, head, labels and loss; the\n"
		"other boards see only sealed activations (with the attention mask) and\n"
		"gradients. Planned with even or optimal; no checkpoints.\n"
		"watch prints one line per step (loss, step time, predicted, busy per stage) until\n"
		"the job ends (exit 0) or stalls (exit 1). collect gathers every stage's part\n"
		"into one safetensors file with HuggingFace names, which `sky eval` reads.\n"
		"All three connect as the operator to the listener beside the fleet's (the\n"
		"broker's port + 1), with random client ids, so they may run at once.\n");
}

static int cmd_submit(int argc, char **argv)
{
	sky_job_req j;
	const char *pki = NULL, *broker = NULL, *file = NULL;
	int link_blind = 0;
	double wait_s = 0, ack_s = 30;
	int json = 0;
	long v;
	memset(&j, 0, sizeof j);
	j.micro_batches = 4;
	snprintf(j.algo, sizeof j.algo, "optimal");
	snprintf(j.sched, sizeof j.sched, "1f1b");
	snprintf(j.objective, sizeof j.objective, "step");
	j.wait_s = 30;
	/* training settings: `sky train`'s defaults, filled in below */
	j.steps = 10;
	j.seed = 1;
	j.warmup = -1;
	j.clip = 1.0;
	j.lr = -1;
	snprintf(j.optim, sizeof j.optim, "adamw");
	enum {
		O_PKI = SKY_OPT_FIRST, O_BROKER, O_FILE, O_JOB, O_MODEL, O_ALGO, O_SCHED, O_OBJECTIVE,
		O_LAYERS, O_SEQ, O_BATCH, O_TASK, O_STEPS, O_OPTIM, O_LR, O_SEED, O_WARMUP, O_CLIP,
		O_STALL, O_MICRO, O_MIN_BOARDS, O_WAIT_BOARDS, O_ACK, O_WAIT, O_JSON, O_PLAINTEXT,
		O_WEIGHTS, O_WAIT_MS, O_QUEUE, O_CLIENTS, O_CHUNK, O_CORRUPT, O_CLAIM, O_CKPT, O_LINK_BLIND,
		O_OWNER, O_NO_REPLAN
	};
	static const struct option k_opts[] = {
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
		{"link-blind", no_argument, NULL, O_LINK_BLIND},
		{"data-owner", required_argument, NULL, O_OWNER},
		SKY_OPT_STD,
		{0}};
	const char *cmd = "job submit";
	const char *weights = NULL, *clients = NULL;
	long batch = 0;
	sky_upload_opts uo = {.corrupt_chunk = -1, .progress = 1};
	j.wait_ms = 2;
	j.queue = 64;
	sky_opt cli;
	sky_opt_begin(&cli, "sky job submit", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&cli)) != SKY_OPT_END;) {
		const char *a = cli.name, *val = cli.arg;
		int rc = 0;
		switch (c) {
		case SKY_OPT_HELP:
			usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_JSON:
			json = 1;
			break;
		case O_PLAINTEXT:
			j.plaintext = 1;
			break;
		case O_LINK_BLIND:
			link_blind = 1;
			break;
		case O_OWNER:
			if (!sky_topic_segment_ok(val)) {
				fprintf(stderr, "sky job submit: --data-owner %s is not a board id\n", val);
				return 2;
			}
			snprintf(j.data_owner, sizeof j.data_owner, "%s", val);
			break;
		case O_PKI:
			pki = val;
			break;
		case O_BROKER:
			broker = val;
			break;
		case O_FILE:
			file = val;
			break;
		case O_JOB:
			snprintf(j.job, sizeof j.job, "%s", val);
			break;
		case O_MODEL:
			snprintf(j.model, sizeof j.model, "%s", val);
			break;
		case O_ALGO:
			snprintf(j.algo, sizeof j.algo, "%s", val);
			break;
		case O_SCHED:
			snprintf(j.sched, sizeof j.sched, "%s", val);
			break;
		case O_OBJECTIVE:
			snprintf(j.objective, sizeof j.objective, "%s", val);
			break;
		case O_OPTIM:
			snprintf(j.optim, sizeof j.optim, "%s", val);
			break;
		case O_LAYERS:
			if (!(rc = sky_cli_int(cmd, a, val, 1, SKY_PLANMSG_MAX_LAYERS, &v)))
				j.layers = (int)v;
			break;
		case O_SEQ:
			if (!(rc = sky_cli_int(cmd, a, val, 1, SKY_CAPS_MAX_DIM, &v)))
				j.seq = (int)v;
			break;
		case O_BATCH: /* the model's micro-batch, or for infer the served batch */
			rc = sky_cli_int(cmd, a, val, 1, SKY_CAPS_MAX_BATCH, &batch);
			break;
		case O_TASK:
			if (strcmp(val, "train") != 0 && strcmp(val, "infer") != 0) {
				fprintf(stderr, "sky job submit: --task expects train or infer, got '%s'\n",
					val);
				return 2;
			}
			j.train = val[0] == 't';
			j.infer = val[0] == 'i';
			break;
		case O_WEIGHTS:
			weights = val;
			break;
		case O_WAIT_MS:
			if (!(rc = sky_cli_int(cmd, a, val, 0, SKY_PLAN_MAX_WAIT_MS, &v)))
				j.wait_ms = (int)v;
			break;
		case O_QUEUE:
			if (!(rc = sky_cli_int(cmd, a, val, 1, SKY_PLAN_MAX_QUEUE, &v)))
				j.queue = (int)v;
			break;
		case O_CLIENTS:
			clients = val;
			break;
		case O_CHUNK:
			if (!(rc = sky_cli_int(cmd, a, val, SKY_CHUNK_MIN_BYTES, SKY_CHUNK_MAX_PAYLOAD, &v)))
				uo.chunk_bytes = (uint32_t)v;
			break;
		case O_CORRUPT:
			rc = sky_cli_int(cmd, a, val, 0, 0x7fffffffL, &uo.corrupt_chunk);
			break;
		case O_CLAIM:
			uo.claim_sha256 = val;
			break;
		case O_STEPS:
			if (!(rc = sky_cli_int(cmd, a, val, 1, SKY_PLANMSG_MAX_STEPS, &v)))
				j.steps = (int)v;
			break;
		case O_LR:
			rc = sky_cli_double(cmd, a, val, 1e-9, 100, &j.lr);
			break;
		case O_SEED:
			if (!(rc = sky_cli_int(cmd, a, val, 0, 0x7fffffffL, &v)))
				j.seed = (int)v;
			break;
		case O_WARMUP:
			if (!(rc = sky_cli_int(cmd, a, val, 0, SKY_PLANMSG_MAX_STEPS, &v)))
				j.warmup = (int)v;
			break;
		case O_CLIP:
			rc = sky_cli_double(cmd, a, val, 0, 1e9, &j.clip);
			break;
		case O_STALL:
			rc = sky_cli_double(cmd, a, val, 0, 1e5, &j.stall_s);
			break;
		case O_CKPT:
			if (!(rc = sky_cli_int(cmd, a, val, 0, SKY_PLANMSG_MAX_STEPS, &v)))
				j.ckpt_every = (int)v;
			break;
		case O_NO_REPLAN:
			j.no_replan = 1;
			break;
		case O_MICRO:
			if (!(rc = sky_cli_int(cmd, a, val, 1, SKY_PLANMSG_MAX_MICRO, &v)))
				j.micro_batches = (int)v;
			break;
		case O_MIN_BOARDS:
			if (!(rc = sky_cli_int(cmd, a, val, 0, 1024, &v)))
				j.min_boards = (int)v;
			break;
		case O_WAIT_BOARDS:
			rc = sky_cli_double(cmd, a, val, 0, 3600, &j.wait_s);
			break;
		case O_ACK:
			rc = sky_cli_double(cmd, a, val, 0.1, 3600, &ack_s);
			break;
		case O_WAIT:
			rc = sky_cli_double(cmd, a, val, 0, 3600, &wait_s);
			break;
		default:
			return 2;
		}
		if (rc)
			return 2;
	}
	if (sky_opt_no_args(&cli) != 0) {
		return 2;
	}
	if (j.infer)
		j.serve_batch = (int)batch;
	else
		j.batch = (int)batch;
	if (j.infer && !weights) {
		fprintf(stderr, "sky job submit: --task infer needs --weights F.safetensors\n");
		return 2;
	}
	if (weights && !j.infer) {
		fprintf(stderr, "sky job submit: --weights goes with --task infer\n");
		return 2;
	}
	/* --clients a,b: names or full CNs */
	for (const char *c = clients; c && *c;) {
		size_t n = strcspn(c, ",");
		if (j.n_clients >= SKY_JOB_MAX_CLIENTS || n == 0 || n > 40) {
			fprintf(stderr, "sky job submit: --clients takes up to %d names of 1-40 characters\n",
				SKY_JOB_MAX_CLIENTS);
			return 2;
		}
		int full = n > sizeof SKY_TOPIC_CLIENT_PREFIX - 1 &&
			   !strncmp(c, SKY_TOPIC_CLIENT_PREFIX, sizeof SKY_TOPIC_CLIENT_PREFIX - 1);
		snprintf(j.clients[j.n_clients++], sizeof j.clients[0], "%s%.*s",
			 full ? "" : SKY_TOPIC_CLIENT_PREFIX, (int)n, c);
		c += n + (c[n] == ',');
	}
	char int8_path[600] = "", tmp_path[600] = "";
	int made_tmp = 0;
	unsigned char wsha[32];
	if (j.infer && !file) {
		sky_diag md;
		sky_diag_clear(&md);
		const char *tmpdir = getenv("TMPDIR");
		snprintf(tmp_path, sizeof tmp_path, "%s/sky-submit-%ld.int8.safetensors",
			 tmpdir && *tmpdir ? tmpdir : "/tmp", (long)sky_clock_unix() ^ (long)(size_t)&j);
		if (sky_job_model_prepare(weights, tmp_path, &j, int8_path, sizeof int8_path, &made_tmp,
					  &md) != 0 ||
		    sky_upload_sha(int8_path, &uo, wsha, &md) != 0) {
			fprintf(stderr, "sky job submit: %s\n", md.msg);
			if (made_tmp)
				sky_file_remove(tmp_path);
			return 1;
		}
		sky_sha256_hex(wsha, j.weights);
	}
	if (!pki || !broker || (!file && !j.model[0])) {
		fprintf(stderr, "sky job submit: --pki, --broker and --model (or --file) are required\n");
		return 2;
	}
	static char doc[SKY_JOB_MAX_BYTES + 1];
	sky_diag d;
	sky_diag_clear(&d);
	int n;
	if (file) {
		long got = sky_file_read(file, doc, sizeof doc - 1);
		if (got < 0) {
			fprintf(stderr, "sky job submit: cannot read %s (%s)\n", file, sky_strerror((int)got));
			return 1;
		}
		n = (int)got;
		/* the file's job, re-encoded below with a submit_id of this run */
		char owner[sizeof j.data_owner];
		snprintf(owner, sizeof owner, "%s", j.data_owner);
		if (sky_job_req_parse(doc, (size_t)n, &j, &d) != 0) {
			fprintf(stderr, "sky job submit: %s: %s\n", file, d.msg);
			return 2;
		}
		j.link_blind |= link_blind;
		if (owner[0])
			snprintf(j.data_owner, sizeof j.data_owner, "%s", owner);
	} else {
		j.link_blind = link_blind;
		if (!j.job[0])
			snprintf(j.job, sizeof j.job, "job-%lld", (long long)sky_clock_unix());
		if (j.train) {
			if (j.lr < 0)
				j.lr = strcmp(j.optim, "sgd") == 0 ? 0.05 : 1e-3;
			if (j.warmup < 0)
				j.warmup = j.steps / 10;
		}
	}
	/* names this submission: a resend carries it too, so skyplan queues it
	 * once and answers each copy */
	unsigned char raw[12];
	sky_sign_rng srng;
	if (sky_sign_rng_init(&srng, "sky-job-submit", &d) != 0 ||
	    sky_sign_rng_func(&srng, raw, sizeof raw) != 0) {
		sky_sign_rng_free(&srng);
		fprintf(stderr, "sky job submit: no randomness for the submission id\n");
		return 1;
	}
	sky_sign_rng_free(&srng);
	for (int i = 0; i < 8; i++)
		snprintf(j.submit_id + 2 * i, 3, "%02x", raw[i]);
	n = sky_job_req_encode(&j, doc, sizeof doc);
	/* check locally what skyplan will check, so a typo fails here */
	if (n < 0 || sky_job_req_parse(doc, (size_t)n, &j, &d) != 0) {
		fprintf(stderr, "sky job submit: %s\n", d.msg[0] ? d.msg : "job does not fit");
		return 2;
	}

	char ca[600], crt[600], key[600], pcrt[600], client[48], op[80];
	snprintf(ca, sizeof ca, "%s/ca.crt", pki);
	snprintf(crt, sizeof crt, "%s/operator.crt", pki);
	snprintf(key, sizeof key, "%s/operator.key", pki);
	snprintf(pcrt, sizeof pcrt, "%s/planner.crt", pki);
	snprintf(client, sizeof client, "job-%02x%02x%02x%02x", raw[8], raw[9], raw[10], raw[11]);
	follow *f = &g_f;
	memset(f, 0, sizeof *f);
	sky_mutex_init(&f->lock);
	mbedtls_x509_crt_init(&f->planner);
	sky_topic_job(f->plan_topic, sizeof f->plan_topic, j.job, SKY_TOPIC_PLAN);
	snprintf(f->submit_id, sizeof f->submit_id, "%s", j.submit_id);
	/* our CN names our topics; the ACL lets only us use them */
	{
		mbedtls_x509_crt me;
		mbedtls_x509_crt_init(&me);
		int crc = sky_sign_load_cert(&me, crt, &d);
		if (!crc && (sky_sign_cert_cn(&me, op, sizeof op) != 0 ||
			     sky_topic_jobs(f->reply_topic, sizeof f->reply_topic, op,
					    SKY_TOPIC_REPLY) != 0))
			crc = sky_diag_set(&d, SKY_EAUTH, "%s: no usable operator CN", crt);
		mbedtls_x509_crt_free(&me);
		if (crc) {
			fprintf(stderr, "sky job submit: %s (an operator identity from `sky pki init` "
					"or `sky pki operator`)\n",
				d.msg);
			return 1;
		}
	}
	char submit_topic[SKY_TOPIC_BUF];
	sky_topic_jobs(submit_topic, sizeof submit_topic, op, SKY_TOPIC_SUBMIT);
	if (wait_s > 0 && sky_sign_load_cert(&f->planner, pcrt, &d) != 0) {
		fprintf(stderr, "sky job submit: %s\n", d.msg);
		return 1;
	}
	/* operator tools use the listener beside the fleet's (port + 1), where
	 * their random client ids are kept: submit, watch and collect of one
	 * operator may run at once (sky_mqtt_claim_broker) */
	char tools_broker[300];
	if (sky_mqtt_claim_broker(broker, tools_broker, sizeof tools_broker) != 0) {
		fprintf(stderr, "sky job submit: --broker must be HOST:PORT (port below 65535), got '%s'\n",
			broker);
		return 2;
	}
	sky_mqtt_opts mo = {.broker = tools_broker, .client_id = client, .ca_file = ca,
			    .cert_file = crt, .key_file = key, .keepalive_s = 30, .on_msg = on_msg,
			    .ctx = f};
	sky_mqtt *m = NULL;
	int rc = 1, sends = 0, uploaded = !(j.infer && !file);
	char last_err[256] = "";
	double t0 = sky_clock_s(), next_send = t0;
	sky_mqtt_backoff backoff; /* 0.25 s doubling to 2 s, jittered */
	sky_mqtt_backoff_init(&backoff, 250, 2000, sky_clock_ns());
	/* until answered: (re)connect, subscribe to the answers, send; a
	 * connection that drops, or a planner that did not hear, gets it again */
	for (;;) {
		sky_mutex_lock(&f->lock);
		int answered = f->answered;
		sky_mutex_unlock(&f->lock);
		if (answered)
			break;
		double now = sky_clock_s();
		if (now - t0 >= ack_s) {
			sky_diag_clear(&d);
			sky_diag_set(&d, SKY_ETIMEOUT,
				     "job %s NOT acknowledged: no answer from the planner within %g s "
				     "(%d sends%s%.120s); is skyplan running?",
				     j.job, ack_s, sends, last_err[0] ? "; last error: " : "", last_err);
			goto fail;
		}
		if (!sky_mqtt_connected(m)) {
			sky_mqtt_close(m, 0);
			m = NULL;
			sky_diag cd;
			sky_diag_clear(&cd);
			int crc = sky_mqtt_connect(&m, &mo, &cd);
			if (!crc)
				crc = sky_mqtt_subscribe(m, f->reply_topic, 1, 5000, &cd);
			if (!crc && wait_s > 0)
				crc = sky_mqtt_subscribe(m, f->plan_topic, 1, 5000, &cd);
			if (!crc && wait_s > 0)
				crc = sky_mqtt_subscribe(m, SKY_TOPIC_ROOT "/board/+/" SKY_TOPIC_PLAN_ACK, 1,
							 5000, &cd);
			if (crc) {
				snprintf(last_err, sizeof last_err, "%s", cd.msg);
				if (crc == SKY_EAUTH) { /* the ACL said no: asking again will not help */
					sky_diag_set(&d, crc, "%s", cd.msg);
					goto fail;
				}
				sky_mqtt_close(m, 0);
				m = NULL;
				sky_sleep_ms((unsigned)sky_mqtt_backoff_next(&backoff));
				continue;
			}
			sky_mqtt_backoff_reset(&backoff);
			next_send = sky_clock_s();
		}
		if (!uploaded) {
			sky_diag ud;
			sky_diag_clear(&ud);
			int urc = upload_phase(f, m, op, int8_path, wsha, &uo, ack_s, j.submit_id, json,
					       &ud);
			if (urc == SKY_ENET) {
				snprintf(last_err, sizeof last_err, "%s", ud.msg);
				continue; /* reconnect and send it again */
			}
			if (urc) {
				sky_diag_set(&d, urc, "%s", ud.msg);
				goto fail;
			}
			uploaded = 1;
			next_send = sky_clock_s();
		}
		if (sky_clock_s() >= next_send) {
			sky_diag pd;
			sky_diag_clear(&pd);
			if (sky_mqtt_publish(m, submit_topic, doc, (size_t)n, 1, 0, &pd) == 0)
				sends++;
			else
				snprintf(last_err, sizeof last_err, "%s", pd.msg);
			next_send = sky_clock_s() + 2.0;
		}
		sky_mqtt_poll(m, 20);
	}
	if (!f->reply.ok) {
		sky_diag_set(&d, SKY_EINVAL, "job %s refused by the planner: %s", j.job, f->reply.error);
		goto fail;
	}
	if (!json)
		fprintf(stderr, "sky job submit: job %s acknowledged by the planner (%s, %d send%s)\n",
			j.job, f->reply.state, sends, sends == 1 ? "" : "s");
	t0 = sky_clock_s();
	if (wait_s <= 0) {
		if (json)
			printf("{\"job\":\"%s\",\"submitted\":true,\"acked\":true,\"sends\":%d}\n",
			       j.job, sends);
		else
			printf("job %s submitted and acknowledged\n", j.job);
		sky_mqtt_close(m, 1000);
		if (made_tmp)
			sky_file_remove(tmp_path);
		return 0;
	}
	int done = 0, accepted = 0, refused = 0;
	double last_at = 0;
	while (sky_clock_s() - t0 < wait_s) {
		sky_mutex_lock(&f->lock);
		if (f->have_plan) {
			done = accepted = refused = 0;
			last_at = 0;
			for (int s = 0; s < f->plan.n_stages; s++) {
				double at;
				const sky_planack *a =
					find_ack(f, f->plan.stages[s].board, f->plan.job, f->plan.epoch, &at);
				if (a) {
					done++;
					accepted += a->ok;
					refused += !a->ok;
					if (at > last_at)
						last_at = at;
				}
			}
		}
		int all = f->have_plan && done == f->plan.n_stages;
		sky_mutex_unlock(&f->lock);
		if (all)
			break;
		sky_mqtt_poll(m, 20);
	}
	sky_mutex_lock(&f->lock);
	if (!f->have_plan) {
		sky_mutex_unlock(&f->lock);
		sky_diag_set(&d, SKY_ETIMEOUT, "no plan for job %s within %g s (is skyplan running?)",
			     j.job, wait_s);
		goto fail;
	}
	const sky_planmsg *p = &f->plan;
	if (json) {
		printf("{\"job\":\"%s\",\"epoch\":%lld,\"stages\":%d,\"accepted\":%d,\"refused\":%d,"
		       "\"missing\":%d,\"plan_s\":%.3f,\"all_acked_s\":%.3f,\"boards\":[",
		       p->job, (long long)p->epoch, p->n_stages, accepted, refused, p->n_stages - done,
		       f->plan_at - t0, done == p->n_stages ? last_at - t0 : -1.0);
		for (int s = 0; s < p->n_stages; s++) {
			double at;
			const sky_planack *a = find_ack(f, p->stages[s].board, p->job, p->epoch, &at);
			printf("%s{\"board\":\"%s\",\"site\":\"%s\",\"first\":%d,\"last\":%d,"
			       "\"ack\":\"%s\",\"arena_bytes\":%lld}",
			       s ? "," : "", p->stages[s].board, sky_site_name(p->stages[s].site),
			       p->stages[s].first, p->stages[s].last,
			       !a ? "missing" : a->ok ? "accepted" : "refused",
			       a ? (long long)a->arena_bytes : 0ll);
		}
		printf("]}\n");
	} else {
		printf("job %s epoch %lld: %d stages, plan %.3f s after submit\n", p->job,
		       (long long)p->epoch, p->n_stages, f->plan_at - t0);
		for (int s = 0; s < p->n_stages; s++) {
			double at;
			const sky_planack *a = find_ack(f, p->stages[s].board, p->job, p->epoch, &at);
			printf("  stage %2d  %-16s half-layers %3d-%-3d  %s", s, p->stages[s].board,
			       p->stages[s].first, p->stages[s].last,
			       !a ? "no ack" : a->ok ? "accepted" : "REFUSED");
			if (a)
				printf(" %lld bytes%s%s", (long long)a->arena_bytes, a->ok ? "" : ": ",
				       a->ok ? "" : a->reason);
			printf("\n");
		}
		printf("%d accepted, %d refused, %d missing\n", accepted, refused, p->n_stages - done);
	}
	rc = (accepted == p->n_stages) ? 0 : 1;
	sky_mutex_unlock(&f->lock);
	sky_mqtt_close(m, 1000);
	mbedtls_x509_crt_free(&f->planner);
	if (made_tmp)
		sky_file_remove(tmp_path);
	return rc;
fail:
	fprintf(stderr, "sky job submit: %s\n", d.msg);
	sky_mqtt_close(m, 1000);
	mbedtls_x509_crt_free(&f->planner);
	if (made_tmp)
		sky_file_remove(tmp_path);
	return 1;
}

int sky_cmd_job(int argc, char **argv)
{
	static const sky_cmd subs[] = {
		{"submit", "hand a job to skyplan", cmd_submit},
		{"watch", "one line per training step", sky_job_watch},
		{"collect", "the trained parts into one safetensors file", sky_job_collect},
		{"frame", "craft a tensor frame (tests)", sky_job_frame},
		{"data", "a training micro-batch's tokens and labels as hex (tests)", sky_job_data},
	};
	return sky_cli_dispatch("sky job", argc, argv, subs, sizeof subs / sizeof subs[0], usage);
}
