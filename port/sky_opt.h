/* Option parsing for every command line (sky's commands, skyd, skyplan):
 * getopt_long underneath, so `--opt=value` and `--opt value` both work,
 * with one table of options per command and the same errors everywhere.
 *
 *   static const struct option k_opts[] = {
 *   	{"steps", required_argument, NULL, OPT_STEPS}, SKY_OPT_STD, {0}};
 *   sky_opt p;
 *   sky_opt_begin(&p, "sky train", argc, argv, k_opts, 0);
 *   for (int c; (c = sky_opt_next(&p)) != SKY_OPT_END;) switch (c) { ... }
 *
 * argv[0] is the command's name; options and positional arguments may mix
 * (getopt_long permutes), positionals are argv[p.next ..] after the loop.
 * Not reentrant (getopt's globals); each begin resets the parse. */
#ifndef SKY_OPT_H
#define SKY_OPT_H

#include <getopt.h>

enum {
	SKY_OPT_END = -1,      /* no more options */
	SKY_OPT_HELP = 'h',    /* -h or --help: print usage to stdout, exit 0 */
	SKY_OPT_BAD = '?',     /* unknown option, missing or extra value: message
				* printed to stderr, exit 2 */
	SKY_OPT_VERSION = 256, /* --version: version printed to stdout, exit 0 */
	SKY_OPT_FIRST = 257    /* first value free for a command's own options */
};

/* --help and --version, for the end of every table */
#define SKY_OPT_STD                                                                         \
	{"help", no_argument, NULL, SKY_OPT_HELP},                                         \
	{                                                                                  \
		"version", no_argument, NULL, SKY_OPT_VERSION                              \
	}

typedef struct sky_opt {
	const char *prog;           /* "sky train", "skyd": prefixes every message */
	int argc;
	char **argv;
	const struct option *opts;
	const char *shortopts;      /* ":h" or "+:h" */
	const char *arg;            /* the current option's value, or NULL */
	char name[48];              /* the current option as "--name" */
	int next;                   /* after SKY_OPT_END: index of the first positional */
} sky_opt;

/* Starts a parse of argv[1..argc). stop_at_positional: leave everything
 * from the first non-option on (a command that passes the rest on). */
void sky_opt_begin(sky_opt *p, const char *prog, int argc, char **argv,
		   const struct option *opts, int stop_at_positional);
/* The next option's val from the table (p->arg holds its value), or one of
 * SKY_OPT_END, SKY_OPT_HELP, SKY_OPT_VERSION (already printed), SKY_OPT_BAD
 * (already reported as "<prog>: unknown option '--x' (<prog> --help)",
 * "<prog>: --x needs a value" or "<prog>: --x takes no value"). */
int sky_opt_next(sky_opt *p);
/* After SKY_OPT_END, for a command that takes no positional arguments:
 * returns 0, or says "<prog>: unexpected argument 'X' (<prog> --help)" on
 * stderr and returns SKY_EINVAL. */
int sky_opt_no_args(const sky_opt *p);

#endif
