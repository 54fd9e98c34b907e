/* What `sky plan` and `sky sim` share: the job and fleet options. */
#ifndef SKY_CMD_PLAN_H
#define SKY_CMD_PLAN_H

#include "sky_plan.h"

typedef struct plan_cli {
	const char *fleet_path;
	int paper;
	int json;
	const char *algos; /* as given to --algo */
	const char *write_fleet; /* --write-fleet: save the fleet used here */
	const char *svg;         /* sky plan --svg: draw the plan there */
	sky_job job;
	sky_fleet *fleet;  /* heap: the struct is large */
} plan_cli;

/* Parses argv (after the command name) into c and loads the fleet. Returns
 * 0, 1 when --help was printed, or an exit code >= 2 after printing why. */
int plan_cli_parse(const char *cmd, int argc, char **argv, plan_cli *c, const char *help_extra,
		   const char *default_algos);
void plan_cli_free(plan_cli *c);
/* Prints a plan as text or as one JSON object. Returns 0 or 1. */
int plan_print(const plan_cli *c, const sky_plan *p);

#endif
