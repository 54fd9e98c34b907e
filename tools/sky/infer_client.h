/* A client of a serving job, shared by `sky infer` and `sky bench infer`:
 * its identity's files, one connection, requests out, responses in.
 *
 * A client identity is a certificate with CN "sky-client-<name>" (`sky pki
 * client NAME` writes the bundle <pki>/clients/<name>/ with ca.crt,
 * client.crt and client.key). It connects to the tools listener beside the
 * fleet's (the broker's port + 1, sky_mqtt_claim_broker) with a random
 * "sky:" client id, so one identity may run several clients at once; the
 * ACL there lets it publish only on sky/v1/job/<job>/req/<board>/<its CN>
 * and read only sky/v1/job/<job>/resp/<its CN>/<sender> and the jobs'
 * plans (planner/broker_conf.c). It verifies the job's signed plan with
 * planner.crt (in the bundle) to learn the route: requests go to the
 * first stage's board (to the planner while there is no plan), logits are
 * taken only from the last stage's board, errors from the first stage's
 * or the planner; anything else is dropped and counted. Responses arrive
 * on the caller's thread, from sky_ic_poll. */
#ifndef SKY_INFER_CLIENT_H
#define SKY_INFER_CLIENT_H

#include "sky_err.h"
#include "sky_infermsg.h"

#include <stddef.h>

#define SKY_IC_PATH_MAX 600
#define SKY_IC_SEEN 8192 /* answered ids remembered against duplicates */

/* Where the identity's files are: cert and key as given, else
 * <pki>/client.crt and <pki>/client.key; the CA as given, else <pki>/ca.crt,
 * else ca.crt beside the certificate. */
typedef struct sky_ic_files {
	char ca[SKY_IC_PATH_MAX], cert[SKY_IC_PATH_MAX], key[SKY_IC_PATH_MAX];
	char planner[SKY_IC_PATH_MAX]; /* planner.crt beside the CA: verifies the job's plan */
} sky_ic_files;

/* Resolves the files as above (any argument may be NULL). Returns 0, or
 * SKY_EINVAL with d saying what to give (neither --pki nor --cert/--key),
 * or SKY_ENOTFOUND naming a file that is not there. */
int sky_ic_resolve(const char *pki, const char *ca, const char *cert, const char *key,
		   sky_ic_files *out, sky_diag *d);

/* Called for every response to this client on the job, with the decoded
 * response and its raw JSON (len bytes). A response that does not decode
 * is counted (sky_ic_bad) and not passed on; neither is a second response
 * to an id among the last SKY_IC_SEEN answered (counted, sky_ic_dups): a
 * request replayed after a re-plan can be answered twice. */
typedef void (*sky_ic_resp_fn)(void *ctx, const sky_infer_resp *r, const char *raw, size_t len);

typedef struct sky_ic sky_ic;

/* Connects as the identity in f to broker's tools listener (broker is the
 * fleet's HOST:PORT), subscribes to its responses on job and waits for the
 * broker's answer. Returns 0 and *out, or SKY_EINVAL (bad broker or job),
 * SKY_EAUTH (the certificate has no client CN, or the ACL refused the
 * subscription), SKY_ENET (connection refused or lost) with d saying which. */
int sky_ic_open(sky_ic **out, const char *broker, const sky_ic_files *f, const char *job,
		sky_ic_resp_fn fn, void *ctx, sky_diag *d);
/* The identity's CN ("sky-client-demo"). */
const char *sky_ic_cn(const sky_ic *c);
/* Encodes r and queues it (QoS 1). Returns the request's size in bytes (> 0),
 * or SKY_EINVAL / SKY_ERANGE (r does not encode) / SKY_ENET. */
int sky_ic_send(sky_ic *c, const sky_infer_req *r, sky_diag *d);
/* Hands responses that have arrived to fn; waits up to wait_ms for one if
 * none has. Returns how many messages it handled. */
int sky_ic_poll(sky_ic *c, int wait_ms);
/* 1 while connected. */
int sky_ic_connected(sky_ic *c);
/* Responses received that did not decode. */
long sky_ic_bad(const sky_ic *c);
/* Second responses to an answered id, dropped. */
long sky_ic_dups(const sky_ic *c);
/* Responses from a sender the job's plan does not allow, dropped: logits
 * from anyone but the last stage's board, errors from anyone but the first
 * stage's board or the planner. */
long sky_ic_refused(const sky_ic *c);
/* The job's newest verified plan if it is a serving plan (its shape's seq,
 * the tokenizer hash of the model it serves), else NULL. sky_ic_open waits
 * up to 2 s for the retained plan; it may change on a re-plan. */
const struct sky_planmsg *sky_ic_plan(const sky_ic *c);
/* Disconnects (waiting up to 1 s for queued requests) and frees. NULL-safe. */
void sky_ic_close(sky_ic *c);

/* A fresh run tag: 8 lower-case hex characters from the DRBG, to make
 * request ids of this run unique ("<tag>-<k>"), so a late response to an
 * earlier run is not taken for one of ours. Returns 0 or SKY_ECRYPTO. */
int sky_ic_tag(char out[9]);

#endif
