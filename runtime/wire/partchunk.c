#include "sky_partchunk.h"

#include <stdlib.h>
#include <string.h>

int sky_partchunk_index(const char *seg, uint32_t *index)
{
	uint32_t v = 0;
	if (!seg || !seg[0] || (seg[0] == '0' && seg[1]))
		return SKY_EINVAL;
	for (const char *p = seg; *p; p++) {
		if (*p < '0' || *p > '9' || v >= SKY_PART_MAX_CHUNKS)
			return SKY_EINVAL;
		v = v * 10 + (uint32_t)(*p - '0');
	}
	if (v >= SKY_PART_MAX_CHUNKS)
		return SKY_EINVAL;
	*index = v;
	return 0;
}

int sky_partchunk_check(const unsigned char *buf, size_t len, uint32_t topic_index, sky_chunk *c,
			sky_diag *d)
{
	int rc = sky_chunk_decode(buf, len, c, NULL, d);
	if (rc)
		return rc;
	if (c->kind != SKY_CHUNK_PART)
		return sky_diag_set(d, SKY_EFORMAT, "chunk of kind %d, not a part's", c->kind);
	if (c->chunk_bytes != SKY_PART_CHUNK_BYTES || c->file_bytes > SKY_PART_MAX_BYTES)
		return sky_diag_set(d, SKY_EFORMAT,
				    "part chunk: chunks of %u bytes (a part's are %u), part of %llu "
				    "bytes (at most %llu)",
				    c->chunk_bytes, SKY_PART_CHUNK_BYTES,
				    (unsigned long long)c->file_bytes, SKY_PART_MAX_BYTES);
	if (c->index != topic_index)
		return sky_diag_set(d, SKY_EFORMAT, "part chunk %u on the topic of chunk %u", c->index,
				    topic_index);
	return 0;
}

void sky_part_rx_init(sky_part_rx *rx)
{
	memset(rx, 0, sizeof *rx);
}

void sky_part_rx_free(sky_part_rx *rx)
{
	free(rx->buf);
	free(rx->have);
	sky_part_rx_init(rx);
}

int sky_part_rx_same(const sky_part_rx *rx, const sky_chunk *c)
{
	return rx->buf && rx->bytes == c->file_bytes && !memcmp(rx->sha, c->file_sha, 32);
}

int sky_part_rx_take(sky_part_rx *rx, const sky_chunk *c, sky_diag *d)
{
	if (!rx->buf) {
		/* malloc(0) may be NULL: an empty part still gets a byte */
		rx->buf = malloc(c->file_bytes ? (size_t)c->file_bytes : 1);
		rx->have = calloc(c->total, 1);
		if (!rx->buf || !rx->have) {
			sky_part_rx_free(rx);
			return sky_diag_set(d, SKY_ENOMEM, "part of %llu bytes: out of memory",
					    (unsigned long long)c->file_bytes);
		}
		memcpy(rx->sha, c->file_sha, 32);
		rx->bytes = c->file_bytes;
		rx->total = c->total;
	} else if (!sky_part_rx_same(rx, c)) {
		return sky_diag_set(d, SKY_EINVAL, "chunk %u is of another part than the one rebuilt",
				    c->index);
	}
	/* decode checked index < total and the payload's length for it */
	memcpy(rx->buf + (size_t)c->index * c->chunk_bytes, c->data, c->len);
	if (!rx->have[c->index]) {
		rx->have[c->index] = 1;
		rx->got++;
	}
	if (rx->got < rx->total)
		return 0;
	unsigned char h[32];
	sky_sha256(rx->buf, (size_t)rx->bytes, h);
	if (memcmp(h, rx->sha, 32) != 0) {
		sky_part_rx_free(rx);
		return sky_diag_set(d, SKY_EAUTH, "part rebuilt from its chunks: SHA-256 mismatch");
	}
	return 1;
}

unsigned char *sky_part_rx_release(sky_part_rx *rx, size_t *len)
{
	unsigned char *b = rx->buf;
	*len = (size_t)rx->bytes;
	free(rx->have);
	sky_part_rx_init(rx);
	return b;
}
