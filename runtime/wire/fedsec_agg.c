/* The aggregator's side of a secure round; see sky_fedsec_agg.h. */
#include "sky_fedsec_agg.h"

#include "sky_topics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TRIES 4096 /* t-subsets tried per seed before it counts as forged */

static const char *const k_refuse[SKY_FEDS_N] = {
	[SKY_FEDS_NOT_OWNER] = "fed_share_not_owner", [SKY_FEDS_NOT_SAMPLED] = "fed_share_not_sampled",
	[SKY_FEDS_ROUND] = "fed_share_wrong_round",   [SKY_FEDS_PHASE] = "fed_share_wrong_phase",
	[SKY_FEDS_REPLAY] = "fed_share_replay",	      [SKY_FEDS_FORMAT] = "fed_share_malformed",
	[SKY_FEDS_FORGED] = "fed_share_forged",
};

const char *sky_fedsec_refuse_name(sky_fedsec_refuse why)
{
	return (unsigned)why < SKY_FEDS_N ? k_refuse[why] : "fed_share_unknown";
}

int sky_fedsec_threshold(int n)
{
	int t = n / 2 + 1;
	return t < 2 ? 2 : t;
}

int sky_fedsec_agg_open(sky_fedsec_agg *a, const char *job, uint64_t round, int nown,
			const char (*owner)[SKY_FED_ID_CAP], const unsigned char *sampled,
			sky_diag *d)
{
	memset(a, 0, sizeof *a);
	if (!sky_topic_segment_ok(job) || strlen(job) >= SKY_FED_ID_CAP)
		return sky_diag_set(d, SKY_EINVAL, "secure round: job id '%s'", job ? job : "");
	if (nown < 2 || nown > SKY_FED_MAX_OWNERS)
		return sky_diag_set(d, SKY_EINVAL, "secure round: %d owners (2 to %d)", nown,
				    SKY_FED_MAX_OWNERS);
	snprintf(a->job, sizeof a->job, "%s", job);
	a->round = round;
	a->nown = nown;
	for (int i = 0; i < nown; i++) {
		if (!sky_topic_segment_ok(owner[i]))
			return sky_diag_set(d, SKY_EINVAL, "secure round: owner '%s'", owner[i]);
		snprintf(a->owner[i], sizeof a->owner[i], "%s", owner[i]);
		if (sampled[i])
			snprintf(a->id[a->n++], sizeof a->id[0], "%s", owner[i]);
	}
	if (a->n < 2)
		return sky_diag_set(d, SKY_EINVAL,
				    "secure round: %d owner(s) sampled; masks need at least 2", a->n);
	a->t = sky_fedsec_threshold(a->n);
	a->state = SKY_FEDSEC_S_SHARES;
	return 0;
}

const char *sky_fedsec_state_name(sky_fedsec_state s)
{
	static const char *const k[] = {"shares", "masking", "reveal", "closed", "closed"};
	return s >= SKY_FEDSEC_S_SHARES && s <= SKY_FEDSEC_S_FAILED ? k[s] : "?";
}

int sky_fedsec_agg_member(const sky_fedsec_agg *a, const char *id)
{
	return sky_fed_id_find(a->id, a->n, id);
}

#define REFUSE(why, ...) (a->refused[why]++, sky_diag_set(d, SKY_EINVAL, __VA_ARGS__), (int)(why) + 1)

/* The checks every message passes; *who is the sender's member index. */
static int admit(sky_fedsec_agg *a, const char *sender, const sky_fedsec_msg *m,
		 sky_fedsec_phase phase, sky_fedsec_state state, int *who, sky_diag *d)
{
	if (sky_fed_id_find(a->owner, a->nown, sender) < 0)
		return REFUSE(SKY_FEDS_NOT_OWNER, "%s %s: %s is not an owner of job %s",
			      sky_fedsec_phase_name(phase), phase == SKY_FEDSEC_SHARES ? "" : "answer",
			      sender, a->job);
	int k = sky_fedsec_agg_member(a, sender);
	if (k < 0)
		return REFUSE(SKY_FEDS_NOT_SAMPLED, "%s is not sampled in round %llu", sender,
			      (unsigned long long)a->round);
	if (m->phase != phase)
		return REFUSE(SKY_FEDS_FORMAT, "%s sent a %s message on the owners' topic", sender,
			      sky_fedsec_phase_name(m->phase));
	if (strcmp(m->job, a->job) != 0 || m->round != a->round)
		return REFUSE(SKY_FEDS_ROUND, "%s sent job %s round %llu; this is %s round %llu", sender,
			      m->job, (unsigned long long)m->round, a->job,
			      (unsigned long long)a->round);
	if (a->state != state)
		return REFUSE(SKY_FEDS_PHASE, "%s sent %s in the round's %s phase", sender,
			      sky_fedsec_phase_name(phase), sky_fedsec_state_name(a->state));
	*who = k;
	return 0;
}

int sky_fedsec_agg_on_shares(sky_fedsec_agg *a, const char *sender, const sky_fedsec_msg *m,
			     sky_diag *d)
{
	int k, rc = admit(a, sender, m, SKY_FEDSEC_SHARES, SKY_FEDSEC_S_SHARES, &k, d);
	if (rc)
		return rc;
	if (a->in_u1[k])
		return REFUSE(SKY_FEDS_REPLAY, "%s sent its shares of round %llu again", sender,
			      (unsigned long long)a->round);
	if (m->nitems != a->n - 1)
		return REFUSE(SKY_FEDS_FORMAT, "%s sent %d shares; round %llu has %d other members",
			      sender, m->nitems, (unsigned long long)a->round, a->n - 1);
	int to[SKY_FED_MAX_OWNERS];
	for (int i = 0; i < m->nitems; i++) {
		to[i] = sky_fedsec_agg_member(a, m->items[i].id);
		if (to[i] < 0 || to[i] == k)
			return REFUSE(SKY_FEDS_FORMAT, "%s sealed a share for %s, %s", sender,
				      m->items[i].id, to[i] < 0 ? "no member of the round" : "itself");
	}
	for (int i = 0; i < m->nitems; i++)
		memcpy(a->blob[k][to[i]], m->items[i].b, SKY_SECAGG_SHARE_BLOB_BYTES);
	memcpy(a->commit[k], m->commit, 32);
	a->in_u1[k] = 1;
	a->n_u1++;
	return 0;
}

int sky_fedsec_agg_shares_complete(const sky_fedsec_agg *a)
{
	return a->n_u1 == a->n;
}

int sky_fedsec_agg_close_shares(sky_fedsec_agg *a, sky_diag *d)
{
	if (a->state != SKY_FEDSEC_S_SHARES)
		return sky_diag_set(d, SKY_ESTATE, "secure round %llu: shares closed already",
				    (unsigned long long)a->round);
	if (a->n_u1 < a->t) {
		a->state = SKY_FEDSEC_S_FAILED;
		return sky_diag_set(d, SKY_ETIMEOUT,
				    "secure round %llu: shares of %d of %d sampled owners in, %d needed",
				    (unsigned long long)a->round, a->n_u1, a->n, a->t);
	}
	a->state = SKY_FEDSEC_S_MASKED;
	return 0;
}

static void head(const sky_fedsec_agg *a, int k, sky_fedsec_phase p, sky_fedsec_msg *m)
{
	memset(m, 0, sizeof *m);
	snprintf(m->job, sizeof m->job, "%s", a->job);
	m->round = a->round;
	m->phase = p;
	snprintf(m->to, sizeof m->to, "%s", a->id[k]);
}

int sky_fedsec_agg_relay(const sky_fedsec_agg *a, int k, sky_fedsec_msg *m)
{
	if (k < 0 || k >= a->n || !a->in_u1[k] || a->state < SKY_FEDSEC_S_MASKED)
		return SKY_EINVAL;
	head(a, k, SKY_FEDSEC_RELAY, m);
	for (int j = 0; j < a->n; j++) {
		if (!a->in_u1[j])
			continue;
		snprintf(m->u1[m->nu1++], SKY_FED_ID_CAP, "%s", a->id[j]);
		if (j == k)
			continue;
		sky_fedsec_item *it = &m->items[m->nitems++];
		snprintf(it->id, sizeof it->id, "%s", a->id[j]);
		it->len = SKY_SECAGG_SHARE_BLOB_BYTES;
		memcpy(it->b, a->blob[j][k], SKY_SECAGG_SHARE_BLOB_BYTES);
	}
	return 0;
}

int sky_fedsec_agg_begin_reveal(sky_fedsec_agg *a, const unsigned char *in, sky_diag *d)
{
	if (a->state != SKY_FEDSEC_S_MASKED)
		return sky_diag_set(d, SKY_ESTATE, "secure round %llu: not masking",
				    (unsigned long long)a->round);
	a->n_u2 = 0;
	for (int k = 0; k < a->n; k++) {
		a->in_u2[k] = a->in_u1[k] && in[k];
		a->n_u2 += a->in_u2[k];
	}
	if (a->n_u2 < a->t) {
		a->state = SKY_FEDSEC_S_FAILED;
		return sky_diag_set(d, SKY_ETIMEOUT,
				    "secure round %llu: %d masked update(s) in, %d needed to unmask",
				    (unsigned long long)a->round, a->n_u2, a->t);
	}
	a->state = SKY_FEDSEC_S_REVEAL;
	return 0;
}

int sky_fedsec_agg_reveal(const sky_fedsec_agg *a, int k, sky_fedsec_msg *m)
{
	if (k < 0 || k >= a->n || !a->in_u2[k] || a->state < SKY_FEDSEC_S_REVEAL)
		return SKY_EINVAL;
	head(a, k, SKY_FEDSEC_REVEAL, m);
	for (int j = 0; j < a->n; j++) {
		if (a->in_u2[j])
			snprintf(m->u2[m->nu2++], SKY_FED_ID_CAP, "%s", a->id[j]);
		else if (a->in_u1[j])
			snprintf(m->dropped[m->ndropped++], SKY_FED_ID_CAP, "%s", a->id[j]);
	}
	return 0;
}

int sky_fedsec_agg_on_open(sky_fedsec_agg *a, const char *sender, const sky_fedsec_msg *m,
			   sky_diag *d)
{
	int k, rc = admit(a, sender, m, SKY_FEDSEC_OPEN, SKY_FEDSEC_S_REVEAL, &k, d);
	if (rc)
		return rc;
	if (!a->in_u2[k])
		return REFUSE(SKY_FEDS_PHASE, "%s answered a reveal it was not asked (no update of "
					      "it is in)", sender);
	if (a->opened[k])
		return REFUSE(SKY_FEDS_REPLAY, "%s answered the reveal of round %llu again", sender,
			      (unsigned long long)a->round);
	int ndrop = a->n_u1 - a->n_u2;
	if (m->nitems != a->n_u2 || m->nseeds != ndrop)
		return REFUSE(SKY_FEDS_FORMAT,
			      "%s opened %d share(s) and %d pair seed(s); the request asked %d and %d",
			      sender, m->nitems, m->nseeds, a->n_u2, ndrop);
	int of[SKY_FED_MAX_OWNERS], with[SKY_FED_MAX_OWNERS];
	for (int i = 0; i < m->nitems; i++) {
		of[i] = sky_fedsec_agg_member(a, m->items[i].id);
		if (of[i] < 0 || !a->in_u2[of[i]])
			return REFUSE(SKY_FEDS_FORMAT, "%s opened a share of %s, no survivor", sender,
				      m->items[i].id);
		if (m->items[i].b[0] != (unsigned char)(k + 1))
			return REFUSE(SKY_FEDS_FORMAT, "%s opened a share at x = %u; its shares are at %d",
				      sender, m->items[i].b[0], k + 1);
	}
	for (int i = 0; i < m->nseeds; i++) {
		with[i] = sky_fedsec_agg_member(a, m->seeds[i].id);
		if (with[i] < 0 || !a->in_u1[with[i]] || a->in_u2[with[i]])
			return REFUSE(SKY_FEDS_FORMAT, "%s revealed its pair seed with %s, not a dropped "
						       "owner", sender, m->seeds[i].id);
	}
	for (int i = 0; i < m->nitems; i++) {
		sky_shamir_share *s = &a->share[of[i]][k];
		s->x = m->items[i].b[0];
		memcpy(s->y, m->items[i].b + 1, SKY_SHAMIR_SECRET_BYTES);
		a->has_share[of[i]][k] = 1;
	}
	for (int i = 0; i < m->nseeds; i++)
		memcpy(a->seed[k][with[i]], m->seeds[i].b, SKY_SECAGG_SEED_BYTES);
	a->opened[k] = 1;
	a->n_opened++;
	return 0;
}

int sky_fedsec_agg_ready(const sky_fedsec_agg *a, int deadline)
{
	if (a->state != SKY_FEDSEC_S_REVEAL)
		return 0;
	if (a->n_opened == a->n_u2)
		return 1;
	return deadline && a->n_u1 == a->n_u2 && a->n_opened >= a->t;
}

/* Rebuilds member j's seed from t of the shares in that match its
 * commitment: the t-subsets in order, at most MAX_TRIES. */
static int rebuild(sky_fedsec_agg *a, int j, unsigned char seed[SKY_SECAGG_SEED_BYTES],
		   sky_diag *d)
{
	sky_shamir_share have[SKY_FED_MAX_OWNERS], pick[SKY_FED_MAX_OWNERS];
	int m = 0, t = a->t, idx[SKY_FED_MAX_OWNERS];
	for (int k = 0; k < a->n; k++)
		if (a->has_share[j][k])
			have[m++] = a->share[j][k];
	if (m < t)
		return sky_diag_set(d, SKY_ETIMEOUT, "secure round %llu: %d share(s) of %s's seed, %d "
						     "needed", (unsigned long long)a->round, m, a->id[j], t);
	for (int i = 0; i < t; i++)
		idx[i] = i;
	for (int tries = 0; tries < MAX_TRIES; tries++) {
		unsigned char c[32];
		for (int i = 0; i < t; i++)
			pick[i] = have[idx[i]];
		if (sky_shamir_combine(pick, (unsigned)t, seed, NULL) == 0 &&
		    sky_secagg_commit(a->id[j], a->job, a->round, seed, c, NULL) == 0 &&
		    memcmp(c, a->commit[j], 32) == 0)
			return tries > 0 ? 1 : 0;
		int i = t - 1; /* the next t-subset of m */
		while (i >= 0 && idx[i] == m - t + i)
			i--;
		if (i < 0)
			break;
		idx[i]++;
		for (int k = i + 1; k < t; k++)
			idx[k] = idx[k - 1] + 1;
	}
	a->refused[SKY_FEDS_FORGED]++;
	return sky_diag_set(d, SKY_EAUTH,
			    "secure round %llu: no %d of the %d shares of %s's seed match its "
			    "commitment (a forged share)", (unsigned long long)a->round, t, m, a->id[j]);
}

int sky_fedsec_agg_unmask(sky_fedsec_agg *a, uint64_t *sum, uint64_t words, sky_diag *d)
{
	if (!sky_fedsec_agg_ready(a, 1))
		return sky_diag_set(d, SKY_ESTATE, "secure round %llu: the reveal is not complete",
				    (unsigned long long)a->round);
	unsigned char(*seeds)[SKY_SECAGG_SEED_BYTES] = malloc(SKY_FED_MAX_OWNERS * sizeof *seeds);
	sky_secagg_revealed *rev = malloc(SKY_FED_MAX_OWNERS * SKY_FED_MAX_OWNERS * sizeof *rev);
	int rc = seeds && rev ? 0 : sky_diag_set(d, SKY_ENOMEM, "no memory to unmask");
	size_t ns = 0, nr = 0;
	for (int j = 0; j < a->n && !rc; j++) {
		if (!a->in_u2[j])
			continue;
		int r = rebuild(a, j, seeds[ns], d);
		if (r < 0)
			rc = r;
		else {
			if (r > 0) /* some share did not fit: a forged one among them */
				a->refused[SKY_FEDS_FORGED]++;
			ns++;
		}
	}
	for (int j = 0; j < a->n && !rc; j++)
		for (int k = 0; a->in_u2[j] && k < a->n; k++)
			if (a->in_u1[k] && !a->in_u2[k])
				rev[nr++] = (sky_secagg_revealed){a->id[j], a->id[k], a->seed[j][k]};
	if (!rc)
		rc = sky_secagg_unmask(sum, (size_t)words, 0, (const unsigned char(*)[32])seeds, ns, rev,
				       nr, d);
	a->state = rc ? SKY_FEDSEC_S_FAILED : SKY_FEDSEC_S_DONE;
	if (seeds)
		memset(seeds, 0, SKY_FED_MAX_OWNERS * sizeof *seeds);
	free(seeds), free(rev);
	return rc;
}
