/* skyd: the board daemon. Enrolls the board once, probes it, reports its
 * capabilities to the planner over MQTT (TLS with its own certificate),
 * keeps its liveness, and takes the signed plans meant for it
 * (runtime/sky_agent.h). */
#include "sky_agent.h"
#include "sky_blas_core.h"
#include "sky_caps.h"
#include "sky_err.h"
#include "sky_log.h"
#include "sky_identity.h"
#include "sky_model.h"
#include "sky_profile.h"
#include "sky_notify.h"
#include "sky_opt.h"
#include "sky_provision.h"
#include "sky_signal.h"
#include "sky_version.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *to)
{
	fprintf(to,
		"usage: skyd --state DIR --broker HOST:PORT [options]\n"
		"       skyd --state DIR --config-dir /etc/sky [options]\n"
		"       skyd --enroll --claim TOKEN --id ID --pki-ca CLAIM/ca.crt --state DIR --broker HOST:PORT\n"
		"\n"
		"skyd is Sky's board daemon (%s). It probes the board at the job's shapes, publishes\n"
		"its capability report on sky/v1/board/<id>/caps, keeps a last will and heartbeats,\n"
		"and accepts only plans signed by the planner certificate it got at enrollment.\n"
		"\n"
		"  --state DIR        board state: keys, certificates, session, epoch, probe cache\n"
		"  --broker HOST:PORT the fleet's MQTT broker (TLS); enrollment uses its claim\n"
		"                     listener on PORT + 1\n"
		"  --id ID            board id (default: the CN of DIR/board.crt; required to enroll)\n"
		"  --profile FILE     board profile (default: $SKY_PROFILE, then etc/sky/profile.conf)\n"
		"  --model NAME       model to probe at start (%s; default tiny)\n"
		"  --layers L, --seq S, --batch B   its shapes (defaults: the preset's)\n"
		"  --keepalive S      MQTT keepalive in seconds (default 10); the planner marks the\n"
		"                     board offline 1.5 x S after it last heard from it\n"
		"  --probe-seconds S  bound on the probe (default 3)\n"
		"  --speed F          emulate a board F times as fast as one core of this machine\n"
		"                     (0 < F <= 64, at most the profile's threads; overrides its\n"
		"                     speed): compute is stretched to 1/F, and the probe sees it;\n"
		"                     SIGUSR1 reads a new F from STATE/speed, a running job\n"
		"                     included (an emulated board that slows down or speeds up)\n"
		"  --site NAME        the board's site (overrides the profile's site = NAME; \"core\"\n"
		"                     or none: the core site); --broker is then that site's broker\n"
		"  --no-link-probe    skip the echo through the broker\n"
		"  --dataset NAME=PATH  a prepared data set (sky data prepare) this board holds,\n"
		"                     under NAME (repeatable, up to 8, with DIR/datasets/NAME.skyds);\n"
		"                     each is checked at start, and its name, rows, labels and hash\n"
		"                     (never its rows) go in the capability report\n"
		"  --log-level L      error, warn, info (default), debug\n"
		"  --log-journal      journald lines (<3>..<7> priority, no time stamp); the default\n"
		"                     when stderr is the journal ($JOURNAL_STREAM)\n"
		"provisioning (a board image's first boot; the systemd unit's default):\n"
		"  --config-dir DIR   read DIR/broker (unless --broker), DIR/id (unless --id; else\n"
		"                     the host name), DIR/profile.conf (unless --profile); while\n"
		"                     --state holds no identity, enroll with DIR/token and the claim\n"
		"                     bundle DIR/claim/{ca.crt,claim.crt,claim.key}, then remove\n"
		"                     DIR/token (or, if DIR is read-only, mark it spent in\n"
		"                     --state/token.used) and run\n"
		"enrollment (once; skipped when DIR already holds an identity):\n"
		"  --enroll           enroll first, then run\n"
		"  --enroll-only      enroll and exit\n"
		"  --claim TOKEN      one-time token from `sky pki token`\n"
		"  --pki-ca FILE      the claim bundle's ca.crt; claim.crt and claim.key must be beside\n"
		"                     it (copy <pki>/claim/ from `sky pki init` onto the board)\n",
		SKY_VERSION, sky_model_preset_names());
}

static int parse_int(const char *opt, const char *v, long lo, long hi, long *out)
{
	char *end = NULL;
	errno = 0;
	long x = v ? strtol(v, &end, 10) : 0;
	if (!v || end == v || *end || errno || x < lo || x > hi) {
		fprintf(stderr, "skyd: %s expects an integer from %ld to %ld\n", opt, lo, hi);
		return -1;
	}
	*out = x;
	return 0;
}

/* What the command line asks for, beyond the agent's own options. */
typedef struct skyd_args {
	sky_agent_opts o;
	int enroll, enroll_only;
	long layers, seq, batch; /* 0: the preset's */
	const char *model;
	const char *config_dir;
} skyd_args;

enum {
	O_ENROLL = SKY_OPT_FIRST, O_ENROLL_ONLY, O_NO_LINK_PROBE, O_LOG_JOURNAL, O_STATE,
	O_CONFIG_DIR, O_BROKER, O_ID, O_PROFILE, O_MODEL, O_CLAIM, O_PKI_CA, O_LAYERS, O_SEQ,
	O_BATCH, O_KEEPALIVE, O_PROBE_SECONDS, O_SPEED, O_LOG_LEVEL, O_SITE,
	O_DATASET
};
static const struct option k_opts[] = {
	{"enroll", no_argument, NULL, O_ENROLL},
	{"enroll-only", no_argument, NULL, O_ENROLL_ONLY},
	{"no-link-probe", no_argument, NULL, O_NO_LINK_PROBE},
	{"log-journal", no_argument, NULL, O_LOG_JOURNAL},
	{"state", required_argument, NULL, O_STATE},
	{"config-dir", required_argument, NULL, O_CONFIG_DIR},
	{"broker", required_argument, NULL, O_BROKER},
	{"id", required_argument, NULL, O_ID},
	{"profile", required_argument, NULL, O_PROFILE},
	{"model", required_argument, NULL, O_MODEL},
	{"claim", required_argument, NULL, O_CLAIM},
	{"pki-ca", required_argument, NULL, O_PKI_CA},
	{"layers", required_argument, NULL, O_LAYERS},
	{"seq", required_argument, NULL, O_SEQ},
	{"batch", required_argument, NULL, O_BATCH},
	{"keepalive", required_argument, NULL, O_KEEPALIVE},
	{"probe-seconds", required_argument, NULL, O_PROBE_SECONDS},
	{"speed", required_argument, NULL, O_SPEED},
	{"site", required_argument, NULL, O_SITE},
	{"dataset", required_argument, NULL, O_DATASET},
	{"log-level", required_argument, NULL, O_LOG_LEVEL},
	SKY_OPT_STD,
	{0}};

/* The options with a value to check, beyond an integer range. Return 0, or
 * 2 (the exit code) after saying what is wrong. */
static int opt_speed(sky_agent_opts *o, const char *v)
{
	char *end = NULL;
	errno = 0;
	o->speed = strtod(v, &end);
	if (end == v || *end || errno || !isfinite(o->speed) || !(o->speed > 0) ||
	    o->speed > SKY_PROFILE_MAX_CORES) {
		fprintf(stderr, "skyd: --speed expects a number in (0, %g], got '%s'\n",
			SKY_PROFILE_MAX_CORES, v);
		return 2;
	}
	return 0;
}

static int opt_site(sky_agent_opts *o, const char *v)
{
	if (!sky_topic_segment_ok(v)) {
		fprintf(stderr,
			"skyd: --site expects 1-%d letters, digits, '.', '_' or '-', got '%s'\n",
			SKY_SITE_MAX, v);
		return 2;
	}
	o->site = v;
	return 0;
}

static int opt_log_level(const char *v)
{
	sky_log_level l;
	if (sky_log_parse_level(v, &l) != 0) {
		fprintf(stderr, "skyd: --log-level expects error, warn, info or debug\n");
		return 2;
	}
	sky_log_set_level(l);
	return 0;
}

/* One option c (name a, value v) into s. Returns 0, or 2 (the exit code)
 * after saying what is wrong. */
static int take_opt(skyd_args *s, int c, const char *a, const char *v)
{
	sky_agent_opts *o = &s->o;
	long n;
	switch (c) {
	case O_ENROLL:
		s->enroll = 1;
		return 0;
	case O_ENROLL_ONLY:
		s->enroll = s->enroll_only = 1;
		return 0;
	case O_NO_LINK_PROBE:
		o->no_link_probe = 1;
		return 0;
	case O_LOG_JOURNAL:
		sky_log_set_journal(1);
		return 0;
	case O_STATE:
		o->state_dir = v;
		return 0;
	case O_CONFIG_DIR:
		s->config_dir = v;
		return 0;
	case O_BROKER:
		o->broker = v;
		return 0;
	case O_ID:
		o->id = v;
		return 0;
	case O_PROFILE:
		o->profile_path = v;
		return 0;
	case O_MODEL:
		s->model = v;
		return 0;
	case O_CLAIM:
		o->claim_token = v;
		return 0;
	case O_PKI_CA:
		o->claim_ca = v;
		return 0;
	case O_LAYERS:
		return parse_int(a, v, 1, 4096, &s->layers) ? 2 : 0;
	case O_SEQ:
		return parse_int(a, v, 1, 65536, &s->seq) ? 2 : 0;
	case O_BATCH:
		return parse_int(a, v, 1, 4096, &s->batch) ? 2 : 0;
	case O_KEEPALIVE:
		if (parse_int(a, v, 1, 3600, &n))
			return 2;
		o->keepalive_s = (int)n;
		return 0;
	case O_PROBE_SECONDS:
		if (parse_int(a, v, 0, 3600, &n))
			return 2;
		o->probe_max_s = (double)n;
		return 0;
	case O_SPEED:
		return opt_speed(o, v);
	case O_SITE:
		return opt_site(o, v);
	case O_DATASET:
		if (o->n_datasets >= (int)(sizeof o->datasets / sizeof o->datasets[0])) {
			fprintf(stderr, "skyd: at most %d --dataset options\n",
				(int)(sizeof o->datasets / sizeof o->datasets[0]));
			return 2;
		}
		o->datasets[o->n_datasets++] = v;
		return 0;
	case O_LOG_LEVEL:
		return opt_log_level(v);
	default:
		return 2;
	}
}

/* The command line into s. Returns -1 to go on, or the exit code (0 after
 * --help or --version, 2 on a bad option). */
static int parse_opts(skyd_args *s, int argc, char **argv)
{
	sky_opt op;
	sky_opt_begin(&op, "skyd", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		if (c == SKY_OPT_HELP) {
			usage(stdout);
			return 0;
		}
		if (c == SKY_OPT_VERSION)
			return 0;
		if (take_opt(s, c, op.name, op.arg) != 0)
			return 2;
	}
	return sky_opt_no_args(&op) != 0 ? 2 : -1;
}

/* --config-dir (a board image's first boot): the broker, the profile and,
 * while --state holds no identity, what to enroll with. Returns -1 to go
 * on, or 2 (the exit code) after saying what is missing. */
static int provision(skyd_args *s, sky_provision *prov, int *provisioned)
{
	sky_agent_opts *o = &s->o;
	sky_diag pd;
	sky_diag_clear(&pd);
	if (sky_provision_load(s->config_dir, prov, &pd) != 0) {
		fprintf(stderr, "skyd: %s\n", pd.msg);
		return 2;
	}
	if (!o->broker && prov->broker[0])
		o->broker = prov->broker;
	if (!o->profile_path && prov->profile[0])
		o->profile_path = prov->profile;
	if (sky_identity_enrolled(o->state_dir))
		return -1;
	if (!prov->token[0] || !prov->claim_ca[0]) {
		fprintf(stderr, "skyd: %s holds no identity, and %s has no %s to enroll with\n",
			o->state_dir, s->config_dir, !prov->token[0] ? "token" : "claim/ca.crt");
		return 2;
	}
	if (!o->id)
		o->id = prov->id;
	if (!o->claim_token)
		o->claim_token = prov->token;
	if (!o->claim_ca)
		o->claim_ca = prov->claim_ca;
	s->enroll = *provisioned = 1;
	return -1;
}

/* The shapes to probe: the preset with --layers, --seq and --batch.
 * Returns 0, or 2 (the exit code) after saying what is wrong. */
static int probe_model(skyd_args *s)
{
	sky_agent_opts *o = &s->o;
	if (sky_model_preset(s->model, &o->model) != 0) {
		fprintf(stderr, "skyd: unknown model '%s' (%s)\n", s->model, sky_model_preset_names());
		return 2;
	}
	if (s->layers)
		o->model.layers = (int)s->layers;
	if (s->seq)
		o->model.seq = (int)s->seq;
	if (s->batch)
		o->model.batch = (int)s->batch;
	return sky_model_validate(&o->model) != 0 ? 2 : 0;
}

/* Enrolls (and spends a provisioned token). Returns -1 to go on and run,
 * or the exit code (0 after --enroll-only, 1 when enrollment failed). */
static int enroll(skyd_args *s, sky_provision *prov, int provisioned, sky_diag *d)
{
	int rc = sky_agent_enroll(&s->o, d);
	if (rc) {
		SKY_ERROR("enrollment failed: %s", d->msg[0] ? d->msg : sky_strerror(rc));
		return 1;
	}
	if (provisioned && (rc = sky_provision_spend_token(prov, s->o.state_dir, d)) != 0)
		SKY_WARN("%s", d->msg); /* enrolled all the same; the token is one-time */
	return s->enroll_only ? 0 : -1;
}

int main(int argc, char **argv)
{
	static skyd_args s = {.model = "tiny"};
	static sky_provision prov;
	int provisioned = 0, ex;
	sky_log_set_name("skyd");
	sky_blas_core_ensure(argv); /* may run skyd again with a better OpenBLAS core */
	sky_agent_opts_default(&s.o);
	if ((ex = parse_opts(&s, argc, argv)) >= 0)
		return ex;
	if (s.config_dir && s.o.state_dir && (ex = provision(&s, &prov, &provisioned)) >= 0)
		return ex;
	if (!s.o.state_dir || !s.o.broker) {
		fprintf(stderr, "skyd: --state and --broker are required (see --help)\n");
		return 2;
	}
	if (probe_model(&s) != 0)
		return 2;
	if (sky_signal_install() != 0) {
		fprintf(stderr, "skyd: cannot install signal handlers\n");
		return 1;
	}
	char core[128];
	sky_blas_core_describe(core, sizeof core);
	SKY_INFO("OpenBLAS core: %s", core);
	sky_diag d;
	sky_diag_clear(&d);
	if (s.o.speed > 0) { /* refuse a speed the profile cannot give before enrolling */
		sky_profile p;
		if (sky_profile_load(&p, s.o.profile_path, &d) != 0 ||
		    sky_profile_set_cores(&p, s.o.speed, &d) != 0) {
			fprintf(stderr, "skyd: --speed: %s\n", d.msg);
			return 2;
		}
	}
	if (s.enroll && (ex = enroll(&s, &prov, provisioned, &d)) >= 0)
		return ex;
	int rc = sky_agent_run(&s.o, &d);
	sky_notify_stopping();
	if (rc) {
		SKY_ERROR("%s", d.msg[0] ? d.msg : sky_strerror(rc));
		return 1;
	}
	return 0;
}
