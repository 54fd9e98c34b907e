/* Tensor frame header: the fixed 128-byte binary header in front of every
 * activation or gradient a stage sends on sky/v1/job/<job>/stage/<k>/fwd|bwd.
 *
 * Layout, version 2 (all integers little-endian, so a frame reads the same
 * on x86 and Arm boards):
 *
 *   off size field
 *     0    4 magic        "SKYF"
 *     4    1 version      2 (a version-1 frame is refused: it has no epoch,
 *                         step or checksum)
 *     5    1 direction    0 forward (activation), 1 backward (gradient)
 *     6    1 dtype        0 f32, 1 s8, 2 s32
 *     7    1 ndim         1..4
 *     8    2 stage        receiving stage k
 *    10    2 flags        bit 0: payload sealed (AES-256-GCM, see
 *                         sky_frameseal.h); other bits 0 (non-zero is refused)
 *    12    4 micro_batch  index within the step
 *    16   16 shape[4]     u32 each; dims past ndim are 0
 *    32    8 payload      tensor bytes: shape x dtype size (the plaintext)
 *    40   64 job          job id, NUL-padded (sky_topic_segment_ok; 64 bytes need no NUL)
 *   104    8 epoch        plan epoch (0..2^63-1)
 *   112    8 step         training or serving step (0..2^63-1)
 *   120    4 crc32c       CRC32C (sky_crc32c.h) of the bytes after the header,
 *                         exactly as on the wire (for a sealed frame: nonce,
 *                         ciphertext and tag)
 *   124    4 reserved     zero (non-zero is refused, so a later version can use them)
 *   128      payload      plain: payload bytes of tensor data;
 *                         sealed: 12-byte nonce, payload bytes of ciphertext,
 *                         16-byte GCM tag (SKY_FRAME_SEAL_OVERHEAD more)
 *
 * The decoder is for outside input: it allocates nothing, and it refuses a
 * frame whose declared payload exceeds the receiver's configured limit, or
 * disagrees with the product of the shape and the dtype's size (checked
 * without overflow), before the caller reserves any memory for it.
 *
 * This file is the header codec. Building and checking whole frames (the
 * checksum, the expectations of the plan, sealing under the job key) is
 * sky_frameseal.h: sky_frame_pack() and sky_frame_unpack(). */
#ifndef SKY_FRAME_H
#define SKY_FRAME_H

#include "sky_err.h"
#include "sky_topics.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_FRAME_MAGIC "SKYF"
#define SKY_FRAME_VERSION 2
#define SKY_FRAME_HEADER_BYTES 128
#define SKY_FRAME_MAX_DIMS 4
/* Header offsets of the fields added in version 2. */
#define SKY_FRAME_OFF_EPOCH 104
#define SKY_FRAME_OFF_STEP 112
#define SKY_FRAME_OFF_CRC 120
/* flags */
#define SKY_FRAME_FLAG_SEALED 1u
/* A sealed payload carries a 12-byte GCM nonce in front of the ciphertext
 * and the 16-byte tag after it (NIST SP 800-38D: 96-bit IV, 128-bit tag). */
#define SKY_FRAME_SEAL_NONCE_BYTES 12
#define SKY_FRAME_SEAL_TAG_BYTES 16
#define SKY_FRAME_SEAL_OVERHEAD (SKY_FRAME_SEAL_NONCE_BYTES + SKY_FRAME_SEAL_TAG_BYTES)

enum { SKY_FRAME_FWD = 0, SKY_FRAME_BWD = 1 };
enum { SKY_FRAME_F32 = 0, SKY_FRAME_S8 = 1, SKY_FRAME_S32 = 2 };

typedef struct sky_frame_hdr {
	int direction;   /* SKY_FRAME_FWD / BWD */
	int dtype;       /* SKY_FRAME_F32 / S8 / S32 */
	int ndim;
	int stage;       /* 0..65535 */
	uint32_t micro_batch;
	uint32_t shape[SKY_FRAME_MAX_DIMS];
	uint64_t payload_bytes; /* tensor bytes (shape x dtype size), sealed or not */
	char job[SKY_TOPIC_SEGMENT_MAX + 1];
	int64_t epoch, step; /* plan epoch and step, 0..INT64_MAX */
	uint32_t crc;        /* CRC32C of the wire bytes after the header */
	unsigned flags;      /* SKY_FRAME_FLAG_SEALED or 0 */
} sky_frame_hdr;

/* Bytes per element of dtype, or 0 if unknown. */
size_t sky_frame_dtype_size(int dtype);

/* Bytes after the header on the wire for a header h: payload_bytes, plus
 * SKY_FRAME_SEAL_OVERHEAD when h is sealed. */
uint64_t sky_frame_wire_payload(const sky_frame_hdr *h);

/* Fills payload_bytes from shape and dtype, checks the header and writes
 * the header into out, crc as h->crc holds it (sky_frame_pack() computes
 * it). Returns SKY_FRAME_HEADER_BYTES, or SKY_EINVAL (a field out of range,
 * a negative epoch or step, an unknown flag) / SKY_ERANGE (cap too small)
 * with d set. */
int sky_frame_encode(sky_frame_hdr *h, unsigned char *out, size_t cap, sky_diag *d);

/* Decodes the header at the start of buf[0..len). max_payload is the
 * receiver's limit (e.g. SKY_FRAME_MAX_PAYLOAD_DEFAULT). If len is more than
 * the header (a whole message), the bytes that follow must be exactly
 * sky_frame_wire_payload(h) long. The checksum is not checked here (that
 * needs the payload: sky_frame_unpack does it). Returns 0, or with d naming
 * the field:
 *   SKY_EFORMAT  shorter than the header, bad magic, version (1 is named:
 *                "version 1 frame ... needs version 2"), direction, dtype,
 *                ndim, flags, shape, job, epoch or step over 2^63-1, or a
 *                non-zero reserved byte;
 *   SKY_ERANGE   declared payload over max_payload, or it disagrees with
 *                shape x dtype, or the message length disagrees with it.
 * Reads nothing past buf[len) and allocates nothing. */
int sky_frame_decode(const unsigned char *buf, size_t len, uint64_t max_payload, sky_frame_hdr *h,
		     sky_diag *d);

#endif
