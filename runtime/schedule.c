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

int sky_schedule_ops(sky_schedule_kind kind, int stage, int n_stages, int m, sky_schedule_op *ops,
		     int cap)
{
	if (n_stages < 1 || stage < 0 || stage >= n_stages || m < 1)
		return SKY_EINVAL;
	if (cap < 2 * m)
		return SKY_ERANGE;
	int n = 0, f = 0, b = 0;
	/* forwards before the first backward: all of them (GPipe), or enough
	 * to fill the pipeline below this stage (1F1B) */
	int warm = kind == SKY_SCHEDULE_GPIPE ? m : sky_schedule_in_flight(kind, stage, n_stages, m) - 1;
	while (f < warm)
		ops[n++] = (sky_schedule_op){'F', f++};
	while (f < m) {
		ops[n++] = (sky_schedule_op){'F', f++};
		ops[n++] = (sky_schedule_op){'B', b++};
	}
	while (b < m)
		ops[n++] = (sky_schedule_op){'B', b++};
	return n;
}
