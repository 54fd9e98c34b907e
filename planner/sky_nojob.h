/* skyplan's answer to inference requests for jobs that do not serve.
 *
 * Every request on sky/v1/job/<job>/req/<client CN> reaches the planner as
 * well as the job's first stage (sky_topics.h). When the job is one the
 * planner knows as serving (its newest plan has "infer"), the first stage
 * answers and the planner stays silent. Otherwise nobody else would
 * answer, so the planner does, on sky/v1/job/<job>/resp/<client CN>:
 *   {"v":1,"id":"r17","ok":false,"job":"j9","code":"unknown_job",
 *    "error":"job j9 is not known to the planner"}
 * (or "... is not a serving job (its plan trains)", "... is queued at the
 * planner and not serving yet", "... was cancelled by its operator"), the request's id echoed when it can be read ("" if not).
 *
 * A flood cannot make it spin: requests are rate-limited before they are
 * parsed, per client CN and for all clients together (sky_ratelimit.h);
 * one over its rate is dropped unanswered and counted. A request above
 * SKY_INFER_REQ_MAX_BYTES is answered without being parsed (id "").
 *
 * Nothing here reads a clock, allocates or publishes: skyplan passes the
 * time and publishes what it gets back, so tests drive it directly. Not
 * thread-safe (skyplan calls it under its lock). */
#ifndef SKY_NOJOB_H
#define SKY_NOJOB_H

#include "sky_err.h"
#include "sky_infermsg.h"
#include "sky_ratelimit.h"
#include "sky_topics.h"

#include <stddef.h>

/* Per client: 8 at once, then 2 per second; all clients: 64 at once, then
 * 32 per second. A client that sends to a wrong job learns it from its
 * first answers; the rest of a burst gains nothing from more. */
#define SKY_NOJOB_CLIENT_BURST 8
#define SKY_NOJOB_CLIENT_PER_S 2.0
#define SKY_NOJOB_ALL_BURST 64
#define SKY_NOJOB_ALL_PER_S 32.0
/* jobs remembered with their kind (the newest plan of each) */
#define SKY_NOJOB_MAX_JOBS 256

typedef enum {
	SKY_NOJOB_UNKNOWN = 0, /* no plan seen */
	SKY_NOJOB_QUEUED,      /* submitted, not planned yet */
	SKY_NOJOB_TRAINING,    /* its plan is not a serving plan */
	SKY_NOJOB_SERVING,     /* its plan serves: the first stage answers */
	SKY_NOJOB_CANCELLED    /* cancelled by its operator (sky job cancel) */
} sky_nojob_kind;

typedef struct sky_nojob {
	sky_bucket all;
	sky_keyed_buckets per_client;
	struct {
		char job[SKY_TOPIC_SEGMENT_MAX + 1];
		int kind; /* sky_nojob_kind */
	} jobs[SKY_NOJOB_MAX_JOBS];
	int n_jobs;
	long answered; /* refusals written */
	long limited;  /* requests dropped unread by the rate limit */
	long silent;   /* requests for serving jobs (left to the first stage) */
	sky_infer_resp resp; /* scratch for the answer being written */
} sky_nojob;

/* Zeroes g and fills its buckets. Cannot fail. */
void sky_nojob_init(sky_nojob *g);
/* Records what the planner knows of job (its newest plan's kind, or
 * SKY_NOJOB_QUEUED for a submission). A job not yet remembered takes a
 * free slot, or the slot of a non-serving job when all are taken; a table
 * full of serving jobs forgets nothing (the new job then reads as
 * unknown). Returns 0 or SKY_EINVAL (a bad job name). */
int sky_nojob_note(sky_nojob *g, const char *job, sky_nojob_kind kind);
/* What is known of job (SKY_NOJOB_UNKNOWN when nothing). */
sky_nojob_kind sky_nojob_kind_of(const sky_nojob *g, const char *job);

/* One message on a request topic (topic_len bytes, as received) at time
 * now (seconds, monotonic). Returns:
 *   > 0  the length of a refusal written into out (cap bytes), to be
 *        published on resp_topic (written into resp_topic, tcap bytes);
 *        why says what was refused, for the log;
 *   0    nothing to answer: the job serves (its first stage answers) or
 *        the request is over the rate limit (dropped unread; *limited set
 *        to 1 so the caller can log it through its throttle);
 *   < 0  SKY_EINVAL: not a request topic (or a bad job or client segment),
 *        SKY_ERANGE: out or resp_topic too small. */
int sky_nojob_on_request(sky_nojob *g, const char *topic, size_t topic_len, const char *p,
			 size_t len, double now, char *resp_topic, size_t tcap, char *out,
			 size_t cap, int *limited, sky_diag *why);

#endif
