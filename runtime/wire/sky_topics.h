/* Every MQTT topic Sky uses, in one place, and the size bounds of what
 * travels on them.
 *
 * Topics are versioned ("sky/v1/...") so a v2 fleet can share a broker.
 * Variable segments (<id>, <job>, <nonce>) are built only through
 * sky_topic_*() below, which refuse a segment that is empty, too long, or
 * holds a character outside [A-Za-z0-9_.-]: a '/', '+' or '#' in an id would
 * let a client step outside the pattern ACL (%u substitution), and control
 * characters have no place in a topic. Board ids are the certificate CN, so
 * the enrollment CA applies the same rule (sky_topic_segment_ok).
 *
 *   topic                                   who publishes -> who reads     QoS retained
 *   sky/v1/board/<id>/caps                  board -> planner               1   yes  capability report JSON
 *   sky/v1/board/<id>/status                board (and its LWT) -> planner 1   yes  status JSON {"state":"online"|"offline","session":N}
 *   sky/v1/board/<id>/heartbeat             board -> planner               0   no   {"session":N,"seq":M}
 *   sky/v1/board/<id>/plan-ack              board -> planner               1   no   plan acknowledgement / refusal JSON
 *   sky/v1/board/<id>/echo                  board -> board (itself)        0   no   link probe payload (opaque bytes)
 *   sky/v1/board/<id>/cmd                   planner -> board               1   no   command JSON ({"cmd":"probe"}, "ckpt", "stop": agent_cmd.c)
 *   sky/v1/job/<job>/plan                   planner -> boards              1   yes  signed plan envelope (runtime/wire/sky_sign.h)
 * The last level <s> of a stage topic, and <board> of metrics, part and
 * ckpt, is the sending board's id, which the ACL pins with %u: a receiver
 * knows the sender from the topic and checks it against the signed plan of
 * the job's epoch (never against anything the payload says).
 *   sky/v1/job/<job>/metrics/<board>        board -> planner               0   no   step times JSON
 *   sky/v1/job/<job>/stage/<k>/fwd/<s>      stage k-1 board -> stage k     0   no   tensor frame (sky_frame.h)
 *   sky/v1/job/<job>/stage/<k>/bwd/<s>      stage k+1 board -> stage k     0   no   tensor frame (sky_frame.h)
 *   sky/v1/job/<job>/stage/<k>/ready/<s>    stage k board -> every stage   1   yes  frame: stage k subscribed (sky_transport.h)
 *   sky/v1/job/<job>/stage/<k>/norm/<s>     stage k board -> every stage   1   no   frame: its blocks' squared gradient sums
 *   sky/v1/job/<job>/stage/0/done/<s>       last serving stage -> first    1   no   {"epoch":E,"batch":N,"n":R}: batch N answered
 *                                           (sky_servebatch.h: what the first stage has in flight)
 *   sky/v1/job/<job>/part/<id>              board <id> -> collector        1   yes  its stage's trained tensors (safetensors bytes)
 *   sky/v1/job/<job>/part/<id>/<i>          board <id> -> collector        1   yes  chunk i of a part over the message limit (sky_partchunk.h)
 *   sky/v1/job/<job>/req/<first>/<client>   client -> first stage board <first>, planner
 *                                                                          1   no   inference request JSON (sky_infermsg.h);
 *                                           <first> from the signed plan, "sky-planner" when the client has none
 *   sky/v1/job/<job>/resp/<client>/<s>      last stage (logits), first stage or planner (errors) -> client
 *                                                                          1   no   inference response JSON (sky_infermsg.h)
 *   sky/v1/job/<job>/replay/<first>/<client> planner -> first stage board  1   no   a request of that client replayed after a
 *                                                                               re-plan (sky_infermsg.h; planner/sky_servefault.h)
 *   sky/v1/job/<job>/slice/<board>          planner -> board <board>       1   no   slice chunk (binary)
 *   sky/v1/board/<id>/slice-req             board -> planner               1   no   {"job":..,"sha256":..,"from":chunk index}
 *   sky/v1/job/<job>/ckpt/<id>              board <id> -> planner          1   no   checkpoint image of its blocks (sky_ckptmsg.h)
 *   sky/v1/job/<job>/load/<id>              planner -> board <id>          1   yes  checkpoint image of its new range after a re-plan
 *   sky/v1/job/<job>/fedround            planner -> owners of a federated job
 *                                                                          1   yes  signed round JSON (sky_fedmsg.h)
 *   sky/v1/job/<job>/fedmodel            planner -> owners              1   no   the round's global model, hashed chunks
 *   sky/v1/job/<job>/fedupd/<owner>      owner -> planner               1   no   its weights after the local steps (chunks)
 *   sky/v1/job/<job>/fedshr/<owner>      owner -> planner               1   no   secure rounds: its sealed shares, its reveal (sky_fedsecmsg.h)
 *   sky/v1/job/<job>/fedrelay/<owner>    planner -> owner <owner>       1   no   secure rounds: signed relay of its shares + U1, reveal request
 *   sky/v1/site/<site>/job/<job>/stage/<k>/<fwd|bwd|ready|norm>/<s>
 *                                           a stage on another site -> stage(s) on <site>: the same
 *                                           messages as the plain stage topics, addressed to a site
 *                                           (below); <site> "core" is the core broker's own boards
 *   sky/v1/site/<site>/echo             planner -> site <site>'s broker  0 no link probe (opaque bytes)
 *   sky/v1/site/<site>/back/echo        site <site>'s broker -> planner  0 no the same probe, turned around
 *   sky/v1/jobs/<op>/submit                 operator <op> (sky job submit) -> planner 1 no job JSON (+ "submit_id")
 *   sky/v1/jobs/<op>/weights                operator <op> -> planner       1   no   model upload chunk (binary)
 *   sky/v1/jobs/<op>/reply                  planner -> operator <op>       1   no   submit ack or refusal JSON
 *   sky/v1/jobs/<op>/cancel                 operator <op> -> planner       1   no   {"job":..,"cancel_id":..} (sky job cancel)
 *   sky/v1/jobs/<op>/job/<job>/metrics      planner -> operator <op>       0   no   the job's metrics, relayed to its owner
 *   sky/v1/jobs/<op>/job/<job>/part/<board> planner -> operator <op>       1   yes  the job's parts, relayed to its owner
 *   sky/v1/jobs/<op>/job/<job>/part/<board>/<i>                            1   yes  their chunks, checked and relayed
 *   sky/v1/jobs/<op>/job/<job>/fedmodel     planner -> operator <op>       1   yes  a federated job's final global model
 *   sky/v1/jobs/<op>/job/<job>/state        planner -> operator <op>       1   yes  {"job","epoch","state":"done"|"stalled"|"cancelled",..}
 *   sky/v1/enroll/<nonce>/csr               claim identity -> planner      1   no   enrollment request JSON (token, id, CSR PEM);
 *                                           <nonce> is the claim connection's client id ("sky:...", ACL %c)
 *   sky/v1/enroll/<nonce>/cert              planner -> claim identity      1   no   enrollment reply JSON (cert, CA, planner cert PEMs, or error)
 *
 * ACL summary (for the generated mosquitto ACL; identities are cert CNs):
 *   board <id>: write sky/v1/board/<id>/{caps,status,heartbeat,plan-ack,echo};
 *               read  sky/v1/board/<id>/{echo,cmd}, sky/v1/job/+/plan;
 *               read sky/v1/job/+/stage/#, write sky/v1/job/+/stage/+/+/<id>,
 *               write sky/v1/job/+/metrics/<id>,
 *               write sky/v1/job/+/part/<id>, sky/v1/job/+/part/<id>/+, sky/v1/job/+/ckpt/<id>;
 *               read sky/v1/job/+/load/<id>;
 *               read sky/v1/job/+/req/<id>/+, write sky/v1/job/+/resp/+/<id> (serving),
 *               read sky/v1/job/+/replay/<id>/+ (requests the planner replays),
 *               read sky/v1/job/+/slice/<id>, write sky/v1/board/<id>/slice-req;
 *               federated jobs: read sky/v1/job/+/fedround and sky/v1/job/+/fedmodel,
 *               write sky/v1/job/+/fedupd/<id>, sky/v1/job/+/fedshr/<id>;
 *               read sky/v1/job/+/fedrelay/<id> (nobody reads another owner's).
 *   claim identity (SKY_TOPIC_CLAIM_CN), on the claim listener only: write
 *               sky/v1/enroll/<its client id>/csr, read sky/v1/enroll/<its client id>/cert
 *               (pattern %c: one nonce per connection, nobody reads another's).
 *   planner (SKY_TOPIC_PLANNER_CN): read sky/v1/board/#, sky/v1/enroll/+/csr, sky/v1/jobs/+/submit,
 *               sky/v1/job/+/metrics/+, sky/v1/job/+/part/+, sky/v1/job/+/part/+/+, sky/v1/job/+/ckpt/+;
 *               write sky/v1/job/+/plan,
 *               sky/v1/job/+/load/+, sky/v1/enroll/+/cert,
 *               sky/v1/board/+/cmd, sky/v1/jobs/+/reply;
 *               read sky/v1/job/+/req/+/+ (answers unknown or stopped jobs), write
 *               sky/v1/job/+/resp/+/sky-planner, write sky/v1/job/+/slice/+, read sky/v1/jobs/+/weights;
 *               serving faults: read sky/v1/job/+/resp/+/+ and sky/v1/job/+/stage/+/ready/+,
 *               write sky/v1/job/+/replay/+/+ (and no frame topic: fwd, bwd, norm denied);
 *               federated jobs: readwrite sky/v1/job/+/fedround, write sky/v1/job/+/fedmodel,
 *               read sky/v1/job/+/fedupd/+, sky/v1/job/+/fedshr/+, write sky/v1/job/+/fedrelay/+.
 *   operator <op> (SKY_TOPIC_OPERATOR_CN, or "sky-op-<name>" from `sky pki operator`):
 *               write sky/v1/jobs/<op>/submit; read sky/v1/jobs/<op>/reply,
 *               sky/v1/job/+/plan, sky/v1/board/+/plan-ack,
 *               sky/v1/job/+/metrics/+ (sky job watch), sky/v1/job/+/part/+ (sky job collect);
 *               write sky/v1/jobs/<op>/weights (the model of an infer job).
 *   client sky-client-<name> (`sky pki client NAME`): write sky/v1/job/+/req/+/<its CN>,
 *               read sky/v1/job/+/resp/<its CN>/+ and sky/v1/job/+/plan (the route:
 *               which board is the first stage, which the last); nothing else. Clients connect to
 *               the claim (tools) listener, whose ACL has no patterns; on the fleet
 *               listener they get nothing (the board patterns there would give
 *               them every request and response, and a deny cannot carve theirs out).
 *   everything else: denied.
 * The operator's CN in its submit topic is vouched for by the ACL, so the
 * planner knows whom to answer; a board cannot submit at all.
 *
 * Sites (sky pki bridge, planner/broker_conf.c): a site runs its own broker,
 * bridged to the core broker. A stage sends a frame to a stage of its own
 * site on the plain stage topic, which no bridge carries: it never leaves
 * the site. A frame to a stage of another site goes to
 * sky/v1/site/<dst>/job/...: the sender's bridge carries every such topic
 * to the core, and the core hands it to <dst>'s bridge only, which
 * delivers it on <dst>'s broker as the plain topic (the bridge swaps the
 * prefix), so receivers on a site subscribe to the plain topics only; the
 * core's own boards also read sky/v1/site/core/job/... on the core broker.
 * ready and norm go to every stage: plainly for the sender's site, and
 * once per other site in the plan. Bridges also carry the boards' caps,
 * status, heartbeat, plan-ack, metrics, parts, checkpoints, slice requests
 * and serving answers to the core, and plans, commands, loads, slices and
 * clients' requests (and the planner's replays of them) to the sites; a board's echo stays on its site (it measures the
 * link to its own broker). The planner measures a site's path with
 * sky/v1/site/<site>/echo, which the site's broker sends back as
 * sky/v1/site/<site>/back/echo.
 *   bridge sky-bridge-<site> (on the core): write sky/v1/board/+/{caps,status,
 *               heartbeat,plan-ack}, sky/v1/job/+/{metrics,part,ckpt}/+,
 *               sky/v1/site/+/job/+/stage/#, sky/v1/site/<site>/back/echo,
 *               sky/v1/job/+/resp/+/+, sky/v1/board/+/slice-req;
 *               read sky/v1/board/+/cmd, sky/v1/job/+/plan,
 *               sky/v1/job/+/{load,slice}/+, sky/v1/job/+/{req,replay}/+/+,
 *               (it relays the sender level as its site's broker gave it: the
 *               core trusts a bridge for its own site's boards)
 *               sky/v1/site/<site>/job/+/stage/#, and (claim listener, its
 *               probe connection) sky/v1/site/<site>/echo.
 *   boards also: write sky/v1/site/+/job/+/stage/+/+/<id>, read sky/v1/site/core/job/+/stage/#.
 *   planner also: write sky/v1/site/+/echo, read sky/v1/site/+/back/echo.
 *
 * Client ids are bound to certificates (planner/broker_conf.c): the fleet
 * listener replaces every client id with the certificate CN, so no client
 * can take another's id and close its connection; the claim listener
 * (fleet port + 1) keeps the ids claim connections choose, so many new
 * boards can enroll at once with the one claim certificate, and the broker
 * admits only ids starting with SKY_MQTT_CLIENT_PREFIX, which no CN has.
 * The board's LWT is set at CONNECT on its own status topic, so the ACL
 * write rule for status covers it.
 */
#ifndef SKY_TOPICS_H
#define SKY_TOPICS_H

#include "sky_err.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* ---- topic names --------------------------------------------------------- */

#define SKY_TOPIC_ROOT "sky/v1"

/* Leaves under sky/v1/board/<id>/ */
#define SKY_TOPIC_CAPS "caps"
#define SKY_TOPIC_STATUS "status"
#define SKY_TOPIC_HEARTBEAT "heartbeat"
#define SKY_TOPIC_PLAN_ACK "plan-ack"
#define SKY_TOPIC_ECHO "echo"
#define SKY_TOPIC_CMD "cmd"

/* Leaves under sky/v1/job/<job>/ */
#define SKY_TOPIC_PLAN "plan"
#define SKY_TOPIC_METRICS "metrics"
#define SKY_TOPIC_FWD "fwd"
#define SKY_TOPIC_BWD "bwd"
#define SKY_TOPIC_READY "ready"
#define SKY_TOPIC_NORM "norm"
#define SKY_TOPIC_GRAD "grad" /* stage replicas: a chunk of the fixed-point gradient sums */
#define SKY_TOPIC_DONE "done" /* serving: under stage/0/, a batch the last stage answered */
/* Serving: levels under sky/v1/job/<job>/ followed by one more segment
 * (the client CN, or the board id for slices). */
#define SKY_TOPIC_REQ "req"
#define SKY_TOPIC_RESP "resp"
#define SKY_TOPIC_REPLAY "replay"
#define SKY_TOPIC_SLICE "slice"
/* Leaf under sky/v1/board/<id>/: a board asks the planner for its slice. */
#define SKY_TOPIC_SLICE_REQ "slice-req"
/* Leaf under sky/v1/jobs/<operator CN>/: the model of an infer job. */
#define SKY_TOPIC_WEIGHTS "weights"
/* Client identities' CNs start with this (`sky pki client NAME`). */
#define SKY_TOPIC_CLIENT_PREFIX "sky-client-"
/* Leaves under sky/v1/job/<job>/, each followed by /<board> */
#define SKY_TOPIC_PART "part"
#define SKY_TOPIC_CKPT "ckpt"
#define SKY_TOPIC_LOAD "load"
/* federated jobs (sky_fedmsg.h) */
#define SKY_TOPIC_FEDROUND "fedround"
#define SKY_TOPIC_FEDMODEL "fedmodel"
#define SKY_TOPIC_FEDUPD "fedupd"
#define SKY_TOPIC_FEDSHR "fedshr"	/* secure rounds: owner -> planner (sky_fedsecmsg.h) */
#define SKY_TOPIC_FEDRELAY "fedrelay" /* secure rounds: planner -> one owner, signed */


/* Leaves under sky/v1/enroll/<nonce>/ */
#define SKY_TOPIC_CSR "csr"
#define SKY_TOPIC_CERT "cert"

/* Leaves under sky/v1/jobs/<operator CN>/ */
#define SKY_TOPIC_SUBMIT "submit"
#define SKY_TOPIC_REPLY "reply"
#define SKY_TOPIC_CANCEL "cancel" /* operator -> planner: {"job":..,"cancel_id":..} */
/* sky/v1/jobs/<op>/job/<job>/<leaf>: what the planner relays to a job's
 * owner, its metrics (SKY_TOPIC_METRICS), its parts (SKY_TOPIC_PART
 * "/<board>", retained) and its last state (SKY_TOPIC_STATE, retained) */
#define SKY_TOPIC_STATE "state"

/* Subscription filters (wildcards are legal only in filters, MQTT 3.1.1 §4.7.1). */
#define SKY_TOPIC_SUB_ALL_BOARDS SKY_TOPIC_ROOT "/board/+/+"
#define SKY_TOPIC_SUB_ALL_PLANS SKY_TOPIC_ROOT "/job/+/plan"
#define SKY_TOPIC_SUB_ALL_CSRS SKY_TOPIC_ROOT "/enroll/+/csr"
#define SKY_TOPIC_SUB_ALL_SUBMITS SKY_TOPIC_ROOT "/jobs/+/submit"

/* Certificate common names of the two fixed identities. Board CNs are their
 * ids, which must not collide with these (the CA refuses them). */
#define SKY_TOPIC_PLANNER_CN "sky-planner"
#define SKY_TOPIC_CLAIM_CN "sky-claim"
#define SKY_TOPIC_OPERATOR_CN "sky-operator"
/* Every fleet identity's CN starts with this; board ids may not. */
#define SKY_TOPIC_RESERVED_PREFIX "sky-"

/* Every client id a Sky client sends starts with this (the broker's
 * clientid_prefixes). The fleet listener replaces the id with the CN
 * anyway; on the claim listener the id stays, and since no CN contains
 * ':', a claim connection can never take a fleet identity's id. */
#define SKY_MQTT_CLIENT_PREFIX "sky:"

/* ---- bounds -------------------------------------------------------------- */

/* A topic name is a UTF-8 string: at most 65535 bytes (MQTT 3.1.1 §1.5.3),
 * at least one character (§4.7.3). Ours are far shorter; this buffer size
 * holds every topic built below. */
#define SKY_MQTT_TOPIC_MAX 65535
#define SKY_TOPIC_BUF 256

/* Variable segments (board id, job id, enrollment nonce): 1..64 bytes of
 * [A-Za-z0-9_.-] (our rule, stricter than MQTT's, see the top comment). */
#define SKY_TOPIC_SEGMENT_MAX 64

/* MQTT 3.1.1 §2.2.3: Remaining Length is at most 268,435,455 bytes, so no
 * payload can exceed that; the broker's max_packet_size (generated config)
 * and Paho's receive limit bring it down to SKY_MQTT_MAX_PACKET. */
#define SKY_MQTT_SPEC_MAX_REMAINING 268435455u
/* Largest packet the broker accepts: the largest tensor frame plus
 * headroom for the fixed header, topic and properties. */
#define SKY_MQTT_MAX_PACKET (SKY_FRAME_MAX_PAYLOAD_DEFAULT + 65536u)

/* Payload limits per message kind, checked BEFORE parsing or allocating. */
#define SKY_CAPS_MAX_BYTES (16u << 10)    /* capability report JSON */
#define SKY_STATUS_MAX_BYTES 256u         /* status / heartbeat JSON */
#define SKY_PLAN_MAX_BYTES (64u << 10)    /* signed plan envelope (plan JSON + signature) */
#define SKY_PLAN_ACK_MAX_BYTES (4u << 10) /* plan-ack JSON */
#define SKY_CMD_MAX_BYTES 1024u           /* planner -> board command */
#define SKY_JOB_MAX_BYTES (4u << 10)      /* job submission JSON */
#define SKY_JOB_REPLY_MAX_BYTES 512u      /* submit ack / refusal JSON */
#define SKY_JOB_STATE_MAX_BYTES 1024u     /* a job's last state, relayed to its owner */
#define SKY_ENROLL_REQ_MAX_BYTES (8u << 10)    /* token + id + CSR PEM (~0.5 KiB for P-256) */
#define SKY_ENROLL_REPLY_MAX_BYTES (16u << 10) /* three certificate PEMs (~0.7 KiB each) */
#define SKY_ECHO_MAX_BYTES (1u << 20)     /* link probe payload */
#define SKY_METRICS_MAX_BYTES (16u << 10)
/* Serving. A request above SKY_INFER_REQ_MAX_BYTES is answered "oversize"
 * (sky_infermsg.h), so its topic class admits more than that, up to
 * SKY_INFER_REQ_CLASS_BYTES; beyond the class it is dropped unanswered. */
#define SKY_INFER_REQ_MAX_BYTES (64u << 10)
#define SKY_INFER_REQ_CLASS_BYTES (1u << 20)
#define SKY_INFER_RESP_MAX_BYTES (64u << 10)
#define SKY_SLICE_REQ_MAX_BYTES 1024u
#define SKY_SERVE_DONE_MAX_BYTES 256u /* {"epoch":E,"batch":N,"n":R} */
#define SKY_SERVE_READY_MAX_BYTES 256u /* a serving stage's {"epoch":E,"board":B} */
/* A stage's ready: a frame of one 32-bit word (128-byte header, GCM tag);
 * its norm: a frame of one double per block (2 x layers + 2), 256 KiB being
 * 32,000 blocks. Both are control messages (sky_mqtt_pool.h), so a receiver
 * drops anything larger before it is queued. */
#define SKY_READY_MAX_BYTES 1024u
#define SKY_NORM_MAX_BYTES (256u << 10)
/* Tensor frames: header + payload. A large preset at S=512, B=8 passes
 * 8*512*1024*4 B = 16 MiB per cut; the default limit is twice that. Boards
 * may configure a lower limit; a frame declaring more is refused before
 * anything is allocated (sky_frame.h). */
#define SKY_FRAME_MAX_PAYLOAD_DEFAULT (32u << 20)

/* ---- builders -------------------------------------------------------------- */

/* Returns 1 if s is a legal variable segment (see above), else 0. */
static inline int sky_topic_segment_ok(const char *s)
{
	size_t n;
	if (!s)
		return 0;
	for (n = 0; s[n]; n++) {
		char c = s[n];
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			 c == '_' || c == '-' || c == '.';
		if (!ok || n >= SKY_TOPIC_SEGMENT_MAX)
			return 0;
	}
	/* "." and ".." are legal MQTT but read like paths; refuse them. */
	return n > 0 && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* Writes "sky/v1/<kind>/<seg>/<leaf>" into buf. Returns 0, SKY_EINVAL if
 * seg is not a legal segment, SKY_ERANGE if buf is too small. */
static inline int sky_topic_build(char *buf, size_t cap, const char *kind, const char *seg,
				  const char *leaf)
{
	int n;
	if (!sky_topic_segment_ok(seg))
		return SKY_EINVAL;
	n = snprintf(buf, cap, SKY_TOPIC_ROOT "/%s/%s/%s", kind, seg, leaf);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

/* sky/v1/board/<id>/<leaf>, leaf one of SKY_TOPIC_{CAPS,STATUS,...}. */
static inline int sky_topic_board(char *buf, size_t cap, const char *id, const char *leaf)
{
	return sky_topic_build(buf, cap, "board", id, leaf);
}

/* sky/v1/job/<job>/<leaf>, leaf SKY_TOPIC_PLAN or SKY_TOPIC_METRICS. */
static inline int sky_topic_job(char *buf, size_t cap, const char *job, const char *leaf)
{
	return sky_topic_build(buf, cap, "job", job, leaf);
}

/* An enrollment nonce is the claim connection's client id: SKY_MQTT_CLIENT_PREFIX
 * and a legal segment. The claim listener's ACL pins the level to the
 * connection's id (%c), so one connection has exactly one nonce, reads
 * only its own answer, and the planner's rate limit per nonce is a limit
 * per connection. Returns 1 if nonce has that form, else 0. */
static inline int sky_topic_enroll_nonce_ok(const char *nonce)
{
	const size_t pl = sizeof SKY_MQTT_CLIENT_PREFIX - 1;
	return nonce && strncmp(nonce, SKY_MQTT_CLIENT_PREFIX, pl) == 0 &&
	       strlen(nonce) <= SKY_TOPIC_SEGMENT_MAX && sky_topic_segment_ok(nonce + pl);
}

/* sky/v1/enroll/<nonce>/<leaf>, leaf SKY_TOPIC_CSR or SKY_TOPIC_CERT,
 * nonce as sky_topic_enroll_nonce_ok. Returns 0, SKY_EINVAL or SKY_ERANGE. */
static inline int sky_topic_enroll(char *buf, size_t cap, const char *nonce, const char *leaf)
{
	int n;
	if (!sky_topic_enroll_nonce_ok(nonce))
		return SKY_EINVAL;
	n = snprintf(buf, cap, SKY_TOPIC_ROOT "/enroll/%s/%s", nonce, leaf);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

/* Splits a received "sky/v1/enroll/<nonce>/<leaf>": copies the nonce
 * (sky_topic_enroll_nonce_ok) and leaf. Returns 0 or SKY_EINVAL. */
static inline int sky_topic_parse_enroll(const char *topic, size_t topic_len, char *nonce,
					 size_t nonce_cap, char *leaf, size_t leaf_cap)
{
	static const char pre[] = SKY_TOPIC_ROOT "/enroll/";
	const char *p, *end, *l;
	if (!topic || topic_len > SKY_TOPIC_BUF || topic_len < sizeof pre ||
	    memcmp(topic, pre, sizeof pre - 1) != 0 || memchr(topic, 0, topic_len))
		return SKY_EINVAL;
	end = topic + topic_len;
	p = topic + sizeof pre - 1;
	l = memchr(p, '/', (size_t)(end - p));
	if (!l || (size_t)(l - p) >= nonce_cap || l + 1 >= end ||
	    memchr(l + 1, '/', (size_t)(end - l - 1)) || (size_t)(end - l - 1) >= leaf_cap)
		return SKY_EINVAL;
	memcpy(nonce, p, (size_t)(l - p));
	nonce[l - p] = '\0';
	memcpy(leaf, l + 1, (size_t)(end - l - 1));
	leaf[end - l - 1] = '\0';
	return sky_topic_enroll_nonce_ok(nonce) ? 0 : SKY_EINVAL;
}

/* sky/v1/jobs/<operator CN>/<leaf>, leaf SKY_TOPIC_SUBMIT or SKY_TOPIC_REPLY. */
static inline int sky_topic_jobs(char *buf, size_t cap, const char *op, const char *leaf)
{
	return sky_topic_build(buf, cap, "jobs", op, leaf);
}

/* sky/v1/jobs/<op>/job/<job>/<leaf>, and with who (a board id) .../<leaf>/<who>
 * (who NULL: none). Returns 0, SKY_EINVAL (a bad segment) or SKY_ERANGE. */
static inline int sky_topic_jobs_job(char *buf, size_t cap, const char *op, const char *job,
				     const char *leaf, const char *who)
{
	int n;
	if (!sky_topic_segment_ok(op) || !sky_topic_segment_ok(job) ||
	    (who && strcmp(who, "+") != 0 && !sky_topic_segment_ok(who)))
		return SKY_EINVAL;
	n = snprintf(buf, cap, SKY_TOPIC_ROOT "/jobs/%s/job/%s/%s%s%s", op, job, leaf,
		     who ? "/" : "", who ? who : "");
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

/* sky/v1/job/<job>/stage/<k>/<leaf>/<sender> for any leaf (SKY_TOPIC_FWD,
 * SKY_TOPIC_READY, ...): sender is the publishing board's id (the ACL pins
 * it to the certificate CN); stage -1 writes the filter "+" in its place,
 * sender NULL the filter "+" (subscriptions only). */
static inline int sky_topic_stage_leaf(char *buf, size_t cap, const char *job, int stage,
				       const char *leaf, const char *sender)
{
	int n;
	char k[8] = "+";
	if (!sky_topic_segment_ok(job) || stage < -1 || stage > 65535 ||
	    (sender && !sky_topic_segment_ok(sender)))
		return SKY_EINVAL;
	if (stage >= 0)
		snprintf(k, sizeof k, "%d", stage);
	n = snprintf(buf, cap, SKY_TOPIC_ROOT "/job/%s/stage/%s/%s/%s", job, k, leaf,
		     sender ? sender : "+");
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

/* sky/v1/job/<job>/stage/<k>/<fwd|bwd>/<sender>; stage in [0, 65535]. */
static inline int sky_topic_stage(char *buf, size_t cap, const char *job, int stage, int bwd,
				  const char *sender)
{
	if (stage < 0)
		return SKY_EINVAL;
	return sky_topic_stage_leaf(buf, cap, job, stage, bwd ? SKY_TOPIC_BWD : SKY_TOPIC_FWD,
				    sender);
}

/* sky/v1/site/<site>/job/<job>/stage/<k>/<leaf>/<sender>: a stage message
 * addressed to a stage on site <site> ("" is the core, written "core");
 * stage -1 and sender NULL write the filter "+". Returns 0, SKY_EINVAL or
 * SKY_ERANGE. */
static inline int sky_topic_site_stage(char *buf, size_t cap, const char *site, const char *job,
				       int stage, const char *leaf, const char *sender)
{
	int n;
	char k[8] = "+";
	if (!site || !site[0])
		site = "core";
	if (!sky_topic_segment_ok(site) || !sky_topic_segment_ok(job) || stage < -1 ||
	    stage > 65535 || (sender && !sky_topic_segment_ok(sender)))
		return SKY_EINVAL;
	if (stage >= 0)
		snprintf(k, sizeof k, "%d", stage);
	n = snprintf(buf, cap, SKY_TOPIC_ROOT "/site/%s/job/%s/stage/%s/%s/%s", site, job, k, leaf,
		     sender ? sender : "+");
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

/* sky/v1/job/<job>/<level>/<who>, level SKY_TOPIC_METRICS (who: the
 * sending board), SKY_TOPIC_SLICE (who: the board it is for),
 * SKY_TOPIC_PART, SKY_TOPIC_CKPT or SKY_TOPIC_LOAD (who: a board id); who
 * NULL writes the filter "+". Returns 0, SKY_EINVAL (a bad segment) or
 * SKY_ERANGE. */
static inline int sky_topic_job_to(char *buf, size_t cap, const char *job, const char *level,
				   const char *who)
{
	int n;
	if (!sky_topic_segment_ok(job) || (who && !sky_topic_segment_ok(who)))
		return SKY_EINVAL;
	n = snprintf(buf, cap, SKY_TOPIC_ROOT "/job/%s/%s/%s", job, level, who ? who : "+");
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

/* sky/v1/job/<job>/<level>/<a>/<b>: the serving topics with two
 * identities, the one the ACL pins with %u being the sender's:
 *   req/<first-stage board>/<client>    (the client sends: b)
 *   resp/<client>/<sender>              (a board or the planner sends: b)
 *   replay/<first-stage board>/<client> (the planner sends)
 * a or b NULL writes the filter "+". Returns 0, SKY_EINVAL or SKY_ERANGE. */
static inline int sky_topic_job_pair(char *buf, size_t cap, const char *job, const char *level,
				     const char *a, const char *b)
{
	int n;
	if (!sky_topic_segment_ok(job) || (a && !sky_topic_segment_ok(a)) ||
	    (b && !sky_topic_segment_ok(b)))
		return SKY_EINVAL;
	n = snprintf(buf, cap, SKY_TOPIC_ROOT "/job/%s/%s/%s/%s", job, level, a ? a : "+",
		     b ? b : "+");
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

/* Splits topic (topic_len bytes, no NUL inside, at most SKY_TOPIC_BUF) at
 * '/' into at most max segments: seg[i] points into topic, len[i] its
 * length. Returns the count, or -1 if there are more than max, a segment
 * is empty, or the topic is malformed. */
static inline int sky_topic_split(const char *topic, size_t topic_len, const char **seg,
				  size_t *len, int max)
{
	int n = 0;
	const char *p, *end;
	if (!topic || topic_len == 0 || topic_len > SKY_TOPIC_BUF || memchr(topic, 0, topic_len))
		return -1;
	p = topic;
	end = topic + topic_len;
	for (;;) {
		const char *s = memchr(p, '/', (size_t)(end - p));
		size_t l = s ? (size_t)(s - p) : (size_t)(end - p);
		if (n == max || l == 0)
			return -1;
		seg[n] = p;
		len[n++] = l;
		if (!s)
			return n;
		p = s + 1;
	}
}

/* Copies segment (p, l) into buf (cap bytes) if it is a legal segment.
 * Returns 0 or SKY_EINVAL. */
static inline int sky_topic_seg_copy(const char *p, size_t l, char *buf, size_t cap)
{
	if (l >= cap)
		return SKY_EINVAL;
	memcpy(buf, p, l);
	buf[l] = '\0';
	return sky_topic_segment_ok(buf) ? 0 : SKY_EINVAL;
}

static inline int sky_topic_seg_is(const char *p, size_t l, const char *s)
{
	return strlen(s) == l && memcmp(p, s, l) == 0;
}

/* Splits a received serving topic "sky/v1/job/<job>/<level>/<a>/<b>"
 * (exactly seven levels, level as given): copies job, a and b, each
 * segment-checked. Returns 0 or SKY_EINVAL. */
static inline int sky_topic_parse_job_pair(const char *topic, size_t topic_len, const char *level,
					   char *job, size_t job_cap, char *a, size_t a_cap,
					   char *b, size_t b_cap)
{
	const char *seg[8];
	size_t len[8];
	if (sky_topic_split(topic, topic_len, seg, len, 8) != 7 ||
	    !sky_topic_seg_is(seg[0], len[0], "sky") || !sky_topic_seg_is(seg[1], len[1], "v1") ||
	    !sky_topic_seg_is(seg[2], len[2], "job") || !sky_topic_seg_is(seg[4], len[4], level))
		return SKY_EINVAL;
	if (sky_topic_seg_copy(seg[3], len[3], job, job_cap) ||
	    sky_topic_seg_copy(seg[5], len[5], a, a_cap) ||
	    sky_topic_seg_copy(seg[6], len[6], b, b_cap))
		return SKY_EINVAL;
	return 0;
}

/* A received stage topic, plain "sky/v1/job/<job>/stage/<k>/<leaf>/<sender>"
 * or site-addressed "sky/v1/site/<site>/job/<job>/stage/<k>/<leaf>/<sender>". */
typedef struct sky_topic_stage_msg {
	char site[SKY_TOPIC_SEGMENT_MAX + 1]; /* "" for the plain form */
	char job[SKY_TOPIC_SEGMENT_MAX + 1];
	int stage;                            /* 0..65535 */
	char leaf[16];                        /* fwd, bwd, ready, norm, done, ... */
	char sender[SKY_TOPIC_SEGMENT_MAX + 1];
} sky_topic_stage_msg;

/* Parses a stage topic into m. Returns 0 or SKY_EINVAL (another form, a
 * bad segment, a stage number outside 0..65535 or with leading zeros). */
static inline int sky_topic_parse_stage(const char *topic, size_t topic_len,
					sky_topic_stage_msg *m)
{
	const char *seg[11];
	size_t len[11];
	int n = sky_topic_split(topic, topic_len, seg, len, 11), o = 0;
	long k = 0;
	m->site[0] = '\0';
	if (n < 3 || !sky_topic_seg_is(seg[0], len[0], "sky") ||
	    !sky_topic_seg_is(seg[1], len[1], "v1"))
		return SKY_EINVAL;
	if (n == 10 && sky_topic_seg_is(seg[2], len[2], "site") &&
	    sky_topic_seg_is(seg[4], len[4], "job")) {
		if (sky_topic_seg_copy(seg[3], len[3], m->site, sizeof m->site))
			return SKY_EINVAL;
		o = 2;
	} else if (n != 8 || !sky_topic_seg_is(seg[2], len[2], "job")) {
		return SKY_EINVAL;
	}
	if (!sky_topic_seg_is(seg[4 + o], len[4 + o], "stage") ||
	    sky_topic_seg_copy(seg[3 + o], len[3 + o], m->job, sizeof m->job) ||
	    sky_topic_seg_copy(seg[6 + o], len[6 + o], m->leaf, sizeof m->leaf) ||
	    sky_topic_seg_copy(seg[7 + o], len[7 + o], m->sender, sizeof m->sender))
		return SKY_EINVAL;
	if (len[5 + o] > 5 || (len[5 + o] > 1 && seg[5 + o][0] == '0'))
		return SKY_EINVAL;
	for (size_t i = 0; i < len[5 + o]; i++) {
		char c = seg[5 + o][i];
		if (c < '0' || c > '9')
			return SKY_EINVAL;
		k = k * 10 + (c - '0');
	}
	if (k > 65535)
		return SKY_EINVAL;
	m->stage = (int)k;
	return 0;
}

/* Splits a received "sky/v1/job/<job>/<level>/<who>" (exactly six levels,
 * level as given): copies job and who, both segment-checked. Returns 0 or
 * SKY_EINVAL. A board learns from it which client asked (the ACL vouches
 * for the CN in a req topic). */
static inline int sky_topic_parse_job_to(const char *topic, size_t topic_len, const char *level,
					 char *job, size_t job_cap, char *who, size_t who_cap)
{
	static const char pre[] = SKY_TOPIC_ROOT "/job/";
	const char *p, *end, *s;
	size_t ll = strlen(level);
	if (!topic || topic_len > SKY_TOPIC_BUF || topic_len < sizeof pre ||
	    memcmp(topic, pre, sizeof pre - 1) != 0 || memchr(topic, 0, topic_len))
		return SKY_EINVAL;
	end = topic + topic_len;
	p = topic + sizeof pre - 1;
	s = memchr(p, '/', (size_t)(end - p));
	if (!s || s == p || (size_t)(s - p) >= job_cap)
		return SKY_EINVAL;
	memcpy(job, p, (size_t)(s - p));
	job[s - p] = '\0';
	s++;
	if ((size_t)(end - s) <= ll + 1 || memcmp(s, level, ll) != 0 || s[ll] != '/')
		return SKY_EINVAL;
	s += ll + 1;
	if ((size_t)(end - s) >= who_cap || memchr(s, '/', (size_t)(end - s)))
		return SKY_EINVAL;
	memcpy(who, s, (size_t)(end - s));
	who[end - s] = '\0';
	return sky_topic_segment_ok(job) && sky_topic_segment_ok(who) ? 0 : SKY_EINVAL;
}

/* Splits a received topic "sky/v1/<kind>/<seg>/<leaf>" (exactly five
 * levels). Copies seg (segment-checked) and leaf into the buffers. Returns
 * 0, or SKY_EINVAL if the topic has another form, kind differs, or seg is
 * not a legal segment. Used by the planner to learn which board a message
 * is about from the topic the broker's ACL vouched for. */
static inline int sky_topic_parse(const char *topic, size_t topic_len, const char *kind,
				  char *seg, size_t seg_cap, char *leaf, size_t leaf_cap)
{
	const char *p, *end, *s, *l;
	size_t root = sizeof(SKY_TOPIC_ROOT) - 1, klen = strlen(kind);
	if (!topic || topic_len > SKY_TOPIC_BUF || topic_len < root + klen + 4)
		return SKY_EINVAL;
	end = topic + topic_len;
	if (memcmp(topic, SKY_TOPIC_ROOT "/", root + 1) != 0)
		return SKY_EINVAL;
	p = topic + root + 1;
	if ((size_t)(end - p) <= klen || memcmp(p, kind, klen) != 0 || p[klen] != '/')
		return SKY_EINVAL;
	s = p + klen + 1;
	l = memchr(s, '/', (size_t)(end - s));
	if (!l || (size_t)(l - s) >= seg_cap || l == s)
		return SKY_EINVAL;
	memcpy(seg, s, (size_t)(l - s));
	seg[l - s] = '\0';
	l++;
	if (l >= end || memchr(l, '/', (size_t)(end - l)) || (size_t)(end - l) >= leaf_cap)
		return SKY_EINVAL;
	memcpy(leaf, l, (size_t)(end - l));
	leaf[end - l] = '\0';
	/* an embedded NUL in the topic would make the copies lie */
	if (strlen(leaf) != (size_t)(end - l) || !sky_topic_segment_ok(seg))
		return SKY_EINVAL;
	return 0;
}

/* The payload limit of the topic class a received topic belongs to, for
 * dropping an oversize message before it is queued or parsed (the broker's
 * max_packet_size is one global limit, sized for tensor frames, so a
 * control message may be up to 32 MiB on the wire; mosquitto 2.0 has no
 * per-listener or per-topic size limit). Job and site topics are
 * classified by their exact form (the level, not whatever an identity
 * segment says); frames (.../stage/<k>/fwd|bwd/<sender>) get the frame
 * limit, the echo its own; a topic outside sky/v1 or of no known form gets
 * 0 (drop everything). */
static inline size_t sky_topic_max_bytes(const char *topic)
{
	static const struct {
		const char *leaf;
		size_t max;
	} k[] = {{SKY_TOPIC_CAPS, SKY_CAPS_MAX_BYTES},
		 {SKY_TOPIC_STATUS, SKY_STATUS_MAX_BYTES},
		 {SKY_TOPIC_HEARTBEAT, SKY_STATUS_MAX_BYTES},
		 {SKY_TOPIC_PLAN_ACK, SKY_PLAN_ACK_MAX_BYTES},
		 {SKY_TOPIC_ECHO, SKY_ECHO_MAX_BYTES},
		 {SKY_TOPIC_CMD, SKY_CMD_MAX_BYTES},
		 {SKY_TOPIC_CSR, SKY_ENROLL_REQ_MAX_BYTES},
		 {SKY_TOPIC_CERT, SKY_ENROLL_REPLY_MAX_BYTES},
		 {SKY_TOPIC_SUBMIT, SKY_JOB_MAX_BYTES},
		 {SKY_TOPIC_REPLY, SKY_JOB_REPLY_MAX_BYTES},
		 {SKY_TOPIC_CANCEL, SKY_JOB_MAX_BYTES},
		 {SKY_TOPIC_SLICE_REQ, SKY_SLICE_REQ_MAX_BYTES},
		 {SKY_TOPIC_WEIGHTS, SKY_MQTT_MAX_PACKET}};
	/* the leaf of a stage topic */
	static const struct {
		const char *leaf;
		size_t max;
	} st[] = {{SKY_TOPIC_FWD, SKY_FRAME_MAX_PAYLOAD_DEFAULT + 4096u},
		  {SKY_TOPIC_BWD, SKY_FRAME_MAX_PAYLOAD_DEFAULT + 4096u},
		  {SKY_TOPIC_READY, SKY_READY_MAX_BYTES},
		  {SKY_TOPIC_NORM, SKY_NORM_MAX_BYTES},
		  {SKY_TOPIC_GRAD, SKY_FRAME_MAX_PAYLOAD_DEFAULT + 4096u},
		  {SKY_TOPIC_DONE, SKY_SERVE_DONE_MAX_BYTES}};
	/* sky/v1/job/<job>/<level>/<who> (six levels) and .../<a>/<b> (seven) */
	static const struct {
		const char *level;
		int levels;
		size_t max;
	} j[] = {{SKY_TOPIC_METRICS, 6, SKY_METRICS_MAX_BYTES},
		 {SKY_TOPIC_PART, 6, SKY_MQTT_MAX_PACKET},
		 /* a part's chunk: SKY_CHUNK_MAX_BYTES (sky_chunk.h) */
		 {SKY_TOPIC_PART, 7, 96u + (4u << 20)},
		 {SKY_TOPIC_CKPT, 6, SKY_MQTT_MAX_PACKET},
		 {SKY_TOPIC_LOAD, 6, SKY_MQTT_MAX_PACKET},
		 {SKY_TOPIC_SLICE, 6, SKY_MQTT_MAX_PACKET},
		 {SKY_TOPIC_REQ, 7, SKY_INFER_REQ_CLASS_BYTES},
		 {SKY_TOPIC_REPLAY, 7, SKY_INFER_REQ_CLASS_BYTES},
		 {SKY_TOPIC_RESP, 7, SKY_INFER_RESP_MAX_BYTES}};
	const char *seg[12];
	size_t len[12];
	int n = topic ? sky_topic_split(topic, strlen(topic), seg, len, 12) : -1;
	if (n < 4 || !sky_topic_seg_is(seg[0], len[0], "sky") ||
	    !sky_topic_seg_is(seg[1], len[1], "v1"))
		return 0;
	if (sky_topic_seg_is(seg[2], len[2], "job") || sky_topic_seg_is(seg[2], len[2], "site")) {
		sky_topic_stage_msg m;
		if (sky_topic_parse_stage(topic, strlen(topic), &m) == 0) {
			for (size_t i = 0; i < sizeof st / sizeof st[0]; i++)
				if (strcmp(m.leaf, st[i].leaf) == 0)
					return st[i].max;
			return 0;
		}
		if (sky_topic_seg_is(seg[2], len[2], "site"))
			return sky_topic_seg_is(seg[n - 1], len[n - 1], SKY_TOPIC_ECHO) &&
				       (n == 5 || (n == 6 && sky_topic_seg_is(seg[4], len[4], "back")))
				       ? SKY_ECHO_MAX_BYTES
				       : 0;
		if (n == 5 && sky_topic_seg_is(seg[4], len[4], SKY_TOPIC_PLAN))
			return SKY_PLAN_MAX_BYTES;
		/* federated jobs: the signed round (a plan-sized envelope), the
		 * global model's chunks, an owner's update chunks */
		if (n == 5 && sky_topic_seg_is(seg[4], len[4], SKY_TOPIC_FEDROUND))
			return SKY_PLAN_MAX_BYTES;
		if (n == 5 && sky_topic_seg_is(seg[4], len[4], SKY_TOPIC_FEDMODEL))
			return SKY_MQTT_MAX_PACKET;
		if (n == 6 && sky_topic_seg_is(seg[4], len[4], SKY_TOPIC_FEDUPD))
			return SKY_MQTT_MAX_PACKET;
		if (n == 6 && (sky_topic_seg_is(seg[4], len[4], SKY_TOPIC_FEDSHR) ||
			       sky_topic_seg_is(seg[4], len[4], SKY_TOPIC_FEDRELAY)))
			return SKY_PLAN_MAX_BYTES;
		for (size_t i = 0; n >= 6 && i < sizeof j / sizeof j[0]; i++)
			if (n == j[i].levels && sky_topic_seg_is(seg[4], len[4], j[i].level))
				return j[i].max;
		return 0;
	}
	/* what the planner relays to a job's owner:
	 * sky/v1/jobs/<op>/job/<job>/{metrics,state}, .../part/<board> and
	 * .../part/<board>/<chunk> */
	if (sky_topic_seg_is(seg[2], len[2], "jobs") && n >= 7 &&
	    sky_topic_seg_is(seg[4], len[4], "job")) {
		if (n == 7 && sky_topic_seg_is(seg[6], len[6], SKY_TOPIC_METRICS))
			return SKY_METRICS_MAX_BYTES;
		if (n == 7 && sky_topic_seg_is(seg[6], len[6], SKY_TOPIC_STATE))
			return SKY_JOB_STATE_MAX_BYTES;
		if (n == 8 && sky_topic_seg_is(seg[6], len[6], SKY_TOPIC_PART))
			return SKY_MQTT_MAX_PACKET;
		if (n == 9 && sky_topic_seg_is(seg[6], len[6], SKY_TOPIC_PART))
			return 96u + (4u << 20); /* a part's chunk */
		if (n == 7 && sky_topic_seg_is(seg[6], len[6], SKY_TOPIC_FEDMODEL))
			return SKY_MQTT_MAX_PACKET;
		return 0;
	}
	for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
		if (sky_topic_seg_is(seg[n - 1], len[n - 1], k[i].leaf))
			return k[i].max;
	return 0;
}

/* Whether a received topic is of a class that is published retained (the
 * "retained" column of the table above): a board's caps, status and
 * plan-ack, a job's plan, a stage's ready, a job's parts (and their
 * chunks) and loads, and
 * what the planner relays to a job's owner (its parts and last state).
 * mosquitto 2.0 cannot refuse a retained publish per topic (no ACL for
 * it; retain_available is one global switch), so a retained copy of any
 * other class (frames, metrics, requests, checkpoints, submissions, ...)
 * is either junk or a stale message a subscriber would take as new each
 * time it subscribes: receivers drop it (sky_mqtt.h). The broker marks
 * only copies from its retained store (sent on a new subscription) as
 * retained; a live message reaches subscribers as a plain one. */
static inline int sky_topic_retained_ok(const char *topic)
{
	const char *seg[12];
	size_t len[12];
	int n = topic ? sky_topic_split(topic, strlen(topic), seg, len, 12) : -1;
	if (n < 5 || !sky_topic_seg_is(seg[0], len[0], "sky") ||
	    !sky_topic_seg_is(seg[1], len[1], "v1"))
		return 0;
	if (sky_topic_seg_is(seg[2], len[2], "board"))
		return n == 5 && (sky_topic_seg_is(seg[4], len[4], SKY_TOPIC_CAPS) ||
				  sky_topic_seg_is(seg[4], len[4], SKY_TOPIC_STATUS) ||
				  sky_topic_seg_is(seg[4], len[4], SKY_TOPIC_PLAN_ACK));
	if (sky_topic_seg_is(seg[2], len[2], "job") || sky_topic_seg_is(seg[2], len[2], "site")) {
		sky_topic_stage_msg m;
		if (sky_topic_parse_stage(topic, strlen(topic), &m) == 0)
			return strcmp(m.leaf, SKY_TOPIC_READY) == 0;
		if (!sky_topic_seg_is(seg[2], len[2], "job"))
			return 0;
		if (n == 5)
			return sky_topic_seg_is(seg[4], len[4], SKY_TOPIC_PLAN) ||
			       sky_topic_seg_is(seg[4], len[4], SKY_TOPIC_FEDROUND);
		return (n == 6 && (sky_topic_seg_is(seg[4], len[4], SKY_TOPIC_PART) ||
				   sky_topic_seg_is(seg[4], len[4], SKY_TOPIC_LOAD))) ||
		       (n == 7 && sky_topic_seg_is(seg[4], len[4], SKY_TOPIC_PART)); /* a chunk */
	}
	if (sky_topic_seg_is(seg[2], len[2], "jobs") && n >= 7 &&
	    sky_topic_seg_is(seg[4], len[4], "job"))
		return (n == 7 && (sky_topic_seg_is(seg[6], len[6], SKY_TOPIC_STATE) ||
				   sky_topic_seg_is(seg[6], len[6], SKY_TOPIC_FEDMODEL))) ||
		       ((n == 8 || n == 9) && sky_topic_seg_is(seg[6], len[6], SKY_TOPIC_PART));
	return 0;
}

#endif
