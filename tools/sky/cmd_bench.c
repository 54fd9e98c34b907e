/* sky bench <what>: one file per benchmark (bench_<what>.c). */
#include "sky_cli.h"
#include "sky_opt.h"

#include <stdio.h>
#include <string.h>

int sky_bench_data(int argc, char **argv);
int sky_bench_fleet(int argc, char **argv);
int sky_bench_frame(int argc, char **argv);
int sky_bench_geo(int argc, char **argv);
int sky_bench_infer(int argc, char **argv);
int sky_bench_layer(int argc, char **argv);
int sky_bench_planner(int argc, char **argv);
int sky_bench_probe(int argc, char **argv);
int sky_bench_secagg(int argc, char **argv);
int sky_bench_tokenize(int argc, char **argv);
int sky_bench_train(int argc, char **argv);

static const sky_cmd k_benches[] = {
	{"data", "sky data prepare rows/s on 100k rows of fortunes, TSV, CSV, JSONL (--json)",
	 sky_bench_data},
	{"fleet", "a loopback fleet of six boards trains under even, sky, optimal (--json)",
	 sky_bench_fleet},
	{"frame", "CRC32C, and tensor frame pack+unpack plain vs sealed (AES-GCM), 1 and 3 MiB",
	 sky_bench_frame},
	{"geo", "3 sites of 3 boards on a shaped WAN (root): even, link-blind, link-aware (--json)",
	 sky_bench_geo},
	{"infer", "a loopback fleet serves N concurrent clients under even and optimal (--json)",
	 sky_bench_infer},
	{"layer", "one encoder layer fwd and fwd+bwd vs OpenBLAS sgemm (--precision fp32|int8)",
	 sky_bench_layer},
	{"planner", "time to plan 1,024 boards x 1,000 layers, and the paper's 64 x 160",
	 sky_bench_planner},
	{"probe", "the board probe skyd runs (layer times, memory, link)", sky_bench_probe},
	{"secagg", "secure aggregation's masking and unmasking per element, vs plain (--json)",
	 sky_bench_secagg},
	{"tokenize", "BERT tokenizer MB/s, Sky and Hugging Face's on the same text", sky_bench_tokenize},
	{"train", "whole BERT fine-tuning step, sequences/s, Sky and PyTorch eager (--json)",
	 sky_bench_train},
};

static void usage(FILE *to)
{
	fprintf(to, "usage: sky bench <what> [options] (sky bench <what> --help)\n\n");
	for (size_t i = 0; i < sizeof k_benches / sizeof k_benches[0]; i++)
		fprintf(to, "  %-8s %s\n", k_benches[i].name, k_benches[i].summary);
}

int sky_cmd_bench(int argc, char **argv)
{
	return sky_cli_dispatch("sky bench", argc, argv, k_benches,
				sizeof k_benches / sizeof k_benches[0], usage);
}
