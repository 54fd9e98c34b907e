/* Time: a monotonic clock for measuring, wall-clock UTC for showing. */
#ifndef SKY_CLOCK_H
#define SKY_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* Monotonic nanoseconds since an arbitrary origin; never goes back. */
uint64_t sky_clock_ns(void);
/* Seconds (monotonic) as a double, for durations. */
double sky_clock_s(void);
/* CPU time the calling thread has used, in seconds (0 if the system cannot
 * tell). */
double sky_clock_thread_cpu_s(void);
/* Wall-clock seconds since the Unix epoch. */
int64_t sky_clock_unix(void);
/* The same in milliseconds (event logs that compare times across processes). */
int64_t sky_clock_unix_ms(void);
/* Writes "YYYY-MM-DDTHH:MM:SS.mmmZ" (needs 25 bytes); truncates safely. */
void sky_clock_utc_iso(char *buf, size_t len);
/* Formats a given Unix time as "YYYY-MM-DDTHH:MM:SSZ". */
void sky_clock_format_utc(int64_t unix_s, char *buf, size_t len);
/* Sleeps at least ms milliseconds (restarts after signals). */
void sky_sleep_ms(unsigned ms);

#endif
