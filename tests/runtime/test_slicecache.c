#include "sky_test.h"

#include "sky_chunk.h"
#include "sky_clock.h"
#include "sky_file.h"
#include "sky_slicecache.h"

#include <stdio.h>
#include <string.h>

#define FILE_BYTES 3000
#define CHUNK 512

static unsigned char g_file[FILE_BYTES], g_msg[SKY_CHUNK_HEADER_BYTES + CHUNK];

static void make_file(sky_slice_info *w, unsigned seed)
{
	for (size_t i = 0; i < sizeof g_file; i++)
		g_file[i] = (unsigned char)(i * 13 + seed);
	memset(w, 0, sizeof *w);
	sky_sha256(g_file, sizeof g_file, w->sha);
	w->bytes = FILE_BYTES;
	w->chunk_bytes = CHUNK;
	w->chunks = sky_chunk_count(FILE_BYTES, CHUNK);
}

static int chunk(const sky_slice_info *w, uint32_t i)
{
	return sky_chunk_encode(SKY_CHUNK_SLICE, g_file, FILE_BYTES, w->sha, CHUNK, i, g_msg,
				sizeof g_msg);
}

static void fresh_dir(char *dir, size_t cap, const char *name)
{
	snprintf(dir, cap, "%s/%s", sky_test_tmp_dir(), name);
	sky_file_mkdirs(dir, 0700);
}

SKY_TEST(a_download_in_order_lands_under_its_hash_and_then_hits)
{
	char dir[512], path[700];
	sky_slice_info w;
	sky_slice_stats st;
	sky_slice_rx rx;
	memset(&st, 0, sizeof st);
	make_file(&w, 1);
	fresh_dir(dir, sizeof dir, "order");
	SKY_EXPECT_EQ(sky_slicecache_lookup(dir, w.sha, path, sizeof path), 0);
	SKY_EXPECT_EQ(sky_slice_rx_begin(&rx, dir, "j1", &w, NULL), 0);
	SKY_EXPECT_EQ(rx.next, 0);
	for (uint32_t i = 0; i < w.chunks; i++) {
		int n = chunk(&w, i);
		SKY_EXPECT_EQ(sky_slice_rx_chunk(&rx, g_msg, (size_t)n, &st, NULL),
			      i + 1 < w.chunks ? 0 : 1);
	}
	SKY_EXPECT_EQ(st.chunks_received, w.chunks);
	SKY_EXPECT_EQ(st.bytes_received, FILE_BYTES);
	SKY_EXPECT_EQ(st.downloads, 1);
	SKY_EXPECT_EQ(sky_slicecache_lookup(dir, w.sha, path, sizeof path), 1);
	unsigned char h[32];
	SKY_EXPECT_EQ(sky_sha256_file(path, h, NULL), 0);
	SKY_EXPECT(memcmp(h, w.sha, 32) == 0);
	/* no .part is left behind */
	char part[700];
	sky_slicecache_path(dir, w.sha, ".part", part, sizeof part);
	SKY_EXPECT(!sky_file_exists(part));
}

/* The receiver is a fresh process (begin again over the same directory):
 * it asks from its first missing chunk, and a torn tail is cut off. */
SKY_TEST(a_restart_mid_download_resumes_after_its_verified_chunks)
{
	char dir[512], part[700];
	sky_slice_info w;
	sky_slice_stats st;
	sky_slice_rx rx;
	memset(&st, 0, sizeof st);
	make_file(&w, 2);
	fresh_dir(dir, sizeof dir, "resume");
	SKY_EXPECT_EQ(sky_slice_rx_begin(&rx, dir, "j1", &w, NULL), 0);
	for (uint32_t i = 0; i < 3; i++) {
		int n = chunk(&w, i);
		SKY_EXPECT_EQ(sky_slice_rx_chunk(&rx, g_msg, (size_t)n, &st, NULL), 0);
	}
	/* a crash in the middle of writing chunk 3 */
	sky_slicecache_path(dir, w.sha, ".part", part, sizeof part);
	SKY_EXPECT_EQ(sky_file_append(part, g_file + 3 * CHUNK, 100, 0600), 0);
	sky_slice_rx again;
	SKY_EXPECT_EQ(sky_slice_rx_begin(&again, dir, "j1", &w, NULL), 0);
	SKY_EXPECT_EQ(again.next, 3);
	SKY_EXPECT_EQ(again.resumed, 3);
	SKY_EXPECT_EQ(sky_file_size(part), 3 * CHUNK);
	/* chunk 0 again (a planner that started over) is not needed: dropped */
	int n = chunk(&w, 0);
	SKY_EXPECT_EQ(sky_slice_rx_chunk(&again, g_msg, (size_t)n, &st, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(st.dropped[SKY_CHUNK_BAD_INDEX], 1);
	long before = st.chunks_received;
	for (uint32_t i = 3; i < w.chunks; i++) {
		n = chunk(&w, i);
		SKY_EXPECT_EQ(sky_slice_rx_chunk(&again, g_msg, (size_t)n, &st, NULL),
			      i + 1 < w.chunks ? 0 : 1);
	}
	SKY_EXPECT_EQ(st.chunks_received - before, w.chunks - 3);
	char path[700];
	SKY_EXPECT_EQ(sky_slicecache_lookup(dir, w.sha, path, sizeof path), 1);
}

SKY_TEST(bad_chunks_are_dropped_and_counted_by_reason)
{
	char dir[512];
	sky_slice_info w, other;
	sky_slice_stats st;
	sky_slice_rx rx;
	sky_diag d;
	memset(&st, 0, sizeof st);
	make_file(&other, 9);
	unsigned char other_msg[sizeof g_msg];
	int on = chunk(&other, 0);
	memcpy(other_msg, g_msg, (size_t)on);
	make_file(&w, 3);
	fresh_dir(dir, sizeof dir, "bad");
	/* nothing asked yet */
	int n = chunk(&w, 0);
	memset(&rx, 0, sizeof rx);
	SKY_EXPECT(sky_slice_rx_chunk(&rx, g_msg, (size_t)n, &st, NULL) < 0);
	SKY_EXPECT_EQ(st.dropped[SKY_CHUNK_UNASKED], 1);
	SKY_EXPECT_EQ(sky_slice_rx_begin(&rx, dir, "j1", &w, NULL), 0);
	/* a wrong payload hash */
	g_msg[SKY_CHUNK_HEADER_BYTES] ^= 0x80;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_slice_rx_chunk(&rx, g_msg, (size_t)n, &st, &d), SKY_EAUTH);
	SKY_EXPECT_EQ(st.dropped[SKY_CHUNK_BAD_HASH], 1);
	g_msg[SKY_CHUNK_HEADER_BYTES] ^= 0x80;
	/* another file's chunk */
	SKY_EXPECT_EQ(sky_slice_rx_chunk(&rx, other_msg, (size_t)on, &st, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(st.dropped[SKY_CHUNK_UNASKED], 2);
	/* the wrong index */
	n = chunk(&w, 2);
	SKY_EXPECT_EQ(sky_slice_rx_chunk(&rx, g_msg, (size_t)n, &st, NULL), SKY_EINVAL);
	SKY_EXPECT_EQ(st.dropped[SKY_CHUNK_BAD_INDEX], 1);
	/* oversize */
	static unsigned char big[SKY_CHUNK_MAX_BYTES + 1];
	SKY_EXPECT_EQ(sky_slice_rx_chunk(&rx, big, sizeof big, &st, NULL), SKY_ERANGE);
	SKY_EXPECT_EQ(st.dropped[SKY_CHUNK_OVERSIZE], 1);
	/* none of them reached the disk */
	SKY_EXPECT_EQ(rx.next, 0);
	SKY_EXPECT_EQ(st.chunks_received, 0);
	char part[700];
	sky_slicecache_path(dir, w.sha, ".part", part, sizeof part);
	SKY_EXPECT(sky_file_size(part) <= 0);
	SKY_EXPECT_EQ(sky_slicecache_stats_save(dir, &st), 0);
	char buf[1024], path[600];
	snprintf(path, sizeof path, "%s/stats.json", dir);
	long len = sky_file_read(path, buf, sizeof buf - 1);
	SKY_EXPECT(len > 0);
	buf[len > 0 ? len : 0] = 0;
	SKY_EXPECT_MSG(strstr(buf, "\"bad_hash\":1,\"unasked\":2,\"bad_index\":1") != NULL, "%s", buf);
	/* a restarted board reads them back and counts on */
	sky_slice_stats back;
	SKY_EXPECT_EQ(sky_slicecache_stats_load(dir, &back), 0);
	SKY_EXPECT(memcmp(&back, &st, sizeof st) == 0);
	SKY_EXPECT_EQ(sky_file_write(path, "{\"hits\":", 8, 0644), 0);
	SKY_EXPECT_EQ(sky_slicecache_stats_load(dir, &back), SKY_EFORMAT);
	SKY_EXPECT_EQ(back.dropped[SKY_CHUNK_UNASKED], 0);
}

/* Chunks each sound but from a part file damaged on disk: the whole hash
 * catches it, the part goes, the download starts again. */
SKY_TEST(a_whole_file_that_does_not_hash_to_the_plan_is_not_kept)
{
	char dir[512], part[700], path[700];
	sky_slice_info w;
	sky_slice_stats st;
	sky_slice_rx rx;
	memset(&st, 0, sizeof st);
	make_file(&w, 4);
	fresh_dir(dir, sizeof dir, "whole");
	SKY_EXPECT_EQ(sky_slice_rx_begin(&rx, dir, "j1", &w, NULL), 0);
	sky_slicecache_path(dir, w.sha, ".part", part, sizeof part);
	int n = chunk(&w, 0);
	SKY_EXPECT_EQ(sky_slice_rx_chunk(&rx, g_msg, (size_t)n, &st, NULL), 0);
	/* damage chunk 0 on disk behind the receiver's back */
	sky_file_truncate(part, 0);
	unsigned char junk[CHUNK];
	memset(junk, 0x55, sizeof junk);
	sky_file_append(part, junk, sizeof junk, 0600);
	int rc = 0;
	for (uint32_t i = 1; i < w.chunks; i++) {
		n = chunk(&w, i);
		rc = sky_slice_rx_chunk(&rx, g_msg, (size_t)n, &st, NULL);
	}
	SKY_EXPECT_EQ(rc, SKY_EAUTH);
	SKY_EXPECT_EQ(st.file_hash_mismatch, 1);
	SKY_EXPECT_EQ(rx.next, 0);
	SKY_EXPECT(!sky_file_exists(part));
	SKY_EXPECT_EQ(sky_slicecache_lookup(dir, w.sha, path, sizeof path), 0);
}

SKY_TEST(a_damaged_cached_slice_is_a_miss_and_is_removed)
{
	char dir[512], path[700];
	sky_slice_info w;
	make_file(&w, 5);
	fresh_dir(dir, sizeof dir, "damaged");
	sky_slicecache_path(dir, w.sha, ".safetensors", path, sizeof path);
	g_file[7] ^= 1;
	SKY_EXPECT_EQ(sky_file_write(path, g_file, sizeof g_file, 0644), 0);
	SKY_EXPECT_EQ(sky_slicecache_lookup(dir, w.sha, path, sizeof path), 0);
	SKY_EXPECT(!sky_file_exists(path));
}

SKY_TEST(the_cache_keeps_the_most_recently_used_slices)
{
	char dir[512], path[700];
	sky_slice_info w[6];
	fresh_dir(dir, sizeof dir, "lru");
	for (unsigned i = 0; i < 6; i++) {
		make_file(&w[i], 20 + i);
		sky_slicecache_path(dir, w[i].sha, ".safetensors", path, sizeof path);
		SKY_EXPECT_EQ(sky_file_write(path, g_file, sizeof g_file, 0644), 0);
	}
	/* used in the order 3 0 5 1 2 4 (mtime; lookups touch) */
	const int order[6] = {3, 0, 5, 1, 2, 4};
	for (int k = 0; k < 6; k++) {
		make_file(&w[order[k]], 20 + (unsigned)order[k]);
		SKY_EXPECT_EQ(sky_slicecache_lookup(dir, w[order[k]].sha, path, sizeof path), 1);
		sky_sleep_ms(20); /* mtimes a clear step apart */
	}
	/* a .part of another slice is stale */
	unsigned char x[3] = {1, 2, 3};
	sky_slicecache_path(dir, w[0].sha, ".part", path, sizeof path);
	sky_file_append(path, x, 3, 0600);
	/* keep 3, one of them the slice 3 the plan needs (the least recent) */
	SKY_EXPECT_EQ(sky_slicecache_trim(dir, 3, w[3].sha), 4);
	int kept[6];
	for (int i = 0; i < 6; i++) {
		sky_slicecache_path(dir, w[i].sha, ".safetensors", path, sizeof path);
		kept[i] = sky_file_exists(path);
	}
	SKY_EXPECT(kept[3] && kept[2] && kept[4]);
	SKY_EXPECT(!kept[0] && !kept[1] && !kept[5]);
	sky_slicecache_path(dir, w[0].sha, ".part", path, sizeof path);
	SKY_EXPECT(!sky_file_exists(path));
}
