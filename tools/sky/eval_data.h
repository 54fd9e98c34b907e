/* sky eval --model-dir D --data F.skyds (eval_data.c). */
#ifndef SKY_EVAL_DATA_H
#define SKY_EVAL_DATA_H

#include "sky_bert.h"
#include "sky_clsmetrics.h"
#include "sky_dataset.h"
#include "sky_hfmodel.h"

#include <cjson/cJSON.h>
#include <stdint.h>

/* Evaluates the Hugging Face directory dir on the prepared set data in
 * micro-batches of batch rows (0: the default 8), seed for any head the
 * checkpoint lacks; prints the metrics (one JSON object with json).
 * Returns the exit code: 0, 1 (a failure while running), 2 (the model or
 * the set is refused, or they do not fit each other). */
int sky_eval_data(const char *dir, const char *data, unsigned long long seed, long batch, int json);

/* Shared with sky train --data (train_data.c). */
/* Does the set fit the model dir describes (labels and their names, length,
 * tokenizer hash, ids)? Returns 0 or 2, the reason printed as "sky CMD: ...". */
int sky_data_fit(const char *cmd, const char *dir, const char *data, const sky_hf_config *hc,
		 const sky_dataset *ds);
/* Counts every row of ds into met (m->cfg.batch rows a forward; ids, types,
 * attn hold batch x seq each); *ms (may be NULL) the mean forward time per
 * micro-batch. Returns 0 or sky_bert_predict's error. */
int sky_data_eval(sky_bert *m, const sky_dataset *ds, int32_t *ids, int32_t *types, int32_t *attn,
		  sky_clsm *met, double *ms);
/* The metrics as members of j (rows, loss, accuracy, macro_f1, correct,
 * per_class, confusion, labels), or as the per-class table and the
 * confusion matrix on stdout. */
void sky_data_metrics_json(cJSON *j, const sky_dataset *ds, const sky_hf_config *hc,
			   const sky_clsm *m);
void sky_data_metrics_text(const sky_dataset *ds, const sky_hf_config *hc, const sky_clsm *m);

#endif
