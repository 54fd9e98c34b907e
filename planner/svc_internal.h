/* The planner service's private parts (sky_service.h is its public face):
 * the state, cut by concern, and the calls between its files. Only the
 * service's own files include this (tests/integration/test_layering.sh
 * enforces it):
 *
 *   service.c     sky_service_run: start, the loop, connect and loss, and the
 *                 message router (a table of topic -> handler)
 *   svc_submit.c  submissions, their resend cache, the queue, requeue
 *   svc_enroll.c  enrollment and its rate limits
 *   svc_fleet.c   board messages and their online/offline transitions,
 *                 oversize messages, revocation, probe asks
 *   svc_links.c   link probes of the sites' paths
 *   svc_plan.c    planning a job: its fleet, the plan, publishing it (keys,
 *                 loads), and evaluating the plan that runs
 *   svc_store.c   saved plans, the epoch, republishing, fleet.json/jobs.json
 *   svc_follow.c  the jobs followed for re-plans, their tick, restore
 *   svc_replan.c  the one entry point of every re-plan
 *   svc_train.c   checkpoint commits, drift, checkpoint asks, the gain check,
 *                 training restore
 *   svc_serve.c   serving answers and replays, unknown_job answers, slices,
 *                 displaced jobs, serving restore
 *   svc_log.c     throttled warnings and their flush
 *   svc_relay.c   what a job's owner reads: its metrics, parts and last
 *                 state relayed to sky/v1/jobs/<owner>/job/<job>/...; the
 *                 owners' cache; cancelled jobs
 *   svc_cancel.c  sky job cancel: its owner's request, the job stopped
 *   svc_gc.c      abandoned uploads' files removed; the model and slice
 *                 store bounded (least recently used first)
 *
 * Each file owns its part of svc (the member named after it) and writes
 * only that; what another file needs goes through the svc_<file>_* calls
 * below. The modules under them (registry, jobstat, ckpt, deploy, nojob,
 * servefault) are shared through their own sky_* calls. */
#ifndef SVC_INTERNAL_H
#define SVC_INTERNAL_H

#include "sky_service.h"

#include "sky_ca.h"
#include "sky_calib.h"
#include "sky_ckpt.h"
#include "sky_crl.h"
#include "sky_jobstat.h"
#include "sky_jobstate.h"
#include "sky_linkprobe.h"
#include "sky_log.h"
#include "sky_model.h"
#include "sky_mqtt.h"
#include "sky_nojob.h"
#include "sky_plan.h"
#include "sky_planmsg.h"
#include "sky_ratelimit.h"
#include "sky_registry.h"
#include "sky_servefault.h"
#include "sky_sign.h"
#include "sky_topics.h"

#include <stdatomic.h>
#include <stdint.h>

/* jobs waiting for boards, all operators together (each operator's own
 * limit is --max-pending-per-operator, sky_owner.h) */
#define MAX_PENDING 64
/* answers kept for resends: a retrying `sky job submit` gets the same one */
#define MAX_RECENT 32
/* A training job with checkpoints (or a serving job that re-plans) is
 * followed until it is done so it can be re-planned: at once when a board
 * of its plan goes offline (from the last complete checkpoint), or, when a
 * board joins or its speed changes, at the next commit if the predicted
 * step improves by more than --replan-gain and the plan is
 * --replan-holdoff old. */
#define MAX_RUNNING 16
#define RUN_MAX_STAGES SKY_JOBSTATE_MAX_STAGES
#define RUN_MAX_REPS SKY_JOBSTATE_MAX_REPS

typedef struct svc svc;

/* ---- the jobs the files pass each other ---------------------------------- */

/* A job as planned: its request and its model with the request's shapes. */
typedef struct svc_job {
	sky_job_req req;
	char op[SKY_TOPIC_SEGMENT_MAX + 1]; /* its owner's CN (sky_owner.h) */
	sky_model_cfg model; /* with the job's layers, seq, batch */
} svc_job;

/* What was said once per registry board about a job: a probe asked of
 * board i, or that board i has no int8 times (serving). */
typedef struct svc_notes {
	unsigned char asked[SKY_REG_MAX_BOARDS];
	unsigned char no_int8[SKY_REG_MAX_BOARDS];
} svc_notes;

/* A submitted job waiting for its boards (svc_submit.c). */
typedef struct svc_pending {
	svc_job job;
	double since; /* when it arrived (monotonic) */
	svc_notes notes;
} svc_pending;

/* A job followed for re-plans: its plan (svc_follow.c), its re-plan and
 * pause (svc_replan.c) and what training needs (svc_train.c); each part
 * written by its file only. */
typedef struct run_job {
	svc_job job;         /* the request, for re-plans */
	svc_notes notes;     /* as its first plan left them */
	int64_t epoch;       /* of the current plan */
	int generation;
	int n_stages;
	char board[RUN_MAX_STAGES][SKY_TOPIC_SEGMENT_MAX + 1];
	int first[RUN_MAX_STAGES], last[RUN_MAX_STAGES];
	char plan_sha[65];   /* the signed plan's SHA-256 (kept in the state file) */
	double predicted_s;
	double plan_s;       /* monotonic: when the current plan went out */
	/* taken back from <state>/jobs/<job>.run.json at a restart (monotonic
	 * restored_at): until restored_until, a board not heard from since (the
	 * registry restores every board offline) is not taken for dead yet */
	double restored_at, restored_until;
	/* each stage's slice (serving; kept in the state file, checked again
	 * at a restart) */
	sky_plan_slice slice[RUN_MAX_STAGES];
	/* stage replicas (training): the plan's micro-batch size and count,
	 * each stage board's share of the micro-batches (0: the stage has no
	 * replicas), and the boards besides board[k] that run a stage: stage
	 * rep_stage[i], share rep_share[i] */
	int micro_batch, micro_batches;
	int exact_sum; /* its plans sum in fixed point: re-plans keep B, M and that */
	int share0[RUN_MAX_STAGES];
	int n_rep;
	char rep_board[RUN_MAX_REPS][SKY_TOPIC_SEGMENT_MAX + 1];
	int rep_stage[RUN_MAX_REPS], rep_share[RUN_MAX_REPS];
	struct {
		/* svc_replan.c */
		int paused;
		double retry_s;      /* paused: next attempt */
		char pause_why[200]; /* the fault that paused it */
		double fault_s;      /* monotonic: the fault or decision a re-plan answers (0 none) */
	} replan;
	struct {
		/* svc_train.c */
		/* drift: each stage's busy seconds a step (metrics busy x step_s):
		 * the mean of its first steps under this plan, the last step seen,
		 * how many steps in a row were off by more than half, and when its
		 * board was last asked to probe again */
		double busy_base[RUN_MAX_STAGES];
		int busy_n[RUN_MAX_STAGES], busy_step[RUN_MAX_STAGES], drift_run[RUN_MAX_STAGES];
		double probe_asked_s[RUN_MAX_STAGES];
		int want;            /* a voluntary re-plan waits for the next commit */
		char want_why[160];
		long commits_at_want;
		int ask_step, ask_ahead; /* the checkpoint asked for it, and how far ahead */
		double next_eval_s;
	} train;
} run_job;

/* Boards of r's plan: its stages' own and their replicas (svc_follow.c);
 * board i of them (0 .. n_stages - 1: stage i's own), its stage in *stage
 * (may be NULL), or NULL out of range. */
int svc_follow_boards(const run_job *r);
const char *svc_follow_board(const run_job *r, int i, int *stage);

/* How a job is planned (svc_plan_job): a queued job, or a re-plan of a
 * followed one from its last complete checkpoint. */
typedef struct svc_plan_req {
	const svc_job *job;
	const svc_notes *notes; /* kept by a job followed from this plan */
	int replan;             /* a re-plan: quiet about what its caller says */
	int resume_step, generation;
} svc_plan_req;

/* What planning a job gave. */
typedef struct svc_plan_result {
	int64_t published;  /* the epoch published (0: none) */
	double predicted_s; /* the plan's simulated step */
	char why[200];      /* why there is no plan */
} svc_plan_result;

/* ---- each file's state ----------------------------------------------------- */

typedef enum svc_log_kind {
	SVC_LOG_ENROLL,   /* enrollment refusals */
	SVC_LOG_OVERSIZE, /* oversize messages */
	SVC_LOG_REVOKED,  /* messages from revoked boards */
	SVC_LOG_REQ,      /* inference request refusals */
	SVC_LOG_SF,       /* serving requests not tracked */
	SVC_LOG_N
} svc_log_kind;

/* Why a message on a job's topics was refused (svc_refused). */
typedef enum svc_refuse_kind {
	SVC_REFUSE_METRICS, /* metrics from a board that is not one of the job's stages */
	SVC_REFUSE_READY,   /* a ready for stage k from another board than k's */
	SVC_REFUSE_ANSWER,  /* an answer from a board that is neither last nor first stage */
	SVC_REFUSE_CKPT,    /* a checkpoint image from a board not holding those blocks */
	SVC_REFUSE_SLICE,   /* a slice request for a slice the board's plan does not give it */
	SVC_REFUSE_SLICE_RATE, /* a board's slice requests over its rate */
	SVC_REFUSE_REVOKED, /* anything from a revoked board */
	SVC_REFUSE_PART,    /* a trained part from a board that is not one of the job's stages */
	SVC_REFUSE_PART_CHUNK, /* a chunk of a part that is malformed or not under its index */
	SVC_REFUSE_N
} svc_refuse_kind;

typedef struct svc_log_state {
	sky_log_throttle t[SVC_LOG_N];
	sky_log_throttle refused[SVC_REFUSE_N]; /* one line per reason per window */
} svc_log_state;

typedef struct svc_submit_state {
	svc_pending pending[MAX_PENDING];
	int n_pending;
	struct {
		char op[SKY_TOPIC_SEGMENT_MAX + 1];
		char submit_id[33];
		char reply[SKY_JOB_REPLY_MAX_BYTES];
		int len;
	} recent[MAX_RECENT];
	int next_recent;
	char job_file[SKY_JOB_MAX_BYTES + 1]; /* --job's document */
} svc_submit_state;

typedef struct svc_enroll_state {
	sky_bucket all;          /* every connection's requests together (svc_enroll.c) */
	sky_bucket issue;        /* requests with a valid token: the signing */
	sky_keyed_buckets nonce; /* per nonce, which is per claim connection */
	long limited; /* requests dropped unread by the rate limit */
	char reply[SKY_ENROLL_REPLY_MAX];
} svc_enroll_state;

typedef struct svc_fleet_state {
	/* the CA's revoked list (<pki>/revoked, sky_crl.h), read again every
	 * REVOKED_CHECK_S: `sky pki revoke` needs no message to reach us */
	sky_crl_list revoked;
	double revoked_check_at; /* monotonic */
	/* which registry boards were online before a message or a tick: the
	 * one diff that says every transition */
	unsigned char was_online[SKY_REG_MAX_BOARDS];
	int was_n;
} svc_fleet_state;

typedef struct svc_links_state {
	sky_linkprobe probe; /* each site's path through its bridge */
} svc_links_state;

typedef struct svc_plan_state {
	/* working memory for planning (large structs, kept out of the stack) */
	sky_fleet fleet;
	sky_plan plan, cur;
	sky_sim_result sim;
	sky_planmsg msg;
	char payload[SKY_SIGN_MAX_PAYLOAD];
	char envelope[SKY_SIGN_MAX_ENVELOPE];
	/* stage replicas (svc_plan.c): the hybrid plan of the last compute,
	 * published instead of plan when use_hyb (its stage table on the
	 * heap, freed by svc_plan_free) */
	sky_hplan hyb;
	int use_hyb;
	double bound_s; /* the job's step lower bound on this fleet (sky_hplan_bounds) */
	int quiet;      /* 1 while svc_plan_evaluate plans (every second): no log lines */
	/* the board's own figure for a role (sky_service_opts.train_bytes;
	 * NULL: the estimate stands) */
	sky_service_train_bytes_fn train_bytes;
	/* budgets learned below what boards report (svc_plan.c): from a
	 * board's refusal (its real budget, less what it needed beyond our
	 * figure) or from pricing a plan (the excess of a role); applied to
	 * the board while its report still says mem_bytes reported */
	struct {
		char id[SKY_TOPIC_SEGMENT_MAX + 1];
		int64_t reported, budget;
	} mem_cap[SKY_PLAN_MAX_BOARDS];
	int n_mem_cap;
} svc_plan_state;

typedef struct svc_store_state {
	int64_t epoch; /* the newest ever published (persisted in <state>/epoch) */
	/* retained plans on the broker since the last connect, per registry
	 * job: the newest epoch seen there (0: none yet). When republish_at
	 * passes, every job whose plan is missing or older there is published
	 * again from <state>/plans/<job>.env. */
	int64_t on_broker[SKY_REG_MAX_JOBS];
	double republish_at; /* monotonic; 0: nothing due */
	sky_planmsg msg;     /* a saved or retained plan read back */
	char payload[SKY_SIGN_MAX_PAYLOAD];
	char envelope[SKY_SIGN_MAX_ENVELOPE];
	char status_buf[4u << 20]; /* fleet.json, jobs.json */
	sky_fleet links;           /* --links, read at start */
} svc_store_state;

typedef struct svc_follow_state {
	run_job run[MAX_RUNNING];
	int n_run;
	sky_jobstate js;     /* a state file being saved */
	sky_jobstate loaded; /* a state file read at start */
} svc_follow_state;

typedef struct svc_replan_state {
	svc_notes notes; /* a re-plan's copy of its job's */
} svc_replan_state;

typedef struct svc_train_state {
	svc_notes notes; /* the gain check's copy of its job's */
} svc_train_state;

#define SVC_RELAY_OWNERS 64    /* owners cached (least recently used goes) */
#define SVC_RELAY_CANCELLED 32 /* cancelled jobs remembered (not relayed any more) */
typedef struct svc_relay_state {
	struct {
		char job[SKY_TOPIC_SEGMENT_MAX + 1];
		char op[SKY_TOPIC_SEGMENT_MAX + 1];
		unsigned long used; /* 0: free */
	} owner[SVC_RELAY_OWNERS];
	unsigned long tick;
	char cancelled[SVC_RELAY_CANCELLED][SKY_TOPIC_SEGMENT_MAX + 1];
	int next_cancelled;
	/* <state>/operators.json: being built, and as last written */
	char ops_json[8192], ops_saved[8192];
	size_t ops_len;
} svc_relay_state;

typedef struct svc_calib_state {
	sky_calib t;      /* boards' figures folded from their jobs' metrics (<state>/calib.json) */
	double saved_s;   /* monotonic: when calib.json was last written */
	/* per board of s->plan.fleet, as svc_plan_fleet built it last: 1 when it
	 * carries folded figures, 0 its probe's */
	unsigned char used[SKY_PLAN_MAX_BOARDS];
} svc_calib_state;

typedef struct svc_serve_state {
	char req_resp[SKY_INFER_RESP_MAX_BYTES];
	sky_keyed_buckets slice_rate; /* slice requests per board */
	int slice_rate_on;
} svc_serve_state;

struct svc {
	/* service.c: set at start, read by every file */
	const sky_service_opts *o;
	char state_dir[512];
	sky_ca ca;
	sky_signer signer;
	mbedtls_x509_crt planner_crt; /* to read our own retained plans back */
	/* No lock: every message handler (on_msg, on_oversize) and the loop's
	 * tick run on the loop's thread, sky_mqtt_poll_for handing messages
	 * over on the caller's thread (sky_mqtt.h). Only on_lost runs on
	 * Paho's thread, and it only sets lost. The metrics scrape reads its
	 * own snapshot (sky_metrics.h). Checked by the ThreadSanitizer leg. */
	sky_mqtt *m;
	/* NULL: svc_publish is sky_mqtt_publish on m; a unit test's recorder */
	int (*publish)(void *ctx, const char *topic, const void *data, size_t len, int qos,
		       int retained, sky_diag *d);
	void *publish_ctx;
	_Atomic int lost; /* set on Paho's thread (on_lost); not under the lock */
	/* shared modules, each written through its own sky_* calls */
	sky_registry reg;
	sky_jobstat jobs;    /* training jobs, from their metrics */
	sky_ckpt_store ckpt; /* checkpoints and job logs */
	sky_deploy deploy;   /* model uploads, slices, slice transfers */
	sky_nojob nojob;     /* inference requests for jobs that do not serve */
	sky_servefault sf;   /* serving jobs' unanswered requests, replayed after a re-plan */
	/* each file's own */
	svc_log_state log;
	svc_submit_state submit;
	svc_enroll_state enroll;
	svc_fleet_state fleet;
	svc_links_state links;
	svc_plan_state plan;
	svc_store_state store;
	svc_follow_state follow;
	svc_replan_state replan;
	svc_train_state train;
	svc_serve_state serve;
	svc_relay_state relay;
	svc_calib_state calib;
	double gc_next; /* svc_gc.c: monotonic, its next run */
};

/* ---- the calls between the files ------------------------------------------ */
/* Every call on the loop's thread. */

/* service.c: every file's publish (qos and retained as sky_mqtt_publish).
 * Returns 0 or SKY_E* (SKY_ENET when not connected). */
int svc_publish(svc *s, const char *topic, const void *data, size_t len, int qos, int retained,
		sky_diag *d);

/* svc_log.c: a warning through kind's throttle (at most a few a window,
 * then one "... N more suppressed" line); flush says that line for a flood
 * that stopped. */
void svc_log_init(svc *s);
/* A message of job from board refused for why: counted in jobs.json and
 * sky_job_messages_refused_total, logged throttled (one line per reason
 * per 10 s, then how many were suppressed); fmt says what it was. */
void svc_refused(svc *s, const char *job, const char *board, svc_refuse_kind why,
		 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
const char *svc_refuse_name(svc_refuse_kind why);
void svc_warn(svc *s, svc_log_kind kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void svc_log_flush(svc *s, double now);

/* svc_submit.c */
/* Parses and queues a job. Returns 0, or the reason it was refused in d
 * (and the log). */
int svc_submit_queue(svc *s, const char *buf, size_t len, const char *from, sky_diag *d);
/* The same for operator op (its CN, from the topic): refused when the job
 * id is another operator's or op's quota of waiting jobs is full. */
/* A training job naming a data set (sky_jobreq.h "dataset"): some online
 * board holds it, with the job's tokenizer; the data owner, if any, holds
 * it; and a board that reads it holds the eval set too. Returns 0, or
 * SKY_ENOTFOUND / SKY_EINVAL with the refusal in d. */
int svc_submit_check_data(svc *s, const sky_job_req *r, sky_diag *d);
/* 1 if board id holds data set name (its report says so), with the
 * tokenizer and the file's SHA-256 when they are given ("" or NULL: any). */
int svc_board_holds_set(svc *s, const char *id, const char *name, const char *tokenizer,
			const char *sha256);
int svc_submit_queue_op(svc *s, const char *buf, size_t len, const char *op, const char *from,
			sky_diag *d);
/* Drops job's queued entries. Returns how many. */
int svc_submit_drop(svc *s, const char *job);
/* --job's file, queued at start. Returns 0, or an error in d when it cannot
 * be read (a refused job is logged). */
int svc_submit_file(svc *s, const char *path, sky_diag *d);
/* A submission on sky/v1/jobs/<op>/submit. */
void svc_submit_on_msg(svc *s, const char *op, const char *p, size_t len);
/* Queues job again from its newest saved plan, to be planned over the
 * boards online now (a job without checkpoints, which is not followed). */
void svc_submit_requeue(svc *s, const char *job, const char *why);
/* Plans each queued job whose boards are ready (or whose wait is over). */
void svc_submit_tick(svc *s, double now);
/* The job's model: the request's preset with its shapes. */
void svc_job_from_req(svc_job *j, const sky_job_req *r);

/* svc_fed.c: federated jobs at their aggregator (docs/federation.md) */
#define SVC_FED_MAX_JOBS 4
/* A federated job (r->fed.on) of operator op: its owners checked, its
 * first round published. Returns 0 or the refusal in d. */
int svc_fed_submit(svc *s, const sky_job_req *r, const char *op, sky_diag *d);
/* An update chunk on sky/v1/job/<job>/fedupd/<sender>. */
void svc_fed_on_update(svc *s, const char *job, const char *sender, const unsigned char *p,
		       size_t len);
/* Closes due rounds, steps the global model, opens the next. */
void svc_fed_tick(svc *s, double now);

/* svc_enroll.c */
void svc_enroll_init(svc *s);
void svc_enroll_on_csr(svc *s, const char *nonce, const char *p, size_t len);
long svc_enroll_limited(const svc *s);

/* svc_fleet.c */
void svc_fleet_on_board(svc *s, const char *id, const char *leaf, const char *p, size_t len);
/* sky_mqtt_oversize_fn */
void svc_fleet_on_oversize(void *ctx, const char *topic, size_t tl, size_t len);
/* sky_mqtt_oversize_fn for on_retained: counted (retained_dropped); the
 * connection layer logs it */
void svc_fleet_on_retained(void *ctx, const char *topic, size_t tl, size_t len);
/* The registry's liveness tick (gap: seconds the loop did not run; behind:
 * messages wait unread) and the revoked list, read again every second. */
void svc_fleet_tick(svc *s, double now, double gap, int behind);
void svc_fleet_ask_probe(svc *s, const char *id, const svc_job *job);

/* svc_links.c */
void svc_links_init(svc *s);
void svc_links_on_msg(svc *s, const char *topic, const unsigned char *p, size_t len, double now);
void svc_links_tick(svc *s, double now);

/* svc_plan.c */
/* The working fleet for job: every online board with capabilities at its
 * shapes (the others asked to probe, once each by notes). Returns how
 * many boards are online; *fit how many fit (0: why says so). */
/* Board id's budget for plans is `budget` while its report says
 * `reported` (mem_bytes as svc_plan_fleet takes it): what the board said
 * it has when it refused a plan (svc_fleet.c). Only ever lowered for one
 * report; a new report replaces it. */
void svc_plan_learn_budget(svc *s, const char *id, int64_t reported, int64_t budget);
int svc_plan_fleet(svc *s, const svc_job *job, svc_notes *notes, int *fit, char *why,
		   size_t cap);
/* Plans rq's job over the working fleet and publishes the plan; a job
 * that re-plans is followed from it. Returns 0 (res->published) or an
 * error (res->why). */
int svc_plan_job(svc *s, const svc_plan_req *rq, svc_plan_result *res);
/* Frees the planning memory kept between plans (the hybrid plan's). */
void svc_plan_free(svc *s);
/* Evaluates r's plan against a new one, planned but not published: over
 * the online boards (notes as svc_plan_fleet), the step a new plan would
 * predict (*new_s, 0 without one: why says so) and the one r's plan
 * predicts under the same capabilities (*cur_s, 0 when a board of it has
 * none now). */
void svc_plan_evaluate(svc *s, const run_job *r, svc_notes *notes, double *new_s, double *cur_s,
		       char *why, size_t cap);

/* svc_store.c */
/* <state>/<name> into buf. Returns 0 or SKY_ERANGE. */
int svc_state_file(const svc *s, const char *name, char *buf, size_t cap);
int svc_store_plan_file(const svc *s, const char *job, char *buf, size_t cap);
/* Reads <state>/plans/<job>.env and verifies it: *plan the decoded plan
 * (the store's, valid until the next load), *env its envelope. Returns
 * the envelope length or SKY_E*. */
long svc_store_load(svc *s, const char *job, const sky_planmsg **plan, const char **env);
/* Keeps a signed plan before it is published. Returns 0 or SKY_E* (logged). */
int svc_store_save(svc *s, const char *job, const char *env, size_t len);
/* The next epoch, persisted before use. Returns 0 or SKY_E*. */
int svc_store_next_epoch(svc *s, int64_t *epoch, char *path, size_t cap);
/* plan went out retained: the broker holds it. */
void svc_store_published(svc *s, const sky_planmsg *plan);
void svc_store_on_plan(svc *s, const char *topic, const char *p, size_t len, int retained);
/* Connecting: nothing on the broker known (begin), then retained plans
 * given 2 s to arrive before the missing ones are republished (end). */
void svc_store_connecting(svc *s, int end);
void svc_store_tick(svc *s, double now);
/* fleet.json and jobs.json. */
void svc_store_save_state(svc *s);
/* At start: fleet.json, --links, the epoch and the saved plans. Returns 0
 * or an error in d. */
int svc_store_restore(svc *s, sky_diag *d);
int64_t svc_store_epoch(const svc *s);

/* svc_follow.c */
run_job *svc_follow_find(svc *s, const char *job);
/* A plan that re-plans went out (signed as env, elen bytes): its job
 * followed from it. */
void svc_follow_plan(svc *s, const svc_plan_req *rq, const sky_planmsg *p, const char *env,
		     size_t elen, double predicted_s);
/* r's state file written again. */
void svc_follow_save(svc *s, const run_job *r);
/* The next run slot filled from js (restored after a restart), not
 * counted until svc_follow_add; NULL when every slot is taken. */
run_job *svc_follow_from_state(svc *s, const sky_jobstate *js);
void svc_follow_add(svc *s);
/* r's plan, re-simulated with today's capabilities, predicts step_s. */
void svc_follow_predicted(run_job *r, double step_s);
int svc_follow_any_running(const svc *s);
void svc_follow_tick(svc *s, double now);
/* At start: every <state>/jobs/<job>.run.json followed again. */
void svc_follow_restore(svc *s);

/* svc_replan.c: re-plans r over the online boards from its last complete
 * checkpoint, or pauses it (tried again every second). */
void svc_replan(svc *s, run_job *r, const char *reason, double now);
/* The fault (or decision) at now that the next re-plan answers. */
void svc_replan_fault(run_job *r, double now);
/* The re-plan's time lost is closed (its first commit or answer): returns
 * when its fault was (0: none open). */
double svc_replan_closed(run_job *r);
/* A plan went out: r is not paused. */
void svc_replan_resumed(run_job *r);
/* r's pause as its state file kept it; retried at retry_s. */
void svc_replan_restore(run_job *r, int paused, const char *why, double retry_s);

/* svc_calib.c: boards' figures corrected by their jobs' measurements (sky_calib.h) */
/* <state>/calib.json read back at start (a bad file is logged and set aside). */
void svc_calib_load(svc *s);
/* One metrics message of job from board, already checked by svc_authz.c as
 * the plan's stage `stage` of epoch `epoch`; first: the first message of
 * that stage and epoch (its step warms up: not folded). */
void svc_calib_on_metrics(svc *s, const char *job, const char *board, int stage, int64_t epoch,
			  int first, const unsigned char *p, size_t len);
/* Writes calib.json when it changed, at most once a second. */
void svc_calib_tick(svc *s, double now);
/* The figures to plan board b with at shape want (sky_calib_times).
 * Returns 1 when they are folded ones. */
int svc_calib_times(const svc *s, const sky_reg_board *b, const sky_caps_shape *want,
		    sky_caps_times *out);
/* After job's plan of epoch went out over s->plan.fleet: which figures
 * each board was planned with, to <state>/plans/<job>.figures.json and the
 * log. */
void svc_calib_plan_figures(svc *s, const char *job, int64_t epoch);

/* svc_train.c */
void svc_train_on_ckpt(svc *s, const char *job, const char *board, const unsigned char *p,
		       size_t len);
/* The highest step any stage of job reported under epoch (0: none). */
int svc_train_last_step(const svc *s, const char *job, int64_t epoch);
/* A new plan of r went out: drift baselines and asks start again. */
void svc_train_new_plan(run_job *r, int n_stages);
/* Drift, checkpoint asks again and the gain check of running r. */
void svc_train_tick(svc *s, run_job *r, double now);
/* A training job's state file at start (js may take the saved plan's
 * newer epoch). Returns 0. */
int svc_train_restore(svc *s, sky_jobstate *js, const char *path);

/* svc_follow.c: job no longer followed (cancelled): its run file removed.
 * Returns 1 when it was followed. */
int svc_follow_drop(svc *s, const char *job);

/* svc_relay.c */
/* job's owner into op (cached). Returns 0 or SKY_ENOTFOUND / SKY_E*. */
int svc_relay_owner(svc *s, const char *job, char *op, size_t cap);
/* 1 when job was cancelled (and not submitted again since). */
int svc_relay_cancelled(const svc *s, const char *job);
/* What the planner answers requests for m's job with (sky_nojob.h):
 * cancelled when it was, else serving or training as m says. */
sky_nojob_kind svc_relay_nojob_kind(const svc *s, const sky_planmsg *m);
/* A metrics message (sender board, NULL when the topic does not say) or a
 * part of job (chunk: NULL for a whole part, else the chunk's index as its
 * topic names it), accepted: relayed to its owner. */
void svc_relay_metrics(svc *s, const char *job, const char *board, const char *p, size_t len);
void svc_relay_part(svc *s, const char *job, const char *board, const char *chunk,
		    const unsigned char *p, size_t len);
/* job's retained relayed topics cleared (a resubmit by op, its owner). */
void svc_relay_clear(svc *s, const char *job, const char *op);
/* job's last state retained for op: {"job","epoch","state",<extra>}. */
void svc_relay_state_msg(svc *s, const char *job, const char *op, int64_t epoch,
			 const char *state, const char *extra);
/* <state>/operators.json (`sky fleet status`): the per-operator limits and
 * each operator's jobs waiting and uploads in progress; written when it
 * changed. */
void svc_relay_save_operators(svc *s);
/* The cancelled jobs remembered before a restart (<state>/cancelled.txt). */
void svc_relay_restore(svc *s);
/* job cancelled by op: cleared, no longer relayed, its state "cancelled". */
void svc_relay_cancel(svc *s, const char *job, const char *op, int64_t epoch);

/* svc_gc.c: every 30 s (tick), or now (run, with the Unix time): files of
 * abandoned uploads removed, and with store_max_bytes the store bounded. */
void svc_gc_tick(svc *s, double now);
void svc_gc_run(svc *s, double now_unix);

/* svc_cancel.c: a request on sky/v1/jobs/<op>/cancel. */
void svc_cancel_on_msg(svc *s, const char *op, const char *p, size_t len);

/* svc_serve.c */
int svc_serve_publish(void *ctx, const char *topic, const void *data, size_t len);
void svc_serve_on_slice_req(svc *s, const char *id, const char *p, size_t len);
/* An answer on sky/v1/job/<job>/resp/<client>/<sender>. */
void svc_serve_on_resp(svc *s, const char *job, const char *client, const char *sender,
		       const unsigned char *p, size_t len);
void svc_serve_on_ready(svc *s, const char *job, int k, const char *sender,
			const unsigned char *p, size_t len);
/* The servefault table learns the stage boards of p (after its follow). */
int svc_serve_sf_boards(svc *s, const sky_planmsg *p);
/* Any other job topic: a request tracked for replays, and answered
 * unknown_job when its job does not serve. */
void svc_serve_on_req(svc *s, const char *topic, size_t tl, const unsigned char *p, size_t len);
/* sky/v1/job/<job>/stage/<k>/ready/<sender>: job, k and sender. Returns 0
 * or SKY_EINVAL. */
int svc_serve_parse_ready(const char *topic, char *job, size_t cap, int *k, char *sender,
			  size_t scap);

/* svc_authz.c: who may send what on a job's topics, from the job's signed
 * plan as followed (run_job) or, for a job not followed, the registry's
 * assignments from its plans; never from a payload. */
/* 1 if board is revoked (the registry holds it so, or it is on the CRL). */
int svc_authz_revoked(const svc *s, const char *board);
/* The stage board holds in job's current plan: want if that stage is the
 * board's, else its first stage; -1 if it holds none. *epoch (may be NULL)
 * gets the plan's epoch. */
int svc_authz_stage(svc *s, const char *job, const char *board, int want, int64_t *epoch);
/* Metrics on sky/v1/job/<job>/metrics/<board>. Returns 0 if they were
 * taken (then they may be relayed to the job's owner), -1 if refused. */
int svc_authz_on_metrics(svc *s, const char *job, const char *board, const unsigned char *p,
			 size_t len);
/* 1 if a trained part from board for job may be relayed to the job's
 * owner (not revoked, holds a stage of the plan); else 0, refused and
 * counted. */
int svc_authz_part(svc *s, const char *job, const char *board);
/* 1 if a checkpoint image from board for job may be taken: the board is
 * not revoked, holds a stage of the job's plan, and the image's blocks
 * (read from its header alone, before any hashing) are within that
 * stage's; else 0, refused and counted. */
int svc_authz_ckpt(svc *s, const char *job, const char *board, const unsigned char *p,
		   size_t len);
void svc_serve_tick(svc *s, double now);
/* 1 when every board of serving job r now holds another job's plan. */
int svc_serve_displaced(const svc *s, const run_job *r);
/* A serving job's state file at start. Returns 0. */
int svc_serve_restore(svc *s, sky_jobstate *js, const char *path);

#endif
