/* Capability report: what one board measured it can do for one model shape.
 *
 * Published retained on sky/v1/board/<id>/caps (sky_topics.h) as compact
 * JSON, so `mosquitto_sub -t 'sky/v1/board/+/caps' -v` is readable:
 *
 *   {"v":1,"id":"b01","session":4,"boot":"9f3c0a5e7d214b68","version":"1a2b3c","board":"host",
 *    "threads":1,
 *    "keepalive_s":2,
 *    "model":{"name":"mini","hidden":256,"heads":4,"ffn":1024,"seq":128,"batch":8},
 *    "fp32":{"fwd_attn_s":0.0021,"fwd_ffn_s":0.0030,"bwd_attn_s":0.0045,"bwd_ffn_s":0.0061},
 *    "mem_bytes":2147483648,"link":{"bw_Bps":1.2e8,"lat_s":0.0004},
 *    "site":"factory","probe_s":2.1,"probed_at":1764511200}
 *
 * Times are for ONE encoder layer and ONE micro-batch (model.batch
 * sequences of model.seq tokens), split into the attention and feed-forward
 * blocks because a plan cuts at half-layers. "int8":{"fwd_s":...} is the
 * whole layer's forward with the int8 kernels (sky_layer_s8.h; inference
 * only: there is no int8 backward), present when the probe could run it;
 * beside it, optional (absent: not measured), "attn_s", the attention half's
 * share of it in seconds (the FFN half is the rest), and the serving ends
 * per micro-batch: "embed_s", what a first stage spends beyond its layers
 * (parsing the requests, the embedding), and "head_s", what a last stage
 * spends (pooler and classifier, the response documents): sky_probe.h.
 * "link" is absent (or zero) when the
 * probe ran without a broker; it is the board's path to the broker it
 * connects to, which for a board of a site is that site's broker. "site"
 * (absent: the core site) names the site the board belongs to (its
 * profile's `site = NAME`, sky_profile.h). The report is one board's word about itself;
 * the decoder therefore treats it as hostile: every field is checked against
 * a range and the first bad one is named in the diagnostic. */
#ifndef SKY_CAPS_H
#define SKY_CAPS_H

#include "sky_err.h"
#include "sky_topics.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SKY_CAPS_VERSION 1

/* Ranges a decoder accepts. A block's time is positive and at most an hour
 * (a board that needs longer for one micro-batch of one half-layer is of no
 * use to a pipeline); memory at most 1 PiB (so 10^30 is refused); link
 * bandwidth at most 10^12 B/s (a terabyte per second is beyond any board's
 * NIC); latency at most a minute. */
#define SKY_CAPS_MAX_TIME_S 3600.0
#define SKY_CAPS_MAX_MEM_BYTES (1ll << 50)
#define SKY_CAPS_MAX_BW 1e12
#define SKY_CAPS_MAX_LAT_S 60.0
#define SKY_CAPS_MAX_DIM 65536    /* hidden, ffn, seq */
#define SKY_CAPS_MAX_BATCH 4096
#define SKY_CAPS_MAX_THREADS 1024
#define SKY_CAPS_STR_MAX 64       /* version, board, model name */

/* Boot ids: skyd draws a random one at every start (16 hex digits) and
 * sends it beside the session number in every status, heartbeat, will,
 * capability report and plan-ack. Session numbers are ordered only within
 * one boot; a board whose session file was lost starts again at 1 under a
 * new boot id, and the planner orders boots by what it has seen
 * (planner/sky_registry.h). Absent on the wire reads as "" (older boards). */
#define SKY_BOOT_ID_MAX 32
/* 1 if s is "" or 1-SKY_BOOT_ID_MAX lowercase hex digits. */
int sky_boot_id_ok(const char *s);

/* Sites. A site is a place with its own broker, bridged to the core
 * broker (design.md, "Sites"). Its name follows the topic-segment rules of
 * board ids (1-64 of [A-Za-z0-9_.-]); "" is the core site, and the name
 * "core" means the same site: readers normalise it to "" (sky_site_norm),
 * writers leave "" out or print it as "core" where a name is needed. */
#define SKY_SITE_CORE "core"
#define SKY_SITE_MAX SKY_TOPIC_SEGMENT_MAX /* bytes of a name, without the NUL */
/* 1 if s is "" (the core site) or a valid segment. */
static inline int sky_site_ok(const char *s) { return !s[0] || sky_topic_segment_ok(s); }
/* Turns "core" into "" in place (the one spelling of the core site). */
static inline void sky_site_norm(char *s)
{
	if (strcmp(s, SKY_SITE_CORE) == 0)
		memset(s, 0, sizeof SKY_SITE_CORE); /* all of it: structs compare bytewise */
}
/* The site's name for people and for documents that need one: "core" for "". */
static inline const char *sky_site_name(const char *s) { return s[0] ? s : SKY_SITE_CORE; }
/* 1 if a and b name the same site ("" and "core" are one). */
static inline int sky_site_eq(const char *a, const char *b)
{
	return strcmp(a[0] ? a : SKY_SITE_CORE, b[0] ? b : SKY_SITE_CORE) == 0;
}

/* The model shape a probe ran at (the fields that change a layer's time). */
typedef struct sky_caps_shape {
	char name[16];
	int hidden, heads, ffn, seq, batch;
} sky_caps_shape;

/* Data sets a board holds (skyd --dataset NAME=PATH, <state>/datasets/):
 * what a planner needs to place the stages that read one, never a row.
 *   "datasets":[{"name":"sst2","rows":6920,"labels":2,"seq":64,
 *                "sha256":"<64 hex>","tokenizer":"<8 hex>"}, ...]
 * (absent: none). sha256 is the set file's bytes (what a job names);
 * tokenizer is the hash of the tokenizer that prepared it (sky_dataset.h),
 * which must match the job's model. */
#define SKY_CAPS_MAX_DATASETS 8
#define SKY_CAPS_DS_MAX_ROWS 2147483647ll /* as sky_ds_build's bound */
#define SKY_CAPS_DS_MAX_LABELS 256        /* as SKY_DS_MAX_LABELS */
#define SKY_CAPS_DS_MAX_SEQ 8192          /* as SKY_DS_MAX_SEQ */
typedef struct sky_caps_dataset {
	char name[SKY_TOPIC_SEGMENT_MAX + 1]; /* the topic-segment rules of board ids */
	int64_t rows;
	int labels, seq;
	char sha256[65];   /* lower-case hex */
	uint32_t tokenizer; /* sky_tokenizer hash */
} sky_caps_dataset;

/* Seconds for one encoder layer's blocks, one micro-batch. */
typedef struct sky_caps_times {
	double fwd_attn_s, fwd_ffn_s, bwd_attn_s, bwd_ffn_s;
} sky_caps_times;

typedef struct sky_caps {
	char id[SKY_TOPIC_SEGMENT_MAX + 1];
	int64_t session;   /* grows with every connect (sky_agent.h) */
	char boot[SKY_BOOT_ID_MAX + 1]; /* this run of skyd ("" if absent) */
	char version[SKY_CAPS_STR_MAX + 1]; /* build (git describe) */
	char board[SKY_CAPS_STR_MAX + 1];   /* board profile name */
	char blas_core[SKY_CAPS_STR_MAX + 1]; /* the OpenBLAS kernels it measured with
						("" if the report does not say) */
	int threads;
	int keepalive_s;   /* MQTT keepalive the board uses; the planner's liveness bound */
	sky_caps_shape shape;
	sky_caps_times fp32;
	int has_int8;
	double int8_fwd_s;  /* whole-layer int8 forward, one micro-batch */
	double int8_attn_s; /* its attention half (< int8_fwd_s); 0 = not measured */
	double int8_embed_s; /* serving: the first stage's requests and embedding, one
				micro-batch; 0 = not measured */
	double int8_head_s;  /* serving: the last stage's head and responses; 0 = not measured */
	int64_t mem_bytes; /* memory budget for a job's arena */
	double link_bw;    /* bytes/s through the broker, 0 = unknown */
	double link_lat_s; /* round trip through the broker, 0 = unknown */
	char site[SKY_SITE_MAX + 1]; /* "" = the core site */
	double probe_s;    /* how long the probe took */
	int64_t probed_at; /* Unix seconds */
	int n_datasets;    /* 0..SKY_CAPS_MAX_DATASETS, names distinct */
	sky_caps_dataset datasets[SKY_CAPS_MAX_DATASETS];
} sky_caps;

/* The set named name in c, or NULL. */
const sky_caps_dataset *sky_caps_dataset_find(const sky_caps *c, const char *name);

/* Forward plus backward of a whole layer, seconds. */
static inline double sky_caps_layer_s(const sky_caps_times *t)
{
	return t->fwd_attn_s + t->fwd_ffn_s + t->bwd_attn_s + t->bwd_ffn_s;
}

/* Writes c as JSON (NUL-terminated) into buf. Returns the length, or
 * SKY_ERANGE (buf too small), SKY_EINVAL (c itself fails validation: the
 * encoder refuses to send what a decoder would refuse), SKY_ENOMEM (JSON
 * pool). */
int sky_caps_encode(const sky_caps *c, char *buf, size_t cap, sky_diag *d);

/* Parses and validates len bytes of JSON into *c. Refuses (before parsing)
 * more than SKY_CAPS_MAX_BYTES. Returns 0, or SKY_EFORMAT (not JSON, missing
 * or mistyped field), SKY_ERANGE (a number out of range: negative, NaN,
 * absurd) with d naming the field. */
int sky_caps_decode(const char *buf, size_t len, sky_caps *c, sky_diag *d);

/* Checks every field of c against the ranges above. Returns 0 or
 * SKY_ERANGE / SKY_EINVAL with d naming the field. */
int sky_caps_validate(const sky_caps *c, sky_diag *d);

/* 1 if two shapes are the same probe key (name and every dimension). */
int sky_caps_shape_eq(const sky_caps_shape *a, const sky_caps_shape *b);

/* ---- liveness ---------------------------------------------------------------
 * Status (retained, and the board's last will) and heartbeats carry the
 * session number, so the planner can tell a late will from an old session
 * (ignored) from the will of the current one (the board is gone):
 *   sky/v1/board/<id>/status     {"state":"online","boot":"9f..","session":5,"keepalive_s":2}
 *                                {"state":"offline","boot":"9f..","session":5}
 *   sky/v1/board/<id>/heartbeat  {"state":"online","boot":"9f..","session":5,"keepalive_s":2,
 *                                 "seq":17}
 * ("boot" is left out when empty.)
 */
typedef struct sky_status {
	int online;        /* 1 online, 0 offline */
	char boot[SKY_BOOT_ID_MAX + 1];
	int64_t session;
	int keepalive_s;   /* 0 when absent (offline) */
	int64_t seq;       /* heartbeat counter, 0 in status messages */
} sky_status;

/* Writes s as JSON. Returns the length or SKY_ERANGE. */
int sky_status_encode(const sky_status *s, char *buf, size_t cap);
/* Parses a status or heartbeat (at most SKY_STATUS_MAX_BYTES). Returns 0 or
 * SKY_ERANGE / SKY_EFORMAT with d naming the field. */
int sky_status_decode(const char *buf, size_t len, sky_status *s, sky_diag *d);

#endif
