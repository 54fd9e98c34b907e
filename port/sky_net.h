/* A listening TCP socket for a local server (skyplan's metrics endpoint).
 * Sky's MQTT connections go through Paho; this is only for the few places
 * that accept connections, so the socket calls stay in port/. */
#ifndef SKY_NET_H
#define SKY_NET_H

#include "sky_err.h"

#include <stddef.h>

#define SKY_NET_HOST_MAX 255 /* a DNS name's length limit, RFC 1035 §2.3.4 */

/* Splits "ADDR:PORT" into host and port. ADDR is an IPv4 address, a host
 * name, or an IPv6 address in brackets ("[::1]:9100"); PORT is 1 to 65535
 * in decimal. Returns 0, or SKY_EINVAL with d naming what is wrong. */
int sky_net_parse_hostport(const char *s, char *host, size_t host_cap, int *port, sky_diag *d);

/* Resolves "ADDR:PORT" (numeric port, as above), binds a TCP socket to
 * the first address that works and listens on it (close-on-exec,
 * SO_REUSEADDR). Returns the descriptor (>= 0), SKY_EINVAL for a bad
 * ADDR:PORT or a name that does not resolve, or SKY_EIO when no address
 * can be bound (in use, not local), with d saying which and why. */
int sky_net_listen(const char *addr_port, int backlog, sky_diag *d);

/* Closes a descriptor from sky_net_listen; a negative one is ignored. */
void sky_net_close(int fd);

#endif
