/* What every `sky bench` subcommand shares, in the manner of on-device
 * benchmark tools: common options (--warmup, --runs, --max-seconds, --json,
 * --threads), warm-up runs excluded from statistics, a time cap, summary
 * statistics, and the facts that make a figure comparable across machines
 * (host, CPU, features, kernel variant, threads, build commit). */
#ifndef SKY_BENCH_UTIL_H
#define SKY_BENCH_UTIL_H

#include "sky_opt.h"

#include <cjson/cJSON.h>

typedef struct sky_bench_opts {
	int warmup;     /* runs before measuring (default 2) */
	int runs;       /* measured runs, at most (default 10) */
	double max_s;   /* stop measuring after this many seconds, >= 1 run (default 60) */
	int threads;    /* OpenBLAS threads (default: the board profile's) */
	int json;       /* print one JSON object instead of text */
} sky_bench_opts;

typedef struct sky_bench_stats {
	int count;
	double min, median, p90, mean, std; /* seconds */
} sky_bench_stats;

#define SKY_BENCH_MAX_RUNS 1000

void sky_bench_opts_default(sky_bench_opts *o);
/* The argv-walking form, for a benchmark that has no option table yet (the
 * others use SKY_BENCH_OPT_TABLE and sky_bench_opt below): if argv[*i] is a
 * common option, consumes it (and its value), advances *i and returns 1;
 * returns 0 if it is not one; SKY_EINVAL (message printed) for a bad value. */
int sky_bench_common_opt(const char *cmd, int argc, char **argv, int *i, sky_bench_opts *o);
/* The common options for a getopt_long table (sky_opt.h): put
 * SKY_BENCH_OPT_TABLE before SKY_OPT_STD and pass every option the parse
 * returns to sky_bench_opt first. A benchmark's own values start at
 * SKY_BENCH_OPT_OWN. */
enum {
	SKY_BENCH_O_WARMUP = 300,
	SKY_BENCH_O_RUNS,
	SKY_BENCH_O_MAX_S,
	SKY_BENCH_O_THREADS,
	SKY_BENCH_O_JSON,
	SKY_BENCH_OPT_OWN
};
#define SKY_BENCH_OPT_TABLE                                                                \
	{"warmup", required_argument, NULL, SKY_BENCH_O_WARMUP},                          \
	    {"runs", required_argument, NULL, SKY_BENCH_O_RUNS},                          \
	    {"max-seconds", required_argument, NULL, SKY_BENCH_O_MAX_S},                  \
	    {"threads", required_argument, NULL, SKY_BENCH_O_THREADS},                    \
	{                                                                                  \
		"json", no_argument, NULL, SKY_BENCH_O_JSON                                \
	}
/* If option c (value arg, spelt name) is a common one, sets it in o and
 * returns 1; returns 0 if it is not one; SKY_EINVAL (message printed) for a
 * bad value. */
int sky_bench_opt(const char *cmd, int c, const char *name, const char *arg, sky_bench_opts *o);
/* One line of help text listing the common options. */
const char *sky_bench_common_help(void);

/* Runs fn(ctx) o->warmup times unmeasured, then up to o->runs times (at
 * least once, until o->max_s is spent), timing each run; fills st. Returns
 * 0 or the first non-zero value fn returned. */
int sky_bench_measure(const sky_bench_opts *o, int (*fn)(void *ctx), void *ctx,
		      sky_bench_stats *st);

/* Adds "<prefix>_ms" statistics as an object {count,min,median,p90,mean,std}
 * in milliseconds. */
void sky_bench_add_stats(cJSON *obj, const char *key, const sky_bench_stats *st);
/* Adds the comparability facts: machine (host name), arch, cpu (model),
 * cpu_features, kernel (variant string), threads, commit, board, date
 * (UTC), and the OPENBLAS_CORETYPE in effect. */
void sky_bench_add_env(cJSON *obj, const char *kernel, int threads);
/* Prints obj as one line of JSON to stdout. Returns 0 or SKY_ERANGE. */
int sky_bench_print(const cJSON *obj);

/* Runs one of the orchestrating scripts in tools/ (bench_fleet.sh,
 * bench_infer.sh) with argv[1..] in place of this process: found in
 * $SKY_TOOLS, else tools/ under the working directory, else beside the
 * build (<repo>/build/<board>/bin/sky); SKY_BUILD is set to that build if
 * unset. Returns 1 (with a message naming prog) only if it cannot. */
int sky_bench_script(const char *prog, const char *script, int argc, char **argv);

/* Sets the OpenBLAS thread count (openblas_set_num_threads). */
void sky_bench_set_threads(int threads);

#endif
