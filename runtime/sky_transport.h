/* Frame transport of one pipeline stage: activations forward on
 * sky/v1/job/<job>/stage/<k+1>/fwd, gradients back on .../stage/<k-1>/bwd,
 * the clip norm's squared sums on .../stage/<k>/norm, and a start barrier
 * on .../stage/<k>/ready (sky_topics.h). It implements the sky_stage_io
 * callbacks (sky_transport_io), over a network given as callbacks too
 * (sky_transport_net: MQTT in skyd, a fake in tests).
 *
 * Sending never waits for delivery: a frame is packed (the header is
 * written into the headroom in front of the stage's tensor, so a
 * plaintext frame goes out without a copy of ours; a sealed one is
 * encrypted in one pass into a send buffer) and queued.
 *
 * Receiving: every message on our topics comes in through
 * sky_transport_on_msg, on the thread that runs the stage (MQTT messages
 * are dispatched by the stage's own polls). A frame is checked against the
 * plan (sky_frame_unpack: job, epoch, step, micro-batch, shape, checksum,
 * tag) and copied, once, into a free slot of a ring per direction, all in
 * the arena: the forward ring has as many slots as the previous stage has
 * micro-batches in flight, the backward ring as this stage has (a
 * neighbour can be at most that far ahead: it waits for our frames
 * otherwise). A frame that disagrees with the plan is dropped and counted
 * per reason (sky_frame_drop, plus "duplicate" for a (step, micro-batch)
 * seen before and "ring_full"); only steps cur and cur + 1 are accepted.
 *
 * A wait longer than stall_s publishes a stall on the job's metrics topic
 * and fails the step with SKY_ETIMEOUT, naming stage, step and micro-batch
 * (sky_transport_stall says what). */
#ifndef SKY_TRANSPORT_H
#define SKY_TRANSPORT_H

#include "sky_arena.h"
#include "sky_err.h"
#include "sky_frameseal.h"
#include "sky_profile.h"
#include "sky_stage.h"
#include "sky_topics.h"

#include <stddef.h>
#include <stdint.h>

/* drop reasons beyond sky_frame_drop's */
enum {
	SKY_TDROP_DUPLICATE = SKY_DROP_N, /* (step, micro-batch) already received */
	SKY_TDROP_RING_FULL,              /* no free slot (a neighbour too far ahead) */
	SKY_TDROP_SENDER,                 /* the topic's sender is not the plan's board for it */
	SKY_TDROP_REPLICA,                /* a replica of the sending stage, but not the one the
	                                     plan routes that micro-batch through */
	SKY_TDROP_N
};
/* Short name of a drop counter index ("epoch", "duplicate", ...). */
const char *sky_transport_drop_name(int i);

typedef struct sky_transport_net {
	void *ctx;
	/* Queues a message; never waits for delivery. Returns 0 or SKY_E*. */
	int (*publish)(void *ctx, const char *topic, const void *data, size_t len, int qos,
		       int retained);
	/* Delivers queued messages (they come back through
	 * sky_transport_on_msg), waiting up to wait_ms for one. */
	void (*poll)(void *ctx, int wait_ms);
	/* Optional: 1 when the job must stop (signal, connection lost). */
	int (*stopped)(void *ctx);
	/* Subscribes (waiting for the broker's answer). Returns 0 or SKY_E*. */
	int (*subscribe)(void *ctx, const char *filter);
	/* Optional: the largest message the network carries (0: MQTT's,
	 * SKY_MQTT_MAX_PACKET); the replicas' reduction chunks fit it. */
	size_t max_msg;
} sky_transport_net;

typedef struct sky_transport_cfg {
	const char *job, *board;
	int64_t epoch;
	int stage, n_stages, micro;
	int batch, seq, hidden;     /* a tensor is (batch, seq, hidden) f32 */
	int fwd_slots, bwd_slots;   /* ring sizes (in_flight of stage k-1 and of k) */
	const int *first, *last;    /* (n_stages) each stage's half-layers, for the norm blocks */
	const char *const *boards;  /* (n_stages) each stage's board id, or NULL: any sender.
	                               A stage message is taken only from the board the plan
	                               gives the sending stage (the topic's sender level) */
	const char *const *site;    /* (n_stages) each stage's site ("" = the core), or NULL:
	                               every stage on one broker. A frame to a stage of
	                               another site is addressed to that site (sky_topics.h) */
	const unsigned char *key;   /* SKY_FRAME_KEY_BYTES; NULL: plaintext frames */
	double stall_s;             /* longest wait for one frame */
	int fwd_extra;              /* floats per token after the hidden ones in a forward
	                               tensor: 1 in a data-owner job (the attention mask,
	                               sky_stage.h), else 0; shape (batch, seq, hidden + 1) */
	/* Stage replicas (sky_planmsg.h), or NULL: one board per stage. The
	 * plan must outlive the transport; its boards are the senders taken
	 * (boards above is then ignored). With replicas a stage's topics
	 * reach all its replicas: a tensor frame is taken only when the plan
	 * routes its micro-batch through this replica, and only from the
	 * replica of the neighbour stage the plan routes it through (else
	 * dropped, "replica"; a frame for a sibling replica is not ours and
	 * only counted in sibling_frames). Ready comes from every replica;
	 * norms from each stage's own board only (replicas of a stage hold
	 * the same gradients after their reduction: replica 0 posts them). */
	const struct sky_planmsg *plan;
	int replica;                /* this board's replica in its stage (0: the stage's board) */
	/* the stage's fixed-point gradient sums (sky_stage.h n_params) that its
	 * replicas reduce: each replica publishes its sums in chunks of
	 * SKY_TRANSPORT_RED_CHUNK on .../stage/<k>/grad/<board> (sealed as
	 * frames are; frame micro-batch = chunk index) and adds every other
	 * replica's as they come, so all end with the same sum. 0: none */
	size_t reduce_n;
	/* a test hook (skyd with SKY_TEST_WRONG_REPLICA set; never in a
	 * real fleet): with replicas, the first tensor frame this board sends
	 * goes out a second time, well formed and sealed, claiming a
	 * micro-batch the plan routes through a sibling replica of this
	 * stage, so the receiving stage must drop it ("replica").
	 * tests/integration/test_train_replicas.sh */
	int test_wrong_replica;
} sky_transport_cfg;

#define SKY_TRANSPORT_RED_CHUNK 131072 /* 64-bit sums per chunk frame (1 MiB) */
#define SKY_TRANSPORT_RED_CHUNK_MIN 1024 /* the fewest, on a net with small messages */

typedef struct sky_transport_slot {
	int64_t step;
	int mb;
	int state; /* 0 free, 1 full, 2 handed to the stage */
	float *data;
} sky_transport_slot;

typedef struct sky_transport_ev {
	char kind; /* F B S W */
	int mb;
	float t0_ms, t1_ms; /* from the step's start */
} sky_transport_ev;

#define SKY_TRANSPORT_MAX_STAGES 1024
#define SKY_TRANSPORT_MAX_SITES 32 /* sites of one plan besides the stage's own */

typedef struct sky_transport {
	sky_transport_cfg cfg;
	sky_transport_net net;
	char job[SKY_TOPIC_SEGMENT_MAX + 1], board[SKY_TOPIC_SEGMENT_MAX + 1];
	char topic_fwd_out[SKY_TOPIC_BUF], topic_bwd_out[SKY_TOPIC_BUF];
	char topic_fwd_in[SKY_TOPIC_BUF], topic_bwd_in[SKY_TOPIC_BUF];
	char topic_norm[SKY_TOPIC_BUF], topic_ready[SKY_TOPIC_BUF], topic_metrics[SKY_TOPIC_BUF];
	/* sites: this stage's ("" = core) and the plan's others, to which
	 * ready and norm go once each; core_in: this stage is on the core and
	 * also takes messages addressed to sky/v1/site/core/... */
	char site[SKY_TOPIC_SEGMENT_MAX + 1];
	char other[SKY_TRANSPORT_MAX_SITES][SKY_TOPIC_SEGMENT_MAX + 1];
	int n_other, core_in;
	char (*boards)[SKY_TOPIC_SEGMENT_MAX + 1]; /* (n_stages) cfg.boards, or NULL */
	sky_frame_key send_key, recv_key;
	int sealed;
	size_t tensor_bytes;         /* a gradient: batch x seq x hidden floats */
	size_t fwd_bytes;            /* an activation (with the mask, fwd_extra) */
	sky_transport_slot *ring[2]; /* [SKY_STAGE_FWD / BWD] */
	int n_slots[2];
	int held[2];                 /* slot handed out per direction, -1 none */
	int64_t next_step[2];        /* next (step, mb) the stage will consume */
	int next_mb[2];
	int64_t step;                /* the step being run */
	unsigned char *sendbuf;      /* sealed frames and norm frames */
	size_t sendbuf_cap;
	double *norm_all;            /* (n_all) */
	double *norm_buf;            /* (n_all) a received norm frame */
	unsigned char *norm_got;     /* (n_stages) */
	int norm_n;                  /* stages whose sums for this step arrived */
	int64_t norm_done;           /* last step whose exchange completed (-1) */
	int n_all;
	unsigned char *ready;        /* (n_stages + replicas): stage k's board at k, the
	                                plan's replica i at n_stages + i */
	int n_ready, n_boards;       /* boards ready; boards in the plan */
	long sibling_frames;         /* frames for another replica of this stage (not drops) */
	int wrong_sent;              /* cfg.test_wrong_replica: the frame went out */
	/* the replicas' reduction (cfg.reduce_n > 0 and replicas): the others'
	 * sums by step parity, which (replica, chunk) came, how many */
	int n_rep, n_chunks;
	size_t red_chunk;            /* sums per chunk */
	uint64_t *red[2];
	unsigned char *red_got[2];   /* (n_rep * n_chunks) */
	int red_n[2];
	uint64_t *red_buf;           /* one received chunk */
	char topic_grad[SKY_TOPIC_BUF];
	double red_bytes_out;
	long drops[SKY_TDROP_N];
	long frames_in, frames_out;
	double bytes_in, bytes_out;
	/* this step's op events, for the metrics */
	sky_transport_ev *ev;
	int n_ev, cap_ev;
	double step_t0;
	double busy_s, wait_s, send_s;
	char stall[256];             /* what the last stall was, "" if none */
	/* optional (NULL: none): a board emulating a slower one (skyd --speed);
	 * its forward and backward ops are stretched to their CPU time / speed
	 * (sky_profile_stretch_cpu), as the probe's are, and recorded so.
	 * cpu_mark: the thread's CPU time when the stage got control back from
	 * the transport (an op's CPU time is counted from there) */
	sky_profile *prof;
	double cpu_mark;
} sky_transport;

/* Carves the transport's buffers from a (measuring or real) arena and,
 * with a real one, sets it up (topics, frame keys). net may be NULL
 * while measuring. Returns 0, SKY_EINVAL (bad cfg; d says), SKY_ECRYPTO
 * (key) or the arena's status. */
int sky_transport_carve(sky_transport *t, const sky_transport_cfg *cfg,
			const sky_transport_net *net, sky_arena *a, sky_diag *d);
/* Wipes the frame keys. NULL-safe. */
void sky_transport_free(sky_transport *t);

/* The stage's I/O through this transport (ctx is t). */
sky_stage_io sky_transport_io(sky_transport *t);

/* Hands a received message to the transport. Returns 1 if the topic was
 * one of its own (taken or dropped and counted), 0 if not. */
int sky_transport_on_msg(sky_transport *t, const char *topic, const unsigned char *p, size_t len);

/* Topics to subscribe to before sky_transport_start: fills up to 4 filters
 * (8 on the core site of a plan with sites: also the ones addressed to
 * sky/v1/site/core/...), returns how many. */
int sky_transport_topics(const sky_transport *t, char topics[][SKY_TOPIC_BUF], int cap);
/* The start barrier: publishes this stage's ready (retained) and waits up
 * to timeout_s until every stage's has arrived for this epoch. Returns 0,
 * SKY_ETIMEOUT (d names the missing stages) or SKY_ENET (stopped). */
int sky_transport_start(sky_transport *t, double timeout_s, sky_diag *d);
/* The start barrier in two halves, for a board with two stages (a data
 * owner): announce publishes this stage's ready (retained), wait_ready
 * waits for every stage's (sky_transport_start is both). */
int sky_transport_announce(sky_transport *t, sky_diag *d);
int sky_transport_wait_ready(sky_transport *t, double timeout_s, sky_diag *d);
/* The clip norm's exchange in two halves (share_norm is both): post
 * publishes this stage's squared sums mine[0..n) of blocks [b0, b0 + n);
 * wait_norms waits until every other stage's arrived and fills all[0..n_all).
 * Returns 0 or SKY_E* (a stall: SKY_ETIMEOUT, published as io_recv's). */
int sky_transport_norm_post(sky_transport *t, long step, const double *mine, int b0, int n);
int sky_transport_norm_wait(sky_transport *t, long step, double *all, int n_all);
/* The replicas' reduction (io->reduce): publishes acc[0..n) in chunks,
 * waits for every other replica's of this step and adds them into acc.
 * Returns 0 or SKY_E* (a stall: SKY_ETIMEOUT). */
int sky_transport_reduce(sky_transport *t, long step, uint64_t *acc, size_t n);
/* Marks the start of step (0-based): frames of step and step + 1 are
 * accepted from now; clears the step's events. */
void sky_transport_begin_step(sky_transport *t, int64_t step);

#endif
