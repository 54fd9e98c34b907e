/* libFuzzer harness: config.json (sky_hf_config_parse) and the sharded
 * checkpoint index (sky_hf_index_parse) of a Hugging Face directory over
 * arbitrary bytes. Whatever the bytes, parsing returns 0 or an error that
 * says why, releases every JSON block, and a config it accepts is one the
 * kernels can be sized from: every size in its range, heads dividing
 * hidden, 1 to 256 labels with distinct names; an index it accepts names
 * plain shard files and a shard for every tensor.
 *
 * Input: byte 0 bit 0 chooses the index (else config.json); the rest is
 * the document. */
#include "sky_hfmodel.h"
#include "sky_json.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_config(const char *s, size_t n)
{
	static sky_hf_config c;
	sky_diag d;
	sky_diag_clear(&d);
	int rc = sky_hf_config_parse(s, n, &c, &d);
	if (sky_json_pool_used() != 0)
		abort(); /* the document was not released */
	if (rc) {
		if (d.msg[0] == '\0')
			abort(); /* every failure says why */
		return;
	}
	const sky_model_cfg *m = &c.cfg;
	if (m->hidden < 1 || m->hidden > SKY_HF_MAX_HIDDEN || m->heads < 1 || m->hidden % m->heads ||
	    m->ffn < 1 || m->ffn > SKY_HF_MAX_FFN || m->layers < 1 || m->layers > SKY_HF_MAX_LAYERS ||
	    m->vocab < 1 || m->vocab > SKY_HF_MAX_VOCAB || m->max_pos < 1 ||
	    m->max_pos > SKY_HF_MAX_POS || m->type_vocab < 1 || m->type_vocab > SKY_HF_MAX_TYPES)
		abort();
	/* every table below 2^31 floats */
	if ((int64_t)m->vocab * m->hidden >= (1ll << 31) || (int64_t)m->ffn * m->hidden >= (1ll << 31))
		abort();
	if (!(c.ln_eps > 0 && c.ln_eps < 1) || !(c.hidden_dropout >= 0 && c.hidden_dropout < 1) ||
	    !(c.attn_dropout >= 0 && c.attn_dropout < 1))
		abort();
	if (c.num_labels < 1 || c.num_labels > SKY_HF_MAX_LABELS || c.num_labels != m->classes)
		abort();
	for (int i = 0; i < c.num_labels; i++) {
		if (memchr(c.label[i], 0, SKY_HF_LABEL_CAP) == NULL)
			abort(); /* NUL-terminated within its slot */
		for (int j = 0; j < i; j++)
			if (strcmp(c.label[i], c.label[j]) == 0)
				abort();
	}
}

static void check_index(const char *s, size_t n)
{
	sky_hf_index ix;
	memset(&ix, 0, sizeof ix);
	sky_diag d;
	sky_diag_clear(&d);
	int rc = sky_hf_index_parse(s, n, &ix, &d);
	if (sky_json_pool_used() != 0)
		abort();
	if (rc) {
		if (d.msg[0] == '\0' || ix.mem != NULL)
			abort();
		return;
	}
	for (int i = 0; i < ix.nshards; i++) {
		const char *f = ix.shard[i];
		if (!f[0] || strchr(f, '/') || !strcmp(f, ".") || !strcmp(f, ".."))
			abort();
	}
	for (int i = 0; i < ix.ntensors; i++)
		if (!ix.name[i] || ix.where[i] < 0 || ix.where[i] >= ix.nshards)
			abort();
	sky_hf_index_free(&ix);
	sky_hf_index_free(&ix);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int which = data[0] & 1;
	size--;
	char *copy = malloc(size ? size : 1); /* private, so reads past the end are caught */
	if (!copy)
		return 0;
	memcpy(copy, data + 1, size);
	if (which)
		check_index(copy, size);
	else
		check_config(copy, size);
	free(copy);
	return 0;
}
