/* Tensor frame header: the fixed 128-byte binary header in front of every
 * activation or gradient a stage sends on sky/v1/job/<job>/stage/<k>/fwd|bwd.
 *
 * Layout (all integers little-endian, so a frame reads the same on x86 and
 * Arm boards):
 *
 *   off size field
 *     0    4 magic        "SKYF"
 *     4    1 version      1
 *     5    1 direction    0 forward (activation), 1 backward (gradient)
 *     6    1 dtype        0 f32, 1 s8, 2 s32
 *     7    1 ndim         1..4
 *     8    2 stage        receiving stage k
 *    10    2 flags        0 (reserved; non-zero is refused)
 *    12    4 micro_batch  index within the step
 *    16   16 shape[4]     u32 each; dims past ndim are 0
 *    32    8 payload      payload bytes that follow the header
 *    40   64 job          job id, NUL-padded (sky_topic_segment_ok; 64 bytes need no NUL)
 *   104   24 reserved     zero (non-zero is refused, so a later version can use them)
 *   128      payload
 *
 * The decoder is for outside input: it allocates nothing, and it refuses a
 * frame whose declared payload exceeds the receiver's configured limit, or
 * disagrees with the product of the shape and the dtype's size (checked
 * without overflow), before the caller reserves any memory for it. */
#ifndef SKY_FRAME_H
#define SKY_FRAME_H

#include "sky_err.h"
#include "sky_topics.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_FRAME_MAGIC "SKYF"
#define SKY_FRAME_VERSION 1
#define SKY_FRAME_HEADER_BYTES 128
#define SKY_FRAME_MAX_DIMS 4

enum { SKY_FRAME_FWD = 0, SKY_FRAME_BWD = 1 };
enum { SKY_FRAME_F32 = 0, SKY_FRAME_S8 = 1, SKY_FRAME_S32 = 2 };

typedef struct sky_frame_hdr {
	int direction;   /* SKY_FRAME_FWD / BWD */
	int dtype;       /* SKY_FRAME_F32 / S8 / S32 */
	int ndim;
	int stage;       /* 0..65535 */
	uint32_t micro_batch;
	uint32_t shape[SKY_FRAME_MAX_DIMS];
	uint64_t payload_bytes;
	char job[SKY_TOPIC_SEGMENT_MAX + 1];
} sky_frame_hdr;

/* Bytes per element of dtype, or 0 if unknown. */
size_t sky_frame_dtype_size(int dtype);

/* Fills payload_bytes from shape and dtype, checks the header and writes
 * the header into out. Returns SKY_FRAME_HEADER_BYTES, or SKY_EINVAL
 * (a field out of range) / SKY_ERANGE (cap too small) with d set. */
int sky_frame_encode(sky_frame_hdr *h, unsigned char *out, size_t cap, sky_diag *d);

/* Decodes the header at the start of buf[0..len). max_payload is the
 * receiver's limit (e.g. SKY_FRAME_MAX_PAYLOAD_DEFAULT). If len is more than
 * the header (a whole message), the payload that follows must be exactly
 * payload_bytes long. Returns 0, or with d naming the field:
 *   SKY_EFORMAT  shorter than the header, bad magic, version, direction,
 *                dtype, ndim, flags, shape or job;
 *   SKY_ERANGE   declared payload over max_payload, or it disagrees with
 *                shape x dtype, or the message length disagrees with it.
 * Reads nothing past buf[len) and allocates nothing. */
int sky_frame_decode(const unsigned char *buf, size_t len, uint64_t max_payload, sky_frame_hdr *h,
		     sky_diag *d);

#endif
