/* sky eval --model-dir D --data F.skyds (eval_data.c). */
#ifndef SKY_EVAL_DATA_H
#define SKY_EVAL_DATA_H

/* Evaluates the Hugging Face directory dir on the prepared set data in
 * micro-batches of batch rows (0: the default 8), seed for any head the
 * checkpoint lacks; prints the metrics (one JSON object with json).
 * Returns the exit code: 0, 1 (a failure while running), 2 (the model or
 * the set is refused, or they do not fit each other). */
int sky_eval_data(const char *dir, const char *data, unsigned long long seed, long batch, int json);

#endif
