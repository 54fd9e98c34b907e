#include "sky_frame.h"
#include "sky_le.h"

#include <string.h>

size_t sky_frame_dtype_size(int dtype)
{
	switch (dtype) {
	case SKY_FRAME_F32:
	case SKY_FRAME_S32:
		return 4;
	case SKY_FRAME_S8:
		return 1;
	default:
		return 0;
	}
}

/* Product of the shape times the element size, or 0 with *ovf set if it
 * does not fit 64 bits (a hostile shape must not wrap around to a small,
 * "acceptable" size). */
static uint64_t shape_bytes(const sky_frame_hdr *h, int *ovf)
{
	uint64_t n = sky_frame_dtype_size(h->dtype);
	*ovf = 0;
	for (int i = 0; i < h->ndim; i++) {
		if (h->shape[i] != 0 && n > UINT64_MAX / h->shape[i]) {
			*ovf = 1;
			return 0;
		}
		n *= h->shape[i];
	}
	return n;
}

static int check(const sky_frame_hdr *h, sky_diag *d)
{
	if (h->direction != SKY_FRAME_FWD && h->direction != SKY_FRAME_BWD)
		return sky_diag_set(d, SKY_EFORMAT, "frame: direction %d (0 fwd, 1 bwd)",
				    h->direction);
	if (!sky_frame_dtype_size(h->dtype))
		return sky_diag_set(d, SKY_EFORMAT, "frame: unknown dtype %d", h->dtype);
	if (h->ndim < 1 || h->ndim > SKY_FRAME_MAX_DIMS)
		return sky_diag_set(d, SKY_EFORMAT, "frame: ndim %d, allowed 1 to %d", h->ndim,
				    SKY_FRAME_MAX_DIMS);
	for (int i = 0; i < SKY_FRAME_MAX_DIMS; i++) {
		if (i < h->ndim ? h->shape[i] == 0 : h->shape[i] != 0)
			return sky_diag_set(d, SKY_EFORMAT,
					    "frame: shape[%d] is %u (dims below ndim %d must be >0, "
					    "the rest 0)",
					    i, h->shape[i], h->ndim);
	}
	if (h->stage < 0 || h->stage > 65535)
		return sky_diag_set(d, SKY_EFORMAT, "frame: stage %d out of range", h->stage);
	if (!sky_topic_segment_ok(h->job))
		return sky_diag_set(d, SKY_EFORMAT, "frame: job id is not a legal id");
	if (h->epoch < 0 || h->step < 0)
		return sky_diag_set(d, SKY_EFORMAT, "frame: epoch %lld / step %lld (must be >= 0)",
				    (long long)h->epoch, (long long)h->step);
	if (h->flags & ~SKY_FRAME_FLAG_SEALED)
		return sky_diag_set(d, SKY_EFORMAT, "frame: flags 0x%x (only bit 0, sealed, is known)",
				    h->flags);
	return 0;
}

uint64_t sky_frame_wire_payload(const sky_frame_hdr *h)
{
	return h->payload_bytes + (h->flags & SKY_FRAME_FLAG_SEALED ? SKY_FRAME_SEAL_OVERHEAD : 0);
}

int sky_frame_encode(sky_frame_hdr *h, unsigned char *out, size_t cap, sky_diag *d)
{
	int rc = check(h, d), ovf;
	if (rc)
		return rc == SKY_EFORMAT ? SKY_EINVAL : rc;
	if (cap < SKY_FRAME_HEADER_BYTES)
		return sky_diag_set(d, SKY_ERANGE, "frame: %zu-byte buffer, header needs %d", cap,
				    SKY_FRAME_HEADER_BYTES);
	h->payload_bytes = shape_bytes(h, &ovf);
	if (ovf)
		return sky_diag_set(d, SKY_EINVAL, "frame: shape overflows 64 bits");
	memset(out, 0, SKY_FRAME_HEADER_BYTES);
	memcpy(out, SKY_FRAME_MAGIC, 4);
	out[4] = SKY_FRAME_VERSION;
	out[5] = (unsigned char)h->direction;
	out[6] = (unsigned char)h->dtype;
	out[7] = (unsigned char)h->ndim;
	sky_le_put16(out + 8, (unsigned)h->stage);
	sky_le_put16(out + 10, h->flags);
	sky_le_put32(out + 12, h->micro_batch);
	for (int i = 0; i < SKY_FRAME_MAX_DIMS; i++)
		sky_le_put32(out + 16 + 4 * i, h->shape[i]);
	sky_le_put64(out + 32, h->payload_bytes);
	memcpy(out + 40, h->job, strlen(h->job)); /* <= 64 by check() */
	sky_le_put64(out + SKY_FRAME_OFF_EPOCH, (uint64_t)h->epoch);
	sky_le_put64(out + SKY_FRAME_OFF_STEP, (uint64_t)h->step);
	sky_le_put32(out + SKY_FRAME_OFF_CRC, h->crc);
	return SKY_FRAME_HEADER_BYTES;
}

int sky_frame_decode(const unsigned char *buf, size_t len, uint64_t max_payload, sky_frame_hdr *h,
		     sky_diag *d)
{
	int rc, ovf;
	memset(h, 0, sizeof *h);
	if (!buf || len < SKY_FRAME_HEADER_BYTES)
		return sky_diag_set(d, SKY_EFORMAT, "frame: %zu bytes, header needs %d", len,
				    SKY_FRAME_HEADER_BYTES);
	if (memcmp(buf, SKY_FRAME_MAGIC, 4) != 0)
		return sky_diag_set(d, SKY_EFORMAT, "frame: bad magic");
	if (buf[4] == 1)
		return sky_diag_set(d, SKY_EFORMAT,
				    "frame: version 1 frame (no epoch, step or checksum); this receiver "
				    "needs version %d: update the sender",
				    SKY_FRAME_VERSION);
	if (buf[4] != SKY_FRAME_VERSION)
		return sky_diag_set(d, SKY_EFORMAT, "frame: version %u, expected %d", buf[4],
				    SKY_FRAME_VERSION);
	h->flags = sky_le_get16(buf + 10);
	if (h->flags & ~SKY_FRAME_FLAG_SEALED)
		return sky_diag_set(d, SKY_EFORMAT, "frame: flags 0x%x (only bit 0, sealed, is known)",
				    h->flags);
	for (int i = SKY_FRAME_OFF_CRC + 4; i < SKY_FRAME_HEADER_BYTES; i++)
		if (buf[i])
			return sky_diag_set(d, SKY_EFORMAT, "frame: reserved byte %d is not zero", i);
	uint64_t epoch = sky_le_get64(buf + SKY_FRAME_OFF_EPOCH), step = sky_le_get64(buf + SKY_FRAME_OFF_STEP);
	if (epoch > INT64_MAX || step > INT64_MAX)
		return sky_diag_set(d, SKY_EFORMAT, "frame: epoch or step over 2^63-1");
	h->epoch = (int64_t)epoch;
	h->step = (int64_t)step;
	h->crc = sky_le_get32(buf + SKY_FRAME_OFF_CRC);
	h->direction = buf[5];
	h->dtype = buf[6];
	h->ndim = buf[7];
	h->stage = (int)sky_le_get16(buf + 8);
	h->micro_batch = sky_le_get32(buf + 12);
	for (int i = 0; i < SKY_FRAME_MAX_DIMS; i++)
		h->shape[i] = sky_le_get32(buf + 16 + 4 * i);
	h->payload_bytes = sky_le_get64(buf + 32);
	/* job: up to 64 bytes, then only NUL padding */
	size_t n = 0;
	while (n < SKY_TOPIC_SEGMENT_MAX && buf[40 + n])
		n++;
	for (size_t i = n; i < SKY_TOPIC_SEGMENT_MAX; i++)
		if (buf[40 + i])
			return sky_diag_set(d, SKY_EFORMAT, "frame: job field has bytes after its NUL");
	memcpy(h->job, buf + 40, n);
	h->job[n] = '\0';
	/* the size check comes first: it is what a receiver sizes memory from */
	if (h->payload_bytes > max_payload)
		return sky_diag_set(d, SKY_ERANGE,
				    "frame: declares %llu payload bytes, limit %llu (refused before "
				    "allocating)",
				    (unsigned long long)h->payload_bytes,
				    (unsigned long long)max_payload);
	if ((rc = check(h, d)))
		return rc;
	uint64_t want = shape_bytes(h, &ovf);
	if (ovf || want != h->payload_bytes)
		return sky_diag_set(d, SKY_ERANGE,
				    "frame: declares %llu payload bytes but shape x dtype is %s%llu",
				    (unsigned long long)h->payload_bytes, ovf ? "over 2^64, " : "",
				    (unsigned long long)want);
	if (len > SKY_FRAME_HEADER_BYTES && len - SKY_FRAME_HEADER_BYTES != sky_frame_wire_payload(h))
		return sky_diag_set(d, SKY_ERANGE,
				    "frame: message carries %zu bytes after the header, header declares "
				    "%llu%s",
				    len - SKY_FRAME_HEADER_BYTES,
				    (unsigned long long)sky_frame_wire_payload(h),
				    h->flags & SKY_FRAME_FLAG_SEALED ? " (sealed: nonce + payload + tag)"
								     : "");
	return 0;
}
