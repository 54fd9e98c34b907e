/* sky bench infer: serving throughput and latency of a loopback fleet.
 *
 * Without --drive it runs tools/bench_infer.sh, which starts a broker,
 * skyplan and boards of unequal emulated speed (tools/fleet_lib.sh), makes
 * a small int8 model, submits one infer job per algorithm and runs the
 * driver below against each. The driver (`sky bench infer --drive`):
 *   - watches the job as an idle board identity would (the fleet listener,
 *     the board ACL: it reads the job's signed plan and the inter-stage
 *     frames sky/v1/job/<job>/stage/+/fwd, and writes nothing), for the
 *     plan's predicted throughput and shapes and the bytes the frames take,
 *     and the last stage's reports of the batches it answered
 *     (stage/0/done, sky_servebatch.h) for how full they were;
 *   - opens --clients client connections (one client identity, the tools
 *     listener), each keeping --inflight requests of random token ids in
 *     flight: one request each to see the job answer, then the full load;
 *     the window of --seconds opens once the loaded pipeline has answered
 *     one round (clients x inflight requests: the plan predicts the
 *     throughput of a full pipeline, so its filling is not counted), then
 *     the last responses are waited for and not counted;
 *   - prints one JSON object: throughput_seq_s (responses in the window /
 *     the window), p50_ms and p99_ms (nearest rank over the window's
 *     latencies, request sent to response received), bytes_per_request
 *     (request + response + inter-stage frame bytes in the window, per
 *     response) and bytes_per_request_fp32 (the same with each frame's int8
 *     activations counted as float32, 4 bytes a value: the frame size says
 *     how many rows its fixed-size serving payload holds, sky_serve.h),
 *     speedup_vs_even (this throughput over --even-throughput), and
 *     batches and batch_fill (batches answered in the window and their
 *     requests over batches x the plan's batch: the prediction assumes 1),
 *     warmup_s (from the full load to the window) and
 *     throughput_with_fill_seq_s (the responses from the full load's start
 *     to the window's end over that time: the pipeline's filling counted,
 *     as the bench measured before the window waited for it), and
 *     loadavg_1m (the machine's load at the window's end, -1 unknown: the
 *     emulated boards share its cores with everything else). */
#include "bench_util.h"
#include "infer_client.h"
#include "sky_cli.h"
#include "sky_clock.h"
#include "sky_err.h"
#include "sky_file.h"
#include "sky_frame.h"
#include "sky_identity.h"
#include "sky_json.h"
#include "sky_model.h"
#include "sky_mqtt.h"
#include "sky_opt.h"
#include "sky_planmsg.h"
#include "sky_rng.h"
#include "sky_sign.h"
#include "sky_topics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CLIENTS 64
#define MAX_INFLIGHT 64
#define MAX_LAT (1 << 20)
/* the serving frame payload (sky_serve.h): header, then per row a request
 * entry, S mask bytes and S*H int8 activations */
#define SERVE_HDR 32
#define SERVE_ENTRY 136

static void usage(FILE *to)
{
	fprintf(to,
		"usage: sky bench infer [--json] [--clients N] [--seconds T] [--inflight K]\n"
		"                       [--algos \"even optimal\"] [script options, below]\n"
		"       sky bench infer --drive --job J --broker HOST:PORT --pki CLIENT_DIR\n"
		"                       --observer BOARD_STATE [--clients N] [--inflight K]\n"
		"                       [--seconds T] [--algo NAME] [--even-throughput X]\n"
		"                       [--timeout S] [--seed N]\n"
		"--drive measures one serving job: --clients connections as the client in\n"
		"CLIENT_DIR (`sky pki client`), each keeping --inflight requests in flight for\n"
		"--seconds (after one warm-up request each and, under the full load, as many\n"
		"answers as requests in flight), watched by the idle board whose\n"
		"state directory is BOARD_STATE (`sky pki issue`; it reads the signed plan and\n"
		"counts the inter-stage frames). Prints one JSON object: algo, job, epoch,\n"
		"stages, throughput_seq_s, throughput_predicted_seq_s, measured_over_predicted,\n"
		"p50_ms, p99_ms, speedup_vs_even, bytes_per_request, bytes_per_request_fp32,\n"
		"requests, errors, batches, batch_fill, warmup_s, throughput_with_fill_seq_s,\n"
		"loadavg_1m.\n");
}

typedef struct slot {
	char id[SKY_INFER_ID_MAX + 1];
	double sent;
	int busy;
	int req_bytes;
} slot;

typedef struct client {
	sky_ic *ic;
	int idx;
	slot slots[MAX_INFLIGHT];
	long next;
} client;

typedef struct drive {
	/* the plan, from the observer */
	mbedtls_x509_crt planner;
	char plan_topic[SKY_TOPIC_BUF], fwd_filter[SKY_TOPIC_BUF], done_topic[SKY_TOPIC_BUF];
	int have_plan;
	sky_planmsg plan;
	char payload[SKY_SIGN_MAX_PAYLOAD + 1];
	/* the window */
	int measuring, sending;
	double t_load, t0, t1;
	long answered; /* ok responses since the full load started */
	long done, errors, frames;
	long batches, batch_requests; /* reported by the last stage in the window */
	double req_bytes, resp_bytes, frame_bytes, frame_bytes_fp32;
	double *lat;
	long n_lat;
	char first_error[300];
	/* the requests */
	client clients[MAX_CLIENTS];
	int n_clients, inflight;
	char tag[9];
	int seq, vocab, hidden;
	int32_t *tokens;
	sky_rng rng;
	client *cur; /* the client whose responses are being handed over */
} drive;

static drive g_d;

static void on_observe(void *ctx, const char *topic, size_t tl, const unsigned char *p, size_t len,
		       int retained)
{
	drive *v = ctx;
	if (strlen(topic) != tl)
		return;
	if (strcmp(topic, v->plan_topic) == 0) {
		size_t plen = 0;
		static sky_planmsg pm;
		if (sky_verify_envelope(&v->planner, (const char *)p, len, v->payload,
					sizeof v->payload - 1, &plen, NULL) == 0 &&
		    sky_planmsg_decode(v->payload, plen, &pm, NULL) == 0 &&
		    (!v->have_plan || pm.epoch > v->plan.epoch)) {
			v->plan = pm;
			v->have_plan = 1;
		}
		return;
	}
	if (!v->measuring)
		return;
	sky_topic_stage_msg sm;
	if (sky_topic_parse_stage(topic, tl, &sm) == 0 && strcmp(sm.leaf, SKY_TOPIC_DONE) == 0) {
		/* {"epoch":E,"batch":N,"n":R}: a batch of R requests answered */
		int64_t n = 0, ep = 0;
		cJSON *doc = len <= SKY_SERVE_DONE_MAX_BYTES ? sky_json_parse((const char *)p, len, NULL)
							       : NULL;
		if (doc && sky_json_i64(doc, "epoch", 0, SKY_JSON_INT_MAX, &ep, "done", NULL) == 0 &&
		    sky_json_i64(doc, "n", 1, SKY_CAPS_MAX_BATCH, &n, "done", NULL) == 0 &&
		    ep == v->plan.epoch) {
			v->batches++;
			v->batch_requests += n;
		}
		sky_json_free(doc);
		return;
	}
	sky_frame_hdr h;
	if (sky_frame_decode(p, len, SKY_FRAME_MAX_PAYLOAD_DEFAULT, &h, NULL) != 0 ||
	    h.direction != SKY_FRAME_FWD)
		return;
	v->frames++;
	v->frame_bytes += (double)len;
	/* the payload holds rows of (entry, S mask bytes, S*H int8 values) */
	double row = SERVE_ENTRY + (double)v->seq + (double)v->seq * v->hidden;
	double rows = h.payload_bytes > SERVE_HDR ? (double)(long)((h.payload_bytes - SERVE_HDR) / row) : 0;
	v->frame_bytes_fp32 += (double)len + 3.0 * rows * v->seq * v->hidden;
}

static int send_one(drive *v, client *c, slot *s)
{
	sky_infer_req q = {.n = v->seq, .tokens = v->tokens, .cap = v->seq};
	/* random ids in [1, vocab): any token but padding's */
	for (int i = 0; i < v->seq; i++)
		v->tokens[i] = 1 + (int32_t)sky_rng_below(&v->rng, (uint32_t)(v->vocab - 1));
	snprintf(q.id, sizeof q.id, "%s-c%d-%ld", v->tag, c->idx, c->next++);
	sky_diag d;
	sky_diag_clear(&d);
	int n = sky_ic_send(c->ic, &q, &d);
	if (n < 0) {
		fprintf(stderr, "sky bench infer: request not sent: %s\n", d.msg);
		return n;
	}
	snprintf(s->id, sizeof s->id, "%s", q.id);
	s->sent = sky_clock_s();
	s->busy = 1;
	s->req_bytes = n;
	return 0;
}

static void on_resp(void *ctx, const sky_infer_resp *r, const char *raw, size_t len)
{
	drive *v = ctx;
	client *c = v->cur;
	double now = sky_clock_s();
	for (int i = 0; i < v->inflight; i++) {
		slot *s = &c->slots[i];
		if (!s->busy || strcmp(s->id, r->id) != 0)
			continue;
		s->busy = 0;
		v->answered += r->ok;
		if (v->measuring) {
			v->req_bytes += s->req_bytes;
			v->resp_bytes += (double)len;
			if (r->ok) {
				v->done++;
				if (v->n_lat < MAX_LAT)
					v->lat[v->n_lat++] = now - s->sent;
			}
		}
		if (!r->ok) {
			v->errors++;
			if (!v->first_error[0])
				snprintf(v->first_error, sizeof v->first_error, "%s (%s): %.200s", r->id,
					 sky_infer_code_name(r->code), r->error);
		}
		if (v->sending)
			send_one(v, c, s);
		return;
	}
}

/* The machine's one-minute load average, or -1. */
static double load_1m(void)
{
	char buf[128];
	long n = sky_file_read("/proc/loadavg", buf, sizeof buf - 1);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	char *end;
	double x = strtod(buf, &end);
	return end != buf ? x : -1;
}

/* Polls every connection once; waits up to wait_ms on the last. */
static void poll_all(drive *v, sky_mqtt *obs, int wait_ms)
{
	sky_mqtt_poll(obs, 0);
	for (int k = 0; k < v->n_clients; k++) {
		v->cur = &v->clients[k];
		sky_ic_poll(v->clients[k].ic, k == v->n_clients - 1 ? wait_ms : 0);
	}
}

static int busy_slots(const drive *v)
{
	int n = 0;
	for (int k = 0; k < v->n_clients; k++)
		for (int i = 0; i < v->inflight; i++)
			n += v->clients[k].slots[i].busy;
	return n;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* nearest rank: the smallest value with at least q of them at or below */
static double quantile(const double *sorted, long n, double q)
{
	if (n <= 0)
		return 0;
	long k = (long)(q * (double)n + 0.999999999);
	k = k < 1 ? 1 : k > n ? n : k;
	return sorted[k - 1];
}

static int drive_run(int argc, char **argv)
{
	const char *job = NULL, *broker = NULL, *pki = NULL, *observer = NULL, *algo = "";
	double seconds = 10, even = 0, timeout_s = 120;
	long clients = 8, inflight = 8, seed = 1;
	enum {
		O_DRIVE = SKY_OPT_FIRST, O_JOB, O_BROKER, O_PKI, O_OBSERVER, O_CLIENTS, O_INFLIGHT,
		O_SECONDS, O_ALGO, O_EVEN, O_TIMEOUT, O_SEED
	};
	static const struct option k_opts[] = {{"drive", no_argument, NULL, O_DRIVE},
					       {"job", required_argument, NULL, O_JOB},
					       {"broker", required_argument, NULL, O_BROKER},
					       {"pki", required_argument, NULL, O_PKI},
					       {"observer", required_argument, NULL, O_OBSERVER},
					       {"clients", required_argument, NULL, O_CLIENTS},
					       {"inflight", required_argument, NULL, O_INFLIGHT},
					       {"seconds", required_argument, NULL, O_SECONDS},
					       {"algo", required_argument, NULL, O_ALGO},
					       {"even-throughput", required_argument, NULL, O_EVEN},
					       {"timeout", required_argument, NULL, O_TIMEOUT},
					       {"seed", required_argument, NULL, O_SEED},
					       SKY_OPT_STD,
					       {0}};
	const char *cmd = "bench infer";
	sky_opt op;
	sky_opt_begin(&op, "sky bench infer", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		int rc = 0;
		switch (c) {
		case SKY_OPT_HELP:
			usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_DRIVE:
			break;
		case O_JOB:
			job = op.arg;
			break;
		case O_BROKER:
			broker = op.arg;
			break;
		case O_PKI:
			pki = op.arg;
			break;
		case O_OBSERVER:
			observer = op.arg;
			break;
		case O_ALGO:
			algo = op.arg;
			break;
		case O_CLIENTS:
			rc = sky_cli_int(cmd, op.name, op.arg, 1, MAX_CLIENTS, &clients);
			break;
		case O_INFLIGHT:
			rc = sky_cli_int(cmd, op.name, op.arg, 1, MAX_INFLIGHT, &inflight);
			break;
		case O_SEED:
			rc = sky_cli_int(cmd, op.name, op.arg, 0, 0x7fffffffL, &seed);
			break;
		case O_SECONDS:
			rc = sky_cli_double(cmd, op.name, op.arg, 0.1, 86400, &seconds);
			break;
		case O_EVEN:
			rc = sky_cli_double(cmd, op.name, op.arg, 0, 1e12, &even);
			break;
		case O_TIMEOUT:
			rc = sky_cli_double(cmd, op.name, op.arg, 1, 86400, &timeout_s);
			break;
		default:
			return 2;
		}
		if (rc)
			return 2;
	}
	if (sky_opt_no_args(&op) != 0)
		return 2;
	if (!job || !broker || !pki || !observer) {
		fprintf(stderr, "sky bench infer --drive: --job, --broker, --pki and --observer are "
				"required\n");
		return 2;
	}
	drive *v = &g_d;
	memset(v, 0, sizeof *v);
	mbedtls_x509_crt_init(&v->planner);
	v->n_clients = (int)clients;
	v->inflight = (int)inflight;
	sky_rng_seed(&v->rng, (uint64_t)seed);
	sky_diag d;
	sky_diag_clear(&d);
	sky_mqtt *obs = NULL;
	int rc = 1;
	char ca[SKY_IC_PATH_MAX], crt[SKY_IC_PATH_MAX], key[SKY_IC_PATH_MAX], pcrt[SKY_IC_PATH_MAX];
	snprintf(ca, sizeof ca, "%s/" SKY_IDENTITY_CA_FILE, observer);
	snprintf(crt, sizeof crt, "%s/" SKY_IDENTITY_CERT_FILE, observer);
	snprintf(key, sizeof key, "%s/" SKY_IDENTITY_KEY_FILE, observer);
	snprintf(pcrt, sizeof pcrt, "%s/" SKY_IDENTITY_PLANNER_FILE, observer);
	sky_ic_files files;
	v->lat = malloc(MAX_LAT * sizeof *v->lat);
	if (!v->lat || sky_ic_tag(v->tag) != 0)
		goto exit;
	if (sky_ic_resolve(pki, NULL, NULL, NULL, &files, &d) != 0 ||
	    sky_sign_load_cert(&v->planner, pcrt, &d) != 0 ||
	    sky_topic_job(v->plan_topic, sizeof v->plan_topic, job, SKY_TOPIC_PLAN) != 0 ||
	    sky_topic_stage_leaf(v->fwd_filter, sizeof v->fwd_filter, job, -1, SKY_TOPIC_FWD, NULL) !=
		    0 ||
	    sky_topic_stage_leaf(v->done_topic, sizeof v->done_topic, job, 0, SKY_TOPIC_DONE, NULL) !=
		    0) {
		fprintf(stderr, "sky bench infer: %s\n", d.msg[0] ? d.msg : "bad job name");
		goto exit;
	}
	/* the observer: an idle board on the fleet listener */
	char oid[48];
	snprintf(oid, sizeof oid, "bench-%.8s", v->tag);
	sky_mqtt_opts mo = {.broker = broker, .client_id = oid, .ca_file = ca, .cert_file = crt,
			    .key_file = key, .keepalive_s = 30, .on_msg = on_observe, .ctx = v};
	if (sky_mqtt_connect(&obs, &mo, &d) != 0 ||
	    sky_mqtt_subscribe(obs, v->plan_topic, 1, 10000, &d) != 0 ||
	    sky_mqtt_subscribe(obs, v->fwd_filter, 0, 10000, &d) != 0 ||
	    sky_mqtt_subscribe(obs, v->done_topic, 0, 10000, &d) != 0) {
		fprintf(stderr, "sky bench infer: observer: %s\n", d.msg);
		goto exit;
	}
	double t = sky_clock_s();
	while (!v->have_plan && sky_clock_s() - t < timeout_s)
		sky_mqtt_poll(obs, 50);
	if (!v->have_plan || !v->plan.infer.on) {
		fprintf(stderr, "sky bench infer: no serving plan for job %s within %g s\n", job,
			timeout_s);
		goto exit;
	}
	sky_model_cfg mc;
	if (sky_model_preset(v->plan.shape.name, &mc) != 0) {
		fprintf(stderr, "sky bench infer: unknown model %s in the plan\n", v->plan.shape.name);
		goto exit;
	}
	v->seq = v->plan.shape.seq;
	v->hidden = v->plan.shape.hidden;
	v->vocab = mc.vocab;
	v->tokens = malloc((size_t)v->seq * sizeof *v->tokens);
	if (!v->tokens || v->vocab < 2)
		goto exit;
	for (int k = 0; k < v->n_clients; k++) {
		v->clients[k].idx = k;
		if (sky_ic_open(&v->clients[k].ic, broker, &files, job, on_resp, v, &d) != 0) {
			fprintf(stderr, "sky bench infer: client %d: %s\n", k, d.msg);
			goto exit;
		}
	}
	/* warm-up: one request per client, answered, before anything counts */
	v->sending = 0;
	for (int k = 0; k < v->n_clients; k++)
		if (send_one(v, &v->clients[k], &v->clients[k].slots[0]) != 0)
			goto exit;
	t = sky_clock_s();
	while (busy_slots(v) > 0 && sky_clock_s() - t < timeout_s)
		poll_all(v, obs, 5);
	if (busy_slots(v) > 0 || v->errors > 0) {
		fprintf(stderr, "sky bench infer: job %s did not answer the warm-up within %g s%s%s\n",
			job, timeout_s, v->first_error[0] ? ": " : "", v->first_error);
		goto exit;
	}
	/* the full load, and one round of it before the window */
	v->sending = 1;
	v->answered = 0;
	v->t_load = sky_clock_s();
	for (int k = 0; k < v->n_clients; k++)
		for (int i = 0; i < v->inflight; i++)
			if (send_one(v, &v->clients[k], &v->clients[k].slots[i]) != 0)
				goto exit;
	const long round = (long)v->n_clients * v->inflight;
	while (v->answered < round && sky_clock_s() - v->t_load < timeout_s)
		poll_all(v, obs, 2);
	if (v->answered < round) {
		fprintf(stderr, "sky bench infer: job %s answered %ld of %ld requests under load "
				"within %g s%s%s\n",
			job, v->answered, round, timeout_s, v->first_error[0] ? ": " : "",
			v->first_error);
		goto exit;
	}
	/* the window */
	v->measuring = 1;
	v->t0 = sky_clock_s();
	while (sky_clock_s() - v->t0 < seconds)
		poll_all(v, obs, 2);
	v->measuring = 0;
	v->sending = 0;
	v->t1 = sky_clock_s();
	long answered_load = v->answered;
	double load = load_1m();
	/* what is still in flight is answered, not counted (a bounded wait:
	 * a request the fleet lost would hold it up to --timeout otherwise) */
	t = sky_clock_s();
	while (busy_slots(v) > 0 && sky_clock_s() - t < (timeout_s < 30 ? timeout_s : 30))
		poll_all(v, obs, 5);
	int unanswered = busy_slots(v);
	if (v->done == 0) {
		fprintf(stderr, "sky bench infer: no response within the %g s window%s%s\n", seconds,
			v->first_error[0] ? "; first error " : "", v->first_error);
		goto exit;
	}
	qsort(v->lat, (size_t)v->n_lat, sizeof *v->lat, cmp_double);
	double window = v->t1 - v->t0, thr = (double)v->done / window;
	double pred = v->plan.infer.predicted_seq_s;
	double per = (v->req_bytes + v->resp_bytes + v->frame_bytes) / (double)v->done;
	double per32 = (v->req_bytes + v->resp_bytes + v->frame_bytes_fp32) / (double)v->done;
	printf("{\"algo\":\"%s\",\"job\":\"%s\",\"epoch\":%lld,\"stages\":%d,\"clients\":%d,"
	       "\"inflight\":%d,\"seconds\":%.3f,\"requests\":%ld,\"errors\":%ld,"
	       "\"throughput_seq_s\":%.6f,\"throughput_predicted_seq_s\":%.6f,"
	       "\"measured_over_predicted\":%.6f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
	       "\"speedup_vs_even\":%.6f,\"bytes_per_request\":%.1f,\"bytes_per_request_fp32\":%.1f,"
	       "\"unanswered\":%d,\"frames\":%ld,\"frame_bytes\":%.0f,\"frame_bytes_fp32\":%.0f,"
	       "\"batches\":%ld,\"batch_fill\":%.4f,\"warmup_s\":%.3f,"
	       "\"throughput_with_fill_seq_s\":%.6f,\"loadavg_1m\":%.2f,\"plan\":[",
	       algo, job, (long long)v->plan.epoch, v->plan.n_stages, v->n_clients, v->inflight,
	       window, v->done, v->errors, thr, pred, pred > 0 ? thr / pred : 0,
	       1e3 * quantile(v->lat, v->n_lat, 0.50), 1e3 * quantile(v->lat, v->n_lat, 0.99),
	       even > 0 ? thr / even : 1.0, per, per32, unanswered, v->frames, v->frame_bytes,
	       v->frame_bytes_fp32, v->batches,
	       v->batches > 0 ? (double)v->batch_requests / ((double)v->batches * v->plan.infer.batch)
			      : 0.0,
	       v->t0 - v->t_load, (double)answered_load / (v->t1 - v->t_load), load);
	for (int k = 0; k < v->plan.n_stages; k++)
		printf("%s{\"board\":\"%s\",\"first\":%d,\"last\":%d}", k ? "," : "",
		       v->plan.stages[k].board, v->plan.stages[k].first, v->plan.stages[k].last);
	printf("]}\n");
	if (v->errors)
		fprintf(stderr, "sky bench infer: %ld refused requests, the first %s\n", v->errors,
			v->first_error);
	rc = 0;
exit:
	for (int k = 0; k < v->n_clients; k++)
		sky_ic_close(v->clients[k].ic);
	sky_mqtt_close(obs, 1000);
	mbedtls_x509_crt_free(&v->planner);
	free(v->lat);
	free(v->tokens);
	return rc;
}

int sky_bench_infer(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--drive"))
			return drive_run(argc, argv);
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			usage(stdout); /* and the script's own below */
	return sky_bench_script("sky bench infer", "bench_infer.sh", argc, argv);
}
