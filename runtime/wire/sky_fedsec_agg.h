/* The aggregator's side of a secure federated round (docs/federation.md,
 * "Secure aggregation in the round loop"), without a broker: the shares
 * phase, the relay, the reveal and the unmasking of the sum.
 *
 * The round's sampled owners are its members (indices 0..n). Phases:
 *   SHARES   each member sends its commitment and its sealed shares
 *            (sky_fedsec_agg_on_shares); sky_fedsec_agg_close_shares fixes
 *            U1 (those whose shares are in) when all are in or at the
 *            caller's deadline, and needs at least t of them;
 *   MASKED   the caller relays (sky_fedsec_agg_relay) and collects the
 *            masked updates in its sky_fedround, whose owners are U1;
 *   REVEAL   sky_fedsec_agg_begin_reveal names U2 (the members whose
 *            update is in) and the dropped U1 \ U2; each survivor answers
 *            (sky_fedsec_agg_on_open);
 *   DONE     sky_fedsec_agg_unmask rebuilds each survivor's self-mask seed
 *            from t shares, checks it against its commitment, and removes
 *            the self masks and the dropped owners' pair masks from the sum.
 * Threshold: t = floor(n / 2) + 1, at least 2 (a majority of the sampled
 * owners), fixed when the round opens since the owners split their seeds
 * before U1 is known; fewer than t in U1, or fewer than t survivors that
 * reveal, fail the round (the job redoes it).
 *
 * A message is refused, counted by reason (sky_fedsec_refuse) and changes
 * nothing when its sender (the topic's CN) is not an owner of the job, is
 * not sampled, names another round, comes in the wrong phase, repeats, is
 * malformed, or (open) names owners the request did not ask for.
 *
 * Memory: one malloc'd struct of ~0.6 MB per round. One thread. */
#ifndef SKY_FEDSEC_AGG_H
#define SKY_FEDSEC_AGG_H

#include "sky_err.h"
#include "sky_fedsecmsg.h"

typedef enum sky_fedsec_refuse {
	SKY_FEDS_NOT_OWNER = 0, /* the sender is no owner of the job */
	SKY_FEDS_NOT_SAMPLED,	/* an owner this round does not sample */
	SKY_FEDS_ROUND,		/* another round's or job's */
	SKY_FEDS_PHASE,		/* shares after U1 closed, an open before the reveal */
	SKY_FEDS_REPLAY,	/* sent before */
	SKY_FEDS_FORMAT,	/* not a message, or not what its phase holds */
	SKY_FEDS_FORGED,	/* shares that rebuild a seed its commitment refuses */
	SKY_FEDS_N
} sky_fedsec_refuse;

typedef enum sky_fedsec_state {
	SKY_FEDSEC_S_SHARES = 0,
	SKY_FEDSEC_S_MASKED,
	SKY_FEDSEC_S_REVEAL,
	SKY_FEDSEC_S_DONE,
	SKY_FEDSEC_S_FAILED,
} sky_fedsec_state;

typedef struct sky_fedsec_agg {
	char job[SKY_FED_ID_CAP];
	uint64_t round;
	int nown; /* the job's owners (a share from another board is not_owner) */
	char owner[SKY_FED_MAX_OWNERS][SKY_FED_ID_CAP];
	int n, t; /* members (sampled owners), threshold */
	char id[SKY_FED_MAX_OWNERS][SKY_FED_ID_CAP];
	sky_fedsec_state state;
	unsigned char in_u1[SKY_FED_MAX_OWNERS], in_u2[SKY_FED_MAX_OWNERS];
	unsigned char opened[SKY_FED_MAX_OWNERS]; /* answered the reveal */
	unsigned char commit[SKY_FED_MAX_OWNERS][32];
	/* blob[from][to]: the share `from` sealed for `to` */
	unsigned char blob[SKY_FED_MAX_OWNERS][SKY_FED_MAX_OWNERS][SKY_SECAGG_SHARE_BLOB_BYTES];
	/* share[of][by]: by's share of of's seed, from by's open */
	sky_shamir_share share[SKY_FED_MAX_OWNERS][SKY_FED_MAX_OWNERS];
	unsigned char has_share[SKY_FED_MAX_OWNERS][SKY_FED_MAX_OWNERS];
	/* seed[survivor][dropped]: the pair mask seed survivor revealed */
	unsigned char seed[SKY_FED_MAX_OWNERS][SKY_FED_MAX_OWNERS][SKY_SECAGG_SEED_BYTES];
	int n_u1, n_u2, n_opened;
	long refused[SKY_FEDS_N];
} sky_fedsec_agg;

const char *sky_fedsec_refuse_name(sky_fedsec_refuse why);
/* The state as a refusal names it: shares, masking, reveal, closed (done
 * or failed). */
const char *sky_fedsec_state_name(sky_fedsec_state s);
/* The threshold of a round of n sampled owners: floor(n/2) + 1, >= 2. */
int sky_fedsec_threshold(int n);

/* Opens the round for the job's nown owners, of which sampled[i] are this
 * round's members. Returns 0 or SKY_EINVAL (fewer than 2 sampled, an id
 * not a topic segment). */
int sky_fedsec_agg_open(sky_fedsec_agg *a, const char *job, uint64_t round, int nown,
			const char (*owner)[SKY_FED_ID_CAP], const unsigned char *sampled,
			sky_diag *d);
/* The index of member id, or -1. */
int sky_fedsec_agg_member(const sky_fedsec_agg *a, const char *id);

/* A "shares" message from sender. It must hold one share for every other
 * member (and none for itself or for a non-member). Returns 0 when taken,
 * or the refusal's kind + 1 (counted, the reason in d). */
int sky_fedsec_agg_on_shares(sky_fedsec_agg *a, const char *sender, const sky_fedsec_msg *m,
			     sky_diag *d);
/* 1 when every member's shares are in. */
int sky_fedsec_agg_shares_complete(const sky_fedsec_agg *a);
/* Fixes U1 and moves to MASKED. Returns 0, or SKY_ETIMEOUT (fewer than t
 * members' shares in: the round fails, d says how many). */
int sky_fedsec_agg_close_shares(sky_fedsec_agg *a, sky_diag *d);
/* The relay message for member k of U1 into m (the shares the other U1
 * members sealed for it, and U1). Returns 0 or SKY_EINVAL. */
int sky_fedsec_agg_relay(const sky_fedsec_agg *a, int k, sky_fedsec_msg *m);

/* Moves to REVEAL with in[k] != 0 for each member whose update is in (U2;
 * in[k] of a member outside U1 is ignored). Returns 0, or SKY_ETIMEOUT
 * when fewer than t survive (the round fails). */
int sky_fedsec_agg_begin_reveal(sky_fedsec_agg *a, const unsigned char *in, sky_diag *d);
/* The reveal request for survivor k into m. Returns 0 or SKY_EINVAL. */
int sky_fedsec_agg_reveal(const sky_fedsec_agg *a, int k, sky_fedsec_msg *m);
/* An "open" message from sender: a survivor, with a share of every
 * survivor's seed and its pair seed with every dropped owner, nothing else.
 * Returns 0 or the refusal's kind + 1. */
int sky_fedsec_agg_on_open(sky_fedsec_agg *a, const char *sender, const sky_fedsec_msg *m,
			   sky_diag *d);
/* 1 when unmasking can run: every survivor answered, or (no owner dropped)
 * at least t did and `deadline` is set. */
int sky_fedsec_agg_ready(const sky_fedsec_agg *a, int deadline);
/* Unmasks sum[0..words) (the modular sum of U2's masked updates) in place.
 * Returns 0, or SKY_EAUTH (a survivor's seed could not be rebuilt to match
 * its commitment from any t of the shares in: counted as forged, the round
 * fails), SKY_ETIMEOUT (fewer than t shares of some seed), SKY_ENOMEM. */
int sky_fedsec_agg_unmask(sky_fedsec_agg *a, uint64_t *sum, uint64_t words, sky_diag *d);

#endif
