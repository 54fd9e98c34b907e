#include "sky_boardsets.h"

#include "sky_dataset.h"
#include "sky_file.h"
#include "sky_slice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sky_boardsets_init(sky_boardsets *b) { memset(b, 0, sizeof *b); }

int sky_boardsets_add(sky_boardsets *b, const char *name, const char *path, sky_diag *d)
{
	if (!sky_topic_segment_ok(name))
		return sky_diag_set(d, SKY_EINVAL,
				    "data set name '%s' (file %s): expected 1-%d of [A-Za-z0-9_.-]",
				    name, path, SKY_TOPIC_SEGMENT_MAX);
	if (sky_boardsets_find(b, name))
		return sky_diag_set(d, SKY_EINVAL, "data set '%s' named twice (%s and %s)", name,
				    sky_boardsets_find(b, name)->path, path);
	if (b->n >= SKY_CAPS_MAX_DATASETS)
		return sky_diag_set(d, SKY_ERANGE, "data set '%s' (%s): a board holds at most %d sets",
				    name, path, SKY_CAPS_MAX_DATASETS);
	if (strlen(path) >= SKY_BOARDSETS_PATH_CAP)
		return sky_diag_set(d, SKY_ERANGE, "data set '%s': path longer than %d bytes", name,
				    SKY_BOARDSETS_PATH_CAP - 1);
	sky_dataset ds;
	sky_diag sd;
	sky_ds_init(&ds);
	sky_diag_clear(&sd);
	int rc = sky_ds_open(&ds, path, &sd);
	if (rc) {
		sky_ds_close(&ds);
		return sky_diag_set(d, rc, "data set '%s' (%s): %s", name, path,
				    sd.msg[0] ? sd.msg : sky_strerror(rc));
	}
	sky_boardset *s = &b->s[b->n];
	memset(s, 0, sizeof *s);
	snprintf(s->info.name, sizeof s->info.name, "%s", name);
	snprintf(s->path, sizeof s->path, "%s", path);
	s->info.rows = ds.meta.rows;
	s->info.labels = ds.meta.nlabels;
	s->info.seq = ds.meta.seq;
	s->info.tokenizer = ds.meta.tokenizer_hash;
	sky_ds_close(&ds);
	sky_diag_clear(&sd);
	if ((rc = sky_slice_sha256_file(path, s->info.sha256, NULL, &sd)) != 0)
		return sky_diag_set(d, rc, "data set '%s' (%s): %s", name, path,
				    sd.msg[0] ? sd.msg : sky_strerror(rc));
	b->n++;
	return 0;
}

int sky_boardsets_add_arg(sky_boardsets *b, const char *arg, sky_diag *d)
{
	const char *eq = strchr(arg, '=');
	char name[SKY_TOPIC_SEGMENT_MAX + 2];
	if (!eq || eq == arg || !eq[1])
		return sky_diag_set(d, SKY_EINVAL, "--dataset expects NAME=PATH, got '%s'", arg);
	if ((size_t)(eq - arg) >= sizeof name)
		return sky_diag_set(d, SKY_EINVAL, "--dataset '%s': the name is over %d bytes", arg,
				    SKY_TOPIC_SEGMENT_MAX);
	memcpy(name, arg, (size_t)(eq - arg));
	name[eq - arg] = '\0';
	return sky_boardsets_add(b, name, eq + 1, d);
}

#define SCAN_MAX 64
typedef struct scan_ctx {
	int n;
	char name[SCAN_MAX][256];
} scan_ctx;

static int scan_one(void *ctx, const char *name)
{
	scan_ctx *c = ctx; /* kept without the suffix, so they sort by set name */
	size_t len = strlen(name) - strlen(SKY_BOARDSETS_SUFFIX);
	if (c->n < SCAN_MAX && len < sizeof c->name[0]) {
		memcpy(c->name[c->n], name, len);
		c->name[c->n++][len] = '\0';
	}
	return 0;
}

static int by_name(const void *x, const void *y) { return strcmp(x, y); }

int sky_boardsets_scan(sky_boardsets *b, const char *state_dir, sky_diag *d)
{
	char dir[SKY_BOARDSETS_PATH_CAP], path[SKY_BOARDSETS_PATH_CAP];
	if (snprintf(dir, sizeof dir, "%s/%s", state_dir, SKY_BOARDSETS_DIR) >= (int)sizeof dir)
		return sky_diag_set(d, SKY_ERANGE, "state dir path too long");
	if (!sky_file_is_dir(dir))
		return 0;
	scan_ctx *c = calloc(1, sizeof *c); /* at start, before any arena */
	if (!c)
		return sky_diag_set(d, SKY_ENOMEM, "out of memory listing %s", dir);
	int rc = sky_file_list(dir, SKY_BOARDSETS_SUFFIX, scan_one, c);
	if (rc) {
		rc = sky_diag_set(d, rc, "cannot list %s: %s", dir, sky_strerror(rc));
		goto exit;
	}
	qsort(c->name, (size_t)c->n, sizeof c->name[0], by_name);
	for (int i = 0; i < c->n && rc == 0; i++) {
		const char *name = c->name[i];
		if (snprintf(path, sizeof path, "%s/%.200s%s", dir, name, SKY_BOARDSETS_SUFFIX) >=
		    (int)sizeof path) {
			rc = sky_diag_set(d, SKY_ERANGE, "data set file %s/%s: path too long", dir,
					  c->name[i]);
			break;
		}
		if (!name[0]) {
			rc = sky_diag_set(d, SKY_EINVAL, "data set file %s: no name before %s", path,
					  SKY_BOARDSETS_SUFFIX);
			break;
		}
		rc = sky_boardsets_add(b, name, path, d);
	}
exit:
	free(c);
	return rc;
}

const sky_boardset *sky_boardsets_find(const sky_boardsets *b, const char *name)
{
	for (int i = 0; i < b->n; i++)
		if (strcmp(b->s[i].info.name, name) == 0)
			return &b->s[i];
	return NULL;
}

void sky_boardsets_to_caps(const sky_boardsets *b, sky_caps *c)
{
	c->n_datasets = b->n;
	for (int i = 0; i < b->n; i++)
		c->datasets[i] = b->s[i].info;
}
