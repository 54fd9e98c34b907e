/* JSON through cJSON, with its allocations in a bounded pool.
 *
 * Every JSON document Sky reads comes from outside (capability reports,
 * plans, fleet files, safetensors headers), so parsing must be bounded: the
 * caller first checks the byte length against the message's own limit, and
 * cJSON's allocations come from a fixed pool, never the heap. The pool is a
 * bump allocator (thread-safe) that resets when its last live block is
 * freed: parse, read, delete; documents may overlap, but memory comes back
 * only when none is alive.
 *
 * The getters below validate as they read: a missing key, a wrong type or a
 * number outside [min, max] (NaN and infinities included) fails with a
 * sky_diag naming the key. */
#ifndef SKY_JSON_H
#define SKY_JSON_H

#include "sky_err.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#define SKY_JSON_POOL_BYTES (32u << 20) /* the default pool, in .bss */

/* Parses len bytes of buf (no terminator needed). Returns the document (free
 * with sky_json_free) or NULL with d set: malformed, bigger than the pool,
 * or holding a NUL, raw or escaped (\u0000), which would make a string
 * read as a C string differ from what was sent ("bX\u0000y" -> "bX"). */
cJSON *sky_json_parse(const char *buf, size_t len, sky_diag *d);
/* Where buf[0..len) holds a NUL, raw or escaped (\u0000, not counting an
 * escaped backslash followed by "u0000"), or len if it holds none. For a
 * parser of its own (the plan envelope) to apply the same rule. */
size_t sky_json_nul_at(const char *buf, size_t len);
/* Starts an empty object to build a document; NULL if the pool is full. */
cJSON *sky_json_new_object(void);
/* Deletes a document from sky_json_parse/new_object and releases the pool.
 * NULL-safe. */
void sky_json_free(cJSON *doc);
/* Prints doc compactly into buf (no allocation). Returns the length
 * (excluding the NUL) or SKY_ERANGE if it does not fit. */
int sky_json_print(const cJSON *doc, char *buf, size_t cap);

/* Writes the string in as the body of a JSON string (without the quotes)
 * into out (cap bytes, always terminated, cut only at a whole escape): '"'
 * and '\\' escaped, control characters and DEL as \u00XX (so a string
 * from outside cannot end the value, the line, or reach a terminal as an
 * escape sequence once decoded and printed raw), '<' as \u003c (no "<N>"
 * priority prefix or markup survives), a byte that is not part of valid
 * UTF-8 as \ufffd. Returns the length written, or SKY_ERANGE when in was
 * cut to fit. */
int sky_json_escape(const char *in, char *out, size_t cap);

/* Bytes of the pool in use now, and its high-water mark. */
size_t sky_json_pool_used(void);
size_t sky_json_pool_peak(void);

/* Typed getters over an object member; each returns 0 or SKY_EFORMAT /
 * SKY_ERANGE / SKY_ENOTFOUND with d naming `what` (e.g. the board id) and
 * the key. */
int sky_json_num(const cJSON *obj, const char *key, double min, double max, double *out,
		 const char *what, sky_diag *d);
/* Integers: cJSON holds numbers as doubles, exact only below 2^53, so
 * sky_json_i64 refuses any |value| > SKY_JSON_INT_MAX (SKY_ERANGE, "beyond
 * 2^53 - 1") whatever min and max say, then checks it is whole (SKY_EFORMAT)
 * and within [min, max] (SKY_ERANGE). */
#define SKY_JSON_INT_MAX ((1ll << 53) - 1)
int sky_json_i64(const cJSON *obj, const char *key, int64_t min, int64_t max, int64_t *out,
		 const char *what, sky_diag *d);
/* sky_json_i64 into an int, for fields whose [min, max] fits an int. */
int sky_json_int(const cJSON *obj, const char *key, int min, int max, int *out, const char *what,
		 sky_diag *d);
/* Copies a string member into buf (cap bytes, NUL-terminated); too long is
 * SKY_ERANGE. */
int sky_json_str(const cJSON *obj, const char *key, char *buf, size_t cap, const char *what,
		 sky_diag *d);

#endif
