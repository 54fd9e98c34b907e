/* port/log.c: plain lines, and journald lines with priority prefixes. */
#include "sky_log.h"
#include "sky_test.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Runs one log call with stderr sent to a file and returns what it wrote. */
static const char *capture(sky_log_level level, const char *msg)
{
	static char out[2048];
	char path[512];
	snprintf(path, sizeof path, "%s/stderr.txt", sky_test_tmp_dir());
	fflush(stderr);
	int saved = dup(2);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	dup2(fd, 2);
	close(fd);
	sky_log(level, "%s", msg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	out[0] = '\0';
	FILE *f = fopen(path, "r");
	if (f) {
		size_t n = fread(out, 1, sizeof out - 1, f);
		out[n] = '\0';
		fclose(f);
	}
	return out;
}

SKY_TEST(log_journal_lines_carry_syslog_priorities)
{
	sky_log_set_level(SKY_LOG_DEBUG);
	sky_log_set_journal(1);
	SKY_EXPECT(strcmp(capture(SKY_LOG_ERROR, "disk gone"), "<3>disk gone\n") == 0);
	SKY_EXPECT(strcmp(capture(SKY_LOG_WARN, "slow link"), "<4>slow link\n") == 0);
	SKY_EXPECT(strcmp(capture(SKY_LOG_INFO, "serving"), "<6>serving\n") == 0);
	SKY_EXPECT(strcmp(capture(SKY_LOG_DEBUG, "tick"), "<7>tick\n") == 0);
	sky_log_set_level(SKY_LOG_INFO);
	SKY_EXPECT(strcmp(capture(SKY_LOG_DEBUG, "tick"), "") == 0); /* level still filters */
}

SKY_TEST(log_plain_lines_keep_time_name_and_level)
{
	sky_log_set_journal(0);
	sky_log_set_name("skytest");
	const char *line = capture(SKY_LOG_WARN, "slow link");
	/* 2026-11-30T14:00:00.123Z skytest[1234] warn: slow link */
	SKY_EXPECT(line[0] != '<');
	SKY_EXPECT(strlen(line) > 25 && line[4] == '-' && line[10] == 'T' && line[23] == 'Z');
	SKY_EXPECT(strstr(line, " skytest[") != NULL);
	SKY_EXPECT(strstr(line, "] warn: slow link\n") != NULL);
}

SKY_TEST(log_journal_stream_must_name_the_fd)
{
	char path[512], env[64];
	snprintf(path, sizeof path, "%s/stream.txt", sky_test_tmp_dir());
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	SKY_EXPECT(fd >= 0);
	struct stat st;
	SKY_EXPECT(fstat(fd, &st) == 0);
	snprintf(env, sizeof env, "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	SKY_EXPECT(sky_log_journal_stream(env, fd) == 1);
	/* systemd sets it for the service's stderr; a child whose stderr went
	 * elsewhere inherits the variable but must not take it for the journal */
	snprintf(env, sizeof env, "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino + 1);
	SKY_EXPECT(sky_log_journal_stream(env, fd) == 0);
	SKY_EXPECT(sky_log_journal_stream("garbage", fd) == 0);
	SKY_EXPECT(sky_log_journal_stream(NULL, fd) == 0);
	close(fd);
}
