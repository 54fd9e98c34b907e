/* sky: the command line for boards and fleets. `sky help` lists commands. */
#include "sky_cli.h"

#include "sky_blas_core.h"

#include "sky_err.h"
#include "sky_log.h"
#include "sky_opt.h"
#include "sky_version.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const sky_cmd k_cmds[] = {
	{"train", "train a model on one board on the synthetic task", sky_cmd_train},
	{"layer", "run one encoder layer on given tensors (check a board)", sky_cmd_layer},
	{"quantize", "int8 encoder layers from fp32 weights, calibrated (--calib N)", sky_cmd_quantize},
	{"eval", "held-out accuracy of saved weights, fp32 or int8 (--precision)", sky_cmd_eval},
	{"slice", "cut a serving stage's slice from an int8 model (--first/--last)", sky_cmd_slice},
	{"bench", "benchmark a layer, the planner or the probe (--json)", sky_cmd_bench},
	{"plan", "split a model over a fleet: even, sky or optimal (--json)", sky_cmd_plan},
	{"sim", "simulate a training step of each algorithm's plan; --paper (--json)", sky_cmd_sim},
	{"pki", "fleet CA, broker config and ACL, claim tokens, plan signatures", sky_cmd_pki},
	{"job", "submit a job to skyplan over MQTT and follow its plan (--wait)", sky_cmd_job},
	{"fed", "a federated job computed in one process (ref: the tests' reference)", sky_cmd_fed},
	{"infer", "ask a serving job for logits (--tokens or --input; --json)", sky_cmd_infer},
	{"fleet", "fleet status as skyplan sees it: boards, liveness, assignments", sky_cmd_fleet},
	{"tokenize", "BERT token ids of a text or pair, as Hugging Face gives (--json)", sky_cmd_tokenize},
	{"vocab", "build a WordPiece vocab.txt from training text", sky_cmd_vocab},
	{"data", "prepare labelled text as a data set (.skyds), and show one (info)", sky_cmd_data},
	{"version", "print the version and build facts", sky_cmd_version},
};
#define N_CMDS (sizeof k_cmds / sizeof k_cmds[0])

static void usage(FILE *to)
{
	fprintf(to, "usage: sky <command> [options]   (sky <command> --help for its options)\n\n"
		    "commands:\n");
	for (size_t i = 0; i < N_CMDS; i++)
		fprintf(to, "  %-10s %s\n", k_cmds[i].name, k_cmds[i].summary);
	fprintf(to, "\nenvironment: SKY_LOG=error|warn|info|debug, SKY_PROFILE=board profile file,\n"
		    "SKY_CPU_DISABLE=amx,avx512vnni,avx512,avx2,dotprod,neon to force slower kernels\n");
}

int sky_cli_int(const char *cmd, const char *opt, const char *text, long min, long max, long *out)
{
	char *end = NULL;
	errno = 0;
	long v = text ? strtol(text, &end, 10) : 0;
	if (!text || end == text || *end != '\0' || errno != 0 || v < min || v > max) {
		fprintf(stderr, "sky %s: %s expects an integer from %ld to %ld, got '%s'\n", cmd, opt,
			min, max, text ? text : "");
		return SKY_EINVAL;
	}
	*out = v;
	return 0;
}

int sky_cli_double(const char *cmd, const char *opt, const char *text, double min, double max,
		   double *out)
{
	char *end = NULL;
	errno = 0;
	double v = text ? strtod(text, &end) : 0;
	if (!text || end == text || *end != '\0' || errno != 0 || !isfinite(v) || v < min ||
	    v > max) {
		fprintf(stderr, "sky %s: %s expects a number from %g to %g, got '%s'\n", cmd, opt, min,
			max, text ? text : "");
		return SKY_EINVAL;
	}
	*out = v;
	return 0;
}

int sky_cli_sub(const char *prog, int argc, char **argv, int *sub)
{
	static const struct option k_opts[] = {SKY_OPT_STD, {0}};
	sky_opt p;
	sky_opt_begin(&p, prog, argc, argv, k_opts, 1);
	int c = sky_opt_next(&p);
	*sub = p.next;
	return c;
}

int sky_cli_dispatch(const char *prog, int argc, char **argv, const sky_cmd *subs, size_t n,
		     void (*print_usage)(FILE *to))
{
	int sub;
	switch (sky_cli_sub(prog, argc, argv, &sub)) {
	case SKY_OPT_HELP:
		print_usage(stdout);
		return 0;
	case SKY_OPT_VERSION:
		return 0;
	case SKY_OPT_END:
		break;
	default:
		return 2;
	}
	if (sub >= argc) {
		print_usage(stderr);
		return 2;
	}
	for (size_t i = 0; i < n; i++)
		if (strcmp(argv[sub], subs[i].name) == 0)
			return subs[i].run(argc - sub, argv + sub);
	fprintf(stderr, "%s: unknown subcommand '%s' (", prog, argv[sub]);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, "%s%s", i ? ", " : "", subs[i].name);
	fprintf(stderr, ")\n");
	return 2;
}

int sky_cmd_version(int argc, char **argv)
{
	char core[128];
	sky_cpu_desc d;
	sky_cpu_describe(&d);
	sky_blas_core_describe(core, sizeof core);
	printf("sky %s (board %s)\n", SKY_VERSION, SKY_BOARD);
	printf("openblas core: %s\n", core);
	printf("cpu takes: %s; fp32 peak %.1f GFLOP/s per core (estimate)\n", sky_blas_core_for(&d),
	       sky_cpu_peak_gflops(&d));
	return 0;
}

int main(int argc, char **argv)
{
	sky_log_set_name("sky");
	sky_blas_core_ensure(argv); /* may run sky again with a better OpenBLAS core */
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "--version") == 0)
		return sky_cmd_version(argc - 1, argv + 1);
	for (size_t i = 0; i < N_CMDS; i++) {
		if (strcmp(argv[1], k_cmds[i].name) == 0)
			return k_cmds[i].run(argc - 1, argv + 1);
	}
	fprintf(stderr, "sky: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
