/* The board agent's private parts, shared by its files and by no one else
 * (no public header includes this one):
 *   agent.c        the control loop: connect, heartbeats, the job's network,
 *                  running the plan held, the message router;
 *   agent_enroll.c enrollment (sky_agent_enroll);
 *   agent_plan.c   plan acceptance: verify, admit, install, acknowledge;
 *                  the saved plan; the slice of a serving plan;
 *   agent_cmd.c    the planner's commands to the board (probe, checkpoint);
 *   agent_caps.c   the probe, the link probe and the capability report;
 *   agent_stats.c  the board's persistent counters (session, epoch,
 *                  trained) and the boot id. */
#ifndef SKY_AGENT_INTERNAL_H
#define SKY_AGENT_INTERNAL_H

#include "sky_agent.h"
#include "sky_boardsets.h"
#include "sky_caps.h"
#include "sky_identity.h"
#include "sky_jobkey.h"
#include "sky_mqtt.h"
#include "sky_planmsg.h"
#include "sky_profile.h"
#include "sky_servejob.h"
#include "sky_sign.h"
#include "sky_slicefetch.h"
#include "sky_thread.h"
#include "sky_topics.h"
#include "sky_trainjob.h"
#include "sky_transport.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct agent {
	const sky_agent_opts *o;
	sky_identity idn;
	sky_profile prof;
	/* guards everything below (Paho's thread vs the main loop) except the
	 * _Atomic flags, which are read and written without it */
	sky_mutex lock;
	sky_mqtt *m;
	_Atomic int lost; /* set on Paho's thread (on_lost) */
	int64_t session;
	sky_caps caps;
	sky_boardsets sets; /* the data sets held, checked at start; read-only after */
	char boot[SKY_BOOT_ID_MAX + 1]; /* random, drawn at start: orders sessions (sky_caps.h) */
	sky_model_cfg probe_model;
	_Atomic int probe_requested; /* set by on_msg, taken by the main loop */
	/* the plan we hold */
	int64_t epoch;     /* of the last plan run (0: none) */
	sky_planmsg plan;
	int stage;
	char *plan_env;    /* its envelope, kept to recognise a verbatim re-delivery */
	size_t plan_env_len;
	sky_trainjob jobs[2];  /* the stage of the plan we hold, and room for the next */
	sky_trainjob *job;     /* jobs[0] or [1] once a plan is held */
	int64_t arena_bytes;
	int train_pending;     /* the held plan trains and has not run yet */
	int training;          /* the job runs (main thread only: messages are
				* dispatched on it, inside the job's polls) */
	sky_servejob *sj;      /* the serving job of the infer plan we hold, or NULL */
	int serving;           /* sj runs (main thread only, like training) */
	char *pending_env;     /* a plan that came while serving, taken after */
	size_t pending_len;
	char pending_topic[SKY_TOPIC_BUF];
	/* a newer plan of the running job (main thread only, like training):
	 * the job abandons its step and the plan is taken when it has stopped */
	int abandon;
	int cancelled; /* the planner stopped the running job (agent_cmd.c): abandon
			* is set too, and no next plan of it is taken */
	int serve_cancelled; /* the planner stopped the serving job (agent_cmd.c):
			      * sj->stop is set, and sj is let go when its loop ends */
	char *next_env;
	size_t next_env_len;
	/* a resumed plan's checkpoint (sky/v1/job/<job>/load/<id>), main thread */
	int loading, loaded;
	char load_topic[SKY_TOPIC_BUF];
	double next_hb;
	int64_t hb_seq;
	sky_planack ack;   /* the last answer to a plan, re-sent on reconnect */
	int has_ack;
	long plans_rejected;
	/* link probe: set by on_msg, read by agent_link_probe's wait */
	_Atomic uint64_t echo_seq_seen;
	_Atomic int echo_bulk_seen;
	double echo_last_s;
	/* serving: the stage's slice, fetched before the plan is acknowledged;
	 * the serving job is set up once the slice is in place, with the frame
	 * key kept until then */
	sky_slicefetch fetch;
	unsigned char slice_key[SKY_JOBKEY_BYTES];
	int slice_sealed;
	/* a federated job this board is an owner of (agent_fed.c), or NULL */
	struct agent_fed *fed;
	/* scratch for plan handling (too big for Paho's stack) */
	char payload[SKY_SIGN_MAX_PAYLOAD + 1];
	sky_planmsg incoming;
} agent;

/* ---- agent.c: the job's network over the agent's MQTT connection ---- */

/* The transport a job runs on: publishes, polls (with heartbeats and the
 * chores between frames), stops on a signal, a lost connection or a newer
 * plan (a->abandon). */
sky_transport_net agent_net(agent *a);

/* ---- agent_stats.c: the persistent counters in the state directory ---- */

/* <dir>/<file> into buf. Returns 0, or SKY_ERANGE if it does not fit. */
int agent_state_path(const char *dir, const char *file, char *buf, size_t cap);
/* Reads the counter <dir>/<file> strictly (sky_file_read_count). Returns 0,
 * or SKY_ENOTFOUND / SKY_EFORMAT / SKY_ERANGE / SKY_EIO with `why` in words
 * for the log: a damaged counter is never read as 0 in silence. */
int agent_read_counter(const char *dir, const char *file, int64_t *out, const char **why);
/* Writes v to <dir>/<file>. Returns 0 or a negative SKY_E* code. */
int agent_write_counter(const char *dir, const char *file, int64_t v);
/* The epoch of the last training plan this board finished, 0 when none. */
int64_t agent_trained_epoch(const char *dir);
/* The epoch of the last serving plan the planner stopped on this board
 * (the job was cancelled; <state>/cancelled), 0 when none: a plan of that
 * epoch or before is not served again, after a reconnect or a restart. */
int64_t agent_cancelled_epoch(const char *dir);
/* Lets the serving job go (the job was cancelled): its retained ready
 * cleared, its buffers freed, a->sj NULL. Main thread, not while it runs. */
void agent_serve_drop(agent *a);
/* Draws this run's boot id and reads the session counter it continues.
 * Returns 0, or an error when there is no randomness or the counter is
 * unreadable (SKY_EIO). */
int agent_start_boot(agent *a, sky_diag *d);

/* ---- agent_caps.c: what the board reports about itself ---- */

/* Probes the board at a->probe_model's shapes (cached on disk) into
 * a->caps. Returns 0 or the probe's error. */
int agent_probe(agent *a, sky_diag *d);
/* Measures the link to the broker (echoes) into a->caps; says so. */
void agent_link_probe(agent *a);
/* Publishes a->caps (retained). Returns 0 or a negative SKY_E* code. */
int agent_publish_caps(agent *a);
/* An echo of the link probe came back (on_msg). */
void agent_on_echo(agent *a, const unsigned char *p, size_t len);

/* ---- agent_cmd.c: the planner's commands ---- */

/* A message on sky/v1/board/<id>/cmd: a probe or a checkpoint ask. */
void agent_on_cmd(agent *a, const unsigned char *p, size_t len);

/* ---- agent_fed.c: an owner of a federated job ---- */

typedef struct agent_fed agent_fed;
/* Subscribes to the federated jobs' rounds and models. Returns 0 or the
 * subscribe's error. */
int agent_fed_subscribe(agent *a, sky_diag *d);
/* A round or a model chunk (1: it was one, taken or refused), else 0. */
int agent_fed_on_msg(agent *a, const char *topic, size_t tl, const unsigned char *p, size_t len);
/* Trains the round whose model is in and sends the update. */
void agent_fed_tick(agent *a);
/* NULL-safe. */
void agent_fed_free(agent *a);

/* ---- agent_plan.c: plan acceptance ---- */

/* Verifies and, if acceptable, takes a plan. from_disk: at start, from
 * <state>/plan.env (no ack, no persistence). Called with a->lock held.
 * Returns 0 (taken, or not for this board), or why it was rejected. */
int agent_take_plan(agent *a, const char *topic, const char *msg, size_t len, int from_disk);
/* A plan while the held plan trains: a newer verified plan of the same job
 * is kept (a->next_env) and stops the job (a->abandon); else ignored. */
void agent_plan_while_training(agent *a, const char *topic, const unsigned char *p, size_t len);
/* A plan while serving: kept (a->pending_env) and the serving loop asked
 * to stop; taken after it. */
void agent_plan_while_serving(agent *a, const char *topic, const unsigned char *p, size_t len);
/* Takes the newer plan that stopped the job (a->next_env). */
void agent_take_next_plan(agent *a);
/* Takes <state>/plan.env at start, with the epoch floor it implies. */
void agent_load_saved_plan(agent *a);
/* The slice of the plan we hold is in place (path): set up its serving job
 * if that waited for it, and acknowledge (or refuse) the plan. */
void agent_slice_in_place(agent *a, const char *path);
/* Re-sends the answer to the plan we hold (a reconnect). a->lock held. */
void agent_publish_ack(agent *a);

#endif
