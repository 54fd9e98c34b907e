/* WordPiece vocabularies: vocab.txt, tokenizer.json and
 * tokenizer_config.json into one block holding the token strings and a
 * hash table of token -> id (sky_tokenizer.h). */
#include "sky_tokenizer.h"

#include "sky_file.h"
#include "sky_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define FNV_OFFSET 2166136261u
#define FNV_PRIME 16777619u
#define CONFIG_MAX_BYTES (1u << 20) /* tokenizer_config.json: flags and a few names */

static uint32_t fnv(uint32_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * FNV_PRIME;
	return h;
}

void sky_tok_flags_default(sky_tok_flags *f)
{
	f->clean_text = 1;
	f->chinese_chars = 1;
	f->strip_accents = -1;
	f->lowercase = 1;
}

void sky_tok_init(sky_tokenizer *t)
{
	memset(t, 0, sizeof *t);
	t->id_pad = t->id_unk = t->id_cls = t->id_sep = t->id_mask = -1;
}

void sky_tok_free(sky_tokenizer *t)
{
	if (!t)
		return;
	free(t->block);
	sky_tok_init(t);
}

/* Valid UTF-8 without NUL: 0, else the byte offset of the first bad byte
 * plus one. */
static size_t utf8_bad_at(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		if ((unsigned char)s[i] < 0x80) {
			if (s[i] == 0)
				return i + 1;
			i++;
			continue;
		}
		utf8proc_int32_t c;
		utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i,
						      (utf8proc_ssize_t)(n - i), &c);
		if (k < 0)
			return i + 1;
		i += (size_t)k;
	}
	return 0;
}

/* Allocates the block for n tokens holding text_bytes bytes of token text
 * (NULs not counted) and lays it out. */
static int alloc_block(sky_tokenizer *t, uint32_t n, size_t text_bytes, sky_diag *d)
{
	uint32_t cap = 16;
	while (cap < 2 * n)
		cap <<= 1;
	size_t bytes = (size_t)(n + 1) * 4 + (size_t)cap * 8 + text_bytes + n;
	t->block = calloc(1, bytes);
	if (!t->block)
		return sky_diag_set(d, SKY_ENOMEM, "vocabulary: %zu bytes for %u tokens", bytes, n);
	t->block_bytes = bytes;
	t->n = n;
	t->tok_off = (uint32_t *)t->block;
	t->slots = t->tok_off + n + 1;
	t->slot_hash = t->slots + cap;
	t->text = (const char *)(t->slot_hash + cap);
	t->cap_mask = cap - 1;
	return 0;
}

int32_t sky_tok_find(const sky_tokenizer *t, const char *s, size_t len)
{
	if (!t->block)
		return -1;
	uint32_t h = fnv(FNV_OFFSET, s, len);
	for (uint32_t i = h & t->cap_mask;; i = (i + 1) & t->cap_mask) {
		uint32_t v = t->slots[i];
		if (!v)
			return -1;
		uint32_t id = v - 1;
		if (t->slot_hash[i] == h && t->tok_off[id + 1] - t->tok_off[id] - 1 == len &&
		    memcmp(t->text + t->tok_off[id], s, len) == 0)
			return (int32_t)id;
	}
}

const char *sky_tok_token(const sky_tokenizer *t, int32_t id)
{
	if (!t->block || id < 0 || (uint32_t)id >= t->n)
		return NULL;
	return t->text + t->tok_off[id];
}

/* Hashes every token into the table; a token seen twice is refused with
 * both ids (as line numbers when lines is set). */
static int build_table(sky_tokenizer *t, int lines, const char *what, sky_diag *d)
{
	uint32_t maxb = 0;
	for (uint32_t id = 0; id < t->n; id++) {
		const char *s = t->text + t->tok_off[id];
		uint32_t len = t->tok_off[id + 1] - t->tok_off[id] - 1;
		if (len > maxb)
			maxb = len;
		uint32_t h = fnv(FNV_OFFSET, s, len);
		uint32_t i = h & t->cap_mask;
		for (; t->slots[i]; i = (i + 1) & t->cap_mask) {
			uint32_t o = t->slots[i] - 1;
			if (t->slot_hash[i] == h && t->tok_off[o + 1] - t->tok_off[o] - 1 == len &&
			    memcmp(t->text + t->tok_off[o], s, len) == 0) {
				if (lines)
					return sky_diag_set(d, SKY_EFORMAT,
							    "%s: token '%.64s' is on line %u and again "
							    "on line %u",
							    what, s, o + 1, id + 1);
				return sky_diag_set(d, SKY_EFORMAT,
						    "%s: token '%.64s' has ids %u and %u", what, s, o,
						    id);
			}
		}
		t->slots[i] = id + 1;
		t->slot_hash[i] = h;
	}
	t->max_token_bytes = maxb;
	return 0;
}

/* Finds the special tokens, checks the flags, and hashes what makes this
 * tokenizer (flags, prefix and every token) into t->hash. */
static int finish(sky_tokenizer *t, const sky_tok_flags *f, const char *unk, const char *what,
		  int specials_given, sky_diag *d)
{
	static const char *const k_need[] = {"[PAD]", "[CLS]", "[SEP]"};
	int32_t *need_ids[] = {&t->id_pad, &t->id_cls, &t->id_sep};
	t->id_unk = sky_tok_find(t, unk, strlen(unk));
	if (t->id_unk < 0)
		return sky_diag_set(d, SKY_ENOTFOUND, "%s: no unknown token '%s'", what, unk);
	for (int i = 0; i < 3; i++) {
		*need_ids[i] = sky_tok_find(t, k_need[i], strlen(k_need[i]));
		if (*need_ids[i] < 0)
			return sky_diag_set(d, SKY_ENOTFOUND, "%s: no %s token", what, k_need[i]);
	}
	t->id_mask = sky_tok_find(t, "[MASK]", 6);
	t->flags = *f;
	if (t->flags.strip_accents < 0)
		t->flags.strip_accents = t->flags.lowercase;
	if (!t->max_word_chars)
		t->max_word_chars = SKY_TOK_MAX_WORD_CHARS;
	/* BertTokenizerFast matches its five special tokens in raw text. */
	if (!specials_given) {
		int32_t ids[] = {t->id_pad, t->id_unk, t->id_cls, t->id_sep, t->id_mask};
		for (int i = 0; i < 5; i++) {
			int dup = 0;
			for (int j = 0; j < t->n_special; j++)
				dup |= t->special[j] == ids[i];
			if (ids[i] >= 0 && !dup)
				t->special[t->n_special++] = ids[i];
		}
	}
	int fl[6] = {t->flags.clean_text, t->flags.chinese_chars, t->flags.strip_accents,
		     t->flags.lowercase, t->max_word_chars, (int)t->n};
	uint32_t h = fnv(FNV_OFFSET, fl, sizeof fl);
	h = fnv(h, t->prefix, t->prefix_len + 1);
	h = fnv(h, t->text, t->tok_off[t->n]);
	t->hash = h;
	return 0;
}

int sky_tok_load_vocab(sky_tokenizer *t, const char *text, size_t len, const sky_tok_flags *f,
		       sky_diag *d)
{
	sky_tok_init(t);
	if (len > SKY_TOK_MAX_FILE_BYTES)
		return sky_diag_set(d, SKY_ERANGE, "vocab.txt: %zu bytes, more than the %u allowed",
				    len, SKY_TOK_MAX_FILE_BYTES);
	/* pass 1: count and check lines */
	uint32_t n = 0;
	size_t bytes = 0;
	for (size_t i = 0; i < len;) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - text) : len;
		size_t l = end - i;
		if (l && text[i + l - 1] == '\r')
			l--;
		if (n >= SKY_TOK_MAX_VOCAB)
			return sky_diag_set(d, SKY_ERANGE, "vocab.txt: more than %u tokens",
					    SKY_TOK_MAX_VOCAB);
		n++;
		if (l == 0)
			return sky_diag_set(d, SKY_EFORMAT, "vocab.txt: line %u is empty", n);
		if (l > SKY_TOK_MAX_TOKEN_BYTES)
			return sky_diag_set(d, SKY_EFORMAT,
					    "vocab.txt: line %u is %zu bytes, more than %u", n, l,
					    SKY_TOK_MAX_TOKEN_BYTES);
		size_t bad = utf8_bad_at(text + i, l);
		if (bad)
			return sky_diag_set(d, SKY_EFORMAT,
					    "vocab.txt: line %u is not valid UTF-8 (byte %zu of the "
					    "line)",
					    n, bad);
		bytes += l;
		i = end + 1;
	}
	if (n == 0)
		return sky_diag_set(d, SKY_EFORMAT, "vocab.txt: no tokens");
	int rc = alloc_block(t, n, bytes, d);
	if (rc)
		goto exit;
	/* pass 2: copy */
	char *dst = (char *)t->text;
	uint32_t id = 0, off = 0;
	for (size_t i = 0; i < len && id < n;) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - text) : len;
		size_t l = end - i;
		if (l && text[i + l - 1] == '\r')
			l--;
		t->tok_off[id++] = off;
		memcpy(dst + off, text + i, l);
		off += (uint32_t)l + 1;
		i = end + 1;
	}
	t->tok_off[n] = off;
	rc = build_table(t, 1, "vocab.txt", d);
	if (rc)
		goto exit;
	memcpy(t->prefix, "##", 3);
	t->prefix_len = 2;
	rc = finish(t, f, "[UNK]", "vocab.txt", 0, d);
exit:
	if (rc)
		sky_tok_free(t);
	return rc;
}

/* A boolean member, or dflt when absent or null; another type is refused. */
static int get_bool(const cJSON *o, const char *key, int dflt, int *out, const char *what,
		    sky_diag *d)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	if (!v || cJSON_IsNull(v))
		*out = dflt;
	else if (cJSON_IsBool(v))
		*out = cJSON_IsTrue(v);
	else
		return sky_diag_set(d, SKY_EFORMAT, "%s: %s is not true, false or null", what, key);
	return 0;
}

/* The "type" of object member key, or NULL (null or absent); SKY_EFORMAT
 * when the member is something else. */
static int get_type(const cJSON *root, const char *key, const cJSON **obj, const char **type,
		    sky_diag *d)
{
	*obj = cJSON_GetObjectItemCaseSensitive(root, key);
	*type = NULL;
	if (!*obj || cJSON_IsNull(*obj))
		return 0;
	const cJSON *ty = cJSON_GetObjectItemCaseSensitive(*obj, "type");
	if (!cJSON_IsObject(*obj) || !cJSON_IsString(ty))
		return sky_diag_set(d, SKY_EFORMAT, "tokenizer.json: %s has no type", key);
	*type = ty->valuestring;
	return 0;
}

static int json_vocab(sky_tokenizer *t, const cJSON *vocab, sky_diag *d)
{
	const char *what = "tokenizer.json";
	if (!cJSON_IsObject(vocab))
		return sky_diag_set(d, SKY_EFORMAT, "%s: model.vocab is not an object", what);
	int count = cJSON_GetArraySize(vocab);
	if (count <= 0)
		return sky_diag_set(d, SKY_EFORMAT, "%s: model.vocab is empty", what);
	if ((unsigned)count > SKY_TOK_MAX_VOCAB)
		return sky_diag_set(d, SKY_ERANGE, "%s: %d tokens, more than %u", what, count,
				    SKY_TOK_MAX_VOCAB);
	uint32_t n = (uint32_t)count;
	size_t bytes = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, vocab)
	{
		size_t l = strlen(e->string);
		double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
		if (v < 0 || v >= n || v != (double)(uint32_t)v)
			return sky_diag_set(d, SKY_EFORMAT,
					    "%s: token '%.64s' has id outside 0..%u (ids must be "
					    "0..n-1)",
					    what, e->string, n - 1);
		if (l == 0 || l > SKY_TOK_MAX_TOKEN_BYTES)
			return sky_diag_set(d, SKY_EFORMAT, "%s: token with id %u is %zu bytes",
					    what, (uint32_t)v, l);
		if (utf8_bad_at(e->string, l))
			return sky_diag_set(d, SKY_EFORMAT, "%s: token with id %u is not UTF-8",
					    what, (uint32_t)v);
		bytes += l;
	}
	int rc = alloc_block(t, n, bytes, d);
	if (rc)
		return rc;
	/* lengths by id (each id once), then offsets, then the bytes */
	cJSON_ArrayForEach(e, vocab)
	{
		uint32_t id = (uint32_t)e->valuedouble;
		if (t->tok_off[id])
			return sky_diag_set(d, SKY_EFORMAT, "%s: id %u is given twice", what, id);
		t->tok_off[id] = (uint32_t)strlen(e->string) + 1;
	}
	uint32_t off = 0;
	for (uint32_t id = 0; id < n; id++) {
		uint32_t l = t->tok_off[id];
		t->tok_off[id] = off;
		off += l;
	}
	t->tok_off[n] = off;
	cJSON_ArrayForEach(e, vocab)
	{
		uint32_t id = (uint32_t)e->valuedouble;
		memcpy((char *)t->text + t->tok_off[id], e->string, strlen(e->string));
	}
	return build_table(t, 0, what, d);
}

int sky_tok_load_json(sky_tokenizer *t, const char *json, size_t len, sky_diag *d)
{
	const char *what = "tokenizer.json";
	sky_tok_init(t);
	if (len > SKY_TOK_MAX_FILE_BYTES)
		return sky_diag_set(d, SKY_ERANGE, "%s: %zu bytes, more than the %u allowed", what,
				    len, SKY_TOK_MAX_FILE_BYTES);
	int rc = 0;
	cJSON *doc = sky_json_parse(json, len, d);
	if (!doc)
		return SKY_EFORMAT;
	const cJSON *model, *norm, *pre;
	const char *mtype, *ntype, *ptype;
	if ((rc = get_type(doc, "model", &model, &mtype, d)) ||
	    (rc = get_type(doc, "normalizer", &norm, &ntype, d)) ||
	    (rc = get_type(doc, "pre_tokenizer", &pre, &ptype, d)))
		goto exit;
	if (!mtype || strcmp(mtype, "WordPiece") != 0) {
		rc = sky_diag_set(d, SKY_EUNSUPPORTED,
				  "%s: model type '%s' is not supported (only WordPiece)", what,
				  mtype ? mtype : "none");
		goto exit;
	}
	sky_tok_flags f = {0, 0, 0, 0};
	if (ntype && strcmp(ntype, "BertNormalizer") != 0) {
		rc = sky_diag_set(d, SKY_EUNSUPPORTED,
				  "%s: normalizer '%s' is not supported (only BertNormalizer)",
				  what, ntype);
		goto exit;
	}
	if (ntype && ((rc = get_bool(norm, "clean_text", 1, &f.clean_text, what, d)) ||
		      (rc = get_bool(norm, "handle_chinese_chars", 1, &f.chinese_chars, what, d)) ||
		      (rc = get_bool(norm, "lowercase", 1, &f.lowercase, what, d)) ||
		      (rc = get_bool(norm, "strip_accents", -1, &f.strip_accents, what, d))))
		goto exit;
	if (!ptype || strcmp(ptype, "BertPreTokenizer") != 0) {
		rc = sky_diag_set(d, SKY_EUNSUPPORTED,
				  "%s: pre_tokenizer '%s' is not supported (only BertPreTokenizer)",
				  what, ptype ? ptype : "none");
		goto exit;
	}
	char unk[64] = "[UNK]";
	const cJSON *u = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
	if (u && (!cJSON_IsString(u) || strlen(u->valuestring) >= sizeof unk)) {
		rc = sky_diag_set(d, SKY_EFORMAT, "%s: model.unk_token is not a short string", what);
		goto exit;
	}
	if (u)
		snprintf(unk, sizeof unk, "%s", u->valuestring);
	const cJSON *pfx = cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix");
	const cJSON *mx = cJSON_GetObjectItemCaseSensitive(model, "max_input_chars_per_word");
	if (pfx && (!cJSON_IsString(pfx) || strlen(pfx->valuestring) > SKY_TOK_MAX_PREFIX)) {
		rc = sky_diag_set(d, SKY_EFORMAT,
				  "%s: model.continuing_subword_prefix is not a string of at most "
				  "%d bytes",
				  what, SKY_TOK_MAX_PREFIX);
		goto exit;
	}
	int max_chars = SKY_TOK_MAX_WORD_CHARS;
	if (mx && (rc = sky_json_int(model, "max_input_chars_per_word", 1, 100000, &max_chars,
				     "tokenizer.json model", d)))
		goto exit;
	rc = json_vocab(t, cJSON_GetObjectItemCaseSensitive(model, "vocab"), d);
	if (rc)
		goto exit;
	t->max_word_chars = max_chars;
	snprintf(t->prefix, sizeof t->prefix, "%s", pfx ? pfx->valuestring : "##");
	t->prefix_len = (uint32_t)strlen(t->prefix);
	/* special added tokens are matched in raw text */
	const cJSON *added = cJSON_GetObjectItemCaseSensitive(doc, "added_tokens");
	const cJSON *a;
	cJSON_ArrayForEach(a, added)
	{
		const cJSON *c = cJSON_GetObjectItemCaseSensitive(a, "content");
		const cJSON *sp = cJSON_GetObjectItemCaseSensitive(a, "special");
		if (!cJSON_IsString(c) || !cJSON_IsTrue(sp))
			continue;
		int32_t id = sky_tok_find(t, c->valuestring, strlen(c->valuestring));
		if (id < 0) {
			rc = sky_diag_set(d, SKY_EUNSUPPORTED,
					  "%s: added token '%.64s' is not in the vocabulary", what,
					  c->valuestring);
			goto exit;
		}
		if (t->n_special >= SKY_TOK_MAX_SPECIAL) {
			rc = sky_diag_set(d, SKY_ERANGE, "%s: more than %d special added tokens",
					  what, SKY_TOK_MAX_SPECIAL);
			goto exit;
		}
		t->special[t->n_special++] = id;
	}
	rc = finish(t, &f, unk, what, cJSON_IsArray(added), d);
exit:
	sky_json_free(doc);
	if (rc)
		sky_tok_free(t);
	return rc;
}

/* Reads tokenizer_config.json's flags into f; absent file: defaults. */
static int read_config(const char *path, sky_tok_flags *f, sky_diag *d)
{
	sky_tok_flags_default(f);
	if (!sky_file_exists(path))
		return 0;
	sky_file_map m = {0};
	int rc = sky_file_map_open(&m, path);
	if (rc)
		return sky_diag_set(d, rc, "%s: cannot read it", path);
	cJSON *doc = NULL;
	if (m.size > CONFIG_MAX_BYTES) {
		rc = sky_diag_set(d, SKY_ERANGE, "%s: %zu bytes, more than %u", path, m.size,
				  CONFIG_MAX_BYTES);
		goto exit;
	}
	doc = sky_json_parse((const char *)m.data, m.size, d);
	if (!doc || !cJSON_IsObject(doc)) {
		rc = sky_diag_set(d, SKY_EFORMAT, "%s: not a JSON object", path);
		goto exit;
	}
	if ((rc = get_bool(doc, "do_lower_case", 1, &f->lowercase, path, d)) ||
	    (rc = get_bool(doc, "strip_accents", -1, &f->strip_accents, path, d)) ||
	    (rc = get_bool(doc, "tokenize_chinese_chars", 1, &f->chinese_chars, path, d)))
		goto exit;
exit:
	sky_json_free(doc);
	sky_file_map_close(&m);
	return rc;
}

int sky_tok_load_dir(sky_tokenizer *t, const char *dir, sky_diag *d)
{
	char path[4096];
	sky_file_map m = {0};
	int rc;
	sky_tok_init(t);
	snprintf(path, sizeof path, "%s/tokenizer.json", dir);
	if (sky_file_exists(path)) {
		rc = sky_file_map_open(&m, path);
		if (rc)
			return sky_diag_set(d, rc, "%s: cannot read it", path);
		rc = sky_tok_load_json(t, (const char *)m.data, m.size, d);
		goto exit;
	}
	sky_tok_flags f;
	snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
	rc = read_config(path, &f, d);
	if (rc)
		goto exit;
	snprintf(path, sizeof path, "%s/vocab.txt", dir);
	if (!sky_file_exists(path)) {
		rc = sky_diag_set(d, SKY_ENOTFOUND, "%s: neither tokenizer.json nor vocab.txt",
				  dir);
		goto exit;
	}
	rc = sky_file_map_open(&m, path);
	if (rc) {
		rc = sky_diag_set(d, rc, "%s: cannot read it", path);
		goto exit;
	}
	rc = sky_tok_load_vocab(t, (const char *)m.data, m.size, &f, d);
exit:
	sky_file_map_close(&m);
	return rc;
}
