/* The board agent (what skyd runs): enrollment, capability reports,
 * liveness, and signed plans.
 *
 * Life of a board:
 *   1. enrollment, once (sky_agent_enroll): trust the CA from the claim
 *      bundle, make a key pair and CSR, send it over the claim identity
 *      (to the broker's claim listener, the fleet port + 1, with a random
 *      client id) on sky/v1/enroll/<nonce>/csr, take the certificate and the planner's
 *      certificate from sky/v1/enroll/<nonce>/cert (runtime/sky_identity.h);
 *   2. probe the job's shapes (sky_probe.h; cached on disk);
 *   3. connect with its own certificate. Every start of skyd draws a random
 *      boot id, and every connect takes a new session number (persisted in
 *      <state>/session before use); the last will
 *      ({"state":"offline","boot":B,"session":N} retained on .../status), the
 *      online status, the heartbeats, the capability report and plan-acks
 *      all carry both, so the planner can ignore a late will from an older
 *      session or boot (planner/sky_registry.h). <state>/session is read
 *      strictly (sky_file_read_count): enrollment writes 0, and a missing,
 *      empty or garbled file is logged as "session state lost: ..." and
 *      sessions start again at 1 under the new boot id, which the planner
 *      accepts; <state>/epoch likewise ("plan epoch state lost: ...", the
 *      saved plan's own signed epoch becomes the floor). On every
 *      (re)connect: status online, subscriptions, link probe (echo through
 *      the broker), the full capability report (retained);
 *   4. heartbeats every keepalive/4 on .../heartbeat;
 *   5. plans on sky/v1/job/+/plan: verified against <state>/planner.crt,
 *      decoded, epoch newer than the last run (persisted in <state>/epoch),
 *      then the stage's arena is measured, allocated once and sealed, and a
 *      plan-ack reports the bytes (or a refusal with the numbers). A forged,
 *      unsigned, replayed or truncated plan is refused with a log line
 *      ("plan rejected: ...") and the last good plan stays (it is also kept
 *      on disk, <state>/plan.env, and re-verified at start);
 *   6. on SIGTERM/SIGINT: status offline (retained), clean disconnect.
 * If the connection drops, it reconnects (1 s, then up to 5 s apart) with
 * the next session number. */
#ifndef SKY_AGENT_H
#define SKY_AGENT_H

#include "sky_err.h"
#include "sky_model.h"

#include <stdint.h>

typedef struct sky_agent_opts {
	const char *state_dir;    /* board.key, board.crt, ca.crt, planner.crt, session, epoch, ... */
	const char *broker;       /* HOST:PORT */
	const char *id;           /* NULL: the CN of board.crt; else must equal it */
	const char *profile_path; /* NULL: sky_profile_load's search */
	sky_model_cfg model;      /* the shapes to probe at start */
	int keepalive_s;          /* MQTT keepalive (default 10) */
	double probe_max_s;       /* probe bound (default SKY_PROBE_DEFAULT_MAX_S) */
	double speed;             /* > 0: overrides the profile's (sky_profile_set_cores) */
	const char *site;         /* non-NULL: overrides the profile's site ("core": the core site) */
	int no_link_probe;        /* 1: skip the echo (link figures stay 0) */
	/* data sets held: "NAME=PATH" each (--dataset), beside <state>/datasets/;
	 * opened and checked at start (sky_boardsets.h) */
	const char *datasets[8];  /* SKY_CAPS_MAX_DATASETS */
	int n_datasets;
	/* enrollment */
	const char *claim_token;  /* one-time token from `sky pki token` */
	const char *claim_ca;     /* the claim bundle's ca.crt; claim.crt and claim.key beside it */
	int enroll_timeout_s;     /* default 30 */
} sky_agent_opts;

/* Defaults for everything but state_dir and broker (model: tiny). */
void sky_agent_opts_default(sky_agent_opts *o);

/* Enrolls the board (step 1 above) unless <state> already holds an
 * identity. Returns 0, or SKY_EINVAL (bad id), SKY_ENET (broker), SKY_ETIMEOUT
 * (no answer), SKY_EAUTH (refused: the planner's reason is in d). */
int sky_agent_enroll(const sky_agent_opts *o, sky_diag *d);

/* Runs steps 2-6 until a stop signal (sky_signal.h). Returns 0 after a
 * clean shutdown, or an error if the identity cannot be loaded or the probe
 * fails (connection failures are retried, not returned). */
int sky_agent_run(const sky_agent_opts *o, sky_diag *d);

/* Per-stage arena size for the plan message's model: rebuilds the model
 * config from the preset name and the plan's shapes. Returns bytes or
 * SKY_ENOTFOUND (unknown preset) / SKY_EINVAL. Exposed for tests. */
struct sky_planmsg;
int64_t sky_agent_stage_bytes(const struct sky_planmsg *p, int stage);

#endif
