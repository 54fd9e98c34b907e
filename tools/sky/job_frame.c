/* sky job frame: one crafted tensor frame in a file, for the integration
 * tests that publish bad frames into a job. */
#include "job_frame.h"

#include "sky_cli.h"
#include "sky_err.h"
#include "sky_file.h"
#include "sky_frameseal.h"
#include "sky_opt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The command line into h, out and defect. Returns -1 to go on, or the exit
 * code (0 after --help or --version, 2 on a bad or missing option). */
static int frame_opts(int argc, char **argv, sky_frame_hdr *h, const char **out,
		      const char **defect)
{
	long v;
	memset(h, 0, sizeof *h);
	h->dtype = SKY_FRAME_F32;
	h->ndim = 3;
	*out = NULL;
	*defect = "none";
	enum { O_JOB = SKY_OPT_FIRST, O_EPOCH, O_STEP, O_STAGE, O_MB, O_DIR, O_SHAPE, O_DEFECT, O_OUT };
	static const struct option k_opts[] = {{"job", required_argument, NULL, O_JOB},
					       {"epoch", required_argument, NULL, O_EPOCH},
					       {"step", required_argument, NULL, O_STEP},
					       {"stage", required_argument, NULL, O_STAGE},
					       {"mb", required_argument, NULL, O_MB},
					       {"dir", required_argument, NULL, O_DIR},
					       {"shape", required_argument, NULL, O_SHAPE},
					       {"defect", required_argument, NULL, O_DEFECT},
					       {"out", required_argument, NULL, O_OUT},
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky job frame", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		const char *a = op.name, *val = op.arg;
		int rc = 0;
		switch (c) {
		case SKY_OPT_HELP:
			printf("usage: sky job frame --job J --epoch E --step S --stage K --dir fwd|bwd "
			       "--mb M --shape B,S,H [--defect none|checksum|truncated] --out FILE\n"
			       "Writes one plaintext f32 tensor frame (payload 0.5, 1.5, ...) with the\n"
			       "given header, for tests that publish bad frames into a job.\n");
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_JOB:
			snprintf(h->job, sizeof h->job, "%s", val);
			break;
		case O_EPOCH:
			if (!(rc = sky_cli_int("job frame", a, val, 0, 0x7fffffffL, &v)))
				h->epoch = v;
			break;
		case O_STEP:
			if (!(rc = sky_cli_int("job frame", a, val, 0, 0x7fffffffL, &v)))
				h->step = v;
			break;
		case O_STAGE:
			if (!(rc = sky_cli_int("job frame", a, val, 0, 65535, &v)))
				h->stage = (int)v;
			break;
		case O_MB:
			if (!(rc = sky_cli_int("job frame", a, val, 0, 1 << 20, &v)))
				h->micro_batch = (uint32_t)v;
			break;
		case O_DIR:
			h->direction = !strcmp(val, "bwd") ? SKY_FRAME_BWD : SKY_FRAME_FWD;
			break;
		case O_SHAPE: {
			unsigned b = 0, sq = 0, hd = 0;
			if (sscanf(val, "%u,%u,%u", &b, &sq, &hd) != 3 || !b || !sq || !hd) {
				fprintf(stderr, "sky job frame: --shape expects B,S,H\n");
				return 2;
			}
			h->shape[0] = b, h->shape[1] = sq, h->shape[2] = hd;
			break;
		}
		case O_DEFECT:
			*defect = val;
			break;
		case O_OUT:
			*out = val;
			break;
		default:
			return 2;
		}
		if (rc)
			return 2;
	}
	if (sky_opt_no_args(&op) != 0) {
		return 2;
	}
	if (!*out || !h->job[0] || !h->shape[0]) {
		fprintf(stderr, "sky job frame: --job, --shape and --out are required\n");
		return 2;
	}
	return -1;
}

int sky_job_frame(int argc, char **argv)
{
	const char *out, *defect;
	sky_frame_hdr h;
	int ex = frame_opts(argc, argv, &h, &out, &defect);
	if (ex >= 0)
		return ex;
	size_t n = (size_t)h.shape[0] * h.shape[1] * h.shape[2];
	float *p = malloc(n * sizeof *p);
	size_t cap = SKY_FRAME_HEADER_BYTES + n * sizeof *p;
	unsigned char *buf = malloc(cap);
	int rc = 1;
	sky_diag d;
	sky_diag_clear(&d);
	if (!p || !buf)
		goto exit;
	for (size_t i = 0; i < n; i++)
		p[i] = 0.5f + (float)i;
	int len = sky_frame_pack(NULL, &h, p, n * sizeof *p, buf, cap, &d);
	if (len < 0) {
		fprintf(stderr, "sky job frame: %s\n", d.msg);
		goto exit;
	}
	if (!strcmp(defect, "checksum"))
		buf[SKY_FRAME_HEADER_BYTES + 5] ^= 0x10; /* a bit flips after the CRC was taken */
	else if (!strcmp(defect, "truncated"))
		len -= 7;
	else if (strcmp(defect, "none") != 0) {
		fprintf(stderr, "sky job frame: unknown --defect '%s'\n", defect);
		goto exit;
	}
	if (sky_file_write(out, buf, (size_t)len, 0644) != 0) {
		fprintf(stderr, "sky job frame: cannot write %s\n", out);
		goto exit;
	}
	rc = 0;
exit:
	free(p);
	free(buf);
	return rc;
}
