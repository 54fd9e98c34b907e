#include "sky_test.h"

#include "sky_metrics.h"
#include "sky_metrics_http.h"
#include "sky_registry.h"
#include "sky_thread.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static sky_registry g_r;
static sky_metrics g_m;
static char g_buf[SKY_METRICS_MAX_TEXT];
static char g_buf2[SKY_METRICS_MAX_TEXT];

/* b1 online with a capability report and a stage of j1, b2 offline, b3 only
 * enrolled; a few counters. Every figure is exact in binary. */
static void small_registry(void)
{
	sky_registry_init(&g_r);
	sky_reg_board *b = sky_registry_add(&g_r, "b1");
	b->state = SKY_REG_ONLINE;
	b->last_seen = 1764511200;
	b->has_caps = 1;
	b->caps.fp32 = (sky_caps_times){0.125, 0.25, 0.5, 0.75};
	b->caps.has_int8 = 1;
	b->caps.int8_fwd_s = 0.0625;
	b->caps.mem_bytes = 1ll << 30;
	b->caps.link_bw = 125000000;
	b->caps.link_lat_s = 0.0005;
	b->caps.probe_s = 2.5;
	snprintf(b->job, sizeof b->job, "j1");
	b->stage = 0;
	b = sky_registry_add(&g_r, "b2");
	b->state = SKY_REG_OFFLINE;
	b->last_seen = 1764511100;
	sky_registry_add(&g_r, "b3");
	g_r.n_jobs = 1;
	snprintf(g_r.jobs[0].job, sizeof g_r.jobs[0].job, "j1");
	g_r.jobs[0].epoch = 7;
	g_r.c.caps_rejected = 2;
	g_r.c.oversize = 1;
	g_r.c.stale_ignored = 3;
	g_r.c.caps_ok = 4;
	g_r.c.acks_ok = 1;
}

/* 1 if text holds exactly this line */
static int has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return 1;
	return 0;
}

SKY_TEST(exact_lines_for_a_small_registry)
{
	sky_metrics_init(&g_m);
	small_registry();
	int n = sky_metrics_render(&g_m, &g_r, 1764511234, g_buf, sizeof g_buf);
	SKY_EXPECT(n > 0 && (size_t)n == strlen(g_buf));
	static const char *want[] = {
		"# HELP sky_boards Boards the planner knows, by state (enrolled: never heard from "
		"since enrollment; revoked: on the CRL).",
		"# TYPE sky_boards gauge",
		"sky_boards{state=\"online\"} 1",
		"sky_boards{state=\"offline\"} 1",
		"sky_boards{state=\"enrolled\"} 1",
		"sky_boards{state=\"revoked\"} 0",
		"# TYPE sky_board_online gauge",
		"sky_board_online{board=\"b1\"} 1",
		"sky_board_online{board=\"b2\"} 0",
		"sky_board_online{board=\"b3\"} 0",
		"sky_registry_updated_timestamp_seconds 1764511234",
		"sky_board_last_seen_timestamp_seconds{board=\"b1\"} 1764511200",
		"sky_board_last_seen_timestamp_seconds{board=\"b2\"} 1764511100",
		"sky_board_layer_forward_seconds{board=\"b1\"} 0.375",
		"sky_board_layer_backward_seconds{board=\"b1\"} 1.25",
		"sky_board_layer_int8_forward_seconds{board=\"b1\"} 0.0625",
		"sky_board_memory_budget_bytes{board=\"b1\"} 1073741824",
		"sky_board_link_rtt_seconds{board=\"b1\"} 0.0005",
		"sky_board_link_bandwidth_bytes_per_second{board=\"b1\"} 125000000",
		"sky_board_probe_duration_seconds{board=\"b1\"} 2.5",
		"sky_board_stage{board=\"b1\",job=\"j1\"} 0",
		"sky_job_plan_epoch{job=\"j1\"} 7",
		"# TYPE sky_job_replans_total counter",
		"sky_job_replans_total{job=\"j1\"} 0",
		"# TYPE sky_messages_refused_total counter",
		"sky_messages_refused_total{reason=\"caps_rejected\"} 2",
		"sky_messages_refused_total{reason=\"status_rejected\"} 0",
		"sky_messages_refused_total{reason=\"oversize\"} 1",
		"sky_messages_refused_total{reason=\"stale_ignored\"} 3",
		"sky_caps_reports_accepted_total 4",
		"sky_plan_acks_total{answer=\"accepted\"} 1",
		"sky_plan_acks_total{answer=\"refused\"} 0",
		"# TYPE sky_job_step_measured_seconds gauge",
		"# TYPE sky_frames_dropped_total counter",
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		SKY_EXPECT_MSG(has_line(g_buf, want[i]), "missing line: %s", want[i]);
	/* boards without a report have no probe figures; nothing fed, no step */
	SKY_EXPECT(!strstr(g_buf, "sky_board_layer_forward_seconds{board=\"b2\"}"));
	SKY_EXPECT(!strstr(g_buf, "{board=\"b3\"} 1"));
	SKY_EXPECT(!strstr(g_buf, "sky_job_step_measured_seconds{"));
	SKY_EXPECT(!strstr(g_buf, "sky_frames_dropped_total{"));
	SKY_EXPECT(g_buf[n - 1] == '\n');
	/* fed figures appear */
	SKY_EXPECT_EQ(sky_metrics_set_step_measured(&g_m, "j1", 1.5), 0);
	SKY_EXPECT_EQ(sky_metrics_set_step_predicted(&g_m, "j1", 1.25), 0);
	SKY_EXPECT_EQ(sky_metrics_add_frames_dropped(&g_m, "j1", "epoch", 2), 0);
	SKY_EXPECT_EQ(sky_metrics_add_frames_dropped(&g_m, "j1", "epoch", 3), 0);
	SKY_EXPECT_EQ(sky_metrics_add_replan(&g_m, "j1"), 0);
	SKY_EXPECT(sky_metrics_render(&g_m, &g_r, 1764511234, g_buf, sizeof g_buf) > 0);
	SKY_EXPECT(has_line(g_buf, "sky_job_step_measured_seconds{job=\"j1\"} 1.5"));
	SKY_EXPECT(has_line(g_buf, "sky_job_step_predicted_seconds{job=\"j1\"} 1.25"));
	SKY_EXPECT(has_line(g_buf, "sky_frames_dropped_total{job=\"j1\",reason=\"epoch\"} 5"));
	SKY_EXPECT(has_line(g_buf, "sky_job_replans_total{job=\"j1\"} 1"));
	sky_metrics_free(&g_m);
}

SKY_TEST(values_print_as_cjson_does)
{
	sky_metrics_init(&g_m);
	sky_registry_init(&g_r);
	sky_reg_board *b = sky_registry_add(&g_r, "b1");
	b->has_caps = 1;
	b->caps.fp32 = (sky_caps_times){0.1, 0.2, 0.1, 0.1}; /* 0.30000000000000004 */
	SKY_EXPECT(sky_metrics_render(&g_m, &g_r, 1, g_buf, sizeof g_buf) > 0);
	SKY_EXPECT(has_line(g_buf, "sky_board_layer_forward_seconds{board=\"b1\"} "
				   "0.30000000000000004"));
	SKY_EXPECT(has_line(g_buf, "sky_board_layer_backward_seconds{board=\"b1\"} 0.2"));
	sky_metrics_free(&g_m);
}

SKY_TEST(label_values_are_escaped)
{
	sky_metrics_init(&g_m);
	SKY_EXPECT_EQ(sky_metrics_add_frames_dropped(&g_m, "j1", "a\"b\\c\nd", 1), 0);
	SKY_EXPECT(sky_metrics_render(&g_m, NULL, 1, g_buf, sizeof g_buf) > 0);
	SKY_EXPECT(has_line(g_buf, "sky_frames_dropped_total{job=\"j1\",reason=\"a\\\"b\\\\c\\nd\"} 1"));
	sky_metrics_free(&g_m);
}

/* Every family's HELP and TYPE once, in that order, before its samples,
 * and its samples together. */
SKY_TEST(help_and_type_once_per_family)
{
	sky_metrics_init(&g_m);
	small_registry();
	sky_metrics_add_frames_dropped(&g_m, "j1", "epoch", 1);
	sky_metrics_add_frames_dropped(&g_m, "j2", "checksum", 1);
	sky_metrics_set_step_measured(&g_m, "j2", 3);
	SKY_EXPECT(sky_metrics_render(&g_m, &g_r, 1, g_buf, sizeof g_buf) > 0);
	char seen[64][80];
	int n_seen = 0, families = 0;
	char cur[80] = "";
	int typed = 1;
	for (char *line = strtok(g_buf, "\n"); line; line = strtok(NULL, "\n")) {
		char name[80];
		if (!strncmp(line, "# HELP ", 7)) {
			SKY_EXPECT(sscanf(line + 7, "%79s", name) == 1);
			for (int i = 0; i < n_seen; i++)
				SKY_EXPECT_MSG(strcmp(seen[i], name) != 0, "family %s twice", name);
			if (n_seen < 64)
				snprintf(seen[n_seen++], sizeof seen[0], "%s", name);
			SKY_EXPECT_MSG(typed, "family before %s has no TYPE", name);
			snprintf(cur, sizeof cur, "%s", name);
			typed = 0;
			families++;
			continue;
		}
		if (!strncmp(line, "# TYPE ", 7)) {
			char type[16];
			SKY_EXPECT(sscanf(line + 7, "%79s %15s", name, type) == 2);
			SKY_EXPECT_MSG(!strcmp(name, cur) && !typed, "TYPE %s not once after its HELP",
				       name);
			typed = 1;
			SKY_EXPECT(!strcmp(type, "gauge") || !strcmp(type, "counter"));
			if (!strcmp(type, "counter"))
				SKY_EXPECT_MSG(strstr(name, "_total") != NULL, "counter %s", name);
			continue;
		}
		SKY_EXPECT_MSG(typed, "sample '%s' before its TYPE", line);
		size_t k = strcspn(line, "{ ");
		SKY_EXPECT_MSG(k == strlen(cur) && !strncmp(line, cur, k),
			       "sample '%s' outside its family %s", line, cur);
	}
	SKY_EXPECT_EQ(families, n_seen);
	SKY_EXPECT(families >= 20);
	sky_metrics_free(&g_m);
}

/* The value of the sample whose name and labels are `key` in text, or -1. */
static double value_of(const char *text, const char *key)
{
	size_t n = strlen(key);
	for (const char *p = text; (p = strstr(p, key)) != NULL; p++)
		if ((p == text || p[-1] == '\n') && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

SKY_TEST(counters_are_monotone)
{
	sky_metrics_init(&g_m);
	small_registry();
	SKY_EXPECT(sky_metrics_render(&g_m, &g_r, 1, g_buf, sizeof g_buf) > 0);
	/* real refusals through the registry, and a drop */
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT(sky_registry_on_board_msg(&g_r, "b1", SKY_TOPIC_CAPS, "{", 1, 1, 1, &d) < 0);
	SKY_EXPECT(sky_registry_on_board_msg(&g_r, "b1", SKY_TOPIC_STATUS, "[]", 2, 1, 1, &d) < 0);
	sky_metrics_add_frames_dropped(&g_m, "j1", "epoch", 1);
	SKY_EXPECT(sky_metrics_render(&g_m, &g_r, 2, g_buf2, sizeof g_buf2) > 0);
	int counters = 0;
	for (char *line = strtok(g_buf, "\n"); line; line = strtok(NULL, "\n")) {
		if (line[0] == '#')
			continue;
		char key[200];
		size_t k = strcspn(line, " ");
		if (k >= sizeof key)
			continue;
		memcpy(key, line, k);
		key[k] = '\0';
		size_t nk = strcspn(key, "{");
		if (nk < 6 || strncmp(key + nk - 6, "_total", 6) != 0)
			continue;
		counters++;
		double before = strtod(line + k + 1, NULL), after = value_of(g_buf2, key);
		SKY_EXPECT_MSG(after >= before, "%s went from %g to %g", key, before, after);
	}
	SKY_EXPECT(counters >= 10);
	SKY_EXPECT(value_of(g_buf2, "sky_messages_refused_total{reason=\"caps_rejected\"}") == 3);
	SKY_EXPECT(value_of(g_buf2, "sky_messages_refused_total{reason=\"status_rejected\"}") == 1);
	SKY_EXPECT(value_of(g_buf2, "sky_frames_dropped_total{job=\"j1\",reason=\"epoch\"}") == 1);
	sky_metrics_free(&g_m);
}

SKY_TEST(a_small_buffer_is_an_error_not_a_cut)
{
	sky_metrics_init(&g_m);
	small_registry();
	int n = sky_metrics_render(&g_m, &g_r, 1, g_buf, sizeof g_buf);
	SKY_EXPECT(n > 100);
	SKY_EXPECT_EQ(sky_metrics_render(&g_m, &g_r, 1, g_buf2, (size_t)n), SKY_ERANGE);
	SKY_EXPECT_EQ(sky_metrics_render(&g_m, &g_r, 1, g_buf2, (size_t)n + 1), n);
	sky_metrics_free(&g_m);
}

SKY_TEST(setters_refuse_bad_names_and_a_full_table)
{
	sky_metrics_init(&g_m);
	SKY_EXPECT_EQ(sky_metrics_set_step_measured(&g_m, "a/b", 1), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_metrics_set_step_measured(&g_m, "j", -1), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_metrics_add_frames_dropped(&g_m, "j", "", 1), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_metrics_add_frames_dropped(&g_m, "j", "r", -1), SKY_EINVAL);
	char job[16], reason[16];
	for (int i = 0; i < SKY_METRICS_MAX_JOBS; i++) {
		snprintf(job, sizeof job, "j%d", i);
		SKY_EXPECT_EQ(sky_metrics_add_replan(&g_m, job), 0);
	}
	SKY_EXPECT_EQ(sky_metrics_add_replan(&g_m, "one-more"), SKY_ENOMEM);
	SKY_EXPECT_EQ(sky_metrics_add_replan(&g_m, "j0"), 0);
	for (int i = 0; i < SKY_METRICS_MAX_REASONS; i++) {
		snprintf(reason, sizeof reason, "r%d", i);
		SKY_EXPECT_EQ(sky_metrics_add_frames_dropped(&g_m, "j0", reason, 1), 0);
	}
	SKY_EXPECT_EQ(sky_metrics_add_frames_dropped(&g_m, "j0", "r-extra", 1), SKY_ENOMEM);
	sky_metrics_free(&g_m);
}

/* ---- the HTTP part, over loopback ------------------------------------------------------ */

/* GET or another method; the whole response into buf. Returns its length or -1. */
static int http(int port, const char *method, const char *path, char *buf, size_t cap)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), len = 0;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	char req[256];
	int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
			 method, path);
	if (write(fd, req, (size_t)n) != n) {
		close(fd);
		return -1;
	}
	ssize_t r;
	while ((size_t)len < cap - 1 && (r = read(fd, buf + len, cap - 1 - (size_t)len)) > 0)
		len += (int)r;
	buf[len] = '\0';
	close(fd);
	return len;
}

/* A server on a free loopback port; returns the port or 0. */
static int start_on_free_port(sky_metrics_http **h, sky_metrics *m)
{
	for (int i = 0; i < 50; i++) {
		int port = 20000 + (int)((unsigned)(getpid() * 7919 + i * 104729) % 40000);
		char addr[32];
		sky_diag d;
		sky_diag_clear(&d);
		snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
		if (sky_metrics_http_start(h, addr, m, &d) == 0)
			return port;
	}
	return 0;
}

SKY_TEST(serves_the_published_snapshot_over_http)
{
	static char resp[SKY_METRICS_MAX_TEXT + 1024];
	sky_metrics_http *h = NULL;
	sky_metrics_init(&g_m);
	small_registry();
	/* not served: publishing is free and scrapes nothing */
	SKY_EXPECT_EQ(sky_metrics_publish(&g_m, &g_r, 5), 0);
	SKY_EXPECT_EQ(g_m.text_len, 0);
	int port = start_on_free_port(&h, &g_m);
	SKY_EXPECT(port > 0);
	if (!port)
		return;
	SKY_EXPECT(http(port, "GET", "/metrics", resp, sizeof resp) > 0);
	SKY_EXPECT_MSG(!strncmp(resp, "HTTP/1.1 503", 12), "before a snapshot: %.40s", resp);
	SKY_EXPECT_EQ(sky_metrics_publish(&g_m, &g_r, 5), 0);
	int n = sky_metrics_render(&g_m, &g_r, 5, g_buf, sizeof g_buf);
	SKY_EXPECT(http(port, "GET", "/metrics", resp, sizeof resp) > n);
	SKY_EXPECT_MSG(!strncmp(resp, "HTTP/1.1 200", 12), "%.40s", resp);
	SKY_EXPECT(strstr(resp, "Content-Type: " SKY_METRICS_CONTENT_TYPE "\r\n") != NULL);
	const char *body = strstr(resp, "\r\n\r\n");
	SKY_EXPECT(body && !strcmp(body + 4, g_buf));
	SKY_EXPECT(http(port, "GET", "/", resp, sizeof resp) > 0);
	SKY_EXPECT_MSG(!strncmp(resp, "HTTP/1.1 404", 12), "%.40s", resp);
	SKY_EXPECT(http(port, "POST", "/metrics", resp, sizeof resp) > 0);
	SKY_EXPECT_MSG(!strncmp(resp, "HTTP/1.1 405", 12), "%.40s", resp);
	/* the port is taken: a second server says so */
	sky_metrics_http *h2 = NULL;
	char addr[32];
	sky_diag d;
	sky_diag_clear(&d);
	snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
	SKY_EXPECT_EQ(sky_metrics_http_start(&h2, addr, &g_m, &d), SKY_EIO);
	SKY_EXPECT_MSG(strstr(d.msg, "cannot listen on") && strstr(d.msg, "in use"), "%s", d.msg);
	sky_metrics_http_stop(h);
	SKY_EXPECT(!atomic_load(&g_m.serving));
	/* stopped: the port is free again */
	SKY_EXPECT(http(port, "GET", "/metrics", resp, sizeof resp) < 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_metrics_http_start(&h2, addr, &g_m, &d), 0);
	sky_metrics_http_stop(h2);
	sky_metrics_free(&g_m);
}

SKY_TEST(refuses_a_bad_address)
{
	static const char *bad[] = {"", "127.0.0.1", "127.0.0.1:", ":9100", "127.0.0.1:0",
				    "127.0.0.1:65536", "127.0.0.1:9x", "::1:9100",
				    "[::1]9100", "[::1:9100"};
	sky_metrics_init(&g_m);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		sky_metrics_http *h = NULL;
		sky_diag d;
		sky_diag_clear(&d);
		SKY_EXPECT_MSG(sky_metrics_http_start(&h, bad[i], &g_m, &d) == SKY_EINVAL,
			       "'%s' accepted", bad[i]);
		SKY_EXPECT_MSG(d.msg[0] != '\0', "'%s': no reason", bad[i]);
		SKY_EXPECT(h == NULL);
	}
	sky_metrics_free(&g_m);
}

/* The main loop publishes while the HTTP thread serves: every scrape is one
 * whole snapshot, never a mix of two. */
static _Atomic int g_stop;
static sky_registry g_r2;

static void *publisher(void *arg)
{
	for (long i = 0; !atomic_load(&g_stop); i++)
		sky_metrics_publish(&g_m, (i & 1) ? &g_r2 : &g_r, 7);
	return NULL;
}

SKY_TEST(scrapes_while_publishing_see_whole_snapshots)
{
	static char resp[SKY_METRICS_MAX_TEXT + 1024];
	sky_metrics_http *h = NULL;
	sky_metrics_init(&g_m);
	small_registry();
	g_r2 = g_r;
	for (int i = 0; i < 200; i++) { /* a bigger second registry */
		char id[16];
		snprintf(id, sizeof id, "x%d", i);
		sky_registry_add(&g_r2, id);
	}
	int na = sky_metrics_render(&g_m, &g_r, 7, g_buf, sizeof g_buf);
	int nb = sky_metrics_render(&g_m, &g_r2, 7, g_buf2, sizeof g_buf2);
	SKY_EXPECT(na > 0 && nb > na);
	int port = start_on_free_port(&h, &g_m);
	SKY_EXPECT(port > 0);
	if (!port)
		return;
	sky_metrics_publish(&g_m, &g_r, 7);
	sky_thread t;
	atomic_store(&g_stop, 0);
	SKY_EXPECT_EQ(sky_thread_start(&t, publisher, NULL), 0);
	int a = 0, b = 0;
	for (int i = 0; i < 40; i++) {
		SKY_EXPECT(http(port, "GET", "/metrics", resp, sizeof resp) > 0);
		const char *body = strstr(resp, "\r\n\r\n");
		SKY_EXPECT(body != NULL);
		if (!body)
			break;
		a += !strcmp(body + 4, g_buf);
		b += !strcmp(body + 4, g_buf2);
	}
	atomic_store(&g_stop, 1);
	sky_thread_join(&t);
	SKY_EXPECT_EQ(a + b, 40);
	sky_metrics_http_stop(h);
	sky_metrics_free(&g_m);
}

/* The largest registry (every board with the longest id, a report and a
 * stage; every job) and a full feed fit SKY_METRICS_MAX_TEXT. */
SKY_TEST(the_largest_fleet_fits)
{
	static sky_registry big;
	sky_metrics_init(&g_m);
	sky_registry_init(&big);
	char id[SKY_TOPIC_SEGMENT_MAX + 1];
	for (int i = 0; i < SKY_REG_MAX_BOARDS; i++) {
		snprintf(id, sizeof id, "%0*d", SKY_TOPIC_SEGMENT_MAX, i);
		sky_reg_board *b = sky_registry_add(&big, id);
		SKY_EXPECT(b != NULL);
		if (!b)
			return;
		b->state = SKY_REG_ONLINE;
		b->last_seen = 1764511200;
		b->has_caps = 1;
		b->caps.fp32 = (sky_caps_times){0.1, 0.2, 0.3, 0.4};
		b->caps.has_int8 = 1;
		b->caps.int8_fwd_s = 0.1;
		b->caps.mem_bytes = 1ll << 40;
		b->caps.link_bw = 1.0 / 3;
		b->caps.link_lat_s = 1.0 / 7;
		b->caps.probe_s = 1.0 / 9;
		snprintf(b->job, sizeof b->job, "%s", id);
		b->stage = 65535;
	}
	big.n_jobs = SKY_REG_MAX_JOBS;
	for (int j = 0; j < SKY_REG_MAX_JOBS; j++) {
		snprintf(big.jobs[j].job, sizeof big.jobs[j].job, "%0*d", SKY_TOPIC_SEGMENT_MAX, j);
		big.jobs[j].epoch = 1ll << 52;
	}
	char reason[SKY_METRICS_REASON_MAX + 1];
	for (int j = 0; j < SKY_METRICS_MAX_JOBS; j++) {
		sky_metrics_set_step_measured(&g_m, big.jobs[j].job, 1.0 / 3);
		sky_metrics_set_step_predicted(&g_m, big.jobs[j].job, 1.0 / 3);
		for (int k = 0; k < SKY_METRICS_MAX_REASONS; k++) {
			snprintf(reason, sizeof reason, "%0*d", SKY_METRICS_REASON_MAX, k);
			SKY_EXPECT_EQ(sky_metrics_add_frames_dropped(&g_m, big.jobs[j].job, reason,
								     1l << 40), 0);
		}
	}
	int n = sky_metrics_render(&g_m, &big, 1764511200, g_buf, sizeof g_buf);
	SKY_EXPECT_MSG(n > 0, "render: %d", n);
	printf("MEASURE metrics_largest_fleet_bytes %d (of %u)\n", n, SKY_METRICS_MAX_TEXT);
	sky_metrics_free(&g_m);
}
