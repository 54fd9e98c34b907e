/* A federated job from its operator's side (docs/federation.md):
 *   sky job watch JOB --federated ...   one line per round, from what skyplan
 *                                       relays on sky/v1/jobs/<op>/job/<job>/metrics,
 *                                       until the job's state says it ended;
 *   sky job collect JOB --out-dir D ... the final global model (relayed,
 *                                       retained, on .../fedmodel) as a
 *                                       Hugging Face directory. */
#include "job_fed.h"

#include "sky_chunk.h"
#include "sky_clock.h"
#include "sky_err.h"
#include "sky_fedclient.h"
#include "sky_json.h"
#include "sky_mqtt.h"
#include "sky_opt.h"
#include "sky_sign.h"
#include "sky_thread.h"
#include "sky_topics.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fedf {
	sky_mutex lock;
	char metrics[SKY_TOPIC_BUF], state_t[SKY_TOPIC_BUF], model_t[SKY_TOPIC_BUF];
	char lines[64][SKY_METRICS_MAX_BYTES + 1];
	int n_lines;
	char state[SKY_JOB_STATE_MAX_BYTES + 1];
	int have_state;
	unsigned char *model;
	size_t model_len;
} fedf;

static fedf g;

/* --federated, or a collect --out-dir without --model-dir (a fine-tuning
 * job's collect --out-dir names the directory it was submitted from; a
 * federated job's model carries its own tokenizer files). */
int sky_job_fed_wanted(int argc, char **argv)
{
	int out_dir = 0, model_dir = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--federated"))
			return 1;
		out_dir |= !strncmp(argv[i], "--out-dir", 9);
		model_dir |= !strncmp(argv[i], "--model-dir", 11);
	}
	return out_dir && !model_dir;
}

static void on_msg(void *ctx, const char *topic, size_t tl, const unsigned char *p, size_t len,
		   int retained)
{
	fedf *f = ctx;
	if (strlen(topic) != tl)
		return;
	sky_mutex_lock(&f->lock);
	if (!strcmp(topic, f->metrics) && len <= SKY_METRICS_MAX_BYTES && f->n_lines < 64) {
		memcpy(f->lines[f->n_lines], p, len);
		f->lines[f->n_lines++][len] = '\0';
	} else if (!strcmp(topic, f->state_t) && len > 0 && len <= SKY_JOB_STATE_MAX_BYTES) {
		memcpy(f->state, p, len);
		f->state[len] = '\0';
		f->have_state = 1;
	} else if (!strcmp(topic, f->model_t) && len > 0) {
		unsigned char *b = malloc(len);
		if (b) {
			memcpy(b, p, len);
			free(f->model);
			f->model = b;
			f->model_len = len;
		}
	}
	sky_mutex_unlock(&f->lock);
}

/* Prints one round line (JSON as it came, or words). */
static void print_line(const char *l, int json)
{
	if (json) {
		printf("%s\n", l);
		return;
	}
	cJSON *doc = sky_json_parse(l, strlen(l), NULL);
	if (!doc)
		return;
	int r = 0, rs = 0;
	double t = 0, bi = 0, bo = 0, eps = 0;
	sky_json_int(doc, "fed_round", 0, 1 << 30, &r, "round", NULL);
	sky_json_int(doc, "rounds", 0, 1 << 30, &rs, "round", NULL);
	sky_json_num(doc, "round_s", 0, 1e12, &t, "round", NULL);
	sky_json_num(doc, "bytes_in", 0, 1e18, &bi, "round", NULL);
	sky_json_num(doc, "bytes_out", 0, 1e18, &bo, "round", NULL);
	int has_eps = sky_json_num(doc, "epsilon", 0, 1e300, &eps, "round", NULL) == 0;
	char in[512] = "", out[512] = "", ref[512] = "";
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(doc, "owners_in"), *e;
	cJSON_ArrayForEach(e, a) if (cJSON_IsString(e)) snprintf(in + strlen(in),
		sizeof in - strlen(in), "%s%s", in[0] ? "," : "", e->valuestring);
	a = cJSON_GetObjectItemCaseSensitive(doc, "owners_out");
	cJSON_ArrayForEach(e, a) if (cJSON_IsString(e)) snprintf(out + strlen(out),
		sizeof out - strlen(out), "%s%s", out[0] ? "," : "", e->valuestring);
	a = cJSON_GetObjectItemCaseSensitive(doc, "refused");
	cJSON_ArrayForEach(e, a) if (cJSON_IsNumber(e)) snprintf(ref + strlen(ref),
		sizeof ref - strlen(ref), " %s=%g", e->string, e->valuedouble);
	printf("round %d/%d: in %s, out %s, %.2f s, %.0f bytes in, %.0f out%s%s", r, rs,
	       in[0] ? in : "-", out[0] ? out : "-", t, bi, bo, ref[0] ? ", refused" : "", ref);
	if (has_eps)
		printf(", epsilon %.4g (delta 1e-5)", eps);
	printf("\n");
	fflush(stdout);
	sky_json_free(doc);
}

static int run(int argc, char **argv, int collect)
{
	enum { F_PKI = SKY_OPT_FIRST, F_BROKER, F_TIMEOUT, F_JSON, F_FED, F_OUT_DIR };
	static const struct option k_opts[] = {{"pki", required_argument, NULL, F_PKI},
					       {"broker", required_argument, NULL, F_BROKER},
					       {"timeout", required_argument, NULL, F_TIMEOUT},
					       {"json", no_argument, NULL, F_JSON},
					       {"federated", no_argument, NULL, F_FED},
					       {"out-dir", required_argument, NULL, F_OUT_DIR},
					       SKY_OPT_STD,
					       {0}};
	const char *pki = NULL, *broker = NULL, *out_dir = NULL, *job = NULL;
	double timeout = 600;
	int json = 0;
	sky_opt cli;
	const char *cmd = collect ? "sky job collect" : "sky job watch";
	sky_opt_begin(&cli, cmd, argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&cli)) != SKY_OPT_END;) {
		switch (c) {
		case SKY_OPT_HELP:
			printf("usage: %s JOB --pki DIR --broker HOST:PORT %s[--timeout S] [--json]\n",
			       cmd, collect ? "--out-dir D " : "--federated ");
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case F_PKI: pki = cli.arg; break;
		case F_BROKER: broker = cli.arg; break;
		case F_TIMEOUT: timeout = atof(cli.arg); break;
		case F_JSON: json = 1; break;
		case F_FED: break;
		case F_OUT_DIR: out_dir = cli.arg; break;
		default: return 2;
		}
	}
	job = cli.next < argc ? argv[cli.next] : NULL;
	if (!job || !pki || !broker || (collect && !out_dir) || timeout <= 0) {
		fprintf(stderr, "%s: JOB, --pki and --broker%s are required\n", cmd,
			collect ? " and --out-dir" : "");
		return 2;
	}
	fedf *f = &g;
	memset(f, 0, sizeof *f);
	sky_mutex_init(&f->lock);
	char ca[600], crt[600], key[600], op[80], tools[300], client[48];
	snprintf(ca, sizeof ca, "%s/ca.crt", pki);
	snprintf(crt, sizeof crt, "%s/operator.crt", pki);
	snprintf(key, sizeof key, "%s/operator.key", pki);
	sky_diag d;
	sky_diag_clear(&d);
	mbedtls_x509_crt me;
	mbedtls_x509_crt_init(&me);
	int rc = sky_sign_load_cert(&me, crt, &d);
	if (!rc && sky_sign_cert_cn(&me, op, sizeof op) != 0)
		rc = sky_diag_set(&d, SKY_EAUTH, "%s: no usable operator CN", crt);
	mbedtls_x509_crt_free(&me);
	if (!rc && (sky_topic_jobs_job(f->metrics, sizeof f->metrics, op, job, SKY_TOPIC_METRICS,
				       NULL) != 0 ||
		    sky_topic_jobs_job(f->state_t, sizeof f->state_t, op, job, SKY_TOPIC_STATE,
				       NULL) != 0 ||
		    sky_topic_jobs_job(f->model_t, sizeof f->model_t, op, job, SKY_TOPIC_FEDMODEL,
				       NULL) != 0 ||
		    sky_mqtt_claim_broker(broker, tools, sizeof tools) != 0))
		rc = sky_diag_set(&d, SKY_EINVAL, "job %s, broker %s: cannot name the topics", job,
				  broker);
	snprintf(client, sizeof client, "sky-fed-%08llx",
		 (unsigned long long)(sky_clock_ns() & 0xffffffffu));
	sky_mqtt_opts mo = {.broker = tools, .client_id = client, .ca_file = ca, .cert_file = crt,
			    .key_file = key, .keepalive_s = 30, .on_msg = on_msg, .ctx = f};
	sky_mqtt *m = NULL;
	if (!rc)
		rc = sky_mqtt_connect(&m, &mo, &d);
	if (!rc && !collect)
		rc = sky_mqtt_subscribe(m, f->metrics, 1, 5000, &d);
	if (!rc)
		rc = sky_mqtt_subscribe(m, f->state_t, 1, 5000, &d);
	if (!rc && collect)
		rc = sky_mqtt_subscribe(m, f->model_t, 1, 5000, &d);
	if (rc) {
		fprintf(stderr, "%s: %s\n", cmd, d.msg);
		sky_mqtt_close(m, 0);
		return 1;
	}
	int ex = 1, done = 0;
	double t0 = sky_clock_s();
	while (!done && sky_clock_s() - t0 < timeout) {
		sky_mqtt_poll(m, 50);
		sky_mutex_lock(&f->lock);
		for (int i = 0; i < f->n_lines; i++)
			print_line(f->lines[i], json);
		f->n_lines = 0;
		if (f->have_state && (!collect || f->model || !strstr(f->state, "\"done\""))) {
			int ok = strstr(f->state, "\"state\":\"done\"") != NULL;
			if (collect && ok) {
				sky_diag_clear(&d);
				if (sky_fedclient_save_dir(f->model, f->model_len, out_dir, &d) == 0) {
					printf("saved %s\n", out_dir);
					ex = 0;
				} else {
					fprintf(stderr, "%s: %s\n", cmd, d.msg);
				}
			} else if (!collect) {
				if (!json)
					printf("job %s %s\n", job, ok ? "done" : f->state);
				ex = ok ? 0 : 1;
			} else {
				fprintf(stderr, "%s: job %s ended: %s\n", cmd, job, f->state);
			}
			done = 1;
		}
		sky_mutex_unlock(&f->lock);
	}
	if (!done)
		fprintf(stderr, "%s: job %s: not ended within %g s\n", cmd, job, timeout);
	sky_mqtt_close(m, 1000);
	free(f->model);
	return ex;
}

int sky_job_fed_watch(int argc, char **argv)
{
	return run(argc, argv, 0);
}

int sky_job_fed_collect(int argc, char **argv)
{
	return run(argc, argv, 1);
}
