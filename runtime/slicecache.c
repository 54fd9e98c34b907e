#include "sky_slicecache.h"

#include "sky_file.h"
#include "sky_json.h"
#include "sky_log.h"

#include <stdio.h>
#include <string.h>

int sky_slicecache_path(const char *dir, const unsigned char sha[32], const char *ext, char *buf,
			size_t cap)
{
	char hex[65];
	sky_sha256_hex(sha, hex);
	int n = snprintf(buf, cap, "%s/%s%s", dir, hex, ext);
	return (n < 0 || (size_t)n >= cap) ? SKY_ERANGE : 0;
}

int sky_slicecache_lookup(const char *dir, const unsigned char sha[32], char *path, size_t cap)
{
	unsigned char h[32];
	if (sky_slicecache_path(dir, sha, ".safetensors", path, cap) != 0 || !sky_file_exists(path))
		return 0;
	if (sky_sha256_file(path, h, NULL) != 0)
		return 0;
	if (memcmp(h, sha, 32) != 0) {
		/* damaged on disk: it would never hit again, and it takes room */
		SKY_WARN("slice cache: %s does not hash to its name; removed", path);
		sky_file_remove(path);
		return 0;
	}
	sky_file_touch(path);
	return 1;
}

#define TRIM_MAX 256

typedef struct trim_ctx {
	const char *dir;
	const unsigned char *keep_sha;
	char keep_hex[65];
	int n;
	char name[TRIM_MAX][80];
	double mtime[TRIM_MAX];
	int removed;
} trim_ctx;

static int trim_one(void *ctx, const char *name)
{
	trim_ctx *t = ctx;
	char path[700];
	size_t n = strlen(name);
	/* only files this module names: 64 hex digits and an extension */
	if (n < 64 || strspn(name, "0123456789abcdef") != 64)
		return 0;
	snprintf(path, sizeof path, "%s/%s", t->dir, name);
	int ours = t->keep_sha && strncmp(name, t->keep_hex, 64) == 0;
	if (strcmp(name + 64, ".part") == 0) {
		if (!ours && sky_file_remove(path) == 0)
			t->removed++;
		return 0;
	}
	if (strcmp(name + 64, ".safetensors") != 0 || ours || t->n >= TRIM_MAX)
		return 0;
	snprintf(t->name[t->n], sizeof t->name[t->n], "%s", name);
	t->mtime[t->n++] = sky_file_mtime(path);
	return 0;
}

int sky_slicecache_trim(const char *dir, int keep, const unsigned char *keep_sha)
{
	static trim_ctx t; /* 20 KiB of names; one trim at a time (the agent's thread) */
	memset(&t, 0, sizeof t);
	t.dir = dir;
	t.keep_sha = keep_sha;
	if (keep_sha)
		sky_sha256_hex(keep_sha, t.keep_hex);
	sky_file_list(dir, "", trim_one, &t);
	/* keep_sha itself is one of the kept */
	int room = keep - (keep_sha ? 1 : 0);
	if (room < 0)
		room = 0;
	while (t.n > room) {
		int oldest = 0;
		for (int i = 1; i < t.n; i++)
			if (t.mtime[i] < t.mtime[oldest])
				oldest = i;
		char path[700];
		snprintf(path, sizeof path, "%s/%s", dir, t.name[oldest]);
		if (sky_file_remove(path) == 0) {
			t.removed++;
			SKY_INFO("slice cache: removed %s (least recently used; keeping %d)", path, keep);
		}
		t.n--;
		memcpy(t.name[oldest], t.name[t.n], sizeof t.name[0]);
		t.mtime[oldest] = t.mtime[t.n];
	}
	return t.removed;
}

int sky_slicecache_stats_load(const char *dir, sky_slice_stats *st)
{
	char buf[1024], path[600];
	memset(st, 0, sizeof *st);
	int n = snprintf(path, sizeof path, "%s/stats.json", dir);
	if (n < 0 || (size_t)n >= sizeof path)
		return SKY_ERANGE;
	long len = sky_file_read(path, buf, sizeof buf);
	if (len < 0)
		return (int)len;
	cJSON *doc = sky_json_parse(buf, (size_t)len, NULL);
	if (!doc)
		return SKY_EFORMAT;
	const struct {
		const char *key;
		long *v;
	} k[] = {{"hits", &st->hits},
		 {"misses", &st->misses},
		 {"downloads", &st->downloads},
		 {"chunks_received", &st->chunks_received},
		 {"chunks_resumed", &st->chunks_resumed},
		 {"file_hash_mismatch", &st->file_hash_mismatch}};
	int64_t v;
	int rc = 0;
	for (size_t i = 0; i < sizeof k / sizeof k[0] && !rc; i++)
		if ((rc = sky_json_i64(doc, k[i].key, 0, SKY_JSON_INT_MAX, &v, "stats", NULL)) == 0)
			*k[i].v = (long)v;
	if (!rc && (rc = sky_json_i64(doc, "bytes_received", 0, SKY_JSON_INT_MAX, &v, "stats",
				      NULL)) == 0)
		st->bytes_received = (long long)v;
	const cJSON *dr = cJSON_GetObjectItemCaseSensitive(doc, "dropped");
	for (int r = 1; r < SKY_CHUNK_NREASONS && !rc; r++)
		if ((rc = sky_json_i64(dr, sky_chunk_reason_name((sky_chunk_reason)r), 0,
				       SKY_JSON_INT_MAX, &v, "stats", NULL)) == 0)
			st->dropped[r] = (long)v;
	sky_json_free(doc);
	if (rc) {
		memset(st, 0, sizeof *st);
		return SKY_EFORMAT;
	}
	return 0;
}

int sky_slicecache_stats_save(const char *dir, const sky_slice_stats *st)
{
	char buf[1024], path[600];
	int k = snprintf(buf, sizeof buf,
			 "{\"hits\":%ld,\"misses\":%ld,\"downloads\":%ld,\"chunks_received\":%ld,"
			 "\"chunks_resumed\":%ld,\"bytes_received\":%lld,\"file_hash_mismatch\":%ld,"
			 "\"dropped\":{",
			 st->hits, st->misses, st->downloads, st->chunks_received, st->chunks_resumed,
			 st->bytes_received, st->file_hash_mismatch);
	for (int r = 1; r < SKY_CHUNK_NREASONS && k > 0 && (size_t)k < sizeof buf; r++)
		k += snprintf(buf + k, sizeof buf - (size_t)k, "%s\"%s\":%ld", r > 1 ? "," : "",
			      sky_chunk_reason_name((sky_chunk_reason)r), st->dropped[r]);
	if (k > 0 && (size_t)k < sizeof buf)
		k += snprintf(buf + k, sizeof buf - (size_t)k, "}}\n");
	if (k <= 0 || (size_t)k >= sizeof buf)
		return SKY_ERANGE;
	int n = snprintf(path, sizeof path, "%s/stats.json", dir);
	if (n < 0 || (size_t)n >= sizeof path)
		return SKY_ERANGE;
	return sky_file_write(path, buf, (size_t)k, 0644);
}

int sky_slice_rx_begin(sky_slice_rx *rx, const char *dir, const char *job,
		       const sky_slice_info *want, sky_diag *d)
{
	memset(rx, 0, sizeof *rx);
	int n = snprintf(rx->dir, sizeof rx->dir, "%s", dir);
	if (n < 0 || (size_t)n >= sizeof rx->dir || snprintf(rx->job, sizeof rx->job, "%s", job) < 0 ||
	    sky_slicecache_path(dir, want->sha, ".part", rx->part, sizeof rx->part) != 0 ||
	    sky_slicecache_path(dir, want->sha, ".safetensors", rx->final, sizeof rx->final) != 0)
		return sky_diag_set(d, SKY_ERANGE, "slice cache: directory name too long");
	if (want->chunk_bytes == 0 || want->chunks != sky_chunk_count(want->bytes, want->chunk_bytes))
		return sky_diag_set(d, SKY_EINVAL, "slice: %u chunks of %u do not hold %llu bytes",
				    want->chunks, want->chunk_bytes, (unsigned long long)want->bytes);
	if (sky_file_mkdirs(dir, 0700) != 0)
		return sky_diag_set(d, SKY_EIO, "slice cache: cannot create %s", dir);
	rx->want = *want;
	long long have = sky_file_size(rx->part);
	if (have > 0) {
		/* whole verified chunks only; a chunk cut short by a crash goes */
		uint64_t whole = (uint64_t)have / want->chunk_bytes;
		if (whole >= want->chunks) /* a full part whose rename never came: check it again */
			whole = want->chunks - 1;
		if ((uint64_t)have != whole * want->chunk_bytes &&
		    sky_file_truncate(rx->part, (long long)(whole * want->chunk_bytes)) != 0)
			return sky_diag_set(d, SKY_EIO, "slice cache: cannot cut %s back", rx->part);
		rx->next = rx->resumed = (uint32_t)whole;
	} else if (have == 0) {
		rx->next = 0;
	}
	rx->active = 1;
	return 0;
}

int sky_slice_rx_chunk(sky_slice_rx *rx, const unsigned char *buf, size_t len,
		       sky_slice_stats *st, sky_diag *d)
{
	sky_chunk c;
	sky_chunk_reason why = SKY_CHUNK_UNASKED;
	int rc;
	if (!rx->active) {
		st->dropped[SKY_CHUNK_UNASKED]++;
		return sky_diag_set(d, SKY_EINVAL, "chunk for job %s: no slice is being fetched",
				    rx->job);
	}
	if ((rc = sky_chunk_decode(buf, len, &c, &why, d)) != 0 ||
	    (rc = sky_chunk_expect(&c, SKY_CHUNK_SLICE, rx->want.sha, rx->want.bytes,
				   rx->want.chunk_bytes, rx->next, &why, d)) != 0) {
		st->dropped[why]++;
		return rc;
	}
	if (sky_file_append(rx->part, c.data, c.len, 0600) != 0 ||
	    sky_file_size(rx->part) != (long long)((uint64_t)rx->next * rx->want.chunk_bytes + c.len)) {
		/* a short write: cut back to the verified chunks, ask again later */
		sky_file_truncate(rx->part, (long long)((uint64_t)rx->next * rx->want.chunk_bytes));
		return sky_diag_set(d, SKY_EIO, "slice cache: cannot write %s", rx->part);
	}
	rx->next++;
	st->chunks_received++;
	st->bytes_received += (long long)c.len;
	if (rx->next < rx->want.chunks)
		return 0;
	unsigned char h[32];
	uint64_t bytes = 0;
	if (sky_sha256_file(rx->part, h, &bytes) != 0 || bytes != rx->want.bytes ||
	    memcmp(h, rx->want.sha, 32) != 0) {
		st->file_hash_mismatch++;
		sky_file_remove(rx->part);
		rx->next = rx->resumed = 0;
		return sky_diag_set(d, SKY_EAUTH,
				    "slice %s: the assembled file does not hash to the plan's; "
				    "removed, fetching it again from chunk 0",
				    rx->part);
	}
	if (sky_file_rename(rx->part, rx->final) != 0)
		return sky_diag_set(d, SKY_EIO, "slice cache: cannot rename %s", rx->part);
	rx->active = 0;
	st->downloads++;
	return 1;
}
