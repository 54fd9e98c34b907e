/* The data sets a board holds: named on skyd's command line (--dataset
 * NAME=PATH) or found in <state>/datasets/ (NAME.skyds), each opened and
 * checked once at start (sky_ds_open) and hashed, so the capability report
 * can name them (sky_caps_dataset: name, rows, labels, seq, the file's
 * SHA-256, the tokenizer's hash) and a training stage can find the file a
 * plan names. Rows never leave this table's files: only the summary is
 * reported. */
#ifndef SKY_BOARDSETS_H
#define SKY_BOARDSETS_H

#include "sky_caps.h"
#include "sky_err.h"

#define SKY_BOARDSETS_DIR "datasets"  /* under the state dir */
#define SKY_BOARDSETS_SUFFIX ".skyds"
#define SKY_BOARDSETS_PATH_CAP 1024

typedef struct sky_boardset {
	sky_caps_dataset info;
	char path[SKY_BOARDSETS_PATH_CAP];
} sky_boardset;

typedef struct sky_boardsets {
	int n;
	sky_boardset s[SKY_CAPS_MAX_DATASETS];
} sky_boardsets;

/* Zeroes b. Cannot fail. */
void sky_boardsets_init(sky_boardsets *b);

/* Opens and checks the set at path, hashes it and adds it as name.
 * Returns 0, or SKY_EINVAL (a name that is not 1-64 of [A-Za-z0-9_.-], or
 * already taken), SKY_ERANGE (more than SKY_CAPS_MAX_DATASETS sets), or
 * sky_ds_open's errors; d names the set and its file. */
int sky_boardsets_add(sky_boardsets *b, const char *name, const char *path, sky_diag *d);

/* Splits "NAME=PATH" and adds it (sky_boardsets_add). Returns its codes, or
 * SKY_EINVAL when there is no '=' or either side is empty. */
int sky_boardsets_add_arg(sky_boardsets *b, const char *arg, sky_diag *d);

/* Adds every <state_dir>/datasets/NAME.skyds, in name order. A missing
 * folder is no error. Returns 0 or sky_boardsets_add's first error. */
int sky_boardsets_scan(sky_boardsets *b, const char *state_dir, sky_diag *d);

/* The set called name, or NULL. */
const sky_boardset *sky_boardsets_find(const sky_boardsets *b, const char *name);

/* Copies the summaries into c (c->n_datasets, c->datasets). Cannot fail. */
void sky_boardsets_to_caps(const sky_boardsets *b, sky_caps *c);

#endif
