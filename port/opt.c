#include "sky_opt.h"

#include "sky_err.h"
#include "sky_version.h"

#include <stdio.h>
#include <string.h>

#ifndef SKY_BOARD
#define SKY_BOARD "host"
#endif

void sky_opt_begin(sky_opt *p, const char *prog, int argc, char **argv,
		   const struct option *opts, int stop_at_positional)
{
	memset(p, 0, sizeof *p);
	p->prog = prog;
	p->argc = argc;
	p->argv = argv;
	p->opts = opts;
	p->shortopts = stop_at_positional ? "+:h" : ":h";
	p->next = argc;
	optind = 0; /* glibc: start over, re-reading shortopts */
	opterr = 0; /* our messages, not getopt's */
}

/* The table entry whose val is v, or NULL. */
static const struct option *by_val(const sky_opt *p, int v)
{
	for (const struct option *o = p->opts; o->name; o++)
		if (o->val == v && !o->flag)
			return o;
	return NULL;
}

int sky_opt_next(sky_opt *p)
{
	int idx = -1;
	int c = getopt_long(p->argc, p->argv, p->shortopts, p->opts, &idx);
	const char *given = optind > 0 && optind <= p->argc ? p->argv[optind - 1] : "";
	p->arg = NULL;
	p->name[0] = '\0';
	if (c == -1) {
		p->next = optind;
		return SKY_OPT_END;
	}
	if (c == ':') {
		const struct option *o = by_val(p, optopt);
		if (o)
			fprintf(stderr, "%s: --%s needs a value (%s --help)\n", p->prog, o->name,
				p->prog);
		else
			fprintf(stderr, "%s: %s needs a value (%s --help)\n", p->prog, given,
				p->prog);
		return SKY_OPT_BAD;
	}
	if (c == '?') {
		const struct option *o = optopt ? by_val(p, optopt) : NULL;
		if (o && o->has_arg == no_argument)
			fprintf(stderr, "%s: --%s takes no value, got '%s'\n", p->prog, o->name,
				given);
		else if (optopt && optopt < 256)
			fprintf(stderr, "%s: unknown option '-%c' (%s --help)\n", p->prog, optopt,
				p->prog);
		else
			fprintf(stderr, "%s: unknown option '%s' (%s --help)\n", p->prog, given,
				p->prog);
		return SKY_OPT_BAD;
	}
	if (c == SKY_OPT_VERSION) {
		printf("%s %s (board %s)\n", p->prog, SKY_VERSION, SKY_BOARD);
		return c;
	}
	if (idx >= 0)
		snprintf(p->name, sizeof p->name, "--%s", p->opts[idx].name);
	else
		snprintf(p->name, sizeof p->name, "-%c", c);
	p->arg = optarg;
	return c;
}

int sky_opt_no_args(const sky_opt *p)
{
	if (p->next >= p->argc)
		return 0;
	fprintf(stderr, "%s: unexpected argument '%s' (%s --help)\n", p->prog, p->argv[p->next],
		p->prog);
	return SKY_EINVAL;
}
