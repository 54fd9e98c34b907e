/* sky bench planner: how long `optimal` takes to plan (the whole call:
 * validation, the exact split for the fleet's order and two seed orders,
 * local search over board orders with the default budget, evaluation; with
 * the step objective, the default, also its seeds and its simulator-driven
 * search).
 *
 * Two fleets: 1,024 seeded random boards x 1,000 BERT-base layers with
 * memory limits that bind (1 to 4 GiB against about 1 GiB per layer with
 * 16 micro-batches in flight under 1F1B), and the paper's 63 workers x 160
 * BERT-large layers. One core, no threads. */
#include "bench_util.h"
#include "sky_cli.h"

#include "sky_json.h"
#include "sky_plan.h"
#include "sky_rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct plan_ctx_b {
	const sky_fleet *f;
	const sky_job *j;
	sky_plan *p;
} plan_ctx_b;

static int run_plan(void *arg)
{
	plan_ctx_b *c = arg;
	return sky_plan_partition(c->f, c->j, SKY_ALGO_OPTIMAL, c->p, NULL);
}

static void big_fleet(sky_fleet *f, const sky_job *j, int n)
{
	sky_rng r;
	sky_rng_seed(&r, 2026);
	/* a base layer at micro-batch 8 x 128 on a fast board: ~60 ms fwd */
	double fwd = sky_model_layer_flops_fwd(&j->model) / 100e9;
	f->n = n;
	f->n_links = 0;
	for (int i = 0; i < n; i++) {
		sky_board *b = &f->board[i];
		memset(b, 0, sizeof *b);
		snprintf(b->id, sizeof b->id, "board-%04d", i);
		double slow = 1 + 7 * sky_rng_uniform(&r);
		b->fwd_s = fwd * slow;
		b->bwd_s = 2 * fwd * slow;
		b->mem_bytes = (int64_t)(1 + sky_rng_below(&r, 4)) << 30;
		b->bw_Bps = 12.5e6 * (1 + sky_rng_below(&r, 80)); /* 100 Mbit/s to 8 Gbit/s */
		b->lat_s = 0.0002 + 0.005 * sky_rng_uniform(&r);
	}
}

int sky_bench_planner(int argc, char **argv)
{
	sky_bench_opts o;
	sky_bench_opts_default(&o);
	sky_objective objective = SKY_OBJ_STEP;
	enum { O_OBJECTIVE = SKY_BENCH_OPT_OWN };
	static const struct option k_opts[] = {{"objective", required_argument, NULL, O_OBJECTIVE},
					       SKY_BENCH_OPT_TABLE,
					       SKY_OPT_STD,
					       {0}};
	sky_opt po;
	sky_opt_begin(&po, "sky bench planner", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&po)) != SKY_OPT_END;) {
		int orc = sky_bench_opt("bench planner", c, po.name, po.arg, &o);
		if (orc < 0)
			return 2;
		if (orc)
			continue;
		if (c == SKY_OPT_HELP) {
			printf("usage: sky bench planner [options]\n"
			       "time `optimal` on 1,024 boards x 1,000 layers (memory-bound) and on the "
			       "paper's 63 x 160\n"
			       "  --objective O         step (default) or bottleneck\n%s",
			       sky_bench_common_help());
			return 0;
		} else if (c == SKY_OPT_VERSION) {
			return 0;
		} else if (c == O_OBJECTIVE) {
			if (sky_objective_parse(po.arg, &objective)) {
				fprintf(stderr, "sky bench planner: --objective expects step or "
						"bottleneck\n");
				return 2;
			}
		} else {
			return 2;
		}
	}
	if (sky_opt_no_args(&po) != 0) {
		return 2;
	}
	int rc = 1;
	sky_fleet *f = malloc(sizeof *f), *pf = malloc(sizeof *pf);
	sky_plan *p = malloc(sizeof *p), *pp = malloc(sizeof *pp);
	cJSON *obj = NULL;
	if (!f || !pf || !p || !pp)
		goto exit;
	sky_job j, pj;
	sky_job_init(&j, "base");
	j.model.layers = 1000;
	j.micro_batches = 16;
	big_fleet(f, &j, 1024);
	sky_paper_job(&pj);
	sky_paper_fleet(&pj, pf);
	j.objective = pj.objective = objective;

	sky_diag d;
	sky_diag_clear(&d);
	plan_ctx_b big = {f, &j, p}, paper = {pf, &pj, pp};
	sky_bench_stats st_big, st_paper;
	if (sky_bench_measure(&o, run_plan, &big, &st_big) ||
	    sky_bench_measure(&o, run_plan, &paper, &st_paper)) {
		sky_plan_partition(f, &j, SKY_ALGO_OPTIMAL, p, &d);
		fprintf(stderr, "sky bench planner: planning failed: %s\n", d.msg);
		goto exit;
	}
	static sky_plan even;
	static sky_sim_result sim;
	int even_ok = sky_plan_partition(pf, &pj, SKY_ALGO_EVEN, &even, NULL) == 0;
	double paper_step = sky_sim_run(pp, &pj, &sim, NULL) == 0 ? sim.step_s : 0;
	double even_step = even_ok && sky_sim_run(&even, &pj, &sim, NULL) == 0 ? sim.step_s : 0;
	double big_step = sky_sim_run(p, &j, &sim, NULL) == 0 ? sim.step_s : 0;
	if (!o.json) {
		printf("optimal (objective %s), 1024 boards x 1000 layers: median %.1f ms (min %.1f, "
		       "%d runs); bottleneck %.4f s, lower bound %.4f s, %d boards used, simulated "
		       "step %.3f s\n",
		       sky_objective_name(objective), st_big.median * 1e3, st_big.min * 1e3,
		       st_big.count, p->bottleneck_s, p->lower_bound_s, p->n_stages, big_step);
		printf("optimal (objective %s), paper 63 x 160: median %.2f ms (min %.2f); "
		       "bottleneck %.4f s, %.2fx below even, %.3f of the lower bound; simulated step "
		       "%.3f s, %.2fx below even's\n",
		       sky_objective_name(objective), st_paper.median * 1e3, st_paper.min * 1e3,
		       pp->bottleneck_s, even_ok ? even.bottleneck_s / pp->bottleneck_s : 0,
		       pp->bottleneck_s / pp->lower_bound_s, paper_step,
		       paper_step > 0 ? even_step / paper_step : 0);
		rc = 0;
		goto exit;
	}
	obj = sky_json_new_object();
	if (!obj)
		goto exit;
	cJSON_AddStringToObject(obj, "bench", "planner");
	cJSON_AddStringToObject(obj, "algo", "optimal");
	cJSON_AddStringToObject(obj, "objective", sky_objective_name(objective));
	cJSON_AddNumberToObject(obj, "boards", f->n);
	cJSON_AddNumberToObject(obj, "layers", j.model.layers);
	cJSON_AddNumberToObject(obj, "micro_batches", j.micro_batches);
	sky_bench_add_stats(obj, "plan_ms", &st_big);
	cJSON_AddNumberToObject(obj, "boards_used", p->n_stages);
	cJSON_AddNumberToObject(obj, "bottleneck_s", p->bottleneck_s);
	cJSON_AddNumberToObject(obj, "lower_bound_s", p->lower_bound_s);
	cJSON_AddNumberToObject(obj, "step_s", big_step);
	sky_bench_add_stats(obj, "paper_plan_ms", &st_paper);
	cJSON_AddNumberToObject(obj, "paper_boards", pf->n);
	cJSON_AddNumberToObject(obj, "paper_layers", pj.model.layers);
	cJSON_AddNumberToObject(obj, "paper_bottleneck_s", pp->bottleneck_s);
	if (even_ok)
		cJSON_AddNumberToObject(obj, "paper_even_over_optimal",
					even.bottleneck_s / pp->bottleneck_s);
	cJSON_AddNumberToObject(obj, "paper_optimal_over_lower_bound",
				pp->bottleneck_s / pp->lower_bound_s);
	cJSON_AddNumberToObject(obj, "paper_step_s", paper_step);
	if (even_step > 0)
		cJSON_AddNumberToObject(obj, "paper_even_step_over_optimal", even_step / paper_step);
	sky_bench_add_env(obj, "planner", 1);
	rc = sky_bench_print(obj) ? 1 : 0;
exit:
	sky_json_free(obj);
	free(f);
	free(pf);
	free(p);
	free(pp);
	return rc;
}
