/* sky sim: plan with several algorithms and simulate one training step of
 * each; --paper runs the Sky Computing paper's experiment. */
#include "cmd_plan.h"

#include "sky_cli.h"
#include "sky_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sim_row {
	sky_algo algo;
	int rc;
	char err[256];
	double step_s, bottleneck_s, lower_bound_s, bubble;
	double blind_step_s; /* --link-blind: what the link-blind model predicts */
	int stages, step_exact, cross_site_cuts;
	double wan_bytes_per_step;
	double step_lb;
	double *busy_s; /* per stage, heap */
} sim_row;

int sky_cmd_sim(int argc, char **argv)
{
	plan_cli c;
	int rc = plan_cli_parse("sim", argc, argv, &c,
				"  --algo A,B,...        algorithms to compare (default even,sky,optimal)\n",
				"even,sky,optimal");
	sim_row rows[SKY_ALGO_COUNT * 2];
	memset(rows, 0, sizeof rows);
	int n = 0, failed = 0;
	sky_plan *p = NULL;
	sky_sim_result *r = NULL;
	if (!rc && c.svg) {
		fprintf(stderr, "sky sim: --svg draws one plan: use it with sky plan\n");
		rc = 2;
	}
	if (rc) {
		plan_cli_free(&c);
		return rc == 1 ? 0 : rc;
	}
	/* the algorithm list */
	char list[128];
	snprintf(list, sizeof list, "%s", c.algos);
	for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (n == (int)(sizeof rows / sizeof rows[0]) || sky_algo_parse(tok, &rows[n].algo)) {
			fprintf(stderr, "sky sim: --algo expects a list of even, sky, optimal; got '%s'\n",
				c.algos);
			rc = 2;
			goto exit;
		}
		n++;
	}
	if (n == 0) {
		fprintf(stderr, "sky sim: --algo is empty\n");
		rc = 2;
		goto exit;
	}
	p = malloc(sizeof *p);
	r = malloc(sizeof *r);
	if (!p || !r) {
		rc = 1;
		goto exit;
	}
	double even_step = 0;
	for (int i = 0; i < n; i++) {
		sim_row *w = &rows[i];
		sky_diag d;
		sky_diag_clear(&d);
		plan_truth t;
		w->rc = sky_plan_partition(c.fleet, &c.job, w->algo, p, &d);
		if (!w->rc)
			w->rc = plan_judge(&c, p, &t, r, &d); /* with sites priced */
		if (w->rc) {
			snprintf(w->err, sizeof w->err, "%s", d.msg);
			failed = 1;
			continue;
		}
		w->step_s = r->step_s;
		w->blind_step_s = t.blind_step_s;
		w->cross_site_cuts = p->cross_site_cuts;
		w->wan_bytes_per_step = p->wan_bytes_per_step;
		w->bubble = r->bubble;
		w->bottleneck_s = p->bottleneck_s;
		w->lower_bound_s = p->lower_bound_s;
		w->stages = p->n_stages;
		w->step_exact = p->step_exact;
		w->step_lb = p->step_lower_bound_s;
		w->busy_s = malloc(sizeof(double) * (size_t)p->n_stages);
		if (w->busy_s)
			memcpy(w->busy_s, r->busy_s, sizeof(double) * (size_t)p->n_stages);
		if (w->algo == SKY_ALGO_EVEN)
			even_step = w->step_s;
	}
	/* even is the reference for speedups; plan it if it was not asked for */
	if (even_step == 0) {
		sky_diag d;
		plan_truth t;
		if (!sky_plan_partition(c.fleet, &c.job, SKY_ALGO_EVEN, p, &d) &&
		    !plan_judge(&c, p, &t, r, &d))
			even_step = r->step_s;
	}
	if (!c.json) {
		const sky_job *j = &c.job;
		printf("one training step: %s, %d layers, seq %d, %d micro-batches of %d, %s, %s, %d "
		       "boards\n",
		       j->model.name, j->model.layers, j->model.seq, j->micro_batches, j->model.batch,
		       sky_sched_name(j->sched), sky_cost_optim_name(j->optim), c.fleet->n);
		printf("%-8s %10s %12s %12s %9s %8s %7s %6s\n", "algo", "step_s", "bottleneck_s",
		       "lower_bnd_s", "vs_bound", "speedup", "bubble", "stages");
	}
	for (int i = 0; i < n; i++) {
		sim_row *w = &rows[i];
		if (w->rc) {
			const char *name = sky_algo_name(w->algo);
			/* messages from the shortfall check already start with the name */
			int named = strncmp(w->err, name, strlen(name)) == 0;
			fprintf(stderr, "sky sim: %s%s%s\n", named ? "" : name, named ? "" : ": ",
				w->err);
			cJSON *e = c.json ? sky_json_new_object() : NULL;
			if (e) {
				char buf[1024];
				cJSON_AddStringToObject(e, "algo", name);
				cJSON_AddStringToObject(e, "error", w->err);
				if (sky_json_print(e, buf, sizeof buf) >= 0)
					printf("%s\n", buf);
				sky_json_free(e);
			}
			continue;
		}
		double speedup = even_step > 0 ? even_step / w->step_s : 0;
		if (!c.json) {
			printf("%-8s %10.3f %12.5f %12.5f %9.3f %8.3f %7.3f %6d%s\n",
			       sky_algo_name(w->algo), w->step_s, w->bottleneck_s, w->lower_bound_s,
			       w->bottleneck_s / w->lower_bound_s, speedup, w->bubble, w->stages,
			       w->algo != SKY_ALGO_OPTIMAL ? ""
			       : c.job.objective == SKY_OBJ_BOTTLENECK ? "  (objective: bottleneck)"
			       : w->step_exact ? "  (objective: step, exact)"
					       : "  (objective: step)");
			if (c.sites > 1)
				printf("%-8s %d cuts cross sites, %.1f MB between sites per step%s\n",
				       "", w->cross_site_cuts, w->wan_bytes_per_step / 1e6,
				       c.job.link_blind ? "; planned link-blind" : "");
			continue;
		}
		cJSON *o = sky_json_new_object();
		if (!o) {
			rc = 1;
			goto exit;
		}
		cJSON_AddStringToObject(o, "algo", sky_algo_name(w->algo));
		cJSON_AddNumberToObject(o, "step_s", w->step_s);
		cJSON_AddNumberToObject(o, "bottleneck_s", w->bottleneck_s);
		cJSON_AddNumberToObject(o, "lower_bound_s", w->lower_bound_s);
		cJSON_AddNumberToObject(o, "bottleneck_vs_lower_bound",
					w->bottleneck_s / w->lower_bound_s);
		if (even_step > 0)
			cJSON_AddNumberToObject(o, "speedup_vs_even", speedup);
		else
			cJSON_AddNullToObject(o, "speedup_vs_even");
		cJSON_AddNumberToObject(o, "bubble", w->bubble);
		cJSON_AddBoolToObject(o, "link_blind", c.job.link_blind);
		if (c.job.link_blind)
			cJSON_AddNumberToObject(o, "step_link_blind_s", w->blind_step_s);
		cJSON_AddNumberToObject(o, "cross_site_cuts", w->cross_site_cuts);
		cJSON_AddNumberToObject(o, "wan_bytes_per_step", w->wan_bytes_per_step);
		cJSON_AddNumberToObject(o, "stages", w->stages);
		cJSON_AddNumberToObject(o, "boards", c.fleet->n);
		cJSON_AddStringToObject(o, "model", c.job.model.name);
		cJSON_AddNumberToObject(o, "layers", c.job.model.layers);
		cJSON_AddNumberToObject(o, "micro_batches", c.job.micro_batches);
		cJSON_AddNumberToObject(o, "micro_batch", c.job.model.batch);
		cJSON_AddStringToObject(o, "schedule", sky_sched_name(c.job.sched));
		if (w->algo == SKY_ALGO_OPTIMAL) {
			cJSON_AddStringToObject(o, "objective", sky_objective_name(c.job.objective));
			if (c.job.objective == SKY_OBJ_STEP) {
				cJSON_AddBoolToObject(o, "step_exact", w->step_exact);
				cJSON_AddNumberToObject(o, "step_lower_bound_s", w->step_lb);
			}
		}
		if (w->busy_s)
			cJSON_AddItemToObject(o, "busy_s",
					      cJSON_CreateDoubleArray(w->busy_s, w->stages));
		size_t cap = 4096 + (size_t)w->stages * 32;
		char *buf = malloc(cap);
		int len = buf ? sky_json_print(o, buf, cap) : SKY_ENOMEM;
		sky_json_free(o);
		if (len >= 0)
			printf("%s\n", buf);
		free(buf);
		if (len < 0) {
			rc = 1;
			goto exit;
		}
	}
	/* optimal with replicas and its own micro-batching, after the rest */
	int want_rep = 0;
	for (int i = 0; i < n; i++)
		want_rep |= rows[i].algo == SKY_ALGO_OPTIMAL;
	if (want_rep && !c.no_replicas) {
		sky_hplan h;
		sky_diag d;
		sky_diag_clear(&d);
		int hr = plan_replicas(&c, &h, &d);
		if (hr == 1) {
			if (!c.json)
				printf("(no replicas: %s)\n", d.msg);
		} else if (hr) {
			fprintf(stderr, "sky sim: optimal with replicas: %s\n", d.msg);
			failed = 1;
		} else {
			double speedup = even_step > 0 ? even_step / h.step_s : 0;
			if (!c.json) {
				printf("%-8s %10.3f %12s %12.5f %9.3f %8.3f %7s %6d  (optimal with "
				       "replicas: %d boards, %d x %d; lower_bnd and vs_bound are the "
				       "step's)\n",
				       "replicas", h.step_s, "-", h.step_lower_bound_s,
				       h.step_s / h.step_lower_bound_s, speedup, "-", h.n_stages,
				       sky_hplan_boards(&h), h.micro_batches, h.micro_batch);
			} else {
				cJSON *o = sky_json_new_object();
				cJSON *x = o ? plan_replicas_json(&c, &h) : NULL;
				if (!o || !x) {
					sky_json_free(o);
					sky_hplan_free(&h);
					rc = 1;
					goto exit;
				}
				cJSON_AddStringToObject(o, "algo", "optimal");
				cJSON_AddNumberToObject(o, "step_s", h.step_s);
				cJSON_AddNumberToObject(o, "step_lower_bound_s", h.step_lower_bound_s);
				cJSON_AddNumberToObject(o, "step_vs_lower_bound",
							h.step_s / h.step_lower_bound_s);
				if (even_step > 0)
					cJSON_AddNumberToObject(o, "speedup_vs_even", speedup);
				else
					cJSON_AddNullToObject(o, "speedup_vs_even");
				cJSON_AddNumberToObject(o, "stages", h.n_stages);
				cJSON_AddNumberToObject(o, "boards", c.fleet->n);
				cJSON_AddItemToObject(o, "replicas", x);
				size_t cap = 4096 + (size_t)sky_hplan_boards(&h) * 512;
				char *buf = malloc(cap);
				int len = buf ? sky_json_print(o, buf, cap) : SKY_ENOMEM;
				sky_json_free(o);
				if (len >= 0)
					printf("%s\n", buf);
				free(buf);
				if (len < 0) {
					sky_hplan_free(&h);
					rc = 1;
					goto exit;
				}
			}
			sky_hplan_free(&h);
		}
	}
	rc = failed;
exit:
	for (int i = 0; i < n; i++)
		free(rows[i].busy_s);
	free(p);
	free(r);
	plan_cli_free(&c);
	return rc;
}
