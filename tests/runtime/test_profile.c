#include "sky_test.h"

#include "sky_clock.h"
#include "sky_cpu.h"
#include "sky_err.h"
#include "sky_profile.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse(sky_profile *p, const char *text, sky_diag *d)
{
	sky_diag_clear(d);
	return sky_profile_parse(p, text, strlen(text), "test.conf", d);
}

SKY_TEST(defaults)
{
	sky_profile p;
	sky_profile_defaults(&p);
	SKY_EXPECT_EQ(p.threads, 1);
	SKY_EXPECT_EQ(p.mem_cap_mb, 0);
	SKY_EXPECT(p.speed == 1.0);
	SKY_EXPECT(strcmp(p.source, "built-in defaults") == 0);
}

SKY_TEST(parses_keys_comments_and_blanks)
{
	sky_profile p;
	sky_diag d;
	sky_profile_defaults(&p);
	SKY_EXPECT_EQ(parse(&p,
			    "# Raspberry Pi 4\n\n  name = rpi4\nthreads=4   # BLAS\r\n"
			    "mem_cap_mb = 3072\n\tspeed = 0.25",
			    &d),
		      0);
	SKY_EXPECT_MSG(d.msg[0] == 0, "%s", d.msg);
	SKY_EXPECT(strcmp(p.name, "rpi4") == 0);
	SKY_EXPECT_EQ(p.threads, 4);
	SKY_EXPECT_EQ(p.mem_cap_mb, 3072);
	SKY_EXPECT(p.speed == 0.25);
	/* a missing key keeps what was there */
	sky_profile_defaults(&p);
	SKY_EXPECT_EQ(parse(&p, "threads = 2\n", &d), 0);
	SKY_EXPECT_EQ(p.threads, 2);
	SKY_EXPECT(p.speed == 1.0 && strcmp(p.name, "default") == 0);
}

SKY_TEST(site_is_read_and_core_is_no_site)
{
	sky_profile p;
	sky_diag d;
	sky_profile_defaults(&p);
	SKY_EXPECT(p.site[0] == '\0'); /* the core site by default */
	SKY_EXPECT_EQ(parse(&p, "name = rpi4\nsite = factory-2  # the plant\n", &d), 0);
	SKY_EXPECT_MSG(strcmp(p.site, "factory-2") == 0, "site '%s'", p.site);
	sky_profile_defaults(&p);
	SKY_EXPECT_EQ(parse(&p, "site = core\n", &d), 0);
	SKY_EXPECT(p.site[0] == '\0');
}

SKY_TEST(bad_lines_are_named_and_change_nothing)
{
	static const struct {
		const char *text, *word;
		int rc;
	} cases[] = {
		{"threads = 2\ncolor = red\n", "test.conf:2: unknown key 'color'", SKY_EFORMAT},
		{"threads 2\n", "test.conf:1: expected 'key = value'", SKY_EFORMAT},
		{"threads =\n", "test.conf:1: 'threads' has no value", SKY_EFORMAT},
		{"threads = 0\n", "test.conf:1: threads must be an integer from 1 to 256", SKY_ERANGE},
		{"threads = 257\n", "threads must be", SKY_ERANGE},
		{"threads = 4x\n", "got '4x'", SKY_ERANGE},
		{"threads = 1\nthreads = 2\n", "test.conf:2: 'threads' given twice", SKY_EFORMAT},
		{"mem_cap_mb = -1\n", "mem_cap_mb must be", SKY_ERANGE},
		{"mem_cap_mb = 1e3\n", "mem_cap_mb must be", SKY_ERANGE},
		{"mem_cap_mb = 99999999999999999999999\n", "mem_cap_mb must be", SKY_ERANGE},
		{"speed = 0\n", "test.conf:1: speed must be a number in (0, 1]", SKY_ERANGE},
		{"speed = 1.5\n", "speed must be", SKY_ERANGE},
		{"speed = nan\n", "speed must be", SKY_ERANGE},
		{"speed = -0.5\n", "speed must be", SKY_ERANGE},
		{"name = my board\n", "name 'my board' must be", SKY_EFORMAT},
		{"name = abcdefghijabcdefghijabcdefghij12\n", "must be 1-31", SKY_EFORMAT},
		{"site = a/b\n", "test.conf:1: site 'a/b' must be 1-64", SKY_EFORMAT},
		{"site = a+\n", "site 'a+' must be", SKY_EFORMAT},
		{"site = f\nsite = g\n", "test.conf:2: 'site' given twice", SKY_EFORMAT},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		sky_profile p;
		sky_diag d;
		sky_profile_defaults(&p);
		int rc = parse(&p, cases[i].text, &d);
		SKY_EXPECT_MSG(rc == cases[i].rc, "case %zu: rc %d (%s)", i, rc, d.msg);
		SKY_EXPECT_MSG(strstr(d.msg, cases[i].word) != NULL, "case %zu: '%s' lacks '%s'", i,
			       d.msg, cases[i].word);
		SKY_EXPECT_EQ(p.threads, 1);
		SKY_EXPECT(p.speed == 1.0);
	}
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	SKY_EXPECT(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

SKY_TEST(lookup_order)
{
	char a[512], b[512];
	snprintf(a, sizeof a, "%s/a.conf", sky_test_tmp_dir());
	snprintf(b, sizeof b, "%s/b.conf", sky_test_tmp_dir());
	write_file(a, "name = from-flag\nthreads = 3\n");
	write_file(b, "name = from-env\nspeed = 0.5\n");
	sky_profile p;
	sky_diag d;

	/* the flag beats the environment */
	setenv("SKY_PROFILE", b, 1);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_profile_load(&p, a, &d), 0);
	SKY_EXPECT(strcmp(p.name, "from-flag") == 0 && p.threads == 3 && p.speed == 1.0);
	SKY_EXPECT(strcmp(p.source, a) == 0);
	/* then the environment */
	SKY_EXPECT_EQ(sky_profile_load(&p, NULL, &d), 0);
	SKY_EXPECT(strcmp(p.name, "from-env") == 0 && p.speed == 0.5 && p.threads == 1);
	/* a file named explicitly must exist */
	setenv("SKY_PROFILE", "/nonexistent/p.conf", 1);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_profile_load(&p, NULL, &d), SKY_ENOTFOUND);
	SKY_EXPECT(strstr(d.msg, "/nonexistent/p.conf: no such file") != NULL);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_profile_load(&p, "/nonexistent/q.conf", &d), SKY_ENOTFOUND);
	/* nothing given and nothing installed beside the test binary: defaults */
	unsetenv("SKY_PROFILE");
	SKY_EXPECT_EQ(sky_profile_load(&p, NULL, &d), 0);
	SKY_EXPECT(strcmp(p.source, "built-in defaults") == 0 && p.threads == 1);
	/* an empty $SKY_PROFILE counts as unset */
	setenv("SKY_PROFILE", "", 1);
	SKY_EXPECT_EQ(sky_profile_load(&p, NULL, &d), 0);
	unsetenv("SKY_PROFILE");
	/* a bad file loaded by path names the path and the line */
	write_file(a, "threads = 1\n\nspeed = 2\n");
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_profile_load(&p, a, &d), SKY_ERANGE);
	SKY_EXPECT_MSG(strstr(d.msg, "a.conf:3: speed must be") != NULL, "%s", d.msg);
}

SKY_TEST(shipped_board_profiles_parse)
{
	static const char *const boards[] = {"host", "generic-aarch64", "rpi4", "rpi5"};
	for (size_t i = 0; i < sizeof boards / sizeof boards[0]; i++) {
		char path[256];
		snprintf(path, sizeof path, "boards/%s/profile.conf", boards[i]);
		sky_profile p;
		sky_diag d;
		sky_diag_clear(&d);
		SKY_EXPECT_MSG(sky_profile_load_file(&p, path, &d) == 0, "%s: %s", path, d.msg);
		SKY_EXPECT_MSG(strcmp(p.name, boards[i]) == 0, "%s: name %s", path, p.name);
	}
}

/* MemAvailable moves between two reads on a busy machine (by ~100 KB in
 * one seen run), so "the same figure" is checked within 64 MiB; the cap
 * that is far below it must come out exactly. */
static int near_avail(uint64_t got, uint64_t avail)
{
	uint64_t tol = 64u << 20;
	return got + tol >= avail && got <= avail + tol;
}

SKY_TEST(memory_budget_is_the_smaller_of_cap_and_available)
{
	sky_profile p;
	sky_profile_defaults(&p);
	uint64_t avail = sky_mem_available();
	uint64_t got = sky_profile_mem_budget(&p); /* no cap */
	SKY_EXPECT_MSG(near_avail(got, avail), "no cap: %llu, MemAvailable %llu",
		       (unsigned long long)got, (unsigned long long)avail);
	p.mem_cap_mb = 1;
	SKY_EXPECT_EQ(sky_profile_mem_budget(&p), avail && avail < (1u << 20) ? avail : 1u << 20);
	p.mem_cap_mb = SKY_PROFILE_MAX_MEM_MB;
	got = sky_profile_mem_budget(&p);
	SKY_EXPECT_MSG(avail ? near_avail(got, avail) : got == (uint64_t)SKY_PROFILE_MAX_MEM_MB << 20,
		       "huge cap: %llu, MemAvailable %llu", (unsigned long long)got,
		       (unsigned long long)avail);
}

SKY_TEST(stretch_sleeps_the_difference_and_carries_the_remainder)
{
	sky_profile p;
	sky_profile_defaults(&p);
	SKY_EXPECT(sky_profile_stretch(&p, 0.5) == 0); /* full speed: no sleep */
	p.speed = 0.5;
	/* 0.4 ms of compute owes 0.4 ms of sleep: below the 1 ms resolution */
	SKY_EXPECT(sky_profile_stretch(&p, 0.0004) == 0);
	SKY_EXPECT(sky_profile_stretch(&p, 0.0004) == 0);
	SKY_EXPECT_NEAR(sky_profile_stretch(&p, 0.0004), 0.001, 1e-12);
	SKY_EXPECT_NEAR(p.owed_s, 0.0002, 1e-9);
	/* 20 ms at speed 0.25 owes 60 ms (+ the 0.2 carried) */
	p.speed = 0.25;
	double t0 = sky_clock_s();
	double slept = sky_profile_stretch(&p, 0.020);
	double wall = sky_clock_s() - t0;
	SKY_EXPECT_NEAR(slept, 0.060, 1e-12);
	SKY_EXPECT(wall >= 0.059); /* sleeps at least that long (a lower bound only) */
	SKY_EXPECT(sky_profile_stretch(&p, -1.0) == 0);
}

/* skyd --speed from CPU time: a phase lasts cpu / speed in all, whatever
 * load stretched its wall time; what the wall time already took is not
 * slept again, and a phase that took longer owes nothing (no credit). */
SKY_TEST(stretch_cpu_makes_a_phase_last_its_cpu_time_over_speed)
{
	sky_profile p;
	sky_profile_defaults(&p);
	SKY_EXPECT(sky_profile_stretch_cpu(&p, 0.01, 0.01) == 0); /* full speed */
	p.speed = 0.25;
	/* 10 ms of CPU in 10 ms: 40 ms in all, 30 ms of sleep */
	SKY_EXPECT_NEAR(sky_profile_stretch_cpu(&p, 0.010, 0.010), 0.030, 1e-12);
	/* the same 10 ms of CPU took 25 ms on a busy machine: 15 ms of sleep,
	 * where the wall-time stretch would sleep 75 */
	SKY_EXPECT_NEAR(sky_profile_stretch_cpu(&p, 0.025, 0.010), 0.015, 1e-12);
	/* longer than cpu / speed already: nothing, and nothing carried */
	SKY_EXPECT(sky_profile_stretch_cpu(&p, 0.050, 0.010) == 0);
	SKY_EXPECT(p.owed_s == 0);
	SKY_EXPECT_NEAR(sky_profile_stretch_cpu(&p, 0.010, 0.010), 0.030, 1e-12);
	SKY_EXPECT(sky_profile_stretch_cpu(&p, 0.010, -1.0) == 0);
	/* the thread's CPU clock moves with work, not with sleep */
	double c0 = sky_clock_thread_cpu_s();
	sky_sleep_ms(20);
	double c1 = sky_clock_thread_cpu_s();
	volatile double x = 0;
	for (int i = 0; i < 20000000 && sky_clock_thread_cpu_s() - c1 < 0.005; i++)
		x += i;
	SKY_EXPECT(c1 > 0 && c1 - c0 < 0.015);
	SKY_EXPECT(sky_clock_thread_cpu_s() - c1 > 0);
}

SKY_TEST(threads_reach_openblas)
{
	sky_profile p;
	sky_profile_defaults(&p);
	p.threads = 1;
	sky_profile_apply_threads(&p);
	SKY_EXPECT_EQ(openblas_get_num_threads(), 1);
}

SKY_TEST(set_cores_is_speed_per_thread_and_refuses_what_it_cannot_emulate)
{
	sky_profile p;
	sky_diag d;
	sky_profile_defaults(&p); /* 1 thread */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_profile_set_cores(&p, 0.25, &d), 0);
	SKY_EXPECT(p.speed == 0.25);
	SKY_EXPECT_EQ(sky_profile_set_cores(&p, 1.0, &d), 0);
	SKY_EXPECT(p.speed == 1.0);
	p.threads = 4;
	SKY_EXPECT_EQ(sky_profile_set_cores(&p, 2.0, &d), 0);
	SKY_EXPECT(p.speed == 0.5); /* 4 threads taken as 4 cores, slowed to 2 */
	/* faster than its threads: the stretch cannot speed a board up */
	p.speed = 0.5;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_profile_set_cores(&p, 5.0, &d), SKY_ERANGE);
	SKY_EXPECT_MSG(strstr(d.msg, "4 OpenBLAS threads") && strstr(d.msg, "threads >= 5"), "%s",
		       d.msg);
	SKY_EXPECT(p.speed == 0.5); /* unchanged */
	const double bad[] = {0.0, -1.0, 64.5, NAN, INFINITY};
	p.threads = SKY_PROFILE_MAX_THREADS;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		sky_diag_clear(&d);
		SKY_EXPECT_EQ(sky_profile_set_cores(&p, bad[i], &d), SKY_ERANGE);
		SKY_EXPECT_MSG(strstr(d.msg, "(0, 64]"), "%s", d.msg);
	}
	SKY_EXPECT_EQ(sky_profile_set_cores(&p, 64.0, &d), 0);
	SKY_EXPECT(p.speed == 64.0 / SKY_PROFILE_MAX_THREADS);
}
