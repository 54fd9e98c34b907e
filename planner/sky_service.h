/* skyplan, the planner service: the fleet registry, enrollment and signed
 * plans over MQTT.
 *
 * It connects as the planner identity (<pki>/planner.crt, CN sky-planner)
 * and subscribes to every board's topics, to enrollment requests and to job
 * submissions (sky_topics.h). It
 *   - answers enrollment requests with the CA (planner/sky_ca.h);
 *   - keeps the registry (planner/sky_registry.h), ticking liveness every
 *     100 ms, and saves it to <state>/fleet.json (atomically, at most every
 *     200 ms while it changes, and every 2 s) for `sky fleet status`;
 *   - takes jobs from operators on sky/v1/jobs/<operator CN>/submit (the
 *     ACL lets only that operator publish there) or from a job file:
 *       {"job":"j1","model":"tiny","layers":4,"seq":16,"batch":8,
 *        "micro_batches":4,"algo":"optimal","sched":"1f1b","objective":"step",
 *        "link_blind":false,"min_boards":16,"wait_s":30,"submit_id":"<hex>"}
 *     (all but job and model optional), and answers every submission on
 *     sky/v1/jobs/<operator CN>/reply (sky_job_reply), so a submit is never
 *     lost silently: the operator resends until it hears back. A resend
 *     (same operator, same submit_id) is answered again, not queued twice.
 *     A training job adds
 *       "task":"train","steps":5,"optim":"adamw","lr":0.001,"seed":1,
 *       "warmup":0,"clip":1,"stall_s":0,"plaintext_frames":false,
 *       "data_owner":"b01" (optional)
 *     and its plan carries them (sky_planmsg.h), with the simulated step
 *     time and, unless plaintext, a fresh frame key wrapped for each
 *     stage's board (sky_jobkey.h; the board's certificate as the CA
 *     issued it, <pki>/certs/<id>.crt). A job waits until min_boards online
 *     boards (default: every online board) report capabilities at its
 *     shapes; boards that reported other shapes are asked to probe again
 *     (sky/v1/board/<id>/cmd). After wait_s it plans with whatever matches.
 *     Then it plans with the planner library (sky_plan.h) over the boards'
 *     sites (their caps) and the site paths the registry holds
 *     (sky_registry_set_link: from --links, or measured), takes the next
 *     epoch (persisted in <state>/epoch, so it only grows), signs the plan
 *     (sky_sign.h) and publishes it retained on sky/v1/job/<job>/plan;
 *   - collects plan-acks into the registry;
 *   - measures each site's path through its bridge (sky_linkprobe.h) for
 *     every site its boards report, again every link_probe_s seconds; the
 *     figures become the registry's path between that site and the core
 *     (fleet.json "links", with measured_unix), which every plan uses;
 *   - reads the CA's revoked list (<pki>/revoked, sky_crl.h) at start and
 *     every second: a board on it is marked revoked in the registry (its
 *     messages are ignored from then on) and the job it held a stage of is
 *     queued again from its saved plan, to be planned over the boards
 *     online now (a new epoch without it);
 *   - keeps its own state, so a restart (of it, of the broker, or both)
 *     forgets nothing the fleet depends on: <state>/fleet.json (boards with
 *     their boot, session and retired boots, assignments with their
 *     half-layer ranges, every job's newest epoch), <state>/epoch (read
 *     strictly), and <state>/plans/<job>.env, each job's newest signed plan
 *     exactly as published (written before it is published). At start it
 *     loads them; after every connect it gives the broker 2 s to deliver
 *     the retained plans and publishes again (retained) every saved plan the
 *     broker lacks or holds at an older epoch. The training jobs with
 *     checkpoints it follows are kept too: <state>/jobs/<job>.run.json
 *     (sky_jobstate.h) and <state>/ckpt/<job>/index.json (sky_ckpt.h); at
 *     start it follows them again (their checkpoint files verified again),
 *     giving their boards 10 s to be heard from before one
 *     counts as offline, so a board that dies after a restart is re-planned
 *     as before it. All writes are atomic (sky_file_write).
 * Enrollment requests are rate-limited before they are parsed (a token
 * bucket per nonce and one for all), and repeated refusals are logged at
 * most a few times per window, then as "... N more suppressed". */
#ifndef SKY_SERVICE_H
#define SKY_SERVICE_H

#include "sky_deploy.h"
#include "sky_err.h"
#include "sky_jobreq.h" /* the job documents it takes and answers */
#include "sky_planmsg.h"

#include <stddef.h>
#include <stdint.h>

/* The arena bytes a board computes for its role in training plan p (stage
 * `stage`, as board `board`: a stage's board or one of its replicas; a
 * data owner's stage 0 holds both ends), or a negative SKY_E* code. It is
 * the function the board decides with (runtime's sky_trainjob_bytes_as),
 * which only skyplan's main may name. */
typedef int64_t (*sky_service_train_bytes_fn)(const sky_planmsg *p, int stage,
					      const char *board);

typedef struct sky_service_opts {
	const char *pki_dir;   /* from `sky pki init` */
	const char *broker;    /* HOST:PORT */
	const char *state_dir; /* default <pki>/state */
	const char *job_file;  /* optional: submit this job at start */
	int keepalive_s;       /* the planner's own MQTT keepalive (default 10) */
	/* serving (infer jobs): the model file operations, which live in the
	 * runtime (skyplan's main passes them; NULL: infer jobs are refused),
	 * and how slices are sent (sky_deploy.h) */
	const sky_deploy_model_ops *model_ops;
	/* training plans: every role priced with the board's own figure before
	 * the plan goes out (NULL: the planner's estimate stands) */
	sky_service_train_bytes_fn train_bytes;
	int slice_chunk_bytes; /* 0: SKY_CHUNK_DEFAULT_BYTES */
	int slice_pace_ms;     /* 0: chunks as fast as the loop sends them */
	/* a voluntary re-plan (a board joined, or its speed changed) needs the
	 * predicted step to improve by more than replan_gain (a fraction) and
	 * the job's last plan to be replan_holdoff_s old: no oscillation */
	double replan_gain, replan_holdoff_s;
	int link_blind;        /* 1: every job planned link-blind (as "link_blind":true) */
	const char *links_file; /* optional: a fleet file whose "links" are the site paths
				   (until measured figures replace them) */
	double link_probe_s;   /* re-measure each site's path this often (0: 300 s) */
	/* per operator (sky_owner.h; 0: no limit of its own): jobs waiting for
	 * boards, model uploads in progress */
	int pending_per_op, uploads_per_op;
	long long stored_per_op; /* bytes of stored models (0: no limit of its own) */
	/* 1: a job may take boards busy with another operator's job (default:
	 * idle boards and its own operator's only) */
	int share_busy_boards;
	/* the model and slice store (<state>/models, slices) is kept below this
	 * by removing the least recently used files no job needs (0: unbounded) */
	long long store_max_bytes;
} sky_service_opts;

/* Runs until a stop signal (sky_signal.h). Returns 0 after a clean stop, or
 * an error if the PKI or the broker cannot be used at start. */
int sky_service_run(const sky_service_opts *o, sky_diag *d);

#endif
