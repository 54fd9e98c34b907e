/* sky bench frame: what a tensor frame costs a stage on this machine:
 * CRC32C throughput (the CPU instruction and plain C), and pack + unpack of
 * an f32 payload, plaintext and sealed (AES-256-GCM under a job key), for
 * each payload size asked. Rates are payload bytes over the median time. */
#include "bench_util.h"
#include "sky_cli.h"
#include "sky_crc32c.h"
#include "sky_err.h"
#include "sky_frameseal.h"
#include "sky_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES 8

typedef struct frame_ctx {
	sky_frame_key *key;
	sky_frame_hdr h;
	sky_frame_expect want;
	const unsigned char *src;
	unsigned char *msg, *dst;
	size_t n, cap;
	uint32_t sink;
} frame_ctx;

static int run_crc(void *p)
{
	frame_ctx *c = p;
	c->sink ^= sky_crc32c(0, c->src, c->n);
	return 0;
}

static int run_crc_sw(void *p)
{
	frame_ctx *c = p;
	c->sink ^= sky_crc32c_sw(0, c->src, c->n);
	return 0;
}

static int run_pack(void *p)
{
	frame_ctx *c = p;
	return sky_frame_pack(c->key, &c->h, c->src, c->n, c->msg, c->cap, NULL) > 0 ? 0 : 1;
}

static int run_unpack(void *p)
{
	frame_ctx *c = p;
	sky_frame_hdr back;
	return sky_frame_unpack(c->key, c->msg, c->cap, &c->want, &back, c->dst, c->n, NULL, NULL)
		       ? 1
		       : 0;
}

static void usage(FILE *to)
{
	fprintf(to,
		"usage: sky bench frame [--mib N[,N...]] [common options]\n"
		"CRC32C rate (CPU instruction and plain C), and pack + unpack of one f32 frame,\n"
		"plaintext and sealed (AES-256-GCM), for payloads of N MiB (default 1,3).\n"
		"Rates are payload bytes / median time (1 MB = 1e6 bytes, 1 GB = 1e9).\n"
		"  --mib N,...   payload sizes in MiB (1..32, at most %d)\n"
		"common options (defaults here: --warmup 2 --runs 20 --max-seconds 5):\n%s",
		MAX_SIZES, sky_bench_common_help());
}

static int parse_sizes(const char *text, long *mib, int *count)
{
	*count = 0;
	char buf[128];
	if (!text || strlen(text) >= sizeof buf)
		return SKY_EINVAL;
	strcpy(buf, text);
	for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
		if (*count == MAX_SIZES || sky_cli_int("bench frame", "--mib", tok, 1, 32, &mib[*count]))
			return SKY_EINVAL;
		(*count)++;
	}
	return *count ? 0 : SKY_EINVAL;
}

static double rate(size_t n, const sky_bench_stats *st) { return st->median > 0 ? n / st->median : 0; }

/* One payload size: all five measurements, printed as text or one JSON
 * object. Returns 0 or 1. */
static int bench_size(const sky_bench_opts *o, size_t n)
{
	static const unsigned char k_key[SKY_FRAME_KEY_BYTES] = "sky-bench-frame-key-0123456789ab";
	sky_frame_key plain, sealed;
	frame_ctx c;
	memset(&c, 0, sizeof c);
	int rc = 1;
	cJSON *obj = NULL;
	unsigned char *src = malloc(n), *dst = malloc(n);
	size_t cap = n + SKY_FRAME_HEADER_BYTES + SKY_FRAME_SEAL_OVERHEAD;
	unsigned char *msg = malloc(cap);
	sky_frame_key_init(&plain, NULL);
	if (!src || !dst || !msg || sky_frame_key_init(&sealed, k_key) != 0) {
		fprintf(stderr, "sky bench frame: out of memory or no cipher\n");
		goto exit;
	}
	for (size_t i = 0; i < n; i++)
		src[i] = (unsigned char)(i * 2654435761u >> 13);
	c.src = src;
	c.dst = dst;
	c.msg = msg;
	c.n = n;
	c.h.dtype = SKY_FRAME_F32;
	c.h.ndim = 2;
	c.h.shape[0] = (uint32_t)(n / 4 / 1024);
	c.h.shape[1] = 1024;
	c.h.stage = 1;
	c.h.epoch = 1;
	c.h.step = 1;
	strcpy(c.h.job, "bench");
	c.want = (sky_frame_expect){.job = "bench", .epoch = 1, .step = 1, .stage = 1,
				    .micro_batches = 1, .dtype = SKY_FRAME_F32, .ndim = 2,
				    .shape = {c.h.shape[0], 1024}};
	sky_bench_stats crc, crc_sw, pk[2], up[2];
	if (sky_bench_measure(o, run_crc, &c, &crc) || sky_bench_measure(o, run_crc_sw, &c, &crc_sw))
		goto exit;
	for (int s = 0; s < 2; s++) {
		c.key = s ? &sealed : &plain;
		c.cap = sky_frame_packed_bytes(c.key, n);
		if (sky_bench_measure(o, run_pack, &c, &pk[s]) ||
		    sky_bench_measure(o, run_unpack, &c, &up[s])) {
			fprintf(stderr, "sky bench frame: %s pack/unpack failed\n", s ? "sealed" : "plain");
			goto exit;
		}
		if (memcmp(src, dst, n) != 0) {
			fprintf(stderr, "sky bench frame: round trip differs\n");
			goto exit;
		}
	}
	double pu[2] = {pk[0].median + up[0].median, pk[1].median + up[1].median};
	if (!o->json) {
		printf("%zu MiB f32: crc32c %.2f GB/s (%s), %.2f GB/s (slice8); pack+unpack plain "
		       "%.0f MB/s (%.3f + %.3f ms), sealed %.0f MB/s (%.3f + %.3f ms, %s)\n",
		       n >> 20, rate(n, &crc) / 1e9, sky_crc32c_impl(), rate(n, &crc_sw) / 1e9,
		       n / pu[0] / 1e6, pk[0].median * 1e3, up[0].median * 1e3, n / pu[1] / 1e6,
		       pk[1].median * 1e3, up[1].median * 1e3, sky_frame_key_impl(&sealed));
		rc = 0;
		goto exit;
	}
	obj = sky_json_new_object();
	if (!obj)
		goto exit;
	cJSON_AddStringToObject(obj, "bench", "frame");
	cJSON_AddStringToObject(obj, "dtype", "f32");
	cJSON_AddNumberToObject(obj, "payload_bytes", (double)n);
	cJSON_AddStringToObject(obj, "crc32c_impl", sky_crc32c_impl());
	cJSON_AddStringToObject(obj, "seal_impl", sky_frame_key_impl(&sealed));
	cJSON_AddNumberToObject(obj, "crc32c_gbs", rate(n, &crc) / 1e9);
	cJSON_AddNumberToObject(obj, "crc32c_slice8_gbs", rate(n, &crc_sw) / 1e9);
	cJSON_AddNumberToObject(obj, "plain_pack_unpack_mbs", n / pu[0] / 1e6);
	cJSON_AddNumberToObject(obj, "sealed_pack_unpack_mbs", n / pu[1] / 1e6);
	sky_bench_add_stats(obj, "plain_pack_ms", &pk[0]);
	sky_bench_add_stats(obj, "plain_unpack_ms", &up[0]);
	sky_bench_add_stats(obj, "sealed_pack_ms", &pk[1]);
	sky_bench_add_stats(obj, "sealed_unpack_ms", &up[1]);
	sky_bench_add_env(obj, sky_crc32c_impl(), 1);
	rc = sky_bench_print(obj) ? 1 : 0;
exit:
	sky_json_free(obj);
	sky_frame_key_free(&plain);
	sky_frame_key_free(&sealed);
	free(src);
	free(dst);
	free(msg);
	return rc;
}

int sky_bench_frame(int argc, char **argv)
{
	sky_bench_opts o;
	sky_bench_opts_default(&o);
	o.runs = 20;
	o.max_s = 5;
	long mib[MAX_SIZES] = {1, 3};
	int n_sizes = 2;
	enum { O_MIB = SKY_BENCH_OPT_OWN };
	static const struct option k_opts[] = {
		{"mib", required_argument, NULL, O_MIB}, SKY_BENCH_OPT_TABLE, SKY_OPT_STD, {0}};
	sky_opt po;
	sky_opt_begin(&po, "sky bench frame", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&po)) != SKY_OPT_END;) {
		int rc = sky_bench_opt("bench frame", c, po.name, po.arg, &o);
		if (rc < 0)
			return 2;
		if (rc)
			continue;
		if (c == SKY_OPT_HELP) {
			usage(stdout);
			return 0;
		} else if (c == SKY_OPT_VERSION) {
			return 0;
		} else if (c == O_MIB) {
			if (parse_sizes(po.arg, mib, &n_sizes)) {
				fprintf(stderr, "sky bench frame: --mib wants sizes 1..32, comma-separated\n");
				return 2;
			}
		} else {
			return 2;
		}
	}
	if (sky_opt_no_args(&po) != 0) {
		return 2;
	}
	for (int s = 0; s < n_sizes; s++)
		if (bench_size(&o, (size_t)mib[s] << 20))
			return 1;
	return 0;
}
