/* Slices of an int8 model: the part of a `sky quantize` file one serving
 * stage needs (the serving contract's "slice file").
 *
 * A slice of half-layers [first, last] of a model of L layers is a
 * safetensors file holding exactly the model file's tensors of every
 * encoder layer the range touches (layers first/2 .. last/2, named as in
 * the full model, "bert.encoder.layer.<i>.*"), plus "bert.embeddings.*"
 * when first == 0 and "bert.pooler.*" and "classifier.*" when
 * last == 2L - 1, with the model file's metadata and a "sky.slice" entry
 * "<first>-<last>/<L>". The same model and range always give the same
 * bytes, so the planner and a board agree on its SHA-256. A board keeps
 * it as <state>/slices/<sha256>.safetensors (SKY_SLICE_DIR). */
#ifndef SKY_SLICE_H
#define SKY_SLICE_H

#include "sky_err.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_SLICE_DIR "slices"
#define SKY_SLICE_SUFFIX ".safetensors"
#define SKY_SLICE_SHA_HEX 64

/* The same cut serves training (issue 20: a fine-tuning job's stages
 * start from the checkpoint): an fp32 model file is cut as an int8 one.
 * first > last names a wrapped range, half-layers [first, 2L-1] and
 * [0, last] with the embeddings and the head: a data owner's two ends in
 * one slice (first must be above last + 1).
 *
 * Cuts the slice of half-layers [first, last] from the int8 model file at
 * model_path into out_path (written atomically), and returns its SHA-256
 * (lower-case hex, NUL-terminated) and size. sha256 and bytes may be NULL.
 * Returns 0, or SKY_ENOTFOUND / SKY_EFORMAT (no such file, not an int8
 * model: d says what), SKY_ERANGE (the range is outside [0, 2L-1]),
 * SKY_ENOMEM, SKY_EIO. */
int sky_slice_cut(const char *model_path, int first, int last, const char *out_path,
		  char sha256[SKY_SLICE_SHA_HEX + 1], int64_t *bytes, sky_diag *d);

/* SHA-256 of the file at path as lower-case hex, and its size. Returns 0,
 * SKY_ENOTFOUND or SKY_EIO. */
int sky_slice_sha256_file(const char *path, char sha256[SKY_SLICE_SHA_HEX + 1], int64_t *bytes,
			  sky_diag *d);

/* "<state_dir>/slices/<sha256>.safetensors" into buf. Returns 0, SKY_EINVAL
 * (sha256 is not 64 lower-case hex digits) or SKY_ERANGE. */
int sky_slice_path(char *buf, size_t cap, const char *state_dir, const char *sha256);

#endif
