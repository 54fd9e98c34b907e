/* Sockets, for the few places Paho does not cover, so the socket calls
 * stay in port/: a listening TCP socket for a local server (skyplan's
 * metrics endpoint), and TCP_NODELAY on Paho's own sockets. */
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

/* Turns Nagle's algorithm off (TCP_NODELAY) on every TCP socket of this
 * process connected to remote port `port`. Paho C 1.3 has no option for
 * it, and without it a small message that follows another waits for the
 * peer's delayed ACK: ~40 ms per hop on loopback. Finds the sockets
 * through /proc/self/fd (Linux); elsewhere does nothing. Returns how many
 * sockets it set. */
int sky_net_nodelay_to_port(int port);

#endif
