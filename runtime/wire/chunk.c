#include "sky_chunk.h"

#include "sky_file.h"
#include "sky_json.h"
#include "sky_le.h"
#include "sky_topics.h"

#include <mbedtls/sha256.h>
#include <stdio.h>
#include <string.h>

const char *sky_chunk_reason_name(sky_chunk_reason r)
{
	static const char *const k[] = {"ok", "oversize", "malformed", "bad_hash", "unasked",
					 "bad_index"};
	return (unsigned)r < SKY_CHUNK_NREASONS ? k[r] : "?";
}

uint32_t sky_chunk_count(uint64_t file_bytes, uint32_t chunk_bytes)
{
	if (chunk_bytes == 0)
		return 0;
	uint64_t n = (file_bytes + chunk_bytes - 1) / chunk_bytes;
	return n == 0 ? 1 : (uint32_t)n;
}

void sky_sha256(const void *data, size_t len, unsigned char sha[32])
{
	mbedtls_sha256_ret(data, len, sha, 0);
}

/* Bytes of chunk index (the last one holds the remainder). */
static uint64_t chunk_len(uint64_t file_bytes, uint32_t chunk_bytes, uint32_t index)
{
	uint64_t at = (uint64_t)index * chunk_bytes;
	if (at >= file_bytes)
		return 0;
	return file_bytes - at < chunk_bytes ? file_bytes - at : chunk_bytes;
}

int sky_chunk_encode(int kind, const unsigned char *file, uint64_t file_bytes,
		     const unsigned char file_sha[32], uint32_t chunk_bytes, uint32_t index,
		     unsigned char *out, size_t cap)
{
	if (kind < SKY_CHUNK_MODEL || kind > SKY_CHUNK_PART || chunk_bytes < SKY_CHUNK_MIN_BYTES ||
	    chunk_bytes > SKY_CHUNK_MAX_PAYLOAD || file_bytes > SKY_CHUNK_MAX_FILE ||
	    index >= sky_chunk_count(file_bytes, chunk_bytes))
		return SKY_EINVAL;
	uint64_t n = chunk_len(file_bytes, chunk_bytes, index);
	if (cap < SKY_CHUNK_HEADER_BYTES + n)
		return SKY_ERANGE;
	memset(out, 0, SKY_CHUNK_HEADER_BYTES);
	memcpy(out, "SKYC", 4);
	out[4] = 1;
	out[5] = (unsigned char)kind;
	sky_le_put32(out + 8, index);
	sky_le_put32(out + 12, sky_chunk_count(file_bytes, chunk_bytes));
	sky_le_put32(out + 16, chunk_bytes);
	sky_le_put32(out + 20, (uint32_t)n);
	sky_le_put64(out + 24, file_bytes);
	memcpy(out + 32, file_sha, 32);
	const unsigned char *src = file + (size_t)index * chunk_bytes;
	sky_sha256(src, (size_t)n, out + 64);
	memcpy(out + SKY_CHUNK_HEADER_BYTES, src, (size_t)n);
	return (int)(SKY_CHUNK_HEADER_BYTES + n);
}

int sky_chunk_decode(const unsigned char *buf, size_t len, sky_chunk *c, sky_chunk_reason *why,
		     sky_diag *d)
{
	sky_chunk_reason dummy;
	if (!why)
		why = &dummy;
	memset(c, 0, sizeof *c);
	*why = SKY_CHUNK_OVERSIZE;
	if (len > SKY_CHUNK_MAX_BYTES)
		return sky_diag_set(d, SKY_ERANGE, "chunk: %zu bytes, limit %u", len,
				    SKY_CHUNK_MAX_BYTES);
	*why = SKY_CHUNK_MALFORMED;
	if (!buf || len < SKY_CHUNK_HEADER_BYTES || memcmp(buf, "SKYC", 4) != 0 || buf[4] != 1 ||
	    buf[6] != 0 || buf[7] != 0)
		return sky_diag_set(d, SKY_EFORMAT,
				    "chunk: no chunk header (magic, version 1, reserved 0)");
	c->kind = buf[5];
	c->index = sky_le_get32(buf + 8);
	c->total = sky_le_get32(buf + 12);
	c->chunk_bytes = sky_le_get32(buf + 16);
	uint32_t n = sky_le_get32(buf + 20);
	c->file_bytes = sky_le_get64(buf + 24);
	memcpy(c->file_sha, buf + 32, 32);
	memcpy(c->sha, buf + 64, 32);
	if (c->kind < SKY_CHUNK_MODEL || c->kind > SKY_CHUNK_PART)
		return sky_diag_set(d, SKY_EFORMAT, "chunk: kind %d unknown", c->kind);
	if (c->chunk_bytes < SKY_CHUNK_MIN_BYTES || c->chunk_bytes > SKY_CHUNK_MAX_PAYLOAD ||
	    c->file_bytes > SKY_CHUNK_MAX_FILE)
		return sky_diag_set(d, SKY_EFORMAT, "chunk: chunk size %u or file size %llu out of range",
				    c->chunk_bytes, (unsigned long long)c->file_bytes);
	if (c->total != sky_chunk_count(c->file_bytes, c->chunk_bytes) || c->index >= c->total)
		return sky_diag_set(d, SKY_EFORMAT,
				    "chunk: index %u of %u does not fit a file of %llu bytes in "
				    "chunks of %u",
				    c->index, c->total, (unsigned long long)c->file_bytes,
				    c->chunk_bytes);
	if (n != chunk_len(c->file_bytes, c->chunk_bytes, c->index) ||
	    len != SKY_CHUNK_HEADER_BYTES + (size_t)n)
		return sky_diag_set(d, SKY_EFORMAT,
				    "chunk %u: %zu payload bytes, header says %u, the file needs %llu",
				    c->index, len - SKY_CHUNK_HEADER_BYTES, n,
				    (unsigned long long)chunk_len(c->file_bytes, c->chunk_bytes,
								  c->index));
	c->data = buf + SKY_CHUNK_HEADER_BYTES;
	c->len = n;
	unsigned char h[32];
	sky_sha256(c->data, c->len, h);
	if (memcmp(h, c->sha, 32) != 0) {
		*why = SKY_CHUNK_BAD_HASH;
		return sky_diag_set(d, SKY_EAUTH, "chunk %u of %u: payload SHA-256 mismatch", c->index,
				    c->total);
	}
	*why = SKY_CHUNK_OK;
	return 0;
}

int sky_chunk_expect(const sky_chunk *c, int kind, const unsigned char file_sha[32],
		     uint64_t file_bytes, uint32_t chunk_bytes, uint32_t next, sky_chunk_reason *why,
		     sky_diag *d)
{
	char want[65], got[65];
	if (c->kind != kind || memcmp(c->file_sha, file_sha, 32) != 0 ||
	    c->file_bytes != file_bytes || c->chunk_bytes != chunk_bytes) {
		*why = SKY_CHUNK_UNASKED;
		sky_sha256_hex(file_sha, want);
		sky_sha256_hex(c->file_sha, got);
		return sky_diag_set(d, SKY_EINVAL,
				    "chunk %u: for file %.16s.. (%llu bytes, chunks of %u), fetching "
				    "%.16s.. (%llu bytes, chunks of %u)",
				    c->index, got, (unsigned long long)c->file_bytes, c->chunk_bytes,
				    want, (unsigned long long)file_bytes, chunk_bytes);
	}
	if (c->index != next) {
		*why = SKY_CHUNK_BAD_INDEX;
		return sky_diag_set(d, SKY_EINVAL, "chunk %u of %u: chunk %u is needed next", c->index,
				    c->total, next);
	}
	*why = SKY_CHUNK_OK;
	return 0;
}

void sky_sha256_hex(const unsigned char sha[32], char hex[65])
{
	static const char k[] = "0123456789abcdef";
	for (int i = 0; i < 32; i++) {
		hex[2 * i] = k[sha[i] >> 4];
		hex[2 * i + 1] = k[sha[i] & 15];
	}
	hex[64] = '\0';
}

static int nibble(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int sky_sha256_parse(const char *hex, unsigned char sha[32])
{
	if (!hex || strlen(hex) != 64)
		return SKY_EFORMAT;
	for (int i = 0; i < 32; i++) {
		int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return SKY_EFORMAT;
		sha[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

int sky_sha256_file(const char *path, unsigned char sha[32], uint64_t *bytes)
{
	sky_file_map m;
	memset(&m, 0, sizeof m);
	int rc = sky_file_map_open(&m, path);
	if (rc)
		return rc;
	sky_sha256(m.data ? m.data : (const unsigned char *)"", m.size, sha);
	if (bytes)
		*bytes = m.size;
	sky_file_map_close(&m);
	return 0;
}

int sky_slice_req_encode(const sky_slice_req *r, char *buf, size_t cap)
{
	char hex[65];
	if (!sky_topic_segment_ok(r->job))
		return SKY_EINVAL;
	sky_sha256_hex(r->sha, hex);
	int n = snprintf(buf, cap, "{\"job\":\"%s\",\"sha256\":\"%s\",\"from\":%u}", r->job, hex,
			 r->from);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : n;
}

int sky_slice_req_decode(const char *buf, size_t len, sky_slice_req *r, sky_diag *d)
{
	char hex[80];
	int64_t from = 0;
	memset(r, 0, sizeof *r);
	if (!buf || len > SKY_SLICE_REQ_MAX_BYTES)
		return sky_diag_set(d, SKY_ERANGE, "slice-req: %zu bytes, limit %u", len,
				    SKY_SLICE_REQ_MAX_BYTES);
	cJSON *doc = sky_json_parse(buf, len, d);
	if (!doc)
		return SKY_EFORMAT;
	int rc = sky_json_str(doc, "job", r->job, sizeof r->job, "slice-req", d);
	if (!rc)
		rc = sky_json_str(doc, "sha256", hex, sizeof hex, "slice-req", d);
	if (!rc)
		rc = sky_json_i64(doc, "from", 0, 0xffffffffll, &from, "slice-req", d);
	if (!rc && sky_sha256_parse(hex, r->sha) != 0)
		rc = sky_diag_set(d, SKY_EFORMAT, "slice-req: sha256 must be 64 hex digits");
	if (!rc && !sky_topic_segment_ok(r->job))
		rc = sky_diag_set(d, SKY_EINVAL, "slice-req: bad job id");
	r->from = (uint32_t)from;
	sky_json_free(doc);
	return rc;
}
