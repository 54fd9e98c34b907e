/* The model of an infer job, from the operator's side (`sky job submit
 * --task infer --weights F`, cmd_job.c): made int8 if it is fp32 (with
 * `sky quantize`'s calibration), then sent to the planner in hashed
 * chunks (sky_chunk.h) on sky/v1/jobs/<op>/weights (planner/sky_deploy.h
 * says what the planner does with them and how it answers). */
#ifndef SKY_JOB_UPLOAD_H
#define SKY_JOB_UPLOAD_H

#include "sky_err.h"
#include "sky_mqtt.h"
#include "sky_service.h"

#include <stddef.h>
#include <stdint.h>

/* Reads the weights file: an int8 model goes as is (int8_path = weights),
 * an fp32 one (sky train --save) is quantised into tmp_path first (then
 * int8_path = tmp_path and *made = 1), calibrated on the job's seq and the
 * model's batch with seed 1 and 8 micro-batches, as `sky quantize` does by
 * default. Fills j->model from the file's "sky_model" metadata and
 * j->layers from its layer count when they are not set. Returns 0, or an
 * error with d saying what. */
int sky_job_model_prepare(const char *weights, const char *tmp_path, sky_job_req *j,
			  char *int8_path, size_t cap, int *made, sky_diag *d);

/* Chunks the upload sends at most before it waits for the broker to take
 * them (pipelined: never one at a time) */
#define SKY_UPLOAD_WINDOW 32

typedef struct sky_upload_opts {
	uint32_t chunk_bytes; /* 0: SKY_CHUNK_DEFAULT_BYTES */
	long corrupt_chunk;   /* tests: >= 0 flips a byte of that chunk after hashing it */
	const char *claim_sha256; /* tests: name this hash instead of the file's */
	int progress;         /* 1: progress lines on stderr (large files) */
	int (*answered)(void *ctx); /* stop early once the planner has answered */
	void *ctx;
} sky_upload_opts;

/* The hash the upload names (the file's, or claim_sha256): into sha.
 * Returns 0, SKY_ENOTFOUND / SKY_EIO (file) or SKY_EFORMAT (claim). */
int sky_upload_sha(const char *path, const sky_upload_opts *o, unsigned char sha[32], sky_diag *d);

/* Publishes every chunk of the file at path on topic (QoS 1). Returns the
 * chunks sent, or SKY_ENET / SKY_EIO with d saying what. */
int sky_upload(sky_mqtt *m, const char *topic, const char *path, const unsigned char sha[32],
	       const sky_upload_opts *o, sky_diag *d);

#endif
