/* Serving jobs through faults: skyplan's table of inference requests that
 * have no answer yet, and their replay to the first stage of a re-plan.
 *
 * The planner reads every request (sky/v1/job/<job>/req/<client CN>) and
 * every answer (.../resp/<client CN>) of the serving jobs it follows. A
 * request is tracked from its arrival until an answer with its id reaches
 * the same client (logits or a refusal, from any epoch). When a board of
 * the job dies or is revoked, skyplan re-plans (planner/service.c) and
 * tells this table the new epoch; once every stage of it has said ready
 * (the retained .../stage/<k>/ready {"epoch":E}), the requests still
 * unanswered are published again, oldest first, on
 * sky/v1/job/<job>/replay/<client CN>, which only the planner may write and
 * the first stage reads as that client's request.
 *
 * Which ones: only requests that reached the planner before stage 0's ready
 * of the new epoch did. The first stage subscribes before it says ready and
 * the broker handles one connection's packets in order, so a request the
 * planner saw after that ready was delivered to the new first stage as
 * well: replaying it would only run it twice. The first stage also drops a
 * replay whose (client, id) it has already taken in this epoch, and the
 * client drops a second answer to an id (infer_client.h): each layer makes
 * a duplicate rarer, the last makes it invisible.
 *
 * Pace: at most `window` replays of an epoch unanswered at once (half the
 * first stage's queue), so a replay never meets a full queue ("busy").
 *
 * Memory is flat: at most SKY_SF_MAX_REQS requests and SKY_SF_BYTES of
 * their bytes, kept in arrival order in two rings. A new request that does
 * not fit pushes out the oldest; an unanswered one pushed out, or one
 * older than SKY_SF_MAX_AGE_S, is dropped with its reason counted
 * ("evicted", "expired") and logged (rate-limited by the caller's log).
 * Answered ones stay until pushed out, so a late copy of a request (a
 * client's resend) is recognised. A request larger than SKY_SF_MAX_REQ_BYTES
 * is not tracked (counted "untracked").
 *
 * Nothing here reads a clock or publishes: the caller passes the time and
 * a publish function, so tests drive it directly. Not thread-safe (skyplan
 * calls it under its lock). */
#ifndef SKY_SERVEFAULT_H
#define SKY_SERVEFAULT_H

#include "sky_err.h"
#include "sky_infermsg.h"
#include "sky_topics.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_SF_MAX_REQS 4096           /* requests tracked at most */
#define SKY_SF_BYTES (4u << 20)         /* their bytes at most */
#define SKY_SF_MAX_REQ_BYTES (64u << 10) /* one request (SKY_INFER_REQ_MAX_BYTES) */
#define SKY_SF_MAX_AGE_S 600.0          /* an unanswered request is dropped after */
#define SKY_SF_MAX_JOBS 16              /* serving jobs followed */
#define SKY_SF_MAX_STAGES 64

/* Why a tracked request was let go unanswered. */
typedef enum {
	SKY_SF_EVICTED = 0, /* pushed out by newer requests (the table is full) */
	SKY_SF_EXPIRED,     /* unanswered for SKY_SF_MAX_AGE_S */
	SKY_SF_NREASONS
} sky_sf_reason;

typedef struct sky_sf_req {
	uint64_t seq;  /* arrival order (from 1) */
	uint64_t off;  /* its bytes in the byte ring (a running offset) */
	uint32_t len;
	int job;       /* index in jobs[] */
	int answered;
	int64_t replayed_epoch; /* the epoch it was last replayed to (0: never) */
	double t_in;
	char client[SKY_TOPIC_SEGMENT_MAX + 1];
	char id[SKY_INFER_ID_MAX + 1];
} sky_sf_req;

typedef struct sky_sf_job {
	char job[SKY_TOPIC_SEGMENT_MAX + 1];
	int64_t epoch;      /* of the newest plan */
	int n_stages, window;
	unsigned char ready[SKY_SF_MAX_STAGES]; /* stage k said ready for epoch */
	int n_ready;
	uint64_t ready0_seq; /* requests before this seq came before stage 0 subscribed (0: not yet) */
	int replay;         /* epoch answers a fault: replay once every stage is ready */
	int replay_done;    /* every eligible request was replayed */
	double fault_s;     /* the fault this epoch answers (caller's clock; 0: none) */
	int first_answer;   /* an answer of this epoch was seen */
	/* counters, over the job's life */
	long tracked, answered, replayed, untracked, dropped[SKY_SF_NREASONS];
	long replayed_epoch; /* replays published for the newest epoch */
	/* the newest plan's stage boards (sky_servefault_boards): who may say
	 * ready for stage k, who answers, where replays go */
	char boards[SKY_SF_MAX_STAGES][SKY_TOPIC_SEGMENT_MAX + 1];
	/* the previous plan's first and last stage boards: its answers in
	 * flight at a re-plan still count */
	char prev_first[SKY_TOPIC_SEGMENT_MAX + 1], prev_last[SKY_TOPIC_SEGMENT_MAX + 1];
	int n_prev_stages;
	long refused_sender; /* ready or answers from a board the plan does not name so */
} sky_sf_job;

typedef struct sky_servefault {
	sky_sf_req req[SKY_SF_MAX_REQS]; /* ring: [head, tail) by index mod the size */
	uint64_t head, tail;
	unsigned char bytes[SKY_SF_BYTES]; /* ring: [bhead, btail) by offset mod the size */
	uint64_t bhead, btail;
	uint64_t next_seq;
	sky_sf_job jobs[SKY_SF_MAX_JOBS];
	int n_jobs;
} sky_servefault;

/* Publishes one replay (topic sky/v1/job/<job>/replay/<first stage board>/<client>). Returns
 * 0 or SKY_E*. */
typedef int (*sky_sf_publish_fn)(void *ctx, const char *topic, const void *data, size_t len);

/* Empties the table. Cannot fail. */
void sky_servefault_init(sky_servefault *f);

/* A plan of serving job `job` went out at `epoch` with n_stages stages and
 * a first-stage queue of `queue`. replay: it answers a fault at fault_s
 * (its unanswered requests are replayed once every stage is ready);
 * otherwise it is the job's first plan. Returns 0, or SKY_ERANGE when
 * SKY_SF_MAX_JOBS jobs are already followed or n_stages is out of range. */
int sky_servefault_follow(sky_servefault *f, const char *job, int64_t epoch, int n_stages,
			  int queue, int replay, double fault_s);
/* The stage boards of the job's newest plan (after sky_servefault_follow):
 * boards[k] for k < n_stages. Until they are set, no replay goes out and
 * no ready or answer counts. Returns 0 or SKY_EINVAL. */
int sky_servefault_boards(sky_servefault *f, const char *job, const char *const *boards,
			  int n_stages);
/* The job followed under that name, or NULL. */
sky_sf_job *sky_servefault_job(sky_servefault *f, const char *job);

/* A request of a followed job from client (the topic's CN). Returns 1
 * (tracked), 0 (not a followed job, a copy of one tracked, or no readable
 * id: the first stage answers that itself), or SKY_ERANGE (too large:
 * untracked and counted). Pushes out the oldest requests when full (each
 * unanswered one counted and passed to log_drop if not NULL). */
int sky_servefault_on_req(sky_servefault *f, const char *job, const char *client,
			  const void *p, size_t len, double now,
			  void (*log_drop)(void *ctx, const sky_sf_job *j, const sky_sf_req *r,
					   sky_sf_reason why),
			  void *log_ctx);
/* An answer to client on job from sender (the topic's last level): only the
 * plan's last stage (logits), its first stage or the planner (errors) may
 * answer (or the previous plan's last or first stage: answers in flight at
 * a re-plan); from anyone else it is refused before it is parsed (SKY_EAUTH,
 * counted in refused_sender). Returns 1 when it is the first answer of a
 * re-plan's epoch (*lost_s = now - the fault's time), else 0; SKY_EFORMAT
 * when it does not parse. */
int sky_servefault_on_resp(sky_servefault *f, const char *job, const char *client,
			   const char *sender, const void *p, size_t len, double now,
			   double *lost_s);
/* Stage k of job said ready ({"epoch":E}) on a topic sent by sender.
 * Returns 1 when it counted (sender is the plan's board of stage k, E is
 * the job's newest epoch, first time for k), SKY_EAUTH (counted) when the
 * sender is not that board, else 0. */
int sky_servefault_on_ready(sky_servefault *f, const char *job, int k, const char *sender,
			    const void *p, size_t len);

/* Drops requests unanswered for SKY_SF_MAX_AGE_S (counted, log_drop), and
 * replays what is due: for every job whose re-plan has all stages ready,
 * its unanswered requests that came before stage 0's ready, oldest first,
 * while fewer than its window are replayed and unanswered. Returns the
 * number published (a failed publish stops the round; it is tried again
 * next time). *finished is set to the index of a job whose replay just
 * completed (-1: none). */
int sky_servefault_pump(sky_servefault *f, double now, sky_sf_publish_fn pub, void *ctx,
			void (*log_drop)(void *ctx, const sky_sf_job *j, const sky_sf_req *r,
					 sky_sf_reason why),
			int *finished);

/* The reason's name ("evicted", "expired"). */
const char *sky_servefault_reason_name(int why);

#endif
