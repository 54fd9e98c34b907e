#include "sky_net.h"

#include <dirent.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

int sky_net_parse_hostport(const char *s, char *host, size_t host_cap, int *port, sky_diag *d)
{
	if (!s || !*s)
		return sky_diag_set(d, SKY_EINVAL, "empty address (expected ADDR:PORT)");
	const char *colon = strrchr(s, ':');
	const char *h = s, *h_end = colon;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':')
			return sky_diag_set(d, SKY_EINVAL,
					    "'%s': an IPv6 address goes in brackets: [ADDR]:PORT", s);
		h = s + 1;
		h_end = close;
		colon = close + 1;
	} else if (colon && memchr(s, ':', (size_t)(colon - s))) {
		return sky_diag_set(d, SKY_EINVAL, "'%s': write an IPv6 address as [ADDR]:PORT", s);
	}
	if (!colon)
		return sky_diag_set(d, SKY_EINVAL, "'%s' has no port (expected ADDR:PORT)", s);
	size_t hl = (size_t)(h_end - h);
	if (hl == 0)
		return sky_diag_set(d, SKY_EINVAL, "'%s' has no address (expected ADDR:PORT)", s);
	if (hl >= host_cap || hl > SKY_NET_HOST_MAX)
		return sky_diag_set(d, SKY_EINVAL, "'%s': address longer than %d characters", s,
				    SKY_NET_HOST_MAX);
	const char *p = colon + 1;
	long n = 0;
	if (!*p)
		return sky_diag_set(d, SKY_EINVAL, "'%s' has no port (expected ADDR:PORT)", s);
	for (const char *c = p; *c; c++) {
		if (*c < '0' || *c > '9' || n > 65535)
			return sky_diag_set(d, SKY_EINVAL, "'%s': port '%s' is not 1 to 65535", s, p);
		n = n * 10 + (*c - '0');
	}
	if (n < 1 || n > 65535)
		return sky_diag_set(d, SKY_EINVAL, "'%s': port '%s' is not 1 to 65535", s, p);
	memcpy(host, h, hl);
	host[hl] = '\0';
	*port = (int)n;
	return 0;
}

int sky_net_listen(const char *addr_port, int backlog, sky_diag *d)
{
	char host[SKY_NET_HOST_MAX + 1], serv[8];
	int port, rc, fd = -1, err = 0;
	struct addrinfo hints, *res = NULL;
	if ((rc = sky_net_parse_hostport(addr_port, host, sizeof host, &port, d)) != 0)
		return rc;
	snprintf(serv, sizeof serv, "%d", port);
	memset(&hints, 0, sizeof hints);
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	int g = getaddrinfo(host, serv, &hints, &res);
	if (g != 0)
		return sky_diag_set(d, SKY_EINVAL, "'%s': cannot resolve '%s': %s", addr_port, host,
				    gai_strerror(g));
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			err = errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
		    listen(fd, backlog > 0 ? backlog : 16) == 0)
			break;
		err = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return sky_diag_set(d, SKY_EIO, "cannot listen on %s: %s", addr_port, strerror(err));
	return fd;
}

void sky_net_close(int fd)
{
	if (fd >= 0)
		close(fd);
}

/* ---- TCP_NODELAY on the MQTT library's sockets ---------------------------- */

int sky_net_nodelay_to_port(int port)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	if (!d)
		return 0;
	const int dir_fd = dirfd(d);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		struct stat st;
		if (*end || end == e->d_name || fd == dir_fd || fstat((int)fd, &st) != 0 ||
		    !S_ISSOCK(st.st_mode))
			continue;
		int type = 0, on = 1;
		socklen_t len = sizeof type;
		struct sockaddr_storage ss;
		socklen_t sl = sizeof ss;
		if (getsockopt((int)fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM ||
		    getpeername((int)fd, (struct sockaddr *)&ss, &sl) != 0)
			continue;
		int peer = ss.ss_family == AF_INET    ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
			   : ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
						      : -1;
		if (peer == port &&
		    setsockopt((int)fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) == 0)
			n++;
	}
	closedir(d);
	return n;
}
