/* libFuzzer harness: vocabularies (vocab.txt and tokenizer.json) and
 * tokenizer input over arbitrary bytes. Whatever the bytes, loading
 * returns 0 or an error that says why and holds nothing, and an encoding
 * is well formed: [CLS] first, [SEP] closing each text, every id within
 * the vocabulary, token types 0 then 1 over the pair, the attention mask 1
 * over the tokens and 0 over the padding, the same ids every time.
 *
 * Input: byte 0 holds the flags (bit 0 lowercase, 1 strip accents, 2
 * chinese characters, 3 clean text, 4 a pair, 5 the vocabulary is all the
 * fuzzer's (else it follows the five special tokens), 6 it is
 * tokenizer.json), byte 1 the sequence length, bytes 2-3 the vocabulary's
 * length (little-endian); then the vocabulary, then the text, split in two
 * at its middle for a pair. */
#include "sky_json.h"
#include "sky_tokenizer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SPECIALS "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"

static void check(const sky_tokenizer *t, const char *a, size_t alen, const char *b, size_t blen,
		  int cap)
{
	int32_t *buf = malloc(6 * (size_t)cap * sizeof *buf);
	if (!buf)
		return;
	sky_tok_enc e = {buf, buf + cap, buf + 2 * cap, cap, 1, 0, 0, 0};
	sky_diag d;
	sky_diag_clear(&d);
	int rc = sky_tok_encode(t, a, alen, b, blen, &e, &d);
	if (rc) {
		if (d.msg[0] == '\0')
			abort();
		free(buf);
		return;
	}
	int len = e.len;
	if (len < (b ? 3 : 2) || len > cap || e.ids[0] != t->id_cls || e.ids[len - 1] != t->id_sep)
		abort();
	int first1 = len; /* the first position of type 1 */
	for (int i = 0; i < cap; i++) {
		if (e.ids[i] < 0 || (uint32_t)e.ids[i] >= t->n || sky_tok_token(t, e.ids[i]) == NULL)
			abort();
		if (e.mask[i] != (i < len))
			abort();
		if (i >= len && (e.ids[i] != t->id_pad || e.type_ids[i] != 0))
			abort();
		if (i < len && e.type_ids[i] != 0 && e.type_ids[i] != 1)
			abort();
		if (i < len && e.type_ids[i] == 1 && first1 == len)
			first1 = i;
		if (i < len && i > first1 && e.type_ids[i] != 1)
			abort(); /* types are 0s then 1s */
	}
	if (!b && first1 != len)
		abort(); /* one text: all type 0 */
	if (b && (first1 < 2 || first1 >= len || e.ids[first1 - 1] != t->id_sep))
		abort(); /* a pair: b starts after a's [SEP] and ends with its own */
	/* the same ids the second time */
	sky_tok_enc e2 = {buf + 3 * cap, buf + 4 * cap, buf + 5 * cap, cap, 1, 0, 0, 0};
	if (sky_tok_encode(t, a, alen, b, blen, &e2, &d) != 0 || e2.len != len ||
	    memcmp(e.ids, e2.ids, (size_t)cap * sizeof *buf) != 0)
		abort();
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 4)
		return 0;
	unsigned fl = data[0];
	int cap = 3 + data[1] % 64;
	size_t vlen = (size_t)data[2] | (size_t)data[3] << 8;
	data += 4;
	size -= 4;
	if (vlen > size)
		vlen = size;
	sky_tok_flags f = {(fl >> 3) & 1, (fl >> 2) & 1, (fl >> 1) & 1, fl & 1};
	/* a private copy of each part, so reads past the end are caught */
	size_t pre = (fl & 32) || (fl & 64) ? 0 : strlen(SPECIALS);
	char *voc = malloc(pre + vlen + 1);
	size_t tlen = size - vlen;
	char *text = malloc(tlen ? tlen : 1);
	if (!voc || !text)
		goto exit;
	memcpy(voc, SPECIALS, pre);
	memcpy(voc + pre, data, vlen);
	memcpy(text, data + vlen, tlen);
	sky_tokenizer t;
	sky_diag d;
	sky_diag_clear(&d);
	int rc = fl & 64 ? sky_tok_load_json(&t, voc, pre + vlen, &d)
			 : sky_tok_load_vocab(&t, voc, pre + vlen, &f, &d);
	if (sky_json_pool_used() != 0)
		abort(); /* the document was not released */
	if (rc) {
		if (d.msg[0] == '\0' || t.block != NULL)
			abort(); /* every failure says why and holds nothing */
		goto exit;
	}
	if (t.id_cls < 0 || t.id_sep < 0 || t.id_pad < 0 || t.id_unk < 0)
		abort();
	/* every token is found under its own id */
	for (uint32_t id = 0; id < t.n && id < 4096; id++) {
		const char *s = sky_tok_token(&t, (int32_t)id);
		if (!s || sky_tok_find(&t, s, strlen(s)) != (int32_t)id)
			abort();
	}
	if (fl & 16)
		check(&t, text, tlen / 2, text + tlen / 2, tlen - tlen / 2, cap);
	else
		check(&t, text, tlen, NULL, 0, cap);
	sky_tok_free(&t);
exit:
	free(voc);
	free(text);
	return 0;
}
