/* A model as a Hugging Face directory: what a user downloads for
 * bert-base-uncased or a fine-tuned BERT, read (and written) by the one
 * loader every command goes through.
 *
 *   DIR/config.json                    BertConfig (shapes, eps, activation,
 *                                      dropout, labels); shapes come from here
 *   DIR/model.safetensors              the weights, or
 *   DIR/model.safetensors.index.json   a sharded checkpoint: "weight_map"
 *                                      names each tensor's shard file in DIR
 *
 * Weights are F32, F16 or BF16 (converted to fp32 exactly on load), named as
 * BertForSequenceClassification ("bert." before everything but
 * "classifier.*") or BertModel (no prefix, no classifier). MLM/NSP heads
 * ("cls.*") are ignored with one log line; a missing pooler or classifier is
 * initialised from the seed and logged. Anything else that does not belong
 * to a BERT of the config's shapes is refused naming the tensor.
 *
 * Memory: config and index parsing use the heap (cJSON) at load time; the
 * tensors are converted straight from the mapped shards into the caller's
 * (sealed) sky_bert parameters. */
#ifndef SKY_HFMODEL_H
#define SKY_HFMODEL_H

#include "sky_bert.h"
#include "sky_err.h"
#include "sky_model.h"
#include "sky_safetensors.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_HF_MAX_CONFIG (1u << 20) /* bytes of config.json or the index: real ones are < 100 kB */
#define SKY_HF_MAX_LABELS 256        /* classes of the head we take */
#define SKY_HF_LABEL_CAP 64          /* bytes of a label name, NUL included */
#define SKY_HF_MAX_SHARDS 64         /* shard files of one checkpoint */
#define SKY_HF_SHARD_CAP 128         /* bytes of a shard's file name, NUL included */
/* Largest sizes a config may give (each far above any BERT; they keep the
 * products that size tensors well inside 64 bits before validation). */
#define SKY_HF_MAX_HIDDEN 65536
#define SKY_HF_MAX_FFN (1 << 20)
#define SKY_HF_MAX_LAYERS 1000
#define SKY_HF_MAX_VOCAB (1 << 24)
#define SKY_HF_MAX_POS (1 << 20)
#define SKY_HF_MAX_TYPES 65536

/* Default micro-batch shape for a model read from a directory (commands
 * change them after): seq min(128, max_position_embeddings), batch 8. */
#define SKY_HF_DEFAULT_SEQ 128
#define SKY_HF_DEFAULT_BATCH 8

typedef struct sky_hf_config {
	sky_model_cfg cfg;        /* name "hf"; shapes, ln_eps, act, classes = num_labels */
	double ln_eps;            /* layer_norm_eps as the file wrote it (cfg.ln_eps is its float) */
	char act_name[24];        /* hidden_act as written: "gelu", "gelu_new", "gelu_pytorch_tanh" */
	double hidden_dropout;    /* hidden_dropout_prob, [0, 1) (default 0.1) */
	double attn_dropout;      /* attention_probs_dropout_prob, [0, 1) (default 0.1) */
	int num_labels;           /* == cfg.classes */
	int has_labels;           /* the file gave id2label */
	char label[SKY_HF_MAX_LABELS][SKY_HF_LABEL_CAP]; /* id2label; "LABEL_<i>" when absent */
} sky_hf_config;

/* Parses config.json text (len bytes, need not be NUL-terminated). Required:
 * hidden_size, num_attention_heads, intermediate_size, num_hidden_layers,
 * vocab_size, max_position_embeddings, type_vocab_size (whole numbers in
 * [1, SKY_HF_MAX_*], heads dividing hidden). Optional with BertConfig's
 * defaults: layer_norm_eps (1e-12, in (0, 1)), hidden_act ("gelu"; also
 * "gelu_new", "gelu_pytorch_tanh"), the two dropouts (0.1, in [0, 1)),
 * num_labels / id2label / label2id (2 labels; all given must agree, label
 * names unique), model_type ("bert" if given), position_embedding_type
 * ("absolute" if given). Returns 0, or SKY_EFORMAT / SKY_ERANGE /
 * SKY_EUNSUPPORTED with d naming the field. */
int sky_hf_config_parse(const char *text, size_t len, sky_hf_config *out, sky_diag *d);
/* Reads DIR/config.json and parses it. Returns 0, SKY_ENOTFOUND, SKY_EIO or
 * the parse errors (d names the file and the field). */
int sky_hf_config_read(const char *dir, sky_hf_config *out, sky_diag *d);
/* Fills *out as a config that describes cfg (labels LABEL_<i>, act name
 * from cfg.act, dropouts 0.1): what a preset would say as a directory. */
void sky_hf_config_from_cfg(const sky_model_cfg *cfg, sky_hf_config *out);

/* A sharded checkpoint's index: the distinct shard files and, for each
 * tensor, which one holds it. */
typedef struct sky_hf_index {
	int nshards;
	char (*shard)[SKY_HF_SHARD_CAP]; /* file names in DIR, plain (no '/', not "." or "..") */
	int ntensors;
	const char **name;               /* tensor names */
	int *where;                      /* shard index of each */
	void *mem;                       /* one heap block holding it all */
} sky_hf_index;

/* Parses model.safetensors.index.json text: an object with "weight_map", an
 * object of tensor name -> shard file name (and optional "metadata").
 * Returns 0, SKY_EFORMAT / SKY_ERANGE (d says what) or SKY_ENOMEM. */
int sky_hf_index_parse(const char *text, size_t len, sky_hf_index *out, sky_diag *d);
/* Frees. NULL-safe; may be called twice. */
void sky_hf_index_free(sky_hf_index *ix);

/* The checkpoint's files, opened (mapped). */
typedef struct sky_hf_ckpt {
	int nshards;
	sky_st_file shard[SKY_HF_MAX_SHARDS];
	char file[SKY_HF_MAX_SHARDS][SKY_HF_SHARD_CAP];
} sky_hf_ckpt;

/* Opens DIR/model.safetensors, or else every shard the index names,
 * checking each index entry is in its shard and no tensor is in two.
 * Returns 0, SKY_ENOTFOUND (neither file), or the safetensors / index
 * errors (d names the file). */
int sky_hf_ckpt_open(sky_hf_ckpt *k, const char *dir, sky_diag *d);
/* Unmaps. NULL-safe; may be called twice (after a zeroing or an open). */
void sky_hf_ckpt_close(sky_hf_ckpt *k);
/* The tensor called name in any shard, or NULL. */
const sky_st_tensor *sky_hf_ckpt_find(const sky_hf_ckpt *k, const char *name);

/* What sky_hf_load found, for logs and tests. */
typedef struct sky_hf_report {
	int prefixed;        /* names had "bert." */
	int loaded;          /* tensors read */
	int ignored_cls;     /* "cls.*" tensors skipped */
	int pooler_init;     /* the pooler was missing: from the seed */
	int classifier_init; /* the classifier was missing: from the seed */
	int dtype_count[SKY_ST_NDTYPES];
} sky_hf_report;

/* Loads the checkpoint into m (carved for the config's shapes): first
 * sky_bert_init(m, seed), then every tensor over it. Every tensor of the
 * embeddings and layers must be there with the expected shape; dtype F32,
 * F16 or BF16. Returns 0, SKY_ENOTFOUND (a tensor missing: d names it and
 * the shape expected), SKY_EFORMAT (a wrong shape: d names the tensor and
 * both shapes; or a tensor that is not part of this BERT), or
 * SKY_EUNSUPPORTED (a dtype: d names the tensor and the dtype). r may be
 * NULL. On failure m's parameters are partly written. */
int sky_hf_load(sky_bert *m, const sky_hf_ckpt *k, unsigned long long seed, sky_hf_report *r,
		sky_diag *d);
/* sky_hf_ckpt_open + sky_hf_load + close. */
int sky_hf_load_dir(sky_bert *m, const char *dir, unsigned long long seed, sky_hf_report *r,
		    sky_diag *d);

/* Writes DIR/config.json for a model of c as hc describes it (id2label
 * from hc->label; DIR must exist): what sky_hf_save_dir writes beside the
 * weights. Returns 0, SKY_ENOMEM, SKY_ERANGE or the write's error. */
int sky_hf_config_save(const sky_model_cfg *c, const sky_hf_config *hc, const char *dir,
		       sky_diag *d);

/* Writes DIR (created if missing) as a Hugging Face directory of m:
 * config.json (hc's labels, eps and activation name, m's shapes; hc NULL:
 * sky_hf_config_from_cfg) and model.safetensors (F32,
 * BertForSequenceClassification names, sky_bert_save). Returns 0, SKY_EIO
 * or the sky_st_write errors. */
int sky_hf_save_dir(const sky_bert *m, const sky_hf_config *hc, const char *dir, sky_diag *d);

/* Exact conversions of IEEE binary16 and bfloat16 to binary32 (every value,
 * subnormals, infinities and NaN payloads included). */
float sky_f16_to_f32(uint16_t h);
float sky_bf16_to_f32(uint16_t h);
/* binary32 to binary16, rounding to nearest even (overflow to infinity, NaN
 * stays NaN): for writing test files. */
uint16_t sky_f32_to_f16(float f);

#endif
