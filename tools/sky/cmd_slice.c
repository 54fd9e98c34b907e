/* sky slice: cut a serving stage's slice out of an int8 model file
 * (sky_slice.h), named by its SHA-256 as a board's cache keeps it. */
#include "sky_cli.h"

#include "sky_err.h"
#include "sky_file.h"
#include "sky_opt.h"
#include "sky_slice.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *to)
{
	fprintf(to,
		"usage: sky slice --weights Wq.safetensors --first A --last B --out DIR\n"
		"  writes DIR/<sha256>.safetensors: the tensors of an int8 model (sky quantize)\n"
		"  that half-layers A..B need (the embeddings when A is 0, the pooler and\n"
		"  classifier when B is the last), as a board's slice cache holds them\n"
		"  (<state>/slices/); prints {\"sha256\":..,\"bytes\":..,\"path\":..}\n");
}

int sky_cmd_slice(int argc, char **argv)
{
	const char *w = NULL, *out = NULL;
	long first = -1, last = -1;
	enum { O_WEIGHTS = SKY_OPT_FIRST, O_FIRST, O_LAST, O_OUT };
	static const struct option k_opts[] = {{"weights", required_argument, NULL, O_WEIGHTS},
					       {"first", required_argument, NULL, O_FIRST},
					       {"last", required_argument, NULL, O_LAST},
					       {"out", required_argument, NULL, O_OUT},
					       SKY_OPT_STD,
					       {0}};
	sky_opt op;
	sky_opt_begin(&op, "sky slice", argc, argv, k_opts, 0);
	for (int c; (c = sky_opt_next(&op)) != SKY_OPT_END;) {
		int rc = 0;
		switch (c) {
		case SKY_OPT_HELP:
			usage(stdout);
			return 0;
		case SKY_OPT_VERSION:
			return 0;
		case O_WEIGHTS:
			w = op.arg;
			break;
		case O_OUT:
			out = op.arg;
			break;
		case O_FIRST:
			rc = sky_cli_int("slice", op.name, op.arg, 0, 1 << 20, &first);
			break;
		case O_LAST:
			rc = sky_cli_int("slice", op.name, op.arg, 0, 1 << 20, &last);
			break;
		default:
			return 2;
		}
		if (rc < 0)
			return 2;
	}
	if (sky_opt_no_args(&op) != 0)
		return 2;
	if (!w || !out || first < 0 || last < 0) {
		fprintf(stderr, "sky slice: --weights, --first, --last and --out are required\n");
		usage(stderr);
		return 2;
	}
	char tmp[1024], path[1100], sha[SKY_SLICE_SHA_HEX + 1];
	int64_t bytes = 0;
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_file_mkdirs(out, 0755) != 0) {
		fprintf(stderr, "sky slice: cannot make %s\n", out);
		return 1;
	}
	snprintf(tmp, sizeof tmp, "%s/.cut.safetensors", out);
	int rc = sky_slice_cut(w, (int)first, (int)last, tmp, sha, &bytes, &d);
	if (rc) {
		fprintf(stderr, "sky slice: %s%s%s\n", sky_strerror(rc), d.msg[0] ? ": " : "", d.msg);
		sky_file_remove(tmp);
		return 1;
	}
	snprintf(path, sizeof path, "%s/%s.safetensors", out, sha);
	if (rename(tmp, path) != 0) {
		fprintf(stderr, "sky slice: cannot rename %s to %s\n", tmp, path);
		return 1;
	}
	printf("{\"sha256\":\"%s\",\"bytes\":%lld,\"path\":\"%s\"}\n", sha, (long long)bytes, path);
	return 0;
}
