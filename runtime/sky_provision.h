/* First-boot enrollment from a provisioning directory (default /etc/sky,
 * `skyd --config-dir DIR`). A board image drops in DIR:
 *   claim/ca.crt, claim/claim.crt, claim/claim.key   the claim bundle
 *                                       (`sky pki init`'s <pki>/claim/)
 *   token     a one-time claim token (`sky pki token`)
 *   broker    HOST:PORT of the fleet's broker
 *   id        the board id (optional: the host name)
 *   profile.conf  the board profile (the sky-board package installs it)
 * Each of token, broker and id is one line; surrounding white space is
 * ignored. skyd enrolls with them only while its state directory holds no
 * identity, then spends the token (sky_provision_spend_token). */
#ifndef SKY_PROVISION_H
#define SKY_PROVISION_H

#include "sky_err.h"

#define SKY_PROVISION_PATH 512

typedef struct sky_provision {
	char broker[256];                  /* "" if DIR/broker is missing */
	char id[128];                      /* DIR/id, else the host name */
	char token[512];                   /* "" if DIR/token is missing */
	char claim_ca[SKY_PROVISION_PATH]; /* DIR/claim/ca.crt ("" if missing) */
	char profile[SKY_PROVISION_PATH];  /* DIR/profile.conf ("" if missing) */
	char token_path[SKY_PROVISION_PATH];
} sky_provision;

/* Reads what DIR holds into p (missing files leave their field empty).
 * Returns 0, SKY_ENOTFOUND if DIR is not a directory, or SKY_EFORMAT /
 * SKY_ERANGE for a file that is empty, too long or not one line. */
int sky_provision_load(const char *dir, sky_provision *p, sky_diag *d);

/* After a successful enrollment: removes p's token file; where that is not
 * allowed (a read-only /etc under ProtectSystem=strict) it leaves it and
 * writes <state_dir>/token.used instead, naming the file. Returns 0, or
 * SKY_EIO if neither works. */
int sky_provision_spend_token(const sky_provision *p, const char *state_dir, sky_diag *d);

#endif
