/* sky train --model-dir D --data train.skyds: fine-tune a Hugging Face
 * BERT classifier on a prepared data set (sky_dataset.h), one board.
 *
 * Epochs: every epoch visits the set in its own order, a permutation drawn
 * from (seed, epoch), in steps of batch x micro rows; the rows left over
 * after the last whole step of an epoch wait for the next one's order (as
 * a DataLoader with drop_last does). Dropout is the config's, masks keyed
 * by (seed, step, micro-batch), so the same command gives the same bits.
 * After each epoch the dev set (--eval-data), if given, is evaluated with
 * sky eval --data's metrics. --save-dir writes the Hugging Face directory
 * with the set's label names as id2label and the model's tokenizer files. */
#include "train_data.h"

#include "eval_data.h"
#include "bench_util.h"
#include "sky_arena.h"
#include "sky_bert.h"
#include "sky_clock.h"
#include "sky_clsmetrics.h"
#include "sky_dataset.h"
#include "sky_err.h"
#include "sky_file.h"
#include "sky_hfmodel.h"
#include "sky_model.h"
#include "sky_trainorder.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MICRO 64

/* Copies the tokenizer files the model directory has into out (a
 * directory every Sky command, and from_pretrained, takes back). */
int sky_train_copy_tokenizer(const char *from, const char *to)
{
	static const char *const files[] = {"vocab.txt", "tokenizer_config.json",
					    "tokenizer.json", "special_tokens_map.json"};
	char src[4096], dst[4096];
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		snprintf(src, sizeof src, "%s/%s", from, files[i]);
		snprintf(dst, sizeof dst, "%s/%s", to, files[i]);
		if (!sky_file_exists(src))
			continue;
		sky_file_map m;
		int rc = sky_file_map_open(&m, src);
		if (rc)
			return rc;
		rc = sky_file_write(dst, m.data ? (const void *)m.data : "", m.size, 0644);
		sky_file_map_close(&m);
		if (rc)
			return rc;
	}
	return 0;
}

int sky_train_data(const sky_train_data_args *a)
{
	static sky_hf_config hc; /* large (label names): not on the stack */
	static sky_dataset ds, dev;
	static sky_bert m;
	static int64_t cm[SKY_HF_MAX_LABELS * SKY_HF_MAX_LABELS];
	sky_diag d;
	sky_diag_clear(&d);
	int rc, exitc = 2;
	void *buf = NULL;
	uint32_t *perm = NULL;
	int32_t *ids = NULL, *types = NULL, *attn = NULL, *labels = NULL;
	cJSON *j = NULL, *epochs_j = NULL;
	sky_ds_init(&ds);
	sky_ds_init(&dev);

	if ((rc = sky_hf_config_read(a->model_dir, &hc, &d)) != 0) {
		fprintf(stderr, "sky train: %s: %s\n", a->model_dir, d.msg);
		return 2;
	}
	if ((rc = sky_ds_open(&ds, a->data, &d)) != 0) {
		fprintf(stderr, "sky train: %s: %s: %s\n", a->data, sky_strerror(rc), d.msg);
		goto exit;
	}
	if (sky_data_fit("train", a->model_dir, a->data, &hc, &ds) != 0)
		goto exit;
	if (a->eval_data) {
		sky_diag_clear(&d);
		if ((rc = sky_ds_open(&dev, a->eval_data, &d)) != 0) {
			fprintf(stderr, "sky train: %s: %s: %s\n", a->eval_data, sky_strerror(rc),
				d.msg);
			goto exit;
		}
		if (sky_data_fit("train", a->model_dir, a->eval_data, &hc, &dev) != 0)
			goto exit;
		if (dev.meta.seq != ds.meta.seq) {
			fprintf(stderr, "sky train: %s has rows of %d tokens, %s of %d: prepare both "
					"with the same --seq\n",
				a->data, ds.meta.seq, a->eval_data, dev.meta.seq);
			goto exit;
		}
		if (dev.meta.nlabels != ds.meta.nlabels ||
		    memcmp(dev.meta.label, ds.meta.label, sizeof ds.meta.label) != 0) {
			fprintf(stderr, "sky train: %s and %s name their labels differently "
					"(prepare the dev set with --labels-from %s)\n",
				a->data, a->eval_data, a->data);
			goto exit;
		}
	}
	sky_model_cfg c = hc.cfg;
	c.seq = ds.meta.seq;
	c.batch = (int)(a->batch > 0 ? a->batch : SKY_HF_DEFAULT_BATCH);
	const int micro = (int)(a->micro > 0 ? a->micro : 1);
	if (micro > MAX_MICRO) {
		fprintf(stderr, "sky train: --micro is at most %d\n", MAX_MICRO);
		goto exit;
	}
	if (sky_model_validate(&c) != 0) {
		fprintf(stderr, "sky train: batch %d x seq %d does not fit %s\n", c.batch, c.seq,
			a->model_dir);
		goto exit;
	}
	const int64_t per_step = (int64_t)c.batch * micro;
	const int64_t spe = ds.meta.rows / per_step; /* steps per epoch */
	if (spe < 1) {
		fprintf(stderr, "sky train: %s has %lld rows, fewer than one step's %d x %d; lower "
				"--batch or --micro\n",
			a->data, (long long)ds.meta.rows, c.batch, micro);
		goto exit;
	}
	if (ds.meta.rows > 0xffffffffll) {
		fprintf(stderr, "sky train: %s has more than 2^32 rows\n", a->data);
		goto exit;
	}
	const long epochs = a->steps > 0 ? (long)((a->steps + spe - 1) / spe)
					 : (a->epochs > 0 ? a->epochs : 3);
	const long steps = a->steps > 0 ? a->steps : epochs * (long)spe;

	sky_bert_opts o;
	memset(&o, 0, sizeof o);
	sky_optim_kind kind;
	if (sky_optim_parse(a->optim, &kind) != 0) {
		fprintf(stderr, "sky train: --optim expects adamw or sgd, got '%s'\n", a->optim);
		goto exit;
	}
	sky_optim_default(&o.optim, kind);
	/* BERT fine-tuning's usual 2e-5 for AdamW */
	o.optim.lr = a->lr > 0 ? (float)a->lr : (kind == SKY_OPTIM_SGD ? 0.05f : 2e-5f);
	o.micro = micro;
	o.clip_norm = (float)a->clip;
	o.drop_seed = (uint64_t)a->seed;

	exitc = 1;
	size_t bytes = 0;
	sky_arena ar;
	if ((rc = sky_bert_arena_bytes(&c, &o, &bytes)) != 0 || !(buf = malloc(bytes))) {
		fprintf(stderr, "sky train: %s: cannot allocate the model (%zu bytes)\n",
			a->model_dir, bytes);
		goto exit;
	}
	sky_arena_init(&ar, buf, bytes);
	if ((rc = sky_bert_carve(&m, &c, &o, &ar)) != 0 || (rc = sky_arena_seal(&ar)) != 0) {
		fprintf(stderr, "sky train: carving the model failed: %s\n", sky_strerror(rc));
		goto exit;
	}
	if (a->init_weights) {
		sky_bert_init(&m, (unsigned long long)a->seed);
	} else {
		sky_hf_report rep;
		if ((rc = sky_hf_load_dir(&m, a->model_dir, (unsigned long long)a->seed, &rep, &d))) {
			fprintf(stderr, "sky train: %s: %s\n", a->model_dir, d.msg);
			exitc = 2;
			goto exit;
		}
	}
	const size_t S = (size_t)c.seq, B = (size_t)c.batch, T = S * B;
	perm = malloc((size_t)ds.meta.rows * sizeof *perm);
	ids = malloc(T * micro * 4), types = malloc(T * micro * 4), attn = malloc(T * micro * 4);
	labels = malloc(B * micro * 4);
	if (!perm || !ids || !types || !attn || !labels) {
		fprintf(stderr, "sky train: out of memory\n");
		goto exit;
	}
	FILE *prog = a->json ? stderr : stdout;
	if (!a->quiet)
		fprintf(prog,
			"sky train: %s on %s (%lld rows, %d labels, seq %d): %ld epoch(s) of %lld "
			"steps, batch %d x %d micro-batch(es), %s lr %g, dropout %g/%g, from the %s\n",
			a->model_dir, a->data, (long long)ds.meta.rows, ds.meta.nlabels, c.seq, epochs,
			(long long)spe, c.batch, micro, sky_optim_name(kind), (double)o.optim.lr,
			(double)c.hidden_drop, (double)c.attn_drop,
			a->init_weights ? "seed" : "checkpoint");
	if (a->json) {
		j = cJSON_CreateObject();
		epochs_j = j ? cJSON_AddArrayToObject(j, "epochs") : NULL;
		if (!epochs_j)
			goto exit;
	}
	sky_bert_batch views[MAX_MICRO];
	for (int i = 0; i < micro; i++)
		views[i] = (sky_bert_batch){ids + T * i, types + T * i, attn + T * i, labels + B * i};
	const float lr = o.optim.lr;
	const long warmup = a->warmup >= 0 ? a->warmup : steps / 10;
	long s = 0;
	double t_start = sky_clock_s(), last_loss = 0;
	sky_clsm met;
	sky_trainorder ord;
	if (sky_trainorder_init(&ord, ds.meta.rows, (uint64_t)a->seed, c.batch, micro, perm)) {
		fprintf(stderr, "sky train: %s: cannot order its rows\n", a->data);
		goto exit;
	}
	for (long e = 0; e < epochs && s < steps; e++) {
		double lsum = 0;
		long n = 0;
		for (int64_t k = 0; k < spe && s < steps; k++, s++) {
			for (int i = 0; i < micro; i++)
				sky_trainorder_take(&ds, sky_trainorder_rows(&ord, s, i), c.batch,
						    ids + T * i, types + T * i, attn + T * i,
						    labels + B * i);
			m.opts.optim.lr = sky_optim_lr_at(lr, s, steps, warmup);
			float loss = 0;
			if ((rc = sky_bert_train_step(&m, views, &loss)) != 0) {
				fprintf(stderr, "sky train: step %ld failed: %s\n", s + 1,
					sky_strerror(rc));
				goto exit;
			}
			lsum += loss;
			n++;
			last_loss = loss;
			if (!a->quiet && (s + 1) % 10 == 0)
				fprintf(prog, "epoch %ld step %ld/%ld loss %.4f\n", e + 1, s + 1, steps,
					(double)loss);
		}
		cJSON *ej = NULL;
		if (epochs_j) {
			ej = cJSON_CreateObject();
			cJSON_AddItemToArray(epochs_j, ej);
			cJSON_AddNumberToObject(ej, "epoch", (double)(e + 1));
			cJSON_AddNumberToObject(ej, "steps", (double)s);
			cJSON_AddNumberToObject(ej, "train_loss", lsum / (double)(n ? n : 1));
		}
		if (!a->quiet)
			fprintf(prog, "epoch %ld: %ld steps, train loss %.4f", e + 1, n,
				lsum / (double)(n ? n : 1));
		if (a->eval_data) {
			sky_clsm_init(&met, c.classes, cm);
			if ((rc = sky_data_eval(&m, &dev, ids, types, attn, &met, NULL)) != 0) {
				fprintf(stderr, "sky train: evaluating %s failed: %s\n", a->eval_data,
					sky_strerror(rc));
				goto exit;
			}
			if (ej) {
				cJSON *dj = cJSON_AddObjectToObject(ej, "dev");
				if (dj)
					sky_data_metrics_json(dj, &dev, &hc, &met);
			}
			if (!a->quiet)
				fprintf(prog, "; dev loss %.4f, accuracy %.4f, macro-F1 %.4f",
					sky_clsm_loss(&met), sky_clsm_accuracy(&met),
					sky_clsm_macro_f1(&met));
		}
		if (!a->quiet)
			fprintf(prog, "\n");
	}
	double train_s = sky_clock_s() - t_start;
	if (a->save_dir) {
		/* the set's label names become the model's id2label */
		if (ds.meta.nlabels == hc.num_labels) {
			for (int k = 0; k < ds.meta.nlabels; k++)
				snprintf(hc.label[k], sizeof hc.label[k], "%s", ds.meta.label[k]);
			hc.has_labels = 1;
		}
		sky_diag_clear(&d);
		if ((rc = sky_hf_save_dir(&m, &hc, a->save_dir, &d)) != 0 ||
		    (rc = sky_train_copy_tokenizer(a->model_dir, a->save_dir)) != 0) {
			fprintf(stderr, "sky train: cannot save %s: %s%s%s\n", a->save_dir,
				sky_strerror(rc), d.msg[0] ? ": " : "", d.msg);
			goto exit;
		}
	}
	if (j) {
		cJSON_AddStringToObject(j, "model_dir", a->model_dir);
		cJSON_AddStringToObject(j, "data", a->data);
		if (a->eval_data)
			cJSON_AddStringToObject(j, "eval_data", a->eval_data);
		cJSON_AddNumberToObject(j, "rows", (double)ds.meta.rows);
		cJSON_AddNumberToObject(j, "seq", c.seq);
		cJSON_AddNumberToObject(j, "batch", c.batch);
		cJSON_AddNumberToObject(j, "micro", micro);
		cJSON_AddNumberToObject(j, "steps", (double)steps);
		cJSON_AddNumberToObject(j, "steps_per_epoch", (double)spe);
		cJSON_AddStringToObject(j, "optim", sky_optim_name(kind));
		cJSON_AddNumberToObject(j, "lr", a->lr > 0 ? a->lr
							  : (kind == SKY_OPTIM_SGD ? 0.05 : 2e-5));
		cJSON_AddNumberToObject(j, "seed", (double)a->seed);
		cJSON_AddNumberToObject(j, "hidden_dropout", (double)c.hidden_drop);
		cJSON_AddNumberToObject(j, "attention_dropout", (double)c.attn_drop);
		cJSON_AddStringToObject(j, "start", a->init_weights ? "seed" : "checkpoint");
		cJSON_AddNumberToObject(j, "last_loss", last_loss);
		cJSON_AddNumberToObject(j, "train_s", train_s);
		cJSON_AddNumberToObject(j, "sequences_per_s",
					(double)steps * (double)per_step / (train_s > 0 ? train_s : 1));
		if (a->save_dir)
			cJSON_AddStringToObject(j, "saved_dir", a->save_dir);
		if (sky_bench_print(j) != 0)
			goto exit;
	} else {
		if (a->eval_data) {
			printf("dev set %s after epoch %ld:\n", a->eval_data, epochs);
			sky_data_metrics_text(&dev, &hc, &met);
		}
		printf("%ld steps in %.2f s (%.1f sequences/s)\n", steps, train_s,
		       (double)steps * (double)per_step / (train_s > 0 ? train_s : 1));
		if (a->save_dir)
			printf("saved %s\n", a->save_dir);
	}
	exitc = 0;
exit:
	cJSON_Delete(j);
	sky_ds_close(&ds);
	sky_ds_close(&dev);
	free(buf);
	free(perm), free(ids), free(types), free(attn), free(labels);
	return exitc;
}
