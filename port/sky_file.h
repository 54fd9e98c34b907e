/* Files: read-only mappings (weights are mapped, not copied), whole-file
 * reads into caller memory, atomic writes with a chosen mode (keys are 0600),
 * and the few directory facts the tools need. */
#ifndef SKY_FILE_H
#define SKY_FILE_H

#include <stddef.h>
#include <stdint.h>

typedef struct sky_file_map {
	const unsigned char *data; /* NULL when unmapped */
	size_t size;
} sky_file_map;

/* Maps path read-only. Returns 0; SKY_ENOTFOUND if it does not exist,
 * SKY_EIO if it cannot be read. An empty file maps to data=NULL, size=0. */
int sky_file_map_open(sky_file_map *m, const char *path);
/* NULL-safe; may be called twice. */
void sky_file_map_close(sky_file_map *m);

/* Reads at most cap bytes of path into buf. Returns the byte count (>= 0),
 * SKY_ENOTFOUND, SKY_EIO, or SKY_ERANGE if the file is larger than cap. */
long sky_file_read(const char *path, void *buf, size_t cap);

/* Counters kept in small files (a board's session and plan epoch, the
 * planner's epoch): one decimal number, optionally followed by a newline.
 * Anything else is an error, never a silent 0, because a counter that goes
 * back to 0 undoes what it guards. Values stay at most SKY_FILE_COUNT_MAX
 * (2^53 - 1) so they travel exactly as JSON numbers. */
#define SKY_FILE_COUNT_MAX ((1ll << 53) - 1)
/* Reads the counter in path into *out. Returns 0; SKY_ENOTFOUND (no file),
 * SKY_EIO, SKY_EFORMAT (empty, not a plain decimal, or trailing bytes) or
 * SKY_ERANGE (above SKY_FILE_COUNT_MAX). *out is untouched on failure. */
int sky_file_read_count(const char *path, int64_t *out);
/* Writes v and a newline atomically (sky_file_write). Returns 0, SKY_ERANGE
 * (v outside 0..SKY_FILE_COUNT_MAX) or SKY_EIO. */
int sky_file_write_count(const char *path, int64_t v, unsigned mode);

/* Writes data to path through a temporary file and rename(), so readers
 * never see half a file; the file gets permission bits mode (e.g. 0600).
 * Returns 0 or SKY_EIO. */
int sky_file_write(const char *path, const void *data, size_t len, unsigned mode);

/* Appends data to path (created with mode if missing) and syncs it: for
 * logs whose lines must survive a crash, and downloads resumed after one.
 * Returns 0 or SKY_EIO (how much of a failed append landed is not said:
 * a caller that resumes checks the size). */
int sky_file_append(const char *path, const void *data, size_t len, unsigned mode);

/* Returns 1 if path exists, else 0. */
int sky_file_exists(const char *path);
/* Returns 1 if path is a directory (or a link to one), else 0. */
int sky_file_is_dir(const char *path);
/* Removes the file path. Returns 0, SKY_ENOTFOUND, or SKY_EIO (not allowed:
 * a read-only file system, no write permission on its directory). */
int sky_file_remove(const char *path);
/* Creates dir and its parents with the given mode. Returns 0 or SKY_EIO. */
int sky_file_mkdirs(const char *dir, unsigned mode);
/* Permission bits of path (e.g. 0600), or SKY_ENOTFOUND. */
int sky_file_mode(const char *path);
/* Directory holding the running executable, into buf. Returns 0 or SKY_EIO. */
int sky_file_exe_dir(char *buf, size_t len);
/* Returns 1 if path is a file this process may execute, else 0. */
int sky_file_is_exec(const char *path);
/* Replaces this process with the program at path, given argv (NULL
 * terminated; the environment is kept). Returns only if it cannot:
 * SKY_EIO. */
int sky_file_exec(const char *path, char *const argv[]);

/* Pieces of a file written as they come (a download resumed after a
 * restart): size, append, cut back, rename into place, and the last-use
 * order of a cache directory. */
/* Size of path in bytes (>= 0), or SKY_ENOTFOUND / SKY_EIO. */
long long sky_file_size(const char *path);
/* Cuts path to size bytes. Returns 0, SKY_ENOTFOUND or SKY_EIO. */
int sky_file_truncate(const char *path, long long size);
/* Renames from to to (atomic within one file system). Returns 0 or SKY_EIO. */
int sky_file_rename(const char *from, const char *to);
/* Sets path's modification time to now (the cache's "last used"). Returns
 * 0, SKY_ENOTFOUND or SKY_EIO. */
int sky_file_touch(const char *path);
/* Modification time of path in seconds since the epoch, or a negative
 * SKY_ENOTFOUND / SKY_EIO. */
double sky_file_mtime(const char *path);
/* Calls fn(ctx, name) for each entry of dir whose name ends in suffix
 * ("" for all; "." and ".." never). Stops early when fn returns non-zero.
 * Returns 0, SKY_ENOTFOUND or SKY_EIO. */
int sky_file_list(const char *dir, const char *suffix, int (*fn)(void *ctx, const char *name),
		  void *ctx);

#endif
