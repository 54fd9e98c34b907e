/* Safetensors weight files: read by mmap (tensors are views into the
 * mapping, never copied), validated against the format, and written
 * atomically.
 *
 * The format (huggingface/safetensors, docs "Format"):
 *   8 bytes   N, unsigned 64-bit little-endian: the header's byte length
 *   N bytes   a JSON object, UTF-8, starting with '{', may be padded at the
 *             end with spaces: { "__metadata__": {"k": "v", ...},
 *               "<name>": {"dtype": "F32", "shape": [2, 3],
 *                          "data_offsets": [begin, end]}, ... }
 *   the rest  the byte buffer; offsets are relative to its start, data is
 *             little-endian and row-major.
 *
 * What Sky enforces when reading (each failure names the tensor or field):
 *   - the file holds the 8 length bytes; 2 <= N <= SKY_ST_MAX_HEADER and
 *     N <= file size - 8; the header starts with '{' and is exactly one JSON
 *     object followed only by JSON whitespace;
 *   - names are unique and non-empty; "__metadata__" is a string-to-string
 *     object;
 *   - every tensor entry is an object with exactly dtype (a known name),
 *     shape (at most SKY_ST_MAX_DIMS whole numbers >= 0) and data_offsets
 *     (two whole numbers, 0 <= begin <= end);
 *   - end - begin == product(shape) * dtype size, computed with overflow
 *     checks (every number must be below 2^53, where doubles are exact);
 *   - the regions, sorted by offset, tile the byte buffer exactly: the first
 *     begins at 0, each begins where the previous ends (no overlap, no hole)
 *     and the last ends at the end of the file (no trailing bytes). This is
 *     the format's "entirely indexed, no holes" rule, as the reference
 *     implementation applies it.
 * Tensor values are not inspected (NaN and infinities are allowed, as in
 * the format).
 *
 * Alignment: the format does not align data. sky_st_get() and
 * sky_st_get_f32() return views and fail with SKY_EFORMAT when a view would
 * be misaligned for its type; sky_st_copy_f32() copies into caller memory
 * and works at any alignment. Sky's writer starts the buffer at an 8-byte
 * boundary and orders tensors by element size, largest first, so every
 * tensor it writes is naturally aligned. */
#ifndef SKY_SAFETENSORS_H
#define SKY_SAFETENSORS_H

#include "sky_err.h"
#include "sky_file.h"
#include "sky_tensor.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_ST_MAX_HEADER (16u << 20) /* bytes; the reference reader allows 100 MB */
#define SKY_ST_MAX_DIMS 8

/* The format's dtypes (safetensors "Dtype"). */
typedef enum {
	SKY_ST_BOOL,
	SKY_ST_U8,
	SKY_ST_I8,
	SKY_ST_F8_E5M2,
	SKY_ST_F8_E4M3,
	SKY_ST_I16,
	SKY_ST_U16,
	SKY_ST_F16,
	SKY_ST_BF16,
	SKY_ST_I32,
	SKY_ST_U32,
	SKY_ST_F32,
	SKY_ST_F64,
	SKY_ST_I64,
	SKY_ST_U64,
	SKY_ST_NDTYPES
} sky_st_dtype;

/* "F32", ...; "?" for a value out of range. */
const char *sky_st_dtype_name(sky_st_dtype t);
/* Bytes per element (1, 2, 4 or 8); 0 for a value out of range. */
size_t sky_st_dtype_size(sky_st_dtype t);
/* Parses a dtype name. Returns 0 or SKY_ENOTFOUND. */
int sky_st_dtype_parse(const char *name, sky_st_dtype *out);

typedef struct sky_st_tensor {
	const char *name;
	sky_st_dtype dtype;
	int ndim;                        /* 0 is a scalar (one element) */
	int64_t shape[SKY_ST_MAX_DIMS];  /* torch order */
	uint64_t count;                  /* elements */
	size_t offset;                   /* bytes from the buffer start */
	size_t nbytes;
	const unsigned char *data;       /* into the mapping; any alignment */
} sky_st_tensor;

typedef struct sky_st_meta {
	const char *key, *value;
} sky_st_meta;

typedef struct sky_st_file {
	sky_file_map map;          /* set by sky_st_open */
	const unsigned char *buf;  /* the byte buffer (after the header) */
	size_t buf_size;
	size_t header_len;         /* N */
	int ntensors;
	sky_st_tensor *tensors;    /* sorted by name */
	int nmeta;
	sky_st_meta *meta;         /* sorted by key */
	void *mem;                 /* one heap block holding the tables and strings */
} sky_st_file;

/* Zeroes f. Cannot fail. */
void sky_st_init(sky_st_file *f);
/* Maps path and parses it. Returns 0; SKY_ENOTFOUND (no such file), SKY_EIO,
 * SKY_EFORMAT / SKY_ERANGE (d says what is wrong), SKY_ENOMEM (the tables do
 * not fit in memory). The tables come from one malloc (at load time, before
 * any arena is sealed); tensor data stays in the mapping. */
int sky_st_open(sky_st_file *f, const char *path, sky_diag *d);
/* Same, over len bytes already in memory, which must outlive f (used by the
 * fuzz harness and by tests). */
int sky_st_parse(sky_st_file *f, const void *bytes, size_t len, sky_diag *d);
/* Unmaps and frees. NULL-safe; may be called twice. */
void sky_st_close(sky_st_file *f);

/* The tensor called name, or NULL. */
const sky_st_tensor *sky_st_find(const sky_st_file *f, const char *name);
/* The metadata value for key, or NULL. */
const char *sky_st_meta_get(const sky_st_file *f, const char *key);

/* Looks up name and checks it is dtype with ndim dims of the given shape
 * (a dim < 0 accepts any size). Returns 0 and *out, or SKY_ENOTFOUND /
 * SKY_EFORMAT with d like
 *   "tensor attention.self.query.weight: expected F32 (32, 32), found F16 (32, 32)".
 * Also fails if the data is not aligned to the dtype's size. */
int sky_st_get(const sky_st_file *f, const char *name, sky_st_dtype dtype, int ndim,
	       const int64_t *shape, const sky_st_tensor **out, sky_diag *d);
/* sky_st_get without the alignment check, for data that will be copied. */
int sky_st_check(const sky_st_file *f, const char *name, sky_st_dtype dtype, int ndim,
		 const int64_t *shape, const sky_st_tensor **out, sky_diag *d);
/* sky_st_get for F32, returning a view of the floats. */
int sky_st_get_f32(const sky_st_file *f, const char *name, int ndim, const int *shape,
		   const float **out, sky_diag *d);
/* Checks like sky_st_get_f32 but copies the floats into dst (count
 * elements), whatever the data's alignment. */
int sky_st_copy_f32(const sky_st_file *f, const char *name, int ndim, const int *shape, float *dst,
		    sky_diag *d);

/* One tensor to write. */
typedef struct sky_st_entry {
	const char *name;
	sky_st_dtype dtype;
	int ndim;
	int64_t shape[SKY_ST_MAX_DIMS];
	const void *data; /* product(shape) elements, little-endian */
} sky_st_entry;

/* Bytes sky_st_encode needs for these entries and metadata (meta: nmeta
 * key/value pairs, may be NULL when nmeta is 0). Returns 0 or SKY_EINVAL
 * (bad entry, duplicate name: d says which) / SKY_ERANGE (sizes overflow). */
int sky_st_encoded_size(const sky_st_entry *t, int n, const sky_st_meta *meta, int nmeta,
			size_t *size, sky_diag *d);
/* Writes the file image into buf (cap bytes): header padded with spaces so
 * the buffer starts at an 8-byte offset, tensors ordered by element size
 * (largest first, then as given). *len gets the image size. Returns 0,
 * SKY_EINVAL, SKY_ERANGE (cap too small) or SKY_ENOMEM (JSON pool full). */
int sky_st_encode(const sky_st_entry *t, int n, const sky_st_meta *meta, int nmeta, void *buf,
		  size_t cap, size_t *len, sky_diag *d);
/* Encodes into a heap buffer and writes it to path atomically (mode 0644).
 * Returns 0, the sky_st_encode errors, SKY_ENOMEM or SKY_EIO. */
int sky_st_write(const char *path, const sky_st_entry *t, int n, const sky_st_meta *meta,
		 int nmeta, sky_diag *d);

/* Flat parameter blocks named by a sky_tensor_info table (see sky_tensor.h).
 * Names in the file are prefix + table name (prefix may be "" or NULL). */

/* Copies each of the n tensors from f into flat, checking F32 and the
 * table's shape. Returns 0 or the sky_st_copy_f32 errors. */
int sky_st_load_block(const sky_st_file *f, const char *prefix, const sky_tensor_info *table,
		      int n, float *flat, sky_diag *d);
/* Fills entries[0..n) (caller memory) to write flat as F32 tensors named
 * prefix + table name; names are built in names (n * name_cap bytes).
 * Returns 0 or SKY_ERANGE (a name does not fit in name_cap). */
int sky_st_block_entries(const char *prefix, const sky_tensor_info *table, int n, const float *flat,
			 sky_st_entry *entries, char *names, size_t name_cap, sky_diag *d);
/* Writes one block to path (with optional metadata). Returns 0 or the
 * sky_st_write errors. */
int sky_st_save_block(const char *path, const char *prefix, const sky_tensor_info *table, int n,
		      const float *flat, const sky_st_meta *meta, int nmeta, sky_diag *d);

#endif
