/* sky plan: split a model over a fleet and print the plan. */
#include "cmd_plan.h"

#include "sky_cli.h"
#include "sky_file.h"
#include "sky_opt.h"
#include "sky_json.h"
#include "sky_svg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char k_paper_what[] =
	"The Sky Computing paper's 63 workers (arXiv 2202.11836). Slowdowns: "
	"hpcaitech/SkyComputing experiment/config.py, 1 + numpy default_rng(35).integers(1, 7) "
	"for workers 1..63. Times: a BERT-large layer at micro-batch 1 x 128 tokens as measured "
	"by sky bench layer (fp32, one thread, 2026-11-30: forward 29.3 ms, backward 53.8 ms) "
	"times the slowdown. 4 GiB per board, 1 Gbit/s and 0.5 ms to the broker.";

static void usage(const char *cmd, FILE *to, const char *extra)
{
	fprintf(to,
		"usage: sky %s (--fleet F.json | --paper) [options]\n\n"
		"  --fleet F.json        boards: measured layer times, memory, link (format in README)\n"
		"  --paper               the Sky Computing paper's 63 workers and job (BERT-large,\n"
		"                        160 layers, batch 32 as 32 micro-batches, seq 128, Adam, 1F1B)\n"
		"  --model NAME          preset (%s; default base, large with --paper)\n"
		"  --layers N            encoder layers (default: the preset's)\n"
		"  --seq N               tokens per sequence (default: the preset's)\n"
		"  --micro-batch N       sequences per micro-batch (default: the preset's batch)\n"
		"  --micro-batches M     micro-batches per step (default 8)\n"
		"  --optimizer O         sgd, momentum or adam (default adam)\n"
		"  --schedule S          gpipe or 1f1b (default 1f1b)\n"
		"  --precision P         fp32 or int8: which measured times to use (default fp32)\n"
		"  --keep-order          optimal: keep the fleet's board order\n"
		"  --order-evals N       optimal: board orders local search may try (default 64)\n"
		"  --objective O         optimal: minimise the simulated step (default: fill, steady\n"
		"                        state and drain of the schedule; exact up to 8 boards) or\n"
		"                        the bottleneck (the slowest stage, exact per board order)\n"
		"  --link-blind          plan as if every board were in one site (Sky before sites:\n"
		"                        each cut charged with the boards' own links only); the\n"
		"                        figures shown are still the fleet's, sites and all\n"
		"  --data-owner B        board B's data stays on it: a U-shaped plan (B holds the\n"
		"                        first and the last stage; even or optimal)\n"
		"  --no-replicas         optimal: pipeline plans only (no stage replicas, the job's\n"
		"                        micro-batching), as before replicas\n"
		"  --write-fleet F.json  also save the fleet planned for (e.g. the paper's) as a file\n"
		"%s"
		"  --json                machine-readable output\n"
		"  -h, --help; --version; an option's value follows a space or =\n",
		cmd, sky_model_preset_names(), extra);
}

enum {
	O_FLEET = SKY_OPT_FIRST, O_WRITE_FLEET, O_MODEL, O_ALGO, O_OBJECTIVE, O_OPTIMIZER,
	O_SCHEDULE, O_PRECISION, O_LAYERS, O_SEQ, O_MICRO_BATCH, O_MICRO_BATCHES, O_ORDER_EVALS,
	O_SVG, O_JSON, O_PAPER, O_KEEP_ORDER, O_LINK_BLIND, O_OWNER, O_NO_REPLICAS
};

static const struct option k_opts[] = {
	{"fleet", required_argument, NULL, O_FLEET},
	{"write-fleet", required_argument, NULL, O_WRITE_FLEET},
	{"model", required_argument, NULL, O_MODEL},
	{"algo", required_argument, NULL, O_ALGO},
	{"objective", required_argument, NULL, O_OBJECTIVE},
	{"optimizer", required_argument, NULL, O_OPTIMIZER},
	{"schedule", required_argument, NULL, O_SCHEDULE},
	{"precision", required_argument, NULL, O_PRECISION},
	{"layers", required_argument, NULL, O_LAYERS},
	{"seq", required_argument, NULL, O_SEQ},
	{"micro-batch", required_argument, NULL, O_MICRO_BATCH},
	{"micro-batches", required_argument, NULL, O_MICRO_BATCHES},
	{"order-evals", required_argument, NULL, O_ORDER_EVALS},
	{"svg", required_argument, NULL, O_SVG},
	{"json", no_argument, NULL, O_JSON},
	{"paper", no_argument, NULL, O_PAPER},
	{"keep-order", no_argument, NULL, O_KEEP_ORDER},
	{"link-blind", no_argument, NULL, O_LINK_BLIND},
	{"data-owner", required_argument, NULL, O_OWNER},
	{"no-replicas", no_argument, NULL, O_NO_REPLICAS},
	SKY_OPT_STD,
	{0}};

int plan_cli_parse(const char *cmd, int argc, char **argv, plan_cli *c, const char *help_extra,
		   const char *default_algos)
{
	memset(c, 0, sizeof *c);
	c->algos = default_algos;
	const char *model = NULL, *optim = NULL, *sched = NULL, *prec = NULL, *obj = NULL;
	const char *owner = NULL;
	long layers = 0, seq = 0, mb = 0, m = 0, evals = -1;
	int keep = 0, blind = 0;
	char prog[32];
	snprintf(prog, sizeof prog, "sky %s", cmd);
	sky_opt p;
	sky_opt_begin(&p, prog, argc, argv, k_opts, 0);
	for (int o; (o = sky_opt_next(&p)) != SKY_OPT_END;) {
		const char *a = p.name, *v = p.arg;
		switch (o) {
		case SKY_OPT_HELP:
			usage(cmd, stdout, help_extra);
			return 1;
		case SKY_OPT_VERSION:
			return 1;
		case O_JSON:
			c->json = 1;
			break;
		case O_PAPER:
			c->paper = 1;
			break;
		case O_KEEP_ORDER:
			keep = 1;
			break;
		case O_LINK_BLIND:
			blind = 1;
			break;
		case O_NO_REPLICAS:
			c->no_replicas = 1;
			break;
		case O_OWNER:
			owner = v;
			break;
		case O_FLEET:
			c->fleet_path = v;
			break;
		case O_SVG:
			c->svg = v;
			break;
		case O_WRITE_FLEET:
			c->write_fleet = v;
			break;
		case O_MODEL:
			model = v;
			break;
		case O_ALGO:
			c->algos = v;
			break;
		case O_OBJECTIVE:
			obj = v;
			break;
		case O_OPTIMIZER:
			optim = v;
			break;
		case O_SCHEDULE:
			sched = v;
			break;
		case O_PRECISION:
			prec = v;
			break;
		case O_LAYERS:
			if (sky_cli_int(cmd, a, v, 1, SKY_PLAN_MAX_LAYERS, &layers))
				return 2;
			break;
		case O_SEQ:
			if (sky_cli_int(cmd, a, v, 1, 1 << 16, &seq))
				return 2;
			break;
		case O_MICRO_BATCH:
			if (sky_cli_int(cmd, a, v, 1, 1 << 16, &mb))
				return 2;
			break;
		case O_MICRO_BATCHES:
			if (sky_cli_int(cmd, a, v, 1, SKY_PLAN_MAX_MICRO, &m))
				return 2;
			break;
		case O_ORDER_EVALS:
			if (sky_cli_int(cmd, a, v, 0, 1000000, &evals))
				return 2;
			break;
		default:
			return 2;
		}
	}
	if (sky_opt_no_args(&p) != 0) {
		return 2;
	}
	if (!c->paper == !c->fleet_path) {
		fprintf(stderr, "sky %s: give exactly one of --fleet F.json and --paper\n", cmd);
		usage(cmd, stderr, help_extra);
		return 2;
	}
	sky_job *j = &c->job;
	if (c->paper && !model) {
		sky_paper_job(j);
	} else if (sky_job_init(j, model ? model : "base")) {
		fprintf(stderr, "sky %s: unknown model '%s' (%s)\n", cmd, model,
			sky_model_preset_names());
		return 2;
	}
	if (layers)
		j->model.layers = (int)layers;
	if (seq)
		j->model.seq = (int)seq;
	if (mb)
		j->model.batch = (int)mb;
	if (m)
		j->micro_batches = (int)m;
	if (evals >= 0)
		j->order_evals = (int)evals;
	j->keep_order = keep;
	j->link_blind = blind;
	if (owner && (!owner[0] || strlen(owner) >= sizeof j->owner)) {
		fprintf(stderr, "sky %s: --data-owner expects a board id\n", cmd);
		return 2;
	}
	if (owner)
		snprintf(j->owner, sizeof j->owner, "%s", owner);
	if (optim && sky_cost_optim_parse(optim, &j->optim)) {
		fprintf(stderr, "sky %s: --optimizer expects sgd, momentum or adam, got '%s'\n", cmd,
			optim);
		return 2;
	}
	if (obj && sky_objective_parse(obj, &j->objective)) {
		fprintf(stderr, "sky %s: --objective expects bottleneck or step, got '%s'\n", cmd,
			obj);
		return 2;
	}
	if (sched && sky_sched_parse(sched, &j->sched)) {
		fprintf(stderr, "sky %s: --schedule expects gpipe or 1f1b, got '%s'\n", cmd, sched);
		return 2;
	}
	if (prec) {
		if (strcmp(prec, "fp32") == 0)
			j->prec = SKY_PREC_FP32;
		else if (strcmp(prec, "int8") == 0)
			j->prec = SKY_PREC_INT8;
		else {
			fprintf(stderr, "sky %s: --precision expects fp32 or int8, got '%s'\n", cmd,
				prec);
			return 2;
		}
	}
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_job_validate(j, &d)) {
		fprintf(stderr, "sky %s: %s\n", cmd, d.msg);
		return 2;
	}
	c->fleet = malloc(sizeof *c->fleet);
	if (!c->fleet) {
		fprintf(stderr, "sky %s: out of memory\n", cmd);
		return 2;
	}
	if (c->paper) {
		sky_paper_fleet(j, c->fleet);
	} else if (sky_fleet_load(c->fleet_path, c->fleet, &d)) {
		fprintf(stderr, "sky %s: %s\n", cmd, d.msg);
		return 2;
	}
	/* sites, and the pairs the fleet names no path for */
	const sky_fleet *f = c->fleet;
	for (int i = 0; i < f->n; i++) {
		int seen = 0;
		for (int k = 0; k < i && !seen; k++)
			seen = sky_site_eq(f->board[k].site, f->board[i].site);
		if (seen)
			continue;
		c->sites++;
		for (int k = 0; k < i; k++) {
			double bw, lat;
			int first = 1;
			for (int q = 0; q < k && first; q++)
				first = !sky_site_eq(f->board[q].site, f->board[k].site);
			if (first && sky_fleet_site_path(f, f->board[k].site, f->board[i].site, &bw,
							 &lat) == SKY_ENOTFOUND)
				fprintf(stderr,
					"sky %s: warning: the fleet names no link between sites %s and "
					"%s (nor both to the core): cuts between them are charged as "
					"within a site\n",
					cmd, sky_site_name(f->board[k].site),
					sky_site_name(f->board[i].site));
		}
	}
	if (c->write_fleet) {
		size_t cap = 4096 + (size_t)c->fleet->n * 512;
		char *buf = malloc(cap);
		int len = buf ? sky_fleet_write(c->fleet,
						c->paper ? k_paper_what : NULL,
						buf, cap)
			      : SKY_ENOMEM;
		int wrc = len >= 0 ? sky_file_write(c->write_fleet, buf, (size_t)len, 0644) : len;
		free(buf);
		if (wrc) {
			fprintf(stderr, "sky %s: cannot write %s (%s)\n", cmd, c->write_fleet,
				sky_strerror(wrc));
			return 2;
		}
	}
	return 0;
}

void plan_cli_free(plan_cli *c)
{
	free(c->fleet);
	c->fleet = NULL;
}

static const char *block(int unit) { return unit % 2 ? "ffn" : "attn"; }

int plan_judge(const plan_cli *c, sky_plan *p, plan_truth *t, sky_sim_result *r, sky_diag *d)
{
	static sky_sim_result own; /* when the caller does not want it (sky is one thread) */
	sky_sim_result *res = r ? r : &own;
	sky_job aware = c->job;
	int rc;
	memset(t, 0, sizeof *t);
	if (c->job.link_blind) {
		if ((rc = sky_sim_run(p, &c->job, res, d)))
			return rc;
		t->blind_step_s = res->step_s;
		aware.link_blind = 0;
		if ((rc = sky_plan_evaluate(c->fleet, &aware, p, d)))
			return rc;
	}
	if ((rc = sky_sim_run(p, &aware, res, d)))
		return rc;
	t->step_s = res->step_s;
	return 0;
}

int plan_replicas(const plan_cli *c, sky_hplan *h, sky_diag *d)
{
	memset(h, 0, sizeof *h);
	if (c->no_replicas)
		return sky_diag_set(d, 1, "--no-replicas");
	const sky_job *j = &c->job;
	if (j->infer || j->owner[0] || j->keep_order || c->sites > 1)
		return sky_diag_set(d, 1, "replicas are planned for training on one site, without a "
					  "data owner or a kept order");
	if (sky_hplan_alloc(h, c->fleet->n + 1))
		return sky_diag_set(d, SKY_ENOMEM, "replicas: out of memory");
	int rc = sky_plan_hybrid(c->fleet, j, h, d);
	if (rc)
		sky_hplan_free(h);
	return rc;
}

void plan_replicas_text(const plan_cli *c, const sky_hplan *h)
{
	const sky_fleet *f = c->fleet;
	printf("with replicas: %d micro-batches of %d, %d stages on %d of %d boards\n",
	       h->micro_batches, h->micro_batch, h->n_stages, sky_hplan_boards(h), f->n);
	printf("%5s  %-20s %s\n", "stage", "layers", "replicas (board: micro-batches per step, "
						   "MiB)");
	for (int k = 0; k < h->n_stages; k++) {
		const sky_hstage *s = &h->stage[k];
		char range[48];
		snprintf(range, sizeof range, "%d.%s-%d.%s", s->first_unit / 2, block(s->first_unit),
			 s->last_unit / 2, block(s->last_unit));
		printf("%5d  %-20s", k, range);
		for (int r = 0; r < s->n_rep; r++)
			printf(" %s: %d, %.1f", f->board[s->rep[r].board].id, s->rep[r].share,
			       s->rep[r].mem_bytes / 1048576.0);
		printf("\n");
	}
	printf("simulated step %.6f s with replicas (%s), pipeline-only %.6f s (%.2fx); no plan is "
	       "below %.6f s (work %.6f s, one micro-batch's path %.6f s): %.3fx the bound\n",
	       h->step_s, h->step_exact ? "exact" : "the best the search found", h->pipeline_step_s,
	       h->pipeline_step_s / h->step_s, h->step_lower_bound_s, h->work_bound_s,
	       h->path_bound_s, h->step_s / h->step_lower_bound_s);
}

cJSON *plan_replicas_json(const plan_cli *c, const sky_hplan *h)
{
	const sky_fleet *f = c->fleet;
	cJSON *o = cJSON_CreateObject();
	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "micro_batch", h->micro_batch);
	cJSON_AddNumberToObject(o, "micro_batches", h->micro_batches);
	cJSON_AddNumberToObject(o, "boards_used", sky_hplan_boards(h));
	cJSON_AddNumberToObject(o, "step_s", h->step_s);
	cJSON_AddBoolToObject(o, "step_exact", h->step_exact);
	cJSON_AddNumberToObject(o, "step_lower_bound_s", h->step_lower_bound_s);
	cJSON_AddNumberToObject(o, "work_bound_s", h->work_bound_s);
	cJSON_AddNumberToObject(o, "path_bound_s", h->path_bound_s);
	cJSON_AddNumberToObject(o, "step_vs_lower_bound", h->step_s / h->step_lower_bound_s);
	cJSON_AddNumberToObject(o, "pipeline_step_s", h->pipeline_step_s);
	cJSON *st = cJSON_AddArrayToObject(o, "stages");
	for (int k = 0; st && k < h->n_stages; k++) {
		const sky_hstage *s = &h->stage[k];
		cJSON *x = cJSON_CreateObject();
		if (!x)
			break;
		cJSON_AddNumberToObject(x, "first_unit", s->first_unit);
		cJSON_AddNumberToObject(x, "last_unit", s->last_unit);
		cJSON_AddNumberToObject(x, "grad_bytes", s->grad_bytes);
		cJSON *rs = cJSON_AddArrayToObject(x, "replicas");
		for (int r = 0; rs && r < s->n_rep; r++) {
			const sky_hrep *y = &s->rep[r];
			cJSON *z = cJSON_CreateObject();
			if (!z)
				break;
			cJSON_AddStringToObject(z, "board", f->board[y->board].id);
			cJSON_AddNumberToObject(z, "share", y->share);
			cJSON_AddNumberToObject(z, "fwd_s", y->fwd_s);
			cJSON_AddNumberToObject(z, "bwd_s", y->bwd_s);
			cJSON_AddNumberToObject(z, "link_s", y->link_s);
			cJSON_AddNumberToObject(z, "in_flight", y->in_flight);
			cJSON_AddNumberToObject(z, "mem_bytes", (double)y->mem_bytes);
			cJSON_AddItemToArray(rs, z);
		}
		cJSON_AddItemToArray(st, x);
	}
	return o;
}

int plan_print(const plan_cli *c, const sky_plan *p, const plan_truth *t)
{
	const sky_fleet *f = c->fleet;
	const sky_job *j = &c->job;
	if (!c->json) {
		printf("%s plan: %s, %d layers (%d half-layer units), seq %d, micro-batch %d x %d, "
		       "%s, %s\n",
		       sky_algo_name(p->algo), j->model.name, j->model.layers, 2 * j->model.layers,
		       j->model.seq, j->model.batch, j->micro_batches, sky_sched_name(j->sched),
		       sky_cost_optim_name(j->optim));
		printf("%5s  %-16s %-12s %-20s %10s %10s %8s %10s\n", "stage", "board", "site",
		       "layers", "time_s", "send_s", "in_fl", "mem_MiB");
		for (int k = 0; k < p->n_stages; k++) {
			const sky_stage *s = &p->stage[k];
			char range[48];
			snprintf(range, sizeof range, "%d.%s-%d.%s", s->first_unit / 2,
				 block(s->first_unit), s->last_unit / 2, block(s->last_unit));
			printf("%5d  %-16s %-12s %-20s %10.4f %10.4f %8d %10.1f%s\n", k,
			       f->board[s->board].id, sky_site_name(f->board[s->board].site), range,
			       s->time_s, s->send_s, s->in_flight, s->mem_bytes / 1048576.0,
			       k == p->bottleneck_stage ? "  <- bottleneck" : "");
			if (k + 1 < p->n_stages &&
			    !sky_site_eq(f->board[s->board].site, f->board[p->stage[k + 1].board].site))
				printf("       -- crosses %s -> %s (%d hop%s): the busiest hop carries "
				       "%.4f s of activations, %.4f s of gradients per micro-batch, "
				       "+%.4f s latency\n",
				       sky_site_name(f->board[s->board].site),
				       sky_site_name(f->board[p->stage[k + 1].board].site), s->wan_hops,
				       s->wan_hops == 1 ? "" : "s", s->wan_xfer_s, s->wan_xfer_b_s,
				       s->wan_lat_s);
		}
		printf("bottleneck %.6f s/micro-batch, lower bound %.6f s (ratio %.3f), %d of %d "
		       "boards used\n",
		       p->bottleneck_s, p->lower_bound_s, p->bottleneck_s / p->lower_bound_s,
		       p->n_stages - p->owner, f->n);
		if (p->owner)
			printf("data owner %s: U-shaped, stages 0 and %d on it (%.4f s of its time per "
			       "micro-batch), owner lag %d\n",
			       j->owner, p->n_stages - 1, p->owner_time_s, p->owner_lag);
		else if (j->owner[0])
			printf("data owner %s: it holds the whole model (the shortest step)\n", j->owner);
		if (c->sites > 1 || p->cross_site_cuts > 0)
			printf("%d sites; %d cuts cross sites, %.1f MB cross between sites per step\n",
			       c->sites, p->cross_site_cuts, p->wan_bytes_per_step / 1e6);
		if (c->job.link_blind)
			printf("planned link-blind: its simulated step is %.6f s on this fleet (the "
			       "link-blind model says %.6f s)\n",
			       t->step_s, t->blind_step_s);
		else if (!(p->step_s > 0))
			printf("simulated step %.6f s\n", t->step_s);
		if (c->job.link_blind)
			return 0; /* the search's own figure below is the link-blind one */
		if (p->step_s > 0 && p->step_exact)
			printf("simulated step %.6f s (exact: the shortest of every order, subset and "
			       "split)\n",
			       p->step_s);
		else if (p->step_s > 0 && !(p->step_lower_bound_s > 0))
			printf("simulated step %.6f s (the best the search found)\n", p->step_s);
		else if (p->step_s > 0)
			printf("simulated step %.6f s (the best the search found; no plan is below "
			       "%.6f s, so it is within %.1f%% of the optimum)\n",
			       p->step_s, p->step_lower_bound_s,
			       100.0 * (p->step_s / p->step_lower_bound_s - 1));
		if (c->hybrid)
			plan_replicas_text(c, c->hybrid);
		return 0;
	}
	cJSON *o = sky_json_new_object();
	if (!o)
		return 1;
	cJSON_AddStringToObject(o, "algo", sky_algo_name(p->algo));
	cJSON_AddStringToObject(o, "model", j->model.name);
	cJSON_AddNumberToObject(o, "layers", j->model.layers);
	cJSON_AddNumberToObject(o, "units", 2 * j->model.layers);
	cJSON_AddNumberToObject(o, "seq", j->model.seq);
	cJSON_AddNumberToObject(o, "micro_batch", j->model.batch);
	cJSON_AddNumberToObject(o, "micro_batches", j->micro_batches);
	cJSON_AddStringToObject(o, "schedule", sky_sched_name(j->sched));
	cJSON_AddStringToObject(o, "optimizer", sky_cost_optim_name(j->optim));
	cJSON_AddStringToObject(o, "objective", sky_objective_name(j->objective));
	cJSON_AddNumberToObject(o, "boards", f->n);
	cJSON_AddNumberToObject(o, "boards_used", p->n_stages - p->owner);
	if (j->owner[0]) {
		cJSON_AddStringToObject(o, "data_owner", j->owner);
		cJSON_AddBoolToObject(o, "u_shaped", p->owner);
		cJSON_AddNumberToObject(o, "owner_lag", p->owner_lag);
	}
	cJSON *st = cJSON_AddArrayToObject(o, "stages");
	for (int k = 0; st && k < p->n_stages; k++) {
		const sky_stage *s = &p->stage[k];
		cJSON *x = cJSON_CreateObject();
		if (!x)
			break;
		cJSON_AddStringToObject(x, "board", f->board[s->board].id);
		cJSON_AddStringToObject(x, "site", sky_site_name(f->board[s->board].site));
		cJSON_AddNumberToObject(x, "first_layer", s->first_unit / 2);
		cJSON_AddStringToObject(x, "first_block", block(s->first_unit));
		cJSON_AddNumberToObject(x, "last_layer", s->last_unit / 2);
		cJSON_AddStringToObject(x, "last_block", block(s->last_unit));
		cJSON_AddNumberToObject(x, "fwd_s", s->fwd_s);
		cJSON_AddNumberToObject(x, "bwd_s", s->bwd_s);
		cJSON_AddNumberToObject(x, "send_s", s->send_s);
		cJSON_AddNumberToObject(x, "time_s", s->time_s);
		cJSON_AddNumberToObject(x, "in_flight", s->in_flight);
		cJSON_AddNumberToObject(x, "mem_bytes", (double)s->mem_bytes);
		cJSON_AddNumberToObject(x, "mem_budget_bytes", (double)f->board[s->board].mem_bytes);
		if (k + 1 < p->n_stages) {
			int cross = !sky_site_eq(f->board[s->board].site,
						 f->board[p->stage[k + 1].board].site);
			cJSON_AddBoolToObject(x, "cut_crosses_sites", cross);
			cJSON_AddNumberToObject(x, "cut_wan_hops", s->wan_hops);
			cJSON_AddNumberToObject(x, "cut_wan_xfer_s", s->wan_xfer_s);
			cJSON_AddNumberToObject(x, "cut_wan_xfer_back_s", s->wan_xfer_b_s);
			cJSON_AddNumberToObject(x, "cut_wan_lat_s", s->wan_lat_s);
		}
		cJSON_AddItemToArray(st, x);
	}
	cJSON_AddNumberToObject(o, "bottleneck_s", p->bottleneck_s);
	cJSON_AddNumberToObject(o, "bottleneck_stage", p->bottleneck_stage);
	cJSON_AddNumberToObject(o, "lower_bound_s", p->lower_bound_s);
	cJSON_AddBoolToObject(o, "link_blind", c->job.link_blind);
	cJSON_AddNumberToObject(o, "sites", c->sites);
	cJSON_AddNumberToObject(o, "cross_site_cuts", p->cross_site_cuts);
	cJSON_AddNumberToObject(o, "wan_bytes_per_step", p->wan_bytes_per_step);
	cJSON_AddNumberToObject(o, "sim_step_s", t->step_s);
	if (c->job.link_blind)
		cJSON_AddNumberToObject(o, "sim_step_link_blind_s", t->blind_step_s);
	if (p->step_s > 0) {
		/* the search's own figure: under --link-blind, the link-blind model's */
		cJSON_AddNumberToObject(o, "step_s", p->step_s);
		cJSON_AddBoolToObject(o, "step_exact", p->step_exact);
		cJSON_AddNumberToObject(o, "step_lower_bound_s", p->step_lower_bound_s);
	}
	if (c->hybrid)
		cJSON_AddItemToObject(o, "replicas", plan_replicas_json(c, c->hybrid));
	size_t cap = 1024 + (size_t)p->n_stages * 512 +
		     (c->hybrid ? (size_t)sky_hplan_boards(c->hybrid) * 512 : 0);
	char *buf = malloc(cap);
	int n = buf ? sky_json_print(o, buf, cap) : SKY_ENOMEM;
	if (n >= 0)
		printf("%s\n", buf);
	free(buf);
	sky_json_free(o);
	return n >= 0 ? 0 : 1;
}

/* Draws the plan into c->svg (sky_svg.h). Returns 0 or 1 after saying why. */
static int plan_svg(const plan_cli *c, const sky_plan *p)
{
	size_t cap = 8192 + (size_t)p->n_stages * 1024 + (size_t)c->job.model.layers * 128;
	char *buf = malloc(cap), title[160];
	snprintf(title, sizeof title, "%s plan: %s, %d layers, %d micro-batches, %s",
		 sky_algo_name(p->algo), c->job.model.name, c->job.model.layers,
		 c->job.micro_batches, sky_sched_name(c->job.sched));
	int n = buf ? sky_svg_plan(c->fleet, &c->job, p, title, buf, cap) : SKY_ENOMEM;
	int rc = n >= 0 ? sky_file_write(c->svg, buf, (size_t)n, 0644) : n;
	free(buf);
	if (rc) {
		fprintf(stderr, "sky plan: cannot write %s (%s)\n", c->svg, sky_strerror(rc));
		return 1;
	}
	return 0;
}

int sky_cmd_plan(int argc, char **argv)
{
	plan_cli c;
	int rc = plan_cli_parse("plan", argc, argv, &c,
				"  --algo A              even, sky or optimal (default optimal)\n"
				"  --svg F.svg           also draw the plan (boards, half-layers, stage times)\n",
				"optimal");
	if (rc) {
		plan_cli_free(&c);
		return rc == 1 ? 0 : rc;
	}
	sky_algo algo;
	sky_plan *p = malloc(sizeof *p);
	if (sky_algo_parse(c.algos, &algo)) {
		fprintf(stderr, "sky plan: --algo expects even, sky or optimal, got '%s'\n", c.algos);
		rc = 2;
		goto exit;
	}
	if (!p) {
		rc = 1;
		goto exit;
	}
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_plan_partition(c.fleet, &c.job, algo, p, &d)) {
		fprintf(stderr, "sky plan: %s\n", d.msg);
		rc = 1;
		goto exit;
	}
	plan_truth t;
	if (plan_judge(&c, p, &t, NULL, &d)) {
		fprintf(stderr, "sky plan: %s\n", d.msg);
		rc = 1;
		goto exit;
	}
	sky_hplan h;
	memset(&h, 0, sizeof h);
	if (algo == SKY_ALGO_OPTIMAL && !c.no_replicas) {
		sky_diag_clear(&d);
		int hr = plan_replicas(&c, &h, &d);
		if (hr == 0)
			c.hybrid = &h;
		else if (hr != 1) {
			fprintf(stderr, "sky plan: %s\n", d.msg);
			rc = 1;
			sky_hplan_free(&h);
			goto exit;
		}
	}
	rc = plan_print(&c, p, &t);
	sky_hplan_free(&h);
	c.hybrid = NULL;
	if (!rc && c.svg)
		rc = plan_svg(&c, p);
exit:
	free(p);
	plan_cli_free(&c);
	return rc;
}
