/* The fleet's certificate authority and broker configuration (planner
 * side): `sky pki init` makes a PKI directory, skyplan answers enrollment
 * requests from it and signs plans with the planner key it holds.
 *
 * PKI directory layout (sky_ca_init_dir; keys are mode 0600, the rest 0644):
 *
 *   <pki>/ca.key, ca.crt            fleet CA, EC P-256, self-signed, 10 years
 *   <pki>/broker.key, broker.crt    mosquitto's server certificate:
 *                                   CN=localhost, SAN DNS:localhost and
 *                                   IP:127.0.0.1, 10 years
 *   <pki>/planner.key, planner.crt  CN "sky-planner": skyplan's TLS client
 *                                   identity AND the key that signs plans
 *                                   (sky_sign.h)
 *   <pki>/operator.key, operator.crt CN "sky-operator": `sky job submit`'s
 *                                   identity (submit jobs, read their acks,
 *                                   follow plans and plan-acks; nothing else)
 *   <pki>/operators/<name>/         one more operator (sky_ca_add_operator):
 *                                   ca.crt, planner.crt, operator.crt (CN
 *                                   "sky-op-<name>"), operator.key; usable as
 *                                   `sky job submit --pki` on another machine
 *   <pki>/operators.list            their names, one a line (for the ACL)
 *   <pki>/clients/<name>/           a client of serving jobs (sky_ca_add_client):
 *                                   ca.crt, client.crt (CN "sky-client-<name>"),
 *                                   client.key; `sky infer --pki` reads it
 *   <pki>/clients.list              their names, one a line (for the ACL)
 *   <pki>/claim/ca.crt              the claim bundle, copied to a new board:
 *   <pki>/claim/claim.crt, claim.key  CN "sky-claim", which the ACL lets
 *                                   only publish enrollment requests and
 *                                   read enrollment replies
 *   <pki>/mosquitto.conf, <pki>/acl, <pki>/acl-claim
 *                                   the loopback broker (sky_ca_write_broker_conf)
 *   <pki>/tokens/<sha256 hex>       one file per unused claim token (0600):
 *                                   "<expiry unix seconds> <bound id or *>\n";
 *                                   only the hash of a token is stored, and
 *                                   using it deletes the file (one-time)
 *   <pki>/issued/<id>               "<serial hex> <unix time>\n" of the last
 *                                   certificate issued to board <id>
 *   <pki>/serials/<id>              every certificate ever issued to board <id>,
 *                                   one "<serial hex> <unix time>\n" line each
 *                                   (appended): `sky pki revoke` puts them all
 *                                   on the CRL, not only the newest
 *   <pki>/revoked, crl.pem, crl.number  revoked boards and the CA's CRL
 *                                   (sky_crl.h; mosquitto's crlfile)
 *
 * Board certificates: CN = board id, validity 1 year from issue (backdated
 * 5 minutes for clock skew), 128-bit random serial, basicConstraints
 * CA:FALSE, keyUsage digitalSignature, signed by the CA with ECDSA-SHA256.
 *
 * Token rules: a token is a one-time secret of SKY_ENROLL_TOKEN_LEN hex
 * characters, valid for its TTL; it may be bound to one board id at mint
 * time. An unbound token cannot claim an id that already has a
 * certificate (so a leaked token cannot impersonate an enrolled board);
 * a token bound to that id can (re-enrollment after a lost key). */
#ifndef SKY_CA_H
#define SKY_CA_H

#include "sky_enroll.h"
#include "sky_err.h"
#include "sky_sign.h"

#include <mbedtls/pk.h>
#include <mbedtls/x509_crt.h>
#include <stddef.h>
#include <stdint.h>

#define SKY_CA_KEY_FILE "ca.key"
#define SKY_CA_CERT_FILE "ca.crt"
#define SKY_CA_BROKER_KEY_FILE "broker.key"
#define SKY_CA_BROKER_CERT_FILE "broker.crt"
#define SKY_CA_PLANNER_KEY_FILE "planner.key"
#define SKY_CA_PLANNER_CERT_FILE "planner.crt"
#define SKY_CA_CLAIM_DIR "claim"
#define SKY_CA_CERTS_DIR "certs" /* <id>.crt: each board's certificate as issued (frame keys are wrapped for it) */
#define SKY_CA_SERIALS_DIR "serials" /* <id>: every serial issued to the board, one a line */
#define SKY_CA_CLAIM_KEY_FILE "claim/claim.key"
#define SKY_CA_CLAIM_CERT_FILE "claim/claim.crt"
#define SKY_CA_CLAIM_CA_FILE "claim/ca.crt"
#define SKY_CA_BROKER_CONF_FILE "mosquitto.conf"
#define SKY_CA_BROKER_STATE_DIR "broker-state" /* mosquitto's persistence (retained messages) */
#define SKY_CA_ACL_FILE "acl"
#define SKY_CA_ACL_CLAIM_FILE "acl-claim"
#define SKY_CA_OPERATOR_KEY_FILE "operator.key"
#define SKY_CA_OPERATOR_CERT_FILE "operator.crt"
#define SKY_CA_OPERATOR_CN "sky-operator"
#define SKY_CA_OPERATOR_NAME_PREFIX "sky-op-"
#define SKY_CA_OPERATORS_DIR "operators"
#define SKY_CA_OPERATORS_FILE "operators.list"
#define SKY_CA_SITES_DIR "sites"        /* <site>/: a site broker's files (sky_ca_add_site) */
#define SKY_CA_SITES_FILE "sites.list"  /* site names, one a line (bridge sections of the ACL) */
#define SKY_CA_BRIDGE_KEY_FILE "bridge.key"
#define SKY_CA_BRIDGE_CERT_FILE "bridge.crt"
#define SKY_CA_BRIDGE_CN_PREFIX "sky-bridge-"
#define SKY_CA_SITE_NAME_MAX 64 /* SKY_SITE_MAX (sky_caps.h) */
#define SKY_CA_CLIENT_KEY_FILE "client.key"
#define SKY_CA_CLIENT_CERT_FILE "client.crt"
#define SKY_CA_CLIENT_NAME_PREFIX "sky-client-"
#define SKY_CA_CLIENTS_DIR "clients"
#define SKY_CA_CLIENTS_FILE "clients.list"

#define SKY_CA_BOARD_DAYS 365
#define SKY_CA_DEFAULT_TOKEN_TTL 3600 /* seconds */
#define SKY_CA_MAX_TOKEN_TTL (30 * 86400)

/* Options of `sky pki init`. */
typedef struct sky_ca_opts {
	int port;                  /* broker listener port on 127.0.0.1, 1..65535 */
	unsigned long max_packet;  /* broker max_packet_size in bytes (0: default
	                              SKY_MQTT_MAX_PACKET from sky_topics.h) */
	int force;                 /* 1: replace an existing CA (else refuse) */
	const char *listen;        /* IPv4 address both listeners bind (NULL:
	                              127.0.0.1); also named in broker.crt */
} sky_ca_opts;

/* Creates dir (0700) and everything in the layout above. Refuses
 * (SKY_ESTATE) if <dir>/ca.key exists and !o->force, so a running fleet's
 * CA is never overwritten by accident. Returns 0 or SKY_EIO / SKY_ECRYPTO /
 * SKY_EINVAL (bad port) with d set. */
int sky_ca_init_dir(const char *dir, const sky_ca_opts *o, sky_diag *d);

/* (Re)writes <dir>/mosquitto.conf, <dir>/acl and <dir>/acl-claim for a
 * broker with two listeners on 127.0.0.1, both mutual TLS
 * (require_certificate, CN as username): the fleet listener on port, where
 * the client id is replaced by the CN (use_username_as_clientid), and the
 * claim listener on port + 1, where only the claim identity may do
 * anything (enroll) and keeps the client ids it chooses; every client id
 * must start with SKY_MQTT_CLIENT_PREFIX (sky_topics.h says why). No
 * anonymous clients, TCP_NODELAY, max_packet_size, persistence in
 * <dir>/broker-state/ (retained plans survive a broker restart), running
 * as root (so it can read the 0600 broker key in a private directory). The
 * ACLs grant exactly what sky_topics.h lists per identity, with one
 * section per operator (the default one and <dir>/operators.list);
 * mosquitto denies everything an acl_file does not grant. Paths in the
 * config are absolute. Returns 0, or SKY_EIO, or SKY_EINVAL (bad port or
 * size, port 65535 (no room for the claim listener), or a directory path
 * with spaces or control characters, which mosquitto's config syntax
 * cannot carry). */
int sky_ca_write_broker_conf(const char *dir, int port, unsigned long max_packet, sky_diag *d);

/* The same, with both listeners on the IPv4 address listen (NULL:
 * 127.0.0.1) instead of loopback: a core broker that site bridges reach
 * over a network. Its certificate must name that address (sky_ca_opts). */
int sky_ca_write_broker_conf_at(const char *dir, const char *listen, int port,
				unsigned long max_packet, sky_diag *d);

/* (Re)writes only <dir>/acl and <dir>/acl-claim (as above). Returns 0 or
 * SKY_EIO / SKY_ERANGE / SKY_EINVAL (a bad name in operators.list). */
int sky_ca_rewrite_acl(const char *dir, sky_diag *d);

/* Operator names: 1..32 characters of [A-Za-z0-9_-]. Returns 0 or
 * SKY_EINVAL with d set. */
int sky_ca_check_operator_name(const char *name, sky_diag *d);
/* Issues one more operator identity, CN "sky-op-<name>", into
 * <dir>/operators/<name>/ (see the layout above), adds name to
 * <dir>/operators.list and rewrites the ACL (the broker reads it again on
 * SIGHUP). Refuses (SKY_ESTATE) a name already issued. Returns 0 or
 * SKY_EINVAL / SKY_ENOTFOUND (no CA in dir) / SKY_EIO / SKY_ECRYPTO. */
int sky_ca_add_operator(const char *dir, const char *name, sky_diag *d);

/* Client names follow the operator rule (1..32 of [A-Za-z0-9_-]). Returns
 * 0 or SKY_EINVAL with d set. */
int sky_ca_check_client_name(const char *name, sky_diag *d);
/* Issues a client identity for serving jobs, CN "sky-client-<name>", into
 * <dir>/clients/<name>/ (ca.crt, client.crt, client.key 0600), adds name to
 * <dir>/clients.list and rewrites the ACL: on the tools listener the
 * client may write sky/v1/job/+/req/<CN> and read sky/v1/job/+/resp/<CN>,
 * nothing else; on the fleet listener nothing at all (the board patterns
 * there would give it every request and response; sky_ca_rewrite_acl).
 * The broker reads the new ACL on SIGHUP. Refuses (SKY_ESTATE) a name
 * already issued. Returns 0 or SKY_EINVAL / SKY_ENOTFOUND (no CA in dir) /
 * SKY_EIO / SKY_ECRYPTO. */
int sky_ca_add_client(const char *dir, const char *name, sky_diag *d);

/* Parses a dotted IPv4 address into out. Returns 0 or SKY_EINVAL. */
int sky_ca_parse_ipv4(const char *s, unsigned char out[4]);

/* ---- sites: a broker per site, bridged to the core broker ----
 *
 *   <pki>/sites/<site>/ca.crt               the fleet CA
 *   <pki>/sites/<site>/broker.key, .crt     the site broker's server
 *                                           certificate (CN localhost, SAN
 *                                           localhost, 127.0.0.1 [, listen])
 *   <pki>/sites/<site>/bridge.key, .crt     CN "sky-bridge-<site>": the site
 *                                           broker's client identity on the
 *                                           core broker
 *   <pki>/sites/<site>/mosquitto.conf, acl  the site broker (sky_ca_write_site_conf)
 *   <pki>/sites.list                        site names, one a line
 *
 * The core's ACL (sky_ca_rewrite_acl) gets one section per site: its
 * bridge may carry the site's boards' control messages to the planner,
 * plans and commands back, frames addressed to other sites
 * (sky/v1/site/<dst>/job/...) out and those addressed to its own site in,
 * the planner's link probes, checkpoints out and loads in, and serving's
 * slice requests and answers out, slices and requests in; no other topic
 * crosses. The site broker checks a copy of the CA's CRL kept in its
 * directory (sky_crl_refresh renews it). */

/* Site names: 1..SKY_CA_SITE_NAME_MAX characters of [A-Za-z0-9_.-], not
 * "core" (sky_caps.h), not "." or "..".
 * Returns 0 or SKY_EINVAL with d set. */
int sky_ca_check_site_name(const char *name, sky_diag *d);
/* Issues site's bridge identity and its broker's server certificate
 * (naming listen too if not NULL) into <dir>/sites/<site>/, adds site to
 * sites.list and rewrites the core ACL (the core broker reads it on
 * SIGHUP). Refuses (SKY_ESTATE) a site that has a bridge already. Returns
 * 0 or SKY_EINVAL / SKY_ENOTFOUND (no CA) / SKY_EIO / SKY_ECRYPTO. */
int sky_ca_add_site(const char *dir, const char *site, const char *listen, sky_diag *d);

typedef struct sky_ca_site_opts {
	const char *site;         /* an issued site (sky_ca_add_site) */
	const char *listen;       /* IPv4 address the site's listener binds (NULL: 127.0.0.1) */
	int port;                 /* its port */
	const char *core;         /* the core broker's fleet listener, "IPv4:PORT" */
	unsigned long max_packet; /* 0: SKY_MQTT_MAX_PACKET */
} sky_ca_site_opts;
/* (Re)writes <dir>/sites/<site>/mosquitto.conf and acl: one mutual-TLS
 * listener for the site's boards (client id = CN, the boards' ACL rules
 * of the core, plus writing frames addressed to other sites) and a bridge
 * to the core over mutual TLS as sky-bridge-<site>, whose topic lines let
 * only Sky's cross-site topics through (see the config's comments).
 * Returns 0, SKY_EINVAL (bad name, port, address), SKY_ENOTFOUND (site
 * not issued) or SKY_EIO. */
int sky_ca_write_site_conf(const char *dir, const sky_ca_site_opts *o, sky_diag *d);

/* Mints a one-time claim token valid for ttl_s seconds (1..SKY_CA_MAX_TOKEN_TTL),
 * optionally bound to board id bind_id (NULL: any id). Writes the token
 * (SKY_ENROLL_TOKEN_LEN hex characters + NUL) into out; stores only its
 * SHA-256. Safe to call while skyplan runs (one file per token). Returns 0
 * or SKY_EINVAL / SKY_EIO / SKY_ECRYPTO. */
int sky_ca_token_new(const char *dir, long ttl_s, const char *bind_id, sky_sign_rng *rng,
		     char out[SKY_ENROLL_TOKEN_LEN + 1], sky_diag *d);
/* Checks token for board id at time now (Unix seconds) and, if consume is
 * 1, uses it up (deletes its file; of two racing consumers exactly one
 * wins). Returns 0, or SKY_EAUTH with d saying why: unknown or already
 * used, expired, bound to another id, or (unbound) the id already holds a
 * certificate. An expired token's file is deleted too. */
int sky_ca_token_use(const char *dir, const char *token, const char *id, int64_t now, int consume,
		     sky_diag *d);

/* An opened CA: its key and certificate, the PEMs it sends to boards, an RNG. */
typedef struct sky_ca {
	char dir[512];
	mbedtls_pk_context key;
	mbedtls_x509_crt crt;
	char ca_pem[SKY_ENROLL_PEM_MAX + 1];
	char planner_pem[SKY_ENROLL_PEM_MAX + 1];
	sky_sign_rng rng;
	int ready;
} sky_ca;

/* Zeroes ca; cannot fail. */
void sky_ca_init(sky_ca *ca);
/* Loads ca.key, ca.crt and planner.crt from dir. Returns 0 or
 * SKY_ENOTFOUND / SKY_ECRYPTO / SKY_EAUTH with d naming the file. */
int sky_ca_open(sky_ca *ca, const char *dir, sky_diag *d);
/* NULL-safe; may be called twice. */
void sky_ca_free(sky_ca *ca);

/* CSR intake, in this order: refuses csr_len > SKY_ENROLL_CSR_MAX before
 * parsing (SKY_ERANGE); parses the PEM (SKY_EFORMAT); requires an EC P-256
 * key (SKY_EAUTH), a valid self-signature (SKY_EAUTH), a CN that passes
 * sky_enroll_check_id (SKY_EINVAL) and equals id (SKY_EAUTH). Then issues
 * the certificate (see top comment) as PEM into out. Does not look at
 * tokens. Returns the PEM length (> 0) or the codes above / SKY_ERANGE (out
 * too small) / SKY_ECRYPTO, with d naming what was wrong. */
int sky_ca_issue(sky_ca *ca, const char *csr_pem, size_t csr_len, const char *id, char *out,
		 size_t cap, sky_diag *d);

/* The whole enrollment step for skyplan: decodes the request msg (from
 * sky/v1/enroll/<nonce>/csr), refuses a revoked id (SKY_EAUTH, "board '<id>'
 * is revoked ..."; sky_ca_check_not_revoked), checks the token without consuming it,
 * checks the CSR and issues, consumes the token, records issued/<id>, and
 * writes the reply JSON for sky/v1/enroll/<nonce>/cert into reply (success
 * or refusal; a refusal says why in "error", without secrets). Returns 0
 * if a certificate was issued, else the negative reason; in both cases
 * *reply_len is the reply's length (0 if even a refusal did not fit).
 * id_out (SKY_ENROLL_ID_MAX + 1 bytes, may be NULL) receives the requested
 * id when it was readable, for the log line. */
int sky_ca_enroll(sky_ca *ca, const char *msg, size_t len, int64_t now, char *reply, size_t cap,
		  size_t *reply_len, char *id_out, sky_diag *d);

/* Returns 0 if board id has no revoked certificate in <dir>/revoked
 * (sky_crl.h), SKY_EAUTH with d saying it is revoked, or the list's read
 * errors. sky_ca_enroll refuses a revoked id with this, before it looks at
 * the token. */
int sky_ca_check_not_revoked(const char *dir, const char *id, sky_diag *d);

/* Loads the planner's signing identity (<dir>/planner.key and
 * planner.crt) into s, for sky_sign_envelope. Returns as sky_signer_load. */
int sky_ca_load_signer(sky_signer *s, const char *dir, sky_diag *d);

#endif
