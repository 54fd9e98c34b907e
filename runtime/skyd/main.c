/* skyd: the board daemon. Enrolls the board once, probes it, reports its
 * capabilities to the planner over MQTT (TLS with its own certificate),
 * keeps its liveness, and takes the signed plans meant for it
 * (runtime/sky_agent.h). */
#include "sky_agent.h"
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

int main(int argc, char **argv)
{
	sky_agent_opts o;
	int enroll = 0, enroll_only = 0;
	long layers = 0, seq = 0, batch = 0, n;
	const char *model = "tiny";
	const char *config_dir = NULL;
	static sky_provision prov;
	int provisioned = 0;
	sky_log_set_name("skyd");
	sky_agent_opts_default(&o);
	enum {
		O_ENROLL = SKY_OPT_FIRST, O_ENROLL_ONLY, O_NO_LINK_PROBE, O_LOG_JOURNAL, O_STATE,
		O_CONFIG_DIR, O_BROKER, O_ID, O_PROFILE, O_MODEL, O_CLAIM, O_PKI_CA, O_LAYERS, O_SEQ,
		O_BATCH, O_KEEPALIVE, O_PROBE_SECONDS, O_SPEED, O_LOG_LEVEL, O_SITE
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
		{"log-level", required_argument, NULL, O_LOG_LEVEL},
		SKY_OPT_STD,
		{0}};
	sky_opt op;
	sky_opt_begin(&op, "skyd", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		const char *a = op.name, *v = op.arg;
		switch (c) {
		case SKY_OPT_HELP:
			usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_ENROLL:
			enroll = 1;
			break;
		case O_ENROLL_ONLY:
			enroll = enroll_only = 1;
			break;
		case O_NO_LINK_PROBE:
			o.no_link_probe = 1;
			break;
		case O_LOG_JOURNAL:
			sky_log_set_journal(1);
			break;
		case O_STATE:
			o.state_dir = v;
			break;
		case O_CONFIG_DIR:
			config_dir = v;
			break;
		case O_BROKER:
			o.broker = v;
			break;
		case O_ID:
			o.id = v;
			break;
		case O_PROFILE:
			o.profile_path = v;
			break;
		case O_MODEL:
			model = v;
			break;
		case O_CLAIM:
			o.claim_token = v;
			break;
		case O_PKI_CA:
			o.claim_ca = v;
			break;
		case O_LAYERS:
			if (parse_int(a, v, 1, 4096, &layers))
				return 2;
			break;
		case O_SEQ:
			if (parse_int(a, v, 1, 65536, &seq))
				return 2;
			break;
		case O_BATCH:
			if (parse_int(a, v, 1, 4096, &batch))
				return 2;
			break;
		case O_KEEPALIVE:
			if (parse_int(a, v, 1, 3600, &n))
				return 2;
			o.keepalive_s = (int)n;
			break;
		case O_PROBE_SECONDS:
			if (parse_int(a, v, 0, 3600, &n))
				return 2;
			o.probe_max_s = (double)n;
			break;
		case O_SPEED: {
			char *end = NULL;
			errno = 0;
			o.speed = strtod(v, &end);
			if (end == v || *end || errno || !isfinite(o.speed) || !(o.speed > 0) ||
			    o.speed > SKY_PROFILE_MAX_CORES) {
				fprintf(stderr, "skyd: --speed expects a number in (0, %g], got '%s'\n",
					SKY_PROFILE_MAX_CORES, v);
				return 2;
			}
			break;
		}
		case O_SITE:
			if (!sky_topic_segment_ok(v)) {
				fprintf(stderr,
					"skyd: --site expects 1-%d letters, digits, '.', '_' or '-', got "
					"'%s'\n",
					SKY_SITE_MAX, v);
				return 2;
			}
			o.site = v;
			break;
		case O_LOG_LEVEL: {
			sky_log_level l;
			if (sky_log_parse_level(v, &l) != 0) {
				fprintf(stderr, "skyd: --log-level expects error, warn, info or debug\n");
				return 2;
			}
			sky_log_set_level(l);
			break;
		}
		default:
			return 2;
		}
	}
	if (sky_opt_no_args(&op) != 0) {
		return 2;
	}
	if (config_dir && o.state_dir) {
		sky_diag pd;
		sky_diag_clear(&pd);
		if (sky_provision_load(config_dir, &prov, &pd) != 0) {
			fprintf(stderr, "skyd: %s\n", pd.msg);
			return 2;
		}
		if (!o.broker && prov.broker[0])
			o.broker = prov.broker;
		if (!o.profile_path && prov.profile[0])
			o.profile_path = prov.profile;
		if (!sky_identity_enrolled(o.state_dir)) {
			if (!prov.token[0] || !prov.claim_ca[0]) {
				fprintf(stderr,
					"skyd: %s holds no identity, and %s has no %s to enroll with\n",
					o.state_dir, config_dir, !prov.token[0] ? "token" : "claim/ca.crt");
				return 2;
			}
			if (!o.id)
				o.id = prov.id;
			if (!o.claim_token)
				o.claim_token = prov.token;
			if (!o.claim_ca)
				o.claim_ca = prov.claim_ca;
			enroll = provisioned = 1;
		}
	}
	if (!o.state_dir || !o.broker) {
		fprintf(stderr, "skyd: --state and --broker are required (see --help)\n");
		return 2;
	}
	if (sky_model_preset(model, &o.model) != 0) {
		fprintf(stderr, "skyd: unknown model '%s' (%s)\n", model, sky_model_preset_names());
		return 2;
	}
	if (layers)
		o.model.layers = (int)layers;
	if (seq)
		o.model.seq = (int)seq;
	if (batch)
		o.model.batch = (int)batch;
	if (sky_model_validate(&o.model) != 0)
		return 2;
	if (sky_signal_install() != 0) {
		fprintf(stderr, "skyd: cannot install signal handlers\n");
		return 1;
	}
	sky_diag d;
	sky_diag_clear(&d);
	if (o.speed > 0) { /* refuse a speed the profile cannot give before enrolling */
		sky_profile p;
		if (sky_profile_load(&p, o.profile_path, &d) != 0 ||
		    sky_profile_set_cores(&p, o.speed, &d) != 0) {
			fprintf(stderr, "skyd: --speed: %s\n", d.msg);
			return 2;
		}
	}
	if (enroll) {
		int rc = sky_agent_enroll(&o, &d);
		if (rc) {
			SKY_ERROR("enrollment failed: %s", d.msg[0] ? d.msg : sky_strerror(rc));
			return 1;
		}
		if (provisioned && (rc = sky_provision_spend_token(&prov, o.state_dir, &d)) != 0)
			SKY_WARN("%s", d.msg); /* enrolled all the same; the token is one-time */
		if (enroll_only)
			return 0;
	}
	int rc = sky_agent_run(&o, &d);
	sky_notify_stopping();
	if (rc) {
		SKY_ERROR("%s", d.msg[0] ? d.msg : sky_strerror(rc));
		return 1;
	}
	return 0;
}
