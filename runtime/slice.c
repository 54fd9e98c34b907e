/* Cutting a serving stage's slice out of an int8 model file (sky_slice.h). */
#include "sky_slice.h"

#include "sky_file.h"
#include "sky_planmsg.h"
#include "sky_quant_model.h"
#include "sky_safetensors.h"

#include <mbedtls/sha256.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sky_slice_path(char *buf, size_t cap, const char *state_dir, const char *sha256)
{
	if (!sky_plan_sha256_ok(sha256))
		return SKY_EINVAL;
	int n = snprintf(buf, cap, "%s/" SKY_SLICE_DIR "/%s" SKY_SLICE_SUFFIX, state_dir, sha256);
	return n < 0 || (size_t)n >= cap ? SKY_ERANGE : 0;
}

static void to_hex(const unsigned char h[32], char out[SKY_SLICE_SHA_HEX + 1])
{
	static const char x[] = "0123456789abcdef";
	for (int i = 0; i < 32; i++) {
		out[2 * i] = x[h[i] >> 4];
		out[2 * i + 1] = x[h[i] & 15];
	}
	out[SKY_SLICE_SHA_HEX] = '\0';
}

int sky_slice_sha256_file(const char *path, char sha256[SKY_SLICE_SHA_HEX + 1], int64_t *bytes,
			  sky_diag *d)
{
	sky_file_map m = {0};
	unsigned char h[32];
	int rc = sky_file_map_open(&m, path);
	if (rc)
		return sky_diag_set(d, rc, "%s: cannot read", path);
	if (mbedtls_sha256_ret(m.data ? m.data : (const unsigned char *)"", m.size, h, 0) != 0)
		rc = sky_diag_set(d, SKY_EIO, "%s: SHA-256 failed", path);
	if (!rc) {
		if (sha256)
			to_hex(h, sha256);
		if (bytes)
			*bytes = (int64_t)m.size;
	}
	sky_file_map_close(&m);
	return rc;
}

/* 1 if tensor name belongs to the slice of layers [l0, l1] with or without
 * the embeddings and the head. */
static int wanted(const char *name, int l0, int l1, int embed, int head)
{
	static const char lp[] = "bert.encoder.layer.";
	if (strncmp(name, lp, sizeof lp - 1) == 0) {
		char *end;
		long l = strtol(name + sizeof lp - 1, &end, 10);
		/* l0 > l1: a wrapped range, l0.. and ..l1 (a data owner's ends) */
		int in = l0 <= l1 ? l >= l0 && l <= l1 : l >= l0 || l <= l1;
		return end != name + sizeof lp - 1 && *end == '.' && in;
	}
	if (strncmp(name, "bert.embeddings.", 16) == 0)
		return embed;
	if (strncmp(name, "bert.pooler.", 12) == 0 || strncmp(name, "classifier.", 11) == 0)
		return head;
	return 0;
}

int sky_slice_cut(const char *model_path, int first, int last, const char *out_path,
		  char sha256[SKY_SLICE_SHA_HEX + 1], int64_t *bytes, sky_diag *d)
{
	sky_st_file f;
	sky_st_entry *e = NULL;
	sky_st_meta *meta = NULL;
	char range[64];
	int rc, prec, layers, n = 0;
	sky_st_init(&f);
	if ((rc = sky_st_open(&f, model_path, d)) || (rc = sky_qmodel_probe(&f, &prec, &layers, d)))
		goto exit;
	if (first < 0 || last < 0 || first >= 2 * layers || last >= 2 * layers ||
	    (first > last && first <= last + 1)) {
		rc = sky_diag_set(d, SKY_ERANGE, "slice %d-%d: the model has half-layers 0-%d", first,
				  last, 2 * layers - 1);
		goto exit;
	}
	/* the tables are built once per cut, on the planner or in a tool */
	e = calloc((size_t)f.ntensors, sizeof *e);
	meta = calloc((size_t)f.nmeta + 1, sizeof *meta);
	if (!e || !meta) {
		rc = sky_diag_set(d, SKY_ENOMEM, "slice: out of memory");
		goto exit;
	}
	for (int i = 0; i < f.ntensors; i++) {
		const sky_st_tensor *t = &f.tensors[i];
		int wrap = first > last;
		if (!wanted(t->name, first / 2, last / 2, first == 0 || wrap,
			    last == 2 * layers - 1 || wrap))
			continue;
		e[n].name = t->name;
		e[n].dtype = t->dtype;
		e[n].ndim = t->ndim;
		memcpy(e[n].shape, t->shape, sizeof t->shape);
		e[n].data = t->data;
		n++;
	}
	int nm = 0;
	for (int i = 0; i < f.nmeta; i++)
		if (strcmp(f.meta[i].key, "sky.slice") != 0)
			meta[nm++] = f.meta[i];
	snprintf(range, sizeof range, "%d-%d/%d", first, last, layers);
	meta[nm++] = (sky_st_meta){"sky.slice", range};
	if ((rc = sky_st_write(out_path, e, n, meta, nm, d)) == 0)
		rc = sky_slice_sha256_file(out_path, sha256, bytes, d);
exit:
	free(e);
	free(meta);
	sky_st_close(&f);
	return rc;
}
