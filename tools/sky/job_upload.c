#include "job_upload.h"

#include "quant_cli.h"

#include "sky_chunk.h"
#include "sky_file.h"
#include "sky_quant_model.h"
#include "sky_safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sky_job_model_prepare(const char *weights, const char *tmp_path, sky_job_req *j,
			  char *int8_path, size_t cap, int *made, sky_diag *d)
{
	sky_st_file f;
	int rc, prec = 0, layers = 0;
	*made = 0;
	sky_st_init(&f);
	if ((rc = sky_st_open(&f, weights, d)) != 0 || (rc = sky_qmodel_probe(&f, &prec, &layers, d)))
		goto exit;
	const char *name = sky_st_meta_get(&f, "sky_model");
	if (!j->model[0] && name)
		snprintf(j->model, sizeof j->model, "%s", name);
	if (!j->model[0]) {
		rc = sky_diag_set(d, SKY_EINVAL, "%s names no model (metadata \"sky_model\"); use --model",
				  weights);
		goto exit;
	}
	if (!j->layers)
		j->layers = layers;
	if (prec == SKY_PREC_INT8) {
		snprintf(int8_path, cap, "%s", weights);
		goto exit;
	}
	/* fp32: `sky quantize` with its defaults, at the job's sequence length */
	sky_quant_cli_task t = {.model = j->model, .seq = j->seq, .batch = 0, .seed = 1};
	sky_st_close(&f);
	if ((rc = sky_quantize_file(weights, tmp_path, 8, &t, SKY_QUANT_QUIET)) != 0) {
		rc = sky_diag_set(d, rc, "%s could not be quantised (see above)", weights);
		goto exit;
	}
	snprintf(int8_path, cap, "%s", tmp_path);
	*made = 1;
exit:
	sky_st_close(&f);
	return rc;
}

int sky_upload_sha(const char *path, const sky_upload_opts *o, unsigned char sha[32], sky_diag *d)
{
	if (o->claim_sha256) {
		if (sky_sha256_parse(o->claim_sha256, sha) != 0)
			return sky_diag_set(d, SKY_EFORMAT, "--claim-sha256 must be 64 hex digits");
		return 0;
	}
	int rc = sky_sha256_file(path, sha, NULL);
	return rc ? sky_diag_set(d, rc, "%s: %s", path, sky_strerror(rc)) : 0;
}

int sky_upload(sky_mqtt *m, const char *topic, const char *path, const unsigned char sha[32],
	       const sky_upload_opts *o, sky_diag *d)
{
	sky_file_map map;
	memset(&map, 0, sizeof map);
	uint32_t cb = o->chunk_bytes ? o->chunk_bytes : SKY_CHUNK_DEFAULT_BYTES;
	int rc = sky_file_map_open(&map, path);
	if (rc)
		return sky_diag_set(d, rc, "%s: %s", path, sky_strerror(rc));
	unsigned char *msg = malloc(SKY_CHUNK_HEADER_BYTES + cb); /* a CLI's one buffer */
	uint32_t total = sky_chunk_count(map.size, cb);
	int sent = 0, shown = -1;
	if (!msg) {
		rc = sky_diag_set(d, SKY_ENOMEM, "upload: out of memory");
		goto exit;
	}
	for (uint32_t i = 0; i < total; i++) {
		if (o->answered && o->answered(o->ctx))
			break; /* the planner has it already, or refused it */
		int n = sky_chunk_encode(SKY_CHUNK_MODEL, map.data, map.size, sha, cb, i, msg,
					 SKY_CHUNK_HEADER_BYTES + cb);
		if (n <= 0) {
			rc = sky_diag_set(d, SKY_EINVAL, "upload: chunk %u cannot be encoded", i);
			goto exit;
		}
		if ((long)i == o->corrupt_chunk && n > (int)SKY_CHUNK_HEADER_BYTES)
			msg[SKY_CHUNK_HEADER_BYTES] ^= 0x01; /* after its hash was taken */
		if ((rc = sky_mqtt_publish(m, topic, msg, (size_t)n, 1, 0, d)) != 0)
			goto exit;
		sent++;
		/* the broker takes a window of chunks before more are queued */
		if ((i + 1) % SKY_UPLOAD_WINDOW == 0)
			sky_mqtt_flush(m, 30000);
		int pct = (int)(100.0 * (i + 1) / total);
		if (o->progress && total >= 8 && pct / 10 != shown) {
			shown = pct / 10;
			fprintf(stderr, "sky job submit: uploading the model: %3d%% (%u of %u chunks, %.1f of "
					"%.1f MiB)\n",
				pct, i + 1, total, (double)(i + 1 < total ? (uint64_t)(i + 1) * cb : map.size) / 1048576.0,
				map.size / 1048576.0);
		}
	}
	rc = sent;
exit:
	free(msg);
	sky_file_map_close(&map);
	return rc;
}
