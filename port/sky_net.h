/* Socket options the MQTT library does not expose. */
#ifndef SKY_NET_H
#define SKY_NET_H

/* Turns Nagle's algorithm off (TCP_NODELAY) on every TCP socket of this
 * process connected to remote port `port`. Paho C 1.3 has no option for
 * it, and without it a small message that follows another waits for the
 * peer's delayed ACK: ~40 ms per hop on loopback. Finds the sockets
 * through /proc/self/fd (Linux); elsewhere does nothing. Returns how many
 * sockets it set. */
int sky_net_nodelay_to_port(int port);

#endif
