/* One round of a federated job at its aggregator: which owners' updates
 * are in, which were refused and why, when the round closes, and the sum.
 *
 * The aggregator (skyplan, or a site's aggregator for its owners) opens a
 * round with the owners the plan samples for it and their weights (sample
 * counts from their data sets' capability reports: never from an update's
 * payload). Each owner sends its update as chunks of SKY_FED_CHUNK_WORDS
 * elements, chunk c covering elements [c * SKY_FED_CHUNK_WORDS, ...):
 *   - plain: float32 weights; the aggregator encodes them in fixed point
 *     with the owner's weight (sky_fedsum.h);
 *   - secure: the owner's masked 64-bit words (sky_secagg.h); the sum is
 *     unmasked by the caller once the round closes.
 * A chunk is refused, counted by reason, and changes nothing, when its
 * sender (the topic's CN level) is not an owner of the job, or not one
 * sampled for this round, or its round is not this one, or its chunk
 * index or length is not one of the model's, or it was received before
 * (a replay), or the round has closed. An owner's chunks wait in its own
 * staging buffer and reach the sum only when all of them are in, so an
 * owner that stops half-way leaves the sum as if it never sent.
 *
 * The round closes when every sampled owner is in, or at the deadline:
 * with the `close` policy, if at least min_owners are in (the rest are
 * counted late); with `wait`, it keeps waiting for everyone (the job's
 * own timeout ends it). Below min_owners at the deadline the round fails
 * (SKY_ETIMEOUT), and the job redoes it.
 *
 * With one owner in the whole job, its weights are kept as they are and
 * are the round's mean (no fixed point), so a one-owner federated job is
 * ordinary fine-tuning, bit for bit.
 *
 * Memory: the sum (8 bytes an element) and one staging buffer per owner
 * while it sends, allocated at open and on an owner's first chunk, freed
 * by sky_fedround_free. Thread safety: one thread per round. */
#ifndef SKY_FEDROUND_H
#define SKY_FEDROUND_H

#include "sky_err.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_FED_MAX_OWNERS 64
#define SKY_FED_ID_CAP 64 /* an owner's board id, NUL included */
#define SKY_FED_CHUNK_WORDS 65536u

typedef enum sky_fed_policy {
	SKY_FED_WAIT = 0,
	SKY_FED_CLOSE,
} sky_fed_policy;

typedef enum sky_fed_refuse {
	SKY_FEDR_NOT_OWNER = 0, /* the sender is not an owner of the job */
	SKY_FEDR_NOT_SAMPLED,	/* an owner, not one this round samples */
	SKY_FEDR_ROUND,		/* another round's update */
	SKY_FEDR_SHAPE,		/* a chunk index or length the model does not have */
	SKY_FEDR_REPLAY,	/* a chunk received before */
	SKY_FEDR_CLOSED,	/* after the round closed */
	SKY_FEDR_MODE,		/* plain words in a secure round, or the reverse */
	SKY_FEDR_VALUE,		/* a NaN or infinity in a plain update */
	SKY_FEDR_N
} sky_fed_refuse;

typedef enum sky_fed_owner_state {
	SKY_FEDO_NOT_SAMPLED = 0,
	SKY_FEDO_WAITING,
	SKY_FEDO_SENDING,
	SKY_FEDO_IN,
	SKY_FEDO_LATE, /* not in when the round closed */
} sky_fed_owner_state;

typedef struct sky_fedround_cfg {
	char job[SKY_FED_ID_CAP];
	uint64_t round;
	uint64_t words; /* the model's elements */
	int nown;	/* the job's owners */
	char owner[SKY_FED_MAX_OWNERS][SKY_FED_ID_CAP];
	uint32_t weight[SKY_FED_MAX_OWNERS]; /* sample counts */
	unsigned char sampled[SKY_FED_MAX_OWNERS]; /* 1: in this round */
	int secure;
	float clip; /* plain: each element clipped to +-clip before encoding */
	double deadline_s; /* after open; 0: none */
	sky_fed_policy policy;
	int min_owners;
} sky_fedround_cfg;

typedef struct sky_fedround {
	sky_fedround_cfg c;
	double opened;
	int bits;		/* fixed-point fraction bits (plain) */
	uint64_t nchunks;
	uint64_t *sum;		/* c.words */
	uint64_t *stage[SKY_FED_MAX_OWNERS];
	float *solo;		/* one-owner job: the owner's weights as sent */
	unsigned char *seen[SKY_FED_MAX_OWNERS]; /* a bit per chunk */
	uint64_t got[SKY_FED_MAX_OWNERS];	 /* chunks in */
	sky_fed_owner_state state[SKY_FED_MAX_OWNERS];
	int n_sampled, n_in, closed, failed;
	uint64_t weight_in; /* the sum of the weights of the owners in */
	long refused[SKY_FEDR_N];
} sky_fedround;

const char *sky_fedround_refuse_name(sky_fed_refuse why);
/* The index of id among ids[0..n-1] (owners, members), or -1. */
int sky_fed_id_find(const char (*ids)[SKY_FED_ID_CAP], int n, const char *id);

/* Opens round c->round at time now (seconds). Checks the configuration
 * (owners 1..SKY_FED_MAX_OWNERS, unique legal ids, weights in [1,
 * SKY_FX_MAX_WEIGHT], at least one sampled, min_owners in [1, sampled],
 * words in [1, 2^35]) and allocates the sum. Returns 0, SKY_EINVAL naming
 * the field, SKY_ERANGE (clip and weights leave too few bits) or
 * SKY_ENOMEM. */
int sky_fedround_open(sky_fedround *r, const sky_fedround_cfg *c, double now, sky_diag *d);

/* A plain chunk from sender: nw float32 elements (host order; the wire
 * codec converts). Returns 0 when taken, or the refusal's kind + 1 as a
 * positive number (counted in r->refused, the reason in d), or a negative
 * SKY_ENOMEM. */
int sky_fedround_on_plain(sky_fedround *r, const char *sender, uint64_t round, uint64_t chunk,
			  const float *x, size_t nw, sky_diag *d);

/* A secure chunk: nw masked 64-bit words. As sky_fedround_on_plain. */
int sky_fedround_on_masked(sky_fedround *r, const char *sender, uint64_t round, uint64_t chunk,
			   const uint64_t *w, size_t nw, sky_diag *d);

/* Closes the round if it is due at time now. Returns 1 when closed (now or
 * before), 0 while open, SKY_ETIMEOUT when it failed (below min_owners
 * at the deadline under `close`; d says how many were in). */
int sky_fedround_tick(sky_fedround *r, double now, sky_diag *d);

/* Plain rounds, once closed: the weighted mean of the owners in, into
 * out[0..words). Returns 0, SKY_EINVAL (not closed, failed, or secure:
 * unmask r->sum with sky_secagg_unmask, then sky_fx_decode it with
 * r->weight_in and r->bits). */
int sky_fedround_mean(const sky_fedround *r, float *out, sky_diag *d);

void sky_fedround_free(sky_fedround *r);

#endif
