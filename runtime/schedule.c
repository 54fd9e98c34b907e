/* GPipe and 1F1B op orders (see sky_schedule.h). */
#include "sky_schedule.h"

#include <string.h>

int sky_schedule_parse(const char *name, sky_schedule_kind *kind)
{
	if (name && strcmp(name, "gpipe") == 0)
		*kind = SKY_SCHEDULE_GPIPE;
	else if (name && strcmp(name, "1f1b") == 0)
		*kind = SKY_SCHEDULE_1F1B;
	else
		return SKY_EINVAL;
	return 0;
}

const char *sky_schedule_name(sky_schedule_kind kind)
{
	return kind == SKY_SCHEDULE_GPIPE ? "gpipe" : "1f1b";
}

int sky_schedule_in_flight(sky_schedule_kind kind, int stage, int n_stages, int m)
{
	if (kind == SKY_SCHEDULE_GPIPE)
		return m;
	int k = n_stages - stage;
	return k < m ? k : m;
}

/* op i of stage k of n: forwards before the first backward, all of them
 * (GPipe), or enough to fill the pipeline below this stage (1F1B); then
 * one forward one backward; then the remaining backwards */
static sky_schedule_op op_at(sky_schedule_kind kind, int k, int n, int m, int i)
{
	int warm = kind == SKY_SCHEDULE_GPIPE ? m : sky_schedule_in_flight(kind, k, n, m) - 1;
	if (i < warm)
		return (sky_schedule_op){.kind = 'F', .mb = i};
	int steady = m - warm, t = i - warm;
	if (t < 2 * steady)
		return t % 2 == 0 ? (sky_schedule_op){.kind = 'F', .mb = warm + t / 2}
				  : (sky_schedule_op){.kind = 'B', .mb = t / 2};
	return (sky_schedule_op){.kind = 'B', .mb = steady + (t - 2 * steady)};
}

int sky_schedule_ops(sky_schedule_kind kind, int stage, int n_stages, int m, sky_schedule_op *ops,
		     int cap)
{
	if (n_stages < 1 || stage < 0 || stage >= n_stages || m < 1)
		return SKY_EINVAL;
	if (cap < 2 * m)
		return SKY_ERANGE;
	for (int i = 0; i < 2 * m; i++)
		ops[i] = op_at(kind, stage, n_stages, m, i);
	return 2 * m;
}

int sky_schedule_owner_ops(sky_schedule_kind kind, int n_stages, int m, int lag,
			   sky_schedule_op *ops, int cap)
{
	if (n_stages < 3 || m < 1 || lag < 0)
		return SKY_EINVAL;
	if (cap < 4 * m)
		return SKY_ERANGE;
	int lead = 0;
	while (lead < 2 * m && op_at(kind, 0, n_stages, m, lead).kind == 'F')
		lead++;
	if (lag > lead - 1)
		lag = lead - 1;
	if (lag < 0)
		lag = 0;
	int n = 0, e = 0, b0 = 0, bl = 0;
	for (int i = 0; i <= 2 * m; i++) {
		/* the first stage runs ahead (see sky_schedule.h) */
		while (e < 2 * m) {
			sky_schedule_op o = op_at(kind, 0, n_stages, m, e);
			if (o.kind == 'B' && i < 2 * m && bl < b0 + 1 + lag)
				break;
			ops[n++] = o;
			b0 += o.kind == 'B';
			e++;
		}
		if (i == 2 * m)
			break;
		sky_schedule_op o = op_at(kind, n_stages - 1, n_stages, m, i);
		o.last = 1;
		ops[n++] = o;
		bl += o.kind == 'B';
	}
	return n;
}
