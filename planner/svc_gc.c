/* The planner's model and slice stores kept bounded (svc_internal.h).
 * Every GC_EVERY_S seconds: the .part files of uploads that are not in
 * progress any more (a restart forgets them) and sent nothing for
 * SKY_DEPLOY_UPLOAD_IDLE_S are removed; and with --store-max-bytes, while
 * <state>/models and <state>/slices hold more than that, the least recently
 * used model or slice (its mtime, touched on every use) that no queued or
 * followed job needs and that was not used within GC_KEEP_RECENT_S is
 * removed. */
#include "svc_internal.h"

#include "sky_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GC_EVERY_S 30.0
/* a model just uploaded waits for its job's submit: never removed sooner */
#define GC_KEEP_RECENT_S 600.0
#define GC_MAX_FILES 1024

typedef struct gc_file {
	char dir[8];  /* "models" or "slices" */
	char name[80];
	long long bytes;
	double mtime;
} gc_file;

typedef struct gc_walk {
	svc *s;
	const char *dir;
	gc_file *f;
	int n;
	long long total;
	double now_unix;
} gc_walk;

static int sha_of(const char *name, char hex[65])
{
	if (strlen(name) < 64)
		return -1;
	memcpy(hex, name, 64);
	hex[64] = '\0';
	return 0;
}

/* Is the model or slice named hex needed by a queued or followed job, or
 * an upload or transfer in progress? */
static int in_use(const svc *s, const char *dir, const char *hex)
{
	int model = !strcmp(dir, "models");
	for (int k = 0; model && k < s->submit.n_pending; k++)
		if (!strcmp(s->submit.pending[k].job.req.weights, hex))
			return 1;
	for (int i = 0; i < s->follow.n_run; i++) {
		const run_job *r = &s->follow.run[i];
		if (model && !strcmp(r->job.req.weights, hex))
			return 1;
		for (int k = 0; !model && k < r->n_stages; k++)
			if (!strcmp(r->slice[k].sha256, hex))
				return 1;
	}
	for (int i = 0; i < SKY_DEPLOY_MAX_UPLOADS; i++) {
		char h[65];
		sky_sha256_hex(s->deploy.up[i].sha, h);
		if (model && s->deploy.up[i].active && !strcmp(h, hex))
			return 1;
	}
	for (int i = 0; !model && i < SKY_DEPLOY_MAX_XFERS; i++) {
		char h[65];
		sky_sha256_hex(s->deploy.x[i].sha, h);
		if (s->deploy.x[i].active && !strcmp(h, hex))
			return 1;
	}
	return 0;
}

static int each_part(void *ctx, const char *name)
{
	gc_walk *w = ctx;
	char path[800], hex[65];
	snprintf(path, sizeof path, "%s/models/%s", w->s->state_dir, name);
	if (sha_of(name, hex) != 0 || w->now_unix - sky_file_mtime(path) < SKY_DEPLOY_UPLOAD_IDLE_S ||
	    in_use(w->s, "models", hex))
		return 0;
	if (sky_file_remove(path) == 0)
		SKY_INFO("removed %s: an upload abandoned (nothing sent for %.0f s)", path,
			 w->now_unix - sky_file_mtime(path));
	return 0;
}

static int each_file(void *ctx, const char *name)
{
	gc_walk *w = ctx;
	char path[800];
	if (w->n >= GC_MAX_FILES || strlen(name) >= sizeof w->f[0].name)
		return 0;
	snprintf(path, sizeof path, "%s/%s/%s", w->s->state_dir, w->dir, name);
	gc_file *f = &w->f[w->n];
	f->bytes = sky_file_size(path);
	if (f->bytes < 0)
		return 0;
	f->mtime = sky_file_mtime(path);
	snprintf(f->dir, sizeof f->dir, "%s", w->dir);
	snprintf(f->name, sizeof f->name, "%s", name);
	w->total += f->bytes;
	w->n++;
	return 0;
}

static int by_mtime(const void *a, const void *b)
{
	double x = ((const gc_file *)a)->mtime, y = ((const gc_file *)b)->mtime;
	return x < y ? -1 : x > y;
}

void svc_gc_run(svc *s, double now_unix)
{
	static gc_file files[GC_MAX_FILES];
	char dir[700];
	gc_walk w = {.s = s, .f = files, .now_unix = now_unix};
	snprintf(dir, sizeof dir, "%s/models", s->state_dir);
	sky_file_list(dir, ".part", each_part, &w);
	if (s->o->store_max_bytes <= 0)
		return;
	static const char *const dirs[] = {"models", "slices"};
	for (int i = 0; i < 2; i++) {
		w.dir = dirs[i];
		snprintf(dir, sizeof dir, "%s/%s", s->state_dir, dirs[i]);
		sky_file_list(dir, ".safetensors", each_file, &w);
	}
	if (w.total <= s->o->store_max_bytes)
		return;
	qsort(files, (size_t)w.n, sizeof files[0], by_mtime);
	for (int i = 0; i < w.n && w.total > s->o->store_max_bytes; i++) {
		char hex[65], path[800];
		if (sha_of(files[i].name, hex) != 0 || now_unix - files[i].mtime < GC_KEEP_RECENT_S ||
		    in_use(s, files[i].dir, hex))
			continue;
		snprintf(path, sizeof path, "%s/%s/%s", s->state_dir, files[i].dir, files[i].name);
		if (sky_file_remove(path) != 0)
			continue;
		w.total -= files[i].bytes;
		if (!strcmp(files[i].dir, "models")) { /* and the note of its uploader */
			snprintf(path, sizeof path, "%s/models/%s.op", s->state_dir, hex);
			sky_file_remove(path);
		}
		SKY_INFO("removed %s (%lld bytes, least recently used): the store holds more than "
			 "--store-max-bytes %lld",
			 path, files[i].bytes, (long long)s->o->store_max_bytes);
	}
	if (w.total > s->o->store_max_bytes)
		SKY_WARN("the model and slice store holds %lld bytes, above --store-max-bytes %lld: "
			 "the rest is in use or was used in the last %.0f s",
			 w.total, (long long)s->o->store_max_bytes, GC_KEEP_RECENT_S);
}

void svc_gc_tick(svc *s, double now)
{
	if (now < s->gc_next)
		return;
	s->gc_next = now + GC_EVERY_S;
	svc_gc_run(s, (double)time(NULL));
}
