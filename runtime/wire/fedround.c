/* A federated round at its aggregator (sky_fedround.h). */
#include "sky_fedround.h"

#include "sky_fedsum.h"
#include "sky_topics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_refuse[SKY_FEDR_N] = {
	[SKY_FEDR_NOT_OWNER] = "fed_not_owner", [SKY_FEDR_NOT_SAMPLED] = "fed_not_sampled",
	[SKY_FEDR_ROUND] = "fed_wrong_round",	[SKY_FEDR_SHAPE] = "fed_wrong_shape",
	[SKY_FEDR_REPLAY] = "fed_replay",	[SKY_FEDR_CLOSED] = "fed_round_closed",
	[SKY_FEDR_MODE] = "fed_wrong_mode",	[SKY_FEDR_VALUE] = "fed_bad_value",
};

const char *sky_fedround_refuse_name(sky_fed_refuse why)
{
	return (unsigned)why < SKY_FEDR_N ? k_refuse[why] : "fed_unknown";
}

int sky_fedround_open(sky_fedround *r, const sky_fedround_cfg *c, double now, sky_diag *d)
{
	memset(r, 0, sizeof *r);
	if (!sky_topic_segment_ok(c->job))
		return sky_diag_set(d, SKY_EINVAL, "job id '%s' is not a topic segment", c->job);
	if (c->nown < 1 || c->nown > SKY_FED_MAX_OWNERS)
		return sky_diag_set(d, SKY_EINVAL, "%d owners: a job has 1 to %d", c->nown,
				    SKY_FED_MAX_OWNERS);
	if (c->words == 0 || c->words > ((uint64_t)1 << 35))
		return sky_diag_set(d, SKY_EINVAL, "a model of %llu elements", (unsigned long long)c->words);
	uint64_t total = 0;
	int sampled = 0;
	for (int k = 0; k < c->nown; k++) {
		if (!sky_topic_segment_ok(c->owner[k]))
			return sky_diag_set(d, SKY_EINVAL, "owner %d's id '%s' is not a board id", k,
					    c->owner[k]);
		for (int j = 0; j < k; j++)
			if (strcmp(c->owner[j], c->owner[k]) == 0)
				return sky_diag_set(d, SKY_EINVAL, "owner %s is named twice", c->owner[k]);
		if (c->weight[k] == 0 || c->weight[k] > SKY_FX_MAX_WEIGHT)
			return sky_diag_set(d, SKY_EINVAL, "owner %s weighs %u samples, not in [1, %u]",
					    c->owner[k], c->weight[k], SKY_FX_MAX_WEIGHT);
		total += c->weight[k];
		sampled += c->sampled[k] != 0;
	}
	if (sampled == 0)
		return sky_diag_set(d, SKY_EINVAL, "round %llu samples no owner",
				    (unsigned long long)c->round);
	if (c->min_owners < 1 || c->min_owners > sampled)
		return sky_diag_set(d, SKY_EINVAL, "min_owners %d is not in [1, %d] (the owners sampled)",
				    c->min_owners, sampled);
	if (!(c->deadline_s >= 0.0 && isfinite(c->deadline_s)))
		return sky_diag_set(d, SKY_EINVAL, "deadline %g s", c->deadline_s);
	int rc = sky_fx_bits(c->clip, total, &r->bits, d);
	if (rc)
		return rc;
	r->c = *c;
	r->opened = now;
	r->nchunks = (c->words + SKY_FED_CHUNK_WORDS - 1) / SKY_FED_CHUNK_WORDS;
	r->n_sampled = sampled;
	for (int k = 0; k < c->nown; k++)
		r->state[k] = c->sampled[k] ? SKY_FEDO_WAITING : SKY_FEDO_NOT_SAMPLED;
	r->sum = calloc((size_t)c->words, sizeof *r->sum);
	if (!r->sum)
		return sky_diag_set(d, SKY_ENOMEM, "no memory for the sum of %llu elements",
				    (unsigned long long)c->words);
	return 0;
}

int sky_fed_id_find(const char (*ids)[SKY_FED_ID_CAP], int n, const char *id)
{
	for (int i = 0; i < n; i++)
		if (strcmp(ids[i], id) == 0)
			return i;
	return -1;
}

/* Counts a refusal by its kind, says why in d, and returns the kind + 1. */
#define REFUSE(why, ...) (r->refused[why]++, sky_diag_set(d, SKY_EINVAL, __VA_ARGS__), (int)(why) + 1)

/* The checks every chunk passes before its payload is read; *who is the
 * sender's owner index. */
static int admit(sky_fedround *r, const char *sender, uint64_t round, uint64_t chunk, size_t nw,
		 int secure, int *who, sky_diag *d)
{
	int k = sky_fed_id_find(r->c.owner, r->c.nown, sender);
	if (k < 0)
		return REFUSE(SKY_FEDR_NOT_OWNER, "%s is not an owner of job %s", sender, r->c.job);
	if (round != r->c.round)
		return REFUSE(SKY_FEDR_ROUND, "%s sent round %llu; this is round %llu", sender,
			      (unsigned long long)round, (unsigned long long)r->c.round);
	if (r->closed || r->failed)
		return REFUSE(SKY_FEDR_CLOSED, "%s: round %llu is closed", sender,
			      (unsigned long long)round);
	if (r->state[k] == SKY_FEDO_NOT_SAMPLED)
		return REFUSE(SKY_FEDR_NOT_SAMPLED, "%s is not sampled in round %llu", sender,
			      (unsigned long long)round);
	if (secure != r->c.secure)
		return REFUSE(SKY_FEDR_MODE, "%s sent %s words to a %s round", sender,
			      secure ? "masked" : "plain", r->c.secure ? "secure" : "plain");
	const uint64_t want = chunk + 1 < r->nchunks ? SKY_FED_CHUNK_WORDS
						     : r->c.words - (r->nchunks - 1) * SKY_FED_CHUNK_WORDS;
	if (chunk >= r->nchunks || nw != want)
		return REFUSE(SKY_FEDR_SHAPE,
			      "%s sent chunk %llu of %zu elements; the model has %llu chunks, this one of %llu",
			      sender, (unsigned long long)chunk, nw, (unsigned long long)r->nchunks,
			      (unsigned long long)(chunk < r->nchunks ? want : 0));
	if (r->state[k] == SKY_FEDO_IN || (r->seen[k] && (r->seen[k][chunk / 8] >> (chunk % 8)) & 1))
		return REFUSE(SKY_FEDR_REPLAY, "%s sent chunk %llu of round %llu again", sender,
			      (unsigned long long)chunk, (unsigned long long)round);
	if (!r->stage[k]) {
		r->stage[k] = malloc((size_t)r->c.words * sizeof *r->stage[k]);
		r->seen[k] = calloc((size_t)(r->nchunks + 7) / 8, 1);
		if (r->c.nown == 1 && !r->c.secure && !r->solo)
			r->solo = malloc((size_t)r->c.words * sizeof *r->solo);
		if (!r->stage[k] || !r->seen[k] || (r->c.nown == 1 && !r->c.secure && !r->solo))
			return sky_diag_set(d, SKY_ENOMEM, "no memory to stage %s's update", sender);
		r->state[k] = SKY_FEDO_SENDING;
	}
	*who = k;
	return 0;
}

/* Chunk `chunk` of owner k is staged: mark it, and move the owner's whole
 * update into the sum when it is complete. */
static void staged(sky_fedround *r, int k, uint64_t chunk)
{
	r->seen[k][chunk / 8] |= (unsigned char)(1u << (chunk % 8));
	if (++r->got[k] < r->nchunks)
		return;
	sky_fx_add(r->sum, r->stage[k], (size_t)r->c.words);
	free(r->stage[k]);
	r->stage[k] = NULL;
	r->state[k] = SKY_FEDO_IN;
	r->n_in++;
	r->weight_in += r->c.weight[k];
}

int sky_fedround_on_plain(sky_fedround *r, const char *sender, uint64_t round, uint64_t chunk,
			  const float *x, size_t nw, sky_diag *d)
{
	int k, rc = admit(r, sender, round, chunk, nw, 0, &k, d);
	if (rc)
		return rc;
	const uint64_t at = chunk * SKY_FED_CHUNK_WORDS;
	rc = sky_fx_encode(x, nw, r->c.weight[k], r->c.clip, r->bits, r->stage[k] + at, NULL, d);
	if (rc) /* a NaN or infinity (d names it): the chunk is not taken */
		return r->refused[SKY_FEDR_VALUE]++, (int)SKY_FEDR_VALUE + 1;
	if (r->solo)
		memcpy(r->solo + at, x, nw * sizeof *x);
	staged(r, k, chunk);
	return 0;
}

int sky_fedround_on_masked(sky_fedround *r, const char *sender, uint64_t round, uint64_t chunk,
			   const uint64_t *w, size_t nw, sky_diag *d)
{
	int k, rc = admit(r, sender, round, chunk, nw, 1, &k, d);
	if (rc)
		return rc;
	memcpy(r->stage[k] + chunk * SKY_FED_CHUNK_WORDS, w, nw * sizeof *w);
	staged(r, k, chunk);
	return 0;
}

static void close_round(sky_fedround *r)
{
	r->closed = 1;
	for (int k = 0; k < r->c.nown; k++) {
		if (r->state[k] == SKY_FEDO_WAITING || r->state[k] == SKY_FEDO_SENDING)
			r->state[k] = SKY_FEDO_LATE;
		free(r->stage[k]); /* a late owner's partial update never reaches the sum */
		r->stage[k] = NULL;
	}
}

int sky_fedround_tick(sky_fedround *r, double now, sky_diag *d)
{
	if (r->failed)
		return sky_diag_set(d, SKY_ETIMEOUT, "round %llu failed", (unsigned long long)r->c.round);
	if (r->closed)
		return 1;
	if (r->n_in == r->n_sampled) {
		close_round(r);
		return 1;
	}
	if (r->c.deadline_s <= 0.0 || now - r->opened < r->c.deadline_s || r->c.policy == SKY_FED_WAIT)
		return 0;
	if (r->n_in >= r->c.min_owners) {
		close_round(r);
		return 1;
	}
	r->failed = 1;
	for (int k = 0; k < r->c.nown; k++) {
		free(r->stage[k]);
		r->stage[k] = NULL;
	}
	return sky_diag_set(d, SKY_ETIMEOUT,
			    "round %llu: %d of %d sampled owners in at the deadline (%.0f s), %d needed",
			    (unsigned long long)r->c.round, r->n_in, r->n_sampled, r->c.deadline_s,
			    r->c.min_owners);
}

int sky_fedround_mean(const sky_fedround *r, float *out, sky_diag *d)
{
	if (!r->closed || r->failed || r->n_in == 0)
		return sky_diag_set(d, SKY_EINVAL, "round %llu has no sum yet",
				    (unsigned long long)r->c.round);
	if (r->c.secure)
		return sky_diag_set(d, SKY_EINVAL, "a secure round's sum is unmasked first");
	if (r->solo) { /* one owner in the job: its weights as they are */
		memcpy(out, r->solo, (size_t)r->c.words * sizeof *out);
		return 0;
	}
	return sky_fx_decode(r->sum, (size_t)r->c.words, r->weight_in, r->bits, out, d);
}

void sky_fedround_free(sky_fedround *r)
{
	free(r->sum);
	free(r->solo);
	for (int k = 0; k < SKY_FED_MAX_OWNERS; k++) {
		free(r->stage[k]);
		free(r->seen[k]);
	}
	memset(r, 0, sizeof *r);
}
