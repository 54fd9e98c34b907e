/* Classification metrics (sky_clsmetrics.h). */
#include "sky_clsmetrics.h"

#include <math.h>
#include <string.h>

void sky_clsm_init(sky_clsm *m, int n, int64_t *cm)
{
	memset(m, 0, sizeof *m);
	m->n = n;
	m->cm = cm;
	memset(cm, 0, (size_t)n * (size_t)n * sizeof *cm);
}

double sky_clsm_xent(const float *logits, int n, int truth)
{
	double mx = logits[0];
	for (int i = 1; i < n; i++)
		if (logits[i] > mx)
			mx = logits[i];
	double s = 0;
	for (int i = 0; i < n; i++)
		s += exp((double)logits[i] - mx);
	return log(s) - ((double)logits[truth] - mx);
}

int sky_clsm_argmax(const float *logits, int n)
{
	int best = 0;
	for (int i = 1; i < n; i++)
		if (logits[i] > logits[best])
			best = i;
	return best;
}

int sky_clsm_add(sky_clsm *m, int truth, const float *logits)
{
	int p = sky_clsm_argmax(logits, m->n);
	m->cm[(size_t)truth * (size_t)m->n + (size_t)p]++;
	m->total++;
	m->correct += p == truth;
	m->loss_sum += sky_clsm_xent(logits, m->n, truth);
	return p;
}

void sky_clsm_class_get(const sky_clsm *m, int k, sky_clsm_class *out)
{
	memset(out, 0, sizeof *out);
	for (int i = 0; i < m->n; i++) {
		out->support += m->cm[(size_t)k * (size_t)m->n + (size_t)i];
		out->predicted += m->cm[(size_t)i * (size_t)m->n + (size_t)k];
	}
	int64_t tp = m->cm[(size_t)k * (size_t)m->n + (size_t)k];
	out->precision = out->predicted ? (double)tp / (double)out->predicted : 0;
	out->recall = out->support ? (double)tp / (double)out->support : 0;
	double s = out->precision + out->recall;
	out->f1 = s > 0 ? 2 * out->precision * out->recall / s : 0;
}

double sky_clsm_accuracy(const sky_clsm *m)
{
	return m->total ? (double)m->correct / (double)m->total : 0;
}

double sky_clsm_macro_f1(const sky_clsm *m)
{
	double sum = 0;
	int k = 0;
	for (int i = 0; i < m->n; i++) {
		sky_clsm_class c;
		sky_clsm_class_get(m, i, &c);
		if (!c.support && !c.predicted)
			continue;
		sum += c.f1;
		k++;
	}
	return k ? sum / k : 0;
}

double sky_clsm_loss(const sky_clsm *m)
{
	return m->total ? m->loss_sum / (double)m->total : 0;
}
