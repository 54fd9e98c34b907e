#define _GNU_SOURCE
#include "sky_file.h"

#include "sky_err.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

int sky_file_map_open(sky_file_map *m, const char *path)
{
	m->data = NULL;
	m->size = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? SKY_ENOTFOUND : SKY_EIO;
	struct stat st;
	int rc = SKY_EIO;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		goto exit;
	if (st.st_size > 0) {
		void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED)
			goto exit;
		m->data = p;
		m->size = (size_t)st.st_size;
	}
	rc = 0;
exit:
	close(fd);
	return rc;
}

void sky_file_map_close(sky_file_map *m)
{
	if (m && m->data)
		munmap((void *)m->data, m->size);
	if (m) {
		m->data = NULL;
		m->size = 0;
	}
}

int sky_file_read_count(const char *path, int64_t *out)
{
	char buf[24]; /* 16 digits of 2^53, a newline, room to see trailing junk */
	long n = sky_file_read(path, buf, sizeof buf);
	if (n == SKY_ERANGE)
		return SKY_EFORMAT; /* longer than any counter we write */
	if (n < 0)
		return (int)n;
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n == 0)
		return SKY_EFORMAT;
	for (long i = 0; i < n; i++)
		if (buf[i] < '0' || buf[i] > '9')
			return SKY_EFORMAT;
	if (n > 16) /* 2^53 - 1 has 16 digits */
		return SKY_ERANGE;
	int64_t v = 0;
	for (long i = 0; i < n; i++)
		v = v * 10 + (buf[i] - '0');
	if (v > SKY_FILE_COUNT_MAX)
		return SKY_ERANGE;
	*out = v;
	return 0;
}

int sky_file_write_count(const char *path, int64_t v, unsigned mode)
{
	char buf[24];
	if (v < 0 || v > SKY_FILE_COUNT_MAX)
		return SKY_ERANGE;
	int n = snprintf(buf, sizeof buf, "%lld\n", (long long)v);
	return sky_file_write(path, buf, (size_t)n, mode);
}

long sky_file_read(const char *path, void *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? SKY_ENOTFOUND : SKY_EIO;
	size_t got = 0;
	long rc;
	for (;;) {
		if (got == cap) {
			char extra;
			ssize_t n = read(fd, &extra, 1);
			rc = n == 0 ? (long)got : n > 0 ? SKY_ERANGE : SKY_EIO;
			break;
		}
		ssize_t n = read(fd, (char *)buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = SKY_EIO;
			break;
		}
		if (n == 0) {
			rc = (long)got;
			break;
		}
		got += (size_t)n;
	}
	close(fd);
	return rc;
}

int sky_file_append(const char *path, const void *data, size_t len, unsigned mode)
{
	/* O_APPEND: one write() of a line lands whole at the end, even if two
	 * writers share the file */
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, (mode_t)mode);
	if (fd < 0)
		return SKY_EIO;
	int rc = 0;
	size_t done = 0;
	while (done < len && !rc) {
		ssize_t n = write(fd, (const char *)data + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			rc = SKY_EIO;
		else
			done += (size_t)n;
	}
	if (!rc && fsync(fd) != 0)
		rc = SKY_EIO;
	if (close(fd) != 0)
		rc = SKY_EIO;
	return rc;
}

int sky_file_write(const char *path, const void *data, size_t len, unsigned mode)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
		return SKY_EIO;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, (mode_t)mode);
	if (fd < 0)
		return SKY_EIO;
	int rc = SKY_EIO;
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(fd, (const char *)data + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto exit;
		done += (size_t)n;
	}
	/* open() honoured the umask; set the exact bits asked for */
	if (fchmod(fd, (mode_t)mode) != 0 || fsync(fd) != 0)
		goto exit;
	rc = 0;
exit:
	if (close(fd) != 0)
		rc = SKY_EIO;
	if (rc == 0 && rename(tmp, path) != 0)
		rc = SKY_EIO;
	if (rc != 0)
		unlink(tmp);
	return rc;
}

int sky_file_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

int sky_file_mode(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return SKY_ENOTFOUND;
	return (int)(st.st_mode & 07777);
}

int sky_file_mkdirs(const char *dir, unsigned mode)
{
	char buf[PATH_MAX];
	size_t n = strlen(dir);
	if (n == 0 || n >= sizeof buf)
		return SKY_EIO;
	memcpy(buf, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		char c = buf[i];
		buf[i] = '\0';
		if (mkdir(buf, (mode_t)mode) != 0 && errno != EEXIST)
			return SKY_EIO;
		buf[i] = c;
	}
	return 0;
}

int sky_file_exe_dir(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	if (n <= 0 || (size_t)n >= len - 1)
		return SKY_EIO;
	buf[n] = '\0';
	char *slash = strrchr(buf, '/');
	if (!slash)
		return SKY_EIO;
	*slash = '\0';
	return 0;
}

int sky_file_is_exec(const char *path)
{
	struct stat st;
	return path && stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int sky_file_exec(const char *path, char *const argv[])
{
	execv(path, argv);
	return SKY_EIO;
}

int sky_file_is_dir(const char *path)
{
	struct stat st;
	return path && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int sky_file_remove(const char *path)
{
	if (unlink(path) == 0)
		return 0;
	return errno == ENOENT ? SKY_ENOTFOUND : SKY_EIO;
}

long long sky_file_size(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return errno == ENOENT ? SKY_ENOTFOUND : SKY_EIO;
	return (long long)st.st_size;
}

int sky_file_truncate(const char *path, long long size)
{
	if (size < 0)
		return SKY_EIO;
	if (truncate(path, (off_t)size) == 0)
		return 0;
	return errno == ENOENT ? SKY_ENOTFOUND : SKY_EIO;
}

int sky_file_rename(const char *from, const char *to)
{
	return rename(from, to) == 0 ? 0 : SKY_EIO;
}

int sky_file_touch(const char *path)
{
	if (utimes(path, NULL) == 0)
		return 0;
	return errno == ENOENT ? SKY_ENOTFOUND : SKY_EIO;
}

double sky_file_mtime(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return errno == ENOENT ? SKY_ENOTFOUND : SKY_EIO;
	return (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec;
}

int sky_file_list(const char *dir, const char *suffix, int (*fn)(void *ctx, const char *name),
		  void *ctx)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? SKY_ENOTFOUND : SKY_EIO;
	size_t sl = suffix ? strlen(suffix) : 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		size_t n = strlen(e->d_name);
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (n < sl || memcmp(e->d_name + n - sl, suffix, sl) != 0)
			continue;
		if (fn(ctx, e->d_name) != 0)
			break;
	}
	closedir(d);
	return 0;
}
