/* libFuzzer harness: the safetensors header parser over arbitrary bytes.
 * Whatever the bytes, sky_st_parse must return 0 or an error without
 * reading outside them, and a file it accepts must be self-consistent. */
#include "sky_json.h"
#include "sky_safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a private copy, so reads past the end are caught by ASan */
	unsigned char *copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	sky_st_file f;
	sky_diag d;
	sky_diag_clear(&d);
	int rc = sky_st_parse(&f, copy, size, &d);
	if (rc == 0) {
		size_t covered = 0;
		for (int i = 0; i < f.ntensors; i++) {
			const sky_st_tensor *t = &f.tensors[i];
			if (t->offset + t->nbytes > f.buf_size || sky_st_find(&f, t->name) != t)
				abort();
			covered += t->nbytes;
			volatile unsigned char sink = 0;
			if (t->nbytes)
				sink ^= t->data[t->nbytes - 1]; /* in bounds */
			(void)sink;
		}
		if (covered != f.buf_size)
			abort();
		for (int i = 0; i < f.nmeta; i++)
			if (sky_st_meta_get(&f, f.meta[i].key) == NULL)
				abort();
	} else if (d.msg[0] == '\0') {
		abort(); /* every failure says why */
	}
	sky_st_close(&f);
	if (sky_json_pool_used() != 0)
		abort(); /* the header's document was not released */
	free(copy);
	return 0;
}
