/* libFuzzer harness: the hashed-chunk decoder (model uploads and slices)
 * and the slice request. Whatever the bytes, the decoder reads only inside
 * them; a chunk it accepts has a payload inside the message whose length,
 * index and hash agree with its header, and encodes back to the same
 * message from a file holding that payload at its place. */
#include "sky_chunk.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	sky_chunk c;
	sky_chunk_reason why;
	if (sky_chunk_decode(copy, size, &c, &why, NULL) == 0) {
		unsigned char h[32];
		sky_sha256(c.data, c.len, h);
		if (why != SKY_CHUNK_OK || c.index >= c.total || c.len > c.chunk_bytes ||
		    c.data != copy + SKY_CHUNK_HEADER_BYTES || SKY_CHUNK_HEADER_BYTES + c.len != size ||
		    memcmp(h, c.sha, 32) != 0 ||
		    c.total != sky_chunk_count(c.file_bytes, c.chunk_bytes))
			abort();
		/* a file with this payload at its place encodes to the same chunk
		 * (small files only: the header may declare up to 16 GiB) */
		if (c.file_bytes <= (1u << 20)) {
			unsigned char *file = calloc(1, (size_t)c.file_bytes + 1);
			unsigned char *again = malloc(size);
			if (file && again) {
				memcpy(file + (size_t)c.index * c.chunk_bytes, c.data, c.len);
				int n = sky_chunk_encode(c.kind, file, c.file_bytes, c.file_sha,
							 c.chunk_bytes, c.index, again, size);
				if (n != (int)size || memcmp(again, copy, 32) != 0 ||
				    memcmp(again + 64, copy + 64, size - 64) != 0)
					abort();
			}
			free(file);
			free(again);
		}
	} else if (why == SKY_CHUNK_OK) {
		abort(); /* a refusal always says why */
	}
	sky_slice_req r;
	if (sky_slice_req_decode((const char *)copy, size, &r, NULL) == 0) {
		char buf[SKY_SLICE_REQ_MAX_BYTES];
		sky_slice_req back;
		int n = sky_slice_req_encode(&r, buf, sizeof buf);
		if (n <= 0 || sky_slice_req_decode(buf, (size_t)n, &back, NULL) != 0 ||
		    memcmp(&back, &r, sizeof r) != 0)
			abort();
	}
	free(copy);
	return 0;
}
