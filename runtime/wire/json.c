#include "sky_json.h"

#include "sky_thread.h"

#include <math.h>
#include <string.h>

/* Each block carries its size in a header so the pool can count live
 * blocks; 16-byte alignment suits every cJSON field. */
typedef struct {
	size_t size;
	size_t pad;
} block_hdr;

static _Alignas(64) unsigned char g_pool[SKY_JSON_POOL_BYTES];
static size_t g_top, g_peak, g_live; /* under g_lock */
static int g_once;
static sky_mutex g_lock;

static void *pool_malloc(size_t n)
{
	size_t need = sizeof(block_hdr) + ((n + 15) & ~(size_t)15);
	void *p = NULL;
	sky_mutex_lock(&g_lock);
	if (need >= n && need <= sizeof g_pool - g_top) {
		block_hdr *h = (block_hdr *)(g_pool + g_top);
		h->size = need;
		g_top += need;
		g_live++;
		if (g_top > g_peak)
			g_peak = g_top;
		p = h + 1;
	}
	sky_mutex_unlock(&g_lock);
	return p;
}

static void pool_free(void *p)
{
	if (!p)
		return;
	sky_mutex_lock(&g_lock);
	/* a bump pool reclaims only when every live document is gone */
	if (g_live > 0 && --g_live == 0)
		g_top = 0;
	sky_mutex_unlock(&g_lock);
}

static void setup(void)
{
	sky_mutex_init(&g_lock);
	cJSON_Hooks hooks = {pool_malloc, pool_free};
	cJSON_InitHooks(&hooks);
}

static void ensure_hooks(void) { sky_once(&g_once, setup); }

/* cJSON would keep a string with a NUL whole, but every reader sees it as
 * a C string, cut at the NUL: {"id":"bX\u0000y"} would read as id "bX". */
size_t sky_json_nul_at(const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] == '\0')
			return i;
		if (buf[i] != '\\' || i + 1 >= len)
			continue;
		if (buf[i + 1] == 'u' && i + 5 < len && buf[i + 2] == '0' && buf[i + 3] == '0' &&
		    buf[i + 4] == '0' && buf[i + 5] == '0')
			return i;
		i++; /* the escaped character: "\\u0000" is a backslash, then text */
	}
	return len;
}

cJSON *sky_json_parse(const char *buf, size_t len, sky_diag *d)
{
	ensure_hooks();
	size_t nul = buf ? sky_json_nul_at(buf, len) : 0;
	if (!buf || nul < len) {
		sky_diag_set(d, SKY_EFORMAT,
			     "JSON holds a NUL character at byte %zu (raw or \\u0000): refused, it "
			     "would cut a string short",
			     nul);
		return NULL;
	}
	const char *end = NULL;
	cJSON *doc = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
	if (!doc) {
		/* cJSON frees what it built before failing, so the pool is as it was */
		size_t at = end && end >= buf ? (size_t)(end - buf) : 0;
		if (sky_json_pool_peak() + 4096 >= sizeof g_pool)
			sky_diag_set(d, SKY_ERANGE, "JSON document too large for the %u-byte pool",
				     SKY_JSON_POOL_BYTES);
		else
			sky_diag_set(d, SKY_EFORMAT, "malformed JSON near byte %zu of %zu", at, len);
		return NULL;
	}
	return doc;
}

cJSON *sky_json_new_object(void)
{
	ensure_hooks();
	return cJSON_CreateObject();
}

void sky_json_free(cJSON *doc)
{
	if (doc)
		cJSON_Delete(doc);
}

int sky_json_print(const cJSON *doc, char *buf, size_t cap)
{
	if (cap > (size_t)INT32_MAX)
		cap = INT32_MAX;
	if (!cJSON_PrintPreallocated((cJSON *)doc, buf, (int)cap, 0))
		return SKY_ERANGE;
	size_t n = strlen(buf);
	return n + 5 <= cap ? (int)n : SKY_ERANGE; /* cJSON wants 5 spare bytes */
}

size_t sky_json_pool_used(void)
{
	ensure_hooks();
	sky_mutex_lock(&g_lock);
	size_t n = g_top;
	sky_mutex_unlock(&g_lock);
	return n;
}
size_t sky_json_pool_peak(void)
{
	ensure_hooks();
	sky_mutex_lock(&g_lock);
	size_t n = g_peak;
	sky_mutex_unlock(&g_lock);
	return n;
}

static const cJSON *member(const cJSON *obj, const char *key, const char *what, sky_diag *d)
{
	const cJSON *v = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
	if (!v)
		sky_diag_set(d, SKY_ENOTFOUND, "%s: missing field '%s'", what, key);
	return v;
}

int sky_json_num(const cJSON *obj, const char *key, double min, double max, double *out,
		 const char *what, sky_diag *d)
{
	const cJSON *v = member(obj, key, what, d);
	if (!v)
		return SKY_ENOTFOUND;
	if (!cJSON_IsNumber(v))
		return sky_diag_set(d, SKY_EFORMAT, "%s: field '%s' must be a number", what, key);
	double x = v->valuedouble;
	if (!isfinite(x) || x < min || x > max)
		return sky_diag_set(d, SKY_ERANGE, "%s: field '%s' is %g, allowed %g to %g", what,
				    key, x, min, max);
	*out = x;
	return 0;
}

int sky_json_i64(const cJSON *obj, const char *key, int64_t min, int64_t max, int64_t *out,
		 const char *what, sky_diag *d)
{
	const cJSON *v = member(obj, key, what, d);
	if (!v)
		return SKY_ENOTFOUND;
	if (!cJSON_IsNumber(v))
		return sky_diag_set(d, SKY_EFORMAT, "%s: field '%s' must be a number", what, key);
	/* cJSON keeps only the double. Below 2^53 every integer is a double of
	 * its own, so a whole double there is exactly the integer that was
	 * written; at 2^53 and beyond neighbours share a double (2^53 + 1 reads
	 * as 2^53), so the value is refused before any conversion. */
	double x = v->valuedouble;
	if (!isfinite(x) || fabs(x) > (double)SKY_JSON_INT_MAX)
		return sky_diag_set(d, SKY_ERANGE,
				    "%s: field '%s' is beyond 2^53 - 1 (it reads as %.17g; JSON "
				    "numbers are doubles, exact integers only below 2^53)",
				    what, key, x);
	if (x != floor(x))
		return sky_diag_set(d, SKY_EFORMAT, "%s: field '%s' must be a whole number, got %g",
				    what, key, x);
	int64_t n = (int64_t)x;
	if (n < min || n > max)
		return sky_diag_set(d, SKY_ERANGE, "%s: field '%s' is %lld, allowed %lld to %lld",
				    what, key, (long long)n, (long long)min, (long long)max);
	*out = n;
	return 0;
}

int sky_json_int(const cJSON *obj, const char *key, int min, int max, int *out, const char *what,
		 sky_diag *d)
{
	int64_t v = 0; /* set on success; 0 keeps -Wmaybe-uninitialized quiet when inlined */
	int rc = sky_json_i64(obj, key, min, max, &v, what, d);
	if (!rc)
		*out = (int)v;
	return rc;
}

int sky_json_str(const cJSON *obj, const char *key, char *buf, size_t cap, const char *what,
		 sky_diag *d)
{
	const cJSON *v = member(obj, key, what, d);
	if (!v)
		return SKY_ENOTFOUND;
	if (!cJSON_IsString(v) || !v->valuestring)
		return sky_diag_set(d, SKY_EFORMAT, "%s: field '%s' must be a string", what, key);
	size_t n = strlen(v->valuestring);
	if (n >= cap)
		return sky_diag_set(d, SKY_ERANGE, "%s: field '%s' is longer than %zu bytes", what,
				    key, cap - 1);
	memcpy(buf, v->valuestring, n + 1);
	return 0;
}

/* The length of the valid UTF-8 sequence at p (1-4), or 0 (RFC 3629 §4:
 * no overlong forms, no surrogates, nothing above U+10FFFF). */
static int utf8_len(const unsigned char *p)
{
	unsigned char c = p[0];
	int n = c < 0xc2 ? 0 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : c < 0xf5 ? 4 : 0;
	for (int i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] > 0x9f) || (c == 0xf0 && p[1] < 0x90) ||
	    (c == 0xf4 && p[1] > 0x8f))
		return 0;
	return n;
}

int sky_json_escape(const char *in, char *out, size_t cap)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	if (cap == 0)
		return SKY_ERANGE;
	for (const unsigned char *p = (const unsigned char *)in; *p;) {
		char esc[8];
		size_t k = 0;
		int adv = 1;
		unsigned char c = *p;
		if (c == '"' || c == '\\') {
			esc[k++] = '\\', esc[k++] = (char)c;
		} else if (c == '\n' || c == '\r' || c == '\t') {
			esc[k++] = '\\', esc[k++] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
		} else if (c < 0x20 || c == 0x7f || c == '<') {
			memcpy(esc, "\\u00", 4), k = 4;
			esc[k++] = hex[c >> 4], esc[k++] = hex[c & 15];
		} else if (c < 0x80) {
			esc[k++] = (char)c;
		} else if ((adv = utf8_len(p)) > 0) {
			memcpy(esc, p, (size_t)adv), k = (size_t)adv;
		} else {
			adv = 1;
			memcpy(esc, "\\ufffd", 6), k = 6;
		}
		if (o + k >= cap) {
			out[o] = '\0';
			return SKY_ERANGE;
		}
		memcpy(out + o, esc, k);
		o += k;
		p += adv;
	}
	out[o] = '\0';
	return (int)o;
}
