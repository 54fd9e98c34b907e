/* The PKI directory's paths and naming rules; see sky_pki_layout.h. */
#include "sky_pki_layout.h"

#include "sky_topics.h"

#include <stdio.h>
#include <string.h>

int sky_pki_path(char *buf, const char *dir, const char *file, sky_diag *d)
{
	int n = snprintf(buf, SKY_PKI_PATH_CAP, "%s/%s", dir, file);
	if (n < 0 || n >= SKY_PKI_PATH_CAP)
		return sky_diag_set(d, SKY_ERANGE, "path too long: %s/%s", dir, file);
	return 0;
}

void sky_pki_hex(const unsigned char *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

static int check_name(const char *what, const char *name, sky_diag *d)
{
	size_t n = 0;
	for (; name && name[n]; n++) {
		char c = name[n];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-') || n >= 32)
			return sky_diag_set(d, SKY_EINVAL, "%s name: 1-32 characters of A-Z a-z 0-9 _ -",
					    what);
	}
	return n ? 0 : sky_diag_set(d, SKY_EINVAL, "%s name is empty", what);
}

int sky_ca_check_operator_name(const char *name, sky_diag *d)
{
	return check_name("operator", name, d);
}

int sky_ca_check_client_name(const char *name, sky_diag *d) { return check_name("client", name, d); }

int sky_ca_check_site_name(const char *name, sky_diag *d)
{
	/* the rule of site names everywhere (sky_caps.h): a topic segment */
	if (!sky_topic_segment_ok(name))
		return sky_diag_set(d, SKY_EINVAL, "site name: 1-%d characters of A-Z a-z 0-9 . _ -",
				    SKY_CA_SITE_NAME_MAX);
	if (strcmp(name, "core") == 0)
		return sky_diag_set(d, SKY_EINVAL, "site name 'core' is the core broker's own site");
	return 0;
}

int sky_ca_parse_ipv4(const char *s, unsigned char out[4])
{
	unsigned v[4];
	char tail;
	if (!s || sscanf(s, "%3u.%3u.%3u.%3u%c", &v[0], &v[1], &v[2], &v[3], &tail) != 4)
		return SKY_EINVAL;
	for (int i = 0; i < 4; i++) {
		if (v[i] > 255)
			return SKY_EINVAL;
		out[i] = (unsigned char)v[i];
	}
	return 0;
}
