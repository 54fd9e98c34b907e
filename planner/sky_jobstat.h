/* Training jobs as the planner sees them through sky/v1/job/<job>/metrics
 * (runtime/sky_trainjob.h): per job and stage, the board, the last step,
 * loss, step time, busy fraction, frame drops by reason, done or stalled.
 * skyplan writes the table to <state>/jobs.json next to fleet.json, and
 * `sky fleet status` prints it:
 *   {"jobs":[{"job":"j1","epoch":3,"steps":5,"stages":[{"stage":0,
 *     "board":"b1","step":4,"loss":0.69,"step_s":0.03,"busy":0.6,
 *     "done":false,"stall":"","drops":{"epoch":1}}]}]} */
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
	double loss, step_s, busy, seen;
	char drops[256]; /* the metrics' "drops" object, as JSON */
	char stall[200];
} sky_jobstat_row;

typedef struct sky_jobstat {
	int n;
	sky_jobstat_row row[SKY_JOBSTAT_MAX];
	int changed;
} sky_jobstat;

/* Takes one metrics message of job (from the topic the ACL vouched for).
 * Returns 0, or SKY_EFORMAT (not a metrics object: ignored). */
int sky_jobstat_on_metrics(sky_jobstat *t, const char *job, const char *buf, size_t len,
			   double now);
/* Writes the table as JSON. Returns the length or SKY_ERANGE. */
int sky_jobstat_to_json(const sky_jobstat *t, char *buf, size_t cap);

#endif
