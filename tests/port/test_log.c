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

SKY_TEST(a_message_cannot_forge_a_line_or_a_journal_priority)
{
	sky_log_set_journal(0);
	/* a board's plan-ack reason, say, with a newline, a forged line and an
	 * escape sequence that would recolour a terminal */
	const char *out = capture(SKY_LOG_WARN, "bad\n2026-12-02T00:00:00.000Z skyplan[1] info: "
						"forged\r\x1b[31mred\x7f");
	SKY_EXPECT_MSG(strchr(out, '\n') == out + strlen(out) - 1, "one line: %s", out);
	SKY_EXPECT(strstr(out, "bad\\n2026-12-02T00:00:00.000Z skyplan[1] info: forged\\r\\x1b[31mred"
			       "\\x7f\n") != NULL);
	SKY_EXPECT(strchr(out, '\x1b') == NULL && strchr(out, '\r') == NULL);
	sky_log_set_journal(1);
	out = capture(SKY_LOG_INFO, "x\n<3>urgent");
	SKY_EXPECT_MSG(strcmp(out, "<6>x\\n<3>urgent\n") == 0, "journal line: %s", out);
	sky_log_set_journal(0);
}

SKY_TEST(escape_keeps_text_and_cuts_at_a_whole_escape)
{
	char buf[16];
	SKY_EXPECT(strcmp(sky_log_escape("plain é text", buf, sizeof buf), "plain é text") == 0);
	SKY_EXPECT(strcmp(sky_log_escape("a\tb\\nc", buf, sizeof buf), "a\\tb\\\\nc") == 0);
	SKY_EXPECT(strcmp(sky_log_escape("c:\\dir", buf, sizeof buf), "c:\\dir") == 0);
	/* room for "0123456789ab" and not for the 4-byte escape after it */
	SKY_EXPECT(strcmp(sky_log_escape("0123456789ab\x01zz", buf, 15), "0123456789ab") == 0);
	SKY_EXPECT(strcmp(sky_log_escape("0123456789a\x01zz", buf, sizeof buf), "0123456789a\\x01") == 0);
	SKY_EXPECT(sky_log_escape("x", buf, 1)[0] == '\0');
	/* a priority prefix where the text starts, printed as a line of its own */
	SKY_EXPECT(strcmp(sky_log_escape("<3>forged", buf, sizeof buf), "\\x3c3>forged") == 0);
	SKY_EXPECT(strcmp(sky_log_escape("a <3> b", buf, sizeof buf), "a <3> b") == 0);
	SKY_EXPECT(strcmp(sky_log_escape("<b>", buf, sizeof buf), "<b>") == 0);
}
