/* The job-request codec: what an operator submits to the planner
 * (sky/v1/jobs/<operator CN>/submit, or skyplan --job) and the planner's
 * answer (sky/v1/jobs/<operator CN>/reply). The document's fields are
 * described in sky_service.h. Shared by the planner, its job state files
 * (sky_jobstate.h) and `sky job submit`, which link this file and not the
 * service. */
#ifndef SKY_JOBREQ_H
#define SKY_JOBREQ_H

#include "sky_err.h"

#include <stddef.h>

/* A submitted job, as parsed from its JSON (bounded by SKY_JOB_MAX_BYTES). */
#define SKY_JOB_MAX_CLIENTS 32
#define SKY_JOB_MAX_FED_OWNERS 64
typedef struct sky_job_req {
	char job[65];
	char model[16];
	int layers, seq, batch; /* 0: the preset's */
	int micro_batches;      /* default 4 */
	char algo[16];          /* even, sky, optimal (default) */
	char sched[8];          /* gpipe, 1f1b (default) */
	char objective[16];     /* what optimal minimises: step (default), bottleneck */
	int min_boards;         /* 0: every online board */
	double wait_s;          /* default 30 */
	char submit_id[33];     /* "" or 8-32 of [0-9a-f]: names one submission, resends included */
	/* training ("task":"train"; otherwise the boards only hold the plan):
	 * what `sky train`'s options of the same names mean */
	int train;              /* 1 for "task":"train" */
	int steps;              /* default 10 */
	char optim[8];          /* adamw (default), sgd */
	double lr;              /* default: adamw 1e-3, sgd 0.05 */
	int seed;               /* default 1 */
	int warmup;             /* default steps / 10 */
	double clip;            /* default 1 */
	double stall_s;         /* frame deadline, 0: derived from the predicted step */
	int plaintext;          /* 1: frames not sealed ("plaintext_frames":true) */
	char data_owner[65];    /* "data_owner":"<board>": its data stays on it (a U-shaped
				 * plan, sky_plan.h; no checkpoints), "" none */
	/* fine-tuning on a data set boards hold (sky_caps.h "datasets"):
	 *   "dataset":"train","eval_dataset":"dev","tokenizer":"7d875ae3"
	 * the stage that reads the data goes on a board holding the set (the
	 * data owner, if there is one, must hold it); tokenizer is the model's
	 * tokenizer hash, which the set's must equal ("" not checked) */
	char dataset[65];       /* "" none: the synthetic task */
	char eval_dataset[65];  /* "" none; only with dataset */
	char tokenizer[9];      /* 8 lower-case hex digits, or "": also, for "task":"infer",
				 * the served model's tokenizer (sky_tokenizer.h), copied
				 * into the plan so a text client can check its own */
	char dataset_sha256[65]; /* "dataset_sha256": the set's file hash the job was made for
				  * (64 lower-case hex digits), "" any */
	/* serving ("task":"infer"): the int8 model uploaded to the planner
	 * before the submit (sky_deploy.h), named by its SHA-256:
	 *   "task":"infer","weights":"<64 hex>","serve_batch":8,"wait_ms":2,
	 *   "queue":64,"clients":["sky-client-demo"],"replan":true
	 * (all but weights optional) */
	int infer;              /* 1 for "task":"infer" */
	char weights[65];       /* the model's SHA-256, lower-case hex */
	int serve_batch;        /* requests per micro-batch, 1..model batch (0: the model batch) */
	int wait_ms;            /* first stage's wait for a batch (default 2) */
	int queue;              /* first stage's queue bound (default 64) */
	int n_clients;          /* 0: any sky-client-* */
	char clients[SKY_JOB_MAX_CLIENTS][65];
	int no_replan;          /* "replan":false: a board of the plan that dies or is
				 * revoked does not re-plan the job (its plan waits for
				 * the board; planner/sky_servefault.h) */
	int ckpt_every;         /* "checkpoint_every": K (default 10), 0: no checkpoints,
				 * and no re-plans when a board dies */
	int link_blind;         /* 1: plan without pricing site paths ("link_blind":true) */
	/* ---- stage replicas (training; planner/svc_plan.c) ---- */
	int no_replicas;        /* "replicas":false: optimal plans a pipeline only (one board
				 * a stage, the job's batch and micro-batches), as before
				 * replicas; default: the planner may replicate stages and
				 * choose the micro-batching (docs/training.md) */
	int choose_micro;       /* "choose_micro":true: with replicas, the planner also picks
				 * the micro-batch size (B x M = the global batch); default:
				 * the job's --batch is kept, as the cost model is linear in
				 * B and was measured wrong at B = 1 (docs/training.md) */
	/* ---- federated training (planner/svc_fed.c, docs/federation.md) ----
	 *   "task":"train","dataset":"train","federated":{"model":"<64 hex>",
	 *   "owners":["b1","b2"] (or "all"),"rounds":R,"local_steps":E,
	 *   "fraction":1,"min_owners":1,"deadline_s":0,"straggler":"wait",
	 *   "server_opt":"avg","server_lr":0,"prox_mu":0,"secure_agg":false,
	 *   "dp_clip":0,"dp_noise":0}
	 * (all but model, owners, rounds and local_steps optional). model is
	 * the SHA-256 of the model bundle (sky_fedmsg.h) uploaded before the
	 * submit; steps becomes rounds x local_steps (the learning-rate
	 * schedule's length). */
	struct {
		int on;
		char model[65];
		int all_owners;
		int n_owners;
		char owners[SKY_JOB_MAX_FED_OWNERS][65];
		int rounds, local_steps;
		double fraction;     /* of the owners sampled each round, (0, 1] */
		int min_owners;      /* a round needs at least this many in */
		double deadline_s;   /* a round's deadline, 0: none */
		int straggler_close; /* 1: "close" at the deadline, 0: "wait" */
		char server_opt[8];  /* avg, avgm, adam (sky_fedopt.h) */
		double server_lr;    /* 0: the server optimizer's default */
		double prox_mu, dp_clip, dp_noise;
		int secure;
	} fed;
	/* ---- fine-tuning a Hugging Face checkpoint (its own block) ----
	 * "model":"hf" with the config.json's model (sky job submit --task
	 * train --model-dir D reads it):
	 *   "hf":{"hidden":80,"heads":5,"ffn":136,"vocab":600,"max_pos":512,
	 *         "type_vocab":2,"classes":3,"act":0,"ln_eps":1e-07,
	 *         "hidden_drop":0.1,"attn_drop":0.1,"init":"<64 hex>"}
	 * with "layers" beside "model" as for a preset. init: the SHA-256 of
	 * the fp32 checkpoint uploaded before the submit, which the stages
	 * start from (each gets its slice, sky_planmsg.h "hf"). */
	struct {
		int on;
		int hidden, heads, ffn, vocab, max_pos, type_vocab, classes, act;
		double ln_eps, hidden_drop, attn_drop;
		char init[65]; /* "" none: from the seed */
	} hf;
} sky_job_req;

/* Zeroes j and writes the default of every field a job document may leave
 * out: the ones of any job, and for task "train" or "infer" that task's
 * too ("*": both, for a tool that learns the task later; NULL or any other:
 * neither). The task's flag (j->train, j->infer) is not set; lr and warmup
 * are -1, "from the optimiser" and "steps / 10", which
 * sky_job_req_resolve fills in. Cannot fail. */
void sky_job_req_defaults(sky_job_req *j, const char *task);
/* A training job's lr and warmup left at -1 (the defaults): the
 * optimiser's lr (adamw 1e-3, sgd 0.05) and steps / 10. sky_job_req_parse
 * calls it. */
void sky_job_req_resolve(sky_job_req *j);
/* Parses and checks a job document. Returns 0 or SKY_EFORMAT / SKY_ERANGE /
 * SKY_EINVAL naming the field. */
int sky_job_req_parse(const char *buf, size_t len, sky_job_req *j, sky_diag *d);
/* The model a request names: its preset with its layers, seq and batch,
 * or the "hf" block's config (name "hf"). Returns 0 or SKY_EINVAL. */
struct sky_model_cfg;
int sky_job_req_model(const sky_job_req *r, struct sky_model_cfg *c);
/* Writes j as JSON. Returns the length or SKY_ERANGE. */
int sky_job_req_encode(const sky_job_req *j, char *buf, size_t cap);

/* The planner's answer to one submission (at most SKY_JOB_REPLY_MAX_BYTES):
 *   {"v":1,"submit_id":"<hex>","job":"j1","ok":true,"state":"queued"}
 *   {"v":1,"submit_id":"<hex>","job":"j1","ok":false,"error":"<why>"} */
#define SKY_JOB_REPLY_ERROR_MAX 200
typedef struct sky_job_reply {
	char submit_id[33];
	char job[65];
	int ok;
	char state[16]; /* "queued" */
	char error[SKY_JOB_REPLY_ERROR_MAX + 1];
} sky_job_reply;
/* Returns the length or SKY_ERANGE. */
int sky_job_reply_encode(const sky_job_reply *r, char *buf, size_t cap);
/* Returns 0 or SKY_ERANGE / SKY_EFORMAT with d naming the field. */
int sky_job_reply_decode(const char *buf, size_t len, sky_job_reply *r, sky_diag *d);

#endif
