/* Inference requests and responses (serving a job; sky_topics.h):
 *
 *   sky/v1/job/<job>/req/<client CN>   client -> first stage (and the planner)
 *     {"v":1,"id":"r17","tokens":[101,2023,102],"mask":[1,1,1]}
 *   sky/v1/job/<job>/resp/<client CN>  last stage, first stage or planner -> client
 *     {"v":1,"id":"r17","ok":true,"job":"j1","epoch":7,"logits":[0.125,-1.5]}
 *     {"v":1,"id":"r17","ok":false,"job":"j1","code":"bad_token",
 *      "error":"token 7 is 40000, the vocabulary has 30522"}
 *
 * id: 1..64 characters of [A-Za-z0-9_.-], the client's, echoed back.
 * tokens: 1..seq token ids (the plan's model seq); the first stage pads a
 * shorter request with id 0, mask 0. mask: optional, as long as tokens,
 * each 0 or 1 (default all 1). A request is at most SKY_INFER_REQ_MAX_BYTES.
 * Logits are float32 values printed with "%.9g", which reads back as the
 * same float (9 significant digits round-trip any binary32). */
#ifndef SKY_INFERMSG_H
#define SKY_INFERMSG_H

#include "sky_err.h"
#include "sky_topics.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_INFER_VERSION 1
#define SKY_INFER_ID_MAX 64
#define SKY_INFER_MAX_CLASSES 1024
#define SKY_INFER_ERROR_MAX 200

/* Why a request was refused; the names are the "code" strings. */
typedef enum {
	SKY_INFER_OK = 0,
	SKY_INFER_OVERSIZE,     /* "oversize": above SKY_INFER_REQ_MAX_BYTES (id "" if unreadable) */
	SKY_INFER_MALFORMED,    /* "malformed": not JSON, wrong types, bad id, missing field */
	SKY_INFER_WRONG_LENGTH, /* "wrong_length": 0 or more than seq tokens, mask length differs */
	SKY_INFER_BAD_TOKEN,    /* "bad_token": an id < 0 or >= vocab */
	SKY_INFER_BAD_MASK,     /* "bad_mask": a mask value not 0 or 1 */
	SKY_INFER_UNKNOWN_JOB,  /* "unknown_job": no such job or not serving (the planner says it) */
	SKY_INFER_NOT_ALLOWED,  /* "not_allowed": the client is not in the job's client list */
	SKY_INFER_BUSY,         /* "busy": the first stage's queue is full */
	SKY_INFER_NCODES
} sky_infer_code;

/* The code's name ("bad_token"), "ok" for SKY_INFER_OK, "?" out of range. */
const char *sky_infer_code_name(int code);
/* The code of a name, or -1. */
int sky_infer_code_parse(const char *name);

/* 1 if id is 1..64 characters of [A-Za-z0-9_.-], else 0. */
int sky_infer_id_ok(const char *id);

/* A request. tokens and mask point at the caller's buffers of cap entries
 * (cap >= the plan's seq), so decoding allocates nothing of its own (the
 * JSON goes through the bounded pool, sky_json.h). */
typedef struct sky_infer_req {
	char id[SKY_INFER_ID_MAX + 1];
	int n;          /* tokens given: 1..seq */
	int32_t *tokens; /* (cap) */
	int32_t *mask;   /* (cap) 1 real token, 0 padding */
	int cap;
	int has_mask;   /* encode: write "mask" (decode sets it if present) */
} sky_infer_req;

/* Decodes and validates a request for a model of seq tokens and vocab ids.
 * Returns 0 (r->n tokens and mask filled, *code SKY_INFER_OK) or a negative
 * SKY_E* with *code the contract's code and d the sentence a client reads
 * ("token 7 is 40000, the vocabulary has 30522"); r->id holds the id when
 * it could be read (else ""), so the refusal can be answered to it.
 * SKY_EINVAL for seq or vocab < 1, or r->cap < seq (*code MALFORMED). */
int sky_infer_req_decode(const char *buf, size_t len, int seq, int vocab, sky_infer_req *r,
			 int *code, sky_diag *d);
/* Writes r (id, n tokens, mask when has_mask) as request JSON. Returns the
 * length, SKY_EINVAL (a bad id, n < 1) or SKY_ERANGE (does not fit). */
int sky_infer_req_encode(const sky_infer_req *r, char *buf, size_t cap, sky_diag *d);

/* A response. */
typedef struct sky_infer_resp {
	char id[SKY_INFER_ID_MAX + 1]; /* may be "" (an unreadable request) */
	int ok;
	char job[SKY_TOPIC_SEGMENT_MAX + 1];
	int64_t epoch;                 /* ok: the plan epoch that computed it */
	int code;                      /* !ok: SKY_INFER_* */
	char error[SKY_INFER_ERROR_MAX];
	int n_logits;                  /* ok: classes */
	float logits[SKY_INFER_MAX_CLASSES];
} sky_infer_resp;

/* Writes r as response JSON (logits with %.9g). Returns the length, or
 * SKY_EINVAL (bad id or job, a non-finite logit, n_logits out of range, an
 * unknown code) / SKY_ERANGE (cap too small). */
int sky_infer_resp_encode(const sky_infer_resp *r, char *buf, size_t cap, sky_diag *d);
/* Parses a response (at most SKY_INFER_RESP_MAX_BYTES). Returns 0 or
 * SKY_EFORMAT / SKY_ERANGE naming the field. */
int sky_infer_resp_decode(const char *buf, size_t len, sky_infer_resp *r, sky_diag *d);

/* Fills r as a refusal (ok 0, code, error from d's message or fmt). */
void sky_infer_resp_error(sky_infer_resp *r, const char *id, const char *job, int code,
			  const char *error);

/* Parses a serving stage's ready, {"epoch":E,"board":B} (at most
 * SKY_SERVE_READY_MAX_BYTES), the one parse both the first stage
 * (runtime/servejob.c) and skyplan (planner/servefault.c) use: epoch a
 * whole number in [0, 2^53 - 1]. "board" is informational: the sender is
 * the topic's CN level, which the caller has already checked. Returns 0,
 * or SKY_EFORMAT with d saying what is wrong. */
int sky_infer_ready_parse(const void *p, size_t len, int64_t *epoch, sky_diag *d);

#endif
