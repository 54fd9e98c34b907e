/* libFuzzer harness: the capability report decoder over arbitrary bytes.
 * Whatever the bytes, sky_caps_decode returns 0 or an error without reading
 * outside them or leaking pool memory, and a report it accepts passes
 * validation and survives an encode/decode round trip: decoded back, it
 * encodes to the same bytes. */
#include "sky_caps.h"
#include "sky_json.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size ? size : 1); /* private copy: ASan sees overreads */
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	sky_caps c, back;
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_caps_decode(copy, size, &c, &d) == 0) {
		static char buf[SKY_CAPS_MAX_BYTES];
		if (sky_caps_validate(&c, NULL) != 0)
			abort();
		int n = sky_caps_encode(&c, buf, sizeof buf, NULL);
		if (n <= 0 || sky_caps_decode(buf, (size_t)n, &back, NULL) != 0 ||
		    back.session != c.session || back.mem_bytes != c.mem_bytes ||
		    strcmp(back.id, c.id) != 0)
			abort();
		/* every field survives (int8 times, sites, links): the report
		 * decoded back encodes to the same bytes */
		static char again[SKY_CAPS_MAX_BYTES];
		int n2 = sky_caps_encode(&back, again, sizeof again, NULL);
		if (n2 != n || memcmp(buf, again, (size_t)n) != 0)
			abort();
	}
	if (sky_json_pool_used() != 0)
		abort();
	free(copy);
	return 0;
}
