/* A board as an owner of a federated job (docs/federation.md): the signed
 * round on sky/v1/job/<job>/fedround, the global model's chunks on
 * .../fedmodel (checked against the hash the signed round names), E local
 * steps on the owner's own shard (sky_fedclient.h), and its weights back
 * in update chunks on .../fedupd/<this board>. The owner trains alone: it
 * holds the whole model (pipelined owners are not built).
 *
 * One federated job at a time. Everything here runs on the agent's main
 * thread (messages are handed over in sky_mqtt_poll). */
#include "agent_internal.h"

#include "sky_chunk.h"
#include "sky_clock.h"
#include "sky_dataset.h"
#include "sky_fedclient.h"
#include "sky_fedmsg.h"
#include "sky_log.h"

#include <stdlib.h>
#include <string.h>

#define MAX_BUNDLE (1ull << 34)

struct agent_fed {
	char job[SKY_TOPIC_SEGMENT_MAX + 1];
	sky_fedround_msg r; /* the round being worked on */
	sky_fedround_msg incoming;
	int have_round;
	uint64_t next_round; /* rounds before this one were sent */
	unsigned char want[32];
	unsigned char *bundle;
	size_t bundle_len;
	uint32_t total, got;
	unsigned char *seen;
	int ready;
	sky_dataset ds;
	int ds_open;
	sky_fedclient cl;
	int cl_ready, failed;
	float *global, *out;
	uint64_t words;
	long chunks_dropped;
	char payload[SKY_SIGN_MAX_PAYLOAD + 1];
	unsigned char msg[SKY_FEDU_MAX_BYTES];
};

static void fed_reset_job(agent_fed *f)
{
	sky_fedclient_free(&f->cl);
	if (f->ds_open)
		sky_ds_close(&f->ds);
	free(f->bundle), free(f->seen), free(f->global), free(f->out);
	memset(f, 0, offsetof(agent_fed, payload));
}

void agent_fed_free(agent *a)
{
	if (!a->fed)
		return;
	fed_reset_job(a->fed);
	free(a->fed);
	a->fed = NULL;
}

int agent_fed_subscribe(agent *a, sky_diag *d)
{
	int rc = sky_mqtt_subscribe(a->m, SKY_TOPIC_ROOT "/job/+/" SKY_TOPIC_FEDMODEL, 1, 5000, d);
	if (!rc)
		rc = sky_mqtt_subscribe(a->m, SKY_TOPIC_ROOT "/job/+/" SKY_TOPIC_FEDROUND, 1, 5000, d);
	return rc;
}

/* Publishes one update chunk of round r. */
static int send_chunk(agent *a, agent_fed *f, const char *topic, uint64_t round, uint32_t c,
		      const float *x, uint64_t words)
{
	uint64_t at = (uint64_t)c * SKY_FED_CHUNK_WORDS;
	uint32_t n = (uint32_t)(words - at < SKY_FED_CHUNK_WORDS ? words - at : SKY_FED_CHUNK_WORDS);
	int len = sky_fedupd_encode_plain(round, c, words, x + at, n, f->msg, sizeof f->msg);
	if (len < 0)
		return len;
	return sky_mqtt_publish(a->m, topic, f->msg, (size_t)len, 1, 0, NULL);
}

/* SKY_FED_ADVERSARY=1 (tests only): after its real update, an owner sends
 * a chunk again (a replay), one of a later round and one past the model's
 * end; a board that is no owner sends a chunk anyway. Each must be refused
 * by the aggregator with its reason while the round goes on. */
static int adversary(void)
{
	const char *e = getenv("SKY_FED_ADVERSARY");
	return e && e[0] == '1';
}

/* The round's training and its update (when the model is in). */
void agent_fed_tick(agent *a)
{
	agent_fed *f = a->fed;
	if (!f || !f->ready || f->failed || !a->m || a->lost)
		return;
	sky_diag d;
	sky_diag_clear(&d);
	const sky_fedround_msg *r = &f->r;
	const char *cfg;
	size_t cl, at;
	uint64_t words;
	int rc = sky_fedb_parse(f->bundle, f->bundle_len, &cfg, &cl, &at, &words, &d);
	if (!rc && !f->cl_ready) {
		const sky_boardset *bs = sky_boardsets_find(&a->sets, r->dataset);
		sky_ds_init(&f->ds);
		sky_fedclient_opts o = {.batch = r->batch, .micro = r->micro,
					.local_steps = r->local_steps,
					.total_steps = (long)(r->rounds * (uint64_t)r->local_steps),
					.lr = r->lr, .clip = r->clip, .seed = r->seed,
					.warmup = r->warmup, .prox_mu = r->prox_mu,
					.dp_clip = r->dp_clip};
		snprintf(o.optim, sizeof o.optim, "%s", r->optim);
		if (!bs)
			rc = sky_diag_set(&d, SKY_ENOTFOUND, "no data set %s on this board",
					  r->dataset);
		if (!rc && (rc = sky_ds_open(&f->ds, bs->path, &d)) == 0)
			f->ds_open = 1;
		if (!rc)
			rc = sky_fedclient_init(&f->cl, cfg, cl, &f->ds, &o, &d);
		if (!rc && sky_fedclient_words(&f->cl) != words)
			rc = sky_diag_set(&d, SKY_EFORMAT, "the model has %llu words, its config %llu",
					  (unsigned long long)words,
					  (unsigned long long)sky_fedclient_words(&f->cl));
		if (!rc) {
			f->words = words;
			f->global = malloc(words * sizeof *f->global);
			f->out = malloc(words * sizeof *f->out);
			if (!f->global || !f->out)
				rc = sky_diag_set(&d, SKY_ENOMEM, "out of memory");
		}
		f->cl_ready = !rc;
	}
	if (!rc && words != f->words)
		rc = sky_diag_set(&d, SKY_EFORMAT, "round %llu's model has %llu words, not %llu",
				  (unsigned long long)r->round, (unsigned long long)words,
				  (unsigned long long)f->words);
	double t0 = sky_clock_s();
	if (!rc) {
		sky_fedb_get_words(f->bundle + at, f->global, words);
		rc = sky_fedclient_round(&f->cl, r->round, f->global, f->out, &d);
	}
	if (rc) {
		SKY_ERROR("fed job %s round %llu: %s; this owner leaves the job", f->job,
			  (unsigned long long)r->round, d.msg);
		f->failed = 1;
		return;
	}
	char topic[SKY_TOPIC_BUF];
	sky_topic_job_to(topic, sizeof topic, f->job, SKY_TOPIC_FEDUPD, a->idn.id);
	uint32_t nch = (uint32_t)((words + SKY_FED_CHUNK_WORDS - 1) / SKY_FED_CHUNK_WORDS);
	for (uint32_t c = 0; c < nch && !rc; c++) {
		rc = send_chunk(a, f, topic, r->round, c, f->out, words);
		if (!rc && c == 0 && adversary()) {
			/* while this owner's update is still coming in */
			send_chunk(a, f, topic, r->round, 0, f->out, words);     /* replay */
			send_chunk(a, f, topic, r->round + 5, 0, f->out, words); /* another round */
			int len = sky_fedupd_encode_plain(r->round, nch, words, f->out, 1, f->msg,
							  sizeof f->msg); /* past the end */
			if (len > 0)
				sky_mqtt_publish(a->m, topic, f->msg, (size_t)len, 1, 0, NULL);
		}
	}
	SKY_INFO("fed job %s round %llu: %d local steps in %.2f s, loss %.4f, update sent in %u "
		 "chunk(s)%s",
		 f->job, (unsigned long long)r->round, r->local_steps, sky_clock_s() - t0,
		 f->cl.last_loss, (unsigned)nch, rc ? " (a publish failed)" : "");
	f->ready = 0;
	f->next_round = r->round + 1;
}

/* A signed round: a new round of our job starts its model's download. */
static void on_round(agent *a, const char *job, const unsigned char *p, size_t len)
{
	sky_diag d;
	sky_diag_clear(&d);
	size_t plen = 0;
	if (len == 0)
		return; /* a cleared retained round */
	if (!a->fed && !(a->fed = calloc(1, sizeof *a->fed)))
		return;
	agent_fed *f = a->fed;
	sky_fedround_msg *r = &f->incoming;
	int rc = sky_verify_envelope(&a->idn.planner, (const char *)p, len, f->payload,
				     sizeof f->payload, &plen, &d);
	if (!rc)
		rc = sky_fedround_msg_decode(f->payload, plen, r, &d);
	if (!rc && strcmp(r->job, job) != 0)
		rc = sky_diag_set(&d, SKY_EAUTH, "signed for job %s", r->job);
	if (rc) {
		SKY_WARN("fed round on job %s refused: %s", job, d.msg);
		return;
	}
	int me = sky_fedround_msg_owner(r, a->idn.id);
	if (me < 0) {
		if (adversary() && !r->done && a->m) {
			char topic[SKY_TOPIC_BUF];
			float x[4] = {0};
			int l = sky_fedupd_encode_plain(r->round, 0, r->words, x, 1, f->msg,
							sizeof f->msg);
			sky_topic_job_to(topic, sizeof topic, job, SKY_TOPIC_FEDUPD, a->idn.id);
			if (l > 0)
				sky_mqtt_publish(a->m, topic, f->msg, (size_t)l, 1, 0, NULL);
		}
		return; /* not one of its owners */
	}
	if (f->job[0] && strcmp(f->job, job) != 0) {
		if (f->r.done || f->failed) {
			fed_reset_job(f);
		} else {
			SKY_WARN("fed job %s: this board is in fed job %s; one at a time", job, f->job);
			return;
		}
	}
	if (r->done) {
		if (f->job[0])
			SKY_INFO("fed job %s done after %llu round(s)", job,
				 (unsigned long long)r->rounds);
		fed_reset_job(f);
		return;
	}
	if (f->job[0] && (r->round < f->next_round ||
			  (f->have_round && r->round == f->r.round)))
		return; /* a round we sent, or the one in hand (a re-delivery) */
	if (!f->job[0])
		snprintf(f->job, sizeof f->job, "%s", job);
	if (!r->sampled[me]) {
		SKY_INFO("fed job %s round %llu: not sampled", job, (unsigned long long)r->round);
		f->r = *r;
		f->have_round = 0;
		return;
	}
	unsigned char want[32];
	if (r->model_bytes > MAX_BUNDLE || sky_sha256_parse(r->model_sha256, want) != 0)
		return;
	f->r = *r;
	f->have_round = 1;
	f->ready = 0;
	memcpy(f->want, want, 32);
	f->total = sky_chunk_count(r->model_bytes, r->chunk_bytes);
	f->got = 0;
	unsigned char *nb = realloc(f->bundle, r->model_bytes);
	unsigned char *ns = realloc(f->seen, f->total);
	if (nb)
		f->bundle = nb;
	if (ns)
		f->seen = ns;
	if (!nb || !ns) {
		SKY_ERROR("fed job %s: no memory for the model (%llu bytes)", job,
			  (unsigned long long)r->model_bytes);
		f->have_round = 0;
		return;
	}
	f->bundle_len = r->model_bytes;
	memset(f->seen, 0, f->total);
}

/* A chunk of the global model: kept when it is of the model the signed
 * round names. */
static void on_model(agent *a, const char *job, const unsigned char *p, size_t len)
{
	agent_fed *f = a->fed;
	sky_chunk c;
	sky_chunk_reason why;
	sky_diag d;
	sky_diag_clear(&d);
	if (!f || !f->have_round || f->ready || strcmp(f->job, job) != 0)
		return;
	if (sky_chunk_decode(p, len, &c, &why, &d) != 0 || c.kind != SKY_CHUNK_MODEL ||
	    memcmp(c.file_sha, f->want, 32) != 0 || c.file_bytes != f->r.model_bytes ||
	    c.chunk_bytes != f->r.chunk_bytes || c.total != f->total) {
		f->chunks_dropped++;
		return;
	}
	if (f->seen[c.index])
		return;
	memcpy(f->bundle + (uint64_t)c.index * c.chunk_bytes, c.data, c.len);
	f->seen[c.index] = 1;
	if (++f->got < f->total)
		return;
	unsigned char sha[32];
	sky_sha256(f->bundle, f->bundle_len, sha);
	if (memcmp(sha, f->want, 32) != 0) {
		SKY_WARN("fed job %s round %llu: the model's chunks hash to another model; waiting "
			 "for them again", job, (unsigned long long)f->r.round);
		memset(f->seen, 0, f->total);
		f->got = 0;
		return;
	}
	f->ready = 1;
}

int agent_fed_on_msg(agent *a, const char *topic, size_t tl, const unsigned char *p, size_t len)
{
	char job[SKY_TOPIC_SEGMENT_MAX + 1], leaf[16];
	if (sky_topic_parse(topic, tl, "job", job, sizeof job, leaf, sizeof leaf) != 0)
		return 0;
	if (strcmp(leaf, SKY_TOPIC_FEDROUND) == 0)
		on_round(a, job, p, len);
	else if (strcmp(leaf, SKY_TOPIC_FEDMODEL) == 0)
		on_model(a, job, p, len);
	else
		return 0;
	return 1;
}
