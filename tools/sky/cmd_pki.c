/* sky pki: the fleet's PKI directory (CA, broker, planner and claim
 * certificates, mosquitto config and ACL), one-time claim tokens, and
 * signing/verifying plan envelopes by hand. */
#include "sky_cli.h"

#include "bench_util.h"

#include "sky_broker_conf.h"
#include "sky_ca.h"
#include "sky_clock.h"
#include "sky_crl.h"
#include "sky_err.h"
#include "sky_file.h"
#include "sky_identity.h"
#include "sky_json.h"
#include "sky_opt.h"
#include "sky_pki.h"
#include "sky_pki_layout.h"
#include "sky_sign.h"
#include "sky_signal.h"

#include <mbedtls/version.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_PORT 8883

static void usage(FILE *to)
{
	fprintf(to,
		"usage: sky pki init --dir D [--port N] [--listen IPV4] [--max-packet BYTES] [--force]\n"
		"       sky pki token --dir D [--ttl SECONDS] [--id BOARD]\n"
		"       sky pki operator --dir D NAME\n"
		"       sky pki client --dir D NAME\n"
		"       sky pki issue --dir D --id BOARD --state S [--token T]\n"
		"       sky pki bridge --dir D [--listen IPV4] [--port N --core IPV4:PORT] SITE\n"
		"       sky pki site-broker --dir D --port N --core IPV4:PORT [--listen IPV4]\n"
		"                           [--max-packet BYTES] SITE\n"
		"       sky pki revoke --dir D BOARD [--reason R] [--broker-pid PID]\n"
		"       sky pki sign --key K --cert C [FILE]     (payload from FILE or stdin)\n"
		"       sky pki verify --cert C [FILE]           (envelope from FILE or stdin)\n"
		"       sky pki bench --dir D [--json] [common bench options]\n"
		"\n"
		"init   makes in D: ca.key/ca.crt (fleet CA, EC P-256), broker.key/broker.crt\n"
		"       (CN localhost, SAN localhost + 127.0.0.1), planner.key/planner.crt (CN\n"
		"       sky-planner: TLS identity and plan signing key), operator.key/operator.crt\n"
		"       (CN sky-operator: `sky job submit`), the claim bundle\n"
		"       claim/{ca.crt,claim.crt,claim.key} (CN sky-claim) to copy to new boards,\n"
		"       mosquitto.conf (fleet listener 127.0.0.1:N, default %d, where the client\n"
		"       id is the certificate CN; claim listener N+1 for enrollment only;\n"
		"       max_packet_size BYTES), acl and acl-claim. Keys are mode 0600. Refuses\n"
		"       to replace an existing CA unless --force. --listen binds both listeners\n"
		"       to IPV4 instead of 127.0.0.1 (a core broker that site bridges reach over\n"
		"       a network) and names it in broker.crt.\n"
		"operator issues one more operator identity, CN sky-op-NAME, as a bundle in\n"
		"       D/operators/NAME/ (ca.crt, planner.crt, operator.crt, operator.key; use\n"
		"       it as `sky job submit --pki D/operators/NAME`) and adds its ACL section\n"
		"       (send the broker SIGHUP to read it).\n"
		"client issues a client identity for serving jobs, CN sky-client-NAME, as a\n"
		"       bundle in D/clients/NAME/ (ca.crt, planner.crt, client.crt, client.key; use it as\n"
		"       `sky infer --pki D/clients/NAME`) and adds its ACL sections: on the\n"
		"       tools listener (port N+1, where sky infer connects) it may publish\n"
		"       requests on sky/v1/job/+/req/+/<its CN>, read sky/v1/job/+/resp/<its\n"
		"       CN>/+ and the jobs' plans, nothing else; on the fleet listener nothing (send the broker\n"
		"       SIGHUP to read the new ACL).\n"
		"token  prints a new one-time claim token (valid --ttl seconds, default %d),\n"
		"       optionally bound to one board id (needed to re-enroll an enrolled id).\n"
		"issue  enrolls board BOARD offline: makes its key and CSR in state dir S (as\n"
		"       skyd --enroll does), runs the CA's checks on them with token T (default:\n"
		"       a fresh token bound to BOARD) and installs the certificates in S.\n"
		"bridge issues site SITE's bridge identity (CN sky-bridge-SITE) and its\n"
		"       broker's server certificate (naming --listen too) into D/sites/SITE/, and\n"
		"       adds the bridge's section to the core ACL (send the core broker SIGHUP);\n"
		"       with --port and --core it writes the site broker's config as well.\n"
		"site-broker  (re)writes D/sites/SITE/mosquitto.conf and acl: a mutual-TLS\n"
		"       listener for the site's boards on --listen (127.0.0.1):N with the core's\n"
		"       rules, and a mutual-TLS bridge to the core broker at IPV4:PORT that\n"
		"       carries only Sky's control topics, frames addressed to other sites, and\n"
		"       link probes. Run it: mosquitto -c D/sites/SITE/mosquitto.conf\n"
		"revoke puts BOARD's certificate on the fleet CA's CRL (D/crl.pem, list in\n"
		"       D/revoked; again: no change). The CA then refuses to enroll BOARD again\n"
		"       and skyplan drops it from the fleet. mosquitto re-reads the CRL on\n"
		"       SIGHUP (sent to PID with --broker-pid) and then refuses the board's TLS\n"
		"       handshakes; a connection open before stays open until the board\n"
		"       reconnects or the broker restarts. R: unspecified, keyCompromise,\n"
		"       cACompromise, affiliationChanged, superseded, cessationOfOperation\n"
		"       (default: no reason code). Each site broker's copy of the CRL\n"
		"       (D/sites/SITE/crl.pem) is renewed too: send that broker SIGHUP as well.\n"
		"sign   prints a signed envelope (runtime/wire/sky_sign.h) of the payload.\n"
		"verify checks an envelope against certificate C and prints its payload.\n"
		"bench  times plan signing and verification (2 KiB plan), P-256 key\n"
		"       generation and certificate issuance from a CSR, using (or making) the\n"
		"       PKI in D; one result per line (JSON with --json). Options: %s\n",
		DEFAULT_PORT, SKY_CA_DEFAULT_TOKEN_TTL, sky_bench_common_help());
}

/* Reads all of path ("-" or NULL: stdin) into buf; returns length or -1. */
static long read_input(const char *path, char *buf, size_t cap)
{
	if (path && strcmp(path, "-") != 0) {
		long n = sky_file_read(path, buf, cap);
		if (n < 0)
			fprintf(stderr, "sky pki: %s: %s\n", path, sky_strerror((int)n));
		return n < 0 ? -1 : n;
	}
	size_t n = fread(buf, 1, cap, stdin);
	if (n == cap && fgetc(stdin) != EOF) {
		fprintf(stderr, "sky pki: input larger than %zu bytes\n", cap);
		return -1;
	}
	return (long)n;
}

static int cmd_init(int argc, char **argv)
{
	const char *dir = NULL;
	sky_ca_opts o = {.port = DEFAULT_PORT};
	enum { O_DIR = SKY_OPT_FIRST, O_PORT, O_MAX_PACKET, O_FORCE, O_LISTEN };
	static const struct option k_opts[] = {{"dir", required_argument, NULL, O_DIR},
					       {"port", required_argument, NULL, O_PORT},
					       {"listen", required_argument, NULL, O_LISTEN},
					       {"max-packet", required_argument, NULL, O_MAX_PACKET},
					       {"force", no_argument, NULL, O_FORCE},
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky pki init", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		long x;
		switch (c) {
		case SKY_OPT_HELP:
			usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_DIR:
			dir = op.arg;
			break;
		case O_PORT:
			/* N and N + 1 (the claim listener) */
			if (sky_cli_int("pki init", "--port", op.arg, 1, 65534, &x) != 0)
				return 2;
			o.port = (int)x;
			break;
		case O_MAX_PACKET:
			if (sky_cli_int("pki init", "--max-packet", op.arg, 1024, 268435455L, &x) != 0)
				return 2;
			o.max_packet = (unsigned long)x;
			break;
		case O_FORCE:
			o.force = 1;
			break;
		case O_LISTEN:
			o.listen = op.arg;
			break;
		default:
			return 2;
		}
	}
	if (sky_opt_no_args(&op) != 0) {
		return 2;
	}
	if (!dir) {
		fprintf(stderr, "sky pki init: --dir is required\n");
		return 2;
	}
	sky_diag d;
	sky_diag_clear(&d);
	int rc = sky_ca_init_dir(dir, &o, &d);
	if (rc) {
		fprintf(stderr, "sky pki init: %s\n", d.msg[0] ? d.msg : sky_strerror(rc));
		return 1;
	}
	printf("fleet PKI in %s (broker %s:%d, claim listener :%d); claim bundle: %s/%s/\n"
	       "start the broker: mosquitto -c %s/%s\n"
	       "claim token for a new board: sky pki token --dir %s\n",
	       dir, o.listen ? o.listen : "127.0.0.1", o.port, o.port + 1, dir, SKY_CA_CLAIM_DIR, dir, SKY_CA_BROKER_CONF_FILE, dir);
	return 0;
}

static int cmd_token(int argc, char **argv)
{
	const char *dir = NULL, *id = NULL;
	long ttl = SKY_CA_DEFAULT_TOKEN_TTL;
	enum { O_DIR = SKY_OPT_FIRST, O_ID, O_TTL };
	static const struct option k_opts[] = {{"dir", required_argument, NULL, O_DIR},
					       {"id", required_argument, NULL, O_ID},
					       {"ttl", required_argument, NULL, O_TTL},
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky pki token", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		switch (c) {
		case SKY_OPT_HELP:
			usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_DIR:
			dir = op.arg;
			break;
		case O_ID:
			id = op.arg;
			break;
		case O_TTL:
			if (sky_cli_int("pki token", "--ttl", op.arg, 1, SKY_CA_MAX_TOKEN_TTL, &ttl) != 0)
				return 2;
			break;
		default:
			return 2;
		}
	}
	if (sky_opt_no_args(&op) != 0) {
		return 2;
	}
	if (!dir) {
		fprintf(stderr, "sky pki token: --dir is required\n");
		return 2;
	}
	sky_diag d;
	sky_diag_clear(&d);
	sky_sign_rng rng;
	char tok[SKY_ENROLL_TOKEN_LEN + 1];
	int rc = sky_sign_rng_init(&rng, "sky-token", &d);
	if (!rc)
		rc = sky_ca_token_new(dir, ttl, id, &rng, tok, &d);
	sky_sign_rng_free(&rng);
	if (rc) {
		fprintf(stderr, "sky pki token: %s\n", d.msg[0] ? d.msg : sky_strerror(rc));
		return 1;
	}
	printf("%s\n", tok);
	return 0;
}

/* A named identity the CA issues beside the fixed ones: an operator (sky job
 * submit/watch/collect) or a client of serving jobs (sky infer). */
typedef struct named_identity {
	const char *prog, *what;   /* "sky pki operator", "operator" */
	int (*add)(const char *dir, const char *name, sky_diag *d);
	const char *cn_prefix, *subdir;
} named_identity;

static const named_identity k_operator_identity = {"sky pki operator", "operator",
						   sky_ca_add_operator, SKY_CA_OPERATOR_NAME_PREFIX,
						   SKY_CA_OPERATORS_DIR};
static const named_identity k_client_identity = {"sky pki client", "client", sky_ca_add_client,
						 SKY_CA_CLIENT_NAME_PREFIX, SKY_CA_CLIENTS_DIR};

/* sky pki operator|client --dir D (NAME | --name NAME) */
static int add_identity(int argc, char **argv, const named_identity *k)
{
	const char *dir = NULL, *name = NULL;
	enum { O_DIR = SKY_OPT_FIRST, O_NAME };
	static const struct option k_opts[] = {{"dir", required_argument, NULL, O_DIR},
					       {"name", required_argument, NULL, O_NAME},
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, k->prog, argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		switch (c) {
		case SKY_OPT_HELP:
			usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_DIR:
			dir = op.arg;
			break;
		case O_NAME:
			name = op.arg;
			break;
		default:
			return 2;
		}
	}
	/* the name as the one operand, or --name */
	if (op.next < argc && !name)
		name = argv[op.next++];
	if (sky_opt_no_args(&op) != 0)
		return 2;
	if (!dir || !name) {
		fprintf(stderr, "%s: --dir D and a NAME (or --name NAME) are required\n", k->prog);
		return 2;
	}
	sky_diag d;
	sky_diag_clear(&d);
	int rc = k->add(dir, name, &d);
	if (rc) {
		fprintf(stderr, "%s: %s\n", k->prog, d.msg[0] ? d.msg : sky_strerror(rc));
		return 1;
	}
	printf("%s %s%s in %s/%s/%s (the broker reads the new ACL on SIGHUP)\n", k->what,
	       k->cn_prefix, name, dir, k->subdir, name);
	return 0;
}

static int cmd_operator(int argc, char **argv)
{
	return add_identity(argc, argv, &k_operator_identity);
}

static int cmd_client(int argc, char **argv)
{
	return add_identity(argc, argv, &k_client_identity);
}

static int cmd_issue(int argc, char **argv)
{
	const char *dir = NULL, *id = NULL, *state = NULL, *token = NULL;
	enum { O_DIR = SKY_OPT_FIRST, O_ID, O_STATE, O_TOKEN };
	static const struct option k_opts[] = {{"dir", required_argument, NULL, O_DIR},
					       {"id", required_argument, NULL, O_ID},
					       {"state", required_argument, NULL, O_STATE},
					       {"token", required_argument, NULL, O_TOKEN},
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky pki issue", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		switch (c) {
		case SKY_OPT_HELP:
			usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_DIR:
			dir = op.arg;
			break;
		case O_ID:
			id = op.arg;
			break;
		case O_STATE:
			state = op.arg;
			break;
		case O_TOKEN:
			token = op.arg;
			break;
		default:
			return 2;
		}
	}
	if (sky_opt_no_args(&op) != 0) {
		return 2;
	}
	if (!dir || !id || !state) {
		fprintf(stderr, "sky pki issue: --dir, --id and --state are required\n");
		return 2;
	}
	char tok[SKY_ENROLL_TOKEN_LEN + 1], capath[1024];
	size_t cap = SKY_ENROLL_REPLY_MAX + 1, rlen = 0;
	char *req = malloc(cap), *reply = malloc(cap);
	sky_sign_rng rng;
	memset(&rng, 0, sizeof rng);
	sky_ca ca;
	sky_ca_init(&ca);
	sky_diag d;
	sky_diag_clear(&d);
	int rc = req && reply ? sky_sign_rng_init(&rng, "sky-pki-issue", &d) : SKY_ENOMEM;
	if (rc)
		goto exit;
	if (!token) {
		rc = sky_ca_token_new(dir, 600, id, &rng, tok, &d);
		if (rc)
			goto exit;
		token = tok;
	}
	snprintf(capath, sizeof capath, "%s/%s", dir, SKY_CA_CLAIM_CA_FILE);
	/* the board's side, then the CA's, then the board's again */
	if ((rc = sky_identity_trust_ca(state, capath, &d)) != 0)
		goto exit;
	int qlen = sky_identity_enroll_request(state, id, token, &rng, req, cap, &d);
	if (qlen < 0) {
		rc = qlen;
		goto exit;
	}
	if ((rc = sky_ca_open(&ca, dir, &d)) != 0)
		goto exit;
	if ((rc = sky_ca_enroll(&ca, req, (size_t)qlen, sky_clock_unix(), reply, cap, &rlen, NULL,
				&d)) != 0)
		goto exit;
	rc = sky_identity_enroll_accept(state, id, reply, rlen, &d);
exit:
	if (rc)
		fprintf(stderr, "sky pki issue: refused: %s\n", d.msg[0] ? d.msg : sky_strerror(rc));
	else
		printf("issued %s into %s\n", id, state);
	sky_ca_free(&ca);
	sky_sign_rng_free(&rng);
	free(req);
	free(reply);
	return rc ? 1 : 0;
}

/* sky pki bridge and sky pki site-broker share their options; issue says
 * which one runs. */
static int cmd_site(int argc, char **argv, int issue)
{
	const char *dir = NULL;
	const char *name = issue ? "sky pki bridge" : "sky pki site-broker";
	sky_ca_site_opts so = {0};
	enum { O_DIR = SKY_OPT_FIRST, O_PORT, O_CORE, O_LISTEN, O_MAX_PACKET };
	static const struct option k_opts[] = {{"dir", required_argument, NULL, O_DIR},
					       {"port", required_argument, NULL, O_PORT},
					       {"core", required_argument, NULL, O_CORE},
					       {"listen", required_argument, NULL, O_LISTEN},
					       {"max-packet", required_argument, NULL, O_MAX_PACKET},
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, name, argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		long x;
		switch (c) {
		case SKY_OPT_HELP:
			usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_DIR:
			dir = op.arg;
			break;
		case O_PORT:
			if (sky_cli_int(name + 4, "--port", op.arg, 1, 65535, &x) != 0)
				return 2;
			so.port = (int)x;
			break;
		case O_CORE:
			so.core = op.arg;
			break;
		case O_LISTEN:
			so.listen = op.arg;
			break;
		case O_MAX_PACKET:
			if (sky_cli_int(name + 4, "--max-packet", op.arg, 1024, 268435455L, &x) != 0)
				return 2;
			so.max_packet = (unsigned long)x;
			break;
		default:
			return 2;
		}
	}
	if (op.next != argc - 1) {
		fprintf(stderr, "%s: want one SITE\n", name);
		return 2;
	}
	so.site = argv[op.next];
	int conf = so.port || so.core;
	if (!dir || (!issue && !conf) || (conf && (!so.port || !so.core))) {
		fprintf(stderr, "%s: --dir%s are required\n", name,
			issue ? " (and --port with --core, or neither)" : ", --port and --core");
		return 2;
	}
	sky_diag d;
	sky_diag_clear(&d);
	int rc = issue ? sky_ca_add_site(dir, so.site, so.listen, &d) : 0;
	if (!rc && conf)
		rc = sky_ca_write_site_conf(dir, &so, &d);
	if (rc) {
		fprintf(stderr, "%s: %s\n", name, d.msg[0] ? d.msg : sky_strerror(rc));
		return 1;
	}
	if (issue)
		printf("site %s: bridge identity %s%s in %s/%s/%s (the core broker reads its new "
		       "ACL on SIGHUP)\n",
		       so.site, SKY_CA_BRIDGE_CN_PREFIX, so.site, dir, SKY_CA_SITES_DIR, so.site);
	if (conf)
		printf("site %s: broker %s:%d bridged to %s; start it: mosquitto -c %s/%s/%s/%s\n",
		       so.site, so.listen ? so.listen : "127.0.0.1", so.port, so.core, dir,
		       SKY_CA_SITES_DIR, so.site, SKY_CA_BROKER_CONF_FILE);
	return 0;
}

static int cmd_bridge(int argc, char **argv) { return cmd_site(argc, argv, 1); }
static int cmd_site_broker(int argc, char **argv) { return cmd_site(argc, argv, 0); }

static int cmd_revoke(int argc, char **argv)
{
	const char *dir = NULL, *id = NULL;
	int reason = SKY_CRL_REASON_NONE;
	long pid = 0;
	enum { O_DIR = SKY_OPT_FIRST, O_REASON, O_PID };
	static const struct option k_opts[] = {{"dir", required_argument, NULL, O_DIR},
					       {"reason", required_argument, NULL, O_REASON},
					       {"broker-pid", required_argument, NULL, O_PID},
					       SKY_OPT_STD,
					       {0}};
	sky_diag d;
	sky_diag_clear(&d);
	sky_opt op;
	sky_opt_begin(&op, "sky pki revoke", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		switch (c) {
		case SKY_OPT_HELP:
			usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_DIR:
			dir = op.arg;
			break;
		case O_REASON:
			if (sky_crl_reason_parse(op.arg, &reason, &d) != 0) {
				fprintf(stderr, "sky pki revoke: %s\n", d.msg);
				return 2;
			}
			break;
		case O_PID:
			if (sky_cli_int("pki revoke", "--broker-pid", op.arg, 2, 0x7fffffffL, &pid) != 0)
				return 2;
			break;
		default:
			return 2;
		}
	}
	if (op.next < argc)
		id = argv[op.next];
	if (op.next + 1 < argc) {
		fprintf(stderr, "sky pki revoke: one BOARD, got '%s' and '%s' (sky pki revoke --help)\n",
			argv[op.next], argv[op.next + 1]);
		return 2;
	}
	if (!dir || !id) {
		fprintf(stderr, "sky pki revoke: --dir and BOARD are required\n");
		return 2;
	}
	int rc = sky_crl_revoke(dir, id, reason, &d);
	if (rc < 0) {
		fprintf(stderr, "sky pki revoke: %s\n", d.msg[0] ? d.msg : sky_strerror(rc));
		return 1;
	}
	if (rc == 1)
		printf("board %s is already revoked; %s/%s unchanged\n", id, dir, SKY_CRL_FILE);
	else
		printf("revoked board %s%s%s: %s/%s re-signed; skyplan drops the board within a "
		       "second\n",
		       id, reason >= 0 ? " for " : "", reason >= 0 ? sky_crl_reason_name(reason) : "",
		       dir, SKY_CRL_FILE);
	if (pid > 0) {
		int src = sky_signal_reload(pid);
		if (src != 0) {
			fprintf(stderr, "sky pki revoke: cannot signal the broker (pid %ld): %s\n", pid,
				sky_strerror(src));
			return 1;
		}
		printf("sent SIGHUP to the broker (pid %ld): it refuses the board's new TLS "
		       "handshakes;\na connection it holds now lasts until the board reconnects or "
		       "the broker restarts\n",
		       pid);
	} else {
		printf("to apply it on the broker: kill -HUP <mosquitto pid> (or sky pki revoke "
		       "--broker-pid PID),\nand restart mosquitto to cut a connection the board holds "
		       "now\n");
	}
	return 0;
}

static int cmd_sign(int argc, char **argv, int verify)
{
	const char *key = NULL, *cert = NULL, *in = NULL;
	const char *name = verify ? "pki verify" : "pki sign";
	enum { O_KEY = SKY_OPT_FIRST, O_CERT };
	static const struct option k_sign_opts[] = {{"key", required_argument, NULL, O_KEY},
						    {"cert", required_argument, NULL, O_CERT},
						    SKY_OPT_STD,
						    {0}};
	static const struct option k_verify_opts[] = {{"cert", required_argument, NULL, O_CERT},
						      SKY_OPT_STD,
						      {0}};
	sky_opt op;
	sky_opt_begin(&op, verify ? "sky pki verify" : "sky pki sign", argc, argv,
		      verify ? k_verify_opts : k_sign_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		switch (c) {
		case SKY_OPT_HELP:
			usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_KEY:
			key = op.arg;
			break;
		case O_CERT:
			cert = op.arg;
			break;
		default:
			return 2;
		}
	}
	if (op.next < argc)
		in = argv[op.next]; /* "-" or none: stdin */
	if (op.next + 1 < argc) {
		fprintf(stderr, "sky %s: one FILE, got '%s' and '%s'\n", name, argv[op.next],
			argv[op.next + 1]);
		return 2;
	}
	if (!cert || (!verify && !key)) {
		fprintf(stderr, "sky %s: %s required\n", name,
			verify ? "--cert is" : "--key and --cert are");
		return 2;
	}
	size_t cap = SKY_SIGN_MAX_ENVELOPE + 1;
	char *buf = malloc(cap), *out = malloc(cap);
	sky_diag d;
	sky_diag_clear(&d);
	int rc = 1;
	long n = buf && out ? read_input(in, buf, cap - 1) : -1;
	if (n < 0)
		goto exit;
	if (verify) {
		mbedtls_x509_crt crt;
		mbedtls_x509_crt_init(&crt);
		size_t plen = 0;
		int r = sky_sign_load_cert(&crt, cert, &d);
		if (!r)
			r = sky_verify_envelope(&crt, buf, (size_t)n, out, cap, &plen, &d);
		mbedtls_x509_crt_free(&crt);
		if (r) {
			fprintf(stderr, "sky pki verify: rejected: %s\n", d.msg[0] ? d.msg : sky_strerror(r));
			goto exit;
		}
		fwrite(out, 1, plen, stdout);
		putchar('\n');
	} else {
		sky_signer s;
		sky_signer_init(&s);
		int r = sky_signer_load(&s, key, cert, &d);
		if (!r)
			r = sky_sign_envelope(&s, buf, (size_t)n, out, cap, &d);
		sky_signer_free(&s);
		if (r < 0) {
			fprintf(stderr, "sky pki sign: %s\n", d.msg[0] ? d.msg : sky_strerror(r));
			goto exit;
		}
		fwrite(out, 1, (size_t)r, stdout);
		putchar('\n');
	}
	rc = 0;
exit:
	free(buf);
	free(out);
	return rc;
}

/* ---- bench -------------------------------------------------------------------- */

typedef struct pki_bench {
	sky_signer signer;
	sky_ca ca;
	mbedtls_x509_crt planner;
	char payload[2048];
	size_t payload_len;
	char *env, *out;
	int env_len;
	char csr[SKY_ENROLL_CSR_MAX];
	int csr_len;
	char cert[4096];
} pki_bench;

static int b_sign(void *ctx)
{
	pki_bench *b = ctx;
	int n = sky_sign_envelope(&b->signer, b->payload, b->payload_len, b->env,
				  SKY_SIGN_MAX_ENVELOPE + 1, NULL);
	if (n <= 0)
		return SKY_ECRYPTO;
	b->env_len = n;
	return 0;
}

static int b_verify(void *ctx)
{
	pki_bench *b = ctx;
	size_t plen = 0;
	int rc = sky_verify_envelope(&b->planner, b->env, (size_t)b->env_len, b->out,
				     SKY_SIGN_MAX_PAYLOAD + 1, &plen, NULL);
	return rc ? rc : (plen == b->payload_len ? 0 : SKY_EAUTH);
}

static int b_keygen(void *ctx)
{
	pki_bench *b = ctx;
	mbedtls_pk_context pk;
	mbedtls_pk_init(&pk);
	int rc = sky_sign_gen_key(&pk, &b->ca.rng, NULL);
	mbedtls_pk_free(&pk);
	return rc;
}

static int b_issue(void *ctx)
{
	pki_bench *b = ctx;
	int n = sky_ca_issue(&b->ca, b->csr, (size_t)b->csr_len, "bench-01", b->cert, sizeof b->cert,
			     NULL);
	return n > 0 ? 0 : n;
}

static int report(const char *name, const char *what, const sky_bench_opts *o,
		  const sky_bench_stats *st)
{
	if (!o->json) {
		printf("%-12s %-44s median %.3f ms  p90 %.3f ms  (%d runs)\n", name, what,
		       st->median * 1e3, st->p90 * 1e3, st->count);
		return 0;
	}
	cJSON *obj = sky_json_new_object();
	if (!obj)
		return SKY_ENOMEM;
	cJSON_AddStringToObject(obj, "bench", name);
	cJSON_AddStringToObject(obj, "what", what);
	sky_bench_add_stats(obj, "time_ms", st);
	sky_bench_add_env(obj, "mbedtls " MBEDTLS_VERSION_STRING " ecdsa-p256", 1);
	int rc = sky_bench_print(obj);
	sky_json_free(obj);
	return rc;
}

static int cmd_bench(int argc, char **argv)
{
	const char *dir = NULL;
	sky_bench_opts o;
	sky_bench_opts_default(&o);
	o.runs = 50;
	enum { O_DIR = SKY_BENCH_OPT_OWN };
	static const struct option k_opts[] = {
		{"dir", required_argument, NULL, O_DIR}, SKY_BENCH_OPT_TABLE, SKY_OPT_STD, {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky pki bench", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		int orc = sky_bench_opt("pki bench", c, op.name, op.arg, &o);
		if (orc < 0)
			return 2;
		if (orc > 0)
			continue;
		switch (c) {
		case SKY_OPT_HELP:
			usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_DIR:
			dir = op.arg;
			break;
		default:
			return 2;
		}
	}
	if (sky_opt_no_args(&op) != 0) {
		return 2;
	}
	if (!dir) {
		fprintf(stderr, "sky pki bench: --dir is required (a scratch PKI is made there)\n");
		return 2;
	}
	static pki_bench b;
	sky_signer_init(&b.signer);
	sky_ca_init(&b.ca);
	mbedtls_x509_crt_init(&b.planner);
	sky_diag d;
	sky_diag_clear(&d);
	int rc = 0;
	char path[1024];
	b.env = malloc(SKY_SIGN_MAX_ENVELOPE + 1);
	b.out = malloc(SKY_SIGN_MAX_PAYLOAD + 1);
	snprintf(path, sizeof path, "%s/%s", dir, SKY_CA_KEY_FILE);
	if (!b.env || !b.out) {
		rc = sky_diag_set(&d, SKY_ENOMEM, "out of memory");
		goto exit;
	}
	if (!sky_file_exists(path)) {
		sky_ca_opts po = {.port = DEFAULT_PORT};
		if ((rc = sky_ca_init_dir(dir, &po, &d)) != 0)
			goto exit;
	}
	snprintf(path, sizeof path, "%s/%s", dir, SKY_CA_PLANNER_CERT_FILE);
	if ((rc = sky_ca_open(&b.ca, dir, &d)) != 0 ||
	    (rc = sky_ca_load_signer(&b.signer, dir, &d)) != 0 ||
	    (rc = sky_sign_load_cert(&b.planner, path, &d)) != 0)
		goto exit;
	/* a plan-sized payload: 16 stages of JSON */
	size_t n = 0;
	n += (size_t)snprintf(b.payload + n, sizeof b.payload - n,
			      "{\"job\":\"bench\",\"epoch\":1,\"stages\":[");
	for (int s = 0; s < 16; s++)
		n += (size_t)snprintf(b.payload + n, sizeof b.payload - n,
				      "%s{\"board\":\"board-%02d\",\"first\":%d,\"last\":%d,"
				      "\"arena_bytes\":123456789,\"in_flight\":4}",
				      s ? "," : "", s, 2 * s, 2 * s + 1);
	n += (size_t)snprintf(b.payload + n, sizeof b.payload - n, "]}");
	b.payload_len = n;
	mbedtls_pk_context pk;
	mbedtls_pk_init(&pk);
	rc = sky_sign_gen_key(&pk, &b.ca.rng, &d);
	if (!rc)
		rc = b.csr_len = sky_identity_make_csr(&pk, "bench-01", &b.ca.rng, b.csr, sizeof b.csr, &d);
	mbedtls_pk_free(&pk);
	if (rc < 0)
		goto exit;
	sky_bench_stats st;
	char what[96];
	snprintf(what, sizeof what, "sign a %zu-byte plan (ES256)", b.payload_len);
	if ((rc = sky_bench_measure(&o, b_sign, &b, &st)) != 0 || (rc = report("pki_sign", what, &o, &st)))
		goto exit;
	snprintf(what, sizeof what, "verify a %d-byte envelope on a board", b.env_len);
	if ((rc = sky_bench_measure(&o, b_verify, &b, &st)) != 0 ||
	    (rc = report("pki_verify", what, &o, &st)))
		goto exit;
	if ((rc = sky_bench_measure(&o, b_keygen, &b, &st)) != 0 ||
	    (rc = report("pki_keygen", "generate an EC P-256 key pair", &o, &st)))
		goto exit;
	if ((rc = sky_bench_measure(&o, b_issue, &b, &st)) != 0 ||
	    (rc = report("pki_issue", "CSR intake and certificate issue (CA side)", &o, &st)))
		goto exit;
exit:
	if (rc)
		fprintf(stderr, "sky pki bench: %s\n", d.msg[0] ? d.msg : sky_strerror(rc));
	mbedtls_x509_crt_free(&b.planner);
	sky_signer_free(&b.signer);
	sky_ca_free(&b.ca);
	free(b.env);
	free(b.out);
	return rc ? 1 : 0;
}

static int cmd_sign_only(int argc, char **argv) { return cmd_sign(argc, argv, 0); }
static int cmd_verify(int argc, char **argv) { return cmd_sign(argc, argv, 1); }

int sky_cmd_pki(int argc, char **argv)
{
	static const sky_cmd subs[] = {
		{"init", "the fleet's CA, identities and broker config", cmd_init},
		{"token", "a one-time claim token", cmd_token},
		{"issue", "enroll a board offline", cmd_issue},
		{"operator", "another operator identity", cmd_operator},
		{"bridge", "a site's bridge identity and broker certificate", cmd_bridge},
		{"site-broker", "a site broker's config, bridged to the core", cmd_site_broker},
		{"revoke", "put a board's certificate on the CRL", cmd_revoke},
		{"client", "a client identity for serving jobs", cmd_client},
		{"sign", "a signed envelope, by hand", cmd_sign_only},
		{"verify", "check an envelope", cmd_verify},
		{"bench", "signing, verification, key generation, issue", cmd_bench},
	};
	return sky_cli_dispatch("sky pki", argc, argv, subs, sizeof subs / sizeof subs[0], usage);
}
