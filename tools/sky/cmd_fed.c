/* sky fed ref: the federated job a fleet runs, computed in one process
 * from the owners' shards (docs/federation.md): each round every owner's
 * local steps (sky_fedclient.h, the code the boards run), the FedAvg mean
 * of their weights in fixed point (sky_fedavg_mean, not the aggregator's
 * sky_fedround), the next global model. The tests compare a fleet's final
 * model with this one byte for byte. All owners every round, FedAvg. */
#include "sky_cli.h"

#include "sky_dataset.h"
#include "sky_err.h"
#include "sky_fedclient.h"
#include "sky_fedmsg.h"
#include "sky_fedopt.h"
#include "sky_opt.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OWNERS 16
#define FED_CLIP 64.0f /* planner/svc_fed.c's */

int sky_cmd_fed(int argc, char **argv)
{
	enum { R_MODEL_DIR = SKY_OPT_FIRST, R_INIT, R_SEED, R_SHARDS, R_ROUNDS, R_LOCAL, R_BATCH,
	       R_MICRO, R_LR, R_OPTIM, R_OUT, R_CLIP, R_WARMUP, R_PROX, R_SOPT };
	static const struct option k_opts[] = {{"model-dir", required_argument, NULL, R_MODEL_DIR},
					       {"init-weights", no_argument, NULL, R_INIT},
					       {"seed", required_argument, NULL, R_SEED},
					       {"shards", required_argument, NULL, R_SHARDS},
					       {"rounds", required_argument, NULL, R_ROUNDS},
					       {"local-steps", required_argument, NULL, R_LOCAL},
					       {"batch", required_argument, NULL, R_BATCH},
					       {"micro", required_argument, NULL, R_MICRO},
					       {"lr", required_argument, NULL, R_LR},
					       {"optim", required_argument, NULL, R_OPTIM},
					       {"clip", required_argument, NULL, R_CLIP},
					       {"warmup", required_argument, NULL, R_WARMUP},
					       {"out-dir", required_argument, NULL, R_OUT},
					       {"prox-mu", required_argument, NULL, R_PROX},
					       {"server-opt", required_argument, NULL, R_SOPT},
					       SKY_OPT_STD,
					       {0}};
	const char *dir = NULL, *shards = NULL, *out = NULL, *optim = "adamw", *sopt = "avg";
	int init = 0, seed = 1, rounds = 0, local = 0, batch = 8, micro = 4, warmup = -1;
	double lr = 1e-3, clip = 1, prox = 0;
	sky_opt cli;
	if (argc < 2 || strcmp(argv[1], "ref") != 0) {
		fprintf(stderr, "usage: sky fed ref --model-dir D [--init-weights] --shards "
				"a.skyds,b.skyds --rounds R --local-steps E [--batch B --micro M --lr L "
				"--optim O --clip C --warmup W --seed S --prox-mu MU --server-opt avg|avgm|adam]\n"
				"--out-dir OUT\n");
		return argc >= 2 && !strcmp(argv[1], "--help") ? 0 : 2;
	}
	sky_opt_begin(&cli, "sky fed ref", argc - 1, argv + 1, k_opts, 0);
	for (int c; (c = sky_opt_next(&cli)) != SKY_OPT_END;) {
		switch (c) {
		case SKY_OPT_HELP: printf("usage: sky fed ref ... (sky fed for the options)\n"); return 0;
		case SKY_OPT_VERSION: return 0;
		case R_MODEL_DIR: dir = cli.arg; break;
		case R_INIT: init = 1; break;
		case R_SEED: seed = atoi(cli.arg); break;
		case R_SHARDS: shards = cli.arg; break;
		case R_ROUNDS: rounds = atoi(cli.arg); break;
		case R_LOCAL: local = atoi(cli.arg); break;
		case R_BATCH: batch = atoi(cli.arg); break;
		case R_MICRO: micro = atoi(cli.arg); break;
		case R_LR: lr = atof(cli.arg); break;
		case R_OPTIM: optim = cli.arg; break;
		case R_CLIP: clip = atof(cli.arg); break;
		case R_WARMUP: warmup = atoi(cli.arg); break;
		case R_OUT: out = cli.arg; break;
		case R_PROX: prox = atof(cli.arg); break;
		case R_SOPT: sopt = !strncmp(cli.arg, "fed", 3) ? cli.arg + 3 : cli.arg; break;
		default: return 2;
		}
	}
	if (!dir || !shards || !out || rounds < 1 || local < 1) {
		fprintf(stderr, "sky fed ref: --model-dir, --shards, --rounds, --local-steps and "
				"--out-dir are required\n");
		return 2;
	}
	static sky_dataset ds[MAX_OWNERS];
	static sky_fedclient cl[MAX_OWNERS];
	float *x[MAX_OWNERS] = {0};
	uint32_t w[MAX_OWNERS];
	int n = 0, ex = 1;
	unsigned char *b = NULL;
	size_t blen = 0, cl_len, at;
	const char *cfg;
	uint64_t words;
	float *g = NULL, *mean = NULL, *state = NULL;
	sky_fedopt opt;
	sky_fedopt_kind kind;
	uint64_t *scratch = NULL;
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_fedclient_bundle_dir(dir, init, seed, &b, &blen, &d) != 0 ||
	    sky_fedb_parse(b, blen, &cfg, &cl_len, &at, &words, &d) != 0) {
		fprintf(stderr, "sky fed ref: %s: %s\n", dir, d.msg);
		goto exit;
	}
	sky_fedclient_opts o = {.batch = batch, .micro = micro, .local_steps = local,
				.total_steps = (long)rounds * local, .lr = lr, .clip = clip,
				.seed = seed,
				.warmup = warmup >= 0 ? warmup : rounds * local / 10,
				.prox_mu = prox};
	snprintf(o.optim, sizeof o.optim, "%s", optim);
	for (const char *p = shards; *p && n < MAX_OWNERS;) {
		char path[1024];
		size_t l = strcspn(p, ",");
		snprintf(path, sizeof path, "%.*s", (int)l, p);
		p += l + (p[l] == ',');
		sky_ds_init(&ds[n]);
		if (sky_ds_open(&ds[n], path, &d) != 0 ||
		    sky_fedclient_init(&cl[n], cfg, cl_len, &ds[n], &o, &d) != 0 ||
		    !(x[n] = malloc(words * sizeof *x[n]))) {
			fprintf(stderr, "sky fed ref: %s: %s\n", path, d.msg);
			n++;
			goto exit;
		}
		w[n] = (uint32_t)ds[n].meta.rows;
		n++;
	}
	g = malloc(words * sizeof *g), mean = malloc(words * sizeof *mean);
	scratch = malloc(2 * words * sizeof *scratch);
	if (!g || !mean || !scratch)
		goto exit;
	if (sky_fedopt_parse(sopt, &kind, &d) != 0) {
		fprintf(stderr, "sky fed ref: --server-opt: %s\n", d.msg);
		goto exit;
	}
	sky_fedopt_opts oo = sky_fedopt_defaults(kind); /* skyplan's, with no --server-lr */
	state = calloc((size_t)sky_fedopt_state_floats(kind) * words + 1, sizeof *state);
	if (!state || sky_fedopt_init(&opt, &oo, words, state, &d) != 0)
		goto exit;
	sky_fedb_get_words(b + at, g, words);
	/* as sky train (default --threads 1) and a board of one thread: fp32
	 * GEMMs split over other thread counts may round differently */
	openblas_set_num_threads(1);
	for (int r = 0; r < rounds; r++) {
		for (int k = 0; k < n; k++)
			if (sky_fedclient_round(&cl[k], (uint64_t)r, g, x[k], &d) != 0) {
				fprintf(stderr, "sky fed ref: owner %d round %d: %s\n", k, r, d.msg);
				goto exit;
			}
		if (sky_fedavg_mean((const float *const *)x, w, (size_t)n, words, FED_CLIP, mean,
				    scratch, &d) != 0) {
			fprintf(stderr, "sky fed ref: round %d: %s\n", r, d.msg);
			goto exit;
		}
		if (sky_fedopt_step(&opt, g, mean, &d) != 0) { /* FedAvg: w = mean */
			fprintf(stderr, "sky fed ref: round %d: %s\n", r, d.msg);
			goto exit;
		}
	}
	sky_fedb_put_words(b + at, g, words);
	if (sky_fedclient_save_dir(b, blen, out, &d) != 0) {
		fprintf(stderr, "sky fed ref: %s: %s\n", out, d.msg);
		goto exit;
	}
	printf("saved %s (%d owners, %d rounds of %d local steps)\n", out, n, rounds, local);
	ex = 0;
exit:
	for (int k = 0; k < n; k++) {
		sky_fedclient_free(&cl[k]);
		sky_ds_close(&ds[k]);
		free(x[k]);
	}
	free(b), free(g), free(mean), free(scratch), free(state);
	return ex;
}
