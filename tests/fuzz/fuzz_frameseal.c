/* libFuzzer harness: sky_frame_unpack, the check every received tensor
 * frame goes through. Whatever the bytes, it reads only inside them, writes
 * only inside dst, and an accepted frame is one that matches its header:
 * exact length, CRC32C of the wire payload, and (plain) the payload copied
 * as is. The input is tried as a plaintext frame and as a frame sealed
 * under the fixed key below (the seeds in corpus/frameseal/ are both), with
 * and without the plan's expectations. */
#include "sky_crc32c.h"
#include "sky_frameseal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CAP (1u << 16)

static const unsigned char k_key[32] = "fuzz-frameseal-key-0123456789abc";

static void check(sky_frame_key *k, const unsigned char *m, size_t len,
		  const sky_frame_expect *want)
{
	static unsigned char dst[CAP + 1];
	sky_frame_hdr h;
	sky_frame_drop why = SKY_DROP_N;
	dst[CAP] = 0xA5; /* one byte past the cap must stay as it is */
	int rc = sky_frame_unpack(k, m, len, want, &h, dst, CAP, &why, NULL);
	if (dst[CAP] != 0xA5 || (why >= SKY_DROP_N) || ((rc == 0) != (why == SKY_DROP_NONE)))
		abort();
	if (rc != 0)
		return;
	if (h.payload_bytes > CAP || len != SKY_FRAME_HEADER_BYTES + sky_frame_wire_payload(&h) ||
	    sky_crc32c(0, m + SKY_FRAME_HEADER_BYTES, len - SKY_FRAME_HEADER_BYTES) != h.crc ||
	    ((h.flags & SKY_FRAME_FLAG_SEALED) != 0) != k->sealed)
		abort();
	if (!k->sealed && memcmp(dst, m + SKY_FRAME_HEADER_BYTES, h.payload_bytes) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static sky_frame_key plain, sealed;
	static int ready;
	if (!ready) {
		if (sky_frame_key_init(&plain, NULL) != 0 || sky_frame_key_init(&sealed, k_key) != 0)
			abort();
		ready = 1;
	}
	unsigned char *copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	/* the seeds' plan: job "fz", epoch 2, step 9, stage 1 fwd, 4 micro-batches, f32 [8,16] */
	sky_frame_expect want = {.job = "fz", .epoch = 2, .step = 9, .direction = SKY_FRAME_FWD,
				 .stage = 1, .micro_batches = 4, .dtype = SKY_FRAME_F32, .ndim = 2,
				 .shape = {8, 16}};
	check(&plain, copy, size, NULL);
	check(&plain, copy, size, &want);
	check(&sealed, copy, size, NULL);
	check(&sealed, copy, size, &want);
	free(copy);
	return 0;
}
