/* Prepared data sets (.skyds): tokenized, labelled rows in one safetensors
 * file, written once by sky data prepare and read by training, evaluation
 * and boards (mapped, never copied).
 *
 * Tensors (all I32, little-endian, rows R, sequence length S):
 *   input_ids       (R, S)  token ids, [CLS] a [SEP] (b [SEP]) then [PAD]
 *   token_type_ids  (R, S)  0 for a, 1 for b, 0 for padding
 *   attention_mask  (R, S)  1 over the tokens, then 0 over the padding
 *   labels          (R)     class ids, 0..L-1
 * Metadata (safetensors "__metadata__", strings):
 *   format "sky-dataset", version "1", rows, seq, labels (a JSON array of
 *   the L names, id order), label_source ("model": the model's label2id,
 *   "given": a list the user gave, "data": collected in first-seen order,
 *   "integer": the file's own integers), source (the input's file name),
 *   source_sha256 (64 hex digits of the input's bytes), tokenizer_hash (8
 *   hex digits, sky_tokenizer.hash), skipped (bad rows skipped), truncated
 *   (rows cut to S).
 * Opening checks all of it: the metadata, the shapes, every label below L,
 * every mask a run of 1s (at least 2) then 0s, type ids 0 or 1, ids >= 0. */
#ifndef SKY_DATASET_H
#define SKY_DATASET_H

#include "sky_err.h"
#include "sky_safetensors.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_DS_MAX_LABELS 256 /* as SKY_HF_MAX_LABELS */
#define SKY_DS_LABEL_CAP 64   /* bytes of a label name, NUL included (as SKY_HF_LABEL_CAP) */
#define SKY_DS_MAX_SEQ 8192   /* tokens per row */
#define SKY_DS_NAME_CAP 128   /* bytes of the source's file name, NUL included */
#define SKY_DS_FORMAT "sky-dataset"
#define SKY_DS_VERSION "1"

/* What a set says about itself (the metadata). */
typedef struct sky_ds_meta {
	int64_t rows;
	int seq;
	int nlabels;
	char label[SKY_DS_MAX_LABELS][SKY_DS_LABEL_CAP];
	char label_source[16];
	char source[SKY_DS_NAME_CAP];
	char source_sha256[65];
	uint32_t tokenizer_hash;
	int64_t skipped, truncated;
} sky_ds_meta;

/* A set being built, in heap arrays that grow (rows x seq each). */
typedef struct sky_ds_build {
	sky_ds_meta meta;
	int32_t *input_ids, *token_type_ids, *attention_mask, *labels;
	int64_t cap; /* rows the arrays hold */
} sky_ds_build;

/* Zeroes b for rows of seq tokens. Cannot fail. */
void sky_ds_build_init(sky_ds_build *b, int seq);
/* Room for one more row: returns 0 and points ids, types and mask at row
 * b->meta.rows (not counted until sky_ds_build_commit), or SKY_ENOMEM /
 * SKY_ERANGE (over 2^31 - 1 rows). */
int sky_ds_build_next(sky_ds_build *b, int32_t **ids, int32_t **types, int32_t **mask);
/* Counts the row sky_ds_build_next gave, with its label. */
void sky_ds_build_commit(sky_ds_build *b, int32_t label);
/* Frees the arrays. NULL-safe; may be called twice. */
void sky_ds_build_free(sky_ds_build *b);

/* Writes b to path atomically (a temporary file, then rename: a reader
 * never sees half a set, and a failure leaves what was there). Returns 0,
 * SKY_EINVAL (no rows, no labels, a label out of range) or the
 * sky_st_write errors. */
int sky_ds_write(const char *path, const sky_ds_build *b, sky_diag *d);

/* A set opened for reading: views into the mapping. */
typedef struct sky_dataset {
	sky_st_file st;
	sky_ds_meta meta;
	const int32_t *input_ids;      /* (rows, seq) */
	const int32_t *token_type_ids; /* (rows, seq) */
	const int32_t *attention_mask; /* (rows, seq) */
	const int32_t *labels;         /* (rows) */
} sky_dataset;

/* Zeroes ds. Cannot fail. */
void sky_ds_init(sky_dataset *ds);
/* Maps and validates path. Returns 0; SKY_ENOTFOUND, SKY_EIO, or
 * SKY_EFORMAT / SKY_ERANGE with d naming the field, tensor or row. */
int sky_ds_open(sky_dataset *ds, const char *path, sky_diag *d);
/* Same over len bytes in memory, which must outlive ds. */
int sky_ds_parse(sky_dataset *ds, const void *bytes, size_t len, sky_diag *d);
/* Unmaps. NULL-safe; may be called twice. */
void sky_ds_close(sky_dataset *ds);

/* Row i (0 <= i < rows) as views; len is its tokens before padding. */
typedef struct sky_ds_row {
	const int32_t *ids, *types, *mask;
	int32_t label;
	int len;
} sky_ds_row;
/* Returns 0 or SKY_ERANGE (i out of range). */
int sky_ds_row_get(const sky_dataset *ds, int64_t i, sky_ds_row *out);

/* Counts over the rows, for sky data info. */
typedef struct sky_ds_stats {
	int64_t count[SKY_DS_MAX_LABELS]; /* rows per label */
	int64_t pairs;                    /* rows holding a second text */
	int64_t full;                     /* rows with no padding (length == seq) */
	int len_min, len_max, len_p50, len_p95;
	double len_mean;
} sky_ds_stats;
/* Fills st from ds. Cannot fail on a set sky_ds_open accepted. */
void sky_ds_stats_get(const sky_dataset *ds, sky_ds_stats *st);

#endif
