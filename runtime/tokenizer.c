/* BERT's basic tokenizer and WordPiece, as Hugging Face's tokenizers
 * library runs them (sky_tokenizer.h says what each step does).
 *
 * The text is read once, one code point at a time: each is cleaned,
 * normalised (NFD without nonspacing marks, lower case) and classified,
 * and goes into a word buffer on the stack; a finished word is matched
 * against the vocabulary at once. Nothing is allocated: the ids go
 * straight into the caller's arrays. */
#include "sky_tokenizer.h"

#include <string.h>
#include <utf8proc.h>

/* What HF's tables make of a character, beyond whitespace. */
enum { K_ORD, K_PUNCT, K_CTRL, K_MN };

#include "tokenizer_hf8.h" /* after the kinds, which it names */

/* ASCII: BERT's punctuation is every ASCII symbol (33-47, 58-64, 91-96,
 * 123-126) and controls are Cc without tab, newline and carriage return. */
static int ascii_kind(int c)
{
	if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
	    (c >= 123 && c <= 126))
		return K_PUNCT;
	if ((c < 32 && c != '\t' && c != '\n' && c != '\r') || c == 127)
		return K_CTRL;
	return K_ORD;
}

static int hf8_lookup(int32_t c)
{
	size_t lo = 0, hi = sizeof k_hf8 / sizeof k_hf8[0];
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (c < k_hf8[mid].lo)
			hi = mid;
		else if (c > k_hf8[mid].hi)
			lo = mid + 1;
		else
			return k_hf8[mid].kind;
	}
	return -1;
}

/* The kind of a non-ASCII code point: utf8proc's category, except where
 * HF's Unicode 8.0 tables differ (tokenizer_hf8.h). */
static int uni_kind(int32_t c)
{
	int k = hf8_lookup(c);
	if (k >= 0)
		return k;
	switch (utf8proc_category(c)) {
	case UTF8PROC_CATEGORY_PC:
	case UTF8PROC_CATEGORY_PD:
	case UTF8PROC_CATEGORY_PS:
	case UTF8PROC_CATEGORY_PE:
	case UTF8PROC_CATEGORY_PI:
	case UTF8PROC_CATEGORY_PF:
	case UTF8PROC_CATEGORY_PO:
		return K_PUNCT;
	case UTF8PROC_CATEGORY_CC:
	case UTF8PROC_CATEGORY_CF:
	case UTF8PROC_CATEGORY_CO:
	case UTF8PROC_CATEGORY_CS:
		return K_CTRL;
	case UTF8PROC_CATEGORY_MN:
		return K_MN;
	default:
		return K_ORD;
	}
}

static int kind_of(int32_t c) { return c < 128 ? ascii_kind(c) : uni_kind(c); }

/* Unicode's White_Space property, which Rust's char::is_whitespace is. */
static int is_ws(int32_t c)
{
	if (c < 128)
		return c == ' ' || (c >= 9 && c <= 13);
	if (c == 0x85)
		return 1;
	utf8proc_category_t k = utf8proc_category(c);
	return k == UTF8PROC_CATEGORY_ZS || k == UTF8PROC_CATEGORY_ZL || k == UTF8PROC_CATEGORY_ZP;
}

/* BERT's "Chinese character": the CJK Unified Ideographs blocks and their
 * extensions and compatibility blocks (HF bert.rs is_chinese_char). */
static int is_cjk(int32_t c)
{
	return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
	       (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
	       (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
	       (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Where the ids go: written while n < cap, counted always. */
typedef struct sink {
	int32_t *dst;
	long cap, n;
	long stop; /* stop reading at the first word that ends with n >= stop (0: never) */
} sink;

static void put(sink *s, int32_t id)
{
	if (s->n < s->cap)
		s->dst[s->n] = id;
	s->n++;
}

/* A word being collected: its first max_word_chars + 1 code points (one
 * more than fits means [UNK]) and its length. */
#define WORD_CAP (SKY_TOK_MAX_WORD_CHARS + 1)
typedef struct word {
	int32_t cp[WORD_CAP];
	int n; /* code points seen, may exceed the buffer */
} word;

typedef struct enc {
	const sky_tokenizer *t;    /* NULL under sky_tok_basic */
	const sky_tok_flags *f;
	void (*on_word)(void *ctx, const char *w, size_t len); /* sky_tok_basic's */
	void *ctx;
	sink *out;
	word w;
	unsigned char bytes[WORD_CAP * 4]; /* the word in UTF-8 */
	uint32_t prefix_hash;
	int stopped; /* out->stop reached: the rest is only checked for UTF-8 */
} enc;

#define FNV_OFFSET 2166136261u
#define FNV_PRIME 16777619u

static uint32_t fnv(uint32_t h, const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * FNV_PRIME;
	return h;
}

/* sky_tok_find with the continuation prefix in front of s when cont is set;
 * h is the hash of what is looked up. */
static int32_t find2(const sky_tokenizer *t, int cont, const unsigned char *s, size_t len,
		     uint32_t h)
{
	size_t pl = cont ? t->prefix_len : 0;
	for (uint32_t i = h & t->cap_mask;; i = (i + 1) & t->cap_mask) {
		uint32_t v = t->slots[i];
		if (!v)
			return -1;
		uint32_t id = v - 1;
		const char *tok = t->text + t->tok_off[id];
		if (t->slot_hash[i] == h && t->tok_off[id + 1] - t->tok_off[id] - 1 == pl + len &&
		    memcmp(tok, t->prefix, pl) == 0 && memcmp(tok + pl, s, len) == 0)
			return (int32_t)id;
	}
}

/* WordPiece over the finished word: greedy longest match from the left; a
 * piece that cannot be matched makes the whole word [UNK]. */
static void flush(enc *e)
{
	word *w = &e->w;
	const sky_tokenizer *t = e->t;
	if (w->n == 0 || e->stopped) {
		w->n = 0;
		return;
	}
	if (!t) {
		size_t len = 0;
		int n = w->n < WORD_CAP ? w->n : WORD_CAP;
		for (int i = 0; i < n; i++)
			len += (size_t)utf8proc_encode_char(w->cp[i], e->bytes + len);
		e->on_word(e->ctx, (const char *)e->bytes, w->n < WORD_CAP ? len : 0);
		w->n = 0;
		return;
	}
	if (w->n > t->max_word_chars) {
		put(e->out, t->id_unk);
		w->n = 0;
		e->stopped = e->out->stop && e->out->n >= e->out->stop;
		return;
	}
	size_t len = 0;
	for (int i = 0; i < w->n; i++)
		len += (size_t)utf8proc_encode_char(w->cp[i], e->bytes + len);
	w->n = 0;
	long mark = e->out->n;
	size_t start = 0;
	while (start < len) {
		int cont = start > 0;
		size_t room = t->max_token_bytes - (cont ? t->prefix_len : 0);
		if (t->max_token_bytes < (cont ? t->prefix_len : 0))
			room = 0;
		size_t end = len - start > room ? start + room : len;
		while (end > start && end < len && (e->bytes[end] & 0xC0) == 0x80)
			end--;
		int32_t id = -1;
		while (end > start) {
			uint32_t h = fnv(cont ? e->prefix_hash : FNV_OFFSET, e->bytes + start,
					 end - start);
			id = find2(t, cont, e->bytes + start, end - start, h);
			if (id >= 0)
				break;
			do
				end--;
			while (end > start && (e->bytes[end] & 0xC0) == 0x80);
		}
		if (id < 0) {
			e->out->n = mark;
			put(e->out, t->id_unk);
			break;
		}
		put(e->out, id);
		start = end;
	}
	e->stopped = e->out->stop && e->out->n >= e->out->stop;
}

/* Appends a normalised code point to the word. Under strip_accents the
 * text is in NFD, whose canonical order sorts each run of combining marks
 * by combining class (stable): the marks that survive the strip are
 * placed as that sort would place them. */
static void append(enc *e, int32_t c)
{
	word *w = &e->w;
	if (w->n < WORD_CAP) {
		int i = w->n;
		if (e->f->strip_accents && c >= 0x300) {
			int cc = utf8proc_get_property(c)->combining_class;
			while (cc && i > 0) {
				int pc = w->cp[i - 1] < 0x300
						 ? 0
						 : utf8proc_get_property(w->cp[i - 1])->combining_class;
				if (pc <= cc)
					break;
				w->cp[i] = w->cp[i - 1];
				i--;
			}
		}
		w->cp[i] = c;
	}
	w->n++;
}

/* A normalised code point through BERT's pre-tokenizer: whitespace ends a
 * word, punctuation is a word of its own. */
static void pretok(enc *e, int32_t c)
{
	if (is_ws(c)) {
		flush(e);
	} else if (kind_of(c) == K_PUNCT) {
		flush(e);
		append(e, c);
		flush(e);
	} else {
		append(e, c);
	}
}

/* Lower case as Rust's char::to_lowercase: the full mapping, which differs
 * from the simple one only for U+0130 (i and a combining dot above). */
static void lower_pretok(enc *e, int32_t c)
{
	if (!e->f->lowercase) {
		pretok(e, c);
	} else if (c < 128) {
		pretok(e, c >= 'A' && c <= 'Z' ? c + 32 : c);
	} else if (c == 0x130) {
		pretok(e, 'i');
		pretok(e, 0x307);
	} else {
		pretok(e, utf8proc_tolower(c));
	}
}

/* Accents off (NFD, then nonspacing marks dropped), then lower case. */
static void normalise(enc *e, int32_t c)
{
	if (!e->f->strip_accents || c < 0xC0) {
		lower_pretok(e, c);
		return;
	}
	utf8proc_int32_t dec[8];
	int bound = 0;
	utf8proc_ssize_t k = utf8proc_decompose_char(c, dec, 8, UTF8PROC_DECOMPOSE, &bound);
	if (k <= 0 || k > 8) {
		dec[0] = c;
		k = 1;
	}
	for (utf8proc_ssize_t i = 0; i < k; i++)
		if (kind_of(dec[i]) != K_MN)
			lower_pretok(e, dec[i]);
}

/* The longest special token written at s[0..n), or -1; its length in *len. */
static int32_t special_at(const sky_tokenizer *t, const char *s, size_t n, size_t *len)
{
	int32_t best = -1;
	size_t bl = 0;
	for (int i = 0; i < t->n_special; i++) {
		const char *tok = t->text + t->tok_off[t->special[i]];
		size_t l = t->tok_off[t->special[i] + 1] - t->tok_off[t->special[i]] - 1;
		if (l > bl && l <= n && memcmp(s, tok, l) == 0) {
			best = t->special[i];
			bl = l;
		}
	}
	*len = bl;
	return best;
}

/* Where s[0..n) stops being UTF-8 (n if it is all valid). */
static size_t utf8_bad(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		if ((unsigned char)s[i] < 0x80) {
			i++;
			continue;
		}
		utf8proc_int32_t c;
		utf8proc_ssize_t k =
			utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c);
		if (k < 0)
			return i;
		i += (size_t)k;
	}
	return n;
}

/* Tokenizes s[0..n) into out (word pieces only). */
static int run(enc *ep, const char *s, size_t n, const char *which, sky_diag *d)
{
	enc e = *ep; /* a copy on this stack: the word buffer stays in cache */
	const sky_tokenizer *t = e.t;
	sink *out = e.out;
	e.w.n = 0;
	e.stopped = 0;
	const int clean = e.f->clean_text, cjk = e.f->chinese_chars;
	unsigned char first[256 / 8] = {0};
	for (int i = 0; t && i < t->n_special; i++) {
		unsigned char b = (unsigned char)t->text[t->tok_off[t->special[i]]];
		first[b >> 3] |= (unsigned char)(1u << (b & 7));
	}
	for (size_t i = 0; i < n;) {
		unsigned char b = (unsigned char)s[i];
		if (e.stopped) {
			size_t bad = utf8_bad(s + i, n - i);
			if (bad < n - i)
				return sky_diag_set(d, SKY_EFORMAT,
						    "%s: invalid UTF-8 at byte %zu (0x%02x)", which,
						    i + bad, (unsigned char)s[i + bad]);
			break;
		}
		if (first[b >> 3] & (1u << (b & 7))) {
			size_t l;
			int32_t id = special_at(t, s + i, n - i, &l);
			if (id >= 0) {
				flush(&e);
				if (!e.stopped) {
					put(out, id);
					e.stopped = out->stop && out->n >= out->stop;
				}
				i += l;
				continue;
			}
		}
		int32_t c;
		if (b < 0x80) {
			c = b;
			i++;
		} else {
			utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i,
							      (utf8proc_ssize_t)(n - i), &c);
			if (k < 0)
				return sky_diag_set(d, SKY_EFORMAT,
						    "%s: invalid UTF-8 at byte %zu (0x%02x)", which,
						    i, b);
			i += (size_t)k;
		}
		if (clean) {
			if (c == 0 || c == 0xFFFD)
				continue;
			if (c != '\t' && c != '\n' && c != '\r' && kind_of(c) == K_CTRL)
				continue;
			if (is_ws(c)) {
				flush(&e);
				continue;
			}
		}
		if (cjk && c >= 0x3400 && is_cjk(c)) {
			flush(&e);
			normalise(&e, c);
			flush(&e);
			continue;
		}
		normalise(&e, c);
	}
	flush(&e);
	return 0;
}

/* An encoder for t writing into out. */
static void enc_setup(enc *e, const sky_tokenizer *t, sink *out)
{
	e->t = t;
	e->f = &t->flags;
	e->on_word = NULL;
	e->ctx = NULL;
	e->out = out;
	e->prefix_hash = fnv(FNV_OFFSET, (const unsigned char *)t->prefix, t->prefix_len);
}

long sky_tok_count(const sky_tokenizer *t, const char *s, size_t len, sky_diag *d)
{
	sink out = {NULL, 0, 0, 0};
	enc e;
	enc_setup(&e, t, &out);
	int rc = run(&e, s, len, "text", d);
	return rc ? rc : out.n;
}

int sky_tok_basic(const sky_tok_flags *f, const char *s, size_t len,
		  void (*on_word)(void *ctx, const char *w, size_t wlen), void *ctx, sky_diag *d)
{
	sky_tok_flags fl = *f;
	if (fl.strip_accents < 0)
		fl.strip_accents = fl.lowercase;
	enc e;
	memset(&e, 0, sizeof e);
	e.f = &fl;
	e.on_word = on_word;
	e.ctx = ctx;
	return run(&e, s, len, "text", d);
}

/* HF's longest-first truncation of two sequences to max tokens
 * (tokenizers src/utils/truncation.rs): the shorter keeps up to its length
 * if the longer can still have as many, else both get half, the longer
 * the odd one. The lengths are those run() counted, which stops reading at
 * the first word boundary past cap tokens, as tokenizers 0.23.2 does (so a
 * sequence of short words counts as cap, one long word as all its pieces:
 * tools/golden/tokenizer_golden.js's corpus holds both). */
static void longest_first(long na, long nb, long max, long *n1, long *n2)
{
	if (na + nb <= max) {
		*n1 = na;
		*n2 = nb;
		return;
	}
	int swap = na > nb;
	long s = swap ? nb : na, l;
	l = s > max ? s : (s > max - s ? s : max - s);
	if (s + l > max) {
		s = max / 2;
		l = s + max % 2;
	}
	long a = swap ? l : s, b = swap ? s : l;
	*n1 = a < na ? a : na;
	*n2 = b < nb ? b : nb;
}

int sky_tok_encode(const sky_tokenizer *t, const char *a, size_t alen, const char *b, size_t blen,
		   sky_tok_enc *e, sky_diag *d)
{
	int pair = b != NULL;
	long max = (long)e->cap - (pair ? 3 : 2);
	if (!t->block || max < 0)
		return sky_diag_set(d, SKY_EINVAL, "tokenize: %d tokens cannot hold the %d special ones",
				    e->cap, pair ? 3 : 2);
	/* a's pieces go straight to their place after [CLS]; b's wait in
	 * type_ids until a's length is known */
	sink sa = {e->ids + 1, max, 0, e->cap};
	sink sb = {e->type_ids, max, 0, e->cap};
	enc ea, eb;
	enc_setup(&ea, t, &sa);
	enc_setup(&eb, t, &sb);
	int rc = run(&ea, a, alen, "text", d);
	if (!rc && pair)
		rc = run(&eb, b, blen, "pair", d);
	if (rc)
		return rc;
	long n1, n2 = 0;
	if (pair)
		longest_first(sa.n, sb.n, max, &n1, &n2);
	else
		n1 = sa.n < max ? sa.n : max;
	e->n_a = (int)sa.n;
	e->n_b = (int)sb.n;
	long k = 0;
	e->ids[k++] = t->id_cls;
	k += n1;
	e->ids[k++] = t->id_sep;
	long type1 = k;
	if (pair) {
		memcpy(e->ids + k, e->type_ids, (size_t)n2 * sizeof *e->ids);
		k += n2;
		e->ids[k++] = t->id_sep;
	}
	for (long i = 0; i < k; i++) {
		e->type_ids[i] = i >= type1;
		e->mask[i] = 1;
	}
	e->len = (int)k;
	if (e->pad) {
		for (long i = k; i < e->cap; i++) {
			e->ids[i] = t->id_pad;
			e->type_ids[i] = 0;
			e->mask[i] = 0;
		}
	}
	return 0;
}
