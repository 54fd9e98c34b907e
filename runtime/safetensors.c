#include "sky_safetensors.h"

#include "sky_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tensor data is used in place, so the host must share the format's byte
 * order; every board Sky targets (x86-64, aarch64) is little-endian. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors views assume a little-endian host"
#endif

#define MAX_EXACT (1ull << 53) /* every integer up to here is exact in a double */
#define META_KEY "__metadata__"

static const struct {
	const char *name;
	size_t size;
} k_dtypes[SKY_ST_NDTYPES] = {
	[SKY_ST_BOOL] = {"BOOL", 1},	 [SKY_ST_U8] = {"U8", 1},
	[SKY_ST_I8] = {"I8", 1},	 [SKY_ST_F8_E5M2] = {"F8_E5M2", 1},
	[SKY_ST_F8_E4M3] = {"F8_E4M3", 1}, [SKY_ST_I16] = {"I16", 2},
	[SKY_ST_U16] = {"U16", 2},	 [SKY_ST_F16] = {"F16", 2},
	[SKY_ST_BF16] = {"BF16", 2},	 [SKY_ST_I32] = {"I32", 4},
	[SKY_ST_U32] = {"U32", 4},	 [SKY_ST_F32] = {"F32", 4},
	[SKY_ST_F64] = {"F64", 8},	 [SKY_ST_I64] = {"I64", 8},
	[SKY_ST_U64] = {"U64", 8},
};

const char *sky_st_dtype_name(sky_st_dtype t)
{
	return (unsigned)t < SKY_ST_NDTYPES ? k_dtypes[t].name : "?";
}

size_t sky_st_dtype_size(sky_st_dtype t)
{
	return (unsigned)t < SKY_ST_NDTYPES ? k_dtypes[t].size : 0;
}

int sky_st_dtype_parse(const char *name, sky_st_dtype *out)
{
	for (int i = 0; i < SKY_ST_NDTYPES; i++) {
		if (name && strcmp(name, k_dtypes[i].name) == 0) {
			*out = (sky_st_dtype)i;
			return 0;
		}
	}
	return SKY_ENOTFOUND;
}

void sky_st_init(sky_st_file *f) { memset(f, 0, sizeof *f); }

void sky_st_close(sky_st_file *f)
{
	if (!f)
		return;
	sky_file_map_close(&f->map);
	free(f->mem);
	sky_st_init(f);
}

/* ---- reading ------------------------------------------------------------ */

/* A JSON number that is a whole number in [0, 2^53]. */
static int get_u53(const cJSON *v, uint64_t *out)
{
	if (!cJSON_IsNumber(v))
		return 0;
	double x = v->valuedouble;
	if (!isfinite(x) || x < 0 || x > (double)MAX_EXACT || x != floor(x))
		return 0;
	*out = (uint64_t)x;
	return 1;
}

static int cmp_tensor_name(const void *a, const void *b)
{
	return strcmp(((const sky_st_tensor *)a)->name, ((const sky_st_tensor *)b)->name);
}

static int cmp_meta_key(const void *a, const void *b)
{
	return strcmp(((const sky_st_meta *)a)->key, ((const sky_st_meta *)b)->key);
}

/* qsort over pointers, by (offset, nbytes): zero-byte tensors sit before a
 * tensor that starts at the same offset, so the tiling walk accepts them. */
static int cmp_tensor_region(const void *a, const void *b)
{
	const sky_st_tensor *x = *(const sky_st_tensor *const *)a;
	const sky_st_tensor *y = *(const sky_st_tensor *const *)b;
	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	if (x->nbytes != y->nbytes)
		return x->nbytes < y->nbytes ? -1 : 1;
	return 0;
}

/* Checks one tensor entry and fills t (except name and data). */
static int parse_entry(const cJSON *e, sky_st_tensor *t, const char *name, sky_diag *d)
{
	if (!cJSON_IsObject(e))
		return sky_diag_set(d, SKY_EFORMAT, "tensor %.100s: entry is not a JSON object",
				    name);
	const cJSON *dt = NULL, *shape = NULL, *offs = NULL;
	for (const cJSON *c = e->child; c; c = c->next) {
		const cJSON **slot = strcmp(c->string, "dtype") == 0	    ? &dt
				     : strcmp(c->string, "shape") == 0	    ? &shape
				     : strcmp(c->string, "data_offsets") == 0 ? &offs
									      : NULL;
		if (!slot)
			return sky_diag_set(d, SKY_EFORMAT, "tensor %.100s: unexpected field '%.40s'",
					    name, c->string);
		if (*slot)
			return sky_diag_set(d, SKY_EFORMAT, "tensor %.100s: field '%s' repeated",
					    name, c->string);
		*slot = c;
	}
	if (!dt || !shape || !offs)
		return sky_diag_set(d, SKY_EFORMAT, "tensor %.100s: missing field '%s'", name,
				    !dt ? "dtype" : !shape ? "shape" : "data_offsets");
	if (!cJSON_IsString(dt) || sky_st_dtype_parse(dt->valuestring, &t->dtype) != 0)
		return sky_diag_set(d, SKY_EFORMAT, "tensor %.100s: unknown dtype %.20s%s%s", name,
				    cJSON_IsString(dt) ? "'" : "(not a string)",
				    cJSON_IsString(dt) ? dt->valuestring : "",
				    cJSON_IsString(dt) ? "'" : "");
	if (!cJSON_IsArray(shape))
		return sky_diag_set(d, SKY_EFORMAT, "tensor %.100s: shape is not an array", name);
	int nd = cJSON_GetArraySize(shape);
	if (nd > SKY_ST_MAX_DIMS)
		return sky_diag_set(d, SKY_EFORMAT, "tensor %.100s: %d dimensions, at most %d allowed",
				    name, nd, SKY_ST_MAX_DIMS);
	t->ndim = nd;
	uint64_t count = 1;
	int i = 0;
	for (const cJSON *c = shape->child; c; c = c->next, i++) {
		uint64_t dim;
		if (!get_u53(c, &dim))
			return sky_diag_set(d, SKY_EFORMAT,
					    "tensor %.100s: shape[%d] is not a whole number from 0 to 2^53",
					    name, i);
		t->shape[i] = (int64_t)dim;
		if (dim != 0 && count > MAX_EXACT / dim)
			return sky_diag_set(d, SKY_ERANGE, "tensor %.100s: shape has over 2^53 elements",
					    name);
		count *= dim;
	}
	t->count = count;
	uint64_t bytes = count * sky_st_dtype_size(t->dtype);
	if (bytes > MAX_EXACT)
		return sky_diag_set(d, SKY_ERANGE, "tensor %.100s: over 2^53 bytes", name);

	uint64_t begin, end;
	if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !get_u53(offs->child, &begin) ||
	    !get_u53(offs->child->next, &end))
		return sky_diag_set(d, SKY_EFORMAT,
				    "tensor %.100s: data_offsets must be [begin, end], whole numbers >= 0",
				    name);
	if (begin > end)
		return sky_diag_set(d, SKY_EFORMAT,
				    "tensor %.100s: data_offsets begin %llu is after end %llu", name,
				    (unsigned long long)begin, (unsigned long long)end);
	if (end - begin != bytes)
		return sky_diag_set(d, SKY_EFORMAT,
				    "tensor %.100s: %s with %llu elements needs %llu bytes, data_offsets "
				    "span %llu",
				    name, sky_st_dtype_name(t->dtype), (unsigned long long)count,
				    (unsigned long long)bytes, (unsigned long long)(end - begin));
	t->offset = (size_t)begin;
	t->nbytes = (size_t)bytes;
	return 0;
}

/* Copies s into the string area; returns the copy. */
static const char *stash(char **area, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = *area;
	memcpy(p, s, n);
	*area += n;
	return p;
}

static int parse_header(sky_st_file *f, const cJSON *root, sky_diag *d)
{
	int nt = 0, nm = 0;
	size_t strbytes = 0;
	const cJSON *metaobj = NULL;
	for (const cJSON *c = root->child; c; c = c->next) {
		if (!c->string || !c->string[0])
			return sky_diag_set(d, SKY_EFORMAT, "header: a tensor has an empty name");
		if (strcmp(c->string, META_KEY) == 0) {
			if (metaobj)
				return sky_diag_set(d, SKY_EFORMAT, "header: duplicate " META_KEY);
			if (!cJSON_IsObject(c))
				return sky_diag_set(d, SKY_EFORMAT, "header: " META_KEY
								   " is not an object");
			metaobj = c;
			for (const cJSON *m = c->child; m; m = m->next) {
				if (!cJSON_IsString(m) || !m->valuestring)
					return sky_diag_set(d, SKY_EFORMAT,
							    "header: " META_KEY
							    " value of '%.60s' is not a string",
							    m->string);
				strbytes += strlen(m->string) + strlen(m->valuestring) + 2;
				nm++;
			}
			continue;
		}
		strbytes += strlen(c->string) + 1;
		nt++;
	}

	size_t need = (size_t)nt * sizeof(sky_st_tensor) + (size_t)nm * sizeof(sky_st_meta) +
		      (size_t)nt * sizeof(sky_st_tensor *) + strbytes;
	f->mem = malloc(need ? need : 1);
	if (!f->mem)
		return sky_diag_set(d, SKY_ENOMEM, "header: no memory for %d tensor entries", nt);
	f->tensors = f->mem;
	f->meta = (sky_st_meta *)(f->tensors + nt);
	sky_st_tensor **order = (sky_st_tensor **)(f->meta + nm);
	char *area = (char *)(order + nt);

	int it = 0, im = 0, rc;
	for (const cJSON *c = root->child; c; c = c->next) {
		if (c == metaobj) {
			for (const cJSON *m = c->child; m; m = m->next, im++) {
				f->meta[im].key = stash(&area, m->string);
				f->meta[im].value = stash(&area, m->valuestring);
			}
			continue;
		}
		sky_st_tensor *t = &f->tensors[it];
		memset(t, 0, sizeof *t);
		if ((rc = parse_entry(c, t, c->string, d)) != 0)
			return rc;
		t->name = stash(&area, c->string);
		order[it++] = t;
	}
	f->ntensors = nt;
	f->nmeta = nm;

	qsort(f->meta, (size_t)nm, sizeof *f->meta, cmp_meta_key);
	for (int i = 1; i < nm; i++)
		if (strcmp(f->meta[i - 1].key, f->meta[i].key) == 0)
			return sky_diag_set(d, SKY_EFORMAT, "header: metadata key '%.100s' repeated",
					    f->meta[i].key);

	/* the regions must tile the buffer: no overlap, no hole, nothing after */
	qsort(order, (size_t)nt, sizeof *order, cmp_tensor_region);
	size_t at = 0;
	for (int i = 0; i < nt; i++) {
		const sky_st_tensor *t = order[i];
		if (t->offset != at)
			return sky_diag_set(d, SKY_EFORMAT,
					    "tensor %.100s: data starts at byte %zu of the buffer, expected "
					    "%zu (%s)",
					    t->name, t->offset, at,
					    t->offset < at ? "overlaps another tensor" : "leaves a hole");
		if (t->nbytes > f->buf_size - at)
			return sky_diag_set(d, SKY_EFORMAT,
					    "tensor %.100s: data ends at byte %zu, past the %zu-byte "
					    "buffer (truncated file?)",
					    t->name, t->offset + t->nbytes, f->buf_size);
		at += t->nbytes;
	}
	if (at != f->buf_size)
		return sky_diag_set(d, SKY_EFORMAT,
				    "header: tensors cover %zu bytes but the buffer has %zu", at,
				    f->buf_size);

	/* names sort last: the tiling pass above reports the more useful error */
	qsort(f->tensors, (size_t)nt, sizeof *f->tensors, cmp_tensor_name);
	for (int i = 0; i < nt; i++) {
		if (i > 0 && strcmp(f->tensors[i - 1].name, f->tensors[i].name) == 0)
			return sky_diag_set(d, SKY_EFORMAT, "tensor %.100s: name repeated",
					    f->tensors[i].name);
		f->tensors[i].data = f->buf + f->tensors[i].offset;
	}
	return 0;
}

static int parse_into(sky_st_file *f, const unsigned char *bytes, size_t len, sky_diag *d)
{
	if (len < 8)
		return sky_diag_set(d, SKY_EFORMAT,
				    "file is %zu bytes, too short for the 8-byte header length", len);
	uint64_t n = 0;
	for (int i = 7; i >= 0; i--)
		n = n << 8 | bytes[i];
	if (n > SKY_ST_MAX_HEADER)
		return sky_diag_set(d, SKY_ERANGE, "header length %llu exceeds Sky's limit of %u bytes",
				    (unsigned long long)n, SKY_ST_MAX_HEADER);
	if (n > len - 8)
		return sky_diag_set(d, SKY_EFORMAT,
				    "header length %llu runs past the end of the file (%zu bytes "
				    "follow it; truncated file?)",
				    (unsigned long long)n, len - 8);
	if (n < 2 || bytes[8] != '{')
		return sky_diag_set(d, SKY_EFORMAT, "header does not start with a JSON object");
	const unsigned char *h = bytes + 8;
	/* JSON allows no raw control bytes besides whitespace, in strings or out */
	for (size_t i = 0; i < n; i++)
		if (h[i] < 0x20 && h[i] != '\t' && h[i] != '\n' && h[i] != '\r')
			return sky_diag_set(d, SKY_EFORMAT, "header: control byte 0x%02x at byte %zu",
					    h[i], i);
	f->header_len = (size_t)n;
	f->buf = bytes + 8 + n;
	f->buf_size = len - 8 - (size_t)n;

	/* Parsed as "[" header "]" so that anything after the object other
	 * than whitespace (the format's padding) makes the document malformed
	 * or a second array item, instead of being silently ignored. */
	int rc;
	cJSON *doc = NULL;
	char *wrapped = malloc((size_t)n + 2);
	if (!wrapped)
		return sky_diag_set(d, SKY_ENOMEM, "no memory for a %llu-byte header",
				    (unsigned long long)n);
	wrapped[0] = '[';
	memcpy(wrapped + 1, h, (size_t)n);
	wrapped[n + 1] = ']';
	sky_diag jd;
	sky_diag_clear(&jd);
	doc = sky_json_parse(wrapped, (size_t)n + 2, &jd);
	free(wrapped);
	if (!doc) {
		rc = sky_diag_set(d, SKY_EFORMAT, "header: %s", jd.msg);
		goto exit;
	}
	if (cJSON_GetArraySize(doc) != 1 || !cJSON_IsObject(doc->child)) {
		rc = sky_diag_set(d, SKY_EFORMAT,
				  "header: something other than spaces follows the JSON object");
		goto exit;
	}
	rc = parse_header(f, doc->child, d);
exit:
	sky_json_free(doc);
	return rc;
}

int sky_st_parse(sky_st_file *f, const void *bytes, size_t len, sky_diag *d)
{
	sky_st_init(f);
	int rc = parse_into(f, bytes, len, d);
	if (rc)
		sky_st_close(f);
	return rc;
}

int sky_st_open(sky_st_file *f, const char *path, sky_diag *d)
{
	sky_st_init(f);
	int rc = sky_file_map_open(&f->map, path);
	if (rc) {
		sky_diag_set(d, rc, "cannot %s %.200s", rc == SKY_ENOTFOUND ? "find" : "read", path);
		return rc;
	}
	rc = parse_into(f, f->map.data, f->map.size, d);
	if (rc)
		sky_st_close(f);
	return rc;
}

const sky_st_tensor *sky_st_find(const sky_st_file *f, const char *name)
{
	if (!f || !name || f->ntensors == 0)
		return NULL;
	sky_st_tensor key = {.name = name};
	return bsearch(&key, f->tensors, (size_t)f->ntensors, sizeof key, cmp_tensor_name);
}

const char *sky_st_meta_get(const sky_st_file *f, const char *key)
{
	if (!f || !key || f->nmeta == 0)
		return NULL;
	sky_st_meta k = {.key = key};
	const sky_st_meta *m = bsearch(&k, f->meta, (size_t)f->nmeta, sizeof k, cmp_meta_key);
	return m ? m->value : NULL;
}

/* "(32, 32)", with "*" for a wildcard dim and "()" for a scalar. */
static void fmt_shape(char *buf, size_t cap, int ndim, const int64_t *shape)
{
	size_t at = 0;
	at += (size_t)snprintf(buf, cap, "(");
	for (int i = 0; i < ndim && at < cap; i++) {
		if (shape[i] < 0)
			at += (size_t)snprintf(buf + at, cap - at, "%s*", i ? ", " : "");
		else
			at += (size_t)snprintf(buf + at, cap - at, "%s%lld", i ? ", " : "",
					       (long long)shape[i]);
	}
	if (at < cap)
		snprintf(buf + at, cap - at, ")");
}

int sky_st_check(const sky_st_file *f, const char *name, sky_st_dtype dtype, int ndim,
		 const int64_t *shape, const sky_st_tensor **out, sky_diag *d)
{
	if (ndim < 0 || ndim > SKY_ST_MAX_DIMS || (unsigned)dtype >= SKY_ST_NDTYPES)
		return sky_diag_set(d, SKY_EINVAL, "tensor %.100s: bad expected dtype or rank", name);
	const sky_st_tensor *t = sky_st_find(f, name);
	char want[96];
	fmt_shape(want, sizeof want, ndim, shape);
	if (!t)
		return sky_diag_set(d, SKY_ENOTFOUND, "tensor %.100s: missing (expected %s %s)", name,
				    sky_st_dtype_name(dtype), want);
	int ok = t->dtype == dtype && t->ndim == ndim;
	for (int i = 0; ok && i < ndim; i++)
		ok = shape[i] < 0 || shape[i] == t->shape[i];
	if (!ok) {
		char got[96];
		fmt_shape(got, sizeof got, t->ndim, t->shape);
		return sky_diag_set(d, SKY_EFORMAT, "tensor %.100s: expected %s %s, found %s %s", name,
				    sky_st_dtype_name(dtype), want, sky_st_dtype_name(t->dtype),
				    got);
	}
	*out = t;
	return 0;
}

int sky_st_get(const sky_st_file *f, const char *name, sky_st_dtype dtype, int ndim,
	       const int64_t *shape, const sky_st_tensor **out, sky_diag *d)
{
	const sky_st_tensor *t;
	int rc = sky_st_check(f, name, dtype, ndim, shape, &t, d);
	if (rc)
		return rc;
	size_t align = sky_st_dtype_size(dtype);
	if ((uintptr_t)t->data % align != 0)
		return sky_diag_set(d, SKY_EFORMAT,
				    "tensor %.100s: data at file byte %zu is not %zu-byte aligned "
				    "(copy it instead of viewing it)",
				    name, 8 + f->header_len + t->offset, align);
	*out = t;
	return 0;
}

static int shape64(int ndim, const int *shape, int64_t *s64, const char *name, sky_diag *d)
{
	if (ndim < 0 || ndim > SKY_ST_MAX_DIMS)
		return sky_diag_set(d, SKY_EINVAL, "tensor %.100s: bad expected rank %d", name, ndim);
	for (int i = 0; i < ndim; i++)
		s64[i] = shape[i];
	return 0;
}

int sky_st_get_f32(const sky_st_file *f, const char *name, int ndim, const int *shape,
		   const float **out, sky_diag *d)
{
	int64_t s[SKY_ST_MAX_DIMS];
	const sky_st_tensor *t;
	int rc = shape64(ndim, shape, s, name, d);
	if (!rc)
		rc = sky_st_get(f, name, SKY_ST_F32, ndim, s, &t, d);
	if (!rc)
		*out = (const float *)(const void *)t->data;
	return rc;
}

int sky_st_copy_f32(const sky_st_file *f, const char *name, int ndim, const int *shape, float *dst,
		    sky_diag *d)
{
	int64_t s[SKY_ST_MAX_DIMS];
	const sky_st_tensor *t;
	int rc = shape64(ndim, shape, s, name, d);
	if (!rc)
		rc = sky_st_check(f, name, SKY_ST_F32, ndim, s, &t, d);
	if (!rc && t->nbytes)
		memcpy(dst, t->data, t->nbytes);
	return rc;
}

/* ---- writing ------------------------------------------------------------ */

#define MAX_WRITE_BYTES 999999999999999ull /* cJSON prints these as plain integers */

static int entry_bytes(const sky_st_entry *e, uint64_t *bytes, sky_diag *d)
{
	if (!e->name || !e->name[0] || strcmp(e->name, META_KEY) == 0)
		return sky_diag_set(d, SKY_EINVAL, "tensor '%.100s': not a valid name",
				    e->name ? e->name : "(null)");
	if ((unsigned)e->dtype >= SKY_ST_NDTYPES || e->ndim < 0 || e->ndim > SKY_ST_MAX_DIMS)
		return sky_diag_set(d, SKY_EINVAL, "tensor %.100s: bad dtype or rank", e->name);
	uint64_t n = 1;
	for (int i = 0; i < e->ndim; i++) {
		if (e->shape[i] < 0)
			return sky_diag_set(d, SKY_EINVAL, "tensor %.100s: negative shape[%d]",
					    e->name, i);
		uint64_t dim = (uint64_t)e->shape[i];
		if (dim != 0 && n > MAX_WRITE_BYTES / dim)
			return sky_diag_set(d, SKY_ERANGE, "tensor %.100s: too large", e->name);
		n *= dim;
	}
	if (n > MAX_WRITE_BYTES / 8)
		return sky_diag_set(d, SKY_ERANGE, "tensor %.100s: too large", e->name);
	*bytes = n * sky_st_dtype_size(e->dtype);
	if (*bytes && !e->data)
		return sky_diag_set(d, SKY_EINVAL, "tensor %.100s: no data", e->name);
	return 0;
}

/* Upper bound of the JSON header's printed length. */
static int header_bound(const sky_st_entry *t, int n, const sky_st_meta *meta, int nmeta,
			size_t *hdr, uint64_t *data, sky_diag *d)
{
	size_t h = 64;
	uint64_t total = 0;
	for (int i = 0; i < n; i++) {
		uint64_t b;
		int rc = entry_bytes(&t[i], &b, d);
		if (rc)
			return rc;
		for (int j = 0; j < i; j++)
			if (strcmp(t[i].name, t[j].name) == 0)
				return sky_diag_set(d, SKY_EINVAL, "tensor %.100s: name repeated",
						    t[i].name);
		if (total + b > MAX_WRITE_BYTES)
			return sky_diag_set(d, SKY_ERANGE, "tensors total too many bytes");
		total += b;
		/* a name may print 6 bytes per byte (\u00XX); numbers <= 16 digits */
		h += 6 * strlen(t[i].name) + 96 + (size_t)(t[i].ndim + 2) * 20;
	}
	for (int i = 0; i < nmeta; i++) {
		if (!meta[i].key || !meta[i].value || strcmp(meta[i].key, "") == 0)
			return sky_diag_set(d, SKY_EINVAL, "metadata %d: empty key or value", i);
		for (int j = 0; j < i; j++)
			if (strcmp(meta[i].key, meta[j].key) == 0)
				return sky_diag_set(d, SKY_EINVAL, "metadata key %.100s repeated",
						    meta[i].key);
		h += 6 * (strlen(meta[i].key) + strlen(meta[i].value)) + 8;
	}
	if (h > SKY_ST_MAX_HEADER)
		return sky_diag_set(d, SKY_ERANGE, "header would exceed %u bytes", SKY_ST_MAX_HEADER);
	*hdr = h;
	*data = total;
	return 0;
}

int sky_st_encoded_size(const sky_st_entry *t, int n, const sky_st_meta *meta, int nmeta,
			size_t *size, sky_diag *d)
{
	size_t h;
	uint64_t data;
	int rc = header_bound(t, n, meta, nmeta, &h, &data, d);
	if (rc)
		return rc;
	if (data > SIZE_MAX - h - 16)
		return sky_diag_set(d, SKY_ERANGE, "file too large for this machine");
	*size = 8 + h + 8 + (size_t)data; /* + up to 7 spaces of padding */
	return 0;
}

int sky_st_encode(const sky_st_entry *t, int n, const sky_st_meta *meta, int nmeta, void *buf,
		  size_t cap, size_t *len, sky_diag *d)
{
	size_t hbound;
	uint64_t total;
	int rc = header_bound(t, n, meta, nmeta, &hbound, &total, d);
	if (rc)
		return rc;
	unsigned char *out = buf;
	cJSON *doc = sky_json_new_object();
	if (!doc)
		return sky_diag_set(d, SKY_ENOMEM, "JSON pool full");
	rc = SKY_ENOMEM;
	if (nmeta > 0) {
		cJSON *m = cJSON_AddObjectToObject(doc, META_KEY);
		if (!m)
			goto nomem;
		for (int i = 0; i < nmeta; i++)
			if (!cJSON_AddStringToObject(m, meta[i].key, meta[i].value))
				goto nomem;
	}
	/* Data goes largest element size first (stable), so that with an
	 * 8-aligned buffer start every tensor is aligned for its type. */
	uint64_t at = 0;
	for (size_t sz = 8; sz >= 1; sz /= 2) {
		for (int i = 0; i < n; i++) {
			if (sky_st_dtype_size(t[i].dtype) != sz)
				continue;
			uint64_t b;
			entry_bytes(&t[i], &b, NULL);
			cJSON *e = cJSON_AddObjectToObject(doc, t[i].name);
			cJSON *s = e ? cJSON_AddArrayToObject(e, "shape") : NULL;
			cJSON *o = s ? cJSON_AddArrayToObject(e, "data_offsets") : NULL;
			if (!o || !cJSON_AddStringToObject(e, "dtype", sky_st_dtype_name(t[i].dtype)))
				goto nomem;
			for (int k = 0; k < t[i].ndim; k++) {
				cJSON *v = cJSON_CreateNumber((double)t[i].shape[k]);
				if (!v || !cJSON_AddItemToArray(s, v))
					goto nomem;
			}
			cJSON *b0 = cJSON_CreateNumber((double)at);
			if (!b0 || !cJSON_AddItemToArray(o, b0))
				goto nomem;
			cJSON *b1 = cJSON_CreateNumber((double)(at + b));
			if (!b1 || !cJSON_AddItemToArray(o, b1))
				goto nomem;
			at += b;
		}
	}
	if (cap < 8) {
		rc = sky_diag_set(d, SKY_ERANGE, "output buffer too small");
		goto exit;
	}
	int hl = sky_json_print(doc, (char *)out + 8, cap - 8);
	if (hl < 0) {
		rc = sky_diag_set(d, SKY_ERANGE, "output buffer too small for the header");
		goto exit;
	}
	size_t hlen = ((size_t)hl + 8 + 7) / 8 * 8 - 8; /* buffer starts 8-aligned */
	if (cap - 8 - (size_t)hl < hlen - (size_t)hl || cap - 8 - hlen < total) {
		rc = sky_diag_set(d, SKY_ERANGE, "output buffer of %zu bytes too small (need %llu)",
				  cap, (unsigned long long)(8 + hlen + total));
		goto exit;
	}
	memset(out + 8 + hl, ' ', hlen - (size_t)hl);
	for (int i = 0; i < 8; i++)
		out[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
	unsigned char *p = out + 8 + hlen;
	for (size_t sz = 8; sz >= 1; sz /= 2) {
		for (int i = 0; i < n; i++) {
			if (sky_st_dtype_size(t[i].dtype) != sz)
				continue;
			uint64_t b;
			entry_bytes(&t[i], &b, NULL);
			if (b)
				memcpy(p, t[i].data, (size_t)b);
			p += b;
		}
	}
	*len = (size_t)(p - out);
	rc = 0;
	goto exit;
nomem:
	rc = sky_diag_set(d, SKY_ENOMEM, "JSON pool full while building the header");
exit:
	sky_json_free(doc);
	return rc;
}

int sky_st_write(const char *path, const sky_st_entry *t, int n, const sky_st_meta *meta,
		 int nmeta, sky_diag *d)
{
	size_t cap, len = 0;
	int rc = sky_st_encoded_size(t, n, meta, nmeta, &cap, d);
	if (rc)
		return rc;
	void *buf = malloc(cap);
	if (!buf)
		return sky_diag_set(d, SKY_ENOMEM, "no memory for a %zu-byte file image", cap);
	rc = sky_st_encode(t, n, meta, nmeta, buf, cap, &len, d);
	if (rc)
		goto exit;
	rc = sky_file_write(path, buf, len, 0644);
	if (rc)
		sky_diag_set(d, rc, "cannot write %.200s", path);
exit:
	free(buf);
	return rc;
}

/* ---- flat parameter blocks ---------------------------------------------- */

static int full_name(char *buf, size_t cap, const char *prefix, const char *name, sky_diag *d)
{
	int n = snprintf(buf, cap, "%s%s", prefix ? prefix : "", name);
	if (n < 0 || (size_t)n >= cap)
		return sky_diag_set(d, SKY_ERANGE, "tensor name %.60s%.60s too long",
				    prefix ? prefix : "", name);
	return 0;
}

int sky_st_load_block(const sky_st_file *f, const char *prefix, const sky_tensor_info *table,
		      int n, float *flat, sky_diag *d)
{
	char name[512];
	for (int i = 0; i < n; i++) {
		int rc = full_name(name, sizeof name, prefix, table[i].name, d);
		if (!rc)
			rc = sky_st_copy_f32(f, name, table[i].ndim, table[i].shape,
					     flat + table[i].offset, d);
		if (rc)
			return rc;
	}
	return 0;
}

int sky_st_block_entries(const char *prefix, const sky_tensor_info *table, int n, const float *flat,
			 sky_st_entry *entries, char *names, size_t name_cap, sky_diag *d)
{
	for (int i = 0; i < n; i++) {
		char *nm = names + (size_t)i * name_cap;
		int rc = full_name(nm, name_cap, prefix, table[i].name, d);
		if (rc)
			return rc;
		sky_st_entry *e = &entries[i];
		memset(e, 0, sizeof *e);
		e->name = nm;
		e->dtype = SKY_ST_F32;
		e->ndim = table[i].ndim;
		for (int k = 0; k < table[i].ndim && k < 2; k++)
			e->shape[k] = table[i].shape[k];
		e->data = flat + table[i].offset;
	}
	return 0;
}

int sky_st_save_block(const char *path, const char *prefix, const sky_tensor_info *table, int n,
		      const float *flat, const sky_st_meta *meta, int nmeta, sky_diag *d)
{
	enum { NAME_CAP = 256 };
	int rc;
	sky_st_entry *e = malloc((size_t)(n > 0 ? n : 1) * (sizeof *e + NAME_CAP));
	if (!e)
		return sky_diag_set(d, SKY_ENOMEM, "no memory for %d entries", n);
	char *names = (char *)(e + n);
	rc = sky_st_block_entries(prefix, table, n, flat, e, names, NAME_CAP, d);
	if (!rc)
		rc = sky_st_write(path, e, n, meta, nmeta, d);
	free(e);
	return rc;
}
