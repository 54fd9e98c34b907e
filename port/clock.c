#define _POSIX_C_SOURCE 200809L
#include "sky_clock.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

uint64_t sky_clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double sky_clock_s(void) { return (double)sky_clock_ns() * 1e-9; }

double sky_clock_thread_cpu_s(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t sky_clock_unix(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec;
}

int64_t sky_clock_unix_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sky_clock_format_utc(int64_t unix_s, char *buf, size_t len)
{
	time_t t = (time_t)unix_s;
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void sky_clock_utc_iso(char *buf, size_t len)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char day[24];
	strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%s.%03ldZ", day, ts.tv_nsec / 1000000L);
}

void sky_sleep_ms(unsigned ms)
{
	struct timespec ts = {(time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
	}
}
