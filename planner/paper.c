/* The Sky Computing paper's experiment as a fleet and a job.
 *
 * Heterogeneity: hpcaitech/SkyComputing experiment/config.py draws each
 * worker's slowdown s_i = numpy.random.default_rng(seed=35).integers(1, 7,
 * size=64)[i] for workers i = 1..63 (the draw its config comments in); the
 * worker sleeps s_i times its compute time, so it runs 1 + s_i times slower
 * than an unslowed one. The table below is 1 + s_i (re-drawn with numpy on
 * 2026-11-30, same as /work/shared/fleets/paper-64.json). */
#include "sky_plan.h"

#include <stdio.h>
#include <string.h>

const double sky_paper_slowdown_plus_one[SKY_PAPER_WORKERS] = {
	4, 6, 4, 7, 7, 3, 7, 2, 2, 5, 2, 4, 4, 3, 7, 3, 6, 5, 7, 6, 6,
	7, 2, 4, 7, 6, 4, 5, 2, 7, 2, 5, 2, 6, 5, 4, 5, 4, 2, 2, 6, 5,
	2, 4, 4, 2, 4, 3, 7, 6, 3, 5, 7, 5, 7, 6, 3, 2, 2, 3, 6, 6, 2,
};

int sky_paper_job(sky_job *j)
{
	int rc = sky_job_init(j, "large");
	if (rc)
		return rc;
	j->model.layers = SKY_PAPER_LAYERS;
	j->model.seq = SKY_PAPER_SEQ;
	j->model.batch = SKY_PAPER_BATCH / SKY_PAPER_MICRO_BATCHES;
	j->micro_batches = SKY_PAPER_MICRO_BATCHES;
	j->optim = SKY_OPTIM_ADAM;
	j->sched = SKY_SCHED_1F1B;
	return 0;
}

void sky_paper_fleet(const sky_job *j, sky_fleet *f)
{
	/* an unslowed worker runs the measured BERT-large layer; other shapes
	 * (a --model or --seq given with --paper) scale by their FLOPs */
	sky_job pj;
	sky_paper_job(&pj);
	double scale = sky_model_layer_flops_fwd(&j->model) / sky_model_layer_flops_fwd(&pj.model);
	double fwd = SKY_PAPER_LAYER_FWD_S * scale, bwd = SKY_PAPER_LAYER_BWD_S * scale;
	memset(f, 0, sizeof *f);
	f->n = SKY_PAPER_WORKERS;
	for (int i = 0; i < SKY_PAPER_WORKERS; i++) {
		sky_board *b = &f->board[i];
		snprintf(b->id, sizeof b->id, "worker-%02d", i + 1);
		b->fwd_s = fwd * sky_paper_slowdown_plus_one[i];
		b->bwd_s = bwd * sky_paper_slowdown_plus_one[i];
		b->mem_bytes = SKY_PAPER_MEM_BYTES;
		b->bw_Bps = SKY_PAPER_BW_BPS;
		b->lat_s = SKY_PAPER_LAT_S;
	}
}
