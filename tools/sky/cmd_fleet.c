/* sky fleet status: the fleet as skyplan sees it. skyplan keeps its
 * registry in <state>/fleet.json (written atomically whenever it changes,
 * and every 2 s); this command reads that file, so it needs no broker
 * connection and shows exactly what the planner would plan with. */
#include "sky_cli.h"
#include "sky_clock.h"
#include "sky_err.h"
#include "sky_file.h"
#include "sky_json.h"
#include "sky_log.h"
#include "sky_opt.h"

#include <stdio.h>
#include <string.h>

#define STATUS_MAX (4u << 20)

static void usage(FILE *to)
{
	fprintf(to, "usage: sky fleet status (--state DIR | --pki DIR) [--json]\n"
		    "Prints each board skyplan knows, grouped by site (\"?\": no report yet): id,\n"
		    "state (enrolled, online, offline, revoked), last seen (UTC), version,\n"
		    "capabilities, its link to its site's broker (RTT, MB/s) and current assignment;\n"
		    "then the site paths the planner knows (broker to broker); from DIR/fleet.json\n"
		    "(skyplan --state DIR; default <pki>/state). --json prints the document as is.\n"
		    "Training and serving jobs (DIR/jobs.json, from their metrics) follow, one line\n"
		    "per stage: step (serving: batches), loss, step time, busy fraction, frames\n"
		    "dropped by reason, stall; then each re-plan (reason, time lost; serving: the\n"
		    "requests replayed); with --json as a second object {\"jobs\":[...]}.\n"
		    "Then the per-operator limits and each operator's jobs waiting and uploads in\n"
		    "progress (from DIR/operators.json, which --json leaves as it is).\n");
}

/* A string member for the terminal: boards and clients put text in these
 * files (a board id, a plan-ack reason, a stall message), so control
 * characters and escape sequences are shown escaped (sky_log_escape), never
 * sent to the terminal. Eight buffers in turn: a printf may take several. */
static const char *str(const cJSON *o, const char *k)
{
	static char buf[8][1024];
	static int at;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	if (!cJSON_IsString(v))
		return "-";
	at = (at + 1) % 8;
	return sky_log_escape(v->valuestring, buf[at], sizeof buf[at]);
}

static double num(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

#define SITES_MAX 256

/* the board's site as its capability report gave it; "?" before any */
static const char *board_site(const cJSON *b)
{
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(b, "caps");
	if (!cJSON_IsObject(c))
		return "?";
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(c, "site");
	return cJSON_IsString(v) ? v->valuestring : "core";
}

/* The training jobs skyplan wrote beside fleet_path (jobs.json), if any. */
static void jobs(const char *fleet_path, int json)
{
	char path[1100];
	static char buf[1u << 20];
	snprintf(path, sizeof path, "%.*sjobs.json", (int)(strlen(fleet_path) - strlen("fleet.json")),
		 fleet_path);
	long n = sky_file_read(path, buf, sizeof buf);
	if (n <= 0)
		return;
	if (json) {
		fwrite(buf, 1, (size_t)n, stdout);
		return;
	}
	sky_diag d;
	cJSON *doc = sky_json_parse(buf, (size_t)n, &d);
	const cJSON *j, *st;
	cJSON_ArrayForEach(j, cJSON_GetObjectItemCaseSensitive(doc, "jobs"))
	{
		printf("job %s epoch %.0f, %.0f steps:\n", str(j, "job"), num(j, "epoch"), num(j, "steps"));
		cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(j, "stages"))
		{
			char drops[300] = "";
			size_t k = 0;
			const cJSON *r;
			cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(st, "drops"))
				if (cJSON_IsNumber(r) && k < sizeof drops - 40)
					k += (size_t)snprintf(drops + k, sizeof drops - k, " %s %.0f", r->string,
							      r->valuedouble);
			const cJSON *loss = cJSON_GetObjectItemCaseSensitive(st, "loss");
			char ls[32] = "";
			if (cJSON_IsNumber(loss))
				snprintf(ls, sizeof ls, " loss %.4f", loss->valuedouble);
			const char *stall = str(st, "stall");
			int serving = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "infer"));
			/* a stage replica's line says which */
			char rep[24] = "";
			if (num(st, "replica") > 0)
				snprintf(rep, sizeof rep, " (replica %.0f)", num(st, "replica"));
			printf("  stage %-3.0f %-16s%s %s %.0f%s%s, %.1f ms/%s, busy %.2f, dropped:%s%s%s\n",
			       num(st, "stage"), str(st, "board"), rep, serving ? "batches" : "step",
			       num(st, "step"), ls,
			       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "done")) ? " (done)" : "",
			       1e3 * num(st, "step_s"), serving ? "batch" : "step", num(st, "busy"),
			       k ? drops : " none",
			       stall[0] && strcmp(stall, "-") ? "; " : "", stall[0] && strcmp(stall, "-") ? stall : "");
		}
		{
			/* messages on the job's topics the planner refused, by reason */
			char refused[400] = "";
			size_t k = 0;
			const cJSON *r;
			cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(j, "refused"))
				if (cJSON_IsNumber(r) && k < sizeof refused - 40)
					k += (size_t)snprintf(refused + k, sizeof refused - k, " %s %.0f",
							      r->string, r->valuedouble);
			if (k)
				printf("  refused:%s\n", refused);
		}
		if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "paused")))
			printf("  paused: the boards left cannot hold the model; waiting for a board\n");
		cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(j, "replans"))
		{
			char lost[48] = "not yet resumed";
			if (num(st, "lost_s") >= 0)
				snprintf(lost, sizeof lost, "%.1f s lost", num(st, "lost_s"));
			if (cJSON_GetObjectItemCaseSensitive(st, "replayed")) {
				/* a serving job: time to its next answer, requests replayed */
				printf("  re-plan generation %.0f epoch %.0f: %s; %.0f unanswered "
				       "request(s) replayed, %s\n",
				       num(st, "generation"), num(st, "epoch"), str(st, "reason"),
				       num(st, "replayed"), lost);
				continue;
			}
			printf("  re-plan generation %.0f epoch %.0f: %s; resumed from step %.0f, %.0f "
			       "step(s) replayed, %s\n",
			       num(st, "generation"), num(st, "epoch"), str(st, "reason"),
			       num(st, "resume_step"), num(st, "lost_steps"), lost);
		}
	}
	sky_json_free(doc);
}

/* The operators' limits and usage skyplan wrote beside fleet_path
 * (operators.json), if any. */
static void operators(const char *fleet_path)
{
	char path[1100];
	static char buf[64u << 10];
	snprintf(path, sizeof path, "%.*soperators.json",
		 (int)(strlen(fleet_path) - strlen("fleet.json")), fleet_path);
	long n = sky_file_read(path, buf, sizeof buf);
	if (n <= 0)
		return;
	cJSON *doc = sky_json_parse(buf, (size_t)n, NULL);
	const cJSON *l = cJSON_GetObjectItemCaseSensitive(doc, "limits"), *o;
	if (!doc || !cJSON_IsObject(l)) {
		sky_json_free(doc);
		return;
	}
	char pl[24] = "none", ul[24] = "none";
	if (num(l, "pending_per_operator") > 0)
		snprintf(pl, sizeof pl, "%.0f", num(l, "pending_per_operator"));
	if (num(l, "uploads_per_operator") > 0)
		snprintf(ul, sizeof ul, "%.0f", num(l, "uploads_per_operator"));
	char sl[40] = "no bound on";
	if (num(l, "stored_bytes_per_operator") > 0)
		snprintf(sl, sizeof sl, "%.0f bytes of", num(l, "stored_bytes_per_operator"));
	printf("operators: limits per operator: %s jobs waiting (fleet %.0f), %s uploads (of %.0f "
	       "slots), %s models; busy boards %s\n",
	       pl, num(l, "pending_max"), ul, num(l, "upload_slots"), sl,
	       cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(l, "share_busy_boards"))
		       ? "shared between operators"
		       : "kept for their operator's jobs");
	cJSON_ArrayForEach(o, cJSON_GetObjectItemCaseSensitive(doc, "operators"))
		printf("  operator %-24s %.0f waiting, %.0f uploading\n", str(o, "operator"),
		       num(o, "pending"), num(o, "uploads"));
	sky_json_free(doc);
}

static int status(int argc, char **argv)
{
	const char *state = NULL, *pki = NULL;
	int json = 0;
	enum { O_JSON = SKY_OPT_FIRST, O_STATE, O_PKI };
	static const struct option k_opts[] = {{"json", no_argument, NULL, O_JSON},
					       {"state", required_argument, NULL, O_STATE},
					       {"pki", required_argument, NULL, O_PKI},
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky fleet status", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		switch (c) {
		case SKY_OPT_HELP:
			usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_JSON:
			json = 1;
			break;
		case O_STATE:
			state = op.arg;
			break;
		case O_PKI:
			pki = op.arg;
			break;
		default:
			return 2;
		}
	}
	if (sky_opt_no_args(&op) != 0) {
		return 2;
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
		jobs(path, 1);
		return 0;
	}
	const cJSON *boards = cJSON_GetObjectItemCaseSensitive(doc, "boards");
	/* grouped by site, sites in the order their first board appears;
	 * a board's site comes with its capability report */
	const char *sites[SITES_MAX];
	int n_sites = 0, count = 0, online = 0, revoked = 0;
	const cJSON *b;
	cJSON_ArrayForEach(b, boards)
	{
		const char *site = board_site(b);
		int k = 0;
		while (k < n_sites && strcmp(sites[k], site))
			k++;
		if (k == n_sites && n_sites < SITES_MAX)
			sites[n_sites++] = site;
	}
	for (int g = 0; g < n_sites; g++) {
		int in_site = 0;
		cJSON_ArrayForEach(b, boards) in_site += !strcmp(board_site(b), sites[g]);
		printf("%ssite %s: %d board%s%s\n", g ? "\n" : "", sites[g], in_site,
		       in_site == 1 ? "" : "s",
		       strcmp(sites[g], "?") ? "" : " (no capability report yet: site unknown)");
		printf("%-16s %-8s %-20s %-14s %9s %9s %9s %9s %9s  %s\n", "ID", "STATE",
		       "LAST SEEN (UTC)", "VERSION", "FWD ms", "BWD ms", "MEM MiB", "RTT ms", "MB/s",
		       "ASSIGNMENT");
		cJSON_ArrayForEach(b, boards)
		{
			if (strcmp(board_site(b), sites[g]))
				continue;
			const cJSON *c = cJSON_GetObjectItemCaseSensitive(b, "caps");
			const cJSON *a = cJSON_GetObjectItemCaseSensitive(b, "assignment");
			char caps[80] = "", asg[160] = "-";
			count++;
			online += !strcmp(str(b, "state"), "online");
			revoked += !strcmp(str(b, "state"), "revoked");
			if (cJSON_IsObject(c))
				snprintf(caps, sizeof caps, "%9.3f %9.3f %9.0f %9.3f %9.2f",
					 1e3 * num(c, "fwd_s"), 1e3 * num(c, "bwd_s"),
					 num(c, "mem_bytes") / 1048576.0, 1e3 * num(c, "lat_s"),
					 num(c, "bw_Bps") / 1e6);
			else
				snprintf(caps, sizeof caps, "%9s %9s %9s %9s %9s", "-", "-", "-", "-",
					 "-");
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
	}
	/* the links above are each board's to its own site's broker; the
	 * paths between sites' brokers are the planner's (from --links, or
	 * measured through the bridges) */
	const cJSON *l;
	int n_links = 0;
	cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(doc, "links"))
	{
		if (!n_links++)
			printf("\nsite paths (broker to broker):\n  %-16s %-16s %9s %9s  %s\n", "A", "B",
			       "MB/s", "LAT ms", "MEASURED (UTC)");
		char when[32] = "given";
		if (num(l, "measured_unix") > 0)
			sky_clock_format_utc((int64_t)num(l, "measured_unix"), when, sizeof when);
		printf("  %-16s %-16s %9.3f %9.3f  %s\n", str(l, "a"), str(l, "b"),
		       num(l, "bw_Bps") / 1e6, 1e3 * num(l, "lat_s"), when);
	}
	if (n_sites > 1 && !n_links)
		printf("\nno site paths known: the planner charges cuts between sites as within one "
		       "(skyplan --links)\n");
	/* the data sets boards hold: their summaries, never a row */
	int n_sets = 0;
	cJSON_ArrayForEach(b, boards)
	{
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(b, "caps"), *e;
		const cJSON *sets = cJSON_IsObject(c) ? cJSON_GetObjectItemCaseSensitive(c, "datasets")
						       : NULL;
		if (!cJSON_IsArray(sets))
			continue;
		cJSON_ArrayForEach(e, sets)
		{
			if (!n_sets++)
				printf("\ndata sets (held by boards; rows never leave them):\n"
				       "  %-20s %-16s %10s %6s %5s  %-16s  %s\n",
				       "NAME", "BOARD", "ROWS", "LABELS", "SEQ", "SHA256", "TOKENIZER");
			printf("  %-20s %-16s %10.0f %6.0f %5.0f  %.16s  %s\n", str(e, "name"),
			       str(b, "id"), num(e, "rows"), num(e, "labels"), num(e, "seq"),
			       str(e, "sha256"), str(e, "tokenizer"));
		}
	}
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(doc, "counters");
	if (revoked)
		printf("%d revoked (sky pki revoke): their messages are ignored (%.0f so far)\n", revoked,
		       num(k, "revoked_ignored"));
	printf("%d boards, %d online; caps rejected %.0f, stale messages ignored %.0f, timeouts %.0f "
	       "(as of %s)\n",
	       count, online, num(k, "caps_rejected"), num(k, "stale_ignored"), num(k, "timeouts"),
	       str(doc, "updated_at"));
	sky_json_free(doc);
	jobs(path, 0);
	operators(path);
	return 0;
}

int sky_cmd_fleet(int argc, char **argv)
{
	static const sky_cmd subs[] = {{"status", "the fleet skyplan knows", status}};
	return sky_cli_dispatch("sky fleet", argc, argv, subs, sizeof subs / sizeof subs[0], usage);
}
