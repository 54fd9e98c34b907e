/* skyplan --metrics ADDR:PORT: serves GET /metrics (the Prometheus text
 * format, planner/sky_metrics.h) with libmicrohttpd on its own thread.
 * Any other path is 404, any other method 405. It serves the newest
 * snapshot published by the main loop (sky_metrics_publish) and never
 * touches the registry; before the first snapshot it answers 503. */
#ifndef SKY_METRICS_HTTP_H
#define SKY_METRICS_HTTP_H

#include "sky_err.h"
#include "sky_metrics.h"

typedef struct sky_metrics_http sky_metrics_http;

/* Listens on addr_port (sky_net_listen: "127.0.0.1:9464", "[::1]:9464",
 * "0.0.0.0:9464") and serves m until sky_metrics_http_stop. Returns 0 with
 * *out set, SKY_EINVAL for a bad ADDR:PORT, SKY_EIO if it cannot listen
 * or the server cannot start (d says which). */
int sky_metrics_http_start(sky_metrics_http **out, const char *addr_port, sky_metrics *m,
			   sky_diag *d);
/* Stops serving, closes the socket, marks m unserved. NULL-safe. */
void sky_metrics_http_stop(sky_metrics_http *h);

#endif
