/* Classification metrics over a data set: loss, accuracy, macro-F1,
 * per-class precision and recall, and the confusion matrix, as evaluation
 * (and training's per-epoch report) gives them.
 *
 * Definitions (scikit-learn's, with zero_division=0):
 *   precision_k = TP_k / predicted_k   (0 when nothing was predicted k)
 *   recall_k    = TP_k / support_k     (0 when no row is truly k)
 *   f1_k        = 2 P R / (P + R)      (0 when P + R is 0)
 *   macro-F1    = the mean of f1_k over the classes that occur as a truth
 *                 or a prediction
 *   loss        = the mean over rows of -log softmax(logits)[truth],
 *                 computed in double with the maximum subtracted. */
#ifndef SKY_CLSMETRICS_H
#define SKY_CLSMETRICS_H

#include <stddef.h>
#include <stdint.h>

typedef struct sky_clsm {
	int n;            /* classes */
	int64_t *cm;      /* (n, n) caller memory: cm[truth * n + pred] */
	int64_t total, correct;
	double loss_sum;
} sky_clsm;

/* Starts counting n classes in cm (n * n entries, zeroed here). */
void sky_clsm_init(sky_clsm *m, int n, int64_t *cm);
/* -log softmax(logits[0..n))[truth], in double. */
double sky_clsm_xent(const float *logits, int n, int truth);
/* The argmax of logits[0..n) (the first of equal maxima). */
int sky_clsm_argmax(const float *logits, int n);
/* Counts one row: its true class, the logits (n). Returns the prediction. */
int sky_clsm_add(sky_clsm *m, int truth, const float *logits);

typedef struct sky_clsm_class {
	int64_t support;   /* rows truly this class */
	int64_t predicted; /* rows predicted this class */
	double precision, recall, f1;
} sky_clsm_class;

/* Class k's figures. */
void sky_clsm_class_get(const sky_clsm *m, int k, sky_clsm_class *out);
double sky_clsm_accuracy(const sky_clsm *m); /* 0 when no rows */
double sky_clsm_macro_f1(const sky_clsm *m);
double sky_clsm_loss(const sky_clsm *m);     /* mean; 0 when no rows */

#endif
