/* The PKI directory's broker configuration: the core broker's
 * mosquitto.conf and its two ACLs, and a site broker's config and ACL.
 * `sky pki init` writes them first, each identity `sky pki add-*` and
 * `sky pki bridge` adds rewrites the ACL, and `sky pki site-broker` writes
 * a site's. Files and names: sky_pki_layout.h. (The functions keep the
 * sky_ca_ prefix they had when they were declared in sky_ca.h.)
 *
 * The core's ACL (sky_ca_rewrite_acl) gets one section per site: its
 * bridge may carry the site's boards' control messages to the planner,
 * plans and commands back, frames addressed to other sites
 * (sky/v1/site/<dst>/job/...) out and those addressed to its own site in,
 * the planner's link probes, checkpoints out and loads in, and serving's
 * slice requests and answers out, slices and requests in; no other topic
 * crosses. The site broker checks a copy of the CA's CRL kept in its
 * directory (sky_crl_refresh renews it). */
#ifndef SKY_BROKER_CONF_H
#define SKY_BROKER_CONF_H

#include "sky_err.h"

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
 * over a network. Its certificate must name that address (sky_ca_opts, sky_pki.h). */
int sky_ca_write_broker_conf_at(const char *dir, const char *listen, int port,
				unsigned long max_packet, sky_diag *d);

/* (Re)writes only <dir>/acl and <dir>/acl-claim (as above). Returns 0 or
 * SKY_EIO / SKY_ERANGE / SKY_EINVAL (a bad name in operators.list). */
int sky_ca_rewrite_acl(const char *dir, sky_diag *d);

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

#endif
