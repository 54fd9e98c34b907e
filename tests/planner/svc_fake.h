/* A planner service for unit tests (tests/planner/test_svc_*.c): one svc
 * with a state folder under the test's tmp dir, no broker, and a recording
 * publisher in its place. */
#ifndef SVC_FAKE_H
#define SVC_FAKE_H

#include "svc_internal.h"

#define SVC_FAKE_MAX_PUBS 64

typedef struct svc_fake_pub {
	char topic[SKY_TOPIC_BUF];
	char data[2048]; /* the first bytes, NUL-terminated */
	size_t len;
	int qos, retained;
} svc_fake_pub;

/* what was published, oldest first (at most SVC_FAKE_MAX_PUBS kept) */
extern svc_fake_pub svc_fake_pubs[SVC_FAKE_MAX_PUBS];
extern int svc_fake_n_pubs;

/* A fresh service (state in <tmp>/<name>), recording what it publishes. */
svc *svc_fake_fresh(const char *name);
/* Registry board id added in state (SKY_REG_ONLINE, ...). */
sky_reg_board *svc_fake_board(svc *s, const char *id, int state);
/* The job of document doc followed on one stage on board, as restored
 * from a state file at epoch 3; without grace, not waiting for its board. */
run_job *svc_fake_follow(svc *s, const char *doc, const char *board, int grace);
/* The newest publish on topic, or NULL. */
const svc_fake_pub *svc_fake_last(const char *topic);

#endif
