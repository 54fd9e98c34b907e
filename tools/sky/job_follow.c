/* sky job watch: one line per training step from the stages' metrics;
 * sky job collect: every stage's trained part into one safetensors file.
 * Both connect with the operator identity (DIR/operator.crt) and read what
 * skyplan relays of the job to its owner, on sky/v1/jobs/<operator CN>/
 * job/<job>/{metrics,part/<board>,state} (the ACL lets an operator read
 * only its own; a part over the message limit comes as chunks on
 * part/<board>/<i>, sky_partchunk.h), and the job's signed plan (retained, verified with
 * DIR/planner.crt) to know its stages. */
#include "job_follow.h"
#include "train_data.h"

#include "job_fed.h"

#include "sky_cli.h"
#include "sky_clock.h"
#include "sky_embed.h"
#include "sky_file.h"
#include "sky_err.h"
#include "sky_head.h"
#include "sky_hfmodel.h"
#include "sky_json.h"
#include "sky_layer.h"
#include "sky_mqtt.h"
#include "sky_opt.h"
#include "sky_partchunk.h"
#include "sky_planmsg.h"
#include "sky_rng.h"
#include "sky_safetensors.h"
#include "sky_sign.h"
#include "sky_thread.h"
#include "sky_topics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct follow_opts {
	const char *job, *pki, *broker, *out;
	/* collect a fine-tuning job as a Hugging Face directory: --out-dir
	 * OUT with --model-dir D (the directory the job was submitted from:
	 * its config and tokenizer files) */
	const char *out_dir, *model_dir;
	char out_buf[4096];
	const char *events; /* watch: every metrics message and the plan, a line each */
	/* collect: parts as files (a board's <state>/parts/, for a part over the
	 * message limit, which the board only writes there) */
	const char *part_files[SKY_PLANMSG_MAX_STAGES];
	int n_part_files;
	double timeout_s;
	int json;
} follow_opts;

static int parse_opts(const char *cmd, int argc, char **argv, follow_opts *o, int need_out)
{
	memset(o, 0, sizeof *o);
	o->timeout_s = 600;
	enum { O_PKI = SKY_OPT_FIRST, O_BROKER, O_OUT, O_EVENTS, O_TIMEOUT, O_JSON, O_PART,
	       O_OUT_DIR, O_MODEL_DIR };
	static const struct option k_opts[] = {{"pki", required_argument, NULL, O_PKI},
					       {"out-dir", required_argument, NULL, O_OUT_DIR},
					       {"model-dir", required_argument, NULL, O_MODEL_DIR},
					       {"broker", required_argument, NULL, O_BROKER},
					       {"out", required_argument, NULL, O_OUT},
					       {"events", required_argument, NULL, O_EVENTS},
					       {"timeout", required_argument, NULL, O_TIMEOUT},
					       {"json", no_argument, NULL, O_JSON},
					       {"part", required_argument, NULL, O_PART},
					       SKY_OPT_STD,
					       {0}};
	char prog[32];
	snprintf(prog, sizeof prog, "sky job %s", cmd);
	sky_opt op;
	sky_opt_begin(&op, prog, argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		const char *a = op.name, *v = op.arg;
		switch (c) {
		case SKY_OPT_HELP:
			printf("usage: sky job %s JOB --pki DIR --broker HOST:PORT%s [--timeout S]%s\n",
			       cmd, need_out ? " (--out F.safetensors | --out-dir OUT --model-dir D)" : "",
			       need_out ? " [--part F]..." : " [--json] [--events F.jsonl]");
			if (need_out)
				printf("--out-dir OUT --model-dir D: a fine-tuning job as a Hugging Face\n"
				       "directory: OUT/model.safetensors, OUT/config.json (D's, with the\n"
				       "data set's label names as id2label) and D's tokenizer files\n");
			if (need_out)
				printf("--part F: a stage's part as a file, for one over the broker's message\n"
				       "limit (a board then only writes it to <state>/parts/); used for its\n"
				       "stage if it is of the plan's epoch and none arrived\n");
			if (!need_out)
				printf("--events F.jsonl: also write each stage's metrics message as received,\n"
				       "one a line, and at the end the signed plan's payload as {\"plan\":...}\n"
				       "(what `sky bench fleet --analyze` reads)\n");
			return 1;
		case SKY_OPT_VERSION:
			return 1;
		case O_JSON:
			o->json = 1;
			break;
		case O_PKI:
			o->pki = v;
			break;
		case O_BROKER:
			o->broker = v;
			break;
		case O_OUT:
			if (!need_out) {
				fprintf(stderr, "sky job %s: unknown option '%s' (see --help)\n", cmd, a);
				return -1;
			}
			o->out = v;
			break;
		case O_OUT_DIR:
		case O_MODEL_DIR:
			if (!need_out) {
				fprintf(stderr, "sky job %s: unknown option '%s' (see --help)\n", cmd, a);
				return -1;
			}
			*(c == O_OUT_DIR ? &o->out_dir : &o->model_dir) = v;
			break;
		case O_PART:
			if (!need_out || o->n_part_files >= SKY_PLANMSG_MAX_STAGES) {
				fprintf(stderr, "sky job %s: %s\n", cmd,
					need_out ? "too many --part files" : "--part goes with collect");
				return -1;
			}
			o->part_files[o->n_part_files++] = v;
			break;
		case O_EVENTS:
			if (need_out) {
				fprintf(stderr, "sky job %s: unknown option '%s' (see --help)\n", cmd, a);
				return -1;
			}
			o->events = v;
			break;
		case O_TIMEOUT:
			if (sky_cli_double(cmd, a, v, 0.1, 1e6, &o->timeout_s))
				return -1;
			break;
		default:
			return -1;
		}
	}
	if (op.next < argc)
		o->job = argv[op.next];
	if (op.next + 1 < argc) {
		fprintf(stderr, "sky job %s: one JOB, got '%s' and '%s'\n", cmd, argv[op.next],
			argv[op.next + 1]);
		return -1;
	}
	if (need_out && o->out_dir) {
		if (o->out || !o->model_dir) {
			fprintf(stderr, "sky job %s: --out-dir needs --model-dir (the job's model "
					"directory) and no --out\n",
				cmd);
			return -1;
		}
		snprintf(o->out_buf, sizeof o->out_buf, "%s/model.safetensors", o->out_dir);
		o->out = o->out_buf;
	} else if (o->model_dir) {
		fprintf(stderr, "sky job %s: --model-dir goes with --out-dir\n", cmd);
		return -1;
	}
	if (!o->job || !sky_topic_segment_ok(o->job) || !o->pki || !o->broker || (need_out && !o->out)) {
		fprintf(stderr, "sky job %s: JOB, --pki and --broker%s are required\n", cmd,
			need_out ? " and --out" : "");
		return -1;
	}
	return 0;
}

/* What both commands follow: the plan, and the job's messages. */
#define MAX_STEPS 100000
typedef struct part {
	unsigned char *bytes;
	size_t len;
} part;

/* sky/v1/jobs/<op>/job/<job>/part/<board>: longer than SKY_TOPIC_BUF with
 * 64-byte names */
#define RELAY_TOPIC_BUF 256
/* parts being rebuilt from chunks at once: one per board of a chunked
 * part, and room for an older epoch's chunks still retained */
#define CHUNKED_SLOTS 8

typedef struct chunked {
	char board[SKY_TOPIC_SEGMENT_MAX + 1];
	sky_part_rx rx;
} chunked;

typedef struct follow {
	sky_mutex lock;
	mbedtls_x509_crt planner;
	char op[SKY_TOPIC_SEGMENT_MAX + 1]; /* our CN: the relayed topics are ours */
	char plan_topic[SKY_TOPIC_BUF], metrics_topic[RELAY_TOPIC_BUF];
	char part_prefix[RELAY_TOPIC_BUF], part_filter[RELAY_TOPIC_BUF], state_topic[RELAY_TOPIC_BUF];
	/* the job's last state, retained by skyplan once it ended; one that
	 * comes live (not retained) is trusted a moment after it came, so the
	 * stages' last metrics, which skyplan relayed before it, are shown */
	int have_state, state_retained;
	double state_at;
	char state[SKY_JOB_STATE_MAX_BYTES + 1];
	int have_plan;
	sky_planmsg plan;
	char payload[SKY_SIGN_MAX_PAYLOAD + 1];
	/* watch */
	char lines[64][SKY_METRICS_MAX_BYTES + 1]; /* metrics waiting for the main loop */
	size_t line_len[64];
	int n_lines;
	/* collect */
	part parts[SKY_PLANMSG_MAX_STAGES];
	char part_board[SKY_PLANMSG_MAX_STAGES][SKY_TOPIC_SEGMENT_MAX + 1];
	int n_parts;
	char chunk_filter[RELAY_TOPIC_BUF];
	chunked chunked[CHUNKED_SLOTS];
	char chunk_err[300]; /* why the last chunk was not taken */
	/* how to connect again after the broker went away (reconnect) */
	sky_mqtt_opts mo;
	char ca[600], crt[600], key[600], client[48], broker[300];
} follow;

static follow g_f;

/* The epoch a part's metadata names (-1: none). */
static long long part_epoch(const unsigned char *b, size_t len)
{
	sky_st_file st;
	sky_st_init(&st);
	const char *pe;
	long long e = -1;
	if (sky_st_parse(&st, b, len, NULL) == 0 && (pe = sky_st_meta_get(&st, "sky_epoch")))
		e = atoll(pe);
	sky_st_close(&st);
	return e;
}

/* b (malloc, len bytes) becomes board's part unless the one it has is of
 * a later epoch (an older run's chunks may still be retained). Takes b. */
static void set_part(follow *f, const char *board, unsigned char *b, size_t len)
{
	int i = 0;
	while (i < f->n_parts && strcmp(f->part_board[i], board))
		i++;
	if (i == f->n_parts) {
		if (f->n_parts == SKY_PLANMSG_MAX_STAGES) {
			free(b);
			return;
		}
		f->n_parts++;
	} else if (part_epoch(f->parts[i].bytes, f->parts[i].len) > part_epoch(b, len)) {
		free(b);
		return;
	} else {
		free(f->parts[i].bytes);
	}
	snprintf(f->part_board[i], sizeof f->part_board[i], "%s", board);
	f->parts[i] = (part){b, len};
}

/* A chunk of a part (rest: "<board>/<i>" after the part prefix): checked,
 * and into the slot rebuilding its part; the whole part when it is. */
static void take_chunk(follow *f, const char *rest, const unsigned char *p, size_t len)
{
	char board[SKY_TOPIC_SEGMENT_MAX + 1];
	const char *slash = strchr(rest, '/');
	uint32_t idx;
	sky_chunk c;
	sky_diag d;
	sky_diag_clear(&d);
	if (!slash || (size_t)(slash - rest) >= sizeof board)
		return;
	memcpy(board, rest, (size_t)(slash - rest));
	board[slash - rest] = '\0';
	if (!sky_topic_segment_ok(board) || sky_partchunk_index(slash + 1, &idx) != 0)
		return;
	if (sky_partchunk_check(p, len, idx, &c, &d) != 0) {
		snprintf(f->chunk_err, sizeof f->chunk_err, "chunk %u of %s's part: %.200s", idx, board,
			 d.msg);
		return;
	}
	chunked *slot = NULL, *free_slot = NULL;
	for (int i = 0; i < CHUNKED_SLOTS && !slot; i++) {
		chunked *k = &f->chunked[i];
		if (k->rx.buf && !strcmp(k->board, board) && sky_part_rx_same(&k->rx, &c))
			slot = k;
		else if (!k->rx.buf && !free_slot)
			free_slot = k;
	}
	if (!slot && !(slot = free_slot)) {
		snprintf(f->chunk_err, sizeof f->chunk_err,
			 "chunk %u of %s's part: more than %d parts being rebuilt at once", idx, board,
			 CHUNKED_SLOTS);
		return;
	}
	snprintf(slot->board, sizeof slot->board, "%s", board);
	int rc = sky_part_rx_take(&slot->rx, &c, &d);
	if (rc < 0) {
		snprintf(f->chunk_err, sizeof f->chunk_err, "%s's part: %.200s", board, d.msg);
	} else if (rc == 1) {
		size_t n;
		unsigned char *b = sky_part_rx_release(&slot->rx, &n);
		set_part(f, board, b, n);
	}
}

static void on_msg(void *ctx, const char *topic, size_t tl, const unsigned char *p, size_t len,
		   int retained)
{
	follow *f = ctx;
	if (strlen(topic) != tl)
		return;
	sky_mutex_lock(&f->lock);
	size_t pl = strlen(f->part_prefix);
	if (!strcmp(topic, f->plan_topic)) {
		size_t plen = 0;
		static sky_planmsg tmp;
		if (sky_verify_envelope(&f->planner, (const char *)p, len, f->payload, sizeof f->payload,
					&plen, NULL) == 0 &&
		    sky_planmsg_decode(f->payload, plen, &tmp, NULL) == 0 &&
		    (!f->have_plan || tmp.epoch >= f->plan.epoch)) {
			f->plan = tmp;
			f->have_plan = 1;
		}
	} else if (!strcmp(topic, f->state_topic)) {
		if (len > 0 && len <= SKY_JOB_STATE_MAX_BYTES) {
			memcpy(f->state, p, len);
			f->state[len] = '\0';
			f->have_state = 1;
			f->state_retained = retained;
			f->state_at = sky_clock_s();
		}
	} else if (!strcmp(topic, f->metrics_topic)) {
		if (f->n_lines < 64 && len <= SKY_METRICS_MAX_BYTES) {
			memcpy(f->lines[f->n_lines], p, len);
			f->line_len[f->n_lines++] = len;
		}
	} else if (!strncmp(topic, f->part_prefix, pl) && sky_topic_segment_ok(topic + pl) &&
		   len > 0) {
		unsigned char *b = malloc(len);
		if (b) {
			memcpy(b, p, len);
			set_part(f, topic + pl, b, len);
		}
	} else if (!strncmp(topic, f->part_prefix, pl) && len > 0) {
		take_chunk(f, topic + pl, p, len);
	}
	sky_mutex_unlock(&f->lock);
}

static sky_mqtt *connect_follow(const char *cmd, const follow_opts *o, follow *f, sky_diag *d)
{
	snprintf(f->ca, sizeof f->ca, "%s/ca.crt", o->pki);
	char pcrt[600];
	snprintf(f->crt, sizeof f->crt, "%s/operator.crt", o->pki);
	snprintf(f->key, sizeof f->key, "%s/operator.key", o->pki);
	snprintf(pcrt, sizeof pcrt, "%s/planner.crt", o->pki);
	sky_rng rng;
	sky_rng_seed(&rng, sky_clock_ns());
	snprintf(f->client, sizeof f->client, "sky-%s-%08llx", cmd,
		 (unsigned long long)(sky_rng_u64(&rng) >> 32));
	sky_mutex_init(&f->lock);
	mbedtls_x509_crt_init(&f->planner);
	sky_topic_job(f->plan_topic, sizeof f->plan_topic, o->job, SKY_TOPIC_PLAN);
	if (sky_sign_load_cert(&f->planner, pcrt, d) != 0)
		return NULL;
	/* our CN names the topics skyplan relays the job to */
	mbedtls_x509_crt me;
	mbedtls_x509_crt_init(&me);
	int crc = sky_sign_load_cert(&me, f->crt, d);
	if (!crc && sky_sign_cert_cn(&me, f->op, sizeof f->op) != 0)
		crc = sky_diag_set(d, SKY_EAUTH, "%s: no usable operator CN", f->crt);
	mbedtls_x509_crt_free(&me);
	if (crc || sky_topic_jobs_job(f->metrics_topic, sizeof f->metrics_topic, f->op, o->job,
				      SKY_TOPIC_METRICS, NULL) != 0 ||
	    sky_topic_jobs_job(f->state_topic, sizeof f->state_topic, f->op, o->job, SKY_TOPIC_STATE,
			       NULL) != 0 ||
	    sky_topic_jobs_job(f->part_filter, sizeof f->part_filter, f->op, o->job, SKY_TOPIC_PART,
			       "+") != 0 ||
	    sky_topic_jobs_job(f->chunk_filter, sizeof f->chunk_filter, f->op, o->job,
			       SKY_TOPIC_PART "/+", "+") != 0) {
		if (!crc)
			sky_diag_set(d, SKY_EINVAL, "operator %s, job %s: names too long for a topic",
				     f->op, o->job);
		return NULL;
	}
	snprintf(f->part_prefix, sizeof f->part_prefix, "%.*s", (int)strlen(f->part_filter) - 1,
		 f->part_filter);
	/* operator tools: the listener beside the fleet's */
	if (sky_mqtt_claim_broker(o->broker, f->broker, sizeof f->broker) != 0) {
		sky_diag_set(d, SKY_EINVAL, "--broker must be HOST:PORT (port below 65535), got '%s'",
			     o->broker);
		return NULL;
	}
	sky_mqtt_opts mo = {.broker = f->broker, .client_id = f->client, .ca_file = f->ca,
			    .cert_file = f->crt, .key_file = f->key, .keepalive_s = 30,
			    .on_msg = on_msg, .ctx = f};
	f->mo = mo;
	sky_mqtt *m = NULL;
	if (sky_mqtt_connect(&m, &mo, d) != 0)
		return NULL;
	return m;
}

/* After the broker went away (a restart): connects again, at most once per
 * backoff delay, and subscribes to filters again. Metrics sent while we
 * were away are gone (they are not retained); the plan is retained. Returns
 * 1 when connected. */
static int reconnect_follow(follow *f, sky_mqtt **m, sky_mqtt_backoff *b, double *next_try,
			    const char *const *filters, int n)
{
	if (sky_mqtt_connected(*m))
		return 1;
	if (sky_clock_s() < *next_try)
		return 0;
	sky_mqtt_close(*m, 0);
	*m = NULL;
	sky_diag d;
	sky_diag_clear(&d);
	int rc = sky_mqtt_connect(m, &f->mo, &d);
	for (int i = 0; i < n && !rc; i++)
		rc = sky_mqtt_subscribe(*m, filters[i], 1, 5000, &d);
	if (rc) {
		int ms = sky_mqtt_backoff_next(b);
		fprintf(stderr, "sky job: %s; retrying in %d ms\n", d.msg, ms);
		*next_try = sky_clock_s() + ms / 1e3;
		return 0;
	}
	sky_mqtt_backoff_reset(b);
	fprintf(stderr, "sky job: connected again to %s\n", f->mo.broker);
	return 1;
}

/* ---- watch ------------------------------------------------------------------- */

typedef struct step_row {
	int seen;        /* stages that reported */
	double step_s;   /* slowest stage */
	double loss;
	int has_loss;
	float busy[64];
} step_row;

/* The job's last state (retained by skyplan when it ended), if it is of
 * the plan's epoch (or there is no plan): one line. Returns 1 (done), -1
 * (stalled or cancelled) or 0 (not this run's: go on). Called with the
 * lock held. */
/* A plan with stage replicas: which boards run each stage and how many of
 * the step's micro-batches each takes (one line; JSON with --json). */
static void print_replicas(const sky_planmsg *p, int json)
{
	if (json)
		printf("{\"replicas\":{\"epoch\":%lld,\"micro_batches\":%d,\"micro_batch\":%d,"
		       "\"stages\":[",
		       (long long)p->epoch, p->micro_batches, p->shape.batch);
	else
		printf("REPLICAS epoch %lld: %d micro-batches of %d;", (long long)p->epoch,
		       p->micro_batches, p->shape.batch);
	for (int k = 0; k < p->n_stages; k++) {
		int n = sky_planmsg_n_replicas(p, k);
		if (json)
			printf("%s{\"stage\":%d,\"boards\":[", k ? "," : "", k);
		else
			printf(" stage %d", k);
		for (int r = 0; r < n; r++) {
			int share = 0;
			for (int mb = 0; mb < p->micro_batches; mb++)
				share += sky_planmsg_route(p, k, mb) == r;
			if (json)
				printf("%s{\"board\":\"%s\",\"share\":%d}", r ? "," : "",
				       sky_planmsg_replica_board(p, k, r), share);
			else
				printf("%s%s (%d)", r ? " +" : " ", sky_planmsg_replica_board(p, k, r),
				       share);
		}
		if (json)
			printf("]}");
		else
			printf("%s", k + 1 < p->n_stages ? ";" : "");
	}
	printf(json ? "]}}\n" : "\n");
	fflush(stdout);
}

static int print_state(follow *f, const char *job, int json)
{
	cJSON *doc = sky_json_parse(f->state, strlen(f->state), NULL);
	char state[32] = "", msg[300] = "";
	int64_t ep = 0;
	int step = 0;
	double loss = 0;
	int has_loss = 0;
	if (doc) {
		sky_json_str(doc, "state", state, sizeof state, "state", NULL);
		sky_json_i64(doc, "epoch", 0, SKY_JSON_INT_MAX, &ep, "state", NULL);
		sky_json_int(doc, "step", 0, MAX_STEPS, &step, "state", NULL);
		has_loss = sky_json_num(doc, "loss", -1e30, 1e30, &loss, "state", NULL) == 0;
		sky_json_str(doc, "message", msg, sizeof msg, "state", NULL);
	}
	sky_json_free(doc);
	f->have_state = 0;
	if (!state[0] || (f->have_plan && ep < f->plan.epoch))
		return 0;
	if (json) { /* "last_step", not "step": a step line is one that has "step" */
		const char *st = !strcmp(state, "done")	     ? "done"
				 : !strcmp(state, "cancelled") ? "cancelled"
							       : "stalled";
		printf("{\"ended\":\"%s\",\"job\":\"%s\",\"epoch\":%lld,\"last_step\":%d", st, job,
		       (long long)ep, step);
		if (has_loss)
			printf(",\"loss\":%.9g", loss);
		printf("}\n");
	}
	else if (!strcmp(state, "done"))
		printf("job %s ended: done at step %d%s%.6f (epoch %lld)\n", job, step,
		       has_loss ? ", loss " : "", has_loss ? loss : 0.0, (long long)ep);
	else
		printf("job %s ended: %s%s%s (epoch %lld)\n", job, state, msg[0] ? ": " : "", msg,
		       (long long)ep);
	fflush(stdout);
	return !strcmp(state, "done") ? 1 : -1;
}

int sky_job_watch(int argc, char **argv)
{
	if (sky_job_fed_wanted(argc, argv)) /* a federated job's rounds (job_fed.c) */
		return sky_job_fed_watch(argc, argv);
	follow_opts o;
	int prc = parse_opts("watch", argc, argv, &o, 0);
	if (prc)
		return prc > 0 ? 0 : 2;
	follow *f = &g_f;
	memset(f, 0, sizeof *f);
	sky_diag d;
	sky_diag_clear(&d);
	int rc = 1;
	FILE *ev = NULL;
	step_row *rows = calloc(MAX_STEPS + 1, sizeof *rows);
	sky_mqtt *m = connect_follow("watch", &o, f, &d);
	if (!rows || !m || sky_mqtt_subscribe(m, f->metrics_topic, 1, 5000, &d) != 0 ||
	    sky_mqtt_subscribe(m, f->plan_topic, 1, 5000, &d) != 0 ||
	    sky_mqtt_subscribe(m, f->state_topic, 1, 5000, &d) != 0) {
		fprintf(stderr, "sky job watch: %s\n", d.msg[0] ? d.msg : "out of memory");
		goto exit;
	}
	if (o.events && !(ev = fopen(o.events, "w"))) {
		fprintf(stderr, "sky job watch: cannot write %s\n", o.events);
		goto exit;
	}
	double end = sky_clock_s() + o.timeout_s, next_try = 0;
	int done = 0, printed = 0, stalled = 0;
	sky_mqtt_backoff backoff; /* 0.25 s doubling to 2 s, jittered */
	sky_mqtt_backoff_init(&backoff, 250, 2000, sky_clock_ns());
	const char *const filters[] = {f->metrics_topic, f->plan_topic, f->state_topic};
	int64_t shown_epoch = 0;
	int ended = 0;
	while (sky_clock_s() < end && !stalled) {
		if (!reconnect_follow(f, &m, &backoff, &next_try, filters, 3)) {
			sky_sleep_ms(50);
			continue;
		}
		sky_mqtt_poll(m, 50);
		sky_mutex_lock(&f->lock);
		if (f->have_state && (f->state_retained || sky_clock_s() - f->state_at > 2.0) &&
		    (ended = print_state(f, o.job, o.json)) != 0) {
			sky_mutex_unlock(&f->lock);
			rc = ended > 0 ? 0 : 1;
			break;
		}
		int n_stages = f->have_plan ? f->plan.n_stages : 0;
		/* every board reports each step: a stage's replicas too */
		int n_boards = f->have_plan ? n_stages + f->plan.n_reps : 0;
		double predicted = f->have_plan ? f->plan.train.predicted_step_s : 0;
		if (f->have_plan && f->plan.epoch != shown_epoch) {
			/* a re-plan: a line in with the steps, and the steps after the
			 * one it resumes from are shown again as they are replayed */
			const sky_plan_train *t = &f->plan.train;
			if (shown_epoch && t->generation > 1) {
				if (o.json)
					printf("{\"replan\":{\"generation\":%d,\"epoch\":%lld,"
					       "\"resume_step\":%d,\"stages\":%d}}\n",
					       t->generation, (long long)f->plan.epoch, t->resume_step,
					       n_stages);
				else
					printf("REPLAN generation %d epoch %lld: %d stages, resuming from "
					       "step %d\n",
					       t->generation, (long long)f->plan.epoch, n_stages,
					       t->resume_step);
				fflush(stdout);
				if (printed > t->resume_step)
					printed = t->resume_step;
				for (int k = t->resume_step + 1; k <= MAX_STEPS; k++)
					memset(&rows[k], 0, sizeof rows[k]);
				done = 0;
			}
			shown_epoch = f->plan.epoch;
			if (f->plan.n_reps > 0)
				print_replicas(&f->plan, o.json);
		}
		for (int i = 0; i < f->n_lines; i++) {
			if (ev && !memchr(f->lines[i], '\n', f->line_len[i])) {
				fwrite(f->lines[i], 1, f->line_len[i], ev);
				fputc('\n', ev);
			}
			sky_diag jd;
			cJSON *doc = sky_json_parse(f->lines[i], f->line_len[i], &jd);
			int stage = -1, step = 0;
			double v = 0;
			int64_t ep = 0;
			if (!doc || sky_json_int(doc, "stage", 0, 63, &stage, "m", NULL) != 0 ||
			    sky_json_int(doc, "step", 0, MAX_STEPS, &step, "m", NULL) != 0 ||
			    (f->have_plan && sky_json_i64(doc, "epoch", 0, SKY_JSON_INT_MAX, &ep, "m",
							  NULL) == 0 && ep < f->plan.epoch)) {
				/* (an older epoch's: a plan that was replaced) */
				sky_json_free(doc);
				continue;
			}
			const cJSON *st = cJSON_GetObjectItemCaseSensitive(doc, "stall");
			if (st) {
				char msg[300] = "";
				sky_json_str(doc, "message", msg, sizeof msg, "m", NULL);
				printf("STALL %s\n", msg);
				stalled = 1;
			} else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(doc, "done"))) {
				done++;
			} else if (step >= 1) {
				step_row *r = &rows[step];
				r->seen++;
				if (sky_json_num(doc, "step_s", 0, 1e9, &v, "m", NULL) == 0 && v > r->step_s)
					r->step_s = v;
				if (sky_json_num(doc, "busy", 0, 1e3, &v, "m", NULL) == 0)
					r->busy[stage] = (float)v;
				/* the last stage's replicas each report their part of
				 * the step's mean loss: the step's is their sum */
				int parts = f->have_plan && n_stages > 0 &&
					    sky_planmsg_n_replicas(&f->plan, n_stages - 1) > 1;
				if (sky_json_num(doc, "loss", -1e30, 1e30, &v, "m", NULL) == 0) {
					r->loss = parts && r->has_loss ? r->loss + v : v;
					r->has_loss = 1;
				}
			}
			sky_json_free(doc);
		}
		f->n_lines = 0;
		sky_mutex_unlock(&f->lock);
		/* a line per step once every stage has reported it, in order */
		while (n_stages > 0 && printed < MAX_STEPS && rows[printed + 1].seen >= n_boards) {
			step_row *r = &rows[++printed];
			if (o.json) {
				printf("{\"step\":%d,\"loss\":%.9g,\"step_s\":%.6f,\"predicted_step_s\":%.6f,"
				       "\"busy\":[",
				       printed, r->loss, r->step_s, predicted);
				for (int k = 0; k < n_stages && k < 64; k++)
					printf("%s%.3f", k ? "," : "", (double)r->busy[k]);
				printf("]}\n");
			} else {
				printf("step %d loss %.6f step %.3f s predicted %.3f s busy", printed,
				       r->loss, r->step_s, predicted);
				for (int k = 0; k < n_stages && k < 64; k++)
					printf(" %.2f", (double)r->busy[k]);
				printf("\n");
			}
			fflush(stdout);
		}
		if (n_stages > 0 && done >= n_boards) {
			rc = 0;
			break;
		}
	}
	if (rc && !stalled && !ended)
		fprintf(stderr, "sky job watch: job %s did not end within %g s\n", o.job, o.timeout_s);
	if (ev && f->have_plan) {
		static char pbuf[SKY_SIGN_MAX_PAYLOAD + 1];
		int pn = sky_planmsg_encode(&f->plan, pbuf, sizeof pbuf, &d);
		if (pn > 0)
			fprintf(ev, "{\"plan\":%.*s}\n", pn, pbuf);
	}
exit:
	if (ev && fclose(ev) != 0) {
		fprintf(stderr, "sky job watch: cannot write %s\n", o.events);
		rc = 1;
	}
	sky_mqtt_close(m, 1000);
	mbedtls_x509_crt_free(&f->planner);
	free(rows);
	return rc;
}

/* ---- collect ------------------------------------------------------------------ */

enum { NAME_CAP = 96 };

/* A local part file into bytes (malloc). Returns 0 or SKY_E*. */
static int read_part(const char *path, part *out)
{
	FILE *fp = fopen(path, "rb");
	long n = -1;
	if (fp && fseek(fp, 0, SEEK_END) == 0)
		n = ftell(fp);
	unsigned char *b = n > 0 && fseek(fp, 0, SEEK_SET) == 0 ? malloc((size_t)n) : NULL;
	int ok = b && fread(b, 1, (size_t)n, fp) == (size_t)n;
	if (fp)
		fclose(fp);
	if (!ok) {
		free(b);
		return SKY_EIO;
	}
	*out = (part){b, (size_t)n};
	return 0;
}

/* The local parts of the plan's epoch, each for its stage's board when no
 * part of that board arrived (called with the lock held, the plan known).
 * A used part's bytes move into f->parts. */
static void add_local_parts(follow *f, part *local, int n_local)
{
	char epoch[32];
	snprintf(epoch, sizeof epoch, "%lld", (long long)f->plan.epoch);
	for (int i = 0; i < n_local; i++) {
		sky_st_file st;
		sky_st_init(&st);
		const char *pe, *ps;
		int stage = -1;
		if (local[i].bytes && sky_st_parse(&st, local[i].bytes, local[i].len, NULL) == 0 &&
		    (pe = sky_st_meta_get(&st, "sky_epoch")) && !strcmp(pe, epoch) &&
		    (ps = sky_st_meta_get(&st, "sky_stage")))
			stage = atoi(ps);
		sky_st_close(&st);
		if (stage < 0 || stage >= f->plan.n_stages || f->n_parts >= SKY_PLANMSG_MAX_STAGES)
			continue;
		const char *board = f->plan.stages[stage].board;
		int have = 0;
		for (int k = 0; k < f->n_parts; k++)
			have |= !strcmp(f->part_board[k], board);
		if (have)
			continue;
		size_t bl = strlen(board); /* < the segment bound: the plan checked it */
		memcpy(f->part_board[f->n_parts], board, bl + 1);
		f->parts[f->n_parts++] = local[i];
		local[i] = (part){NULL, 0};
	}
}

/* --out-dir: beside OUT/model.safetensors, the model directory's config
 * with the label names the data-reading stage's part names (its
 * "sky_labels"), and its tokenizer files. Returns 0, or 1 after saying
 * why. */
static int hf_dir(const follow_opts *o, const sky_planmsg *p, const sky_st_file *files,
		  const sky_model_cfg *c)
{
	static sky_hf_config hc;
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_hf_config_read(o->model_dir, &hc, &d) != 0) {
		fprintf(stderr, "sky job collect: --model-dir %s: %s\n", o->model_dir, d.msg);
		return 1;
	}
	if (hc.cfg.hidden != c->hidden || hc.cfg.layers != c->layers || hc.num_labels != c->classes) {
		fprintf(stderr, "sky job collect: --model-dir %s is not job %s's model (hidden %d, "
				"%d layers, %d labels; the job's %d, %d, %d)\n",
			o->model_dir, p->job, hc.cfg.hidden, hc.cfg.layers, hc.num_labels, c->hidden,
			c->layers, c->classes);
		return 1;
	}
	const char *lj = NULL;
	for (int s = 0; s < p->n_stages && !lj; s++)
		lj = sky_st_meta_get(&files[s], "sky_labels");
	cJSON *doc = lj ? sky_json_parse(lj, strlen(lj), NULL) : NULL;
	if (cJSON_IsArray(doc) && cJSON_GetArraySize(doc) == hc.num_labels) {
		int i = 0;
		const cJSON *x;
		cJSON_ArrayForEach(x, doc)
		{
			if (cJSON_IsString(x))
				snprintf(hc.label[i], sizeof hc.label[i], "%s", x->valuestring);
			i++;
		}
		hc.has_labels = 1;
	} else {
		fprintf(stderr, "sky job collect: job %s's parts name no labels for its %d classes; "
				"config.json keeps %s's\n",
			p->job, hc.num_labels, o->model_dir);
	}
	sky_json_free(doc);
	if (sky_hf_config_save(&hc.cfg, &hc, o->out_dir, &d) != 0 ||
	    sky_train_copy_tokenizer(o->model_dir, o->out_dir) != 0) {
		fprintf(stderr, "sky job collect: cannot write %s: %s\n", o->out_dir,
			d.msg[0] ? d.msg : "tokenizer files");
		return 1;
	}
	return 0;
}

int sky_job_collect(int argc, char **argv)
{
	if (sky_job_fed_wanted(argc, argv)) /* a federated job's global model (job_fed.c) */
		return sky_job_fed_collect(argc, argv);
	follow_opts o;
	int prc = parse_opts("collect", argc, argv, &o, 1);
	if (prc)
		return prc > 0 ? 0 : 2;
	follow *f = &g_f;
	memset(f, 0, sizeof *f);
	sky_diag d;
	sky_diag_clear(&d);
	int rc = 1, n_files = 0;
	sky_st_file *files = NULL;
	sky_st_entry *e = NULL;
	char *names = NULL;
	part local[SKY_PLANMSG_MAX_STAGES];
	memset(local, 0, sizeof local);
	for (int i = 0; i < o.n_part_files; i++)
		if (read_part(o.part_files[i], &local[i]) != 0) {
			fprintf(stderr, "sky job collect: cannot read %s\n", o.part_files[i]);
			return 1;
		}
	sky_mqtt *m = connect_follow("collect", &o, f, &d);
	if (!m || sky_mqtt_subscribe(m, f->plan_topic, 1, 5000, &d) != 0 ||
	    sky_mqtt_subscribe(m, f->part_filter, 1, 5000, &d) != 0 ||
	    sky_mqtt_subscribe(m, f->chunk_filter, 1, 5000, &d) != 0) {
		fprintf(stderr, "sky job collect: %s\n", d.msg);
		goto exit;
	}
	/* the plan and one part per stage (retained: they are there if the job ended) */
	double end = sky_clock_s() + o.timeout_s, next_try = 0;
	int have = 0;
	sky_mqtt_backoff backoff; /* 0.25 s doubling to 2 s, jittered */
	sky_mqtt_backoff_init(&backoff, 250, 2000, sky_clock_ns());
	const char *const filters[] = {f->plan_topic, f->part_filter, f->chunk_filter};
	while (sky_clock_s() < end) {
		if (!reconnect_follow(f, &m, &backoff, &next_try, filters, 3)) {
			sky_sleep_ms(50);
			continue;
		}
		sky_mqtt_poll(m, 50);
		sky_mutex_lock(&f->lock);
		if (f->have_plan)
			add_local_parts(f, local, o.n_part_files);
		have = 0;
		for (int k = 0; f->have_plan && k < f->plan.n_stages; k++)
			for (int i = 0; i < f->n_parts; i++)
				have += !strcmp(f->part_board[i], f->plan.stages[k].board);
		int all = f->have_plan && have == f->plan.n_stages;
		sky_mutex_unlock(&f->lock);
		if (all)
			break;
	}
	sky_mutex_lock(&f->lock); /* Paho may still deliver; hold it while we read */
	const sky_planmsg *p = &f->plan;
	if (!f->have_plan || have < p->n_stages) {
		fprintf(stderr, "sky job collect: job %s: %s within %g s (%d of %d parts)%s\n", o.job,
			f->have_plan ? "not every stage's part arrived" : "no plan", o.timeout_s, have,
			f->have_plan ? p->n_stages : 0,
			f->have_plan && have == 0
				? "; skyplan relays a job's parts only to the operator that "
				  "submitted it, once each stage has sent its part"
				: "");
		if (f->chunk_err[0])
			fprintf(stderr, "sky job collect: a part's chunks were refused: %s\n",
				f->chunk_err);
		goto unlock;
	}
	files = calloc((size_t)p->n_stages, sizeof *files);
	if (!files)
		goto unlock;
	char epoch[32];
	snprintf(epoch, sizeof epoch, "%lld", (long long)p->epoch);
	for (int k = 0; k < p->n_stages; k++) {
		int i = 0;
		while (strcmp(f->part_board[i], p->stages[k].board))
			i++;
		sky_st_init(&files[k]);
		n_files = k + 1;
		const char *pe;
		if (sky_st_parse(&files[k], f->parts[i].bytes, f->parts[i].len, &d) != 0 ||
		    !(pe = sky_st_meta_get(&files[k], "sky_epoch")) || strcmp(pe, epoch) != 0) {
			fprintf(stderr, "sky job collect: part of %s (stage %d) %s\n", p->stages[k].board,
				k, d.msg[0] ? d.msg : "is from another epoch of the job");
			goto unlock;
		}
	}
	/* the tensors in sky_bert_save's order and names, each from the part
	 * that holds it: the file equals what one board would save */
	sky_model_cfg c;
	memset(&c, 0, sizeof c);
	c.hidden = p->shape.hidden;
	c.ffn = p->shape.ffn;
	sky_model_preset(p->shape.name, &c);
	c.hidden = p->shape.hidden, c.heads = p->shape.heads, c.ffn = p->shape.ffn;
	c.layers = p->layers, c.seq = p->shape.seq, c.batch = p->shape.batch;
	if (c.seq > c.max_pos)
		c.max_pos = c.seq;
	if (p->hf.on) { /* a config.json's model: its sizes are the plan's */
		snprintf(c.name, sizeof c.name, "%s", p->shape.name);
		c.vocab = p->hf.vocab, c.max_pos = p->hf.max_pos, c.type_vocab = p->hf.type_vocab;
		c.classes = p->hf.classes;
	}
	int n = SKY_EMBED_NTENSORS + c.layers * SKY_LAYER_NTENSORS + SKY_HEAD_NTENSORS, k = 0;
	e = calloc((size_t)n, sizeof *e);
	names = calloc((size_t)n, NAME_CAP);
	if (!e || !names)
		goto unlock;
	sky_tensor_info te[SKY_EMBED_NTENSORS], tl[SKY_LAYER_NTENSORS], th[SKY_HEAD_NTENSORS];
	sky_embed_tensors(&c, te);
	sky_layer_tensors(&c, tl);
	sky_head_tensors(&c, th);
	for (int b = -1; b <= c.layers; b++) {
		const sky_tensor_info *t = b < 0 ? te : b == c.layers ? th : tl;
		int nt = b < 0 ? SKY_EMBED_NTENSORS : b == c.layers ? SKY_HEAD_NTENSORS : SKY_LAYER_NTENSORS;
		for (int i = 0; i < nt; i++, k++) {
			char *nm = names + (size_t)k * NAME_CAP;
			if (b < 0 || (b == c.layers && i < 2))
				snprintf(nm, NAME_CAP, "bert.%s", t[i].name);
			else if (b == c.layers)
				snprintf(nm, NAME_CAP, "%s", t[i].name);
			else
				snprintf(nm, NAME_CAP, "bert.encoder.layer.%d.%s", b, t[i].name);
			const sky_st_tensor *x = NULL;
			for (int s = 0; s < p->n_stages && !x; s++)
				x = sky_st_find(&files[s], nm);
			if (!x || x->dtype != SKY_ST_F32 || x->count != t[i].count) {
				fprintf(stderr, "sky job collect: no stage holds %s (F32, %zu floats)\n", nm,
					t[i].count);
				goto unlock;
			}
			e[k] = (sky_st_entry){.name = nm, .dtype = SKY_ST_F32, .ndim = t[i].ndim,
					      .shape = {t[i].shape[0], t[i].ndim == 2 ? t[i].shape[1] : 0},
					      .data = x->data};
		}
	}
	const sky_st_meta meta[] = {{"format", "pt"}, {"sky_model", c.name}};
	if (o.out_dir && sky_file_mkdirs(o.out_dir, 0755) != 0) {
		fprintf(stderr, "sky job collect: cannot create %s\n", o.out_dir);
		goto unlock;
	}
	if (sky_st_write(o.out, e, k, meta, 2, &d) != 0) {
		fprintf(stderr, "sky job collect: cannot write %s: %s\n", o.out, d.msg);
		goto unlock;
	}
	if (o.out_dir && hf_dir(&o, p, files, &c) != 0)
		goto unlock;
	printf("job %s epoch %lld: %d tensors from %d stages written to %s\n", o.job,
	       (long long)p->epoch, k, p->n_stages, o.out);
	rc = 0;
unlock:
	sky_mutex_unlock(&f->lock);
exit:
	sky_mqtt_close(m, 1000);
	for (int i = 0; i < n_files; i++)
		sky_st_close(&files[i]);
	free(files);
	free(e);
	free(names);
	for (int i = 0; i < f->n_parts; i++)
		free(f->parts[i].bytes);
	for (int i = 0; i < CHUNKED_SLOTS; i++)
		sky_part_rx_free(&f->chunked[i].rx);
	for (int i = 0; i < o.n_part_files; i++)
		free(local[i].bytes);
	mbedtls_x509_crt_free(&f->planner);
	return rc;
}
