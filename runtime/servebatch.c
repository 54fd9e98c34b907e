/* The first serving stage's batching rule (see sky_servebatch.h). */
#include "sky_servebatch.h"

#include "sky_json.h"
#include "sky_topics.h"

#include <string.h>

int sky_servebatch_decide(const sky_servebatch_rule *r, int queued, double waited_s,
			  int in_flight, int *wait_ms)
{
	*wait_ms = 0;
	if (queued <= 0) {
		*wait_ms = SKY_SERVEBATCH_IDLE_MS;
		return SKY_SERVEBATCH_WAIT;
	}
	if (queued >= r->batch)
		return SKY_SERVEBATCH_SEND;
	if (waited_s < r->wait_s) {
		/* wake when the oldest has waited its bound (+1: never early) */
		*wait_ms = (int)((r->wait_s - waited_s) * 1000.0) + 1;
		return SKY_SERVEBATCH_WAIT;
	}
	if (in_flight < r->depth)
		return SKY_SERVEBATCH_SEND;
	/* the pipeline is full: a part-full batch would only queue behind the
	 * others; keep filling until it is full or a batch comes out */
	*wait_ms = SKY_SERVEBATCH_HOLD_MS;
	return SKY_SERVEBATCH_HOLD;
}

void sky_servebatch_init(sky_servebatch_flight *f)
{
	memset(f, 0, sizeof *f);
}

static void drop_at(sky_servebatch_flight *f, int i)
{
	memmove(f->batch + i, f->batch + i + 1, sizeof f->batch[0] * (size_t)(f->n - i - 1));
	memmove(f->sent + i, f->sent + i + 1, sizeof f->sent[0] * (size_t)(f->n - i - 1));
	f->n--;
}

void sky_servebatch_sent(sky_servebatch_flight *f, uint64_t batch, double now)
{
	if (f->n >= SKY_SERVEBATCH_MAX) {
		drop_at(f, 0); /* entries are in sending order: 0 is the oldest */
		f->lost++;
	}
	f->batch[f->n] = batch;
	f->sent[f->n] = now;
	f->n++;
}

int sky_servebatch_done(sky_servebatch_flight *f, uint64_t batch)
{
	for (int i = 0; i < f->n; i++)
		if (f->batch[i] == batch) {
			drop_at(f, i);
			f->done++;
			return 1;
		}
	f->stray++;
	return 0;
}

int sky_servebatch_in_flight(sky_servebatch_flight *f, double now, double stale_s)
{
	while (f->n > 0 && f->sent[0] < now - stale_s) {
		drop_at(f, 0);
		f->lost++;
	}
	return f->n;
}

double sky_servebatch_stale_s(int depth, int batch, double predicted_seq_s)
{
	double s = 2.0;
	if (predicted_seq_s > 0 && batch > 0 && depth > 0) {
		double t = 4.0 * (depth + 1) * batch / predicted_seq_s;
		if (t > s)
			s = t;
	}
	return s;
}

int sky_servebatch_done_parse(const void *p, size_t len, int64_t *epoch, uint64_t *batch, int *n,
			      sky_diag *d)
{
	int64_t ep = 0, b = 0;
	int k = 0;
	*epoch = 0, *batch = 0, *n = 0;
	if (len > SKY_SERVE_DONE_MAX_BYTES)
		return sky_diag_set(d, SKY_EFORMAT, "done report of %zu bytes, at most %u", len,
				    SKY_SERVE_DONE_MAX_BYTES);
	cJSON *doc = sky_json_parse((const char *)p, len, d);
	if (!doc)
		return SKY_EFORMAT;
	int rc = 0;
	if (!cJSON_IsObject(doc))
		rc = sky_diag_set(d, SKY_EFORMAT, "done report: not an object");
	else if (sky_json_i64(doc, "epoch", 0, SKY_JSON_INT_MAX, &ep, "done report", d) ||
		 sky_json_i64(doc, "batch", 0, SKY_JSON_INT_MAX, &b, "done report", d) ||
		 (cJSON_GetObjectItemCaseSensitive(doc, "n") &&
		  sky_json_int(doc, "n", 0, 65535, &k, "done report", d)))
		rc = SKY_EFORMAT;
	sky_json_free(doc);
	if (!rc)
		*epoch = ep, *batch = (uint64_t)b, *n = k;
	return rc;
}
