/* Training jobs as the planner sees them through sky/v1/job/<job>/metrics
 * (runtime/sky_trainjob.h): per job and stage, the board, the last step,
 * loss, step time, busy fraction, frame drops by reason, done or stalled.
 * skyplan writes the table to <state>/jobs.json next to fleet.json, and
 * `sky fleet status` prints it:
 *   {"jobs":[{"job":"j1","epoch":3,"steps":5,"stages":[{"stage":0,
 *     "board":"b1","step":4,"loss":0.69,"step_s":0.03,"busy":0.6,
 *     "done":false,"stall":"","drops":{"epoch":1}}],
 *     "paused":false,"replans":[{"generation":2,"epoch":5,"reason":"board b2 offline",
 *     "resume_step":4,"lost_steps":1,"lost_s":3.2,"at":1764560000}],
 *     "refused":{"metrics_not_stage":3}}]}
 * "refused" counts the messages on the job's topics the planner refused
 * because the job's signed plan does not allow their sender (or it is
 * revoked, or over its rate), by reason. */
#ifndef SKY_JOBSTAT_H
#define SKY_JOBSTAT_H

#include "sky_err.h"
#include "sky_topics.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_JOBSTAT_MAX 256 /* (job, stage) rows kept; the oldest job goes first */

typedef struct sky_jobstat_row {
	char job[SKY_TOPIC_SEGMENT_MAX + 1];
	char board[SKY_TOPIC_SEGMENT_MAX + 1];
	int64_t epoch;
	int stage, step, steps, done, has_loss;
	int infer;  /* a serving stage: step counts its batches, step_s a batch's time */
	int replica; /* stage replicas: which of its stage's boards (0: the stage's own) */
	double loss, step_s, busy, seen;
	char drops[256]; /* the metrics' "drops" object, as JSON */
	char stall[200];
} sky_jobstat_row;

#define SKY_JOBSTAT_REPLANS 64 /* re-plans kept (the oldest goes first) */

/* A re-plan of a training job (planner/service.c): its generation and
 * epoch, why, the step it resumed from, the steps that were cut and are
 * replayed, and the time lost: from the fault (or the decision) to the
 * first step committed under the new plan (-1 until then); for a serving
 * job, to the first answer under the new plan, with the requests replayed. */
typedef struct sky_jobstat_replan {
	char job[SKY_TOPIC_SEGMENT_MAX + 1];
	int generation;
	int64_t epoch, at_unix;
	int resume_step, lost_steps;
	double lost_s;
	long replayed; /* serving: unanswered requests replayed to the new first stage (-1: training) */
	char reason[128];
} sky_jobstat_replan;

#define SKY_JOBSTAT_REFUSE_JOBS 32 /* jobs whose refusals are kept (the oldest goes first) */
#define SKY_JOBSTAT_REFUSE_REASONS 12
/* Messages on a job's topics refused by reason (jobs.json "refused"). */
typedef struct sky_jobstat_refused {
	char job[SKY_TOPIC_SEGMENT_MAX + 1];
	int n;
	struct {
		char reason[24];
		long count;
	} r[SKY_JOBSTAT_REFUSE_REASONS];
	double seen;
} sky_jobstat_refused;

typedef struct sky_jobstat {
	int n;
	sky_jobstat_row row[SKY_JOBSTAT_MAX];
	int changed;
	int n_replans;
	sky_jobstat_replan replan[SKY_JOBSTAT_REPLANS];
	char paused[16][SKY_TOPIC_SEGMENT_MAX + 1]; /* jobs waiting for boards ("" free) */
	int n_refused;
	sky_jobstat_refused refused[SKY_JOBSTAT_REFUSE_JOBS];
} sky_jobstat;

/* Counts one refused message of job by reason (a short [a-z_] name). */
void sky_jobstat_refuse(sky_jobstat *t, const char *job, const char *reason, double now);
/* The count of job's refusals for reason (0: none). */
long sky_jobstat_refused_n(const sky_jobstat *t, const char *job, const char *reason);

/* Notes a re-plan (jobs.json lists a job's re-plans with it). */
void sky_jobstat_add_replan(sky_jobstat *t, const sky_jobstat_replan *r);
/* The job's newest re-plan gets its time lost (the first commit after it). */
void sky_jobstat_replan_lost(sky_jobstat *t, const char *job, double lost_s);
/* The job's newest re-plan gets the requests it replayed (serving). */
void sky_jobstat_replan_replayed(sky_jobstat *t, const char *job, long n);
/* Marks job paused (the boards left cannot hold the model) or not. */
void sky_jobstat_set_paused(sky_jobstat *t, const char *job, int paused);

/* Takes one metrics message of job from board (both from the topic the
 * ACL vouched for) as the plan's stage `stage` of epoch `epoch` (the
 * caller checked the board against the plan): the payload's own "board",
 * "stage" and "epoch" are not trusted. Returns 0, or SKY_EFORMAT (not a
 * metrics object: ignored). */
int sky_jobstat_on_metrics(sky_jobstat *t, const char *job, const char *board, int stage,
			   int64_t epoch, const char *buf, size_t len, double now);
/* The row of (job, stage, board) is replica r of its stage (r >= 1; 0:
 * the stage's own board). No row: nothing. */
void sky_jobstat_set_replica(sky_jobstat *t, const char *job, const char *board, int stage, int r);
/* Writes the table as JSON. Returns the length or SKY_ERANGE. */
int sky_jobstat_to_json(const sky_jobstat *t, char *buf, size_t cap);

#endif
