/* Enrollment messages between a new board and the planner's CA, and the
 * board-id rule both sides apply.
 *
 * The board, connected with the claim identity (CN "sky-claim", which the
 * broker ACL lets do nothing else), publishes a request on
 * sky/v1/enroll/<nonce>/csr and waits on sky/v1/enroll/<nonce>/cert
 * (<nonce>: 16+ random [0-9a-f] characters chosen by the board).
 *
 * Request (board -> planner), at most SKY_ENROLL_REQ_MAX bytes:
 *   {"v":1,"id":"<board id>","token":"<32 hex>","csr":"<PEM CSR>"}
 * Reply (planner -> board), at most SKY_ENROLL_REPLY_MAX bytes, success:
 *   {"v":1,"id":"<board id>","cert":"<PEM>","ca":"<PEM>","planner":"<PEM>"}
 * or refusal:
 *   {"v":1,"id":"<board id, or empty if unreadable>","error":"<why>"}
 *
 * Decoders refuse oversize input before parsing, unknown versions, missing
 * or wrong-typed members, a CSR over SKY_ENROLL_CSR_MAX bytes, and ids or
 * tokens that break their rules. Strings are copied into fixed buffers in
 * the structs, so nothing is allocated per message beyond the sky_json
 * pool. */
#ifndef SKY_ENROLL_H
#define SKY_ENROLL_H

#include "sky_err.h"

#include <stddef.h>

#define SKY_ENROLL_VERSION 1
/* Board ids are certificate CNs and topic segments: 1..64 characters. */
#define SKY_ENROLL_ID_MAX 64
/* Claim tokens: 32 lowercase hex characters (128 random bits). */
#define SKY_ENROLL_TOKEN_LEN 32
/* A P-256 CSR in PEM is ~0.5 KiB; anything over 4 KiB is refused before
 * Mbed TLS parses it. */
#define SKY_ENROLL_CSR_MAX 4096
/* One certificate in PEM (a P-256 cert is ~0.7 KiB). */
#define SKY_ENROLL_PEM_MAX 4096
#define SKY_ENROLL_ERROR_MAX 200
#define SKY_ENROLL_REQ_MAX (8u << 10)
#define SKY_ENROLL_REPLY_MAX (16u << 10)

/* Fixed identities of the fleet (certificate CNs); no board may take them,
 * nor any id starting with SKY_ENROLL_RESERVED_PREFIX (operators are
 * "sky-op-<name>"). */
#define SKY_ENROLL_PLANNER_CN "sky-planner"
#define SKY_ENROLL_CLAIM_CN "sky-claim"
#define SKY_ENROLL_RESERVED_PREFIX "sky-"

/* The board-id rule: 1..SKY_ENROLL_ID_MAX characters of [A-Za-z0-9_-]; no
 * '#', '+', '/' (MQTT wildcards and level separator: a pattern ACL with %u
 * would be bypassed), no '.', no spaces or control characters, and
 * nothing starting with "sky-" (the fleet's own identities above). Returns
 * 0 or SKY_EINVAL with d naming the offending byte (in hex) and its
 * position, or the rule broken. */
int sky_enroll_check_id(const char *id, sky_diag *d);
/* Returns 0 if token is SKY_ENROLL_TOKEN_LEN characters of [0-9a-f], else
 * SKY_EINVAL with d set. */
int sky_enroll_check_token(const char *token, sky_diag *d);

typedef struct sky_enroll_req {
	char id[SKY_ENROLL_ID_MAX + 1];
	char token[SKY_ENROLL_TOKEN_LEN + 1];
	char csr[SKY_ENROLL_CSR_MAX + 1]; /* PEM, NUL-terminated */
	size_t csr_len;                   /* strlen(csr) */
} sky_enroll_req;

typedef struct sky_enroll_reply {
	char id[SKY_ENROLL_ID_MAX + 1];    /* may be empty in a refusal */
	char error[SKY_ENROLL_ERROR_MAX + 1]; /* non-empty: a refusal */
	char cert[SKY_ENROLL_PEM_MAX + 1];
	char ca[SKY_ENROLL_PEM_MAX + 1];
	char planner[SKY_ENROLL_PEM_MAX + 1];
} sky_enroll_reply;

/* Writes the request JSON (NUL-terminated) into out. Returns its length
 * or SKY_EINVAL (bad id/token/empty CSR) / SKY_ERANGE / SKY_ENOMEM. */
int sky_enroll_req_encode(const sky_enroll_req *r, char *out, size_t cap, sky_diag *d);
/* Parses msg[0..len) into r. Returns 0 or SKY_ERANGE (over
 * SKY_ENROLL_REQ_MAX, or a CSR over SKY_ENROLL_CSR_MAX) / SKY_EFORMAT /
 * SKY_EINVAL (bad id or token), with d naming the member. */
int sky_enroll_req_decode(const char *msg, size_t len, sky_enroll_req *r, sky_diag *d);

/* Writes the reply JSON: a refusal if r->error is non-empty (then cert,
 * ca and planner are left out), else all three PEMs. Returns the length or
 * SKY_EINVAL / SKY_ERANGE / SKY_ENOMEM. */
int sky_enroll_reply_encode(const sky_enroll_reply *r, char *out, size_t cap, sky_diag *d);
/* Parses a reply. A well-formed refusal returns 0 with r->error set (the
 * caller decides); otherwise all three PEMs are required. Returns 0 or
 * SKY_ERANGE / SKY_EFORMAT. */
int sky_enroll_reply_decode(const char *msg, size_t len, sky_enroll_reply *r, sky_diag *d);

#endif
