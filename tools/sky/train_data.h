/* sky train --model-dir D --data F.skyds (train_data.c). */
#ifndef SKY_TRAIN_DATA_H
#define SKY_TRAIN_DATA_H

typedef struct sky_train_data_args {
	const char *model_dir, *data, *eval_data, *save_dir, *optim;
	long steps, epochs;  /* steps 0: epochs (0: 3) whole epochs */
	long seed, batch, micro, warmup; /* batch 0: SKY_HF_DEFAULT_BATCH; warmup -1: a tenth */
	double lr, clip;     /* lr <= 0: 2e-5 (adamw), 0.05 (sgd) */
	int json, quiet, init_weights;
} sky_train_data_args;

/* Fine-tunes the Hugging Face directory a->model_dir on the prepared set
 * a->data, reporting each epoch (dev metrics with a->eval_data). Returns
 * the exit code: 0, 1 (a failure while running), 2 (refused: the model,
 * the sets, or how they fit, the reason printed). */
int sky_train_data(const sky_train_data_args *a);

/* Copies the tokenizer files the model directory from has (vocab.txt,
 * tokenizer_config.json, tokenizer.json, special_tokens_map.json) into the
 * directory to. Returns 0 or the file error. */
int sky_train_copy_tokenizer(const char *from, const char *to);

#endif
