/* libFuzzer harness: a plan as a board receives it. The bytes go through
 * the signature envelope check (against a fixed certificate: random input
 * must never verify) and, separately, straight into the plan decoder (as
 * if the signature had verified), so both parsers see hostile input. An
 * accepted plan must validate and round-trip: decoded again, it encodes to
 * the same bytes. */
#include "sky_json.h"
#include "sky_planmsg.h"
#include "sky_sign.h"

#include <mbedtls/x509_crt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A throwaway self-signed P-256 certificate (CN sky-planner) made for this
 * harness; its key is not kept anywhere, so nothing can be signed for it. */
static const char k_cert[] =
"-----BEGIN CERTIFICATE-----\n"
"MIIBgTCCASegAwIBAgIUFr9OdUwHbZZFiF67Yh60c9VOr0wwCgYIKoZIzj0EAwIw\n"
"FjEUMBIGA1UEAwwLc2t5LXBsYW5uZXIwHhcNMjYxMTMwMTQ0ODE2WhcNMzYxMTI3\n"
"MTQ0ODE2WjAWMRQwEgYDVQQDDAtza3ktcGxhbm5lcjBZMBMGByqGSM49AgEGCCqG\n"
"SM49AwEHA0IABBI83pC3kwuz5dzg51t4tSxWM15qY8TlT0MyHa9qOpQH9Inlf77K\n"
"/MPjzpYQI7TB8ycrwSOsVZt6ObWqujva6E+jUzBRMB0GA1UdDgQWBBSPa6jVuuSS\n"
"j0KjHQaZ5y4tp4kggzAfBgNVHSMEGDAWgBSPa6jVuuSSj0KjHQaZ5y4tp4kggzAP\n"
"BgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUCIQCIQUuKBfF7uNIhsYbG\n"
"O3aDwM33/IFsM+ysaX4mWN7KdAIgDb8xV8DxKb4N7hBtOa5P2aQ/KkhYrOUVAPFL\n"
"L6gazaU=\n"
"-----END CERTIFICATE-----\n";

static mbedtls_x509_crt g_crt;
static int g_ready;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static sky_planmsg p, back;
	static char payload[SKY_SIGN_MAX_PAYLOAD + 1];
	if (!g_ready) {
		mbedtls_x509_crt_init(&g_crt);
		if (mbedtls_x509_crt_parse(&g_crt, (const unsigned char *)k_cert, sizeof k_cert) != 0)
			abort();
		g_ready = 1;
	}
	char *copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	size_t plen = 0;
	if (sky_verify_envelope(&g_crt, copy, size, payload, sizeof payload, &plen, NULL) == 0)
		abort(); /* nobody holds the key */
	if (sky_planmsg_decode(copy, size, &p, NULL) == 0) {
		static char buf[SKY_PLAN_MAX_BYTES];
		if (sky_planmsg_validate(&p, NULL) != 0)
			abort();
		/* replicas: every board found where the plan puts it, every
		 * micro-batch routed to a replica the stage has */
		for (int k = 0; k < p.n_stages; k++) {
			int nr = sky_planmsg_n_replicas(&p, k), r;
			for (int i = 0; i < nr; i++)
				if (sky_planmsg_find_replica(&p, sky_planmsg_replica_board(&p, k, i),
							     &r) != k ||
				    r != i)
					abort();
			for (int mb = 0; mb < p.micro_batches; mb++) {
				r = sky_planmsg_route(&p, k, mb);
				if (r < 0 || r >= nr)
					abort();
			}
		}
		static char again[SKY_PLAN_MAX_BYTES];
		int n = sky_planmsg_encode(&p, buf, sizeof buf, NULL);
		if (n > 0) {
			/* every field survives: what decodes back encodes to the
			 * same bytes (sites, slices, owner and serving fields too) */
			if (sky_planmsg_decode(buf, (size_t)n, &back, NULL) != 0 ||
			    back.n_stages != p.n_stages || back.epoch != p.epoch)
				abort();
			int n2 = sky_planmsg_encode(&back, again, sizeof again, NULL);
			if (n2 != n || memcmp(buf, again, (size_t)n) != 0)
				abort();
		}
	}
	if (sky_json_pool_used() != 0)
		abort();
	free(copy);
	return 0;
}
