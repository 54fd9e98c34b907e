/* Checkpoint images (see sky_ckptmsg.h): safetensors = 8-byte little-endian
 * header length, the header JSON (padded with spaces to 8 bytes), then the
 * tensor bytes. */
#include "sky_ckptmsg.h"

#include "sky_json.h"

#include <mbedtls/sha256.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the placeholder encode writes first and then overwrites with the hash */
static const char ZERO_SHA[] = "0000000000000000000000000000000000000000000000000000000000000000";

void sky_ckpt_sha256_hex(const void *buf, size_t len, char *hex)
{
	unsigned char h[32];
	mbedtls_sha256_ret(buf, len, h, 0);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", h[i]);
}

size_t sky_ckpt_bound(int nt, size_t floats)
{
	/* a tensor's header entry is under 100 bytes; metadata under 512 */
	return 8 + 1024 + (size_t)nt * 128 + floats * sizeof(float);
}

static void tensor_name(const sky_ckpt_tensor *t, char *buf, size_t cap)
{
	if (t->vec < 0)
		snprintf(buf, cap, "p.%d", t->blk);
	else
		snprintf(buf, cap, "s%d.%d", t->vec, t->blk);
}

int sky_ckpt_encode(sky_ckpt_meta *m, const sky_ckpt_tensor *t, int nt, unsigned char *buf,
		    size_t cap, size_t *len, sky_diag *d)
{
	char v[32], name[32];
	int rc = 0;
	cJSON *doc = sky_json_new_object(), *meta = doc ? cJSON_AddObjectToObject(doc, "__metadata__")
						     : NULL;
	int ok = meta != NULL;
	ok = ok && cJSON_AddStringToObject(meta, "format", "sky-ckpt");
	ok = ok && cJSON_AddStringToObject(meta, "sky_job", m->job);
#define META_INT(key, val) \
	do { \
		snprintf(v, sizeof v, "%lld", (long long)(val)); \
		ok = ok && cJSON_AddStringToObject(meta, key, v); \
	} while (0)
	META_INT("sky_epoch", m->epoch);
	META_INT("sky_step", m->step);
	META_INT("sky_blk0", m->blk0);
	META_INT("sky_nblk", m->nblk);
	META_INT("sky_nvec", m->nvec);
#undef META_INT
	ok = ok && cJSON_AddStringToObject(meta, "sky_sha256", ZERO_SHA);
	size_t off = 0;
	for (int i = 0; i < nt && ok; i++) {
		cJSON *e = cJSON_AddObjectToObject(doc, (tensor_name(&t[i], name, sizeof name), name));
		double shape = (double)t[i].n, offs[2] = {(double)off,
							  (double)(off + t[i].n * sizeof(float))};
		ok = e && cJSON_AddStringToObject(e, "dtype", "F32") &&
		     cJSON_AddItemToObject(e, "shape", cJSON_CreateDoubleArray(&shape, 1)) &&
		     cJSON_AddItemToObject(e, "data_offsets", cJSON_CreateDoubleArray(offs, 2));
		off += t[i].n * sizeof(float);
	}
	if (!ok) {
		rc = sky_diag_set(d, SKY_ENOMEM, "checkpoint: header does not fit the JSON pool");
		goto exit;
	}
	if (cap < 16) {
		rc = sky_diag_set(d, SKY_ERANGE, "checkpoint: %zu-byte buffer", cap);
		goto exit;
	}
	int hn = sky_json_print(doc, (char *)buf + 8, cap - 8);
	if (hn < 0) {
		rc = sky_diag_set(d, SKY_ERANGE, "checkpoint: header over %zu bytes", cap);
		goto exit;
	}
	size_t hlen = ((size_t)hn + 7) & ~(size_t)7;
	if (8 + hlen + off > cap) {
		rc = sky_diag_set(d, SKY_ERANGE, "checkpoint: %zu bytes do not fit %zu",
				  8 + hlen + off, cap);
		goto exit;
	}
	memset(buf + 8 + hn, ' ', hlen - (size_t)hn);
	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
	unsigned char *data = buf + 8 + hlen;
	for (int i = 0; i < nt; i++) {
		memcpy(data, t[i].data, t[i].n * sizeof(float));
		data += t[i].n * sizeof(float);
	}
	sky_ckpt_sha256_hex(buf + 8 + hlen, off, m->sha);
	/* the placeholder is the only run of 64 zeros in the header: names and
	 * numbers are shorter */
	unsigned char *at = NULL;
	for (size_t i = 8; i + SKY_CKPT_SHA_HEX <= 8 + hlen && !at; i++)
		if (!memcmp(buf + i, ZERO_SHA, SKY_CKPT_SHA_HEX))
			at = buf + i;
	if (!at) {
		rc = sky_diag_set(d, SKY_EFORMAT, "checkpoint: hash placeholder lost");
		goto exit;
	}
	memcpy(at, m->sha, SKY_CKPT_SHA_HEX);
	*len = 8 + hlen + off;
exit:
	sky_json_free(doc);
	return rc;
}

/* a decimal metadata string into [lo, hi] */
static int meta_i64(const cJSON *meta, const char *key, int64_t lo, int64_t hi, int64_t *out,
		    sky_diag *d)
{
	char s[32], *end;
	int rc = sky_json_str(meta, key, s, sizeof s, "checkpoint metadata", d);
	if (rc)
		return SKY_EFORMAT;
	long long v = strtoll(s, &end, 10);
	if (!s[0] || *end || v < lo || v > hi)
		return sky_diag_set(d, SKY_EFORMAT, "checkpoint: %s '%s' out of range", key, s);
	*out = v;
	return 0;
}

/* (vec, blk) -> a bit in seen (parameters and SKY_CKPT_MAX_VECS vectors) */
static int seen_bit(int vec, int blk, int blk0) { return (blk - blk0) * (1 + SKY_CKPT_MAX_VECS) + vec + 1; }

int sky_ckpt_parse_header(const unsigned char *img, size_t len, sky_ckpt_meta *m,
			  sky_ckpt_tensor *t, int cap, int *nt, sky_diag *d)
{
	memset(m, 0, sizeof *m);
	*nt = 0;
	if (!img || len < 8)
		return sky_diag_set(d, SKY_EFORMAT, "checkpoint: %zu bytes", len);
	uint64_t hlen = 0;
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | img[i];
	if (hlen < 2 || hlen > len - 8 || hlen > SKY_CKPT_HEADER_MAX)
		return sky_diag_set(d, SKY_EFORMAT, "checkpoint: header of %llu bytes in %zu (at most %u)",
				    (unsigned long long)hlen, len, SKY_CKPT_HEADER_MAX);
	cJSON *doc = sky_json_parse((const char *)img + 8, (size_t)hlen, d);
	if (!doc)
		return SKY_EFORMAT;
	const unsigned char *data = img + 8 + hlen;
	size_t dlen = len - 8 - (size_t)hlen, at = 0;
	int rc = 0, n = 0;
	int64_t v[5];
	/* which (vector, block) pairs were seen: each exactly once */
	unsigned char seen[SKY_CKPT_MAX_BLOCKS * (1 + SKY_CKPT_MAX_VECS)];
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(doc, "__metadata__");
	if (!cJSON_IsObject(meta)) {
		rc = sky_diag_set(d, SKY_EFORMAT, "checkpoint: no __metadata__");
		goto exit;
	}
	if ((rc = sky_json_str(meta, "sky_job", m->job, sizeof m->job, "checkpoint", d)) ||
	    (rc = sky_json_str(meta, "sky_sha256", m->sha, sizeof m->sha, "checkpoint", d)) ||
	    (rc = meta_i64(meta, "sky_epoch", 0, SKY_JSON_INT_MAX, &v[0], d)) ||
	    (rc = meta_i64(meta, "sky_step", 0, SKY_JSON_INT_MAX, &v[1], d)) ||
	    (rc = meta_i64(meta, "sky_blk0", 0, SKY_CKPT_MAX_BLOCKS - 1, &v[2], d)) ||
	    (rc = meta_i64(meta, "sky_nblk", 1, SKY_CKPT_MAX_BLOCKS, &v[3], d)) ||
	    (rc = meta_i64(meta, "sky_nvec", 0, SKY_CKPT_MAX_VECS, &v[4], d))) {
		rc = SKY_EFORMAT;
		goto exit;
	}
	m->epoch = v[0];
	m->step = v[1];
	m->blk0 = (int)v[2];
	m->nblk = (int)v[3];
	m->nvec = (int)v[4];
	if (m->blk0 + m->nblk > SKY_CKPT_MAX_BLOCKS) {
		rc = sky_diag_set(d, SKY_EFORMAT, "checkpoint: blocks %d+%d past %d", m->blk0, m->nblk,
				  SKY_CKPT_MAX_BLOCKS);
		goto exit;
	}
	memset(seen, 0, (size_t)m->nblk * (1 + SKY_CKPT_MAX_VECS));
	for (const cJSON *e = doc->child; e; e = e->next) {
		if (!strcmp(e->string, "__metadata__"))
			continue;
		int vec = -1, blk = -1, used = 0;
		char dtype[8] = "";
		const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
		const cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
		if (sscanf(e->string, "p.%d%n", &blk, &used) != 1 || e->string[used]) {
			used = 0;
			if (sscanf(e->string, "s%d.%d%n", &vec, &blk, &used) != 2 || e->string[used] ||
			    vec < 0 || vec >= m->nvec)
				blk = -1;
		}
		if (blk < m->blk0 || blk >= m->blk0 + m->nblk || n >= cap ||
		    sky_json_str(e, "dtype", dtype, sizeof dtype, e->string, NULL) ||
		    strcmp(dtype, "F32") || cJSON_GetArraySize(sh) != 1 || cJSON_GetArraySize(of) != 2 ||
		    !cJSON_IsNumber(cJSON_GetArrayItem(sh, 0)) ||
		    !cJSON_IsNumber(cJSON_GetArrayItem(of, 0)) ||
		    !cJSON_IsNumber(cJSON_GetArrayItem(of, 1))) {
			rc = sky_diag_set(d, SKY_EFORMAT, "checkpoint: tensor '%.40s' is not one of ours",
					  e->string);
			goto exit;
		}
		unsigned char *bit = &seen[seen_bit(vec, blk, m->blk0)];
		if (*bit) {
			rc = sky_diag_set(d, SKY_EFORMAT, "checkpoint: tensor '%s' twice", e->string);
			goto exit;
		}
		*bit = 1;
		double cnt = cJSON_GetArrayItem(sh, 0)->valuedouble;
		double a = cJSON_GetArrayItem(of, 0)->valuedouble, b = cJSON_GetArrayItem(of, 1)->valuedouble;
		if (!(cnt >= 1)) {
			rc = sky_diag_set(d, SKY_EFORMAT, "checkpoint: tensor '%s' is empty (%g elements)",
					  e->string, cnt);
			goto exit;
		}
		/* the tensors tile the data in header order, as encode writes them:
		 * no gap, no overlap, nothing after the last */
		if (!(cnt == (double)(size_t)cnt && a == (double)at && b - a == 4 * cnt &&
		      b <= (double)dlen)) {
			rc = sky_diag_set(d, SKY_EFORMAT,
					  "checkpoint: tensor '%s' at bytes [%.0f, %.0f) of %zu does not "
					  "follow the one before (at %zu) with its %.0f floats",
					  e->string, a, b, dlen, at, cnt);
			goto exit;
		}
		at = (size_t)b;
		t[n++] = (sky_ckpt_tensor){vec, blk, (const float *)(data + (size_t)a), (size_t)cnt};
	}
	if (n != m->nblk * (1 + m->nvec) || at != dlen) {
		rc = sky_diag_set(d, SKY_EFORMAT,
				  "checkpoint: %d tensors in %zu bytes, blocks %d+%d with %d state "
				  "vectors declare %d in %zu",
				  n, dlen, m->blk0, m->nblk, m->nvec, m->nblk * (1 + m->nvec), at);
		goto exit;
	}
	/* a block's state vectors are as long as its parameters */
	for (int i = 0; i < n; i++)
		for (int k = 0; k < n; k++)
			if (t[i].blk == t[k].blk && t[i].n != t[k].n) {
				rc = sky_diag_set(d, SKY_EFORMAT,
						  "checkpoint: block %d's tensors differ in length "
						  "(%zu and %zu floats)",
						  t[i].blk, t[i].n, t[k].n);
				goto exit;
			}
	*nt = n;
exit:
	sky_json_free(doc);
	return rc;
}

int sky_ckpt_verify(const unsigned char *img, size_t len, const sky_ckpt_meta *m, sky_diag *d)
{
	uint64_t hlen = 0;
	for (int i = 7; i >= 0 && len >= 8; i--)
		hlen = hlen << 8 | img[i];
	if (len < 8 || hlen > len - 8)
		return sky_diag_set(d, SKY_EFORMAT, "checkpoint: %zu bytes", len);
	char hex[SKY_CKPT_SHA_HEX + 1];
	sky_ckpt_sha256_hex(img + 8 + hlen, len - 8 - (size_t)hlen, hex);
	if (strcmp(hex, m->sha) != 0)
		return sky_diag_set(d, SKY_EAUTH,
				    "SHA-256 mismatch: the header says %.12s..., the tensor bytes hash "
				    "to %.12s...",
				    m->sha, hex);
	return 0;
}

int sky_ckpt_parse(const unsigned char *img, size_t len, sky_ckpt_meta *m, sky_ckpt_tensor *t,
		   int cap, int *nt, sky_diag *d)
{
	int rc = sky_ckpt_parse_header(img, len, m, t, cap, nt, d);
	if (!rc && (rc = sky_ckpt_verify(img, len, m, d)) != 0)
		*nt = 0;
	return rc;
}
