/* sky fleet status: the fleet as skyplan sees it. skyplan keeps its
 * registry in <state>/fleet.json (written atomically whenever it changes,
 * and every 2 s); this command reads that file, so it needs no broker
 * connection and shows exactly what the planner would plan with. */
#include "sky_cli.h"
#include "sky_clock.h"
#include "sky_err.h"
#include "sky_file.h"
#include "sky_json.h"

#include <stdio.h>
#include <string.h>

#define STATUS_MAX (4u << 20)

static void usage(FILE *to)
{
	fprintf(to, "usage: sky fleet status (--state DIR | --pki DIR) [--json]\n"
		    "Prints each board skyplan knows: id, state (enrolled, online, offline), last\n"
		    "seen (UTC), version, capabilities and current assignment, from DIR/fleet.json\n"
		    "(skyplan --state DIR; default <pki>/state). --json prints the document as is.\n");
}

static const char *str(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : "-";
}

static double num(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static int status(int argc, char **argv)
{
	const char *state = NULL, *pki = NULL;
	int json = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--state") && i + 1 < argc)
			state = argv[++i];
		else if (!strcmp(argv[i], "--pki") && i + 1 < argc)
			pki = argv[++i];
		else {
			fprintf(stderr, "sky fleet status: unknown option '%s' (see --help)\n", argv[i]);
			return 2;
		}
	}
	if (!state && !pki) {
		usage(stderr);
		return 2;
	}
	char path[1024];
	int pn = state ? snprintf(path, sizeof path, "%s/fleet.json", state)
		       : snprintf(path, sizeof path, "%s/state/fleet.json", pki);
	if (pn < 0 || (size_t)pn >= sizeof path) {
		fprintf(stderr, "sky fleet status: path too long\n");
		return 2;
	}
	static char buf[STATUS_MAX];
	long n = sky_file_read(path, buf, sizeof buf);
	if (n < 0) {
		fprintf(stderr, "sky fleet status: cannot read %s (%s); is skyplan running with that "
				"state directory?\n",
			path, sky_strerror((int)n));
		return 1;
	}
	sky_diag d;
	sky_diag_clear(&d);
	cJSON *doc = sky_json_parse(buf, (size_t)n, &d);
	if (!doc) {
		fprintf(stderr, "sky fleet status: %s: %s\n", path, d.msg);
		return 1;
	}
	double age = (double)sky_clock_unix() - num(doc, "updated_unix");
	if (age > 10)
		fprintf(stderr, "sky fleet status: warning: %s was last updated %.0f s ago (%s); "
				"skyplan may not be running\n",
			path, age, str(doc, "updated_at"));
	if (json) {
		fwrite(buf, 1, (size_t)n, stdout);
		if (n == 0 || buf[n - 1] != '\n')
			putchar('\n');
		sky_json_free(doc);
		return 0;
	}
	const cJSON *boards = cJSON_GetObjectItemCaseSensitive(doc, "boards");
	printf("%-16s %-8s %-20s %-14s %9s %9s %9s %9s  %s\n", "ID", "STATE", "LAST SEEN (UTC)",
	       "VERSION", "FWD ms", "BWD ms", "MEM MiB", "RTT ms", "ASSIGNMENT");
	const cJSON *b;
	int count = 0, online = 0;
	cJSON_ArrayForEach(b, boards)
	{
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(b, "caps");
		const cJSON *a = cJSON_GetObjectItemCaseSensitive(b, "assignment");
		char caps[64] = "", asg[160] = "-";
		count++;
		online += !strcmp(str(b, "state"), "online");
		if (cJSON_IsObject(c))
			snprintf(caps, sizeof caps, "%9.3f %9.3f %9.0f %9.3f", 1e3 * num(c, "fwd_s"),
				 1e3 * num(c, "bwd_s"), num(c, "mem_bytes") / 1048576.0,
				 1e3 * num(c, "lat_s"));
		else
			snprintf(caps, sizeof caps, "%9s %9s %9s %9s", "-", "-", "-", "-");
		if (cJSON_IsObject(a))
			snprintf(asg, sizeof asg, "%s epoch %.0f stage %.0f half-layers %.0f-%.0f %s",
				 str(a, "job"), num(a, "epoch"), num(a, "stage"), num(a, "first"),
				 num(a, "last"), str(a, "ack"));
		char st[24];
		snprintf(st, sizeof st, "%s", str(b, "state"));
		printf("%-16s %-8s %-20s %-14.14s %s  %s\n", str(b, "id"), st,
		       cJSON_IsString(cJSON_GetObjectItemCaseSensitive(b, "last_seen"))
			       ? str(b, "last_seen")
			       : "never",
		       str(b, "version"), caps, asg);
	}
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(doc, "counters");
	printf("%d boards, %d online; caps rejected %.0f, stale messages ignored %.0f, timeouts %.0f "
	       "(as of %s)\n",
	       count, online, num(k, "caps_rejected"), num(k, "stale_ignored"), num(k, "timeouts"),
	       str(doc, "updated_at"));
	sky_json_free(doc);
	return 0;
}

int sky_cmd_fleet(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "status"))
		return status(argc - 1, argv + 1);
	fprintf(stderr, "sky fleet: unknown subcommand '%s' (status)\n", argv[1]);
	return 2;
}
