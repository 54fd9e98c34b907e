/* The `sky` command line: one file per command (cmd_<name>.c), each with a
 * run function taking the arguments after the command name. Commands print
 * results to stdout (JSON with --json, one object per result), diagnostics
 * to stderr, and return a process exit code (0 only on success). */
#ifndef SKY_CLI_H
#define SKY_CLI_H

#include <stddef.h>
#include <stdio.h>

typedef struct sky_cmd {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv); /* argv[0] is the command name */
} sky_cmd;

int sky_cmd_train(int argc, char **argv);
int sky_cmd_layer(int argc, char **argv);
int sky_cmd_quantize(int argc, char **argv);
int sky_cmd_eval(int argc, char **argv);
int sky_cmd_slice(int argc, char **argv);
int sky_cmd_bench(int argc, char **argv);
int sky_cmd_plan(int argc, char **argv);
int sky_cmd_sim(int argc, char **argv);
int sky_cmd_pki(int argc, char **argv);
int sky_cmd_job(int argc, char **argv);
int sky_cmd_fed(int argc, char **argv); /* cmd_fed.c: sky fed ref */
int sky_cmd_infer(int argc, char **argv);
int sky_cmd_fleet(int argc, char **argv);
int sky_cmd_tokenize(int argc, char **argv);
int sky_cmd_vocab(int argc, char **argv);
int sky_cmd_data(int argc, char **argv);
int sky_cmd_version(int argc, char **argv);

/* Parses a positive integer option value; on error prints
 * "sky <cmd>: --<opt> expects ..." and returns SKY_EINVAL. */
int sky_cli_int(const char *cmd, const char *opt, const char *text, long min, long max, long *out);
/* Same for a finite double in [min, max]. */
int sky_cli_double(const char *cmd, const char *opt, const char *text, double min, double max,
		   double *out);

/* For a command with subcommands (sky bench, job, pki, fleet): parses the
 * options before the subcommand, -h/--help and --version only (prog names
 * the command in messages, "sky job"). Returns SKY_OPT_END with *sub set to
 * the subcommand's index in argv (argc when none is given),
 * SKY_OPT_HELP (print usage to stdout, exit 0), SKY_OPT_VERSION (printed,
 * exit 0) or SKY_OPT_BAD (reported, exit 2). */
int sky_cli_sub(const char *prog, int argc, char **argv, int *sub);

/* Runs the subcommand of a command with subcommands (sky bench, job, pki,
 * fleet): options before it as sky_cli_sub, then subs[i].run with argv[0]
 * the subcommand's name. --help prints usage to stdout (exit 0); no
 * subcommand prints it to stderr (exit 2); an unknown one is named with the
 * list of known ones (exit 2). Returns the exit code. */
int sky_cli_dispatch(const char *prog, int argc, char **argv, const sky_cmd *subs, size_t n,
		     void (*print_usage)(FILE *to));

#endif
