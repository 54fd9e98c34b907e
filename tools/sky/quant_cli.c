/* Options and model config shared by sky quantize and sky eval (see quant_cli.h). */
#include "quant_cli.h"

#include "sky_cli.h"

#include "sky_err.h"
#include "sky_task.h"

#include <stdio.h>
#include <string.h>

int sky_quant_cli_task_opt(const char *cmd, int c, const char *o, const char *v,
			   sky_quant_cli_task *t)
{
	int rc;
	switch (c) {
	case SKY_QUANT_O_MODEL:
		t->model = v;
		return 1;
	case SKY_QUANT_O_SEQ:
		rc = sky_cli_int(cmd, o, v, 1, 65536, &t->seq);
		break;
	case SKY_QUANT_O_BATCH:
		rc = sky_cli_int(cmd, o, v, 1, 4096, &t->batch);
		break;
	case SKY_QUANT_O_SEED:
		rc = sky_cli_int(cmd, o, v, 0, 0x7fffffffL, &t->seed);
		break;
	default:
		return 0;
	}
	return rc ? rc : 1;
}

int sky_quant_cli_cfg(const char *cmd, const sky_st_file *f, const sky_quant_cli_task *t,
		      sky_model_cfg *c)
{
	/* sky train writes "sky_model"; "model" is accepted too */
	const char *name = t->model ? t->model : sky_st_meta_get(f, "sky_model");
	if (!name)
		name = sky_st_meta_get(f, "model");
	if (!name) {
		fprintf(stderr, "sky %s: the file names no model (metadata \"sky_model\"); use --model\n",
			cmd);
		return SKY_EINVAL;
	}
	if (sky_model_preset(name, c) != 0) {
		fprintf(stderr, "sky %s: unknown model '%s' (%s)\n", cmd, name,
			sky_model_preset_names());
		return SKY_EINVAL;
	}
	if (t->seq > 0)
		c->seq = (int)t->seq;
	if (t->batch > 0)
		c->batch = (int)t->batch;
	if (sky_model_validate(c) != 0 || sky_task_check(c) != 0) {
		fprintf(stderr, "sky %s: batch %d x seq %d does not fit model %s or the task\n", cmd,
			c->batch, c->seq, name);
		return SKY_EINVAL;
	}
	return 0;
}
