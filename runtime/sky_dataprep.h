/* Preparing a data set: rows of a TSV, CSV or JSON Lines file
 * (sky_datarows.h) tokenized by the model's tokenizer (sky_tokenizer.h),
 * labelled, and written as a .skyds file (sky_dataset.h).
 *
 * Labels, in this order:
 *   - a list given (--labels, or another set's names): each label must be
 *     one of the names, or an integer 0..n-1;
 *   - the model's label2id, when config.json names its labels with
 *     anything but HF's defaults (LABEL_0, LABEL_1, ...): the same rule;
 *   - else the file's own: if the first row's label is an integer, every
 *     label must be one (0..255; the names are "0", "1", ...), otherwise
 *     names are collected in first-seen order (at most 256).
 * A bad row (the reader's reasons, an empty text or pair, text or label
 * that is not UTF-8, an unknown label, a label that is no integer where
 * integers are used) is reported to on_bad with its line and reason. With
 * skip_bad they are skipped and counted; without it, reading goes on to
 * report them all and the preparation fails (SKY_EFORMAT), so nothing is
 * written. */
#ifndef SKY_DATAPREP_H
#define SKY_DATAPREP_H

#include "sky_datarows.h"
#include "sky_dataset.h"
#include "sky_err.h"
#include "sky_hfmodel.h"
#include "sky_tokenizer.h"

#include <stddef.h>
#include <stdint.h>

typedef struct sky_prep_opts {
	sky_rows_opts rows;
	int seq;                        /* tokens per row, specials included, 3..SKY_DS_MAX_SEQ */
	int skip_bad;
	const char *const *labels;      /* a list of names to map to (NULL: the model's or the file's) */
	int nlabels;
	void (*on_bad)(void *ctx, long line, const char *reason); /* may be NULL */
	/* every few thousand rows: bytes read of total, rows kept (may be NULL) */
	void (*on_progress)(void *ctx, size_t done, size_t total, int64_t rows);
	void *ctx;
} sky_prep_opts;

/* Zeroes o: seq SKY_HF_DEFAULT_SEQ, the reader's defaults. */
void sky_prep_opts_default(sky_prep_opts *o);

typedef struct sky_prep_result {
	int64_t rows;      /* rows kept */
	int64_t bad;       /* bad rows (skipped, or the reason it failed) */
	int64_t truncated; /* rows cut to seq */
	sky_rows_layout layout;
} sky_prep_result;

/* Prepares buf[0..len) into b (initialised here; freed on failure) with
 * tokenizer t; hc (may be NULL) is the model's config.json: its labels,
 * its vocabulary (which must hold t's ids) and max_position_embeddings
 * (>= seq). Fills b's metadata but the source's name and hash. Returns 0;
 * SKY_EFORMAT (bad rows without skip_bad: d says how many; or none left),
 * SKY_EINVAL / SKY_ERANGE (options, or a model that cannot take the
 * tokenizer or seq), the reader's errors (columns), or SKY_ENOMEM. */
int sky_prep_buf(const sky_tokenizer *t, const sky_hf_config *hc, const char *buf, size_t len,
		 const sky_prep_opts *o, sky_ds_build *b, sky_prep_result *res, sky_diag *d);

/* Maps in_path (the format from o->rows), prepares it, and writes out_path
 * atomically with the source's name and SHA-256 (Mbed TLS): nothing is
 * written when it fails. Returns 0, SKY_ENOTFOUND / SKY_EIO (the input),
 * or the errors of sky_prep_buf and sky_ds_write. */
int sky_prep_file(const sky_tokenizer *t, const sky_hf_config *hc, const char *in_path,
		  const char *out_path, const sky_prep_opts *o, sky_prep_result *res, sky_diag *d);

#endif
