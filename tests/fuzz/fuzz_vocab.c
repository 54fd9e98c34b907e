/* libFuzzer harness: vocab.txt (sky_tok_load_vocab) and BERT's basic
 * tokenizer as sky vocab build runs it (sky_tok_basic), over arbitrary
 * bytes. Whatever the bytes, a load returns 0 or an error that says why
 * and holds nothing; a vocabulary it accepts holds one token per line, in
 * order (id = line - 1), each found under its own id, none twice, each
 * valid UTF-8 of at most SKY_TOK_MAX_TOKEN_BYTES, with [PAD], [UNK],
 * [CLS] and [SEP] among them. The basic tokenizer gives words that are
 * non-empty UTF-8 without spaces, or fails saying why.
 *
 * Input: byte 0 holds the flags (bit 0 lowercase, 1 strip accents, 2
 * chinese characters, 3 clean text, 4 the bytes follow the four required
 * specials, else they are the whole file); the rest is vocab.txt. */
#include "sky_json.h"
#include "sky_tokenizer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define SPECIALS "[PAD]\n[UNK]\n[CLS]\n[SEP]\n"

static int utf8_ok(const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		utf8proc_int32_t c;
		utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i,
						      (utf8proc_ssize_t)(n - i), &c);
		if (k <= 0)
			return 0;
		i += (size_t)k;
	}
	return 1;
}

static void on_word(void *ctx, const char *w, size_t n)
{
	(void)ctx;
	if (n == 0)
		return; /* a word over 100 characters */
	if (!utf8_ok(w, n) || memchr(w, ' ', n))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned fl = data[0];
	data++;
	size--;
	size_t pre = fl & 16 ? strlen(SPECIALS) : 0;
	char *voc = malloc(pre + size + 1);
	if (!voc)
		return 0;
	memcpy(voc, SPECIALS, pre);
	memcpy(voc + pre, data, size);
	size_t len = pre + size;
	sky_tok_flags f = {(fl >> 3) & 1, (fl >> 2) & 1, (fl >> 1) & 1, fl & 1};
	sky_tokenizer t;
	sky_diag d;
	sky_diag_clear(&d);
	int rc = sky_tok_load_vocab(&t, voc, len, &f, &d);
	if (rc) {
		if (d.msg[0] == '\0' || t.block != NULL)
			abort();
	} else {
		if (t.id_pad < 0 || t.id_unk < 0 || t.id_cls < 0 || t.id_sep < 0)
			abort();
		/* line i (0-based) is token i */
		uint32_t id = 0;
		for (size_t at = 0; at < len; id++) {
			const char *nl = memchr(voc + at, '\n', len - at);
			size_t e = nl ? (size_t)(nl - voc) : len, l = e - at;
			if (l && voc[at + l - 1] == '\r')
				l--;
			const char *tok = sky_tok_token(&t, (int32_t)id);
			if (!tok || strlen(tok) != l || memcmp(tok, voc + at, l) != 0 ||
			    l > SKY_TOK_MAX_TOKEN_BYTES || !utf8_ok(tok, l) ||
			    sky_tok_find(&t, voc + at, l) != (int32_t)id)
				abort();
			at = nl ? e + 1 : len;
		}
		if (id != t.n)
			abort();
		sky_tok_free(&t);
		sky_tok_free(&t);
	}
	sky_diag_clear(&d);
	if (sky_tok_basic(&f, voc, len, on_word, NULL, &d) != 0 && d.msg[0] == '\0')
		abort();
	if (sky_json_pool_used() != 0)
		abort();
	free(voc);
	return 0;
}
