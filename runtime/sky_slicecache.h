/* A board's slices on disk, by hash, and the download of a missing one.
 *
 * A slice (the safetensors file of one stage, runtime/slice.c) lives as
 * <state>/slices/<sha256>.safetensors, named by the SHA-256 of its bytes.
 * A plan names the slice's hash, so a board that finds the file and whose
 * bytes hash to that name has it already: a cache hit, nothing downloaded
 * (a restart, a re-plan onto the same layers, a resubmit of the same
 * model). Otherwise the board asks the planner for it (sky_chunk.h) and
 * writes verified chunks, in order, to <sha256>.part as they come; the
 * part file only ever holds whole verified chunks, so a board restarted
 * mid-download resumes at size / chunk_bytes and fetches nothing it has.
 * After the last chunk the whole file's hash must equal the plan's, or the
 * part is thrown away; only then is it renamed to its final name.
 *
 * The cache keeps the SKY_SLICECACHE_KEEP most recently used slices (a hit
 * or a finished download counts as a use: the file's mtime), and removes
 * older ones, and stale .part files, when a new one is added. */
#ifndef SKY_SLICECACHE_H
#define SKY_SLICECACHE_H

#include "sky_chunk.h"
#include "sky_err.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_SLICECACHE_DIR "slices"
#define SKY_SLICECACHE_KEEP 4

typedef struct sky_slice_info {
	unsigned char sha[32];
	uint64_t bytes;
	uint32_t chunks, chunk_bytes;
} sky_slice_info;

/* What a board's cache did, for its log and its metrics file
 * (<state>/slices/stats.json, sky_slicecache_stats_save). */
typedef struct sky_slice_stats {
	long hits;               /* plans whose slice was already in the cache */
	long misses;             /* plans that had to download */
	long downloads;          /* slices completed by download */
	long chunks_received;    /* verified chunks written */
	long chunks_resumed;     /* verified chunks found in a .part at start (not fetched again) */
	long long bytes_received;/* payload bytes of verified chunks */
	long file_hash_mismatch; /* completed downloads thrown away (whole-file hash) */
	long dropped[SKY_CHUNK_NREASONS]; /* chunks dropped, by reason */
} sky_slice_stats;

/* <dir>/<sha hex><ext> into buf. Returns 0 or SKY_ERANGE. */
int sky_slicecache_path(const char *dir, const unsigned char sha[32], const char *ext, char *buf,
			size_t cap);

/* Looks for the slice in dir. Returns 1 if <sha>.safetensors is there and
 * hashes to sha (it is then touched as used, and its path is in path), 0
 * if not (a file whose hash is wrong is removed, and logged). */
int sky_slicecache_lookup(const char *dir, const unsigned char sha[32], char *path, size_t cap);

/* Keeps the keep most recently used slices in dir, never removing the one
 * named keep_sha (NULL: none), and removes .part files of other hashes.
 * Returns how many files it removed. */
int sky_slicecache_trim(const char *dir, int keep, const unsigned char *keep_sha);

/* Reads <dir>/stats.json into st (the counts of earlier runs: a board's
 * counters go on across restarts). Returns 0, or SKY_ENOTFOUND /
 * SKY_EFORMAT with st zeroed. */
int sky_slicecache_stats_load(const char *dir, sky_slice_stats *st);
/* Writes st as JSON to <dir>/stats.json (atomically). Returns 0 or SKY_EIO. */
int sky_slicecache_stats_save(const char *dir, const sky_slice_stats *st);

/* One download in progress. */
typedef struct sky_slice_rx {
	char dir[512];
	char part[600], final[600];
	char job[65];
	sky_slice_info want;
	uint32_t next;    /* verified chunks on disk: the next index wanted */
	uint32_t resumed; /* of which found on disk at begin */
	int active;       /* 1 between begin and completion */
} sky_slice_rx;

/* Starts (or resumes) fetching want into dir for job: a .part of the same
 * hash counts its whole chunks as had (a torn tail is cut off). Returns 0
 * with rx->next the first chunk to ask for, or SKY_EIO / SKY_ERANGE. */
int sky_slice_rx_begin(sky_slice_rx *rx, const char *dir, const char *job,
		       const sky_slice_info *want, sky_diag *d);

/* Takes one chunk message. Returns 0 (written, more to come), 1 (the
 * last: the file hashed to want.sha and is in place at rx->final), or a
 * negative code when the chunk was dropped (st->dropped[reason] counted,
 * d says why). A complete file whose hash is wrong is removed and the
 * download starts again from chunk 0 (SKY_EAUTH, counted in
 * file_hash_mismatch). */
int sky_slice_rx_chunk(sky_slice_rx *rx, const unsigned char *buf, size_t len,
		       sky_slice_stats *st, sky_diag *d);

#endif
