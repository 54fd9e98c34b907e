/* The checkpoint store and the job log (see sky_ckpt.h). */
#include "sky_ckpt.h"

#include "sky_clock.h"
#include "sky_file.h"
#include "sky_json.h"
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

static const char *const REFUSAL[SKY_CKPT_R_N] = {
	[SKY_CKPT_R_NONE] = "none",     [SKY_CKPT_R_JOB] = "job",     [SKY_CKPT_R_SENDER] = "sender",
	[SKY_CKPT_R_FORMAT] = "format", [SKY_CKPT_R_STALE] = "stale", [SKY_CKPT_R_STEP] = "step",
	[SKY_CKPT_R_BLOCKS] = "blocks", [SKY_CKPT_R_OPEN] = "open_full", [SKY_CKPT_R_HASH] = "hash",
	[SKY_CKPT_R_IO] = "io",
};

const char *sky_ckpt_refusal_name(int r)
{
	return r >= 0 && r < SKY_CKPT_R_N ? REFUSAL[r] : "?";
}

int sky_ckpt_schedule(sky_ckpt_store *s, const char *job, int64_t steps, int every)
{
	sky_ckpt_job *j = sky_ckpt_find(s, job);
	if (!j)
		return SKY_ENOTFOUND;
	j->steps = steps > 0 ? steps : 0;
	j->every = every > 0 ? every : 0;
	return 0;
}

int sky_ckpt_ask(sky_ckpt_store *s, const char *job, int64_t step)
{
	sky_ckpt_job *j = sky_ckpt_find(s, job);
	if (!j)
		return SKY_ENOTFOUND;
	j->asked = step > 0 ? step : 0;
	return 0;
}

void sky_ckpt_stage_blocks(int first, int last, int layers, int *blk0, int *nblk)
{
	*blk0 = first == 0 ? 0 : 1 + first;
	*nblk = last - first + 1 + (first == 0) + (last == 2 * layers - 1);
}

static int part_path(const sky_ckpt_store *s, const char *job, int64_t step, int blk0, char *buf,
		     size_t cap)
{
	int n = snprintf(buf, cap, "%s/ckpt/%s/%lld-%d.safetensors", s->dir, job, (long long)step,
			 blk0);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

/* <state>/ckpt/<job>/index.json. Returns 0 or SKY_ERANGE. */
static int index_path(const sky_ckpt_store *s, const char *job, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s/ckpt/%s/" SKY_CKPT_INDEX_FILE, s->dir, job);
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
			char path[700];
			if (index_path(s, j->job, path, sizeof path) == 0)
				sky_file_remove(path);
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
	if (sky_ckpt_save(s, j) != 0)
		SKY_WARN("job %s: cannot save its checkpoint index in %s/ckpt", job, s->dir);
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

/* Counts a refusal of j (may be NULL) by reason r into *reason; returns rc. */
static int refuse(sky_ckpt_job *j, int r, int *reason, int rc)
{
	if (j) {
		j->refused++;
		j->refused_by[r]++;
	}
	if (reason)
		*reason = r;
	return rc;
}

/* The highest step a part of j may have now: SKY_CKPT_AHEAD checkpoint
 * intervals past the last commit, and never past the job's last step. */
static int64_t step_limit(const sky_ckpt_job *j)
{
	int64_t last = j->done[0].step;
	int64_t hi = last + (j->every > 0 ? (int64_t)SKY_CKPT_AHEAD * j->every : SKY_CKPT_AHEAD_STEPS);
	if (j->asked > hi)
		hi = j->asked;
	return j->steps > 0 && hi > j->steps ? j->steps : hi;
}

/* Whether part m (from `from`, whose blocks are [blk0, blk0 + nblk))
 * belongs to job j as it is now: its epoch, a step after the last commit
 * within the window and of the schedule, exactly the sender's blocks
 * inside the model. Header only: nothing hashed yet. Returns 0 or a
 * refusal (counted) with d saying why. */
static int check_part(sky_ckpt_job *j, const sky_ckpt_meta *m, const char *board, int blk0,
		      int nblk, int *reason, sky_diag *d)
{
	if (m->epoch != j->epoch)
		return refuse(j, SKY_CKPT_R_STALE, reason,
			      sky_diag_set(d, SKY_ESTATE,
					   "stale: step %lld of epoch %lld, the job is at epoch %lld",
					   (long long)m->step, (long long)m->epoch, (long long)j->epoch));
	if (m->step <= j->done[0].step)
		return refuse(j, SKY_CKPT_R_STEP, reason,
			      sky_diag_set(d, SKY_ESTATE,
					   "step %lld is at or before the last commit (%lld)",
					   (long long)m->step, (long long)j->done[0].step));
	int64_t hi = step_limit(j);
	if (m->step > hi)
		return refuse(j, SKY_CKPT_R_STEP, reason,
			      sky_diag_set(d, SKY_ESTATE,
					   "step %lld is past the job's window: the last commit is "
					   "%lld, a part may be of step %lld at most",
					   (long long)m->step, (long long)j->done[0].step, (long long)hi));
	if (j->every > 0 && m->step % j->every != 0 && m->step != j->steps && m->step != j->asked)
		return refuse(j, SKY_CKPT_R_STEP, reason,
			      sky_diag_set(d, SKY_ESTATE,
					   "step %lld is not one the job checkpoints at (every %d of "
					   "%lld steps%s)",
					   (long long)m->step, j->every, (long long)j->steps,
					   j->asked ? ", or the one asked" : ""));
	if (m->blk0 + m->nblk > j->n_blocks)
		return refuse(j, SKY_CKPT_R_BLOCKS, reason,
			      sky_diag_set(d, SKY_ESTATE, "blocks %d+%d do not fit a model of %d",
					   m->blk0, m->nblk, j->n_blocks));
	if (m->blk0 != blk0 || m->nblk != nblk)
		return refuse(j, SKY_CKPT_R_BLOCKS, reason,
			      sky_diag_set(d, SKY_ESTATE,
					   "blocks %d+%d are not board %s's: the plan gives it %d+%d",
					   m->blk0, m->nblk, board, blk0, nblk));
	return 0;
}

/* Whether open step o may be given up for a part of step `step` from the
 * board holding blocks from blk0: every board with a part in o (a part's
 * blk0 names its board within an epoch) has a part in a newer open step,
 * or is that board, past o. */
static int given_up(const sky_ckpt_job *j, const sky_ckpt_step *o, int64_t step, int blk0)
{
	if (o->step <= 0)
		return 1;
	if (o->step >= step)
		return 0;
	for (int i = 0; i < o->n_parts; i++) {
		int b = o->part[i].blk0, past = b == blk0;
		for (int k = 0; k < SKY_CKPT_OPEN && !past; k++) {
			const sky_ckpt_step *n = &j->open[k];
			for (int p = 0; n->step > o->step && p < n->n_parts && !past; p++)
				past = n->part[p].blk0 == b;
		}
		if (!past)
			return 0;
	}
	return 1;
}

/* The open step m->step of job j: the one being gathered, or for a new
 * step a free slot, or the oldest open one its boards have moved past
 * (given up incomplete). NULL when every open step is still awaited. */
static sky_ckpt_step *open_step(sky_ckpt_store *s, sky_ckpt_job *j, const char *job,
				const sky_ckpt_meta *m)
{
	sky_ckpt_step *st = NULL;
	for (int i = 0; i < SKY_CKPT_OPEN && !st; i++)
		if (j->open[i].step == m->step)
			st = &j->open[i];
	if (st)
		return st;
	/* a free slot (step 0) first, else the oldest its boards gave up */
	for (int i = 0; i < SKY_CKPT_OPEN; i++)
		if (given_up(j, &j->open[i], m->step, m->blk0) && (!st || j->open[i].step < st->step))
			st = &j->open[i];
	if (!st)
		return NULL;
	if (st->step > 0)
		SKY_WARN("job %s: checkpoint of step %lld given up incomplete (%d of %d blocks)", job,
			 (long long)st->step, st->covered, j->n_blocks);
	drop_step(s, job, st);
	st->step = m->step;
	st->epoch = m->epoch;
	return st;
}

/* Step st of job j (part m its last) is complete: committed at now into
 * *committed; keep it and the one before, drop the rest. Returns 1. */
static int commit_step(sky_ckpt_store *s, sky_ckpt_job *j, sky_ckpt_step *st, const char *job,
		       const sky_ckpt_meta *m, double now, int64_t *committed)
{
	/* The index is saved before the commit is logged and before older
	 * files go, so a crash in between leaves a commit the restart can log
	 * (sky_ckpt_restore), never a logged commit without its files. */
	sky_ckpt_step gone = j->done[1];
	j->done[1] = j->done[0];
	j->done[0] = *st;
	memset(st, 0, sizeof *st);
	sky_ckpt_step older[SKY_CKPT_OPEN];
	int n_older = 0;
	for (int i = 0; i < SKY_CKPT_OPEN; i++)
		if (j->open[i].step > 0 && j->open[i].step < m->step) {
			older[n_older++] = j->open[i];
			memset(&j->open[i], 0, sizeof j->open[i]);
		}
	j->commits++;
	j->commit_s = now;
	*committed = m->step;
	if (sky_ckpt_save(s, j) != 0)
		SKY_WARN("job %s: cannot save its checkpoint index in %s/ckpt", job, s->dir);
	drop_step(s, job, &gone);
	for (int i = 0; i < n_older; i++)
		drop_step(s, job, &older[i]);
	char fields[200];
	snprintf(fields, sizeof fields, "\"event\":\"commit\",\"epoch\":%lld,\"step\":%lld,\"parts\":%d",
		 (long long)m->epoch, (long long)m->step, j->done[0].n_parts);
	if (sky_ckpt_log(s, job, fields) != 0)
		SKY_WARN("job %s: cannot append to its log in %s/jobs", job, s->dir);
	return 1;
}

int sky_ckpt_on_part_from(sky_ckpt_store *s, const char *job, const sky_ckpt_sender *from,
			  const unsigned char *img, size_t len, double now, int64_t *committed,
			  int *reason, sky_diag *d)
{
	static sky_ckpt_tensor t[4 * SKY_CKPT_PARTS * 64];
	sky_ckpt_meta m;
	int nt = 0;
	const char *board = from && from->board ? from->board : "?";
	if (reason)
		*reason = SKY_CKPT_R_NONE;
	/* who and which job first: nothing of a stranger's message is parsed */
	sky_ckpt_job *j = sky_ckpt_find(s, job);
	if (!j)
		return refuse(NULL, SKY_CKPT_R_JOB, reason,
			      sky_diag_set(d, SKY_ESTATE, "job %s is not one the store follows", job));
	if (!from || from->nblk <= 0 || from->blk0 < 0)
		return refuse(j, SKY_CKPT_R_SENDER, reason,
			      sky_diag_set(d, SKY_EAUTH,
					   "board %s holds no blocks in the plan of job %s epoch %lld",
					   board, job, (long long)j->epoch));
	int rc = sky_ckpt_parse_header(img, len, &m, t, (int)(sizeof t / sizeof t[0]), &nt, d);
	if (rc)
		return refuse(j, SKY_CKPT_R_FORMAT, reason, rc);
	if (strcmp(m.job, job) != 0)
		return refuse(j, SKY_CKPT_R_JOB, reason,
			      sky_diag_set(d, SKY_ESTATE, "an image of job %.64s on job %s's topic",
					   m.job, job));
	if ((rc = check_part(j, &m, board, from->blk0, from->nblk, reason, d)) != 0)
		return rc;
	/* the open step it belongs to, without taking a slot yet */
	const sky_ckpt_step *cur = NULL;
	for (int i = 0; i < SKY_CKPT_OPEN && !cur; i++)
		if (j->open[i].step == m.step)
			cur = &j->open[i];
	int dup = -1;
	for (int i = 0; cur && i < cur->n_parts; i++) {
		const sky_ckpt_part *p = &cur->part[i];
		if (p->blk0 == m.blk0 && p->nblk == m.nblk)
			dup = i;
		else if (m.blk0 < p->blk0 + p->nblk && p->blk0 < m.blk0 + m.nblk)
			return refuse(j, SKY_CKPT_R_BLOCKS, reason,
				      sky_diag_set(d, SKY_ESTATE,
						   "blocks %d+%d overlap another part of step %lld",
						   m.blk0, m.nblk, (long long)m.step));
	}
	if (cur && dup < 0 && cur->n_parts >= SKY_CKPT_PARTS)
		return refuse(j, SKY_CKPT_R_BLOCKS, reason,
			      sky_diag_set(d, SKY_ESTATE, "step %lld: more than %d parts",
					   (long long)m.step, SKY_CKPT_PARTS));
	if (!cur) {
		int free_or_past = 0;
		for (int i = 0; i < SKY_CKPT_OPEN; i++)
			free_or_past |= given_up(j, &j->open[i], m.step, m.blk0);
		if (!free_or_past)
			return refuse(j, SKY_CKPT_R_OPEN, reason,
				      sky_diag_set(d, SKY_ESTATE,
						   "step %lld: %d steps are open and each still awaits "
						   "a board's part",
						   (long long)m.step, SKY_CKPT_OPEN));
	}
	/* only now the expensive part: the hash of the tensor bytes */
	if ((rc = sky_ckpt_verify(img, len, &m, d)) != 0)
		return refuse(j, rc == SKY_EAUTH ? SKY_CKPT_R_HASH : SKY_CKPT_R_FORMAT, reason, rc);
	sky_ckpt_step *st = open_step(s, j, job, &m);
	if (!st) /* cannot happen: checked above */
		return refuse(j, SKY_CKPT_R_OPEN, reason,
			      sky_diag_set(d, SKY_ESTATE, "step %lld: no open slot", (long long)m.step));
	char path[700];
	snprintf(path, sizeof path, "%s/ckpt/%s", s->dir, job);
	sky_file_mkdirs(path, 0700);
	if ((rc = part_path(s, job, m.step, m.blk0, path, sizeof path)) != 0 ||
	    (rc = sky_file_write(path, img, len, 0600)) != 0)
		return refuse(j, SKY_CKPT_R_IO, reason, sky_diag_set(d, rc, "cannot write %s", path));
	if (dup < 0) {
		st->part[st->n_parts++] = (sky_ckpt_part){m.blk0, m.nblk};
		st->covered += m.nblk;
	}
	j->nvec = m.nvec;
	SKY_DEBUG("job %s: checkpoint part of step %lld from %s (blocks %d+%d), %d of %d blocks",
		  job, (long long)m.step, board, m.blk0, m.nblk, st->covered, j->n_blocks);
	if (st->covered < j->n_blocks) {
		/* on disk before the message is acknowledged: a planner killed now
		 * still has the part after its restart (or gets it again) */
		if ((rc = sky_ckpt_save(s, j)) != 0)
			return sky_diag_set(d, rc, "job %s: cannot save its checkpoint index", job);
		return 0;
	}
	/* complete: committed */
	return commit_step(s, j, st, job, &m, now, committed);
}

int sky_ckpt_on_part(sky_ckpt_store *s, const char *job, const char *board,
		     const unsigned char *img, size_t len, double now, int64_t *committed,
		     sky_diag *d)
{
	/* the sender's blocks from the part itself (header only) */
	static sky_ckpt_tensor t[4 * SKY_CKPT_PARTS * 64];
	sky_ckpt_meta m;
	int nt = 0;
	sky_ckpt_sender from = {board, 0, 1};
	if (sky_ckpt_parse_header(img, len, &m, t, (int)(sizeof t / sizeof t[0]), &nt, NULL) == 0) {
		from.blk0 = m.blk0;
		from.nblk = m.nblk;
	}
	return sky_ckpt_on_part_from(s, job, &from, img, len, now, committed, NULL, d);
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

/* ---- the index: what the store knows of a job, across planner restarts ---- */

static cJSON *step_json(const sky_ckpt_step *st)
{
	cJSON *o = cJSON_CreateObject(), *parts = cJSON_CreateArray();
	if (!o || !parts) {
		cJSON_Delete(o);
		cJSON_Delete(parts);
		return NULL;
	}
	cJSON_AddNumberToObject(o, "step", (double)st->step);
	cJSON_AddNumberToObject(o, "epoch", (double)st->epoch);
	for (int i = 0; i < st->n_parts; i++) {
		const int pair[2] = {st->part[i].blk0, st->part[i].nblk};
		cJSON_AddItemToArray(parts, cJSON_CreateIntArray(pair, 2));
	}
	cJSON_AddItemToObject(o, "parts", parts);
	return o;
}

int sky_ckpt_save(const sky_ckpt_store *s, const sky_ckpt_job *j)
{
	static char buf[SKY_CKPT_INDEX_MAX];
	char path[700];
	int rc = index_path(s, j->job, path, sizeof path);
	if (rc)
		return rc;
	cJSON *doc = sky_json_new_object(), *done = cJSON_CreateArray(), *open = cJSON_CreateArray();
	int ok = doc && done && open && cJSON_AddNumberToObject(doc, "v", 1) &&
		 cJSON_AddStringToObject(doc, "job", j->job) &&
		 cJSON_AddNumberToObject(doc, "epoch", (double)j->epoch) &&
		 cJSON_AddNumberToObject(doc, "n_blocks", j->n_blocks) &&
		 cJSON_AddNumberToObject(doc, "nvec", j->nvec) &&
		 cJSON_AddNumberToObject(doc, "commits", (double)j->commits);
	for (int i = 0; ok && i < 2; i++)
		if (j->done[i].step > 0)
			ok = cJSON_AddItemToArray(done, step_json(&j->done[i]));
	for (int i = 0; ok && i < SKY_CKPT_OPEN; i++)
		if (j->open[i].step > 0)
			ok = cJSON_AddItemToArray(open, step_json(&j->open[i]));
	if (ok) {
		cJSON_AddItemToObject(doc, "done", done);
		cJSON_AddItemToObject(doc, "open", open);
		done = open = NULL;
	}
	int n = ok ? sky_json_print(doc, buf, sizeof buf) : SKY_ENOMEM;
	cJSON_Delete(done);
	cJSON_Delete(open);
	sky_json_free(doc);
	if (n < 0)
		return n;
	snprintf(path, sizeof path, "%s/ckpt/%s", s->dir, j->job);
	sky_file_mkdirs(path, 0700);
	index_path(s, j->job, path, sizeof path);
	return sky_file_write(path, buf, (size_t)n, 0600);
}

/* One step of the index into st. Returns 0 or SKY_EFORMAT naming it. */
static int step_from_json(const cJSON *o, int n_blocks, sky_ckpt_step *st, const char *what,
			  sky_diag *d)
{
	memset(st, 0, sizeof *st);
	int rc;
	if ((rc = sky_json_i64(o, "step", 1, SKY_JSON_INT_MAX, &st->step, what, d)) ||
	    (rc = sky_json_i64(o, "epoch", 1, SKY_JSON_INT_MAX, &st->epoch, what, d)))
		return rc;
	const cJSON *parts = cJSON_GetObjectItemCaseSensitive(o, "parts"), *p;
	if (!cJSON_IsArray(parts) || cJSON_GetArraySize(parts) > SKY_CKPT_PARTS)
		return sky_diag_set(d, SKY_EFORMAT, "%s: 'parts' must be a list of at most %d",
				    what, SKY_CKPT_PARTS);
	cJSON_ArrayForEach(p, parts)
	{
		const cJSON *a = cJSON_GetArrayItem(p, 0), *b = cJSON_GetArrayItem(p, 1);
		if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 2 || !cJSON_IsNumber(a) ||
		    !cJSON_IsNumber(b) || a->valuedouble < 0 || b->valuedouble < 1 ||
		    a->valuedouble + b->valuedouble > n_blocks || a->valuedouble != (int)a->valuedouble ||
		    b->valuedouble != (int)b->valuedouble)
			return sky_diag_set(d, SKY_EFORMAT,
					    "%s: step %lld: a part is not [blk0, nblk] within %d blocks",
					    what, (long long)st->step, n_blocks);
		st->part[st->n_parts++] = (sky_ckpt_part){a->valueint, b->valueint};
		st->covered += b->valueint;
	}
	return 0;
}

/* Checks every file of step st against its hash and its place. Returns 0 or
 * the first failure in d, naming the file. */
static int verify_step(const sky_ckpt_store *s, const char *job, const sky_ckpt_step *st,
		       sky_diag *d)
{
	static sky_ckpt_tensor t[4 * SKY_CKPT_PARTS * 64];
	for (int i = 0; i < st->n_parts; i++) {
		char path[700];
		sky_file_map fm;
		sky_ckpt_meta m;
		sky_diag why;
		int nt = 0, rc;
		sky_diag_clear(&why);
		memset(&fm, 0, sizeof fm);
		part_path(s, job, st->step, st->part[i].blk0, path, sizeof path);
		if ((rc = sky_file_map_open(&fm, path)) != 0)
			return sky_diag_set(d, rc, "checkpoint file %s: %s", path, sky_strerror(rc));
		rc = sky_ckpt_parse(fm.data, fm.size, &m, t, (int)(sizeof t / sizeof t[0]), &nt, &why);
		sky_file_map_close(&fm);
		if (rc)
			return sky_diag_set(d, rc, "checkpoint file %s: %s", path, why.msg);
		if (strcmp(m.job, job) || m.step != st->step || m.blk0 != st->part[i].blk0 ||
		    m.nblk != st->part[i].nblk)
			return sky_diag_set(d, SKY_EFORMAT,
					    "checkpoint file %s holds job %s step %lld blocks %d+%d, "
					    "not what the index says",
					    path, m.job, (long long)m.step, m.blk0, m.nblk);
	}
	return 0;
}

/* The newest step the job's log has a commit line for (0: none). */
static int64_t logged_commit(const sky_ckpt_store *s, const char *job)
{
	char path[700];
	sky_file_map fm;
	int64_t last = 0;
	memset(&fm, 0, sizeof fm);
	snprintf(path, sizeof path, "%s/jobs/%s.log.jsonl", s->dir, job);
	if (sky_file_map_open(&fm, path) != 0 || !fm.data)
		return 0;
	static const char key[] = "\"event\":\"commit\"";
	const char *p = (const char *)fm.data, *end = p + fm.size;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char line[512];
		if (len < sizeof line) {
			memcpy(line, p, len);
			line[len] = '\0';
			const char *st = strstr(line, key) ? strstr(line, "\"step\":") : NULL;
			long long v;
			if (st && sscanf(st + 7, "%lld", &v) == 1 && v > last)
				last = v;
		}
		p += len + 1;
	}
	sky_file_map_close(&fm);
	return last;
}

/* Reads job's checkpoint index at path into got (zeroed first) and its
 * commit count into *commits, checked against the job's model of n_blocks.
 * Returns 0, the read's error, or SKY_EFORMAT with d saying what is
 * damaged. */
static int read_index(const char *job, int n_blocks, const char *path, sky_ckpt_job *got,
		      int64_t *commits, sky_diag *d)
{
	static char buf[SKY_CKPT_INDEX_MAX];
	long n = sky_file_read(path, buf, sizeof buf);
	if (n < 0)
		return sky_diag_set(d, (int)n, "checkpoint index %s: %s", path,
				    n == SKY_ENOTFOUND ? "missing" : sky_strerror((int)n));
	sky_diag why;
	sky_diag_clear(&why);
	memset(got, 0, sizeof *got);
	cJSON *doc = sky_json_parse(buf, (size_t)n, &why);
	char jname[SKY_TOPIC_SEGMENT_MAX + 1] = "";
	int64_t e = 0;
	int rc = doc ? 0 : SKY_EFORMAT;
	if (!rc)
		(void)((rc = sky_json_str(doc, "job", jname, sizeof jname, "index", &why)) ||
		       (rc = sky_json_i64(doc, "epoch", 1, SKY_JSON_INT_MAX, &e, "index", &why)) ||
		       (rc = sky_json_int(doc, "n_blocks", 1, 1 << 20, &got->n_blocks, "index", &why)) ||
		       (rc = sky_json_int(doc, "nvec", 0, SKY_CKPT_MAX_VECS, &got->nvec, "index", &why)) ||
		       (rc = sky_json_i64(doc, "commits", 0, SKY_JSON_INT_MAX, commits, "index", &why)));
	if (!rc && strcmp(jname, job) != 0)
		rc = sky_diag_set(&why, SKY_EFORMAT, "it is the index of job '%s'", jname);
	if (!rc && got->n_blocks != n_blocks)
		rc = sky_diag_set(&why, SKY_EFORMAT, "%d blocks, the job's model has %d",
				  got->n_blocks, n_blocks);
	const cJSON *arr[2] = {doc ? cJSON_GetObjectItemCaseSensitive(doc, "done") : NULL,
			       doc ? cJSON_GetObjectItemCaseSensitive(doc, "open") : NULL};
	for (int a = 0; a < 2 && !rc; a++) {
		const int cap = a ? SKY_CKPT_OPEN : 2;
		sky_ckpt_step *to = a ? got->open : got->done;
		const cJSON *o;
		if (!cJSON_IsArray(arr[a]) || cJSON_GetArraySize(arr[a]) > cap) {
			rc = sky_diag_set(&why, SKY_EFORMAT, "'%s' must be a list of at most %d steps",
					  a ? "open" : "done", cap);
			break;
		}
		int k = 0;
		cJSON_ArrayForEach(o, arr[a])
		{
			if ((rc = step_from_json(o, n_blocks, &to[k++], a ? "open" : "done", &why)) != 0)
				break;
		}
	}
	sky_json_free(doc);
	if (!rc && got->done[1].step >= got->done[0].step && got->done[1].step > 0)
		rc = sky_diag_set(&why, SKY_EFORMAT, "done steps %lld and %lld are not newest first",
				  (long long)got->done[0].step, (long long)got->done[1].step);
	if (rc) /* whatever the getter said (a key missing, out of range): damaged */
		return sky_diag_set(d, SKY_EFORMAT, "checkpoint index %s is damaged: %s", path,
				    why.msg[0] ? why.msg : sky_strerror(rc));
	return 0;
}

/* Every file of got's steps re-verified against its SHA-256: a damaged
 * newest checkpoint gives way to the one before it, a damaged open step
 * (or one of another epoch, or not after the last commit) is dropped.
 * Returns how many committed steps were dropped (the first's reason in d,
 * as SKY_EAUTH). */
static int verify_restored(sky_ckpt_store *s, const char *job, int64_t epoch, sky_ckpt_job *got,
			   sky_diag *d)
{
	sky_diag why;
	sky_diag_clear(&why);
	int bad = 0;
	for (int i = 0; i < 2; i++)
		if (got->done[i].step > 0 && verify_step(s, job, &got->done[i], &why) != 0) {
			SKY_ERROR("job %s: committed step %lld not restored: %s", job,
				  (long long)got->done[i].step, why.msg);
			if (!bad++)
				sky_diag_set(d, SKY_EAUTH, "%s", why.msg);
			memset(&got->done[i], 0, sizeof got->done[i]);
		}
	if (got->done[0].step == 0) {
		got->done[0] = got->done[1];
		memset(&got->done[1], 0, sizeof got->done[1]);
	}
	for (int i = 0; i < SKY_CKPT_OPEN; i++)
		if (got->open[i].step > 0 &&
		    (got->open[i].epoch != epoch || got->open[i].step <= got->done[0].step ||
		     verify_step(s, job, &got->open[i], &why) != 0))
			memset(&got->open[i], 0, sizeof got->open[i]);
	return bad;
}

int sky_ckpt_restore(sky_ckpt_store *s, const char *job, int64_t epoch, int n_blocks,
		     sky_diag *d)
{
	static sky_ckpt_job got; /* as read, before it takes an entry */
	char path[700];
	int64_t commits = 0;
	int rc = index_path(s, job, path, sizeof path);
	if (rc)
		return sky_diag_set(d, rc, "job %s: index path too long", job);
	if ((rc = read_index(job, n_blocks, path, &got, &commits, d)) != 0)
		return rc;
	int bad = verify_restored(s, job, epoch, &got, d);
	/* the entry: fresh (its epoch set, nothing open), then what was read */
	sky_ckpt_job *j = sky_ckpt_find(s, job);
	if (j)
		memset(j->open, 0, sizeof j->open);
	j = sky_ckpt_begin(s, job, epoch, n_blocks);
	if (!j)
		return sky_diag_set(d, SKY_ERANGE, "job %s: the checkpoint store is full", job);
	memcpy(j->done, got.done, sizeof j->done);
	memcpy(j->open, got.open, sizeof j->open);
	j->nvec = got.nvec;
	j->commits = (long)commits;
	j->commit_s = sky_clock_s();
	if ((rc = sky_ckpt_save(s, j)) != 0)
		SKY_WARN("job %s: cannot save its checkpoint index %s", job, path);
	/* a commit saved but not yet logged when the planner stopped is logged
	 * now, once */
	if (j->done[0].step > 0 && logged_commit(s, job) < j->done[0].step) {
		char fields[200];
		snprintf(fields, sizeof fields,
			 "\"event\":\"commit\",\"epoch\":%lld,\"step\":%lld,\"parts\":%d,\"restored\":true",
			 (long long)j->done[0].epoch, (long long)j->done[0].step, j->done[0].n_parts);
		sky_ckpt_log(s, job, fields);
	}
	return bad ? SKY_EAUTH : 0;
}
