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
	int sites;               /* distinct sites among the fleet's boards */
	int no_replicas;         /* --no-replicas: pipeline plans only, as before replicas */
	const sky_hplan *hybrid; /* sky plan: the plan with replicas to print too, or NULL */
	sky_job job;
	sky_fleet *fleet;  /* heap: the struct is large */
} plan_cli;

/* Parses argv (after the command name) into c and loads the fleet. Returns
 * 0, 1 when --help was printed, or an exit code >= 2 after printing why. */
int plan_cli_parse(const char *cmd, int argc, char **argv, plan_cli *c, const char *help_extra,
		   const char *default_algos);
void plan_cli_free(plan_cli *c);
/* A plan judged with sites priced (sky_plan.h), whatever --link-blind chose it. */
typedef struct plan_truth {
	double step_s;       /* its simulated step on the fleet as it is */
	double blind_step_s; /* with --link-blind: the step the link-blind model predicts; else 0 */
} plan_truth;
/* Re-evaluates p with sites priced (when the job was planned link-blind;
 * p's fields then describe the fleet as it is) and simulates its step into
 * t and, when not NULL, r. Returns 0 or the evaluation's / simulator's code
 * with d saying why. */
int plan_judge(const plan_cli *c, sky_plan *p, plan_truth *t, sky_sim_result *r, sky_diag *d);
/* `optimal` with replicas for the job (sky_plan_hybrid) into h (allocated
 * here: sky_hplan_free it). Returns 0 when planned, 1 when replicas do not
 * apply (--no-replicas, or the job or fleet is not one they are planned
 * for: d says why), or the planner's error code (d says why). */
int plan_replicas(const plan_cli *c, sky_hplan *h, sky_diag *d);
/* The hybrid plan's stages and replicas as text lines, or as a JSON object. */
void plan_replicas_text(const plan_cli *c, const sky_hplan *h);
struct cJSON;
struct cJSON *plan_replicas_json(const plan_cli *c, const sky_hplan *h);
/* Prints a plan as text or as one JSON object (with c->hybrid, its
 * replicas too). Returns 0 or 1. */
int plan_print(const plan_cli *c, const sky_plan *p, const plan_truth *t);

#endif
