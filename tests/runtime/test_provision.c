/* runtime/provision.c: the provisioning directory a board image drops in
 * /etc/sky, and spending its token. */
#include "sky_file.h"
#include "sky_provision.h"
#include "sky_test.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *mkdir_in_tmp(const char *name)
{
	static char dir[512];
	snprintf(dir, sizeof dir, "%s/%s", sky_test_tmp_dir(), name);
	sky_file_mkdirs(dir, 0700);
	return dir;
}

static void put(const char *dir, const char *name, const char *text)
{
	char path[700];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	sky_file_write(path, text, strlen(text), 0600);
}

SKY_TEST(provision_reads_broker_token_id_claim_and_profile)
{
	const char *dir = mkdir_in_tmp("etc-full");
	char claim[600];
	snprintf(claim, sizeof claim, "%s/claim", dir);
	sky_file_mkdirs(claim, 0700);
	put(dir, "broker", "  fleet.example:8883\n");
	put(dir, "token", "tok-123.abc\n");
	put(dir, "id", "pi-07\n");
	put(dir, "claim/ca.crt", "-----BEGIN CERTIFICATE-----\n");
	put(dir, "profile.conf", "threads = 4\n");
	sky_provision p;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT(sky_provision_load(dir, &p, &d) == 0);
	SKY_EXPECT(strcmp(p.broker, "fleet.example:8883") == 0);
	SKY_EXPECT(strcmp(p.token, "tok-123.abc") == 0);
	SKY_EXPECT(strcmp(p.id, "pi-07") == 0);
	SKY_EXPECT(strstr(p.claim_ca, "/claim/ca.crt") != NULL);
	SKY_EXPECT(strstr(p.profile, "/profile.conf") != NULL);
	SKY_EXPECT(strstr(p.token_path, "/token") != NULL);
}

SKY_TEST(provision_missing_files_leave_fields_empty_id_is_hostname)
{
	const char *dir = mkdir_in_tmp("etc-empty");
	sky_provision p;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT(sky_provision_load(dir, &p, &d) == 0);
	SKY_EXPECT(p.broker[0] == '\0' && p.token[0] == '\0' && p.token_path[0] == '\0');
	SKY_EXPECT(p.claim_ca[0] == '\0' && p.profile[0] == '\0');
	char host[128] = "";
	gethostname(host, sizeof host - 1);
	SKY_EXPECT(strcmp(p.id, host) == 0);
	sky_diag_clear(&d);
	SKY_EXPECT(sky_provision_load("/nonexistent/sky-etc", &p, &d) == SKY_ENOTFOUND);
	SKY_EXPECT(strstr(d.msg, "not a directory") != NULL);
}

SKY_TEST(provision_refuses_empty_and_multi_line_files)
{
	const char *dir = mkdir_in_tmp("etc-bad");
	sky_provision p;
	sky_diag d;
	put(dir, "token", " \n\n");
	sky_diag_clear(&d);
	SKY_EXPECT(sky_provision_load(dir, &p, &d) == SKY_EFORMAT);
	SKY_EXPECT(strstr(d.msg, "token: empty") != NULL);
	put(dir, "token", "abc\ndef\n");
	sky_diag_clear(&d);
	SKY_EXPECT(sky_provision_load(dir, &p, &d) == SKY_EFORMAT);
	SKY_EXPECT(strstr(d.msg, "token: not one line") != NULL);
	put(dir, "token", "abc\n");
	char big[1024];
	memset(big, 'x', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	put(dir, "broker", big);
	sky_diag_clear(&d);
	SKY_EXPECT(sky_provision_load(dir, &p, &d) == SKY_ERANGE);
	SKY_EXPECT(strstr(d.msg, "broker: longer than") != NULL);
}

SKY_TEST(provision_spend_removes_token_or_marks_it_used)
{
	const char *dir = mkdir_in_tmp("etc-spend");
	char state[600], path[700];
	snprintf(state, sizeof state, "%s/state", dir);
	sky_file_mkdirs(state, 0700);
	put(dir, "token", "tok\n");
	sky_provision p;
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT(sky_provision_load(dir, &p, &d) == 0);
	SKY_EXPECT(sky_provision_spend_token(&p, state, &d) == 0);
	snprintf(path, sizeof path, "%s/token", dir);
	SKY_EXPECT(!sky_file_exists(path));
	snprintf(path, sizeof path, "%s/token.used", state);
	SKY_EXPECT(!sky_file_exists(path));
	/* cannot be removed (here: already gone; under the unit: /etc is
	 * read-only): marked used in the state directory, naming the file */
	SKY_EXPECT(sky_provision_spend_token(&p, state, &d) == 0);
	char text[1024];
	long n = sky_file_read(path, text, sizeof text - 1);
	SKY_EXPECT(n > 0);
	if (n > 0) {
		text[n] = '\0';
		SKY_EXPECT(strstr(text, p.token_path) != NULL);
		SKY_EXPECT(strstr(text, "spent at enrollment") != NULL);
	}
	/* neither works: an error with both paths */
	snprintf(state, sizeof state, "%s/no-such-dir", dir);
	sky_diag_clear(&d);
	SKY_EXPECT(sky_provision_spend_token(&p, state, &d) == SKY_EIO);
	SKY_EXPECT(strstr(d.msg, "cannot remove") != NULL);
}
