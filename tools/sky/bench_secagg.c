/* sky bench secagg: what secure aggregation costs a federated round on
 * this machine, per element of the model: an owner's fixed-point encoding
 * and its masking (ChaCha20 key stream, once for the self mask and once
 * per peer), and the aggregator's sum of the owners' words with and
 * without unmasking (its self masks; every owner in). The pair keys'
 * ECDH (once per pair and round, independent of the model's size) is not
 * in these figures. */
#include "bench_util.h"
#include "sky_cli.h"
#include "sky_err.h"
#include "sky_fedsum.h"
#include "sky_json.h"
#include "sky_keystream.h"
#include "sky_secagg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OWNERS 64

typedef struct sa_ctx {
	size_t n;
	int owners, bits;
	float *x;
	uint64_t *enc, *sum;
	unsigned char self[MAX_OWNERS][SKY_SECAGG_SEED_BYTES];
	unsigned char pair[MAX_OWNERS][SKY_SECAGG_SEED_BYTES];
	char id[MAX_OWNERS][12];
	sky_secagg_peer peers[MAX_OWNERS];
} sa_ctx;

static int run_encode(void *p)
{
	sa_ctx *c = p;
	return sky_fx_encode(c->x, c->n, 100, 4.0f, c->bits, c->enc, NULL, NULL) ? 1 : 0;
}

/* owner 0 masks: its self mask and one pair mask per other owner */
static int run_mask(void *p)
{
	sa_ctx *c = p;
	return sky_secagg_mask(c->enc, c->n, 0, c->self[0], c->id[0], c->peers,
			       (size_t)c->owners - 1, NULL)
		       ? 1
		       : 0;
}

/* the same masks through Mbed TLS's ChaCha20, one block at a time */
static int run_mask_ref(void *p)
{
	sa_ctx *c = p;
	int rc = sky_keystream_add_ref(c->enc, c->n, 0, c->self[0], 1);
	for (int k = 1; !rc && k < c->owners; k++)
		rc = sky_keystream_add_ref(c->enc, c->n, 0, c->pair[k], 1);
	return rc ? 1 : 0;
}

static int run_sum(void *p)
{
	sa_ctx *c = p;
	memset(c->sum, 0, c->n * sizeof *c->sum);
	for (int k = 0; k < c->owners; k++)
		sky_fx_add(c->sum, c->enc, c->n);
	return 0;
}

static int run_sum_unmask(void *p)
{
	sa_ctx *c = p;
	run_sum(c);
	return sky_secagg_unmask(c->sum, c->n, 0,
				 (const unsigned char(*)[SKY_SECAGG_SEED_BYTES])c->self,
				 (size_t)c->owners, NULL, 0, NULL)
		       ? 1
		       : 0;
}

static void usage(FILE *to)
{
	fprintf(to,
		"usage: sky bench secagg [--mwords N] [--owners P] [common options]\n"
		"What secure aggregation adds to a federated round, for a model of N million\n"
		"elements (default 4) and P owners (default 8): an owner's fixed-point encoding\n"
		"and masking (self mask + P-1 pair masks, ChaCha20), the aggregator's sum of P\n"
		"updates plain and with its masks removed. Pair-key ECDH is not included.\n"
		"  --mwords N   millions of elements (1..64)\n"
		"  --owners P   owners in the round (2..%d)\n"
		"common options (defaults here: --warmup 1 --runs 5 --max-seconds 20):\n%s",
		MAX_OWNERS, sky_bench_common_help());
}

int sky_bench_secagg(int argc, char **argv)
{
	sky_bench_opts o;
	sky_bench_opts_default(&o);
	o.warmup = 1;
	o.runs = 5;
	o.max_s = 20;
	long mwords = 4, owners = 8;
	enum { O_MW = SKY_BENCH_OPT_OWN, O_OWN };
	static const struct option k_opts[] = {{"mwords", required_argument, NULL, O_MW},
					       {"owners", required_argument, NULL, O_OWN},
					       SKY_BENCH_OPT_TABLE,
					       SKY_OPT_STD,
					       {0}};
	sky_opt po;
	sky_opt_begin(&po, "sky bench secagg", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&po)) != SKY_OPT_END;) {
		int rc = sky_bench_opt("bench secagg", c, po.name, po.arg, &o);
		if (rc < 0)
			return 2;
		if (rc)
			continue;
		if (c == SKY_OPT_HELP) {
			usage(stdout);
			return 0;
		} else if (c == SKY_OPT_VERSION) {
			return 0;
		} else if (c == O_MW) {
			if (sky_cli_int("bench secagg", po.name, po.arg, 1, 64, &mwords) < 0)
				return 2;
		} else if (c == O_OWN) {
			if (sky_cli_int("bench secagg", po.name, po.arg, 2, MAX_OWNERS, &owners) < 0)
				return 2;
		} else {
			return 2;
		}
	}
	sa_ctx *c = calloc(1, sizeof *c);
	int rc = 1;
	cJSON *obj = NULL;
	if (!c)
		return 1;
	c->n = (size_t)mwords << 20;
	c->owners = (int)owners;
	c->x = malloc(c->n * sizeof *c->x);
	c->enc = malloc(c->n * sizeof *c->enc);
	c->sum = malloc(c->n * sizeof *c->sum);
	if (!c->x || !c->enc || !c->sum) {
		fprintf(stderr, "sky bench secagg: out of memory for %ld M elements\n", mwords);
		goto exit;
	}
	for (size_t i = 0; i < c->n; i++)
		c->x[i] = (float)((int)(i * 2654435761u >> 8) % 2001 - 1000) * 1e-3f;
	for (int k = 0; k < c->owners; k++) {
		snprintf(c->id[k], sizeof c->id[k], "b%d", k);
		memset(c->self[k], 0x11 * (k + 1), SKY_SECAGG_SEED_BYTES);
		memset(c->pair[k], 0x5a ^ k, SKY_SECAGG_SEED_BYTES);
	}
	for (int k = 1; k < c->owners; k++)
		c->peers[k - 1] = (sky_secagg_peer){c->id[k], c->pair[k]};
	if (sky_fx_bits(4.0f, 100u * (uint64_t)owners, &c->bits, NULL) != 0)
		goto exit;
	sky_bench_stats enc, mask, mref, sum, sumu;
	if (sky_bench_measure(&o, run_encode, c, &enc) || sky_bench_measure(&o, run_mask, c, &mask) ||
	    sky_bench_measure(&o, run_mask_ref, c, &mref) ||
	    sky_bench_measure(&o, run_sum, c, &sum) || sky_bench_measure(&o, run_sum_unmask, c, &sumu)) {
		fprintf(stderr, "sky bench secagg: a measured step failed\n");
		goto exit;
	}
	const double n = (double)c->n;
	const double owner_plain = enc.median, owner_secure = enc.median + mask.median;
	if (!o.json) {
		printf("%ld M elements, %ld owners:\n", mwords, owners);
		printf("  owner: encode %.1f ms (%.0f M/s), mask %.1f ms (%.0f M/s, %ld key streams; "
		       "Mbed TLS's ChaCha20: %.1f ms, %.2fx)\n",
		       enc.median * 1e3, n / enc.median / 1e6, mask.median * 1e3,
		       n / mask.median / 1e6, owners, mref.median * 1e3, mref.median / mask.median);
		printf("  aggregator: sum of %ld %.1f ms, sum + unmask %.1f ms\n", owners,
		       sum.median * 1e3, sumu.median * 1e3);
		printf("  per element: owner %.2f ns plain, %.2f ns secure; aggregator %.2f ns plain, "
		       "%.2f ns secure\n",
		       owner_plain / n * 1e9, owner_secure / n * 1e9, sum.median / n * 1e9,
		       sumu.median / n * 1e9);
		rc = 0;
		goto exit;
	}
	obj = sky_json_new_object();
	if (!obj)
		goto exit;
	cJSON_AddStringToObject(obj, "bench", "secagg");
	cJSON_AddNumberToObject(obj, "elements", n);
	cJSON_AddNumberToObject(obj, "owners", (double)owners);
	sky_bench_add_stats(obj, "encode_ms", &enc);
	sky_bench_add_stats(obj, "mask_ms", &mask);
	sky_bench_add_stats(obj, "mask_mbedtls_ms", &mref);
	cJSON_AddNumberToObject(obj, "mask_speedup_vs_mbedtls", mref.median / mask.median);
	sky_bench_add_stats(obj, "sum_ms", &sum);
	sky_bench_add_stats(obj, "sum_unmask_ms", &sumu);
	cJSON_AddNumberToObject(obj, "owner_plain_ns_per_element", owner_plain / n * 1e9);
	cJSON_AddNumberToObject(obj, "owner_secure_ns_per_element", owner_secure / n * 1e9);
	cJSON_AddNumberToObject(obj, "aggregator_plain_ns_per_element", sum.median / n * 1e9);
	cJSON_AddNumberToObject(obj, "aggregator_secure_ns_per_element", sumu.median / n * 1e9);
	sky_bench_add_env(obj, "chacha20-mbedtls", 1);
	rc = sky_bench_print(obj) ? 1 : 0;
exit:
	sky_json_free(obj);
	if (c) {
		free(c->x);
		free(c->enc);
		free(c->sum);
	}
	free(c);
	return rc;
}
