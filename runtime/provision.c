#include "sky_provision.h"

#include "sky_clock.h"
#include "sky_cpu.h"
#include "sky_file.h"
#include "sky_log.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* Reads DIR/name as one line of text into out. Returns 1 if the file
 * exists and was read, 0 if it does not exist, or an error. */
static int read_line(const char *dir, const char *name, char *out, size_t cap, sky_diag *d)
{
	char path[SKY_PROVISION_PATH + 64];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	out[0] = '\0';
	long n = sky_file_read(path, out, cap - 1);
	if (n == SKY_ENOTFOUND)
		return 0;
	if (n == SKY_ERANGE)
		return sky_diag_set(d, SKY_ERANGE, "%s: longer than %zu bytes", path, cap - 1);
	if (n < 0)
		return sky_diag_set(d, (int)n, "%s: cannot read it", path);
	out[n] = '\0';
	size_t a = 0, b = (size_t)n;
	while (a < b && isspace((unsigned char)out[a]))
		a++;
	while (b > a && isspace((unsigned char)out[b - 1]))
		b--;
	memmove(out, out + a, b - a);
	out[b - a] = '\0';
	if (!out[0])
		return sky_diag_set(d, SKY_EFORMAT, "%s: empty", path);
	if (strlen(out) != b - a || strpbrk(out, "\r\n"))
		return sky_diag_set(d, SKY_EFORMAT, "%s: not one line of text", path);
	return 1;
}

int sky_provision_load(const char *dir, sky_provision *p, sky_diag *d)
{
	int rc;
	memset(p, 0, sizeof *p);
	if (!dir || !sky_file_is_dir(dir))
		return sky_diag_set(d, SKY_ENOTFOUND, "config dir %s: not a directory",
				    dir ? dir : "(none)");
	if ((rc = read_line(dir, "broker", p->broker, sizeof p->broker, d)) < 0)
		return rc;
	if ((rc = read_line(dir, "token", p->token, sizeof p->token, d)) < 0)
		return rc;
	if (rc == 1)
		snprintf(p->token_path, sizeof p->token_path, "%s/token", dir);
	if ((rc = read_line(dir, "id", p->id, sizeof p->id, d)) < 0)
		return rc;
	if (rc == 0)
		sky_host_name(p->id, sizeof p->id);
	char path[SKY_PROVISION_PATH];
	if (snprintf(path, sizeof path, "%s/claim/ca.crt", dir) < (int)sizeof path &&
	    sky_file_exists(path))
		snprintf(p->claim_ca, sizeof p->claim_ca, "%s", path);
	if (snprintf(path, sizeof path, "%s/profile.conf", dir) < (int)sizeof path &&
	    sky_file_exists(path))
		snprintf(p->profile, sizeof p->profile, "%s", path);
	return 0;
}

int sky_provision_spend_token(const sky_provision *p, const char *state_dir, sky_diag *d)
{
	if (!p->token_path[0])
		return 0;
	int err = sky_file_remove(p->token_path);
	if (err == 0) {
		SKY_INFO("enroll: token spent; removed %s", p->token_path);
		return 0;
	}
	char path[SKY_PROVISION_PATH + 32], when[32], text[SKY_PROVISION_PATH + 96];
	snprintf(path, sizeof path, "%s/token.used", state_dir);
	sky_clock_utc_iso(when, sizeof when);
	int n = snprintf(text, sizeof text, "%s spent at enrollment %s\n", p->token_path, when);
	int rc = sky_file_write(path, text, (size_t)n, 0600);
	if (rc != 0)
		return sky_diag_set(d, SKY_EIO, "enroll: cannot remove %s (%s) nor write %s",
				    p->token_path, sky_strerror(err), path);
	SKY_INFO("enroll: token spent; %s stays (%s), marked used in %s", p->token_path,
		 sky_strerror(err), path);
	return 0;
}
