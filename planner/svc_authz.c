/* Who may send what on a job's topics (svc_internal.h): the sender is the
 * topic level the broker's ACL pins to the certificate CN, and it is
 * checked against the job's signed plan, as followed in memory, before any
 * work on the message (hashing, signature checks, large parses). */
#include "svc_internal.h"

#include "sky_clock.h"
#include "sky_json.h"
#include "sky_metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int svc_authz_revoked(const svc *s, const char *board)
{
	const sky_reg_board *b = sky_registry_find((sky_registry *)&s->reg, board);
	if (b && b->state == SKY_REG_REVOKED)
		return 1;
	for (int i = 0; i < s->fleet.revoked.n; i++)
		if (!strcmp(s->fleet.revoked.e[i].id, board))
			return 1;
	return 0;
}

int svc_authz_stage(svc *s, const char *job, const char *board, int want, int64_t *epoch)
{
	run_job *r = svc_follow_find(s, job);
	if (r) {
		/* a stage's own board or one of its replicas (which sends its
		 * stage's metrics too) */
		int first = -1;
		for (int i = 0; i < svc_follow_boards(r); i++) {
			int k = 0;
			if (!strcmp(svc_follow_board(r, i, &k), board) && (k == want || first < 0))
				first = k;
		}
		if (epoch)
			*epoch = r->epoch;
		return first;
	}
	/* not followed (a job planned once and not re-planned, or done): the
	 * assignment the registry took from the job's signed plan */
	const sky_reg_board *b = sky_registry_find(&s->reg, board);
	if (!b || strcmp(b->job, job) != 0)
		return -1;
	if (epoch)
		*epoch = b->epoch;
	return b->stage;
}

/* The payload's "stage" (a board holding two stages, a data owner, says
 * which one); -1 when it has none. Parsed only after the sender passed. */
static int payload_stage(const unsigned char *p, size_t len)
{
	int k = -1;
	cJSON *doc = len <= SKY_METRICS_MAX_BYTES ? sky_json_parse((const char *)p, len, NULL) : NULL;
	if (doc && sky_json_int(doc, "stage", 0, 65535, &k, "metrics", NULL) != 0)
		k = -1;
	sky_json_free(doc);
	return k;
}

/* A stage's drops are counts since its plan's epoch began (its metrics'
 * "drops" object); the Prometheus counter adds what each report adds to
 * the last one of the same epoch. */
static void count_new_drops(const char *job, const char *before, const char *after)
{
	sky_diag d;
	cJSON *a = sky_json_parse(after, strlen(after), &d);
	cJSON *b = before[0] ? sky_json_parse(before, strlen(before), &d) : NULL;
	const cJSON *it;
	cJSON_ArrayForEach(it, a)
	{
		if (!cJSON_IsNumber(it) || !it->string)
			continue;
		const cJSON *was = b ? cJSON_GetObjectItemCaseSensitive(b, it->string) : NULL;
		double n = it->valuedouble - (cJSON_IsNumber(was) ? was->valuedouble : 0);
		if (n >= 1 && n < 1e12)
			sky_metrics_add_frames_dropped(sky_metrics_default(), job, it->string, (long)n);
	}
	sky_json_free(b);
	sky_json_free(a);
}

int svc_authz_on_metrics(svc *s, const char *job, const char *board, const unsigned char *p,
			 size_t len)
{
	int64_t epoch = 0;
	if (svc_authz_revoked(s, board)) {
		svc_refused(s, job, board, SVC_REFUSE_REVOKED, "metrics");
		return -1;
	}
	if (svc_authz_stage(s, job, board, -1, &epoch) < 0) {
		svc_refused(s, job, board, SVC_REFUSE_METRICS, "metrics");
		return -1;
	}
	int k = svc_authz_stage(s, job, board, payload_stage(p, len), &epoch);
	/* the first report of this stage under this epoch (its step warms up) */
	int first = 1;
	char drops_before[sizeof s->jobs.row[0].drops] = "";
	for (int i = 0; i < s->jobs.n && first; i++) {
		const sky_jobstat_row *row = &s->jobs.row[i];
		first = !(!strcmp(row->job, job) && row->stage == k && row->epoch == epoch &&
			  !strcmp(row->board, board));
		if (!first)
			snprintf(drops_before, sizeof drops_before, "%s", row->drops);
	}
	if (sky_jobstat_on_metrics(&s->jobs, job, board, k, epoch, (const char *)p, len,
				   sky_clock_s()) != 0)
		return -1;
	for (int i = 0; i < s->jobs.n; i++) {
		const sky_jobstat_row *row = &s->jobs.row[i];
		if (!strcmp(row->job, job) && row->stage == k && !strcmp(row->board, board) &&
		    row->drops[0])
			count_new_drops(job, drops_before, row->drops);
	}
	/* a stage replica's row says which (the registry's assignment is the
	 * signed plan's) */
	const sky_reg_board *rb = sky_registry_find(&s->reg, board);
	if (rb && !strcmp(rb->job, job) && rb->epoch == epoch && rb->stage == k && rb->replica > 0)
		sky_jobstat_set_replica(&s->jobs, job, board, k, rb->replica);
		/* the sender's own figures only: board is the topic's, k its stage */
	svc_calib_on_metrics(s, job, board, k, epoch, first, p, len);
	return 0;
}

int svc_authz_part(svc *s, const char *job, const char *board)
{
	if (svc_authz_revoked(s, board)) {
		svc_refused(s, job, board, SVC_REFUSE_REVOKED, "part");
		return 0;
	}
	if (svc_authz_stage(s, job, board, -1, NULL) < 0) {
		svc_refused(s, job, board, SVC_REFUSE_PART, "part");
		return 0;
	}
	return 1;
}

/* The norm blocks of stage k of r (sky_stage.h numbering): [*lo, *lo + *n). */
static void stage_blocks(const run_job *r, int k, int *lo, int *n)
{
	int embed = r->first[k] == 0, head = k == r->n_stages - 1;
	*lo = embed ? 0 : 1 + r->first[k];
	*n = r->last[k] - r->first[k] + 1 + embed + head;
}

/* blk0 and nblk from a checkpoint image's header alone (8-byte length,
 * then the safetensors JSON header; sky_ckptmsg.h). Returns 0 or -1. */
static int peek_blocks(const unsigned char *img, size_t len, long long *blk0, long long *nblk)
{
	uint64_t hlen = 0;
	if (len < 8)
		return -1;
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | img[i];
	/* the header names every tensor of a stage: far below this */
	if (hlen < 2 || hlen > len - 8 || hlen > (1u << 20))
		return -1;
	cJSON *doc = sky_json_parse((const char *)img + 8, (size_t)hlen, NULL);
	const cJSON *meta = doc ? cJSON_GetObjectItemCaseSensitive(doc, "__metadata__") : NULL;
	const cJSON *b0 = meta ? cJSON_GetObjectItemCaseSensitive(meta, "sky_blk0") : NULL;
	const cJSON *nb = meta ? cJSON_GetObjectItemCaseSensitive(meta, "sky_nblk") : NULL;
	int rc = -1;
	char *e1 = NULL, *e2 = NULL;
	if (cJSON_IsString(b0) && cJSON_IsString(nb) && b0->valuestring[0] && nb->valuestring[0]) {
		*blk0 = strtoll(b0->valuestring, &e1, 10);
		*nblk = strtoll(nb->valuestring, &e2, 10);
		rc = *e1 || *e2 || *blk0 < 0 || *nblk < 1 ? -1 : 0;
	}
	sky_json_free(doc);
	return rc;
}

int svc_authz_ckpt(svc *s, const char *job, const char *board, const unsigned char *p,
		   size_t len)
{
	if (svc_authz_revoked(s, board)) {
		svc_refused(s, job, board, SVC_REFUSE_REVOKED, "checkpoint image");
		return 0;
	}
	run_job *r = svc_follow_find(s, job);
	int held = 0;
	for (int i = 0; r && i < svc_follow_boards(r); i++)
		held |= !strcmp(svc_follow_board(r, i, NULL), board);
	if (!held) {
		svc_refused(s, job, board, SVC_REFUSE_CKPT, "checkpoint image (no stage of the plan)");
		return 0;
	}
	long long b0 = 0, nb = 0;
	if (peek_blocks(p, len, &b0, &nb) != 0)
		return 1; /* malformed: the store refuses it with the reason */
	/* the blocks of the stage it runs (a replica holds its stage's) */
	for (int i = 0; i < svc_follow_boards(r); i++) {
		int lo, n, k = 0;
		if (strcmp(svc_follow_board(r, i, &k), board) != 0)
			continue;
		stage_blocks(r, k, &lo, &n);
		if (b0 >= lo && b0 + nb <= lo + n)
			return 1;
	}
	svc_refused(s, job, board, SVC_REFUSE_CKPT, "checkpoint image of blocks %lld+%lld", b0, nb);
	return 0;
}
