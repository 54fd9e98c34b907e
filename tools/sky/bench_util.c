#include "bench_util.h"

#include "sky_blas_core.h"

#include "sky_cli.h"
#include "sky_clock.h"
#include "sky_cpu.h"
#include "sky_err.h"
#include "sky_file.h"
#include "sky_json.h"
#include "sky_version.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sky_bench_opts_default(sky_bench_opts *o)
{
	o->warmup = 2;
	o->runs = 10;
	o->max_s = 60.0;
	o->threads = 1;
	o->json = 0;
}

const char *sky_bench_common_help(void)
{
	return "  --warmup N        unmeasured runs first (default 2)\n"
	       "  --runs N          measured runs, at most (default 10)\n"
	       "  --max-seconds S   stop measuring after S seconds, after at least one run (default 60)\n"
	       "  --threads N       OpenBLAS threads (default 1)\n"
	       "  --json            one JSON object on stdout\n";
}

int sky_bench_common_opt(const char *cmd, int argc, char **argv, int *i, sky_bench_opts *o)
{
	const char *a = argv[*i];
	const char *val = *i + 1 < argc ? argv[*i + 1] : NULL;
	long n;
	if (strcmp(a, "--json") == 0) {
		o->json = 1;
		*i += 1;
		return 1;
	}
	if (strcmp(a, "--warmup") == 0) {
		if (sky_cli_int(cmd, a, val, 0, 1000, &n))
			return SKY_EINVAL;
		o->warmup = (int)n;
	} else if (strcmp(a, "--runs") == 0) {
		if (sky_cli_int(cmd, a, val, 1, SKY_BENCH_MAX_RUNS, &n))
			return SKY_EINVAL;
		o->runs = (int)n;
	} else if (strcmp(a, "--threads") == 0) {
		if (sky_cli_int(cmd, a, val, 1, 256, &n))
			return SKY_EINVAL;
		o->threads = (int)n;
	} else if (strcmp(a, "--max-seconds") == 0) {
		if (sky_cli_double(cmd, a, val, 0.001, 86400, &o->max_s))
			return SKY_EINVAL;
	} else {
		return 0;
	}
	*i += 2;
	return 1;
}

int sky_bench_opt(const char *cmd, int c, const char *name, const char *arg, sky_bench_opts *o)
{
	long n;
	switch (c) {
	case SKY_BENCH_O_JSON:
		o->json = 1;
		return 1;
	case SKY_BENCH_O_WARMUP:
		if (sky_cli_int(cmd, name, arg, 0, 1000, &n))
			return SKY_EINVAL;
		o->warmup = (int)n;
		return 1;
	case SKY_BENCH_O_RUNS:
		if (sky_cli_int(cmd, name, arg, 1, SKY_BENCH_MAX_RUNS, &n))
			return SKY_EINVAL;
		o->runs = (int)n;
		return 1;
	case SKY_BENCH_O_THREADS:
		if (sky_cli_int(cmd, name, arg, 1, 256, &n))
			return SKY_EINVAL;
		o->threads = (int)n;
		return 1;
	case SKY_BENCH_O_MAX_S:
		if (sky_cli_double(cmd, name, arg, 0.001, 86400, &o->max_s))
			return SKY_EINVAL;
		return 1;
	default:
		return 0;
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int sky_bench_measure(const sky_bench_opts *o, int (*fn)(void *ctx), void *ctx,
		      sky_bench_stats *st)
{
	static double samples[SKY_BENCH_MAX_RUNS];
	for (int i = 0; i < o->warmup; i++) {
		int rc = fn(ctx);
		if (rc)
			return rc;
	}
	int n = 0;
	int runs = o->runs < SKY_BENCH_MAX_RUNS ? o->runs : SKY_BENCH_MAX_RUNS;
	double start = sky_clock_s();
	while (n < runs && (n == 0 || sky_clock_s() - start < o->max_s)) {
		double t0 = sky_clock_s();
		int rc = fn(ctx);
		if (rc)
			return rc;
		samples[n++] = sky_clock_s() - t0;
	}
	double sum = 0, sq = 0;
	for (int i = 0; i < n; i++)
		sum += samples[i];
	double mean = sum / n;
	for (int i = 0; i < n; i++)
		sq += (samples[i] - mean) * (samples[i] - mean);
	qsort(samples, (size_t)n, sizeof samples[0], cmp_double);
	st->count = n;
	st->min = samples[0];
	st->median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
	st->p90 = samples[(int)ceil(0.9 * n) - 1];
	st->mean = mean;
	st->std = n > 1 ? sqrt(sq / (n - 1)) : 0.0;
	return 0;
}

void sky_bench_add_stats(cJSON *obj, const char *key, const sky_bench_stats *st)
{
	cJSON *s = cJSON_AddObjectToObject(obj, key);
	if (!s)
		return;
	cJSON_AddNumberToObject(s, "count", st->count);
	cJSON_AddNumberToObject(s, "min", st->min * 1e3);
	cJSON_AddNumberToObject(s, "median", st->median * 1e3);
	cJSON_AddNumberToObject(s, "p90", st->p90 * 1e3);
	cJSON_AddNumberToObject(s, "mean", st->mean * 1e3);
	cJSON_AddNumberToObject(s, "std", st->std * 1e3);
}

void sky_bench_add_env(cJSON *obj, const char *kernel, int threads)
{
	char buf[256];
	sky_host_name(buf, sizeof buf);
	cJSON_AddStringToObject(obj, "machine", buf);
	cJSON_AddStringToObject(obj, "arch", sky_cpu_arch());
	sky_cpu_model(buf, sizeof buf);
	cJSON_AddStringToObject(obj, "cpu", buf);
	sky_cpu_features_str(sky_cpu_get_features(), buf, sizeof buf);
	cJSON_AddStringToObject(obj, "cpu_features", buf);
	cJSON_AddStringToObject(obj, "kernel", kernel);
	cJSON_AddNumberToObject(obj, "threads", threads);
	const char *core = getenv("OPENBLAS_CORETYPE");
	cJSON_AddStringToObject(obj, "openblas_coretype", core ? core : "");
	/* the kernels OpenBLAS really runs, and the best this CPU takes: an
	 * efficiency against sgemm cannot show a slow BLAS, these can */
	sky_cpu_desc d;
	sky_cpu_describe(&d);
	cJSON_AddStringToObject(obj, "blas_core", sky_blas_core_running());
	cJSON_AddStringToObject(obj, "blas_core_best", sky_blas_core_for(&d));
	cJSON_AddNumberToObject(obj, "cpu_peak_gflops", sky_cpu_peak_gflops(&d) * threads);
	sky_cpu_peak_explain(&d, threads, buf, sizeof buf);
	cJSON_AddStringToObject(obj, "cpu_peak_from", buf);
	cJSON_AddStringToObject(obj, "board", SKY_BOARD);
	cJSON_AddStringToObject(obj, "commit", SKY_VERSION);
	sky_clock_format_utc(sky_clock_unix(), buf, sizeof buf);
	cJSON_AddStringToObject(obj, "date", buf);
}

int sky_bench_print(const cJSON *obj)
{
	static char out[1 << 16];
	int n = sky_json_print(obj, out, sizeof out);
	if (n < 0)
		return n;
	puts(out);
	return 0;
}

void sky_bench_set_threads(int threads) { openblas_set_num_threads(threads); }

/* The script's path: $SKY_TOOLS, else tools/ under the working directory,
 * else beside the build. build gets <repo>/build/<board> ("" if unknown). */
static int find_script(const char *name, char *out, size_t cap, char *build, size_t bcap)
{
	char bin[1024];
	build[0] = 0;
	if (sky_file_exe_dir(bin, sizeof bin) == 0) {
		char *s = strrchr(bin, '/'); /* .../build/<board>/bin -> .../build/<board> */
		if (s) {
			*s = 0;
			snprintf(build, bcap, "%s", bin);
		}
	}
	const char *env = getenv("SKY_TOOLS");
	if (env) {
		snprintf(out, cap, "%s/%s", env, name);
		return sky_file_is_exec(out) ? 0 : SKY_ENOTFOUND;
	}
	snprintf(out, cap, "tools/%s", name);
	if (sky_file_is_exec(out))
		return 0;
	if (build[0]) {
		snprintf(out, cap, "%s/../../tools/%s", build, name);
		if (sky_file_is_exec(out))
			return 0;
	}
	return SKY_ENOTFOUND;
}

int sky_bench_script(const char *prog, const char *script, int argc, char **argv)
{
	char path[1200], build[1024];
	if (find_script(script, path, sizeof path, build, sizeof build) != 0) {
		fprintf(stderr, "%s: tools/%s not found (run from the repository, or set SKY_TOOLS "
				"to its tools/ directory)\n",
			prog, script);
		return 1;
	}
	if (build[0] && !getenv("SKY_BUILD"))
		setenv("SKY_BUILD", build, 1);
	char **args = calloc((size_t)argc + 2, sizeof *args);
	if (!args)
		return 1;
	args[0] = path;
	for (int i = 1; i < argc; i++)
		args[i] = argv[i];
	sky_file_exec(path, args);
	fprintf(stderr, "%s: cannot run %s\n", prog, path);
	free(args);
	return 1;
}
