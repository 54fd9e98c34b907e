/* sky bench probe: the probe skyd runs at start (runtime/sky_probe.h),
 * locally and without a broker, repeated to show its spread. */
#include "bench_util.h"
#include "sky_cli.h"
#include "sky_err.h"
#include "sky_json.h"
#include "sky_model.h"
#include "sky_probe.h"
#include "sky_profile.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define MAX_REPEAT 100

static void usage(FILE *to)
{
	fprintf(to,
		"usage: sky bench probe [--model NAME] [--seq S] [--batch B] [--repeat N]\n"
		"                       [--profile FILE] [common options]\n"
		"Runs the board probe (one encoder layer fwd and bwd, block by block, at the\n"
		"model's shapes; median of the measured runs; memory budget) N times (default 5)\n"
		"and reports the last probe's figures and the spread over the N probes.\n"
		"The link part (echo through the broker) needs skyd and is not run here.\n"
		"  --model NAME      preset (%s; default mini)\n"
		"  --seq S, --batch B  tokens per sequence, sequences per micro-batch\n"
		"  --repeat N        whole probes to run (1..%d, default 5)\n"
		"  --profile FILE    board profile (default: as skyd finds it)\n"
		"common options (for each probe; defaults here: --warmup 1 --runs 7 --max-seconds 3):\n%s",
		sky_model_preset_names(), MAX_REPEAT, sky_bench_common_help());
}

int sky_bench_probe(int argc, char **argv)
{
	sky_bench_opts bo;
	sky_bench_opts_default(&bo);
	bo.warmup = 1;
	bo.runs = 7;
	bo.max_s = SKY_PROBE_DEFAULT_MAX_S;
	bo.threads = 0; /* 0: the profile's */
	const char *model = "mini", *profile_path = NULL;
	long seq = 0, batch = 0, repeat = 5;
	enum { O_MODEL = SKY_BENCH_OPT_OWN, O_PROFILE, O_SEQ, O_BATCH, O_REPEAT };
	static const struct option k_opts[] = {{"model", required_argument, NULL, O_MODEL},
					       {"profile", required_argument, NULL, O_PROFILE},
					       {"seq", required_argument, NULL, O_SEQ},
					       {"batch", required_argument, NULL, O_BATCH},
					       {"repeat", required_argument, NULL, O_REPEAT},
					       SKY_BENCH_OPT_TABLE,
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky bench probe", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		int orc = sky_bench_opt("bench probe", c, op.name, op.arg, &bo);
		if (orc < 0)
			return 2;
		if (orc)
			continue;
		const char *a = op.name, *v = op.arg;
		if (c == SKY_OPT_HELP) {
			usage(stdout);
			return 0;
		} else if (c == SKY_OPT_VERSION) {
			return 0;
		} else if (c == O_MODEL) {
			model = v;
		} else if (c == O_PROFILE) {
			profile_path = v;
		} else if (c == O_SEQ) {
			if (sky_cli_int("bench probe", a, v, 1, 65536, &seq))
				return 2;
		} else if (c == O_BATCH) {
			if (sky_cli_int("bench probe", a, v, 1, 4096, &batch))
				return 2;
		} else if (c == O_REPEAT) {
			if (sky_cli_int("bench probe", a, v, 1, MAX_REPEAT, &repeat))
				return 2;
		} else {
			return 2;
		}
	}
	if (sky_opt_no_args(&op) != 0) {
		return 2;
	}
	sky_model_cfg cfg;
	if (sky_model_preset(model, &cfg) != 0) {
		fprintf(stderr, "sky bench probe: unknown model '%s' (%s)\n", model,
			sky_model_preset_names());
		return 2;
	}
	if (seq)
		cfg.seq = (int)seq;
	if (batch)
		cfg.batch = (int)batch;
	if (sky_model_validate(&cfg) != 0)
		return 2;
	sky_profile prof;
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_profile_load(&prof, profile_path, &d) != 0) {
		fprintf(stderr, "sky bench probe: %s\n", d.msg);
		return 1;
	}
	if (bo.threads)
		prof.threads = bo.threads;
	sky_profile_apply_threads(&prof);

	sky_probe_opts po;
	sky_probe_opts_default(&po, &cfg);
	po.warmup = bo.warmup;
	po.runs = bo.runs;
	po.max_s = bo.max_s;
	sky_probe_result r;
	double layer_s[MAX_REPEAT], probe_s[MAX_REPEAT];
	for (int k = 0; k < repeat; k++) {
		po.seed = 1 + (uint64_t)k;
		if (sky_probe_run(&po, &prof, &r, &d) != 0) {
			fprintf(stderr, "sky bench probe: %s\n", d.msg);
			return 1;
		}
		layer_s[k] = sky_caps_layer_s(&r.fp32);
		probe_s[k] = r.probe_s;
	}
	/* spread of the figure a board reports (its median layer time) across
	 * whole probes: what a planner sees if the board probes again */
	double mean = 0, var = 0, pmax = 0, pmean = 0;
	for (int k = 0; k < repeat; k++) {
		mean += layer_s[k] / repeat;
		pmean += probe_s[k] / repeat;
		if (probe_s[k] > pmax)
			pmax = probe_s[k];
	}
	for (int k = 0; k < repeat; k++)
		var += (layer_s[k] - mean) * (layer_s[k] - mean) / repeat;
	double cv = mean > 0 ? sqrt(var) / mean : 0;

	if (!bo.json) {
		printf("probe %s (H%d, S%d, B%d), profile %s, %d thread(s), speed %.3g\n", cfg.name,
		       cfg.hidden, cfg.seq, cfg.batch, prof.name, prof.threads, prof.speed);
		printf("  layer fwd %.3f ms (attn %.3f, ffn %.3f)  bwd %.3f ms (attn %.3f, ffn %.3f)\n",
		       1e3 * (r.fp32.fwd_attn_s + r.fp32.fwd_ffn_s), 1e3 * r.fp32.fwd_attn_s,
		       1e3 * r.fp32.fwd_ffn_s, 1e3 * (r.fp32.bwd_attn_s + r.fp32.bwd_ffn_s),
		       1e3 * r.fp32.bwd_attn_s, 1e3 * r.fp32.bwd_ffn_s);
		printf("  median of %d runs at batch %d x seq %d (%s), cv within the last probe %.3f\n",
		       r.runs, r.timed_batch, r.timed_seq,
		       r.scale_attn == 1 ? "the job's shape" : "scaled by FLOPs", r.layer_cv);
		if (r.has_int8)
			printf("  int8 layer fwd %.3f ms (attn %.3f; %.2fx the fp32 forward)\n",
			       1e3 * r.int8_fwd_s, 1e3 * r.int8_attn_s,
			       (r.fp32.fwd_attn_s + r.fp32.fwd_ffn_s) / r.int8_fwd_s);
		if (r.has_ends)
			printf("  serving ends per batch: first stage %.3f ms (requests, embedding), "
			       "last %.3f ms (head, responses)\n",
			       1e3 * r.int8_embed_s, 1e3 * r.int8_head_s);
		printf("  %ld probes: layer time cv %.4f, probe time mean %.2f s max %.2f s\n", repeat,
		       cv, pmean, pmax);
		printf("  memory budget %.1f MiB, probe arena %.2f MiB\n",
		       (double)r.mem_budget / 1048576.0, (double)r.arena_bytes / 1048576.0);
		return 0;
	}
	cJSON *o = sky_json_new_object();
	if (!o)
		return 1;
	cJSON_AddStringToObject(o, "bench", "probe");
	cJSON_AddStringToObject(o, "model", cfg.name);
	cJSON_AddNumberToObject(o, "hidden", cfg.hidden);
	cJSON_AddNumberToObject(o, "seq", cfg.seq);
	cJSON_AddNumberToObject(o, "batch", cfg.batch);
	cJSON_AddStringToObject(o, "profile", prof.name);
	cJSON_AddNumberToObject(o, "speed", prof.speed);
	cJSON_AddNumberToObject(o, "fwd_attn_ms", 1e3 * r.fp32.fwd_attn_s);
	cJSON_AddNumberToObject(o, "fwd_ffn_ms", 1e3 * r.fp32.fwd_ffn_s);
	cJSON_AddNumberToObject(o, "bwd_attn_ms", 1e3 * r.fp32.bwd_attn_s);
	cJSON_AddNumberToObject(o, "bwd_ffn_ms", 1e3 * r.fp32.bwd_ffn_s);
	cJSON_AddNumberToObject(o, "layer_fwd_ms", 1e3 * (r.fp32.fwd_attn_s + r.fp32.fwd_ffn_s));
	cJSON_AddNumberToObject(o, "layer_bwd_ms", 1e3 * (r.fp32.bwd_attn_s + r.fp32.bwd_ffn_s));
	if (r.has_int8) {
		cJSON_AddNumberToObject(o, "int8_fwd_ms", 1e3 * r.int8_fwd_s);
		cJSON_AddNumberToObject(o, "int8_attn_ms", 1e3 * r.int8_attn_s);
	} else {
		cJSON_AddNullToObject(o, "int8_fwd_ms");
		cJSON_AddNullToObject(o, "int8_attn_ms");
	}
	if (r.has_ends) {
		cJSON_AddNumberToObject(o, "int8_embed_ms", 1e3 * r.int8_embed_s);
		cJSON_AddNumberToObject(o, "int8_head_ms", 1e3 * r.int8_head_s);
	} else {
		cJSON_AddNullToObject(o, "int8_embed_ms");
		cJSON_AddNullToObject(o, "int8_head_ms");
	}
	cJSON_AddNumberToObject(o, "runs", r.runs);
	cJSON_AddNumberToObject(o, "timed_batch", r.timed_batch);
	cJSON_AddNumberToObject(o, "timed_seq", r.timed_seq);
	cJSON_AddNumberToObject(o, "int8_batch", r.int8_batch);
	cJSON_AddNumberToObject(o, "int8_seq", r.int8_seq);
	cJSON_AddNumberToObject(o, "cv_within_probe", r.layer_cv);
	cJSON_AddNumberToObject(o, "repeat", (double)repeat);
	cJSON_AddNumberToObject(o, "layer_ms_mean", 1e3 * mean);
	cJSON_AddNumberToObject(o, "cv_across_probes", cv);
	cJSON_AddNumberToObject(o, "probe_s_mean", pmean);
	cJSON_AddNumberToObject(o, "probe_s_max", pmax);
	cJSON_AddNumberToObject(o, "probe_bound_s", po.max_s);
	cJSON_AddNumberToObject(o, "mem_budget_bytes", (double)r.mem_budget);
	cJSON_AddNumberToObject(o, "arena_bytes", (double)r.arena_bytes);
	sky_bench_add_env(o, "layer fp32", prof.threads);
	int rc = sky_bench_print(o);
	sky_json_free(o);
	return rc ? 1 : 0;
}
