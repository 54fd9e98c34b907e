/* A Hugging Face BERT directory: config.json, the (sharded) safetensors
 * checkpoint, and the writer of the same layout (see sky_hfmodel.h). The
 * HF names come from the blocks' own tensor tables (sky_embed_tensors,
 * sky_layer_tensors, sky_head_tensors), the same ones sky_bert_save writes,
 * so there is one mapping. */
#include "sky_hfmodel.h"

#include "sky_embed.h"
#include "sky_file.h"
#include "sky_head.h"
#include "sky_layer.h"
#include "sky_log.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- half floats ------------------------------------------------------------ */

float sky_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
	uint32_t bits;
	if (e == 0x1f) {
		bits = sign | 0x7f800000u | (m << 13); /* infinity, or NaN with its payload */
	} else if (e != 0) {
		bits = sign | ((e + 112u) << 23) | (m << 13); /* rebias 15 -> 127 */
	} else if (m == 0) {
		bits = sign;
	} else {
		/* subnormal m * 2^-24: shift the leading one up to the implicit bit */
		uint32_t ex = 113;
		while (!(m & 0x400u)) {
			m <<= 1;
			ex--;
		}
		bits = sign | (ex << 23) | ((m & 0x3ffu) << 13);
	}
	float f;
	memcpy(&f, &bits, sizeof f);
	return f;
}

float sky_bf16_to_f32(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16; /* bfloat16 is binary32's top half */
	float f;
	memcpy(&f, &bits, sizeof f);
	return f;
}

uint16_t sky_f32_to_f16(float f)
{
	uint32_t x;
	memcpy(&x, &f, sizeof x);
	uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
	if (ax > 0x7f800000u) /* NaN: keep the payload's top bits, and stay a NaN */
		return (uint16_t)(sign | 0x7c00u | 0x200u | ((ax >> 13) & 0x3ffu));
	if (ax >= 0x477ff000u) /* 65520 and up round to infinity */
		return (uint16_t)(sign | 0x7c00u);
	if (ax < 0x38800000u) { /* below 2^-14: a subnormal half (or zero) */
		uint32_t e = ax >> 23;
		if (e < 102) /* below 2^-25: rounds to zero */
			return (uint16_t)sign;
		uint32_t m = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;
		uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (q & 1)))
			q++;
		return (uint16_t)(sign | q);
	}
	uint32_t h = (ax - 0x38000000u) >> 13, rem = ax & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
		h++; /* a carry into the exponent is the right next value */
	return (uint16_t)(sign | h);
}

/* ---- config.json -------------------------------------------------------------- */

#define MAX_KEYS 512 /* top-level keys of a config; BertConfig has about 30 */

/* Parses len bytes as exactly one JSON object (whitespace after it only). */
static int parse_object(const char *text, size_t len, const char *what, cJSON **out, sky_diag *d)
{
	const char *end = NULL;
	*out = NULL;
	if (len > SKY_HF_MAX_CONFIG)
		return sky_diag_set(d, SKY_ERANGE, "%s: %zu bytes, more than the %u allowed", what,
				    len, SKY_HF_MAX_CONFIG);
	cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	if (!j)
		return sky_diag_set(d, SKY_EFORMAT, "%s: not valid JSON", what);
	/* trailing whitespace (and a NUL some editors leave) only */
	for (const char *p = end; p && p < text + len; p++) {
		if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r' && *p != '\0') {
			cJSON_Delete(j);
			return sky_diag_set(d, SKY_EFORMAT, "%s: bytes after the JSON object", what);
		}
	}
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return sky_diag_set(d, SKY_EFORMAT, "%s: not a JSON object", what);
	}
	*out = j;
	return 0;
}

/* The number of members of an object, or -1 past cap. */
static int count_members(const cJSON *o, int cap)
{
	int n = 0;
	for (const cJSON *c = o ? o->child : NULL; c; c = c->next)
		if (++n > cap)
			return -1;
	return n;
}

/* A key given twice (json.load keeps the last, cJSON the first: refuse). */
static const char *dup_key(const cJSON *o)
{
	for (const cJSON *a = o->child; a; a = a->next)
		for (const cJSON *b = a->next; b; b = b->next)
			if (a->string && b->string && strcmp(a->string, b->string) == 0)
				return a->string;
	return NULL;
}

static int get_int(const cJSON *j, const char *key, long lo, long hi, int required, long dflt,
		   long *out, sky_diag *d)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
	if (!v) {
		if (required)
			return sky_diag_set(d, SKY_EFORMAT, "config.json: %s is missing", key);
		*out = dflt;
		return 0;
	}
	if (!cJSON_IsNumber(v))
		return sky_diag_set(d, SKY_EFORMAT, "config.json: %s is not a number", key);
	double x = v->valuedouble;
	if (!(x == floor(x)))
		return sky_diag_set(d, SKY_EFORMAT, "config.json: %s is %.17g, not a whole number",
				    key, x);
	if (x < (double)lo || x > (double)hi)
		return sky_diag_set(d, SKY_ERANGE, "config.json: %s is %.17g, outside [%ld, %ld]", key,
				    x, lo, hi);
	*out = (long)x;
	return 0;
}

static int get_real(const cJSON *j, const char *key, double lo, double hi, int lo_open,
		    double dflt, double *out, sky_diag *d)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
	if (!v) {
		*out = dflt;
		return 0;
	}
	if (!cJSON_IsNumber(v))
		return sky_diag_set(d, SKY_EFORMAT, "config.json: %s is not a number", key);
	double x = v->valuedouble;
	if (!(lo_open ? x > lo : x >= lo) || !(x < hi))
		return sky_diag_set(d, SKY_ERANGE, "config.json: %s is %.17g, outside %c%g, %g)", key,
				    x, lo_open ? '(' : '[', lo, hi);
	*out = x;
	return 0;
}

/* A string field that, when present, must be one of the allowed values. */
static int get_choice(const cJSON *j, const char *key, const char *const *ok, int nok, int *idx,
		      sky_diag *d)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
	*idx = -1;
	if (!v)
		return 0;
	if (!cJSON_IsString(v) || !v->valuestring)
		return sky_diag_set(d, SKY_EFORMAT, "config.json: %s is not a string", key);
	for (int i = 0; i < nok; i++) {
		if (strcmp(v->valuestring, ok[i]) == 0) {
			*idx = i;
			return 0;
		}
	}
	char list[128] = "";
	for (int i = 0; i < nok; i++) {
		size_t n = strlen(list);
		snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", ok[i]);
	}
	return sky_diag_set(d, SKY_EUNSUPPORTED, "config.json: %s '%.60s' is not supported (%s)",
			    key, v->valuestring, list);
}

static int check_label(const char *s, const char *where, sky_diag *d)
{
	size_t n = strlen(s);
	if (n == 0 || n >= SKY_HF_LABEL_CAP)
		return sky_diag_set(d, SKY_EFORMAT,
				    "config.json: %s has a label of %zu bytes (1 to %d allowed)", where,
				    n, SKY_HF_LABEL_CAP - 1);
	return 0;
}

/* id2label ({"0": "neg", ...}), label2id ({"neg": 0, ...}) and num_labels
 * into out->label and out->num_labels. */
static int parse_labels(const cJSON *j, sky_hf_config *out, sky_diag *d)
{
	const cJSON *i2l = cJSON_GetObjectItemCaseSensitive(j, "id2label");
	const cJSON *l2i = cJSON_GetObjectItemCaseSensitive(j, "label2id");
	long nl = -1;
	int rc;
	if (cJSON_GetObjectItemCaseSensitive(j, "num_labels") &&
	    (rc = get_int(j, "num_labels", 1, SKY_HF_MAX_LABELS, 1, 0, &nl, d)) != 0)
		return rc;
	int n_i2l = -1, n_l2i = -1;
	if (i2l) {
		if (!cJSON_IsObject(i2l) || (n_i2l = count_members(i2l, SKY_HF_MAX_LABELS)) < 0)
			return sky_diag_set(d, SKY_EFORMAT,
					    "config.json: id2label is not an object of at most %d "
					    "labels",
					    SKY_HF_MAX_LABELS);
	}
	if (l2i) {
		if (!cJSON_IsObject(l2i) || (n_l2i = count_members(l2i, SKY_HF_MAX_LABELS)) < 0)
			return sky_diag_set(d, SKY_EFORMAT,
					    "config.json: label2id is not an object of at most %d "
					    "labels",
					    SKY_HF_MAX_LABELS);
	}
	int n = n_i2l >= 0 ? n_i2l : n_l2i >= 0 ? n_l2i : nl >= 0 ? (int)nl : 2;
	if ((n_i2l >= 0 && n_i2l != n) || (n_l2i >= 0 && n_l2i != n) || (nl >= 0 && nl != n))
		return sky_diag_set(d, SKY_EFORMAT,
				    "config.json: num_labels %ld, id2label's %d and label2id's %d "
				    "labels disagree",
				    nl, n_i2l, n_l2i);
	if (n < 1)
		return sky_diag_set(d, SKY_EFORMAT, "config.json: id2label has no labels");
	out->num_labels = n;
	for (int i = 0; i < n; i++)
		snprintf(out->label[i], SKY_HF_LABEL_CAP, "LABEL_%d", i);
	char seen[SKY_HF_MAX_LABELS] = {0};
	if (i2l) {
		for (const cJSON *c = i2l->child; c; c = c->next) {
			char *end = NULL;
			long id = c->string && *c->string ? strtol(c->string, &end, 10) : -1;
			if (!end || *end || id < 0 || id >= n || c->string[0] == '+' ||
			    (c->string[0] == '0' && c->string[1]))
				return sky_diag_set(d, SKY_EFORMAT,
						    "config.json: id2label key '%.40s' is not an id in "
						    "[0, %d)",
						    c->string ? c->string : "", n);
			if (seen[id]++)
				return sky_diag_set(d, SKY_EFORMAT,
						    "config.json: id2label gives id %ld twice", id);
			if (!cJSON_IsString(c) || !c->valuestring)
				return sky_diag_set(d, SKY_EFORMAT,
						    "config.json: id2label[%ld] is not a string", id);
			if ((rc = check_label(c->valuestring, "id2label", d)) != 0)
				return rc;
			snprintf(out->label[id], SKY_HF_LABEL_CAP, "%s", c->valuestring);
		}
		out->has_labels = 1;
	}
	if (l2i) {
		char seen2[SKY_HF_MAX_LABELS] = {0};
		for (const cJSON *c = l2i->child; c; c = c->next) {
			if (!cJSON_IsNumber(c) || c->valuedouble != floor(c->valuedouble) ||
			    c->valuedouble < 0 || c->valuedouble >= n)
				return sky_diag_set(d, SKY_EFORMAT,
						    "config.json: label2id['%.40s'] is not an id in "
						    "[0, %d)",
						    c->string ? c->string : "", n);
			int id = (int)c->valuedouble;
			if (seen2[id]++)
				return sky_diag_set(d, SKY_EFORMAT,
						    "config.json: label2id gives id %d twice", id);
			if ((rc = check_label(c->string ? c->string : "", "label2id", d)) != 0)
				return rc;
			if (i2l && strcmp(out->label[id], c->string) != 0)
				return sky_diag_set(d, SKY_EFORMAT,
						    "config.json: label2id maps '%.40s' to %d, id2label "
						    "names %d '%.40s'",
						    c->string, id, id, out->label[id]);
			if (!i2l)
				snprintf(out->label[id], SKY_HF_LABEL_CAP, "%s", c->string);
		}
		out->has_labels = 1;
	}
	for (int a = 0; a < n; a++)
		for (int b = a + 1; b < n; b++)
			if (strcmp(out->label[a], out->label[b]) == 0)
				return sky_diag_set(d, SKY_EFORMAT,
						    "config.json: label '%s' names ids %d and %d",
						    out->label[a], a, b);
	return 0;
}

int sky_hf_config_parse(const char *text, size_t len, sky_hf_config *out, sky_diag *d)
{
	memset(out, 0, sizeof *out);
	cJSON *j;
	int rc = parse_object(text, len, "config.json", &j, d);
	if (rc)
		return rc;
	long v[7];
	const char *dup;
	static const char *const k_model_types[] = {"bert"};
	static const char *const k_pos_types[] = {"absolute"};
	static const char *const k_acts[] = {"gelu", "gelu_new", "gelu_pytorch_tanh"};
	const struct {
		const char *key;
		long hi;
	} f[7] = {{"hidden_size", SKY_HF_MAX_HIDDEN},
		  {"num_attention_heads", SKY_HF_MAX_HIDDEN},
		  {"intermediate_size", SKY_HF_MAX_FFN},
		  {"num_hidden_layers", SKY_HF_MAX_LAYERS},
		  {"vocab_size", SKY_HF_MAX_VOCAB},
		  {"max_position_embeddings", SKY_HF_MAX_POS},
		  {"type_vocab_size", SKY_HF_MAX_TYPES}};
	if (count_members(j, MAX_KEYS) < 0) {
		rc = sky_diag_set(d, SKY_ERANGE, "config.json: more than %d fields", MAX_KEYS);
		goto exit;
	}
	if ((dup = dup_key(j)) != NULL) {
		rc = sky_diag_set(d, SKY_EFORMAT, "config.json: %.60s is given twice", dup);
		goto exit;
	}
	int idx;
	if ((rc = get_choice(j, "model_type", k_model_types, 1, &idx, d)) != 0 ||
	    (rc = get_choice(j, "position_embedding_type", k_pos_types, 1, &idx, d)) != 0)
		goto exit;
	for (int i = 0; i < 7; i++)
		if ((rc = get_int(j, f[i].key, 1, f[i].hi, 1, 0, &v[i], d)) != 0)
			goto exit;
	if (v[0] % v[1] != 0) {
		rc = sky_diag_set(d, SKY_EFORMAT,
				  "config.json: num_attention_heads %ld does not divide hidden_size "
				  "%ld",
				  v[1], v[0]);
		goto exit;
	}
	sky_model_cfg *c = &out->cfg;
	snprintf(c->name, sizeof c->name, "hf");
	c->hidden = (int)v[0], c->heads = (int)v[1], c->ffn = (int)v[2], c->layers = (int)v[3];
	c->vocab = (int)v[4], c->max_pos = (int)v[5], c->type_vocab = (int)v[6];
	c->seq = c->max_pos < SKY_HF_DEFAULT_SEQ ? c->max_pos : SKY_HF_DEFAULT_SEQ;
	c->batch = SKY_HF_DEFAULT_BATCH;
	/* every table must stay below 2^31 floats (Sky's index range) */
	const struct {
		const char *what;
		long rows;
	} tab[] = {{"vocab_size", v[4]}, {"intermediate_size", v[2]},
		   {"max_position_embeddings", v[5]}, {"type_vocab_size", v[6]},
		   {"hidden_size", v[0]}};
	for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
		if ((int64_t)tab[i].rows * v[0] >= (1ll << 31)) {
			rc = sky_diag_set(d, SKY_ERANGE,
					  "config.json: %s %ld x hidden_size %ld is %lld floats, too "
					  "large (below 2^31)",
					  tab[i].what, tab[i].rows, v[0],
					  (long long)tab[i].rows * v[0]);
			goto exit;
		}
	}
	if ((rc = get_real(j, "layer_norm_eps", 0, 1, 1, 1e-12, &out->ln_eps, d)) != 0 ||
	    (rc = get_real(j, "hidden_dropout_prob", 0, 1, 0, 0.1, &out->hidden_dropout, d)) != 0 ||
	    (rc = get_real(j, "attention_probs_dropout_prob", 0, 1, 0, 0.1, &out->attn_dropout,
			   d)) != 0)
		goto exit;
	c->ln_eps = (float)out->ln_eps;
	/* training applies them (sky_dropout.h); inference never does */
	c->hidden_drop = (float)out->hidden_dropout;
	c->attn_drop = (float)out->attn_dropout;
	if (!(c->ln_eps > 0)) { /* below float's smallest subnormal */
		rc = sky_diag_set(d, SKY_ERANGE, "config.json: layer_norm_eps %g is 0 as a float",
				  out->ln_eps);
		goto exit;
	}
	if ((rc = get_choice(j, "hidden_act", k_acts, 3, &idx, d)) != 0)
		goto exit;
	snprintf(out->act_name, sizeof out->act_name, "%s", idx < 0 ? "gelu" : k_acts[idx]);
	c->act = idx > 0 ? SKY_ACT_GELU_TANH : SKY_ACT_GELU_ERF;
	if ((rc = parse_labels(j, out, d)) != 0)
		goto exit;
	c->classes = out->num_labels;
	if (sky_model_validate(c) != 0)
		rc = sky_diag_set(d, SKY_ERANGE, "config.json: shapes Sky cannot hold (see the log)");
exit:
	cJSON_Delete(j);
	return rc;
}

/* Reads DIR/name into a heap buffer (at most SKY_HF_MAX_CONFIG bytes). */
static int read_small(const char *dir, const char *name, char **out, size_t *len, sky_diag *d)
{
	char path[4096];
	if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path)
		return sky_diag_set(d, SKY_ERANGE, "%.100s: path too long", dir);
	char *buf = malloc(SKY_HF_MAX_CONFIG + 1);
	if (!buf)
		return sky_diag_set(d, SKY_ENOMEM, "%s: no memory to read it", name);
	long n = sky_file_read(path, buf, SKY_HF_MAX_CONFIG + 1);
	if (n < 0 || n > (long)SKY_HF_MAX_CONFIG) {
		free(buf);
		if (n == SKY_ERANGE || n > (long)SKY_HF_MAX_CONFIG)
			return sky_diag_set(d, SKY_ERANGE, "%.200s: larger than %u bytes", path,
					    SKY_HF_MAX_CONFIG);
		return sky_diag_set(d, (int)n, "%.200s: %s", path, sky_strerror((int)n));
	}
	*out = buf;
	*len = (size_t)n;
	return 0;
}

int sky_hf_config_read(const char *dir, sky_hf_config *out, sky_diag *d)
{
	char *buf = NULL;
	size_t len = 0;
	memset(out, 0, sizeof *out);
	int rc = read_small(dir, "config.json", &buf, &len, d);
	if (!rc)
		rc = sky_hf_config_parse(buf, len, out, d);
	free(buf);
	return rc;
}

/* The shortest decimal that reads back as f (1e-12f -> 1e-12): what a
 * config file should say, since cJSON prints doubles with 15 digits. */
static double short_decimal(float f)
{
	char buf[32];
	for (int p = 1; p <= 9; p++) {
		snprintf(buf, sizeof buf, "%.*g", p, (double)f);
		double v = strtod(buf, NULL);
		if ((float)v == f)
			return v;
	}
	return (double)f;
}

void sky_hf_config_from_cfg(const sky_model_cfg *cfg, sky_hf_config *out)
{
	memset(out, 0, sizeof *out);
	out->cfg = *cfg;
	out->ln_eps = short_decimal(sky_model_ln_eps(cfg));
	snprintf(out->act_name, sizeof out->act_name, "%s",
		 cfg->act == SKY_ACT_GELU_TANH ? "gelu_new" : "gelu");
	out->hidden_dropout = 0.1;
	out->attn_dropout = 0.1;
	out->num_labels = cfg->classes;
	for (int i = 0; i < cfg->classes && i < SKY_HF_MAX_LABELS; i++)
		snprintf(out->label[i], SKY_HF_LABEL_CAP, "LABEL_%d", i);
}

/* ---- the sharded index ----------------------------------------------------------- */

static int plain_file_name(const char *s)
{
	size_t n = strlen(s);
	return n > 0 && n < SKY_HF_SHARD_CAP && !strchr(s, '/') && !strchr(s, '\\') &&
	       strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void sky_hf_index_free(sky_hf_index *ix)
{
	if (!ix)
		return;
	free(ix->mem);
	memset(ix, 0, sizeof *ix);
}

int sky_hf_index_parse(const char *text, size_t len, sky_hf_index *out, sky_diag *d)
{
	memset(out, 0, sizeof *out);
	cJSON *j;
	int rc = parse_object(text, len, "model.safetensors.index.json", &j, d);
	if (rc)
		return rc;
	const cJSON *wm = cJSON_GetObjectItemCaseSensitive(j, "weight_map");
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(j, "metadata");
	if (meta && !cJSON_IsObject(meta)) {
		rc = sky_diag_set(d, SKY_EFORMAT, "model.safetensors.index.json: metadata is not an "
						  "object");
		goto exit;
	}
	if (!wm || !cJSON_IsObject(wm) || !wm->child) {
		rc = sky_diag_set(d, SKY_EFORMAT, "model.safetensors.index.json: weight_map is "
						  "missing, empty or not an object");
		goto exit;
	}
	/* first pass: sizes and checks; second: fill one block */
	size_t nt = 0, strbytes = 0;
	for (const cJSON *c = wm->child; c; c = c->next) {
		if (!c->string || !c->string[0] || strlen(c->string) > 1024) {
			rc = sky_diag_set(d, SKY_EFORMAT,
					  "model.safetensors.index.json: a weight_map name is empty or "
					  "longer than 1024 bytes");
			goto exit;
		}
		if (!cJSON_IsString(c) || !c->valuestring || !plain_file_name(c->valuestring)) {
			rc = sky_diag_set(d, SKY_EFORMAT,
					  "model.safetensors.index.json: weight_map['%.80s'] is not a "
					  "plain file name (no '/', under %d bytes)",
					  c->string, SKY_HF_SHARD_CAP);
			goto exit;
		}
		nt++;
		strbytes += strlen(c->string) + 1;
	}
	size_t bytes = (size_t)SKY_HF_MAX_SHARDS * SKY_HF_SHARD_CAP + nt * sizeof(char *) +
		       nt * sizeof(int) + strbytes;
	char *mem = malloc(bytes);
	if (!mem) {
		rc = sky_diag_set(d, SKY_ENOMEM, "model.safetensors.index.json: no memory");
		goto exit;
	}
	out->mem = mem;
	out->shard = (char (*)[SKY_HF_SHARD_CAP])mem;
	out->name = (const char **)(mem + (size_t)SKY_HF_MAX_SHARDS * SKY_HF_SHARD_CAP);
	out->where = (int *)(out->name + nt);
	char *s = (char *)(out->where + nt);
	for (const cJSON *c = wm->child; c; c = c->next) {
		int w = -1;
		for (int i = 0; i < out->nshards && w < 0; i++)
			if (strcmp(out->shard[i], c->valuestring) == 0)
				w = i;
		if (w < 0) {
			if (out->nshards == SKY_HF_MAX_SHARDS) {
				rc = sky_diag_set(d, SKY_ERANGE,
						  "model.safetensors.index.json: more than %d shard "
						  "files",
						  SKY_HF_MAX_SHARDS);
				goto exit;
			}
			w = out->nshards++;
			snprintf(out->shard[w], SKY_HF_SHARD_CAP, "%s", c->valuestring);
		}
		size_t n = strlen(c->string) + 1;
		memcpy(s, c->string, n);
		out->name[out->ntensors] = s;
		out->where[out->ntensors++] = w;
		s += n;
	}
	/* sort by name (names with their shards) to find a name given twice and
	 * to look names up later */
	{
		const char **sorted = malloc(nt * sizeof *sorted);
		if (!sorted) {
			rc = sky_diag_set(d, SKY_ENOMEM, "model.safetensors.index.json: no memory");
			goto exit;
		}
		memcpy(sorted, out->name, nt * sizeof *sorted);
		qsort(sorted, nt, sizeof *sorted, cmp_name);
		for (size_t i = 1; i < nt && !rc; i++)
			if (strcmp(sorted[i - 1], sorted[i]) == 0)
				rc = sky_diag_set(d, SKY_EFORMAT,
						  "model.safetensors.index.json: weight_map names "
						  "tensor %.100s twice",
						  sorted[i]);
		free(sorted);
	}
exit:
	cJSON_Delete(j);
	if (rc)
		sky_hf_index_free(out);
	return rc;
}

/* ---- the checkpoint ------------------------------------------------------------------ */

void sky_hf_ckpt_close(sky_hf_ckpt *k)
{
	if (!k)
		return;
	for (int i = 0; i < k->nshards && i < SKY_HF_MAX_SHARDS; i++)
		sky_st_close(&k->shard[i]);
	k->nshards = 0;
}

static int open_shard(sky_hf_ckpt *k, const char *dir, const char *file, sky_diag *d)
{
	char path[4096];
	if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, file) >= sizeof path)
		return sky_diag_set(d, SKY_ERANGE, "%.100s: path too long", dir);
	int i = k->nshards;
	sky_st_init(&k->shard[i]);
	snprintf(k->file[i], SKY_HF_SHARD_CAP, "%s", file);
	sky_diag sd;
	sky_diag_clear(&sd);
	int rc = sky_st_open(&k->shard[i], path, &sd);
	if (rc) {
		sky_st_close(&k->shard[i]);
		return sky_diag_set(d, rc, "%.150s: %s%s%.150s", file, sky_strerror(rc),
				    sd.msg[0] ? ": " : "", sd.msg);
	}
	k->nshards++;
	return 0;
}

int sky_hf_ckpt_open(sky_hf_ckpt *k, const char *dir, sky_diag *d)
{
	memset(k, 0, sizeof *k);
	char path[4096];
	if ((size_t)snprintf(path, sizeof path, "%s/model.safetensors", dir) >= sizeof path)
		return sky_diag_set(d, SKY_ERANGE, "%.100s: path too long", dir);
	if (sky_file_exists(path))
		return open_shard(k, dir, "model.safetensors", d);
	char *text = NULL;
	size_t len = 0;
	sky_hf_index ix;
	memset(&ix, 0, sizeof ix);
	snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
	if (!sky_file_exists(path))
		return sky_diag_set(d, SKY_ENOTFOUND,
				    "%.150s: no model.safetensors or model.safetensors.index.json",
				    dir);
	int rc = read_small(dir, "model.safetensors.index.json", &text, &len, d);
	if (!rc)
		rc = sky_hf_index_parse(text, len, &ix, d);
	for (int i = 0; !rc && i < ix.nshards; i++)
		rc = open_shard(k, dir, ix.shard[i], d);
	/* the index and the shards must agree, both ways */
	for (int t = 0; !rc && t < ix.ntensors; t++)
		if (!sky_st_find(&k->shard[ix.where[t]], ix.name[t]))
			rc = sky_diag_set(d, SKY_EFORMAT,
					  "model.safetensors.index.json puts tensor %.100s in %.60s, "
					  "which does not hold it",
					  ix.name[t], ix.shard[ix.where[t]]);
	for (int s = 0; !rc && s < k->nshards; s++) {
		for (int t = 0; !rc && t < k->shard[s].ntensors; t++) {
			const char *name = k->shard[s].tensors[t].name;
			int listed = 0;
			for (int u = 0; u < ix.ntensors && !listed; u++)
				listed = ix.where[u] == s && strcmp(ix.name[u], name) == 0;
			if (!listed)
				rc = sky_diag_set(d, SKY_EFORMAT,
						  "shard %.60s holds tensor %.100s, which "
						  "model.safetensors.index.json does not put there",
						  k->file[s], name);
		}
	}
	free(text);
	sky_hf_index_free(&ix);
	if (rc)
		sky_hf_ckpt_close(k);
	return rc;
}

const sky_st_tensor *sky_hf_ckpt_find(const sky_hf_ckpt *k, const char *name)
{
	for (int i = 0; i < k->nshards; i++) {
		const sky_st_tensor *t = sky_st_find(&k->shard[i], name);
		if (t)
			return t;
	}
	return NULL;
}

/* ---- loading into a sky_bert ----------------------------------------------------------- */

static void fmt_shape(char *buf, size_t cap, int ndim, const int64_t *shape)
{
	size_t n = (size_t)snprintf(buf, cap, "(");
	for (int i = 0; i < ndim && n < cap; i++)
		n += (size_t)snprintf(buf + n, cap - n, i ? ", %lld" : "%lld", (long long)shape[i]);
	if (n < cap)
		snprintf(buf + n, cap - n, ")");
}

/* Converts t (F32, F16 or BF16, little-endian, any alignment) into dst. */
static void convert(const sky_st_tensor *t, float *dst)
{
	const unsigned char *p = t->data;
	if (t->dtype == SKY_ST_F32) {
		memcpy(dst, p, t->nbytes); /* the hosts are little-endian */
		return;
	}
	for (uint64_t i = 0; i < t->count; i++) {
		uint16_t h = (uint16_t)(p[2 * i] | (p[2 * i + 1] << 8));
		dst[i] = t->dtype == SKY_ST_F16 ? sky_f16_to_f32(h) : sky_bf16_to_f32(h);
	}
}

/* Reads the tensor name into dst, checking it against ti's shape. */
static int take(const sky_hf_ckpt *k, const char *name, const sky_tensor_info *ti, float *dst,
		sky_hf_report *r, sky_diag *d)
{
	int64_t want[2] = {ti->shape[0], ti->ndim == 2 ? ti->shape[1] : 0};
	char ws[64], gs[96];
	fmt_shape(ws, sizeof ws, ti->ndim, want);
	const sky_st_tensor *t = sky_hf_ckpt_find(k, name);
	if (!t)
		return sky_diag_set(d, SKY_ENOTFOUND, "tensor %.100s: missing (expected shape %s)",
				    name, ws);
	int ok = t->ndim == ti->ndim;
	for (int i = 0; ok && i < ti->ndim; i++)
		ok = t->shape[i] == want[i];
	if (!ok) {
		fmt_shape(gs, sizeof gs, t->ndim, t->shape);
		return sky_diag_set(d, SKY_EFORMAT, "tensor %.100s: expected shape %s, found %s", name,
				    ws, gs);
	}
	if (t->dtype != SKY_ST_F32 && t->dtype != SKY_ST_F16 && t->dtype != SKY_ST_BF16)
		return sky_diag_set(d, SKY_EUNSUPPORTED,
				    "tensor %.100s: dtype %s is not supported (F32, F16 or BF16)", name,
				    sky_st_dtype_name(t->dtype));
	convert(t, dst);
	r->loaded++;
	r->dtype_count[t->dtype]++;
	return 0;
}

enum { NAME_CAP = 112 };

/* The names this BERT reads, sorted, for telling a stray tensor from ours. */
typedef struct known_names {
	int n;
	char *buf;
	const char **sorted;
} known_names;

static int take_block(const sky_hf_ckpt *k, const char *prefix, const sky_tensor_info *tab,
		      int n, float *flat, known_names *kn, sky_hf_report *r, sky_diag *d)
{
	for (int i = 0; i < n; i++) {
		char *name = kn->buf + (size_t)kn->n * NAME_CAP;
		if ((size_t)snprintf(name, NAME_CAP, "%s%s", prefix, tab[i].name) >= NAME_CAP)
			return sky_diag_set(d, SKY_ERANGE, "tensor name too long");
		kn->sorted[kn->n++] = name;
		int rc = take(k, name, &tab[i], flat + tab[i].offset, r, d);
		if (rc)
			return rc;
	}
	return 0;
}

/* A block that may be missing as a whole (pooler, classifier): 1 when none
 * of its tensors is in the checkpoint, 0 when all are; a part is an error
 * (from take). */
static int block_absent(const sky_hf_ckpt *k, const char *prefix, const sky_tensor_info *tab,
			int n)
{
	char name[NAME_CAP];
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof name, "%s%s", prefix, tab[i].name);
		if (sky_hf_ckpt_find(k, name))
			return 0;
	}
	return 1;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && strcmp(s + a - b, suffix) == 0;
}

int sky_hf_load(sky_bert *m, const sky_hf_ckpt *k, unsigned long long seed, sky_hf_report *rep,
		sky_diag *d)
{
	const sky_model_cfg *c = &m->cfg;
	sky_hf_report local;
	sky_hf_report *r = rep ? rep : &local;
	memset(r, 0, sizeof *r);
	sky_tensor_info te[SKY_EMBED_NTENSORS], tl[SKY_LAYER_NTENSORS], th[SKY_HEAD_NTENSORS];
	sky_embed_tensors(c, te);
	sky_layer_tensors(c, tl);
	sky_head_tensors(c, th);
	known_names kn = {0, NULL, NULL};
	int cap = SKY_EMBED_NTENSORS + c->layers * SKY_LAYER_NTENSORS + SKY_HEAD_NTENSORS;
	kn.buf = malloc((size_t)cap * NAME_CAP);
	kn.sorted = malloc((size_t)cap * sizeof *kn.sorted);
	int rc = 0;
	if (!kn.buf || !kn.sorted) {
		rc = sky_diag_set(d, SKY_ENOMEM, "no memory for the tensor names");
		goto exit;
	}
	/* everything from the seed first: what the checkpoint lacks (pooler,
	 * classifier) keeps that, the rest is overwritten */
	sky_bert_init(m, seed);
	r->prefixed = sky_hf_ckpt_find(k, "bert.embeddings.word_embeddings.weight") != NULL ||
		      sky_hf_ckpt_find(k, "embeddings.word_embeddings.weight") == NULL;
	const char *pre = r->prefixed ? "bert." : "";
	rc = take_block(k, pre, te, SKY_EMBED_NTENSORS, sky_bert_embed_params(m), &kn, r, d);
	for (int l = 0; l < c->layers && !rc; l++) {
		char lp[48];
		snprintf(lp, sizeof lp, "%sencoder.layer.%d.", pre, l);
		rc = take_block(k, lp, tl, SKY_LAYER_NTENSORS, sky_bert_layer_params(m, l), &kn, r,
				d);
	}
	/* head: pooler (th[0..2)) under the prefix, the classifier at the top */
	float *head = sky_bert_head_params(m);
	if (!rc && block_absent(k, pre, th, 2)) {
		r->pooler_init = 1;
		SKY_INFO("hf: the checkpoint has no pooler (%spooler.dense.*): initialised from "
			 "seed %llu",
			 pre, seed + 0x10000);
	} else if (!rc) {
		rc = take_block(k, pre, th, 2, head, &kn, r, d);
	}
	if (!rc && block_absent(k, "", th + 2, 2)) {
		r->classifier_init = 1;
		SKY_INFO("hf: the checkpoint has no classifier (classifier.*): initialised from seed "
			 "%llu for %d labels",
			 seed + 0x10000, c->classes);
	} else if (!rc) {
		rc = take_block(k, "", th + 2, 2, head, &kn, r, d);
	}
	if (rc)
		goto exit;
	/* every other tensor: MLM/NSP heads are skipped, a stray one refused */
	qsort(kn.sorted, (size_t)kn.n, sizeof *kn.sorted, cmp_name);
	for (int s = 0; s < k->nshards && !rc; s++) {
		for (int t = 0; t < k->shard[s].ntensors && !rc; t++) {
			const char *name = k->shard[s].tensors[t].name;
			if (bsearch(&name, kn.sorted, (size_t)kn.n, sizeof *kn.sorted, cmp_name))
				continue;
			if (strncmp(name, "cls.", 4) == 0) {
				r->ignored_cls++;
				continue;
			}
			/* a buffer older checkpoints save, not a parameter */
			if (ends_with(name, "embeddings.position_ids"))
				continue;
			rc = sky_diag_set(d, SKY_EFORMAT,
					  "tensor %.100s is not part of a BERT with this config (%d "
					  "layers, names %s)",
					  name, c->layers, r->prefixed ? "with \"bert.\"" : "without "
											  "a prefix");
		}
	}
	if (!rc && r->ignored_cls)
		SKY_INFO("hf: ignored %d cls.* tensors (the MLM/NSP pre-training heads)",
			 r->ignored_cls);
exit:
	free(kn.buf);
	free(kn.sorted);
	return rc;
}

int sky_hf_load_dir(sky_bert *m, const char *dir, unsigned long long seed, sky_hf_report *r,
		    sky_diag *d)
{
	sky_hf_ckpt k;
	int rc = sky_hf_ckpt_open(&k, dir, d);
	if (!rc)
		rc = sky_hf_load(m, &k, seed, r, d);
	sky_hf_ckpt_close(&k);
	return rc;
}

/* ---- writing a directory ------------------------------------------------------------------ */

static char *config_json(const sky_model_cfg *c, const sky_hf_config *hc)
{
	cJSON *j = cJSON_CreateObject(), *arch = cJSON_CreateArray();
	cJSON *i2l = cJSON_CreateObject(), *l2i = cJSON_CreateObject();
	char *s = NULL;
	if (!j || !arch || !i2l || !l2i) {
		cJSON_Delete(j), cJSON_Delete(arch), cJSON_Delete(i2l), cJSON_Delete(l2i);
		return NULL;
	}
	cJSON_AddItemToArray(arch, cJSON_CreateString("BertForSequenceClassification"));
	cJSON_AddItemToObject(j, "architectures", arch);
	cJSON_AddStringToObject(j, "model_type", "bert");
	cJSON_AddNumberToObject(j, "hidden_size", c->hidden);
	cJSON_AddNumberToObject(j, "num_attention_heads", c->heads);
	cJSON_AddNumberToObject(j, "intermediate_size", c->ffn);
	cJSON_AddNumberToObject(j, "num_hidden_layers", c->layers);
	cJSON_AddNumberToObject(j, "vocab_size", c->vocab);
	cJSON_AddNumberToObject(j, "max_position_embeddings", c->max_pos);
	cJSON_AddNumberToObject(j, "type_vocab_size", c->type_vocab);
	cJSON_AddNumberToObject(j, "layer_norm_eps", hc->ln_eps);
	cJSON_AddStringToObject(j, "hidden_act", hc->act_name);
	cJSON_AddNumberToObject(j, "hidden_dropout_prob", hc->hidden_dropout);
	cJSON_AddNumberToObject(j, "attention_probs_dropout_prob", hc->attn_dropout);
	cJSON_AddNumberToObject(j, "initializer_range", 0.02);
	cJSON_AddNumberToObject(j, "pad_token_id", 0);
	cJSON_AddStringToObject(j, "position_embedding_type", "absolute");
	cJSON_AddStringToObject(j, "torch_dtype", "float32");
	for (int i = 0; i < c->classes; i++) {
		char key[16];
		snprintf(key, sizeof key, "%d", i);
		cJSON_AddStringToObject(i2l, key, hc->label[i]);
		cJSON_AddNumberToObject(l2i, hc->label[i], i);
	}
	cJSON_AddItemToObject(j, "id2label", i2l);
	cJSON_AddItemToObject(j, "label2id", l2i);
	s = cJSON_Print(j);
	cJSON_Delete(j);
	return s;
}

int sky_hf_config_save(const sky_model_cfg *c, const sky_hf_config *hc, const char *dir,
		       sky_diag *d)
{
	char path[4096];
	char *s = config_json(c, hc);
	if (!s)
		return sky_diag_set(d, SKY_ENOMEM, "config.json: no memory");
	if ((size_t)snprintf(path, sizeof path, "%s/config.json", dir) >= sizeof path) {
		cJSON_free(s);
		return sky_diag_set(d, SKY_ERANGE, "%.100s: path too long", dir);
	}
	int rc = sky_file_write(path, s, strlen(s), 0644);
	cJSON_free(s);
	return rc ? sky_diag_set(d, rc, "%.200s: cannot write it", path) : 0;
}

int sky_hf_save_dir(const sky_bert *m, const sky_hf_config *hc, const char *dir, sky_diag *d)
{
	sky_hf_config own;
	const sky_model_cfg *c = &m->cfg;
	if (!hc || hc->num_labels != c->classes) {
		sky_hf_config_from_cfg(c, &own);
		if (hc) { /* keep what the config said beyond the labels */
			own.ln_eps = hc->ln_eps;
			memcpy(own.act_name, hc->act_name, sizeof own.act_name);
			own.hidden_dropout = hc->hidden_dropout;
			own.attn_dropout = hc->attn_dropout;
		}
		hc = &own;
	}
	if (c->classes > SKY_HF_MAX_LABELS)
		return sky_diag_set(d, SKY_ERANGE, "%d labels: at most %d in config.json", c->classes,
				    SKY_HF_MAX_LABELS);
	char path[4096];
	if ((size_t)snprintf(path, sizeof path, "%s/model.safetensors", dir) >= sizeof path)
		return sky_diag_set(d, SKY_ERANGE, "%.100s: path too long", dir);
	if (sky_file_mkdirs(dir, 0755) != 0)
		return sky_diag_set(d, SKY_EIO, "%.200s: cannot create the directory", dir);
	int rc = sky_bert_save(m, path, d);
	if (rc)
		return rc;
	return sky_hf_config_save(c, hc, dir, d);
}
