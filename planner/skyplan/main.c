/* skyplan: the planner service beside the broker (planner/sky_service.h).
 *
 * This file is where the planner meets the runtime: the planner's code
 * includes no runtime header (tests/integration/test_layering.sh), but an
 * infer job needs the model file code (the int8 model's check, slice
 * cutting), so main passes those runtime functions to the service as
 * sky_deploy_model_ops. It is the one planner file allowed runtime headers. */
#include "sky_err.h"
#include "sky_log.h"
#include "sky_metrics.h"
#include "sky_metrics_http.h"
#include "sky_modelcheck.h"
#include "sky_trainjob.h"
#include "sky_net.h"
#include "sky_notify.h"
#include "sky_opt.h"
#include "sky_owner.h"
#include "sky_service.h"
#include "sky_signal.h"
#include "sky_slice.h"
#include "sky_version.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *to)
{
	fprintf(to,
		"usage: skyplan --pki DIR --broker HOST:PORT [--state DIR] [--job FILE]\n"
		"               [--links FLEET.json] [--link-blind]\n"
		"               [--keepalive S] [--metrics ADDR:PORT] [--link-probe-s S]\n"
		"               [--log-level L] [--log-journal]\n"
		"               [--slice-chunk-bytes N] [--slice-pace-ms MS]\n"
		"               [--replan-gain G] [--replan-holdoff S]\n"
		"               [--max-pending-per-operator N] [--max-uploads-per-operator N]\n"
		"               [--share-busy-boards] [--store-max-bytes N]\n"
		"               [--max-stored-bytes-per-operator N]\n"
		"\n"
		"skyplan is Sky's planner service (%s). It connects to the broker as the planner\n"
		"(DIR/planner.crt), answers enrollment requests with the fleet CA in DIR, keeps the\n"
		"fleet registry (capabilities, liveness by session number), plans the jobs operators\n"
		"submit (answering each on sky/v1/jobs/<operator>/reply) and publishes each plan\n"
		"signed and retained on sky/v1/job/<job>/plan. Enrollment requests are rate-limited.\n"
		"\n"
		"  --pki DIR          the fleet PKI from `sky pki init`\n"
		"  --broker HOST:PORT the fleet's MQTT broker (TLS)\n"
		"  --state DIR        the planner's state (default DIR/state): fleet.json (read by\n"
		"                     `sky fleet status`: boards, boot ids and sessions, assignments),\n"
		"                     the plan epoch, and plans/<job>.env, the signed plans it\n"
		"                     republishes if the broker has lost them; ckpt/<job>/, the last\n"
		"                     two complete checkpoints of each training job, and\n"
		"                     jobs/<job>.log.jsonl, its commits and re-plans\n"
		"  --job FILE         submit this job at start (same JSON as `sky job submit`)\n"
		"  --links F.json     site-to-site paths: the \"links\" of a fleet file (sky plan's\n"
		"                     format); boards name their site in their profile\n"
		"  --link-blind       plan every job as if all boards were in one site (each cut\n"
		"                     charged with the boards' own links; for comparison)\n"
		"  --keepalive S      the planner's MQTT keepalive (default 10)\n"
		"  --link-probe-s S   measure each site's path through its bridge (latency and\n"
		"                     bandwidth, sky/v1/site/<site>/echo) every S seconds (default\n"
		"                     300): the site-to-core path, replacing --links' figures\n"
		"                     for that pair\n"
		"  --slice-chunk-bytes N  serving: slices go to boards in chunks of N bytes\n"
		"                     (%u to %u, default %u), each with its SHA-256\n"
		"  --slice-pace-ms MS serving: one slice chunk per MS ms to each board (default 0:\n"
		"                     pipelined, %d chunks per loop turn)\n"
		"  --metrics ADDR:PORT serve Prometheus metrics at http://ADDR:PORT/metrics\n"
		"                     (e.g. 127.0.0.1:9464; [::1]:9464 for IPv6): the figures of\n"
		"                     `sky fleet status`, refreshed whenever fleet.json is saved\n"
		"  --replan-gain G    a board that joins or whose speed changes re-plans a running\n"
		"                     training job only when the predicted step improves by more\n"
		"                     than this fraction (default 0.1) ...\n"
		"  --replan-holdoff S ... and the job's last plan is at least S seconds old\n"
		"                     (default 30); a board that dies re-plans at once\n"
		"  --max-pending-per-operator N  jobs one operator may have waiting for boards\n"
		"                     (default %d, 0: only the fleet's limit of 64); its next\n"
		"                     submit is refused with the reason, nobody else's\n"
		"  --max-uploads-per-operator N  model uploads one operator may have in progress\n"
		"                     (default %d of the %d slots, 0: no limit of its own); its\n"
		"                     next upload is refused, and it never takes another's slot\n"
		"  --max-stored-bytes-per-operator N  bytes of uploaded models one operator may\n"
		"                     hold (default 32 GiB, 0: no limit of its own); an upload\n"
		"                     above it is refused with the reason\n"
		"  --store-max-bytes N  keep the model and slice store (DIR/state/models, slices)\n"
		"                     below N bytes: the least recently used files no queued or\n"
		"                     followed job needs (and not used in the last 10 min) are\n"
		"                     removed, every 30 s (default 0: unbounded)\n"
		"  --share-busy-boards  a job may take boards busy with another operator's job\n"
		"                     (default: idle boards and its own operator's only)\n"
		"  --log-level L      error, warn, info (default), debug\n"
		"  --log-journal      journald lines (<3>..<7> priority, no time stamp); the default\n"
		"                     when stderr is the journal ($JOURNAL_STREAM)\n",
		SKY_VERSION, SKY_CHUNK_MIN_BYTES, SKY_CHUNK_MAX_PAYLOAD, SKY_CHUNK_DEFAULT_BYTES,
		SKY_DEPLOY_WINDOW, SKY_OWNER_DEFAULT_PENDING, SKY_OWNER_DEFAULT_UPLOADS,
		SKY_DEPLOY_MAX_UPLOADS);
}

static int cut(const char *model_path, int first, int last, const char *out_path,
	       char sha256[65], int64_t *bytes, sky_diag *d)
{
	return sky_slice_cut(model_path, first, last, out_path, sha256, bytes, d);
}

/* A role's arena as its board computes it when it takes the plan: the
 * planner prices plans with this, so the two cannot disagree */
static int64_t train_bytes(const sky_planmsg *p, int stage, const char *board)
{
	return sky_trainjob_bytes_as(p, stage, board, NULL);
}

static const sky_deploy_model_ops k_model_ops = {.check = sky_modelcheck_int8, .cut = cut};

enum {
	O_LOG_JOURNAL = SKY_OPT_FIRST, O_PKI, O_BROKER, O_STATE, O_JOB, O_KEEPALIVE,
	O_METRICS, O_LOG_LEVEL, O_CHUNK, O_PACE, O_GAIN, O_HOLDOFF, O_LINKS, O_LINK_BLIND,
	O_LINK_PROBE, O_MAX_PENDING, O_MAX_UPLOADS, O_SHARE_BUSY, O_STORE_MAX, O_STORED_PER_OP
};
static const struct option k_opts[] = {{"log-journal", no_argument, NULL, O_LOG_JOURNAL},
				       {"pki", required_argument, NULL, O_PKI},
				       {"broker", required_argument, NULL, O_BROKER},
				       {"state", required_argument, NULL, O_STATE},
				       {"job", required_argument, NULL, O_JOB},
				       {"links", required_argument, NULL, O_LINKS},
				       {"link-blind", no_argument, NULL, O_LINK_BLIND},
				       {"keepalive", required_argument, NULL, O_KEEPALIVE},
				       {"metrics", required_argument, NULL, O_METRICS},
				       {"log-level", required_argument, NULL, O_LOG_LEVEL},
				       {"link-probe-s", required_argument, NULL, O_LINK_PROBE},
				       {"slice-chunk-bytes", required_argument, NULL, O_CHUNK},
				       {"slice-pace-ms", required_argument, NULL, O_PACE},
				       {"replan-gain", required_argument, NULL, O_GAIN},
				       {"replan-holdoff", required_argument, NULL, O_HOLDOFF},
				       {"max-pending-per-operator", required_argument, NULL, O_MAX_PENDING},
				       {"max-uploads-per-operator", required_argument, NULL, O_MAX_UPLOADS},
				       {"share-busy-boards", no_argument, NULL, O_SHARE_BUSY},
				       {"store-max-bytes", required_argument, NULL, O_STORE_MAX},
				       {"max-stored-bytes-per-operator", required_argument, NULL,
					O_STORED_PER_OP},
				       SKY_OPT_STD,
				       {0}};

#define GO_ON (-1) /* an option's parser: carry on (else the exit status) */

/* The options that take a number: its range checked, into o. Returns GO_ON
 * or 2 (a bad value, said on stderr). */
static int take_number(int c, const sky_opt *op, sky_service_opts *o)
{
	const char *v = op->arg;
	switch (c) {
	case O_KEEPALIVE: {
		char *end = NULL;
		errno = 0;
		long n = strtol(v, &end, 10);
		if (end == v || *end || errno || n < 1 || n > 3600) {
			fprintf(stderr, "skyplan: --keepalive expects 1 to 3600\n");
			return 2;
		}
		o->keepalive_s = (int)n;
		break;
	}
	case O_LINK_PROBE: {
		char *end = NULL;
		errno = 0;
		double x = strtod(v, &end);
		if (end == v || *end || errno || !(x >= 1 && x <= 86400)) {
			fprintf(stderr, "skyplan: --link-probe-s expects 1 to 86400\n");
			return 2;
		}
		o->link_probe_s = x;
		break;
	}
	case O_CHUNK:
	case O_PACE: {
		char *end = NULL;
		errno = 0;
		long n = strtol(v, &end, 10);
		long lo = c == O_CHUNK ? (long)SKY_CHUNK_MIN_BYTES : 0;
		long hi = c == O_CHUNK ? (long)SKY_CHUNK_MAX_PAYLOAD : 60000;
		if (end == v || *end || errno || n < lo || n > hi) {
			fprintf(stderr, "skyplan: %s expects %ld to %ld\n", op->name, lo, hi);
			return 2;
		}
		if (c == O_CHUNK)
			o->slice_chunk_bytes = (int)n;
		else
			o->slice_pace_ms = (int)n;
		break;
	}
	case O_MAX_PENDING:
	case O_MAX_UPLOADS: {
		char *end = NULL;
		errno = 0;
		long n = strtol(v, &end, 10);
		long hi = c == O_MAX_PENDING ? 64 : SKY_DEPLOY_MAX_UPLOADS;
		if (end == v || *end || errno || n < 0 || n > hi) {
			fprintf(stderr, "skyplan: %s expects 0 to %ld\n", op->name, hi);
			return 2;
		}
		*(c == O_MAX_PENDING ? &o->pending_per_op : &o->uploads_per_op) = (int)n;
		break;
	}
	case O_STORE_MAX:
	case O_STORED_PER_OP: {
		char *end = NULL;
		errno = 0;
		long long n = strtoll(v, &end, 10);
		if (end == v || *end || errno || n < 0) {
			fprintf(stderr, "skyplan: %s expects a byte count (0: no bound)\n", op->name);
			return 2;
		}
		*(c == O_STORE_MAX ? &o->store_max_bytes : &o->stored_per_op) = n;
		break;
	}
	case O_GAIN:
	case O_HOLDOFF: {
		char *end = NULL;
		double x = strtod(v, &end);
		double hi = c == O_GAIN ? 10 : 86400;
		if (end == v || *end || !(x >= 0 && x <= hi)) {
			fprintf(stderr, "skyplan: --%s expects 0 to %g\n",
				c == O_GAIN ? "replan-gain" : "replan-holdoff", hi);
			return 2;
		}
		*(c == O_GAIN ? &o->replan_gain : &o->replan_holdoff_s) = x;
		break;
	}
	}
	return GO_ON;
}

/* One option (c, its value in op) into o and *metrics. Returns GO_ON, 0
 * (--help, --version: exit) or 2 (a bad option or value). */
static int take_opt(int c, const sky_opt *op, sky_service_opts *o, const char **metrics)
{
	const char *v = op->arg;
	switch (c) {
	case SKY_OPT_HELP:
		usage(stdout);
		return 0;
	case SKY_OPT_VERSION:
		return 0;
	case O_LOG_JOURNAL:
		sky_log_set_journal(1);
		break;
	case O_PKI:
		o->pki_dir = v;
		break;
	case O_BROKER:
		o->broker = v;
		break;
	case O_STATE:
		o->state_dir = v;
		break;
	case O_JOB:
		o->job_file = v;
		break;
	case O_LINKS:
		o->links_file = v;
		break;
	case O_LINK_BLIND:
		o->link_blind = 1;
		break;
	case O_SHARE_BUSY:
		o->share_busy_boards = 1;
		break;
	case O_KEEPALIVE:
	case O_STORE_MAX:
	case O_STORED_PER_OP:
	case O_MAX_PENDING:
	case O_MAX_UPLOADS:
	case O_LINK_PROBE:
	case O_CHUNK:
	case O_PACE:
	case O_GAIN:
	case O_HOLDOFF:
		return take_number(c, op, o);
	case O_METRICS: {
		char host[SKY_NET_HOST_MAX + 1];
		int port;
		sky_diag pd;
		sky_diag_clear(&pd);
		if (sky_net_parse_hostport(v, host, sizeof host, &port, &pd) != 0) {
			fprintf(stderr, "skyplan: --metrics: %s\n", pd.msg);
			return 2;
		}
		*metrics = v;
		break;
	}
	case O_LOG_LEVEL: {
		sky_log_level l;
		if (sky_log_parse_level(v, &l) != 0) {
			fprintf(stderr, "skyplan: --log-level expects error, warn, info or debug\n");
			return 2;
		}
		sky_log_set_level(l);
		break;
	}
	default:
		return 2;
	}
	return GO_ON;
}

/* The command line into o and *metrics. Returns GO_ON or the exit status. */
static int parse_opts(int argc, char **argv, sky_service_opts *o, const char **metrics)
{
	sky_opt op;
	sky_opt_begin(&op, "skyplan", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		int rc = take_opt(c, &op, o, metrics);
		if (rc != GO_ON)
			return rc;
	}
	if (sky_opt_no_args(&op) != 0) {
		return 2;
	}
	if (!o->pki_dir || !o->broker) {
		fprintf(stderr, "skyplan: --pki and --broker are required (see --help)\n");
		return 2;
	}
	return GO_ON;
}

int main(int argc, char **argv)
{
	sky_service_opts o;
	const char *metrics = NULL;
	memset(&o, 0, sizeof o);
	o.keepalive_s = 10;
	o.model_ops = &k_model_ops;
	o.train_bytes = train_bytes;
	o.replan_gain = 0.1;
	o.replan_holdoff_s = 30;
	o.pending_per_op = SKY_OWNER_DEFAULT_PENDING;
	o.uploads_per_op = SKY_OWNER_DEFAULT_UPLOADS;
	o.stored_per_op = SKY_OWNER_DEFAULT_STORED;
	sky_log_set_name("skyplan");
	int prc = parse_opts(argc, argv, &o, &metrics);
	if (prc != GO_ON)
		return prc;
	if (sky_signal_install() != 0) {
		fprintf(stderr, "skyplan: cannot install signal handlers\n");
		return 1;
	}
	sky_diag d;
	sky_diag_clear(&d);
	sky_metrics_http *mh = NULL;
	if (metrics) {
		if (sky_metrics_http_start(&mh, metrics, sky_metrics_default(), &d) != 0) {
			SKY_ERROR("--metrics: %s", d.msg);
			return 1;
		}
		SKY_INFO("metrics at http://%s/metrics", metrics);
	}
	int rc = sky_service_run(&o, &d);
	sky_notify_stopping();
	sky_metrics_http_stop(mh);
	if (rc) {
		SKY_ERROR("%s", d.msg[0] ? d.msg : sky_strerror(rc));
		return 1;
	}
	return 0;
}
