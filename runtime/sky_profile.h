/* Board profiles: what a board kind may use and how fast it pretends to be.
 *
 * boards/<name>/profile.conf is installed as <prefix>/etc/sky/profile.conf:
 *
 *   # comment
 *   name = rpi4          # letters, digits, '.', '_', '-'; at most 31
 *   threads = 4          # OpenBLAS threads, 1..256
 *   mem_cap_mb = 3072    # memory Sky may plan for; 0 = what the OS says
 *   speed = 1.0          # emulated speed, 0 < speed <= 1
 *   site = factory       # the site the board belongs to (its own broker,
 *                        # bridged to the core); 1-64 of letters, digits,
 *                        # '.', '_', '-'; absent or "core": the core site
 *
 * A missing key keeps its default; an unknown key, a repeated key, a line
 * without '=' or a bad value is an error naming the file and line.
 *
 * speed lets one machine emulate a fleet of unequal boards: a board at
 * speed 0.5 stretches every compute phase to twice its measured time by
 * sleeping the difference (sky_profile_stretch). */
#ifndef SKY_PROFILE_H
#define SKY_PROFILE_H

#include "sky_err.h"

#include <stdint.h>

#define SKY_PROFILE_MAX_THREADS 256
#define SKY_PROFILE_MAX_MEM_MB (64ull << 20) /* 64 TiB: anything larger is a typo */
#define SKY_PROFILE_MAX_BYTES (64 << 10)     /* a profile file bigger than this is refused */
#define SKY_PROFILE_MAX_CORES 64.0           /* skyd --speed: at most 64 cores' worth */

typedef struct sky_profile {
	char name[32];
	int threads;         /* 1..256 */
	uint64_t mem_cap_mb; /* 0: no cap */
	double speed;        /* (0, 1] */
	char site[65];       /* "" = the core site (sky_caps.h: SKY_SITE_MAX + 1) */
	char source[256];    /* the file it came from, or "built-in defaults" */
	double owed_s;       /* stretch sleep not yet slept (below 1 ms); see stretch */
} sky_profile;

/* name "default", threads 1, no memory cap, speed 1.0. Cannot fail. */
void sky_profile_defaults(sky_profile *p);
/* Parses len bytes of profile text over the values already in *p (so call
 * sky_profile_defaults first). `what` names the source in errors
 * ("profile.conf:3: ..."). Returns 0 or SKY_EFORMAT / SKY_ERANGE with d
 * naming the line; *p is unchanged on error. */
int sky_profile_parse(sky_profile *p, const char *text, size_t len, const char *what, sky_diag *d);
/* Defaults, then the file at path. Returns 0, SKY_ENOTFOUND, SKY_EIO, or the
 * sky_profile_parse errors. Reads through a static buffer: call it (and
 * sky_profile_load) from one thread, once at start. */
int sky_profile_load_file(sky_profile *p, const char *path, sky_diag *d);
/* Finds and loads the profile, first match wins:
 *   1. path (from --profile), when not NULL;
 *   2. the file named by $SKY_PROFILE, when set and not empty;
 *   3. <directory of the executable>/../etc/sky/profile.conf, if it exists;
 *   4. built-in defaults (logged at debug level).
 * A file named by 1 or 2 must exist and parse. Returns 0 or the
 * sky_profile_load_file errors. */
int sky_profile_load(sky_profile *p, const char *path, sky_diag *d);

/* Bytes Sky may plan for: min(mem_cap_mb, what the OS says is available);
 * with no cap, what the OS says; with neither known, 0. */
uint64_t sky_profile_mem_budget(const sky_profile *p);
/* Sets the OpenBLAS thread count to p->threads. */
void sky_profile_apply_threads(const sky_profile *p);
/* skyd --speed F: makes the board F times as fast as one core of this
 * machine by setting p->speed = F / p->threads. Its threads are taken as
 * that many cores' worth (the probe then measures what they really do), and
 * the stretch can only slow a board down, so F must be in (0, 64] and at
 * most p->threads. Returns 0 or SKY_ERANGE (d names the bound, *p unchanged). */
int sky_profile_set_cores(sky_profile *p, double f, sky_diag *d);
/* Stretches a compute phase that took elapsed_s seconds to elapsed_s / speed
 * by sleeping the difference. Sleep has millisecond resolution, so the part
 * below 1 ms is carried in p->owed_s to the next call: over many phases the
 * total matches. Returns the seconds slept now. Not thread-safe per profile. */
double sky_profile_stretch(sky_profile *p, double elapsed_s);
/* The same from the CPU time the phase used (sky_clock_thread_cpu_s): it is
 * made to last cpu_s / speed in all, sleeping what its wall time wall_s has
 * not already taken. On a loaded machine a phase's wall time grows while
 * its CPU time does not, so a slowed board stays as slow as its speed says
 * instead of taking the load 1/speed times (a phase that already took
 * longer owes nothing, and no credit is carried). Returns the seconds slept
 * now. Not thread-safe per profile. */
double sky_profile_stretch_cpu(sky_profile *p, double wall_s, double cpu_s);

#endif
