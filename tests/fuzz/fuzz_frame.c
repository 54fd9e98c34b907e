/* libFuzzer harness: the tensor frame header decoder. Whatever the bytes,
 * it reads only inside them, and an accepted header declares a payload
 * within the limit that matches its shape and the message length (plus
 * nonce and tag when sealed), and encodes back to the same 128 bytes. */
#include "sky_frame.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LIMIT (1u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	sky_frame_hdr h;
	if (sky_frame_decode(copy, size, LIMIT, &h, NULL) == 0) {
		uint64_t n = sky_frame_dtype_size(h.dtype);
		for (int i = 0; i < h.ndim; i++)
			n *= h.shape[i];
		if (h.payload_bytes > LIMIT || n != h.payload_bytes ||
		    (size > SKY_FRAME_HEADER_BYTES &&
		     size - SKY_FRAME_HEADER_BYTES != sky_frame_wire_payload(&h)))
			abort();
		unsigned char again[SKY_FRAME_HEADER_BYTES];
		if (sky_frame_encode(&h, again, sizeof again, NULL) != SKY_FRAME_HEADER_BYTES ||
		    memcmp(again, copy, SKY_FRAME_HEADER_BYTES) != 0)
			abort();
	}
	free(copy);
	return 0;
}
