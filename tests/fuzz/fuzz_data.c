/* libFuzzer harness: rows of TSV, CSV and JSON Lines (sky_rows_read) and
 * their preparation into a data set (sky_prep_buf, --skip-bad) over
 * arbitrary bytes, with a small fixed vocabulary. Whatever the bytes,
 * reading returns 0 or an error that says why; every row has a line number
 * (never going back), a reason if it is bad and a text if it is not; every
 * JSON block is released; a prepared set has every row well formed ([CLS]
 * first, ids in the vocabulary, mask 1s then 0s, types 0 or 1, labels below
 * the label count, names distinct) and its counts add up.
 *
 * Input: byte 0 bits 0-1 the format (0 TSV, 1 CSV, 2 JSONL), bits 2-3 the
 * header (0 auto, 1 yes, 2 no), bit 4 a pair column by index ("1"), bit 5
 * a given label list; byte 1 the sequence length; the rest is the file. */
#include "sky_dataprep.h"
#include "sky_json.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char k_vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\nc\nthe\n##s\n##e\n"
			      ",\n.\n\"\nx\ny\n1\n0\n";

typedef struct seen {
	long last_line;
	long rows;
	const char *buf;
	size_t len;
	int tsv;
} seen;

static int on_row(void *ctx, const sky_row *r)
{
	seen *s = ctx;
	if (r->line < 1 || r->line < s->last_line || r->end > s->len)
		abort();
	s->last_line = r->line;
	s->rows++;
	if (r->bad) {
		if (!r->bad[0])
			abort();
		return 0;
	}
	if (!r->text)
		abort();
	/* TSV fields are views of the input */
	if (s->tsv && (r->text < s->buf || r->text + r->text_len > s->buf + s->len))
		abort();
	volatile char sink = 0;
	for (size_t i = 0; i < r->text_len; i++)
		sink ^= r->text[i];
	for (size_t i = 0; r->label && i < r->label_len; i++)
		sink ^= r->label[i];
	(void)sink;
	return 0;
}

static void on_bad(void *ctx, long line, const char *reason)
{
	(void)ctx;
	if (line < 1 || !reason[0])
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static sky_tokenizer tok;
	static int loaded;
	if (!loaded) {
		sky_tok_flags f;
		sky_tok_flags_default(&f);
		sky_diag d;
		sky_diag_clear(&d);
		if (sky_tok_load_vocab(&tok, k_vocab, strlen(k_vocab), &f, &d) != 0)
			abort();
		loaded = 1;
	}
	if (size < 2)
		return 0;
	unsigned fl = data[0];
	int seq = 3 + data[1] % 40;
	data += 2;
	size -= 2;
	char *buf = malloc(size ? size : 1); /* private, so reads past the end are caught */
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	sky_prep_opts o;
	sky_prep_opts_default(&o);
	o.rows.format = (sky_rows_format)((fl & 3) % 3);
	int h = (fl >> 2) & 3;
	o.rows.header = h == 1 ? 1 : h == 2 ? 0 : -1;
	if (fl & 16)
		o.rows.pair_col = "1";
	static const char *const names[] = {"0", "pos", "neg"};
	if (fl & 32) {
		o.labels = names;
		o.nlabels = 3;
	}
	o.seq = seq;
	o.skip_bad = 1;
	o.on_bad = on_bad;

	seen s = {0, 0, buf, size, o.rows.format == SKY_ROWS_TSV};
	sky_diag d;
	sky_diag_clear(&d);
	int rc = sky_rows_read(buf, size, &o.rows, on_row, &s, NULL, &d);
	if (rc && d.msg[0] == '\0')
		abort();
	if (sky_json_pool_used() != 0)
		abort();

	sky_ds_build b;
	sky_prep_result res;
	sky_diag_clear(&d);
	rc = sky_prep_buf(&tok, NULL, buf, size, &o, &b, &res, &d);
	if (sky_json_pool_used() != 0)
		abort();
	if (rc) {
		if (d.msg[0] == '\0' || b.input_ids != NULL)
			abort();
		goto exit;
	}
	const sky_ds_meta *m = &b.meta;
	if (m->rows < 1 || m->rows != res.rows || m->seq != seq || m->nlabels < 1 ||
	    m->nlabels > SKY_DS_MAX_LABELS || res.truncated > res.rows || m->skipped != res.bad)
		abort();
	for (int i = 0; i < m->nlabels; i++)
		for (int j = 0; j < i; j++)
			if (!strcmp(m->label[i], m->label[j]))
				abort();
	for (int64_t r = 0; r < m->rows; r++) {
		const int32_t *ids = b.input_ids + r * seq, *ty = b.token_type_ids + r * seq,
			      *mk = b.attention_mask + r * seq;
		if (b.labels[r] < 0 || b.labels[r] >= m->nlabels || ids[0] != tok.id_cls)
			abort();
		int len = 0;
		while (len < seq && mk[len] == 1)
			len++;
		if (len < 3 - (o.rows.pair_col == NULL) || ids[len - 1] != tok.id_sep)
			abort();
		for (int i = 0; i < seq; i++)
			if ((i >= len && (mk[i] != 0 || ids[i] != tok.id_pad)) || ids[i] < 0 ||
			    (uint32_t)ids[i] >= tok.n || (ty[i] != 0 && ty[i] != 1))
				abort();
	}
	sky_ds_build_free(&b);
exit:
	free(buf);
	return 0;
}
