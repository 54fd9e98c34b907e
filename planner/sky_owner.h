/* Jobs belong to their operator: the owner of each job id, and what each
 * operator may hold at once.
 *
 * The first operator that submits a job id owns it (the CN from the topic
 * the broker's ACL pins to it, never the payload). The owner is kept in
 * <state>/owners/<job> (its CN and a newline, written atomically), so a
 * restarted planner still knows it. Only the owner may submit the id
 * again, cancel it, and read what the planner relays of it (its metrics,
 * parts and last state, sky/v1/jobs/<owner>/job/<job>/...); another
 * operator's submit of the id is refused with the reason. A job from
 * skyplan --job FILE belongs to the default operator (SKY_TOPIC_OPERATOR_CN).
 *
 * Quotas (sky_owner_quota): how many jobs one operator may have waiting
 * for boards and how many model uploads in progress; a full quota refuses
 * that operator's next one with the reason, and nobody else's. */
#ifndef SKY_OWNER_H
#define SKY_OWNER_H

#include "sky_err.h"
#include "sky_topics.h"

#include <stddef.h>

#define SKY_OWNER_DIR "owners"

/* <state_dir>/owners/<job> into buf. Returns 0, SKY_EINVAL (job is not a
 * topic segment) or SKY_ERANGE. */
int sky_owner_path(const char *state_dir, const char *job, char *buf, size_t cap);

/* The owner of job into op (cap >= SKY_TOPIC_SEGMENT_MAX + 1). Returns 0,
 * SKY_ENOTFOUND (nobody owns it yet), SKY_EFORMAT (a damaged file: taken
 * as owned by nobody who could prove it, so nobody but the planner's
 * operator may take it back by hand) or SKY_EIO / SKY_EINVAL. */
int sky_owner_get(const char *state_dir, const char *job, char *op, size_t cap);

/* May op submit job? Returns 0 when job is op's, or nobody's (then it is
 * recorded as op's first); SKY_EAUTH with d saying "job <job> belongs to
 * another operator" (never naming which) when it is someone else's or its
 * record is damaged; SKY_EINVAL / SKY_EIO with d saying why. */
int sky_owner_claim(const char *state_dir, const char *job, const char *op, sky_diag *d);

/* Is job op's? Returns 0, or SKY_EAUTH with d saying "job <job> belongs to
 * another operator", or SKY_ENOTFOUND with d saying "no job <job>". */
int sky_owner_check(const char *state_dir, const char *job, const char *op, sky_diag *d);

/* The per-operator limits (0: none). */
typedef struct sky_owner_limits {
	int pending;  /* jobs waiting for boards */
	int uploads;  /* model uploads in progress */
} sky_owner_limits;

#define SKY_OWNER_DEFAULT_PENDING 4
#define SKY_OWNER_DEFAULT_UPLOADS 2
#define SKY_OWNER_DEFAULT_STORED (32ll << 30) /* bytes of models (two of the largest files) */

/* op already has n of what (e.g. "jobs waiting for boards"), limit at most:
 * may it have one more? Returns 0, or SKY_ESTATE with d saying "operator
 * <op> has <n> <what> (its limit is <limit>)". limit 0: no limit. */
int sky_owner_quota(const char *op, int n, int limit, const char *what, sky_diag *d);

#endif
