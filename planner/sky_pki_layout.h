/* The PKI directory's file layout and naming rules: the leaf that the CA
 * (sky_ca.h), the broker configuration (sky_broker_conf.h), the revoked
 * list and CRL (sky_crl.h) and the commands that make and grow the
 * directory (sky_pki.h) all name files and check names by. It depends on
 * none of them.
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
 * Sites (sky_ca_add_site, sky_pki.h):
 *
 *   <pki>/sites/<site>/ca.crt               the fleet CA
 *   <pki>/sites/<site>/broker.key, .crt     the site broker's server
 *                                           certificate (CN localhost, SAN
 *                                           localhost, 127.0.0.1 [, listen])
 *   <pki>/sites/<site>/bridge.key, .crt     CN "sky-bridge-<site>": the site
 *                                           broker's client identity on the
 *                                           core broker
 *   <pki>/sites/<site>/mosquitto.conf, acl  the site broker (sky_ca_write_site_conf)
 *   <pki>/sites/<site>/crl.pem              a copy of the CA's CRL (sky_crl_refresh)
 *   <pki>/sites.list                        site names, one a line */
#ifndef SKY_PKI_LAYOUT_H
#define SKY_PKI_LAYOUT_H

#include "sky_err.h"

#include <stddef.h>

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


#define SKY_PKI_PATH_CAP 1024 /* a path inside the PKI directory, NUL included */

/* "<dir>/<file>" into buf (SKY_PKI_PATH_CAP bytes). Returns 0, or
 * SKY_ERANGE with d naming the path when it does not fit. */
int sky_pki_path(char *buf, const char *dir, const char *file, sky_diag *d);

/* in[0..n) as 2n lowercase hex digits and a NUL into out: how the
 * directory writes serials (issued/, serials/) and names token files. */
void sky_pki_hex(const unsigned char *in, size_t n, char *out);

/* Operator names: 1..32 characters of [A-Za-z0-9_-]. Returns 0 or
 * SKY_EINVAL with d set. */
int sky_ca_check_operator_name(const char *name, sky_diag *d);

/* Client names follow the operator rule (1..32 of [A-Za-z0-9_-]). Returns
 * 0 or SKY_EINVAL with d set. */
int sky_ca_check_client_name(const char *name, sky_diag *d);

/* Site names: 1..SKY_CA_SITE_NAME_MAX characters of [A-Za-z0-9_.-], not
 * "core" (sky_caps.h), not "." or "..".
 * Returns 0 or SKY_EINVAL with d set. */
int sky_ca_check_site_name(const char *name, sky_diag *d);

/* Parses a dotted IPv4 address into out. Returns 0 or SKY_EINVAL. */
int sky_ca_parse_ipv4(const char *s, unsigned char out[4]);

#endif
