#include "sky_test.h"

#include "sky_jobkey.h"

#include <mbedtls/pk.h>
#include <string.h>

/* A board: its key pair (board.key) and the public key alone, as the
 * planner holds it from the board's certificate. */
typedef struct board {
	mbedtls_pk_context priv, pub;
} board;

static sky_sign_rng g_rng;

static void board_make(board *b)
{
	unsigned char der[256];
	mbedtls_pk_init(&b->priv);
	mbedtls_pk_init(&b->pub);
	if (!g_rng.ready)
		SKY_EXPECT_EQ(sky_sign_rng_init(&g_rng, "test-jobkey", NULL), 0);
	SKY_EXPECT_EQ(sky_sign_gen_key(&b->priv, &g_rng, NULL), 0);
	int n = mbedtls_pk_write_pubkey_der(&b->priv, der, sizeof der);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ(mbedtls_pk_parse_public_key(&b->pub, der + sizeof der - n, (size_t)n), 0);
}

static void board_free(board *b)
{
	mbedtls_pk_free(&b->priv);
	mbedtls_pk_free(&b->pub);
}

static sky_jobkey_refusal unwrap(const board *b, const char *blob, const char *job,
				 const char *id, int64_t epoch, unsigned char key[32], int *rc,
				 sky_diag *d)
{
	sky_jobkey_refusal why = SKY_JOBKEY_N;
	sky_diag_clear(d);
	*rc = sky_jobkey_unwrap(&b->priv, blob, strlen(blob), job, id, epoch, key, &why, d);
	return why;
}

SKY_TEST(wrap_unwrap_round_trip)
{
	board a;
	board_make(&a);
	unsigned char key[32], back[32], zero[32] = {0};
	char blob[SKY_JOBKEY_B64_MAX], blob2[SKY_JOBKEY_B64_MAX];
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_jobkey_generate(&g_rng, key, &d), 0);
	SKY_EXPECT(memcmp(key, zero, 32) != 0);
	int n = sky_jobkey_wrap(&a.pub, key, "job-1", "board-a", 3, &g_rng, blob, sizeof blob, &d);
	SKY_EXPECT_MSG(n > 0 && (size_t)n == strlen(blob), "wrap %d: %s", n, d.msg);
	/* 84 + 5 + 7 + 48 = 144 bytes -> 192 base64 characters */
	SKY_EXPECT_EQ(n, 192);
	int rc;
	memset(back, 0, sizeof back);
	SKY_EXPECT_EQ(unwrap(&a, blob, "job-1", "board-a", 3, back, &rc, &d), SKY_JOBKEY_OK);
	SKY_EXPECT_MSG(rc == 0, "%s", d.msg);
	SKY_EXPECT(memcmp(back, key, 32) == 0);
	/* a fresh ephemeral key each time: the same key wraps differently */
	SKY_EXPECT(sky_jobkey_wrap(&a.pub, key, "job-1", "board-a", 3, &g_rng, blob2, sizeof blob2,
				   NULL) == n);
	SKY_EXPECT(strcmp(blob, blob2) != 0);
	/* the longest ids fit SKY_JOBKEY_B64_MAX exactly */
	char id64[65];
	memset(id64, 'x', 64);
	id64[64] = '\0';
	SKY_EXPECT_EQ(sky_jobkey_wrap(&a.pub, key, id64, id64, INT64_MAX, &g_rng, blob,
				      SKY_JOBKEY_B64_MAX, &d),
		      SKY_JOBKEY_B64_MAX - 1);
	SKY_EXPECT_EQ(unwrap(&a, blob, id64, id64, INT64_MAX, back, &rc, &d), SKY_JOBKEY_OK);
	SKY_EXPECT_EQ(sky_jobkey_wrap(&a.pub, key, id64, id64, 1, &g_rng, blob,
				      SKY_JOBKEY_B64_MAX - 1, &d),
		      SKY_ERANGE);
	board_free(&a);
}

/* Each refusal with its own reason, code and words. */
SKY_TEST(wrong_key_binding_and_tampering_are_told_apart)
{
	board a, b;
	board_make(&a);
	board_make(&b);
	unsigned char key[32], back[32], sentinel[32];
	char blob[SKY_JOBKEY_B64_MAX];
	sky_diag d;
	int rc;
	sky_jobkey_generate(&g_rng, key, NULL);
	SKY_EXPECT(sky_jobkey_wrap(&a.pub, key, "job-1", "board-a", 3, &g_rng, blob, sizeof blob,
				   NULL) > 0);
	memset(sentinel, 0x5A, sizeof sentinel);
	memcpy(back, sentinel, sizeof back);

	SKY_EXPECT_EQ(unwrap(&b, blob, "job-1", "board-a", 3, back, &rc, &d),
		      SKY_JOBKEY_WRONG_KEY);
	SKY_EXPECT_EQ(rc, SKY_EAUTH);
	SKY_EXPECT_MSG(strstr(d.msg, "another board key"), "%s", d.msg);
	SKY_EXPECT_EQ(unwrap(&a, blob, "job-2", "board-a", 3, back, &rc, &d), SKY_JOBKEY_JOB);
	SKY_EXPECT_EQ(rc, SKY_EAUTH);
	SKY_EXPECT_MSG(strstr(d.msg, "job 'job-1'"), "%s", d.msg);
	SKY_EXPECT_EQ(unwrap(&a, blob, "job-1", "board-b", 3, back, &rc, &d), SKY_JOBKEY_BOARD);
	SKY_EXPECT_EQ(rc, SKY_EAUTH);
	SKY_EXPECT_MSG(strstr(d.msg, "board 'board-a'"), "%s", d.msg);
	SKY_EXPECT_EQ(unwrap(&a, blob, "job-1", "board-a", 4, back, &rc, &d), SKY_JOBKEY_EPOCH);
	SKY_EXPECT_EQ(rc, SKY_EAUTH);
	SKY_EXPECT_MSG(strstr(d.msg, "epoch 3"), "%s", d.msg);
	SKY_EXPECT(memcmp(back, sentinel, 32) == 0); /* key untouched on refusal */

	/* tampering: edit the blob (ciphertext, tag, or the clear binding so that
	 * it names what the board expects), re-encoded as valid base64 */
	unsigned char raw[SKY_JOBKEY_B64_MAX], raw2[SKY_JOBKEY_B64_MAX];
	int n = sky_b64_decode(blob, strlen(blob), raw, sizeof raw);
	SKY_EXPECT_EQ(n, 84 + 5 + 7 + 48);
	struct {
		int off;
		unsigned char x;
		int64_t epoch;
		const char *job;
	} edits[] = {
		{n - 40, 0x01, 3, "job-1"}, /* wrapped key */
		{n - 1, 0x80, 3, "job-1"},  /* tag */
		{74, 0x07, 4, "job-1"},     /* epoch 3 -> 4 in the clear, unwrapped as epoch 4 */
		{87, 0x03, 3, "job-2"},     /* job "job-1" -> "job-2" */
	};
	char edited[SKY_JOBKEY_B64_MAX];
	for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
		memcpy(raw2, raw, (size_t)n);
		raw2[edits[i].off] ^= edits[i].x;
		SKY_EXPECT(sky_b64_encode(raw2, (size_t)n, edited, sizeof edited) > 0);
		SKY_EXPECT_EQ(unwrap(&a, edited, edits[i].job, "board-a", edits[i].epoch, back, &rc,
				     &d),
			      SKY_JOBKEY_TAMPERED);
		SKY_EXPECT_EQ(rc, SKY_EAUTH);
		SKY_EXPECT_MSG(strstr(d.msg, "does not authenticate"), "edit %zu: %s", i, d.msg);
	}
	/* another wrap's ephemeral point (a valid point, the wrong one) */
	char other[SKY_JOBKEY_B64_MAX];
	SKY_EXPECT(sky_jobkey_wrap(&a.pub, key, "job-1", "board-a", 3, &g_rng, other, sizeof other,
				   NULL) > 0);
	SKY_EXPECT_EQ(sky_b64_decode(other, strlen(other), raw2, sizeof raw2), n);
	memcpy(raw2 + 1, raw + 1, 65);
	sky_b64_encode(raw2, (size_t)n, edited, sizeof edited);
	SKY_EXPECT_EQ(unwrap(&a, edited, "job-1", "board-a", 3, back, &rc, &d),
		      SKY_JOBKEY_TAMPERED);
	/* a forger who claims b's blob is a's: key id rewritten to a's */
	char for_b[SKY_JOBKEY_B64_MAX];
	SKY_EXPECT(sky_jobkey_wrap(&b.pub, key, "job-1", "board-a", 3, &g_rng, for_b, sizeof for_b,
				   NULL) > 0);
	sky_b64_decode(for_b, strlen(for_b), raw2, sizeof raw2);
	memcpy(raw2 + 66, raw + 66, 8);
	sky_b64_encode(raw2, (size_t)n, edited, sizeof edited);
	SKY_EXPECT_EQ(unwrap(&a, edited, "job-1", "board-a", 3, back, &rc, &d),
		      SKY_JOBKEY_TAMPERED);
	SKY_EXPECT(memcmp(back, sentinel, 32) == 0);
	SKY_EXPECT(strcmp(sky_jobkey_refusal_name(SKY_JOBKEY_WRONG_KEY), "wrong_key") == 0);
	board_free(&a);
	board_free(&b);
}

SKY_TEST(malformed_blobs_are_format_refusals)
{
	board a;
	board_make(&a);
	unsigned char key[32], back[32], raw[SKY_JOBKEY_B64_MAX];
	char blob[SKY_JOBKEY_B64_MAX], edited[SKY_JOBKEY_B64_MAX];
	sky_diag d;
	int rc;
	sky_jobkey_generate(&g_rng, key, NULL);
	sky_jobkey_wrap(&a.pub, key, "job-1", "board-a", 3, &g_rng, blob, sizeof blob, NULL);
	int n = sky_b64_decode(blob, strlen(blob), raw, sizeof raw);

	SKY_EXPECT_EQ(unwrap(&a, "not base64!", "job-1", "board-a", 3, back, &rc, &d),
		      SKY_JOBKEY_FORMAT);
	SKY_EXPECT_EQ(rc, SKY_EFORMAT);
	SKY_EXPECT_EQ(unwrap(&a, "", "job-1", "board-a", 3, back, &rc, &d), SKY_JOBKEY_FORMAT);
	memcpy(edited, blob, strlen(blob) - 4); /* one base64 quantum short */
	edited[strlen(blob) - 4] = '\0';
	SKY_EXPECT_EQ(unwrap(&a, edited, "job-1", "board-a", 3, back, &rc, &d), SKY_JOBKEY_FORMAT);
	struct {
		int off;
		unsigned char v;
		const char *words;
	} edits[] = {
		{0, 2, "version 2"},          /* version */
		{82, 60, "do not fit"},       /* job length */
		{88, 0, "do not fit"},        /* board length */
		{84, '/', "illegal id"},      /* job "j/b-1" */
		{1, 0x05, "not a point"},     /* point encoding tag */
		{40, 0x00, "not a point"},    /* x coordinate: almost surely off the curve */
	};
	unsigned char raw2[SKY_JOBKEY_B64_MAX];
	for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
		memcpy(raw2, raw, (size_t)n);
		raw2[edits[i].off] = edits[i].v;
		sky_b64_encode(raw2, (size_t)n, edited, sizeof edited);
		SKY_EXPECT_EQ(unwrap(&a, edited, "job-1", "board-a", 3, back, &rc, &d),
			      SKY_JOBKEY_FORMAT);
		SKY_EXPECT_MSG(strstr(d.msg, edits[i].words), "edit %zu: %s", i, d.msg);
	}
	/* planner side refuses ids that are not topic segments */
	SKY_EXPECT_EQ(sky_jobkey_wrap(&a.pub, key, "a/b", "board-a", 3, &g_rng, blob, sizeof blob,
				      NULL),
		      SKY_EINVAL);
	SKY_EXPECT_EQ(sky_jobkey_wrap(&a.pub, key, "job-1", "board-a", -1, &g_rng, blob,
				      sizeof blob, NULL),
		      SKY_EINVAL);
	/* the board side needs the private key */
	sky_jobkey_refusal why;
	SKY_EXPECT_EQ(sky_jobkey_unwrap(&a.pub, blob, strlen(blob), "job-1", "board-a", 3, back,
					&why, NULL),
		      SKY_EINVAL);
	board_free(&a);
	sky_sign_rng_free(&g_rng);
}
