/* sky eval --model-dir D --data F.skyds: a Hugging Face BERT classifier
 * (fp32) on a prepared data set (sky_dataset.h): loss, accuracy,
 * macro-F1, per-class precision and recall, and the confusion matrix
 * (sky_clsmetrics.h). Every row counts once: the last micro-batch is
 * filled with copies of the last row, whose predictions are not counted. */
#include "eval_data.h"

#include "bench_util.h"
#include "sky_arena.h"
#include "sky_bert.h"
#include "sky_clock.h"
#include "sky_clsmetrics.h"
#include "sky_model.h"
#include "sky_dataset.h"
#include "sky_err.h"
#include "sky_hfmodel.h"
#include "sky_json.h"
#include "sky_tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int generic_labels(const sky_hf_config *hc)
{
	for (int i = 0; i < hc->num_labels; i++) {
		char want[24];
		snprintf(want, sizeof want, "LABEL_%d", i);
		if (strcmp(hc->label[i], want) != 0)
			return 0;
	}
	return 1;
}

int sky_data_fit(const char *cmd, const char *dir, const char *data, const sky_hf_config *hc,
		 const sky_dataset *ds)
{
	const sky_ds_meta *dm = &ds->meta;
	const sky_model_cfg *c = &hc->cfg;
	if (dm->nlabels > c->classes) {
		fprintf(stderr, "sky %s: %s has %d labels but the model's head has %d\n", cmd, data,
			dm->nlabels, c->classes);
		return 2;
	}
	if (hc->has_labels && !generic_labels(hc))
		for (int i = 0; i < dm->nlabels; i++)
			if (strcmp(dm->label[i], hc->label[i]) != 0) {
				fprintf(stderr,
					"sky %s: label %d is '%s' in %s but '%s' in the model's "
					"config.json (prepare the set with the model's labels)\n",
					cmd, i, dm->label[i], data, hc->label[i]);
				return 2;
			}
	if (dm->seq > c->max_pos) {
		fprintf(stderr, "sky %s: %s has rows of %d tokens, over the model's "
				"max_position_embeddings %d\n", cmd, data, dm->seq, c->max_pos);
		return 2;
	}
	sky_tokenizer t;
	sky_tok_init(&t);
	sky_diag d;
	sky_diag_clear(&d);
	if (sky_tok_load_dir(&t, dir, &d) == 0) {
		uint32_t h = t.hash;
		sky_tok_free(&t);
		if (h != dm->tokenizer_hash) {
			fprintf(stderr,
				"sky %s: %s was tokenized by another tokenizer (hash %08x; %s's is "
				"%08x)\n",
				cmd, data, dm->tokenizer_hash, dir, h);
			return 2;
		}
	} else {
		fprintf(stderr, "sky %s: %s has no tokenizer: the set's (hash %08x) is not checked\n",
			cmd, dir, dm->tokenizer_hash);
	}
	size_t n = (size_t)dm->rows * (size_t)dm->seq;
	for (size_t i = 0; i < n; i++)
		if (ds->input_ids[i] >= c->vocab || ds->token_type_ids[i] >= c->type_vocab) {
			fprintf(stderr, "sky %s: %s row %zu: token %d type %d outside the model's "
					"vocab_size %d / type_vocab_size %d\n",
				cmd, data, i / (size_t)dm->seq, ds->input_ids[i], ds->token_type_ids[i],
				c->vocab, c->type_vocab);
			return 2;
		}
	return 0;
}

static const char *name_of(const sky_dataset *ds, const sky_hf_config *hc, int k)
{
	return k < ds->meta.nlabels ? ds->meta.label[k] : hc->label[k];
}

void sky_data_metrics_json(cJSON *j, const sky_dataset *ds, const sky_hf_config *hc,
			   const sky_clsm *m)
{
	cJSON_AddNumberToObject(j, "rows", (double)m->total);
	cJSON_AddNumberToObject(j, "loss", sky_clsm_loss(m));
	cJSON_AddNumberToObject(j, "accuracy", sky_clsm_accuracy(m));
	cJSON_AddNumberToObject(j, "macro_f1", sky_clsm_macro_f1(m));
	cJSON_AddNumberToObject(j, "correct", (double)m->correct);
	cJSON *pc = cJSON_AddArrayToObject(j, "per_class");
	cJSON *cm = cJSON_AddArrayToObject(j, "confusion");
	cJSON *names = cJSON_AddArrayToObject(j, "labels");
	for (int k = 0; k < m->n; k++) {
		sky_clsm_class c;
		sky_clsm_class_get(m, k, &c);
		cJSON *o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "id", k);
		cJSON_AddStringToObject(o, "name", name_of(ds, hc, k));
		cJSON_AddNumberToObject(o, "precision", c.precision);
		cJSON_AddNumberToObject(o, "recall", c.recall);
		cJSON_AddNumberToObject(o, "f1", c.f1);
		cJSON_AddNumberToObject(o, "support", (double)c.support);
		cJSON_AddNumberToObject(o, "predicted", (double)c.predicted);
		cJSON_AddItemToArray(pc, o);
		cJSON *row = cJSON_CreateArray();
		for (int p = 0; p < m->n; p++)
			cJSON_AddItemToArray(row, cJSON_CreateNumber((double)m->cm[k * m->n + p]));
		cJSON_AddItemToArray(cm, row);
		cJSON_AddItemToArray(names, cJSON_CreateString(name_of(ds, hc, k)));
	}
}

static int print_json(const char *dir, const char *data, const sky_dataset *ds,
		      const sky_hf_config *hc, const sky_clsm *m, int batch, double ms)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return SKY_ENOMEM;
	cJSON_AddStringToObject(j, "model_dir", dir);
	cJSON_AddStringToObject(j, "data", data);
	cJSON_AddStringToObject(j, "precision", "fp32");
	cJSON_AddNumberToObject(j, "seq", ds->meta.seq);
	cJSON_AddNumberToObject(j, "batch", batch);
	sky_data_metrics_json(j, ds, hc, m);
	cJSON_AddNumberToObject(j, "forward_ms_per_batch", ms);
	int rc = sky_bench_print(j);
	cJSON_Delete(j);
	return rc;
}

void sky_data_metrics_text(const sky_dataset *ds, const sky_hf_config *hc, const sky_clsm *m)
{
	printf("  %-20s %9s %9s %9s %9s\n", "class", "precision", "recall", "f1", "support");
	for (int k = 0; k < m->n; k++) {
		sky_clsm_class c;
		sky_clsm_class_get(m, k, &c);
		printf("  %-20.20s %9.4f %9.4f %9.4f %9lld\n", name_of(ds, hc, k), c.precision,
		       c.recall, c.f1, (long long)c.support);
	}
	printf("confusion (rows: true class, columns: predicted)\n  %-20s", "");
	for (int p = 0; p < m->n; p++)
		printf(" %8d", p);
	printf("\n");
	for (int k = 0; k < m->n; k++) {
		printf("  %3d %-16.16s", k, name_of(ds, hc, k));
		for (int p = 0; p < m->n; p++)
			printf(" %8lld", (long long)m->cm[k * m->n + p]);
		printf("\n");
	}
}

static void print_text(const char *dir, const char *data, const sky_dataset *ds,
		       const sky_hf_config *hc, const sky_clsm *m, double ms)
{
	printf("%s on %s: %lld rows, fp32: loss %.4f, accuracy %.4f, macro-F1 %.4f "
	       "(%.2f ms per micro-batch)\n",
	       dir, data, (long long)m->total, sky_clsm_loss(m), sky_clsm_accuracy(m),
	       sky_clsm_macro_f1(m), ms);
	sky_data_metrics_text(ds, hc, m);
}

int sky_data_eval(sky_bert *m, const sky_dataset *ds, int32_t *ids, int32_t *types, int32_t *attn,
		  sky_clsm *met, double *ms)
{
	const size_t S = (size_t)m->cfg.seq, B = (size_t)m->cfg.batch;
	double t_fwd = 0;
	long nb = 0;
	for (int64_t r0 = 0; r0 < ds->meta.rows; r0 += (int64_t)B, nb++) {
		int used = 0;
		for (size_t k = 0; k < B; k++) {
			int64_t r = r0 + (int64_t)k;
			if (r < ds->meta.rows)
				used++;
			else
				r = ds->meta.rows - 1; /* filler, not counted */
			memcpy(ids + k * S, ds->input_ids + (size_t)r * S, S * 4);
			memcpy(types + k * S, ds->token_type_ids + (size_t)r * S, S * 4);
			memcpy(attn + k * S, ds->attention_mask + (size_t)r * S, S * 4);
		}
		sky_bert_batch b = {ids, types, attn, NULL};
		double t0 = sky_clock_s();
		int rc = sky_bert_predict(m, &b, NULL, NULL);
		if (rc)
			return rc;
		t_fwd += sky_clock_s() - t0;
		for (int k = 0; k < used; k++)
			sky_clsm_add(met, ds->labels[r0 + k],
				     m->logits + (size_t)k * (size_t)m->cfg.classes);
	}
	if (ms)
		*ms = t_fwd / (double)(nb ? nb : 1) * 1e3;
	return 0;
}

int sky_eval_data(const char *dir, const char *data, unsigned long long seed, long batch, int json)
{
	static sky_hf_config hc; /* large (label names): not on the stack */
	static sky_dataset ds;
	static sky_bert m;
	static int64_t cm[SKY_HF_MAX_LABELS * SKY_HF_MAX_LABELS];
	sky_diag d;
	sky_diag_clear(&d);
	int rc, exitc = 1;
	void *buf = NULL;
	int32_t *ids = NULL, *types = NULL, *attn = NULL;
	if ((rc = sky_hf_config_read(dir, &hc, &d)) != 0) {
		fprintf(stderr, "sky eval: %s: %s\n", dir, d.msg);
		return 2;
	}
	if ((rc = sky_ds_open(&ds, data, &d)) != 0) {
		fprintf(stderr, "sky eval: %s: %s: %s\n", data, sky_strerror(rc), d.msg);
		return 2;
	}
	if ((exitc = sky_data_fit("eval", dir, data, &hc, &ds)) != 0)
		goto exit;
	exitc = 1;
	sky_model_cfg c = hc.cfg;
	c.seq = ds.meta.seq;
	c.batch = (int)(batch > 0 ? batch : SKY_HF_DEFAULT_BATCH);
	if (sky_model_validate(&c) != 0) {
		fprintf(stderr, "sky eval: batch %d x seq %d does not fit %s\n", c.batch, c.seq, dir);
		exitc = 2;
		goto exit;
	}
	sky_bert_opts o;
	memset(&o, 0, sizeof o);
	sky_optim_default(&o.optim, SKY_OPTIM_SGD); /* carved, never stepped */
	o.optim.lr = 1.0f;
	o.micro = 1;
	size_t bytes = 0;
	sky_arena ar;
	if ((rc = sky_bert_arena_bytes(&c, &o, &bytes)) != 0 || !(buf = malloc(bytes))) {
		fprintf(stderr, "sky eval: %s: cannot carve the model (%zu bytes)\n", dir, bytes);
		goto exit;
	}
	sky_arena_init(&ar, buf, bytes);
	if ((rc = sky_bert_carve(&m, &c, &o, &ar)) != 0 || (rc = sky_arena_seal(&ar)) != 0) {
		fprintf(stderr, "sky eval: carving the model failed: %s\n", sky_strerror(rc));
		goto exit;
	}
	sky_hf_report rep;
	if ((rc = sky_hf_load_dir(&m, dir, seed, &rep, &d))) {
		fprintf(stderr, "sky eval: %s: %s\n", dir, d.msg);
		exitc = 2;
		goto exit;
	}
	if (rep.classifier_init)
		fprintf(stderr, "sky eval: %s has no classifier: its logits come from a seeded "
				"head, not a trained one\n", dir);
	size_t S = (size_t)c.seq, B = (size_t)c.batch;
	ids = malloc(B * S * 4), types = malloc(B * S * 4), attn = malloc(B * S * 4);
	if (!ids || !types || !attn) {
		fprintf(stderr, "sky eval: out of memory\n");
		goto exit;
	}
	sky_clsm met;
	sky_clsm_init(&met, c.classes, cm);
	double ms = 0;
	if ((rc = sky_data_eval(&m, &ds, ids, types, attn, &met, &ms)) != 0) {
		fprintf(stderr, "sky eval: %s: %s\n", data, sky_strerror(rc));
		goto exit;
	}
	if (json) {
		if (print_json(dir, data, &ds, &hc, &met, c.batch, ms) != 0)
			goto exit;
	} else {
		print_text(dir, data, &ds, &hc, &met, ms);
	}
	exitc = 0;
exit:
	sky_ds_close(&ds);
	free(buf);
	free(ids), free(types), free(attn);
	return exitc;
}
