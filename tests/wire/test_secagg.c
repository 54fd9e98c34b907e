#include "sky_test.h"

#include "sky_secagg.h"

#include <mbedtls/pk.h>
#include <string.h>

/* Four owners of a federated round, with certificate-style P-256 keys. */
#define NOWN 4
#define NW 1001 /* not a multiple of the 8 words of a ChaCha20 block */

typedef struct owner {
	const char *id;
	mbedtls_pk_context priv, pub;
	unsigned char self_seed[32], commit[32];
	uint64_t x[NW], y[NW];
} owner;

static sky_sign_rng g_rng;
static owner g_own[NOWN];
static const char *const g_ids[NOWN] = {"b1", "b4", "b7", "a9"};

static void owners_make(void)
{
	static int made;
	if (made)
		return;
	made = 1;
	SKY_EXPECT_EQ(sky_sign_rng_init(&g_rng, "test-secagg", NULL), 0);
	for (int i = 0; i < NOWN; i++) {
		owner *o = &g_own[i];
		unsigned char der[256];
		o->id = g_ids[i];
		mbedtls_pk_init(&o->priv);
		mbedtls_pk_init(&o->pub);
		SKY_EXPECT_EQ(sky_sign_gen_key(&o->priv, &g_rng, NULL), 0);
		int n = mbedtls_pk_write_pubkey_der(&o->priv, der, sizeof der);
		SKY_EXPECT(n > 0);
		SKY_EXPECT_EQ(mbedtls_pk_parse_public_key(&o->pub, der + sizeof der - n, (size_t)n),
			      0);
	}
}

/* Owner i's keys with owner j, computed on i's side (i's private key, j's
 * public one). */
static sky_secagg_pair pair(int i, int j, const char *job, uint64_t round)
{
	sky_secagg_pair p;
	sky_diag d;
	sky_diag_clear(&d);
	memset(&p, 0, sizeof p);
	SKY_EXPECT_MSG(sky_secagg_pair_keys(&g_own[i].priv, g_own[i].id, &g_own[j].pub,
					    g_own[j].id, job, round, &g_rng, &p, &d) == 0,
		       "%s", d.msg);
	return p;
}

SKY_TEST(both_sides_of_a_pair_derive_the_same_keys)
{
	owners_make();
	sky_secagg_pair ab = pair(0, 1, "fed", 3), ba = pair(1, 0, "fed", 3);
	SKY_EXPECT(memcmp(&ab, &ba, sizeof ab) == 0);
	SKY_EXPECT(memcmp(ab.mask_seed, ab.share_key, 32) != 0);
	/* another round, job or pair: other keys */
	sky_secagg_pair r4 = pair(0, 1, "fed", 4), j2 = pair(0, 1, "fed2", 3),
			ac = pair(0, 2, "fed", 3);
	SKY_EXPECT(memcmp(ab.mask_seed, r4.mask_seed, 32) != 0);
	SKY_EXPECT(memcmp(ab.mask_seed, j2.mask_seed, 32) != 0);
	SKY_EXPECT(memcmp(ab.mask_seed, ac.mask_seed, 32) != 0);
	/* an owner cannot pair with itself, and ids are topic segments */
	sky_secagg_pair p;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_secagg_pair_keys(&g_own[0].priv, "b1", &g_own[1].pub, "b1", "fed", 3,
					   &g_rng, &p, &d),
		      SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "paired with itself") != NULL);
	SKY_EXPECT_EQ(sky_secagg_pair_keys(&g_own[0].priv, "b1", &g_own[1].pub, "b/4", "fed", 3,
					   &g_rng, &p, NULL),
		      SKY_EINVAL);
}

/* Plain updates: owner i's word w is a value that would not be random. */
static void updates_make(void)
{
	for (int i = 0; i < NOWN; i++)
		for (int w = 0; w < NW; w++)
			g_own[i].x[w] = (uint64_t)((int64_t)(w * 1000 + i) - 300000) * 4096u;
}

/* Owner i masks its update, in two chunks split at `cut`, against every
 * other owner in `in` (the owners of the round). */
static void mask(int i, const int *in, int nin, const char *job, uint64_t round, size_t cut)
{
	owner *o = &g_own[i];
	sky_secagg_pair pp[NOWN];
	sky_secagg_peer peers[NOWN];
	int np = 0;
	for (int k = 0; k < nin; k++) {
		if (in[k] == i)
			continue;
		pp[np] = pair(i, in[k], job, round);
		peers[np].id = g_own[in[k]].id;
		peers[np].mask_seed = pp[np].mask_seed;
		np++;
	}
	memcpy(o->y, o->x, sizeof o->y);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_MSG(sky_secagg_mask(o->y, cut, 0, o->self_seed, o->id, peers, (size_t)np, &d) ==
			       0,
		       "%s", d.msg);
	SKY_EXPECT(sky_secagg_mask(o->y + cut, NW - cut, cut, o->self_seed, o->id, peers,
				   (size_t)np, &d) == 0);
}

SKY_TEST(masks_cancel_and_the_sum_has_the_plain_bits)
{
	owners_make();
	updates_make();
	int in[NOWN] = {0, 1, 2, 3};
	uint64_t plain[NW] = {0}, sum[NW] = {0};
	unsigned char seeds[NOWN][32];
	for (int i = 0; i < NOWN; i++) {
		SKY_EXPECT_EQ(sky_sign_rng_func(&g_rng, g_own[i].self_seed, 32), 0);
		memcpy(seeds[i], g_own[i].self_seed, 32);
		/* chunk boundaries differ per owner: the stream is addressed by word */
		mask(i, in, NOWN, "fed", 1, (size_t)(i * 331 + 5)); /* 5, 336, 667, 998 */
		for (int w = 0; w < NW; w++) {
			plain[w] += g_own[i].x[w];
			sum[w] += g_own[i].y[w];
		}
	}
	/* a masked update shares no word with its plain one, and its bits are
	 * balanced (64064 bits; 50% +- 2% is over 10 standard deviations) */
	for (int i = 0; i < NOWN; i++) {
		long ones = 0;
		int same = 0;
		for (int w = 0; w < NW; w++) {
			same += g_own[i].y[w] == g_own[i].x[w];
			ones += __builtin_popcountll(g_own[i].y[w]);
		}
		SKY_EXPECT_EQ(same, 0);
		SKY_EXPECT_MSG(ones > NW * 64 * 48 / 100 && ones < NW * 64 * 52 / 100,
			       "owner %d: %ld of %d bits set", i, ones, NW * 64);
	}
	SKY_EXPECT(memcmp(sum, plain, sizeof sum) != 0);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_MSG(sky_secagg_unmask(sum, NW, 0, (const unsigned char(*)[32])seeds, NOWN, NULL,
					 0, &d) == 0,
		       "%s", d.msg);
	SKY_EXPECT(memcmp(sum, plain, sizeof sum) == 0);
}

/* The whole round with an owner that masks and then goes: shares of the
 * self-mask seeds sealed pairwise, threshold 2 of 3 others, commitments
 * checked, the dropped owner's pair masks removed with the seeds the
 * survivors reveal. The result is the plain sum of the survivors. */
SKY_TEST(an_owner_lost_after_masking_does_not_stall_the_round)
{
	owners_make();
	updates_make();
	const char *job = "fed";
	const uint64_t round = 9;
	/* b4: b1 and a9 sort below it and b7 above, so pair masks of both signs
	 * are left to remove */
	const int lost = 1;
	int in[NOWN] = {0, 1, 2, 3};
	/* each owner's sealed shares for each other owner: blob[from][to] */
	unsigned char blob[NOWN][NOWN][SKY_SECAGG_SHARE_BLOB_BYTES];
	for (int i = 0; i < NOWN; i++) {
		owner *o = &g_own[i];
		sky_shamir_share sh[NOWN - 1];
		SKY_EXPECT_EQ(sky_sign_rng_func(&g_rng, o->self_seed, 32), 0);
		SKY_EXPECT_EQ(sky_secagg_commit(o->id, job, round, o->self_seed, o->commit, NULL), 0);
		SKY_EXPECT_EQ(sky_shamir_split(o->self_seed, NOWN - 1, 2, &g_rng, sh, NULL), 0);
		for (int j = 0, s = 0; j < NOWN; j++) {
			if (j == i)
				continue;
			sky_secagg_pair p = pair(i, j, job, round);
			SKY_EXPECT_EQ(sky_secagg_seal_share(&p, o->id, g_own[j].id, job, round, &sh[s++],
							    blob[i][j], NULL),
				      0);
		}
		mask(i, in, NOWN, job, round, NW / 2);
	}
	/* b4 masked but its update never arrives; the others' do */
	uint64_t sum[NW] = {0}, plain[NW] = {0};
	for (int i = 0; i < NOWN; i++) {
		if (i == lost)
			continue;
		for (int w = 0; w < NW; w++) {
			sum[w] += g_own[i].y[w];
			plain[w] += g_own[i].x[w];
		}
	}
	/* unmasking: for each survivor i, two other survivors open the share of
	 * i's seed that i sealed for them; the lost owner's shares are not used */
	unsigned char seeds[NOWN - 1][32];
	int ns = 0;
	for (int i = 0; i < NOWN; i++) {
		if (i == lost)
			continue;
		sky_shamir_share got[2];
		int ng = 0;
		for (int j = 0; j < NOWN && ng < 2; j++) {
			if (j == i || j == lost)
				continue;
			sky_secagg_pair p = pair(j, i, job, round); /* on j's side */
			sky_diag d;
			sky_diag_clear(&d);
			SKY_EXPECT_MSG(sky_secagg_open_share(&p, g_own[i].id, g_own[j].id, job, round,
							     blob[i][j], sizeof blob[i][j], &got[ng],
							     &d) == 0,
				       "%s", d.msg);
			ng++;
		}
		unsigned char c[32];
		SKY_EXPECT_EQ(sky_shamir_combine(got, 2, seeds[ns], NULL), 0);
		SKY_EXPECT_EQ(sky_secagg_commit(g_own[i].id, job, round, seeds[ns], c, NULL), 0);
		SKY_EXPECT(memcmp(c, g_own[i].commit, 32) == 0);
		ns++;
	}
	/* each survivor reveals its mask seed with the lost owner */
	sky_secagg_pair rp[NOWN - 1];
	sky_secagg_revealed rev[NOWN - 1];
	int nr = 0;
	for (int i = 0; i < NOWN; i++) {
		if (i == lost)
			continue;
		rp[nr] = pair(i, lost, job, round);
		rev[nr] = (sky_secagg_revealed){g_own[i].id, g_own[lost].id, rp[nr].mask_seed};
		nr++;
	}
	/* without the revealed seeds the sum is still masked */
	uint64_t part[NW];
	memcpy(part, sum, sizeof part);
	SKY_EXPECT_EQ(sky_secagg_unmask(part, NW, 0, (const unsigned char(*)[32])seeds,
					(size_t)ns, NULL, 0, NULL),
		      0);
	SKY_EXPECT(memcmp(part, plain, sizeof part) != 0);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_MSG(sky_secagg_unmask(sum, NW, 0, (const unsigned char(*)[32])seeds, (size_t)ns,
					 rev, (size_t)nr, &d) == 0,
		       "%s", d.msg);
	SKY_EXPECT(memcmp(sum, plain, sizeof sum) == 0);
}

/* A share opened by the wrong pair, for the wrong round or direction, or
 * altered, is refused; a share forged consistently under the right key
 * (the pair itself cheating) rebuilds a seed that fails the commitment. */
SKY_TEST(forged_or_misrouted_shares_are_refused_with_the_reason)
{
	owners_make();
	const char *job = "fed";
	sky_shamir_share sh[3], out;
	unsigned char seed[32], blob[SKY_SECAGG_SHARE_BLOB_BYTES];
	SKY_EXPECT_EQ(sky_sign_rng_func(&g_rng, seed, 32), 0);
	SKY_EXPECT_EQ(sky_shamir_split(seed, 3, 2, &g_rng, sh, NULL), 0);
	sky_secagg_pair p01 = pair(0, 1, job, 5), p02 = pair(0, 2, job, 5), p01r6 = pair(0, 1, job, 6);
	SKY_EXPECT_EQ(sky_secagg_seal_share(&p01, "b1", "b4", job, 5, &sh[0], blob, NULL), 0);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_secagg_open_share(&p01, "b1", "b4", job, 5, blob, sizeof blob, &out, &d),
		      0);
	SKY_EXPECT(out.x == sh[0].x && memcmp(out.y, sh[0].y, 32) == 0);
	SKY_EXPECT_EQ(sky_secagg_open_share(&p02, "b1", "b4", job, 5, blob, sizeof blob, &out, &d),
		      SKY_EAUTH);
	SKY_EXPECT(strstr(d.msg, "does not verify") != NULL);
	SKY_EXPECT_EQ(sky_secagg_open_share(&p01r6, "b1", "b4", job, 5, blob, sizeof blob, &out,
					    NULL),
		      SKY_EAUTH);
	SKY_EXPECT_EQ(sky_secagg_open_share(&p01, "b1", "b4", job, 6, blob, sizeof blob, &out, NULL),
		      SKY_EAUTH);
	/* the same key, the other direction: another nonce and AD */
	SKY_EXPECT_EQ(sky_secagg_open_share(&p01, "b4", "b1", job, 5, blob, sizeof blob, &out, NULL),
		      SKY_EAUTH);
	blob[10] ^= 0x40;
	SKY_EXPECT_EQ(sky_secagg_open_share(&p01, "b1", "b4", job, 5, blob, sizeof blob, &out, NULL),
		      SKY_EAUTH);
	blob[10] ^= 0x40;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_secagg_open_share(&p01, "b1", "b4", job, 5, blob, sizeof blob - 1, &out,
					    &d),
		      SKY_EFORMAT);
	SKY_EXPECT(strstr(d.msg, "49 bytes") != NULL);
	/* a consistent but wrong share: the rebuilt seed fails the commitment */
	unsigned char commit[32], c[32], back[32];
	SKY_EXPECT_EQ(sky_secagg_commit("b1", job, 5, seed, commit, NULL), 0);
	sky_shamir_share two[2] = {sh[0], sh[2]};
	two[1].y[0] ^= 1;
	SKY_EXPECT_EQ(sky_shamir_combine(two, 2, back, NULL), 0);
	SKY_EXPECT_EQ(sky_secagg_commit("b1", job, 5, back, c, NULL), 0);
	SKY_EXPECT(memcmp(c, commit, 32) != 0);
	two[1].y[0] ^= 1;
	SKY_EXPECT_EQ(sky_shamir_combine(two, 2, back, NULL), 0);
	SKY_EXPECT_EQ(sky_secagg_commit("b1", job, 5, back, c, NULL), 0);
	SKY_EXPECT(memcmp(c, commit, 32) == 0);
}

/* The key stream addressed by word: any chunking gives the same words, a
 * range past 2^35 words is refused. */
SKY_TEST(stream_is_addressed_by_word)
{
	unsigned char seed[32];
	for (int i = 0; i < 32; i++)
		seed[i] = (unsigned char)i;
	static uint64_t whole[300], parts[300];
	memset(whole, 0, sizeof whole);
	memset(parts, 0, sizeof parts);
	SKY_EXPECT_EQ(sky_secagg_stream(whole, 300, 0, seed, 1, NULL), 0);
	size_t cuts[] = {0, 1, 7, 8, 9, 70, 71, 200, 300};
	for (int k = 0; k + 1 < 9; k++)
		SKY_EXPECT_EQ(sky_secagg_stream(parts + cuts[k], cuts[k + 1] - cuts[k], cuts[k], seed,
						1, NULL),
			      0);
	SKY_EXPECT(memcmp(whole, parts, sizeof whole) == 0);
	SKY_EXPECT_EQ(sky_secagg_stream(parts, 300, 0, seed, -1, NULL), 0);
	for (int i = 0; i < 300; i++)
		SKY_EXPECT(parts[i] == 0);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_secagg_stream(parts, 2, SKY_SECAGG_MAX_WORDS - 1, seed, 1, &d), SKY_ERANGE);
	SKY_EXPECT(strstr(d.msg, "2^35") != NULL);
	SKY_EXPECT_EQ(sky_secagg_stream(parts, 1, SKY_SECAGG_MAX_WORDS - 1, seed, 1, NULL), 0);
}

/* The stream is ChaCha20 as RFC 8439 defines it: all-zero key and nonce,
 * block 0 (RFC 8439 appendix A.1, test vector 1: 76 b8 e0 ad a0 f1 3d 90
 * 40 5d 6a e5 53 86 bd 28 ...), read as little-endian words. The same on
 * every machine, so masks made on an x86 owner cancel on an Arm one. */
SKY_TEST(stream_is_rfc8439_chacha20)
{
	static const unsigned char zero[32];
	uint64_t v[3] = {0, 0, 5};
	SKY_EXPECT_EQ(sky_secagg_stream(v, 2, 0, zero, 1, NULL), 0);
	SKY_EXPECT(v[0] == 0x903df1a0ade0b876ull);
	SKY_EXPECT(v[1] == 0x28bd8653e56a5d40ull);
	SKY_EXPECT(v[2] == 5);
}
