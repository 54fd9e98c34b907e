/* TCP_NODELAY on the MQTT library's sockets (see sky_net.h). */
#include "sky_net.h"

#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>

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
