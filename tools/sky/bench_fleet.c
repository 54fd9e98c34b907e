/* sky bench fleet: the fleet trains under each algorithm, measured.
 *
 * Two halves. The processes (a loopback TLS broker, skyplan, the boards,
 * a job per algorithm) are orchestrated by tools/bench_fleet.sh, which
 * `sky bench fleet` runs. What a job measured is read here, in C, from the
 * file `sky job watch --events` wrote (each stage's metrics message per
 * step, then the signed plan's payload): `sky bench fleet --analyze`
 * prints one JSON object for the job and can draw one step's measured
 * pipeline time line (planner/sky_svg.h).
 *
 * The measured step of a training step is its slowest stage's step_s (the
 * stages meet at the end of a step in the clip-norm exchange); the figure
 * reported is the median over the steps after the --skip warm-up ones. */
#include "bench_util.h"
#include "sky_caps.h"
#include "sky_cli.h"
#include "sky_err.h"
#include "sky_file.h"
#include "sky_json.h"
#include "sky_opt.h"
#include "sky_planmsg.h"
#include "sky_sign.h"
#include "sky_svg.h"
#include "sky_topics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STEPS 256
#define MAX_STAGES 64
#define MAX_SPANS 65536

/* one stage's report of one step */
typedef struct stage_step {
	int seen;
	double step_s, send_s, wait_s, bytes_out, loss;
	int has_loss;
} stage_step;

typedef struct job_events {
	sky_planmsg plan;
	int have_plan;
	int n_stages; /* from the plan, else the largest stage seen + 1 */
	int last_step;
	stage_step at[MAX_STEPS + 1][MAX_STAGES];
	sky_svg_span *spans; /* ops of the step asked for (timeline_step) */
	size_t n_spans;
	int timeline_step;
} job_events;

static void add_ops(job_events *e, const cJSON *ops, int stage)
{
	const cJSON *op;
	cJSON_ArrayForEach(op, ops)
	{
		if (!cJSON_IsArray(op) || cJSON_GetArraySize(op) != 4 || e->n_spans >= MAX_SPANS)
			continue;
		const cJSON *k = cJSON_GetArrayItem(op, 0), *mb = cJSON_GetArrayItem(op, 1),
			    *t0 = cJSON_GetArrayItem(op, 2), *t1 = cJSON_GetArrayItem(op, 3);
		if (!cJSON_IsString(k) || !k->valuestring[0] || !cJSON_IsNumber(mb) ||
		    !cJSON_IsNumber(t0) || !cJSON_IsNumber(t1) || t1->valuedouble < t0->valuedouble)
			continue;
		e->spans[e->n_spans++] = (sky_svg_span){.stage = stage,
							 .kind = k->valuestring[0],
							 .mb = mb->valueint,
							 .t0_s = t0->valuedouble / 1e3,
							 .t1_s = t1->valuedouble / 1e3};
	}
}

/* Reads an events file. timeline_step: whose ops to keep (0: none).
 * Returns 0, SKY_EIO (cannot read) or SKY_EFORMAT (no step in it). */
static int load_events(const char *path, job_events *e, int timeline_step, sky_diag *d)
{
	memset(e, 0, sizeof *e);
	e->timeline_step = timeline_step;
	size_t cap = SKY_SIGN_MAX_PAYLOAD + 64;
	char *line = malloc(cap);
	e->spans = malloc(MAX_SPANS * sizeof *e->spans);
	FILE *fp = fopen(path, "r");
	int rc = SKY_EIO;
	if (!line || !e->spans) {
		rc = SKY_ENOMEM;
		sky_diag_set(d, rc, "out of memory");
		goto exit;
	}
	if (!fp) {
		sky_diag_set(d, rc, "cannot read %s", path);
		goto exit;
	}
	int max_stage = -1;
	while (fgets(line, (int)cap, fp)) {
		size_t n = strlen(line);
		while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = 0;
		static const char pre[] = "{\"plan\":";
		if (!strncmp(line, pre, sizeof pre - 1) && n > sizeof pre) {
			if (sky_planmsg_decode(line + sizeof pre - 1, n - sizeof pre, &e->plan, NULL) == 0)
				e->have_plan = 1;
			continue;
		}
		cJSON *doc = sky_json_parse(line, n, NULL);
		int stage = -1, step = 0;
		if (!doc || sky_json_int(doc, "stage", 0, MAX_STAGES - 1, &stage, "m", NULL) != 0 ||
		    sky_json_int(doc, "step", 1, MAX_STEPS, &step, "m", NULL) != 0 ||
		    cJSON_GetObjectItemCaseSensitive(doc, "done") ||
		    cJSON_GetObjectItemCaseSensitive(doc, "stall")) {
			sky_json_free(doc);
			continue;
		}
		stage_step *s = &e->at[step][stage];
		/* a stage with replicas reports once per board: its step is the
		 * slowest replica's, its bytes and (the last stage) its loss the
		 * replicas' sum (each reports its part of the mean loss) */
		double v = 0;
		if (sky_json_num(doc, "step_s", 0, 1e9, &v, "m", NULL) == 0 && (!s->seen || v > s->step_s))
			s->step_s = v;
		if (sky_json_num(doc, "send_s", 0, 1e9, &v, "m", NULL) == 0 && (!s->seen || v > s->send_s))
			s->send_s = v;
		if (sky_json_num(doc, "wait_s", 0, 1e9, &v, "m", NULL) == 0 && (!s->seen || v > s->wait_s))
			s->wait_s = v;
		if (sky_json_num(doc, "bytes_out", 0, 1e18, &v, "m", NULL) == 0)
			s->bytes_out = s->seen ? s->bytes_out + v : v;
		if (sky_json_num(doc, "loss", -1e30, 1e30, &v, "m", NULL) == 0) {
			s->loss = s->has_loss ? s->loss + v : v;
			s->has_loss = 1;
		}
		s->seen = 1;
		if (step == timeline_step)
			add_ops(e, cJSON_GetObjectItemCaseSensitive(doc, "ops"), stage);
		if (step > e->last_step)
			e->last_step = step;
		if (stage > max_stage)
			max_stage = stage;
		sky_json_free(doc);
	}
	e->n_stages = e->have_plan ? e->plan.n_stages : max_stage + 1;
	if (e->n_stages > MAX_STAGES)
		e->n_stages = MAX_STAGES;
	rc = 0;
	if (e->last_step < 1) {
		rc = SKY_EFORMAT;
		sky_diag_set(d, rc, "%s holds no step's metrics", path);
	}
exit:
	if (fp)
		fclose(fp);
	free(line);
	return rc;
}

/* A step every stage reported. */
static int step_complete(const job_events *e, int step)
{
	for (int k = 0; k < e->n_stages; k++)
		if (!e->at[step][k].seen)
			return 0;
	return 1;
}

static double step_time(const job_events *e, int step)
{
	double m = 0;
	for (int k = 0; k < e->n_stages; k++)
		if (e->at[step][k].step_s > m)
			m = e->at[step][k].step_s;
	return m;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

typedef struct job_figures {
	int timed;                 /* steps measured */
	double step_s;             /* median of the slowest stage's step_s */
	double comm_share;         /* sum send_s / sum step_s over stages and timed steps */
	double wait_share;         /* sum wait_s / sum step_s */
	double frame_MBps;         /* bytes every stage sent in a step / the step */
	double loss;               /* the last step's */
	int median_step;           /* the step whose time is the median */
	int cross_site_cuts;       /* cuts between stages of two sites (the plan's) */
	double wan_bytes_per_step; /* bytes those cuts carried per timed step (see wan_bytes) */
} job_figures;

/* Bytes that crossed between sites in step s: for every cut whose two
 * stages are on different sites, what each of its stages sent towards the
 * other. A stage's bytes_out is everything it sent; its activations and
 * gradients (the same tensor shape, one frame per micro-batch each way)
 * are split evenly between its neighbours. The clip-norm frames to every
 * stage (a few hundred bytes) are counted in too. */
static double wan_bytes(const job_events *e, int s)
{
	double b = 0;
	for (int k = 0; k + 1 < e->n_stages && e->have_plan; k++) {
		if (sky_site_eq(e->plan.stages[k].site, e->plan.stages[k + 1].site))
			continue;
		for (int j = k; j <= k + 1; j++) {
			int nb = (j > 0) + (j + 1 < e->n_stages);
			b += (e->at[s][j].bytes_out - e->at[s - 1][j].bytes_out) / nb;
		}
	}
	return b;
}

static int figures(const job_events *e, int skip, job_figures *o, sky_diag *d)
{
	memset(o, 0, sizeof *o);
	double t[MAX_STEPS];
	int steps[MAX_STEPS];
	double sum_step = 0, sum_send = 0, sum_wait = 0, bytes = 0, secs = 0, wan = 0;
	int wan_steps = 0;
	for (int s = skip + 1; s <= e->last_step; s++) {
		if (!step_complete(e, s))
			continue;
		steps[o->timed] = s;
		t[o->timed++] = step_time(e, s);
		for (int k = 0; k < e->n_stages; k++) {
			const stage_step *x = &e->at[s][k];
			sum_step += x->step_s;
			sum_send += x->send_s;
			sum_wait += x->wait_s;
			/* bytes_out counts from the job's start: this step's is the difference */
			if (s > 1 && e->at[s - 1][k].seen)
				bytes += x->bytes_out - e->at[s - 1][k].bytes_out;
		}
		secs += step_time(e, s);
		if (s > 1 && step_complete(e, s - 1)) {
			wan += wan_bytes(e, s);
			wan_steps++;
		}
	}
	for (int k = 0; k + 1 < e->n_stages && e->have_plan; k++)
		o->cross_site_cuts +=
			!sky_site_eq(e->plan.stages[k].site, e->plan.stages[k + 1].site);
	o->wan_bytes_per_step = wan_steps ? wan / wan_steps : 0;
	if (o->timed == 0) {
		sky_diag_set(d, SKY_EFORMAT, "no complete step after the %d warm-up step%s", skip,
			     skip == 1 ? "" : "s");
		return SKY_EFORMAT;
	}
	double sorted[MAX_STEPS];
	memcpy(sorted, t, (size_t)o->timed * sizeof *t);
	qsort(sorted, (size_t)o->timed, sizeof *sorted, cmp_double);
	o->step_s = o->timed % 2 ? sorted[o->timed / 2]
				 : 0.5 * (sorted[o->timed / 2 - 1] + sorted[o->timed / 2]);
	o->median_step = steps[0];
	double best = INFINITY;
	for (int i = 0; i < o->timed; i++)
		if (fabs(t[i] - o->step_s) < best) {
			best = fabs(t[i] - o->step_s);
			o->median_step = steps[i];
		}
	o->comm_share = sum_step > 0 ? sum_send / sum_step : 0;
	o->wait_share = sum_step > 0 ? sum_wait / sum_step : 0;
	o->frame_MBps = secs > 0 ? bytes / secs / 1e6 : 0;
	for (int s = e->last_step; s >= 1; s--)
		for (int k = 0; k < e->n_stages; k++)
			if (e->at[s][k].has_loss) {
				o->loss = e->at[s][k].loss;
				s = 0;
				break;
			}
	return 0;
}

static int write_timeline(const job_events *e, const char *algo, int step, const char *path,
			  sky_diag *d)
{
	const char *labels[MAX_STAGES];
	static char names[MAX_STAGES][SKY_TOPIC_SEGMENT_MAX + 32];
	for (int k = 0; k < e->n_stages; k++) {
		if (e->have_plan)
			snprintf(names[k], sizeof names[k], "%d %s h%d-%d", k, e->plan.stages[k].board,
				 e->plan.stages[k].first, e->plan.stages[k].last);
		else
			snprintf(names[k], sizeof names[k], "stage %d", k);
		labels[k] = names[k];
	}
	char title[200];
	snprintf(title, sizeof title, "%s: measured step %d, %.2f s (each lane from its stage's step start)",
		 algo, step, step_time(e, step));
	size_t cap = 4u << 20;
	char *buf = malloc(cap);
	if (!buf) {
		sky_diag_set(d, SKY_ENOMEM, "out of memory");
		return SKY_ENOMEM;
	}
	int n = sky_svg_timeline(e->spans, e->n_spans, e->n_stages, labels, title, buf, cap);
	int rc = n < 0 ? n : sky_file_write(path, buf, (size_t)n, 0644);
	if (rc)
		sky_diag_set(d, rc, "cannot draw or write %s: %s", path, sky_strerror(rc));
	free(buf);
	return rc;
}

/* Which figures the job's plan was made from, as skyplan wrote them
 * (<state>/plans/<job>.figures.json, planner/svc_calib.c): "probe" (every
 * board's probe), "calibration" (every board measured, by the calibration
 * job calib_job), "previous job" (every board measured, some by another
 * job), "mixed" (some boards on their probes); and the boards' entries.
 * Prints them as JSON members followed by a comma. Returns 0, or
 * SKY_EIO / SKY_EFORMAT with d set. */
static int print_figures(const char *path, const char *calib_job, sky_diag *d)
{
	static char buf[1 << 20], boards[1 << 20];
	long n = sky_file_read(path, buf, sizeof buf);
	if (n < 0)
		return sky_diag_set(d, SKY_EIO, "cannot read %s: %s", path, sky_strerror((int)n));
	cJSON *doc = sky_json_parse(buf, (size_t)n, d);
	const cJSON *bs = doc ? cJSON_GetObjectItemCaseSensitive(doc, "boards") : NULL, *b;
	if (!cJSON_IsArray(bs) || sky_json_print(bs, boards, sizeof boards) < 0) {
		sky_json_free(doc);
		return sky_diag_set(d, SKY_EFORMAT, "%s: no \"boards\" array", path);
	}
	/* the plan's stage replicas and micro-batching, and the step's lower
	 * bound over every plan of the job on the fleet, when skyplan wrote them */
	static const char *const plan_keys[] = {"replicas", "micro_batch", "micro_batches",
						"step_s_lower_bound"};
	for (size_t i = 0; i < sizeof plan_keys / sizeof plan_keys[0]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, plan_keys[i]);
		if (cJSON_IsNumber(v))
			printf("\"%s\":%.9g,", plan_keys[i], v->valuedouble);
	}
	int probe = 0, calib = 0, other = 0;
	cJSON_ArrayForEach(b, bs)
	{
		const cJSON *fg = cJSON_GetObjectItemCaseSensitive(b, "figures");
		const cJSON *from = cJSON_GetObjectItemCaseSensitive(b, "from_job");
		if (!cJSON_IsString(fg) || strcmp(fg->valuestring, "calibrated"))
			probe++;
		else if (calib_job && cJSON_IsString(from) && !strcmp(from->valuestring, calib_job))
			calib++;
		else
			other++;
	}
	sky_json_free(doc);
	const char *what = probe && (calib || other) ? "mixed"
			   : probe			 ? "probe"
			   : other			 ? "previous job"
							 : "calibration";
	printf("\"figures\":\"%s\",\"figures_boards\":%s,", what, boards);
	return 0;
}

static void usage(FILE *to)
{
	fprintf(to,
		"usage: sky bench fleet [--json] [options of tools/bench_fleet.sh, see --help there]\n"
		"       sky bench fleet --analyze EVENTS [--algo NAME] [--skip K] [--even-step S]\n"
		"                       [--plaintext EVENTS] [--svg F.svg]\n"
		"                       [--figures F.json [--calibration-job NAME]]\n"
		"Without --analyze: runs tools/bench_fleet.sh (a loopback broker, skyplan, the\n"
		"demo fleet, one training job per algorithm) with this build's binaries.\n"
		"--analyze reads what `sky job watch --events` wrote for one job and prints one JSON\n"
		"object: step_s_measured (median over the steps after K warm-up ones, default 1, of\n"
		"the slowest stage's step), step_s_predicted (the plan's simulated step),\n"
		"speedup_vs_even (S / measured, with --even-step S), comm_share (time sending\n"
		"frames over stage time), wait_share (waiting for frames), frame_MBps (bytes sent\n"
		"per step over the step), loss (last), the plan's stages; with --plaintext the same\n"
		"job's plaintext-frames run: encryption_cost_s_per_step = measured - plaintext.\n"
		"--svg draws the median step's measured time line per stage.\n"
		"--figures (skyplan's <state>/plans/<job>.figures.json) adds which figures the plan\n"
		"was made from: figures (probe, calibration: every board measured by the job\n"
		"--calibration-job names, previous job: measured by other jobs too, mixed) and\n"
		"figures_boards (each board's planned and probed fwd_s and bwd_s).\n");
}

static int analyze(int argc, char **argv)
{
	const char *events = NULL, *plain = NULL, *svg = NULL, *algo = NULL;
	const char *figs = NULL, *calib_job = NULL;
	double even = 0;
	long skip = 1;
	enum { O_ANALYZE = SKY_OPT_FIRST, O_PLAIN, O_SVG, O_ALGO, O_EVEN, O_SKIP, O_FIGURES,
	       O_CALIB_JOB };
	static const struct option k_opts[] = {{"analyze", required_argument, NULL, O_ANALYZE},
					       {"plaintext", required_argument, NULL, O_PLAIN},
					       {"svg", required_argument, NULL, O_SVG},
					       {"algo", required_argument, NULL, O_ALGO},
					       {"even-step", required_argument, NULL, O_EVEN},
					       {"skip", required_argument, NULL, O_SKIP},
					       {"figures", required_argument, NULL, O_FIGURES},
					       {"calibration-job", required_argument, NULL, O_CALIB_JOB},
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky bench fleet", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		const char *a = op.name, *v = op.arg;
		switch (c) {
		case SKY_OPT_HELP:
			usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_ANALYZE:
			events = v;
			break;
		case O_PLAIN:
			plain = v;
			break;
		case O_SVG:
			svg = v;
			break;
		case O_ALGO:
			algo = v;
			break;
		case O_EVEN:
			if (sky_cli_double("bench fleet", a, v, 0, 1e9, &even))
				return 2;
			break;
		case O_SKIP:
			if (sky_cli_int("bench fleet", a, v, 0, MAX_STEPS - 1, &skip))
				return 2;
			break;
		case O_FIGURES:
			figs = v;
			break;
		case O_CALIB_JOB:
			calib_job = v;
			break;
		default:
			return 2;
		}
	}
	if (sky_opt_no_args(&op) != 0) {
		return 2;
	}
	int rc = 1;
	sky_diag d;
	sky_diag_clear(&d);
	job_events *e = calloc(1, sizeof *e), *p = plain ? calloc(1, sizeof *p) : NULL;
	job_figures f, fp;
	if (!e || (plain && !p)) {
		fprintf(stderr, "sky bench fleet: out of memory\n");
		goto exit;
	}
	if (load_events(events, e, 0, &d) != 0 || figures(e, (int)skip, &f, &d) != 0)
		goto fail;
	free(e->spans);
	if (load_events(events, e, f.median_step, &d) != 0)
		goto fail;
	if (plain && (load_events(plain, p, 0, &d) != 0 || figures(p, (int)skip, &fp, &d) != 0))
		goto fail;
	if (!algo)
		algo = e->have_plan ? e->plan.algo : "?";
	if (svg && write_timeline(e, algo, f.median_step, svg, &d) != 0)
		goto fail;
	/* nine decimals: the first algorithm's step is read back as --even-step,
	 * and six made the baseline against itself 0.9999 */
	printf("{\"algo\":\"%s\",\"job\":\"%s\",\"stages\":%d,\"steps_timed\":%d,"
	       "\"step_s_measured\":%.9f,\"step_s_predicted\":%.6f,",
	       algo, e->have_plan ? e->plan.job : "", e->n_stages, f.timed, f.step_s,
	       e->have_plan ? e->plan.train.predicted_step_s : 0.0);
	if (even > 0)
		printf("\"speedup_vs_even\":%.4f,", even / f.step_s);
	if (e->have_plan && e->plan.train.predicted_step_s > 0)
		printf("\"measured_over_predicted\":%.4f,", f.step_s / e->plan.train.predicted_step_s);
	printf("\"comm_share\":%.4f,\"wait_share\":%.4f,\"frame_MBps\":%.3f,\"loss\":%.6f,"
	       "\"sealed\":%s,",
	       f.comm_share, f.wait_share, f.frame_MBps, f.loss,
	       e->have_plan && e->plan.train.sealed ? "true" : "false");
	if (plain)
		printf("\"step_s_plaintext\":%.6f,\"encryption_cost_s_per_step\":%.6f,", fp.step_s,
		       f.step_s - fp.step_s);
	printf("\"cross_site_cuts\":%d,\"wan_bytes_per_step\":%.0f,", f.cross_site_cuts,
	       f.wan_bytes_per_step);
	if (figs && print_figures(figs, calib_job, &d) != 0) {
		printf("\"figures\":\"unknown\",");
		fprintf(stderr, "sky bench fleet: %s\n", d.msg);
	}
	printf("\"plan\":[");
	for (int k = 0; e->have_plan && k < e->plan.n_stages; k++) {
		printf("%s{\"stage\":%d,\"board\":\"%s\",\"site\":\"%s\",\"first\":%d,\"last\":%d",
		       k ? "," : "", k, e->plan.stages[k].board,
		       sky_site_name(e->plan.stages[k].site), e->plan.stages[k].first,
		       e->plan.stages[k].last);
		/* a stage run on several boards: each board and its share */
		int n = sky_planmsg_n_replicas(&e->plan, k);
		if (n > 1) {
			printf(",\"replicas\":[");
			for (int r = 0; r < n; r++) {
				int share = 0;
				for (int mb = 0; mb < e->plan.micro_batches; mb++)
					share += sky_planmsg_route(&e->plan, k, mb) == r;
				printf("%s{\"board\":\"%s\",\"share\":%d}", r ? "," : "",
				       sky_planmsg_replica_board(&e->plan, k, r), share);
			}
			printf("]");
		}
		printf("}");
	}
	printf("]}\n");
	rc = 0;
	goto exit;
fail:
	fprintf(stderr, "sky bench fleet: %s\n", d.msg);
exit:
	if (e)
		free(e->spans);
	if (p)
		free(p->spans);
	free(e);
	free(p);
	return rc;
}

int sky_bench_fleet(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--analyze") || !strncmp(argv[i], "--analyze=", 10))
			return analyze(argc, argv);
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			usage(stdout); /* and the script's own below */
	return sky_bench_script("sky bench fleet", "bench_fleet.sh", argc, argv);
}

/* sky bench geo: tools/bench_geo.sh (tools/geo-wan.sh's sites, a job per
 * plan, each analysed by `sky bench fleet --analyze`). */
int sky_bench_geo(int argc, char **argv)
{
	return sky_bench_script("sky bench geo", "bench_geo.sh", argc, argv);
}
