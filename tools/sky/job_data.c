/* sky job data: one training micro-batch of the synthetic task (sky_task.h)
 * as `sky train` and a data owner make it from (seed, index), printed as
 * the little-endian bytes of its token ids and of its labels, so that a
 * test can look for them in everything a fleet publishes. */
#include "job_data.h"

#include "sky_cli.h"
#include "sky_model.h"
#include "sky_opt.h"
#include "sky_task.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void hex_i32(const int32_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t x = (uint32_t)v[i];
		printf("%02x%02x%02x%02x", x & 0xff, (x >> 8) & 0xff, (x >> 16) & 0xff, x >> 24);
	}
	printf("\n");
}

int sky_job_data(int argc, char **argv)
{
	const char *model = "tiny";
	long layers = 0, seq = 0, batch = 0, seed = 1, index = 0;
	enum { O_MODEL = SKY_OPT_FIRST, O_LAYERS, O_SEQ, O_BATCH, O_SEED, O_INDEX };
	static const struct option k_opts[] = {{"model", required_argument, NULL, O_MODEL},
					       {"layers", required_argument, NULL, O_LAYERS},
					       {"seq", required_argument, NULL, O_SEQ},
					       {"batch", required_argument, NULL, O_BATCH},
					       {"seed", required_argument, NULL, O_SEED},
					       {"index", required_argument, NULL, O_INDEX},
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky job data", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		const char *a = op.name, *val = op.arg;
		int rc = 0;
		switch (c) {
		case SKY_OPT_HELP:
			printf("usage: sky job data [--model tiny] [--layers L] [--seq S] [--batch B]\n"
			       "                    [--seed S] [--index I]\n"
			       "Prints training micro-batch I (step x micro-batches + micro-batch, as\n"
			       "`sky train --seed S` numbers them) of the synthetic task: its token ids\n"
			       "(B x S) on one line, its labels (B) on the next, as the hex of their\n"
			       "little-endian int32 bytes (integration tests look for them in frames).\n");
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_MODEL:
			model = val;
			break;
		case O_LAYERS:
			rc = sky_cli_int("job data", a, val, 1, 4096, &layers);
			break;
		case O_SEQ:
			rc = sky_cli_int("job data", a, val, 1, 1 << 16, &seq);
			break;
		case O_BATCH:
			rc = sky_cli_int("job data", a, val, 1, 1 << 16, &batch);
			break;
		case O_SEED:
			rc = sky_cli_int("job data", a, val, 0, 0x7fffffffL, &seed);
			break;
		case O_INDEX:
			rc = sky_cli_int("job data", a, val, 0, 0x7fffffffL, &index);
			break;
		default:
			return 2;
		}
		if (rc)
			return 2;
	}
	if (sky_opt_no_args(&op) != 0)
		return 2;
	sky_model_cfg m;
	if (sky_model_preset(model, &m) != 0) {
		fprintf(stderr, "sky job data: unknown model '%s' (%s)\n", model,
			sky_model_preset_names());
		return 2;
	}
	if (layers)
		m.layers = (int)layers;
	if (seq)
		m.seq = (int)seq;
	if (batch)
		m.batch = (int)batch;
	if (m.seq > m.max_pos)
		m.max_pos = m.seq;
	size_t T = (size_t)m.batch * (size_t)m.seq;
	int32_t *ids = malloc(T * sizeof *ids), *types = malloc(T * sizeof *types);
	int32_t *attn = malloc(T * sizeof *attn), *labels = malloc((size_t)m.batch * sizeof *labels);
	int rc = 1;
	if (!ids || !types || !attn || !labels)
		goto exit;
	if (sky_task_batch(&m, (uint64_t)seed, SKY_TASK_TRAIN, (uint64_t)index, ids, types, attn,
			   labels) != 0) {
		fprintf(stderr, "sky job data: the model cannot hold the task\n");
		goto exit;
	}
	hex_i32(ids, T);
	hex_i32(labels, (size_t)m.batch);
	rc = 0;
exit:
	free(ids);
	free(types);
	free(attn);
	free(labels);
	return rc;
}
