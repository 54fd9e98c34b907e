/* The messages of a secure federated round (docs/federation.md, "Secure
 * aggregation in the round loop"), all JSON:
 *
 *   sky/v1/job/<job>/fedshr/<owner>  owner -> planner; <owner> is the
 *                                    sender's CN (ACL %u), only the planner
 *                                    reads it:
 *     phase "shares": the owner's commitment to its self-mask seed and one
 *       sealed Shamir share of it per other sampled owner ("items": id =
 *       the recipient, blob = the sealed share, SKY_SECAGG_SHARE_BLOB_BYTES)
 *     phase "open": its answer to a reveal request: for each survivor j,
 *       its share of b_j ("items": id = j, blob = x then the 32 share
 *       bytes), and for each dropped owner k its pair mask seed with k
 *       ("seeds": id = k, blob = the 32-byte seed)
 *   sky/v1/job/<job>/fedrelay/<owner> planner -> owner, a signed envelope
 *                                    (sky_sign.h); only <owner> reads it:
 *     phase "relay": the shares addressed to <owner> ("items": id = the
 *       sender) and U1, the owners whose shares are in ("u1")
 *     phase "reveal": the survivors U2 ("u2") and the dropped U1 \ U2
 *       ("dropped")
 *
 * Every message names its job, round, phase and (relay, reveal) its
 * recipient "to"; binary fields are lower-case hex. The sender of a fedshr
 * message is the topic's CN level, never a payload field. */
#ifndef SKY_FEDSECMSG_H
#define SKY_FEDSECMSG_H

#include "sky_err.h"
#include "sky_fedround.h"
#include "sky_secagg.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_FEDSEC_MAX_BYTES (40u << 10) /* fits a signed envelope (sky_sign.h) */
#define SKY_FEDSEC_BLOB_MAX SKY_SECAGG_SHARE_BLOB_BYTES

typedef enum sky_fedsec_phase {
	SKY_FEDSEC_SHARES = 1,
	SKY_FEDSEC_RELAY,
	SKY_FEDSEC_REVEAL,
	SKY_FEDSEC_OPEN,
} sky_fedsec_phase;

typedef struct sky_fedsec_item {
	char id[SKY_FED_ID_CAP];
	uint32_t len; /* bytes of b */
	unsigned char b[SKY_FEDSEC_BLOB_MAX];
} sky_fedsec_item;

typedef struct sky_fedsec_msg {
	char job[SKY_FED_ID_CAP];
	uint64_t round;
	sky_fedsec_phase phase;
	char to[SKY_FED_ID_CAP];   /* relay, reveal */
	unsigned char commit[32]; /* shares */
	int nitems, nseeds, nu1, nu2, ndropped;
	sky_fedsec_item items[SKY_FED_MAX_OWNERS];
	sky_fedsec_item seeds[SKY_FED_MAX_OWNERS];
	char u1[SKY_FED_MAX_OWNERS][SKY_FED_ID_CAP];
	char u2[SKY_FED_MAX_OWNERS][SKY_FED_ID_CAP];
	char dropped[SKY_FED_MAX_OWNERS][SKY_FED_ID_CAP];
} sky_fedsec_msg;

const char *sky_fedsec_phase_name(sky_fedsec_phase p);

/* Writes m as JSON into buf. Returns its length, SKY_EINVAL (an id that is
 * not a topic segment, a blob of the wrong size for its phase) or
 * SKY_ERANGE (cap). */
int sky_fedsec_msg_encode(const sky_fedsec_msg *m, char *buf, size_t cap);
/* Parses one message: every field checked (ids legal and not repeated
 * within a list, blobs of the size their phase needs, at most
 * SKY_FED_MAX_OWNERS of each). Returns 0 or SKY_EFORMAT / SKY_ERANGE with
 * d naming the field. */
int sky_fedsec_msg_decode(const char *buf, size_t len, sky_fedsec_msg *m, sky_diag *d);

#endif
