/* The first serving stage's batching rule, and the batches it has in the
 * pipeline.
 *
 * The plan predicts serving throughput as batch / the slowest stage's time
 * (planner/service.c): it assumes every batch is full. A batch of n < B
 * requests costs every stage as much as a full one (rows past n are padding),
 * so a part-full batch sent while the pipeline is busy anyway only queues
 * behind the others and lowers the throughput by n/B; meanwhile more
 * requests would have come (the last stage's answers come back as the
 * clients' next requests). The rule (sky_servebatch_decide):
 *   - B or more requests wait: send a full batch at once;
 *   - fewer, and the oldest has waited less than wait_s: wait;
 *   - fewer, the oldest has waited wait_s, and fewer than `depth` batches
 *     are in flight: send them (the pipeline has room: a stage would
 *     otherwise idle, and a lightly loaded job answers within wait_s plus
 *     its pipeline time);
 *   - fewer, waited wait_s, and `depth` or more batches in flight: hold,
 *     and keep filling until the batch is full or a batch comes out of the
 *     pipeline.
 * depth is the number of stages: one batch in each keeps every stage busy.
 *
 * In flight: a batch the first stage sent and the last stage has not yet
 * reported done. The last stage reports each batch it answered on
 * sky/v1/job/<job>/stage/0/done ({"epoch":E,"batch":N,"n":R}, sky_topics.h).
 * A batch not reported within a stale bound (sky_servebatch_stale_s) is
 * taken as lost (its frame dropped, a report lost), so that a lost report
 * can hold part-full batches back for that long at most, never for ever.
 *
 * No allocation; a flight table is a plain struct. */
#ifndef SKY_SERVEBATCH_H
#define SKY_SERVEBATCH_H

#include "sky_err.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_SERVEBATCH_MAX 64 /* batches tracked in flight at most */

/* What sky_servebatch_decide says. */
enum {
	SKY_SERVEBATCH_WAIT = 0, /* nothing to send yet (none waiting, or within wait_s) */
	SKY_SERVEBATCH_SEND = 1, /* send min(queued, batch) requests now */
	SKY_SERVEBATCH_HOLD = 2  /* part-full and waited wait_s, but the pipeline is full */
};

/* How long the caller may sleep while holding: a report (a message) ends
 * the wait earlier, so this only bounds how late the stale check runs. */
#define SKY_SERVEBATCH_HOLD_MS 20
/* ... and while nothing waits at all. */
#define SKY_SERVEBATCH_IDLE_MS 20

typedef struct sky_servebatch_rule {
	int batch;     /* requests per batch (the plan's infer.batch), >= 1 */
	double wait_s; /* the longest a lone request waits for company (infer.wait_ms) */
	int depth;     /* batches the pipeline holds at once: its stages */
} sky_servebatch_rule;

/* The decision for `queued` waiting requests whose oldest has waited
 * waited_s, with in_flight batches in the pipeline. Sets *wait_ms to how
 * long the caller may wait for messages before asking again (for WAIT and
 * HOLD; 0 for SEND). Returns SKY_SERVEBATCH_WAIT, _SEND or _HOLD. Pure: no
 * clock, no state. */
int sky_servebatch_decide(const sky_servebatch_rule *r, int queued, double waited_s,
			  int in_flight, int *wait_ms);

/* The batches in flight: sent, not yet reported done. */
typedef struct sky_servebatch_flight {
	int n;
	uint64_t batch[SKY_SERVEBATCH_MAX];
	double sent[SKY_SERVEBATCH_MAX]; /* when (seconds, any monotonic clock) */
	long done;  /* reports that matched a batch in flight */
	long stray; /* reports of no batch in flight (late, repeated, another run's) */
	long lost;  /* batches dropped unreported (stale, or the table full) */
} sky_servebatch_flight;

/* Empties f. Cannot fail. */
void sky_servebatch_init(sky_servebatch_flight *f);
/* Records that batch left at time now. A full table forgets its oldest
 * entry first (counted lost). */
void sky_servebatch_sent(sky_servebatch_flight *f, uint64_t batch, double now);
/* The last stage reported batch done. Returns 1 if it was in flight (now
 * removed), 0 if not (counted stray). */
int sky_servebatch_done(sky_servebatch_flight *f, uint64_t batch);
/* Forgets batches sent before now - stale_s (counted lost) and returns how
 * many are in flight. */
int sky_servebatch_in_flight(sky_servebatch_flight *f, double now, double stale_s);

/* Parses a done report, {"epoch":E,"batch":N,"n":R} (sky_topics.h: at
 * most SKY_SERVE_DONE_MAX_BYTES), before anything else reads it: epoch and
 * batch whole numbers in [0, 2^53 - 1], n (optional, 0 when absent) in
 * [0, 65535]. Returns 0, or SKY_EFORMAT with d saying what is wrong (too
 * long, not JSON, a field missing or out of range). */
int sky_servebatch_done_parse(const void *p, size_t len, int64_t *epoch, uint64_t *batch, int *n,
			      sky_diag *d);

/* The stale bound for a pipeline of `depth` stages whose plan predicts
 * predicted_seq_s sequences a second at `batch` a batch: four times the
 * time depth + 1 batches take at the predicted pace (a batch's time
 * through a full pipeline, with room for a loaded machine), and at least
 * 2 s; 2 s without a prediction. */
double sky_servebatch_stale_s(int depth, int batch, double predicted_seq_s);

#endif
