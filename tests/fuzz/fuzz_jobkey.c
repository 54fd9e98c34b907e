/* libFuzzer harness: sky_jobkey_unwrap, which a board runs on the wrapped
 * job key in a plan. Whatever the text, it reads only inside it and either
 * refuses with a reason or returns the key; only a blob the planner made
 * for the fixed board key below can open (the seed in corpus/jobkey/). The
 * first byte picks the form: even, the rest is the base64 text itself;
 * odd, the rest is raw blob bytes, base64-encoded here so the fuzzer can
 * reach the layout checks behind the decoding. */
#include "sky_jobkey.h"

#include <mbedtls/pk.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A P-256 key made for this harness only (openssl ecparam -genkey). */
static const char k_board_pem[] =
	"-----BEGIN EC PRIVATE KEY-----\n"
	"MHcCAQEEIEAuflPvigCVjHn9JXh4Hq3wSzUMKHOdHsbWiCe3MHFcoAoGCCqGSM49\n"
	"AwEHoUQDQgAEdHhEOSAZzp8ksV/ZtcIFHuaWpAJbAXJeMDjvMgwU6P/E0KPPP85c\n"
	"U9bHB2kjFtOAozYdOOQyjrHchgt3EXM7Ng==\n"
	"-----END EC PRIVATE KEY-----\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static mbedtls_pk_context key;
	static int ready;
	if (!ready) {
		mbedtls_pk_init(&key);
		if (mbedtls_pk_parse_key(&key, (const unsigned char *)k_board_pem,
					 sizeof k_board_pem, NULL, 0) != 0)
			abort();
		ready = 1;
	}
	if (size < 1 || size > 1024)
		return 0;
	char text[2048];
	size_t len;
	if (data[0] % 2 == 0) {
		memcpy(text, data + 1, size - 1);
		len = size - 1;
	} else {
		int n = sky_b64_encode(data + 1, size - 1, text, sizeof text);
		if (n < 0)
			return 0;
		len = (size_t)n;
	}
	unsigned char out[SKY_JOBKEY_BYTES];
	memset(out, 0x77, sizeof out);
	sky_jobkey_refusal why = SKY_JOBKEY_N;
	int rc = sky_jobkey_unwrap(&key, text, len, "fz", "board-fz", 2, out, &why, NULL);
	if (why >= SKY_JOBKEY_N || (rc == 0) != (why == SKY_JOBKEY_OK))
		abort();
	if (rc != 0) {
		for (size_t i = 0; i < sizeof out; i++)
			if (out[i] != 0x77) /* a refused unwrap leaves the key untouched */
				abort();
	}
	return 0;
}
