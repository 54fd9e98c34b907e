/* Making and growing a PKI directory: what `sky pki init`, `sky pki
 * add-operator`, `add-client` and `bridge` run. These sit above the CA's
 * certificate writer (ca.c), the broker configuration (sky_broker_conf.h:
 * the ACL names each new identity) and the CRL (sky_crl.h: a new CA starts
 * with an empty one); the directory's files: sky_pki_layout.h. */
#ifndef SKY_PKI_H
#define SKY_PKI_H

#include "sky_err.h"

/* Options of `sky pki init`. */
typedef struct sky_ca_opts {
	int port;                  /* broker listener port on 127.0.0.1, 1..65535 */
	unsigned long max_packet;  /* broker max_packet_size in bytes (0: default
	                              SKY_MQTT_MAX_PACKET from sky_topics.h) */
	int force;                 /* 1: replace an existing CA (else refuse) */
	const char *listen;        /* IPv4 address both listeners bind (NULL:
	                              127.0.0.1); also named in broker.crt */
} sky_ca_opts;

/* Creates dir (0700) and everything in the layout (sky_pki_layout.h). Refuses
 * (SKY_ESTATE) if <dir>/ca.key exists and !o->force, so a running fleet's
 * CA is never overwritten by accident. Returns 0 or SKY_EIO / SKY_ECRYPTO /
 * SKY_EINVAL (bad port) with d set. */
int sky_ca_init_dir(const char *dir, const sky_ca_opts *o, sky_diag *d);

/* Issues one more operator identity, CN "sky-op-<name>", into
 * <dir>/operators/<name>/ (see sky_pki_layout.h), adds name to
 * <dir>/operators.list and rewrites the ACL (the broker reads it again on
 * SIGHUP). Refuses (SKY_ESTATE) a name already issued. Returns 0 or
 * SKY_EINVAL / SKY_ENOTFOUND (no CA in dir) / SKY_EIO / SKY_ECRYPTO. */
int sky_ca_add_operator(const char *dir, const char *name, sky_diag *d);

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

/* Issues site's bridge identity and its broker's server certificate
 * (naming listen too if not NULL) into <dir>/sites/<site>/, adds site to
 * sites.list and rewrites the core ACL (the core broker reads it on
 * SIGHUP). Refuses (SKY_ESTATE) a site that has a bridge already. Returns
 * 0 or SKY_EINVAL / SKY_ENOTFOUND (no CA) / SKY_EIO / SKY_ECRYPTO. */
int sky_ca_add_site(const char *dir, const char *site, const char *listen, sky_diag *d);

#endif
