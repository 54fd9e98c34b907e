#include "sky_slicefetch.h"

#include "sky_chunk.h"
#include "sky_clock.h"
#include "sky_file.h"
#include "sky_log.h"

#include <stdio.h>
#include <string.h>

void sky_slicefetch_init(sky_slicefetch *f, const char *state_dir, const char *board)
{
	memset(f, 0, sizeof *f);
	snprintf(f->dir, sizeof f->dir, "%s/" SKY_SLICECACHE_DIR, state_dir);
	snprintf(f->board, sizeof f->board, "%s", board);
	/* the counters go on from the last run's */
	int rc = sky_slicecache_stats_load(f->dir, &f->st);
	if (rc && rc != SKY_ENOTFOUND)
		SKY_WARN("slice cache: %s/stats.json is damaged; its counters start again at 0",
			 f->dir);
}

static void save(sky_slicefetch *f)
{
	if (sky_slicecache_stats_save(f->dir, &f->st) != 0)
		SKY_WARN("slice cache: cannot write %s/stats.json", f->dir);
}

int sky_slicefetch_start(sky_slicefetch *f, const char *job, int64_t epoch,
			 const sky_plan_slice *s, const sky_transport_net *net, char *path,
			 size_t cap, sky_diag *d)
{
	sky_slice_info w;
	memset(&w, 0, sizeof w);
	if (sky_sha256_parse(s->sha256, w.sha) != 0 || s->bytes < 0 || s->chunk_bytes <= 0 ||
	    s->chunks <= 0)
		return sky_diag_set(d, SKY_EINVAL, "plan %s: the stage's slice is not usable", job);
	w.bytes = (uint64_t)s->bytes;
	w.chunks = (uint32_t)s->chunks;
	w.chunk_bytes = (uint32_t)s->chunk_bytes;
	f->fetching = 0;
	snprintf(f->job, sizeof f->job, "%s", job);
	f->epoch = epoch;
	sky_file_mkdirs(f->dir, 0700);
	if (sky_slicecache_lookup(f->dir, w.sha, path, cap) == 1) {
		f->st.hits++;
		SKY_INFO("slice cache hit: job %s epoch %lld, slice %.16s.. (%lld bytes) is in %s; "
			 "nothing to download",
			 job, (long long)epoch, s->sha256, (long long)s->bytes, path);
		sky_slicecache_trim(f->dir, SKY_SLICECACHE_KEEP, w.sha);
		save(f);
		return 1;
	}
	int rc = sky_slice_rx_begin(&f->rx, f->dir, job, &w, d);
	if (rc)
		return rc;
	if (sky_topic_job_to(f->topic, sizeof f->topic, job, SKY_TOPIC_SLICE, f->board) != 0)
		return sky_diag_set(d, SKY_EINVAL, "job %s: no slice topic", job);
	f->st.misses++;
	f->st.chunks_resumed += f->rx.resumed;
	f->fetching = 1;
	f->subscribed = 0;
	f->asked_at = 0;
	f->heard_at = sky_clock_s();
	f->fetched = 0;
	f->wire_bytes = 0;
	if (f->rx.resumed)
		SKY_INFO("slice %.16s.. for job %s: resuming at chunk %u of %u (%u verified chunks on "
			 "disk are not fetched again)",
			 s->sha256, job, f->rx.next, w.chunks, f->rx.resumed);
	else
		SKY_INFO("slice %.16s.. for job %s not in the cache: fetching %u chunks (%lld bytes)",
			 s->sha256, job, w.chunks, (long long)s->bytes);
	save(f);
	(void)net; /* the agent's loop asks (sky_slicefetch_tick): not from inside a message */
	return 0;
}

void sky_slicefetch_reconnected(sky_slicefetch *f)
{
	f->subscribed = 0;
	f->asked_at = 0;
}

void sky_slicefetch_tick(sky_slicefetch *f, double now, const sky_transport_net *net)
{
	if (!f->fetching || !net || !net->publish)
		return;
	if (f->asked_at > 0 && now - f->asked_at < SKY_SLICEFETCH_RETRY_S)
		return;
	if (f->asked_at > 0 && now - f->heard_at < SKY_SLICEFETCH_RETRY_S)
		return; /* chunks still coming */
	if (!f->subscribed) {
		if (!net->subscribe || net->subscribe(net->ctx, f->topic) != 0)
			return; /* not connected: later */
		f->subscribed = 1;
	}
	char topic[SKY_TOPIC_BUF], buf[SKY_SLICE_REQ_MAX_BYTES];
	sky_slice_req r;
	memset(&r, 0, sizeof r);
	snprintf(r.job, sizeof r.job, "%s", f->job);
	memcpy(r.sha, f->rx.want.sha, 32);
	r.from = f->rx.next;
	int n = sky_slice_req_encode(&r, buf, sizeof buf);
	if (n <= 0 || sky_topic_board(topic, sizeof topic, f->board, SKY_TOPIC_SLICE_REQ) != 0)
		return;
	if (net->publish(net->ctx, topic, buf, (size_t)n, 1, 0) != 0)
		return;
	if (f->asked_at > 0)
		SKY_WARN("slice for job %s: no chunk for %.0f s; asking again from chunk %u", f->job,
			 now - f->heard_at, r.from);
	f->asked_at = f->heard_at = now;
}

int sky_slicefetch_on_msg(sky_slicefetch *f, const char *topic, const unsigned char *p, size_t len,
			  char *path, size_t cap)
{
	char job[SKY_TOPIC_SEGMENT_MAX + 1], who[SKY_TOPIC_SEGMENT_MAX + 1];
	if (sky_topic_parse_job_to(topic, strlen(topic), SKY_TOPIC_SLICE, job, sizeof job, who,
				   sizeof who) != 0 ||
	    strcmp(who, f->board) != 0)
		return 0;
	sky_diag d;
	sky_diag_clear(&d);
	if (!f->fetching || strcmp(job, f->job) != 0) {
		f->st.dropped[SKY_CHUNK_UNASKED]++;
		SKY_DEBUG("slice chunk on %s dropped: no slice of job %s is being fetched", topic, job);
		return 1;
	}
	long before = f->st.chunks_received;
	int rc = sky_slice_rx_chunk(&f->rx, p, len, &f->st, &d);
	if (rc < 0) {
		/* a duplicate of a chunk already written is normal after asking again */
		if (f->st.dropped[SKY_CHUNK_BAD_INDEX] && strstr(d.msg, "needed next"))
			SKY_DEBUG("slice chunk dropped: %s", d.msg);
		else
			SKY_WARN("slice chunk for job %s dropped: %s", job, d.msg);
		if (rc == SKY_EAUTH && f->rx.next == 0 && f->st.file_hash_mismatch)
			f->asked_at = 0; /* the whole file was wrong: ask for all of it again */
		save(f);
		return 1;
	}
	f->fetched += f->st.chunks_received - before;
	f->wire_bytes += (long long)len;
	f->heard_at = sky_clock_s();
	if (rc == 0) {
		if (f->fetched % 16 == 0)
			save(f);
		return 1;
	}
	f->fetching = 0;
	snprintf(path, cap, "%s", f->rx.final);
	char hex[65];
	sky_sha256_hex(f->rx.want.sha, hex);
	SKY_INFO("slice %.16s.. for job %s in place: %s (%llu bytes; %ld chunks fetched, %u resumed "
		 "from disk, %lld bytes of chunks received)",
		 hex, f->job, path, (unsigned long long)f->rx.want.bytes, f->fetched, f->rx.resumed,
		 f->wire_bytes);
	sky_slicecache_trim(f->dir, SKY_SLICECACHE_KEEP, f->rx.want.sha);
	save(f);
	return 2;
}
