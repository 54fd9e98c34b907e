#include "sky_test.h"

#include "sky_crc32c.h"
#include "sky_frameseal.h"

#include <stdlib.h>
#include <string.h>

static const unsigned char k_key[32] = "0123456789abcdef0123456789abcdef";
static const unsigned char k_other[32] = "fedcba9876543210fedcba9876543210";

static sky_frame_hdr hdr(int dtype, uint32_t rows, uint32_t cols)
{
	sky_frame_hdr h;
	memset(&h, 0, sizeof h);
	h.direction = SKY_FRAME_FWD;
	h.dtype = dtype;
	h.ndim = 2;
	h.stage = 2;
	h.micro_batch = 3;
	h.shape[0] = rows;
	h.shape[1] = cols;
	strcpy(h.job, "job-7");
	h.epoch = 4;
	h.step = 11;
	return h;
}

static sky_frame_expect expect_of(const sky_frame_hdr *h)
{
	sky_frame_expect w;
	memset(&w, 0, sizeof w);
	w.job = h->job;
	w.epoch = h->epoch;
	w.step = h->step;
	w.direction = h->direction;
	w.stage = h->stage;
	w.micro_batches = h->micro_batch + 1;
	w.dtype = h->dtype;
	w.ndim = h->ndim;
	memcpy(w.shape, h->shape, sizeof w.shape);
	return w;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 131 + seed + (i >> 8));
}

/* Rewrites the header's CRC to match the (edited) payload, as an attacker
 * who edits a frame would. */
static void fix_crc(unsigned char *msg, size_t len)
{
	uint32_t c = sky_crc32c(0, msg + SKY_FRAME_HEADER_BYTES, len - SKY_FRAME_HEADER_BYTES);
	for (int i = 0; i < 4; i++)
		msg[SKY_FRAME_OFF_CRC + i] = (unsigned char)(c >> (8 * i));
}

static int contains(const unsigned char *hay, size_t n, const unsigned char *needle, size_t m)
{
	for (size_t i = 0; i + m <= n; i++)
		if (memcmp(hay + i, needle, m) == 0)
			return 1;
	return 0;
}

/* Plain and sealed, f32 and s8 (odd sizes, and one bigger than the
 * 32 KiB chunk so the chunked CRC and cipher passes are crossed). */
SKY_TEST(round_trips_plain_and_sealed)
{
	struct {
		int dtype;
		uint32_t rows, cols;
	} cases[] = {{SKY_FRAME_F32, 3, 5}, {SKY_FRAME_S8, 7, 13}, {SKY_FRAME_F32, 129, 257},
		     {SKY_FRAME_S8, 1, 1}};
	for (int sealed = 0; sealed < 2; sealed++) {
		sky_frame_key k;
		SKY_EXPECT_EQ(sky_frame_key_init(&k, sealed ? k_key : NULL), 0);
		SKY_EXPECT_EQ(k.sealed, sealed);
		for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
			sky_frame_hdr h = hdr(cases[c].dtype, cases[c].rows, cases[c].cols), back;
			size_t n = cases[c].rows * cases[c].cols * sky_frame_dtype_size(cases[c].dtype);
			size_t cap = sky_frame_packed_bytes(&k, n);
			SKY_EXPECT_EQ(cap, 128 + n + (sealed ? 28 : 0));
			unsigned char *src = malloc(n), *msg = malloc(cap), *dst = malloc(n);
			SKY_EXPECT(src && msg && dst);
			fill(src, n, (unsigned)c);
			sky_diag d;
			sky_diag_clear(&d);
			int rc = sky_frame_pack(&k, &h, src, n, msg, cap, &d);
			SKY_EXPECT_MSG(rc == (int)cap, "pack %d: %s", rc, d.msg);
			SKY_EXPECT_EQ(h.flags, sealed ? SKY_FRAME_FLAG_SEALED : 0);
			SKY_EXPECT_EQ(h.payload_bytes, n);
			SKY_EXPECT_EQ(h.crc, sky_crc32c(0, msg + 128, cap - 128));
			/* sealed: the payload bytes are nowhere in the message */
			if (sealed && n >= 16)
				SKY_EXPECT(!contains(msg, cap, src, 16));
			if (!sealed)
				SKY_EXPECT(memcmp(msg + 128, src, n) == 0);
			sky_frame_expect w = expect_of(&h);
			sky_frame_drop why = SKY_DROP_N;
			sky_diag_clear(&d);
			rc = sky_frame_unpack(&k, msg, cap, &w, &back, dst, n, &why, &d);
			SKY_EXPECT_MSG(rc == 0, "unpack %d (%s): %s", rc, sky_frame_drop_name(why),
				       d.msg);
			SKY_EXPECT_EQ(why, SKY_DROP_NONE);
			SKY_EXPECT(memcmp(dst, src, n) == 0);
			SKY_EXPECT_EQ(back.epoch, 4);
			SKY_EXPECT_EQ(back.step, 11);
			SKY_EXPECT_EQ(back.micro_batch, 3);
			SKY_EXPECT_EQ(back.crc, h.crc);
			free(src);
			free(msg);
			free(dst);
		}
		sky_frame_key_free(&k);
		sky_frame_key_free(&k); /* twice is fine */
	}
	/* k NULL is plaintext too, and reads what a plaintext key object wrote */
	sky_frame_hdr h = hdr(SKY_FRAME_F32, 2, 2), back;
	float v[4] = {1, -2, 3.5f, 0}, out[4];
	unsigned char msg[128 + 16];
	SKY_EXPECT_EQ(sky_frame_pack(NULL, &h, v, sizeof v, msg, sizeof msg, NULL), (int)sizeof msg);
	sky_frame_expect w = expect_of(&h);
	SKY_EXPECT_EQ(sky_frame_unpack(NULL, msg, sizeof msg, &w, &back, out, sizeof out, NULL, NULL),
		      0);
	SKY_EXPECT(memcmp(out, v, sizeof v) == 0);
}

typedef struct fixture {
	sky_frame_key k;
	sky_frame_hdr h;
	sky_frame_expect w;
	unsigned char src[6 * 40], msg[128 + 6 * 40 + 28], dst[6 * 40];
	size_t len, n;
} fixture;

static void setup(fixture *f, int sealed)
{
	memset(f, 0, sizeof *f);
	sky_frame_key_init(&f->k, sealed ? k_key : NULL);
	f->h = hdr(SKY_FRAME_F32, 6, 10);
	f->n = sizeof f->src;
	fill(f->src, f->n, 5);
	int rc = sky_frame_pack(&f->k, &f->h, f->src, f->n, f->msg, sizeof f->msg, NULL);
	SKY_EXPECT(rc > 0);
	f->len = rc > 0 ? (size_t)rc : 0;
	f->w = expect_of(&f->h);
}

/* Unpacks msg[0..len) against want into a sentinel-filled buffer; checks
 * the return code and the reason, and that a refusal before the payload
 * pass left the buffer untouched. */
static void expect_drop(fixture *f, const unsigned char *msg, size_t len,
			const sky_frame_expect *w, size_t cap, sky_frame_drop want_why, int want_rc,
			const char *want_msg, int line)
{
	unsigned char dst[sizeof f->dst];
	memset(dst, 0xEE, sizeof dst);
	sky_frame_hdr h;
	sky_frame_drop why = SKY_DROP_N;
	sky_diag d;
	sky_diag_clear(&d);
	int rc = sky_frame_unpack(&f->k, msg, len, w, &h, dst, cap, &why, &d);
	SKY_EXPECT_MSG(rc == want_rc && why == want_why,
		       "line %d: got rc %d why %s, expected rc %d why %s (%s)", line, rc,
		       sky_frame_drop_name(why), want_rc, sky_frame_drop_name(want_why), d.msg);
	SKY_EXPECT_MSG(!want_msg || strstr(d.msg, want_msg), "line %d: message '%s' lacks '%s'",
		       line, d.msg, want_msg);
	if (want_why != SKY_DROP_NONE && want_why != SKY_DROP_CHECKSUM && want_why != SKY_DROP_AUTH) {
		int untouched = 1;
		for (size_t i = 0; i < sizeof dst; i++)
			untouched &= dst[i] == 0xEE;
		SKY_EXPECT_MSG(untouched, "line %d: refused, but the buffer was written", line);
	}
}
#define EXPECT_DROP(f, msg, len, w, cap, why, rc, text) \
	expect_drop(f, msg, len, w, cap, why, rc, text, __LINE__)

/* Every reason in sky_frame_drop, plain and sealed, each with the code and
 * the words sky_frameseal.h promises. */
SKY_TEST(every_refusal_has_its_reason)
{
	static fixture f;
	unsigned char m[sizeof f.msg + 1];
	for (int sealed = 0; sealed < 2; sealed++) {
		setup(&f, sealed);
		sky_frame_expect w = f.w;
		/* accepted as is */
		EXPECT_DROP(&f, f.msg, f.len, &w, f.n, SKY_DROP_NONE, 0, NULL);

		/* FORMAT: bad magic; a v1 frame; a byte too many */
		memcpy(m, f.msg, f.len);
		m[0] = 'X';
		EXPECT_DROP(&f, m, f.len, &w, f.n, SKY_DROP_FORMAT, SKY_EFORMAT, "magic");
		memcpy(m, f.msg, f.len);
		m[4] = 1;
		EXPECT_DROP(&f, m, f.len, &w, f.n, SKY_DROP_FORMAT, SKY_EFORMAT, "version 1");
		memcpy(m, f.msg, f.len);
		m[f.len] = 0;
		EXPECT_DROP(&f, m, f.len + 1, &w, f.n, SKY_DROP_FORMAT, SKY_EFORMAT, "only");

		/* TRUNCATED: shorter than the header; one payload byte short */
		EXPECT_DROP(&f, f.msg, 100, &w, f.n, SKY_DROP_TRUNCATED, SKY_EFORMAT, "header needs");
		EXPECT_DROP(&f, f.msg, f.len - 1, &w, f.n, SKY_DROP_TRUNCATED, SKY_EFORMAT,
			    "declares");
		EXPECT_DROP(&f, NULL, 0, &w, f.n, SKY_DROP_TRUNCATED, SKY_EFORMAT, NULL);

		/* OVERSIZE: the receiver's buffer is one byte smaller */
		EXPECT_DROP(&f, f.msg, f.len, &w, f.n - 1, SKY_DROP_OVERSIZE, SKY_ERANGE, "buffer");

		/* the plan's expectations */
		w = f.w;
		w.job = "job-8";
		EXPECT_DROP(&f, f.msg, f.len, &w, f.n, SKY_DROP_JOB, SKY_ESTATE, "job 'job-7'");
		w = f.w;
		w.epoch = 5;
		EXPECT_DROP(&f, f.msg, f.len, &w, f.n, SKY_DROP_EPOCH, SKY_ESTATE, "epoch 4");
		w = f.w;
		w.step = 10;
		EXPECT_DROP(&f, f.msg, f.len, &w, f.n, SKY_DROP_STEP, SKY_ESTATE, "step 11");
		w = f.w;
		w.micro_batches = 3; /* index 3 of 3 */
		EXPECT_DROP(&f, f.msg, f.len, &w, f.n, SKY_DROP_MICRO, SKY_ESTATE, "micro-batch 3");
		w = f.w;
		w.stage = 1;
		EXPECT_DROP(&f, f.msg, f.len, &w, f.n, SKY_DROP_ROUTE, SKY_ESTATE, "stage 2");
		w = f.w;
		w.direction = SKY_FRAME_BWD;
		EXPECT_DROP(&f, f.msg, f.len, &w, f.n, SKY_DROP_ROUTE, SKY_ESTATE, "fwd");
		w = f.w;
		w.shape[1] = 11;
		EXPECT_DROP(&f, f.msg, f.len, &w, f.n, SKY_DROP_SHAPE, SKY_ESTATE, "shape");
		w = f.w;
		w.dtype = SKY_FRAME_S32;
		EXPECT_DROP(&f, f.msg, f.len, &w, f.n, SKY_DROP_SHAPE, SKY_ESTATE, "dtype");
		w = f.w;

		/* CHECKSUM: a payload bit flipped on the way; the CRC field itself edited */
		memcpy(m, f.msg, f.len);
		m[128 + 50] ^= 0x04;
		EXPECT_DROP(&f, m, f.len, &w, f.n, SKY_DROP_CHECKSUM, SKY_EIO, "CRC32C");
		memcpy(m, f.msg, f.len);
		m[SKY_FRAME_OFF_CRC] ^= 1;
		EXPECT_DROP(&f, m, f.len, &w, f.n, SKY_DROP_CHECKSUM, SKY_EIO, "CRC32C");
		sky_frame_key_free(&f.k);
	}
}

/* AUTH: every way the tag or the seal can fail; the CRC is made right each
 * time so the checksum does not catch it first. */
SKY_TEST(sealed_frames_refuse_edits_by_tag)
{
	static fixture f;
	unsigned char m[sizeof f.msg];
	setup(&f, 1);
	sky_frame_expect w = f.w;
	/* a ciphertext, nonce or tag byte */
	size_t at[] = {128 + 3 /* nonce */, 128 + 12 + 77 /* ciphertext */, f.len - 1 /* tag */};
	for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
		memcpy(m, f.msg, f.len);
		m[at[i]] ^= 0x80;
		fix_crc(m, f.len);
		EXPECT_DROP(&f, m, f.len, &w, f.n, SKY_DROP_AUTH, SKY_EAUTH, "tag does not verify");
	}
	/* header fields are associated data: replaying micro-batch 3 of step 11
	 * as step 12, or as micro-batch 0, or to stage 3 */
	struct {
		int off;
		unsigned char v;
	} edits[] = {{SKY_FRAME_OFF_STEP, 12}, {12, 0}, {8, 3}, {SKY_FRAME_OFF_EPOCH, 5}};
	for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
		memcpy(m, f.msg, f.len);
		m[edits[i].off] = edits[i].v;
		fix_crc(m, f.len);
		sky_frame_expect w2 = f.w;
		w2.step = i == 0 ? 12 : w2.step;
		w2.stage = i == 2 ? 3 : w2.stage;
		w2.epoch = i == 3 ? 5 : w2.epoch;
		EXPECT_DROP(&f, m, f.len, &w2, f.n, SKY_DROP_AUTH, SKY_EAUTH, "tag does not verify");
	}
	/* the plaintext is zeroed after an AUTH refusal */
	memcpy(m, f.msg, f.len);
	m[128 + 20] ^= 1;
	fix_crc(m, f.len);
	unsigned char dst[sizeof f.dst];
	sky_frame_hdr h;
	SKY_EXPECT_EQ(sky_frame_unpack(&f.k, m, f.len, &w, &h, dst, sizeof dst, NULL, NULL), SKY_EAUTH);
	int zero = 1;
	for (size_t i = 0; i < sizeof dst; i++)
		zero &= dst[i] == 0;
	SKY_EXPECT(zero);
	sky_frame_key_free(&f.k);
}

/* The ACL lets any board read and write every job's stage topics; the key
 * is what keeps a board outside the job out. */
SKY_TEST(outsider_can_neither_read_nor_inject)
{
	static fixture member, outsider_plain;
	setup(&member, 1);
	sky_frame_expect w = member.w;
	unsigned char dst[sizeof member.dst];
	sky_frame_hdr h;
	sky_frame_drop why;
	sky_diag d;

	/* read: without the key, or with another job's key, a frame stays shut */
	sky_frame_key none, other;
	sky_frame_key_init(&none, NULL);
	sky_frame_key_init(&other, k_other);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_frame_unpack(&none, member.msg, member.len, &w, &h, dst, sizeof dst, &why,
				       &d),
		      SKY_EAUTH);
	SKY_EXPECT_EQ(why, SKY_DROP_AUTH);
	SKY_EXPECT_MSG(strstr(d.msg, "no job key"), "%s", d.msg);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_frame_unpack(&other, member.msg, member.len, &w, &h, dst, sizeof dst, &why,
				       &d),
		      SKY_EAUTH);
	SKY_EXPECT_EQ(why, SKY_DROP_AUTH);
	SKY_EXPECT(!contains(member.msg, member.len, member.src, 16));

	/* inject: a frame sealed under another key, or a plaintext frame, with
	 * a header that matches the plan in every field */
	sky_frame_hdr fh = member.h;
	unsigned char forged[sizeof member.msg];
	int len = sky_frame_pack(&other, &fh, member.src, member.n, forged, sizeof forged, NULL);
	SKY_EXPECT(len > 0);
	EXPECT_DROP(&member, forged, (size_t)len, &w, member.n, SKY_DROP_AUTH, SKY_EAUTH,
		    "tag does not verify");
	setup(&outsider_plain, 0);
	EXPECT_DROP(&member, outsider_plain.msg, outsider_plain.len, &w, member.n, SKY_DROP_AUTH,
		    SKY_EAUTH, "must be sealed");
	/* and a plaintext receiver refuses a sealed frame it cannot check */
	EXPECT_DROP(&outsider_plain, member.msg, member.len, &w, member.n, SKY_DROP_AUTH, SKY_EAUTH,
		    "no job key");
	sky_frame_key_free(&none);
	sky_frame_key_free(&other);
	sky_frame_key_free(&member.k);
	sky_frame_key_free(&outsider_plain.k);
}

/* Nonces never repeat: the counter within a key object, a fresh random
 * prefix per object. A re-delivered frame opens again (the caller dedups). */
SKY_TEST(nonces_are_unique_and_redelivery_opens)
{
	sky_frame_key a, b;
	SKY_EXPECT_EQ(sky_frame_key_init(&a, k_key), 0);
	SKY_EXPECT_EQ(sky_frame_key_init(&b, k_key), 0);
	SKY_EXPECT(memcmp(a.prefix, b.prefix, sizeof a.prefix) != 0);
	sky_frame_hdr h = hdr(SKY_FRAME_S8, 4, 8), back;
	unsigned char src[32], m1[128 + 60], m2[128 + 60], m3[128 + 60], dst[32];
	fill(src, sizeof src, 1);
	SKY_EXPECT_EQ(sky_frame_pack(&a, &h, src, 32, m1, sizeof m1, NULL), 188);
	SKY_EXPECT_EQ(sky_frame_pack(&a, &h, src, 32, m2, sizeof m2, NULL), 188);
	SKY_EXPECT_EQ(sky_frame_pack(&b, &h, src, 32, m3, sizeof m3, NULL), 188);
	SKY_EXPECT(memcmp(m1 + 128, m2 + 128, 12) != 0); /* same object: counter 0, 1 */
	SKY_EXPECT(memcmp(m1 + 128, m2 + 128, 8) == 0);  /* same prefix */
	SKY_EXPECT_EQ(m1[128 + 11], 0);
	SKY_EXPECT_EQ(m2[128 + 11], 1);
	SKY_EXPECT(memcmp(m1 + 128, m3 + 128, 8) != 0);  /* another object: another prefix */
	SKY_EXPECT(memcmp(m1 + 140, m2 + 140, 32) != 0); /* so the ciphertexts differ */
	sky_frame_expect w = expect_of(&h);
	/* b opens what a sealed (same key), twice */
	SKY_EXPECT_EQ(sky_frame_unpack(&b, m1, sizeof m1, &w, &back, dst, 32, NULL, NULL), 0);
	SKY_EXPECT_EQ(sky_frame_unpack(&b, m1, sizeof m1, &w, &back, dst, 32, NULL, NULL), 0);
	SKY_EXPECT(memcmp(dst, src, 32) == 0);
	/* the 2^32-th seal of one object is refused rather than wrap */
	a.counter = UINT32_MAX;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_frame_pack(&a, &h, src, 32, m1, sizeof m1, &d), SKY_ERANGE);
	SKY_EXPECT_MSG(strstr(d.msg, "2^32-1"), "%s", d.msg);
	sky_frame_key_free(&a);
	sky_frame_key_free(&b);
}

SKY_TEST(pack_refuses_bad_input)
{
	sky_frame_key k;
	sky_frame_key_init(&k, k_key);
	sky_frame_hdr h = hdr(SKY_FRAME_F32, 2, 3);
	unsigned char src[24] = {0}, out[128 + 24 + 28];
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_frame_pack(&k, &h, src, 20, out, sizeof out, &d), SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "need 24"), "%s", d.msg);
	SKY_EXPECT_EQ(sky_frame_pack(&k, &h, src, 24, out, sizeof out - 1, NULL), SKY_ERANGE);
	h.epoch = -3;
	SKY_EXPECT_EQ(sky_frame_pack(&k, &h, src, 24, out, sizeof out, NULL), SKY_EINVAL);
	sky_frame_key_free(&k);
	sky_frame_key unready;
	memset(&unready, 0, sizeof unready);
	h = hdr(SKY_FRAME_F32, 2, 3);
	SKY_EXPECT_EQ(sky_frame_pack(&unready, &h, src, 24, out, sizeof out, NULL), SKY_ESTATE);
	SKY_EXPECT(strcmp(sky_frame_drop_name(SKY_DROP_CHECKSUM), "checksum") == 0);
	SKY_EXPECT(strcmp(sky_frame_drop_name(SKY_DROP_N), "?") == 0);
	for (int r = 0; r < SKY_DROP_N; r++)
		SKY_EXPECT(sky_frame_drop_name((sky_frame_drop)r)[0] != '?');
}

/* A step's frames go out and come in without Sky calling the allocator
 * (the arena is sealed by then). */
SKY_TEST(pack_and_unpack_do_not_allocate)
{
	static unsigned char src[64 * 1024], msg[128 + sizeof src + 28], dst[sizeof src];
	sky_frame_key k;
	sky_frame_key_init(&k, k_key);
	sky_frame_hdr h = hdr(SKY_FRAME_F32, 128, 128), back;
	sky_frame_expect w = expect_of(&h);
	fill(src, sizeof src, 3);
	unsigned long before = sky_test_allocs();
	for (int i = 0; i < 4; i++) {
		SKY_EXPECT(sky_frame_pack(&k, &h, src, sizeof src, msg, sizeof msg, NULL) > 0);
		SKY_EXPECT_EQ(sky_frame_unpack(&k, msg, sizeof msg, &w, &back, dst, sizeof dst, NULL,
					       NULL),
			      0);
	}
	SKY_EXPECT_EQ(sky_test_allocs(), before);
	SKY_EXPECT(memcmp(src, dst, sizeof src) == 0);
	sky_frame_key_free(&k);
}

/* The AES-NI/PCLMULQDQ path writes exactly what Mbed TLS's GCM writes, for
 * the same key and nonce, at every length class (under one block, odd
 * tails, the 128-byte main loop, across 32 KiB chunks), and each opens the
 * other's frames. Where the CPU lacks the instructions both keys are Mbed
 * TLS and this compares it with itself. */
SKY_TEST(accelerated_gcm_matches_mbedtls)
{
	enum { MAX = 3 * 32 * 1024 + 200 };
	static unsigned char src[MAX], m1[128 + MAX + 28], m2[128 + MAX + 28], dst[MAX];
	sky_frame_key fast, ref;
	SKY_EXPECT_EQ(sky_frame_key_init(&fast, k_key), 0);
	SKY_EXPECT_EQ(sky_frame_key_init(&ref, k_key), 0);
	ref.accel = 0;
	memcpy(ref.prefix, fast.prefix, sizeof ref.prefix);
	printf("# sealing with %s, reference %s\n", sky_frame_key_impl(&fast), sky_frame_key_impl(&ref));
	fill(src, sizeof src, 77);
	static const uint32_t lens[] = {1, 2, 15, 16, 17, 31, 33, 64, 100, 127, 128, 129, 255, 256,
					257, 1000, 4095, 32768, 32769, MAX};
	int bad = 0;
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
		sky_frame_hdr h = hdr(SKY_FRAME_S8, 1, lens[i]), back;
		sky_frame_expect w = expect_of(&h);
		int a = sky_frame_pack(&fast, &h, src, lens[i], m1, sizeof m1, NULL);
		int b = sky_frame_pack(&ref, &h, src, lens[i], m2, sizeof m2, NULL);
		if (a != b || a <= 0 || memcmp(m1, m2, (size_t)a) != 0) {
			bad++;
			printf("# length %u: frames differ\n", lens[i]);
			continue;
		}
		m1[128 + 12 + lens[i] / 2] ^= 1; /* keep m2 intact, spoil m1 under a fixed CRC */
		uint32_t c = sky_crc32c(0, m1 + 128, (size_t)a - 128);
		for (int j = 0; j < 4; j++)
			m1[SKY_FRAME_OFF_CRC + j] = (unsigned char)(c >> (8 * j));
		bad += sky_frame_unpack(&fast, m2, (size_t)a, &w, &back, dst, lens[i], NULL, NULL) != 0;
		bad += memcmp(dst, src, lens[i]) != 0;
		bad += sky_frame_unpack(&ref, m2, (size_t)a, &w, &back, dst, lens[i], NULL, NULL) != 0;
		bad += sky_frame_unpack(&fast, m1, (size_t)a, &w, &back, dst, lens[i], NULL, NULL) !=
		       SKY_EAUTH;
		bad += sky_frame_unpack(&ref, m1, (size_t)a, &w, &back, dst, lens[i], NULL, NULL) !=
		       SKY_EAUTH;
	}
	SKY_EXPECT_EQ(bad, 0);
	sky_frame_key_free(&fast);
	sky_frame_key_free(&ref);
}
