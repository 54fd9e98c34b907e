/* An owner's side of a secure round; see sky_fedsec_owner.h. */
#include "sky_fedsec_owner.h"

#include "sky_fedsec_agg.h" /* sky_fedsec_threshold */
#include "sky_topics.h"

#include <mbedtls/platform_util.h>
#include <stdio.h>
#include <string.h>

int sky_fedsec_check_cert(const mbedtls_x509_crt *ca, const char *pem, const char *id,
			  mbedtls_pk_context *pk, sky_diag *d)
{
	mbedtls_x509_crt crt;
	mbedtls_x509_crt_init(&crt);
	uint32_t flags = 0;
	char cn[SKY_FED_ID_CAP];
	int rc = 0;
	if (!pem || !pem[0] ||
	    mbedtls_x509_crt_parse(&crt, (const unsigned char *)pem, strlen(pem) + 1) != 0)
		rc = sky_diag_set(d, SKY_EAUTH, "%s's certificate in the round is not a PEM "
						"certificate", id);
	else if (mbedtls_x509_crt_verify(&crt, (mbedtls_x509_crt *)ca, NULL, NULL, &flags, NULL,
					 NULL) != 0)
		rc = sky_diag_set(d, SKY_EAUTH, "%s's certificate is not valid under the fleet CA "
						"(flags 0x%x)", id, (unsigned)flags);
	else if (sky_sign_cert_cn(&crt, cn, sizeof cn) != 0 || strcmp(cn, id) != 0)
		rc = sky_diag_set(d, SKY_EAUTH, "the certificate given for %s has CN '%s'", id,
				  sky_sign_cert_cn(&crt, cn, sizeof cn) == 0 ? cn : "?");
	else {
		/* a copy of the public key alone: write it out and parse it back */
		unsigned char der[256];
		int n = mbedtls_pk_write_pubkey_der(&crt.pk, der, sizeof der);
		if (n <= 0 || mbedtls_pk_parse_public_key(pk, der + sizeof der - n, (size_t)n) != 0)
			rc = sky_diag_set(d, SKY_EAUTH, "%s's certificate key cannot be read", id);
	}
	mbedtls_x509_crt_free(&crt);
	return rc;
}

int sky_fedsec_owner_begin(sky_fedsec_owner *o, const char *job, uint64_t round,
			   const char (*ids)[SKY_FED_ID_CAP], int n, int me,
			   const mbedtls_pk_context *own_key, const mbedtls_pk_context *pubs,
			   sky_sign_rng *rng, sky_fedsec_msg *m, sky_diag *d)
{
	sky_fedsec_owner_free(o);
	memset(m, 0, sizeof *m);
	if (n < 2 || n > SKY_FED_MAX_OWNERS || me < 0 || me >= n || !sky_topic_segment_ok(job) ||
	    strlen(job) >= SKY_FED_ID_CAP)
		return sky_diag_set(d, SKY_EINVAL, "secure round: %d members, this owner %d", n, me);
	snprintf(o->job, sizeof o->job, "%s", job);
	o->round = round;
	o->n = n;
	o->me = me;
	o->t = sky_fedsec_threshold(n);
	for (int k = 0; k < n; k++)
		snprintf(o->id[k], sizeof o->id[k], "%s", ids[k]);
	int rc = 0;
	for (int k = 0; k < n && !rc; k++)
		if (k != me)
			rc = sky_secagg_pair_keys(own_key, ids[me], &pubs[k], ids[k], job, round, rng,
						  &o->pair[k], d);
	if (!rc && sky_sign_rng_func(rng, o->self_seed, sizeof o->self_seed) != 0)
		rc = sky_diag_set(d, SKY_ECRYPTO, "secure round: no random self-mask seed");
	sky_shamir_share sh[SKY_FED_MAX_OWNERS];
	if (!rc)
		rc = sky_shamir_split(o->self_seed, (unsigned)n, (unsigned)o->t, rng, sh, d);
	if (!rc)
		rc = sky_secagg_commit(ids[me], job, round, o->self_seed, m->commit, d);
	snprintf(m->job, sizeof m->job, "%s", job);
	m->round = round;
	m->phase = SKY_FEDSEC_SHARES;
	for (int k = 0; k < n && !rc; k++) {
		if (k == me) { /* its own share it keeps */
			o->got[me] = sh[k];
			o->has_got[me] = 1;
			continue;
		}
		sky_fedsec_item *it = &m->items[m->nitems++];
		snprintf(it->id, sizeof it->id, "%s", ids[k]);
		it->len = SKY_SECAGG_SHARE_BLOB_BYTES;
		rc = sky_secagg_seal_share(&o->pair[k], ids[me], ids[k], job, round, &sh[k], it->b, d);
	}
	mbedtls_platform_zeroize(sh, sizeof sh);
	if (rc)
		sky_fedsec_owner_free(o);
	return rc;
}

static int member(const sky_fedsec_owner *o, const char *id)
{
	for (int k = 0; k < o->n; k++)
		if (strcmp(o->id[k], id) == 0)
			return k;
	return -1;
}

/* A signed message must be for this owner's job, round and id. */
static int for_me(const sky_fedsec_owner *o, const sky_fedsec_msg *m, sky_fedsec_phase p,
		  sky_diag *d)
{
	if (!o->n || m->phase != p || strcmp(m->job, o->job) != 0 || m->round != o->round ||
	    strcmp(m->to, o->id[o->me]) != 0)
		return sky_diag_set(d, SKY_EINVAL, "a %s for %s of job %s round %llu; this owner is "
						   "%s in %s round %llu",
				    sky_fedsec_phase_name(m->phase), m->to, m->job,
				    (unsigned long long)m->round, o->n ? o->id[o->me] : "-", o->job,
				    (unsigned long long)o->round);
	return 0;
}

int sky_fedsec_owner_on_relay(sky_fedsec_owner *o, const sky_fedsec_msg *m, sky_diag *d)
{
	int rc = for_me(o, m, SKY_FEDSEC_RELAY, d);
	if (rc)
		return rc;
	if (o->have_u1)
		return sky_diag_set(d, SKY_EINVAL, "round %llu: a second relay",
				    (unsigned long long)o->round);
	unsigned char u1[SKY_FED_MAX_OWNERS] = {0};
	for (int i = 0; i < m->nu1; i++) {
		int k = member(o, m->u1[i]);
		if (k < 0)
			return sky_diag_set(d, SKY_EINVAL, "U1 names %s, not sampled", m->u1[i]);
		u1[k] = 1;
	}
	if (!u1[o->me] || m->nu1 < o->t)
		return sky_diag_set(d, SKY_EINVAL, "U1 of %d owner(s)%s; the threshold is %d", m->nu1,
				    u1[o->me] ? "" : " without this one", o->t);
	if (m->nitems != m->nu1 - 1)
		return sky_diag_set(d, SKY_EINVAL, "%d share(s) relayed for U1 of %d", m->nitems,
				    m->nu1);
	sky_shamir_share got[SKY_FED_MAX_OWNERS];
	int from[SKY_FED_MAX_OWNERS];
	for (int i = 0; i < m->nitems; i++) {
		int k = member(o, m->items[i].id);
		if (k < 0 || k == o->me || !u1[k])
			return sky_diag_set(d, SKY_EINVAL, "a share relayed from %s, not another of U1",
					    m->items[i].id);
		rc = sky_secagg_open_share(&o->pair[k], o->id[k], o->id[o->me], o->job, o->round,
					   m->items[i].b, m->items[i].len, &got[i], d);
		if (rc)
			return rc;
		if (got[i].x != (uint8_t)(o->me + 1))
			return sky_diag_set(d, SKY_EAUTH, "%s's share for this owner is at x = %u",
					    o->id[k], got[i].x);
		from[i] = k;
	}
	for (int i = 0; i < m->nitems; i++) {
		o->got[from[i]] = got[i];
		o->has_got[from[i]] = 1;
	}
	mbedtls_platform_zeroize(got, sizeof got);
	memcpy(o->in_u1, u1, sizeof u1);
	o->have_u1 = 1;
	return 0;
}

int sky_fedsec_owner_mask(const sky_fedsec_owner *o, uint64_t *v, size_t n, uint64_t offset,
			  sky_diag *d)
{
	if (!o->have_u1)
		return sky_diag_set(d, SKY_ESTATE, "round %llu: no U1 yet, nothing to mask with",
				    (unsigned long long)o->round);
	sky_secagg_peer peers[SKY_FED_MAX_OWNERS];
	size_t np = 0;
	for (int k = 0; k < o->n; k++)
		if (k != o->me && o->in_u1[k])
			peers[np++] = (sky_secagg_peer){o->id[k], o->pair[k].mask_seed};
	return sky_secagg_mask(v, n, offset, o->self_seed, o->id[o->me], peers, np, d);
}

int sky_fedsec_owner_on_reveal(sky_fedsec_owner *o, const sky_fedsec_msg *m, sky_fedsec_msg *out,
			       sky_diag *d)
{
	int rc = for_me(o, m, SKY_FEDSEC_REVEAL, d);
	if (rc)
		return rc;
	if (!o->have_u1)
		return sky_diag_set(d, SKY_EINVAL, "a reveal before this owner masked");
	unsigned char want[SKY_FED_MAX_OWNERS] = {0}; /* 1 share, 2 seed */
	for (int i = 0; i < m->nu2; i++) {
		int k = member(o, m->u2[i]);
		if (k < 0 || !o->in_u1[k])
			return sky_diag_set(d, SKY_EINVAL, "the reveal names %s as a survivor, not in U1",
					    m->u2[i]);
		want[k] = 1;
	}
	for (int i = 0; i < m->ndropped; i++) {
		int k = member(o, m->dropped[i]);
		if (k < 0 || !o->in_u1[k])
			return sky_diag_set(d, SKY_EINVAL, "the reveal names %s as dropped, not in U1",
					    m->dropped[i]);
		if (want[k]) /* never both for one owner */
			return sky_diag_set(d, SKY_EAUTH, "refused: the reveal asks both a share of %s's "
							  "seed and the pair seed with it", m->dropped[i]);
		want[k] = 2;
	}
	if (want[o->me] != 1)
		return sky_diag_set(d, SKY_EINVAL, "the reveal does not name this owner a survivor");
	for (int k = 0; k < o->n; k++) {
		if (o->in_u1[k] && !want[k])
			return sky_diag_set(d, SKY_EINVAL, "the reveal leaves out %s of U1", o->id[k]);
		if (want[k] && o->revealed[k] && o->revealed[k] != want[k])
			return sky_diag_set(d, SKY_EAUTH, "refused: %s's %s was revealed before this "
							  "round; now the other is asked", o->id[k],
					    o->revealed[k] == 1 ? "share" : "pair seed");
		if (want[k] == 1 && !o->has_got[k])
			return sky_diag_set(d, SKY_EINVAL, "no share of %s's seed here", o->id[k]);
	}
	if (m->nu2 < o->t)
		return sky_diag_set(d, SKY_EINVAL, "%d survivor(s), below the threshold %d", m->nu2,
				    o->t);
	memset(out, 0, sizeof *out);
	snprintf(out->job, sizeof out->job, "%s", o->job);
	out->round = o->round;
	out->phase = SKY_FEDSEC_OPEN;
	for (int k = 0; k < o->n; k++) {
		if (want[k] == 1) {
			sky_fedsec_item *it = &out->items[out->nitems++];
			snprintf(it->id, sizeof it->id, "%s", o->id[k]);
			it->len = 1 + SKY_SHAMIR_SECRET_BYTES;
			it->b[0] = o->got[k].x;
			memcpy(it->b + 1, o->got[k].y, SKY_SHAMIR_SECRET_BYTES);
		} else if (want[k] == 2) {
			sky_fedsec_item *it = &out->seeds[out->nseeds++];
			snprintf(it->id, sizeof it->id, "%s", o->id[k]);
			it->len = SKY_SECAGG_SEED_BYTES;
			memcpy(it->b, o->pair[k].mask_seed, SKY_SECAGG_SEED_BYTES);
		}
		if (want[k])
			o->revealed[k] = want[k];
	}
	return 0;
}

void sky_fedsec_owner_free(sky_fedsec_owner *o)
{
	if (o)
		mbedtls_platform_zeroize(o, sizeof *o);
}
