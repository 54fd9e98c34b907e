/* The checkpoint store and the job log (see sky_ckpt.h). */
#include "sky_ckpt.h"

#include "sky_clock.h"
#include "sky_file.h"
#include "sky_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sky_ckpt_init(sky_ckpt_store *s, const char *state_dir)
{
	memset(s, 0, sizeof *s);
	snprintf(s->dir, sizeof s->dir, "%s", state_dir);
}

sky_ckpt_job *sky_ckpt_find(sky_ckpt_store *s, const char *job)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->job[i].job, job))
			return &s->job[i];
	return NULL;
}

static int part_path(const sky_ckpt_store *s, const char *job, int64_t step, int blk0, char *buf,
		     size_t cap)
{
	int n = snprintf(buf, cap, "%s/ckpt/%s/%lld-%d.safetensors", s->dir, job, (long long)step,
			 blk0);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

/* Removes a step's files and clears it. */
static void drop_step(const sky_ckpt_store *s, const char *job, sky_ckpt_step *st)
{
	char path[700];
	for (int i = 0; st->step > 0 && i < st->n_parts; i++)
		if (part_path(s, job, st->step, st->part[i].blk0, path, sizeof path) == 0)
			sky_file_remove(path);
	memset(st, 0, sizeof *st);
}

sky_ckpt_job *sky_ckpt_begin(sky_ckpt_store *s, const char *job, int64_t epoch, int n_blocks)
{
	sky_ckpt_job *j = sky_ckpt_find(s, job);
	if (!j) {
		if (s->n >= SKY_CKPT_JOBS) {
			/* full: the job whose last checkpoint is oldest makes room (a
			 * finished one, as long as fewer jobs run than the table holds) */
			j = &s->job[0];
			for (int i = 1; i < s->n; i++)
				if (s->job[i].commit_s < j->commit_s)
					j = &s->job[i];
			SKY_INFO("checkpoint store: forgetting job %s (last commit the oldest) for %s",
				 j->job, job);
			for (int i = 0; i < SKY_CKPT_OPEN; i++)
				drop_step(s, j->job, &j->open[i]);
			drop_step(s, j->job, &j->done[0]);
			drop_step(s, j->job, &j->done[1]);
		} else {
			j = &s->job[s->n++];
		}
		memset(j, 0, sizeof *j);
		snprintf(j->job, sizeof j->job, "%s", job);
		j->commit_s = sky_clock_s();
	}
	j->epoch = epoch;
	j->n_blocks = n_blocks;
	for (int i = 0; i < SKY_CKPT_OPEN; i++)
		drop_step(s, job, &j->open[i]);
	return j;
}

int64_t sky_ckpt_last(const sky_ckpt_store *s, const char *job)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->job[i].job, job))
			return s->job[i].done[0].step;
	return 0;
}

int sky_ckpt_log(sky_ckpt_store *s, const char *job, const char *fields)
{
	char path[700], line[1024];
	int n = snprintf(path, sizeof path, "%s/jobs", s->dir);
	if (n < 0 || (size_t)n >= sizeof path)
		return SKY_ERANGE;
	sky_file_mkdirs(path, 0700);
	n = snprintf(path, sizeof path, "%s/jobs/%s.log.jsonl", s->dir, job);
	if (n < 0 || (size_t)n >= sizeof path)
		return SKY_ERANGE;
	n = snprintf(line, sizeof line, "{\"t\":%.3f,%s}\n", (double)sky_clock_unix_ms() / 1e3,
		     fields);
	if (n < 0 || (size_t)n >= sizeof line)
		return SKY_ERANGE;
	return sky_file_append(path, line, (size_t)n, 0644);
}

int sky_ckpt_on_part(sky_ckpt_store *s, const char *job, const char *board,
		     const unsigned char *img, size_t len, double now, int64_t *committed,
		     sky_diag *d)
{
	static sky_ckpt_tensor t[4 * SKY_CKPT_PARTS * 64];
	sky_ckpt_meta m;
	int nt = 0;
	sky_ckpt_job *j = sky_ckpt_find(s, job);
	int rc = sky_ckpt_parse(img, len, &m, t, (int)(sizeof t / sizeof t[0]), &nt, d);
	if (rc) {
		if (j)
			j->refused++;
		return rc;
	}
	if (!j || strcmp(m.job, job) != 0)
		return sky_diag_set(d, SKY_ESTATE, "job %s is not one the store follows (image of %s)",
				    job, m.job);
	if (m.epoch != j->epoch) {
		j->refused++;
		return sky_diag_set(d, SKY_ESTATE,
				    "stale: step %lld of epoch %lld, the job is at epoch %lld",
				    (long long)m.step, (long long)m.epoch, (long long)j->epoch);
	}
	if (m.step <= j->done[0].step) {
		j->refused++;
		return sky_diag_set(d, SKY_ESTATE, "step %lld is at or before the last commit (%lld)",
				    (long long)m.step, (long long)j->done[0].step);
	}
	if (m.blk0 + m.nblk > j->n_blocks || nt != m.nblk * (1 + m.nvec)) {
		j->refused++;
		return sky_diag_set(d, SKY_ESTATE, "blocks %d+%d (%d tensors) do not fit a model of %d",
				    m.blk0, m.nblk, nt, j->n_blocks);
	}
	sky_ckpt_step *st = NULL;
	for (int i = 0; i < SKY_CKPT_OPEN && !st; i++)
		if (j->open[i].step == m.step)
			st = &j->open[i];
	if (!st) { /* a new step: the slot of the oldest open one */
		st = &j->open[0];
		for (int i = 1; i < SKY_CKPT_OPEN; i++)
			if (j->open[i].step < st->step)
				st = &j->open[i];
		if (st->step > 0)
			SKY_WARN("job %s: checkpoint of step %lld given up incomplete (%d of %d blocks)",
				 job, (long long)st->step, st->covered, j->n_blocks);
		drop_step(s, job, st);
		st->step = m.step;
		st->epoch = m.epoch;
	}
	int dup = -1;
	for (int i = 0; i < st->n_parts; i++) {
		const sky_ckpt_part *p = &st->part[i];
		if (p->blk0 == m.blk0 && p->nblk == m.nblk)
			dup = i;
		else if (m.blk0 < p->blk0 + p->nblk && p->blk0 < m.blk0 + m.nblk) {
			j->refused++;
			return sky_diag_set(d, SKY_ESTATE, "blocks %d+%d overlap another part of step %lld",
					    m.blk0, m.nblk, (long long)m.step);
		}
	}
	if (dup < 0 && st->n_parts >= SKY_CKPT_PARTS)
		return sky_diag_set(d, SKY_ESTATE, "step %lld: more than %d parts", (long long)m.step,
				    SKY_CKPT_PARTS);
	char path[700];
	snprintf(path, sizeof path, "%s/ckpt/%s", s->dir, job);
	sky_file_mkdirs(path, 0700);
	if ((rc = part_path(s, job, m.step, m.blk0, path, sizeof path)) != 0 ||
	    (rc = sky_file_write(path, img, len, 0600)) != 0)
		return sky_diag_set(d, rc, "cannot write %s", path);
	if (dup < 0) {
		st->part[st->n_parts++] = (sky_ckpt_part){m.blk0, m.nblk};
		st->covered += m.nblk;
	}
	j->nvec = m.nvec;
	SKY_DEBUG("job %s: checkpoint part of step %lld from %s (blocks %d+%d), %d of %d blocks",
		  job, (long long)m.step, board, m.blk0, m.nblk, st->covered, j->n_blocks);
	if (st->covered < j->n_blocks)
		return 0;
	/* complete: committed; keep it and the one before, drop the rest */
	drop_step(s, job, &j->done[1]);
	j->done[1] = j->done[0];
	j->done[0] = *st;
	memset(st, 0, sizeof *st);
	for (int i = 0; i < SKY_CKPT_OPEN; i++)
		if (j->open[i].step > 0 && j->open[i].step < m.step)
			drop_step(s, job, &j->open[i]);
	j->commits++;
	j->commit_s = now;
	*committed = m.step;
	char fields[200];
	snprintf(fields, sizeof fields, "\"event\":\"commit\",\"epoch\":%lld,\"step\":%lld,\"parts\":%d",
		 (long long)m.epoch, (long long)m.step, j->done[0].n_parts);
	if (sky_ckpt_log(s, job, fields) != 0)
		SKY_WARN("job %s: cannot append to its log in %s/jobs", job, s->dir);
	return 1;
}

int sky_ckpt_image(sky_ckpt_store *s, const char *job, int64_t epoch, int blk0, int nblk,
		   unsigned char **img, size_t *len, sky_diag *d)
{
	sky_ckpt_job *j = sky_ckpt_find(s, job);
	const sky_ckpt_step *st = j ? &j->done[0] : NULL;
	*img = NULL;
	*len = 0;
	if (!st || st->step <= 0)
		return sky_diag_set(d, SKY_ENOTFOUND, "job %s has no complete checkpoint", job);
	sky_file_map maps[SKY_CKPT_PARTS];
	int n_maps = 0, rc = 0, nt = 0;
	const int want = nblk * (1 + j->nvec);
	sky_ckpt_tensor *out = calloc((size_t)want, sizeof *out);
	static sky_ckpt_tensor t[4 * SKY_CKPT_PARTS * 64];
	size_t floats = 0;
	memset(maps, 0, sizeof maps);
	if (!out) {
		rc = sky_diag_set(d, SKY_ENOMEM, "checkpoint image: out of memory");
		goto exit;
	}
	for (int i = 0; i < st->n_parts && !rc; i++) {
		const sky_ckpt_part *p = &st->part[i];
		if (p->blk0 >= blk0 + nblk || p->blk0 + p->nblk <= blk0)
			continue;
		char path[700];
		sky_ckpt_meta m;
		int n = 0;
		part_path(s, job, st->step, p->blk0, path, sizeof path);
		if ((rc = sky_file_map_open(&maps[n_maps], path)) != 0) {
			rc = sky_diag_set(d, SKY_ENOTFOUND, "checkpoint file %s: %s", path,
					  sky_strerror(rc));
			break;
		}
		const sky_file_map *fm = &maps[n_maps++];
		if ((rc = sky_ckpt_parse(fm->data, fm->size, &m, t, (int)(sizeof t / sizeof t[0]), &n,
					 d)) != 0)
			break;
		for (int k = 0; k < n; k++)
			if (t[k].blk >= blk0 && t[k].blk < blk0 + nblk && nt < want) {
				out[nt++] = t[k];
				floats += t[k].n;
			}
	}
	if (!rc && nt != want)
		rc = sky_diag_set(d, SKY_ENOTFOUND, "checkpoint of step %lld holds %d of the %d tensors "
				  "of blocks %d+%d", (long long)st->step, nt, want, blk0, nblk);
	if (!rc) {
		/* parameters first, then each state vector, each in block order: the
		 * order a stage writes them (the parse does not depend on it) */
		for (int a = 1; a < nt; a++)
			for (int b = a; b > 0; b--) {
				const sky_ckpt_tensor *x = &out[b - 1], *y = &out[b];
				if (x->vec > y->vec || (x->vec == y->vec && x->blk > y->blk)) {
					sky_ckpt_tensor tmp = out[b - 1];
					out[b - 1] = out[b];
					out[b] = tmp;
				}
			}
		sky_ckpt_meta m;
		memset(&m, 0, sizeof m);
		snprintf(m.job, sizeof m.job, "%s", job);
		m.epoch = epoch;
		m.step = st->step;
		m.blk0 = blk0;
		m.nblk = nblk;
		m.nvec = j->nvec;
		size_t cap = sky_ckpt_bound(nt, floats);
		if (!(*img = malloc(cap)))
			rc = sky_diag_set(d, SKY_ENOMEM, "checkpoint image: %zu bytes", cap);
		else if ((rc = sky_ckpt_encode(&m, out, nt, *img, cap, len, d)) != 0) {
			free(*img);
			*img = NULL;
		}
	}
exit:
	for (int i = 0; i < n_maps; i++)
		sky_file_map_close(&maps[i]);
	free(out);
	return rc;
}
