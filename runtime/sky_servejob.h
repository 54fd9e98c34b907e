/* A board's part of a serving (infer) job: its stage (sky_serve.h) loaded
 * from <state>/slices/<sha256>.safetensors, and the network around it.
 *
 *   first stage: subscribes sky/v1/job/<job>/req/+ (and replay/+: requests
 *     the planner publishes again after a re-plan, planner/sky_servefault.h;
 *     one whose (client, id) this stage already took under this epoch is
 *     dropped and counted, the client's own copy having run), validates each request
 *     as it arrives (a bad one is answered at once on resp/<client CN> with
 *     the contract's code: sky_infermsg.h; not_allowed for a client outside
 *     the plan's list, busy when infer.queue requests wait), queues it, and
 *     forms a batch of up to infer.batch requests as soon as that many wait,
 *     or once the oldest has waited infer.wait_ms while the pipeline has
 *     room (fewer batches in flight than stages; else it keeps filling:
 *     sky_servebatch.h, the last stage reports each batch it answered on
 *     stage/0/done); pads (id 0, mask 0), embeds,
 *     runs its half-layers and sends the batch on as one frame, then takes
 *     the next batch at once: batches follow each other down the pipeline
 *     (several in flight), none waits for the one before to leave it;
 *   other stages: subscribe sky/v1/job/<job>/stage/<k>/fwd, take frames
 *     (sky_frame_unpack against the plan: job, epoch, stage, shape,
 *     checksum, seal; a batch not above the sender's last dropped as a
 *     replay, sky_servewin.h) in arrival order
 *     into a ring of slots; a frame that finds every slot full first runs
 *     the oldest batch (counted in ring_full): a burst costs latency, never
 *     requests;
 *   the last stage publishes one response per request on resp/<client CN>,
 *     then (plans of more than one stage) {"epoch":E,"batch":N,"n":R} on
 *     sky/v1/job/<job>/stage/0/done.
 * Frames are QoS 1 (a lost frame would lose its requests), sealed under
 * the job key when the plan says so, dtype s8, payload per sky_serve.h.
 *
 * Each stage says it is ready (retained {"epoch":E} on
 * sky/v1/job/<job>/stage/<k>/ready) and the first stage takes requests
 * only when every stage of the plan's epoch has.
 *
 * Metrics, one JSON object per batch and stage on sky/v1/job/<job>/metrics:
 *   {"v":1,"job":"j1","epoch":7,"stage":0,"board":"b01","infer":true,"batch":N,
 *    "requests":3,"stage_s":0.0012,"queue":0,"frame_bytes":B,"frames_in":..,
 *    "frames_out":..,"responses":..,"ring_full":0,"replays":0,"replay_dups":0,
 *    "refused":{"bad_token":1},"drops":{"epoch":1}}
 * frame_bytes is what one batch's frame takes on the wire (0 on the last
 * stage); refused and drops list only non-zero counters. Drops without a
 * batch (junk or replays at an idle stage) are published too, at most once
 * a second with "requests":0, and once more when serving ends, so that a
 * stage re-planned right after a flood still reports what it refused.
 *
 * Memory: the stage's arena and one block of job buffers (request queue,
 * inbound frames, outbound frame), allocated when the plan is taken;
 * serving allocates nothing after that. */
#ifndef SKY_SERVEJOB_H
#define SKY_SERVEJOB_H

#include "sky_err.h"
#include "sky_frameseal.h"
#include "sky_planmsg.h"
#include "sky_serve.h"
#include "sky_servebatch.h"
#include "sky_servewin.h"
#include "sky_transport.h"

#include <stdatomic.h>
#include <stdint.h>

#define SKY_SERVEJOB_RING 32 /* inbound frames held at most */
#define SKY_SERVEJOB_TAKEN 1024 /* requests remembered against replays */

typedef struct sky_servejob_qent {
	char client[SKY_TOPIC_SEGMENT_MAX + 1];
	char id[SKY_INFER_ID_MAX + 1];
	int n;
	int32_t *tokens, *mask; /* (S) each */
	double t_in;
} sky_servejob_qent;

typedef struct sky_servejob_slot {
	int full;
	uint64_t batch;
	long order;            /* arrival order */
	unsigned char *payload; /* sky_serve_payload_bytes() */
} sky_servejob_slot;

typedef struct sky_servejob {
	const sky_planmsg *plan; /* the caller's, kept while the job lives */
	int stage, n_stages;
	char job[SKY_TOPIC_SEGMENT_MAX + 1], board[SKY_TOPIC_SEGMENT_MAX + 1];
	sky_serve st;
	sky_transport_net net;
	sky_frame_key send_key, recv_key;
	int sealed;
	size_t payload_bytes, wire_cap;
	char topic_in[SKY_TOPIC_BUF], topic_out[SKY_TOPIC_BUF], topic_req[SKY_TOPIC_BUF];
	char topic_ready[SKY_TOPIC_BUF], topic_metrics[SKY_TOPIC_BUF];
	char topic_replay[SKY_TOPIC_BUF];
	/* first stage: hashes of the (client, id) of requests taken under this
	 * epoch (a ring), so a replay of one is not run twice */
	uint64_t taken[SKY_SERVEJOB_TAKEN];
	long n_taken;
	long replays, replay_dups; /* replays taken, and dropped as already taken */
	/* first stage: the request queue (a ring) */
	sky_servejob_qent *q;
	int q_cap, q_head, q_len;
	/* other stages: received frames */
	sky_servejob_slot ring[SKY_SERVEJOB_RING];
	int n_slots;
	long order;
	sky_servewin win;      /* batches taken, per sender: only ever higher (replays refused) */
	unsigned char *out_payload, *wire;
	unsigned char ready_seen[SKY_PLANMSG_MAX_STAGES];
	int n_ready, open;     /* open: the first stage takes requests */
	uint64_t next_batch;
	/* first stage: the batches in the pipeline and the rule that reads them */
	sky_servebatch_flight flight;
	sky_servebatch_rule rule;
	double stale_s;        /* sky_servebatch_stale_s of the plan */
	long held;             /* steps that held a part-full batch (the pipeline full) */
	char topic_done[SKY_TOPIC_BUF];
	long batches, requests, responses, frames_in, frames_out;
	long refused[SKY_INFER_NCODES];
	long ring_full;        /* frames that found every slot full (the oldest ran at once) */
	long drops[SKY_TDROP_N];
	long drops_said;       /* the sum of drops in the last metrics published */
	double said_s;         /* when those were published (sky_clock_s) */
	double busy_s;
	_Atomic int stop;      /* set to end sky_servejob_run (a newer plan) */
	/* optional (NULL: none): a board emulating a slower one (skyd --speed):
	 * each batch's compute is stretched to its CPU time / speed, as a
	 * training stage's is (sky_profile_stretch_cpu; the CPU time of the
	 * calling thread, so exact with one thread) */
	sky_profile *prof;
	void *mem;
	char msg[SKY_INFER_RESP_MAX_BYTES];
	sky_infer_resp resp;
} sky_servejob;

/* Bytes of memory stage `stage` of infer plan p needs with `threads`
 * threads (stage arena and job buffers). Returns the count or a negative
 * SKY_E* with d set. */
int64_t sky_servejob_bytes(const sky_planmsg *p, int stage, int threads, sky_diag *d);

/* Sets up stage `stage` of infer plan p: checks that the slice is in
 * state_dir's cache and its SHA-256 matches the plan (SKY_ENOTFOUND, or
 * SKY_EAUTH on a mismatch: d says which), opens the stage with `threads`
 * threads (p's infer.threads when not 0), allocates the job buffers. key:
 * the unwrapped frame key (NULL: plaintext, only when the plan says so).
 * p must outlive j. Returns 0 or SKY_E* with d set. */
int sky_servejob_setup(sky_servejob *j, const sky_planmsg *p, int stage, const char *board,
		       const char *state_dir, int threads, const unsigned char *key,
		       const sky_transport_net *net, sky_diag *d);

/* Serves until j->stop is set or net's stopped() says so: subscribes,
 * announces ready, then handles requests or frames. Returns 0 (stopped),
 * or SKY_ENET / SKY_EAUTH (a subscription refused) with d set. */
int sky_servejob_run(sky_servejob *j, sky_diag *d);

/* The loop of sky_servejob_run in parts, for a caller with its own loop:
 * start subscribes and announces ready (0 or SKY_E* with d set); step runs
 * at most one batch, returns 1 if it did, and sets *wait_ms to how long
 * the caller may wait for messages before the next step. */
int sky_servejob_start(sky_servejob *j, sky_diag *d);
int sky_servejob_step(sky_servejob *j, int *wait_ms);

/* Hands a received message to the job. Returns 1 if it was one of its
 * topics (taken, answered or dropped and counted), else 0. */
int sky_servejob_on_msg(sky_servejob *j, const char *topic, const unsigned char *p, size_t len);

/* Frees everything. NULL-safe; may be called twice. */
void sky_servejob_free(sky_servejob *j);

#endif
