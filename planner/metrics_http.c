#include "sky_metrics_http.h"

#include "sky_log.h"
#include "sky_net.h"

#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sky_metrics_http {
	struct MHD_Daemon *daemon;
	int fd;
	sky_metrics *m;
};

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[256];
	vsnprintf(line, sizeof line, fmt, ap);
	size_t n = strlen(line);
	while (n > 0 && line[n - 1] == '\n')
		line[--n] = '\0';
	SKY_WARN("metrics http: %s", line);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *type,
			     const char *body, size_t len, const char *allow)
{
	/* MUST_COPY: the snapshot may be replaced as soon as the lock is gone */
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body,
								 MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (allow)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static int send_snapshot(const char *text, size_t len, void *arg)
{
	struct MHD_Connection *c = arg;
	if (len == 0) {
		static const char msg[] = "no snapshot of the registry yet; try again\n";
		return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", msg, sizeof msg - 1, NULL);
	}
	return reply(c, MHD_HTTP_OK, SKY_METRICS_CONTENT_TYPE, text, len, NULL);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	sky_metrics_http *h = cls;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
		static const char msg[] = "only GET /metrics\n";
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", msg, sizeof msg - 1,
			     "GET, HEAD");
	}
	if (strcmp(url, "/metrics") != 0) {
		static const char msg[] = "not found: the metrics are at /metrics\n";
		return reply(c, MHD_HTTP_NOT_FOUND, "text/plain", msg, sizeof msg - 1, NULL);
	}
	return (enum MHD_Result)sky_metrics_scrape(h->m, send_snapshot, c);
}

int sky_metrics_http_start(sky_metrics_http **out, const char *addr_port, sky_metrics *m,
			   sky_diag *d)
{
	int rc;
	sky_metrics_http *h = calloc(1, sizeof *h);
	*out = NULL;
	if (!h)
		return SKY_ENOMEM;
	h->m = m;
	h->fd = sky_net_listen(addr_port, 16, d);
	if (h->fd < 0) {
		rc = h->fd;
		goto exit;
	}
	/* a scrape is one small request: a few connections at a time, and a
	 * client that stalls is dropped after 10 s */
	h->daemon = MHD_start_daemon(
		MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, on_request, h,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET, h->fd,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)16, MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned)10, MHD_OPTION_END);
	if (!h->daemon) {
		rc = sky_diag_set(d, SKY_EIO, "metrics: the HTTP server did not start on %s",
				  addr_port);
		goto exit;
	}
	h->fd = -1; /* the daemon owns the socket now and closes it when it stops */
	sky_metrics_set_serving(m, 1);
	*out = h;
	return 0;
exit:
	sky_net_close(h->fd);
	free(h);
	return rc;
}

void sky_metrics_http_stop(sky_metrics_http *h)
{
	if (!h)
		return;
	sky_metrics_set_serving(h->m, 0);
	MHD_stop_daemon(h->daemon);
	free(h);
}
