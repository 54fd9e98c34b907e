/* What `sky quantize` and `sky eval` share: the options that pick the model
 * and the synthetic task's batches, and the model config they make with a
 * weights file's metadata. Both must read a file the same way, so the
 * bounds and defaults live here once. */
#ifndef SKY_QUANT_CLI_H
#define SKY_QUANT_CLI_H

#include "sky_model.h"
#include "sky_opt.h"
#include "sky_safetensors.h"

typedef struct sky_quant_cli_task {
	const char *model; /* --model; NULL: the file's "sky_model" metadata */
	long seq, batch;   /* --seq, --batch; 0: the preset's */
	long seed;         /* --seed: the task's seed, as given to sky train */
} sky_quant_cli_task;

/* --model, --seq, --batch and --seed for a getopt_long table (sky_opt.h);
 * a command's own option values must stay below SKY_QUANT_O_MODEL. */
enum { SKY_QUANT_O_MODEL = 400, SKY_QUANT_O_SEQ, SKY_QUANT_O_BATCH, SKY_QUANT_O_SEED };
#define SKY_QUANT_CLI_OPT_TABLE                                                            \
	{"model", required_argument, NULL, SKY_QUANT_O_MODEL},                            \
	    {"seq", required_argument, NULL, SKY_QUANT_O_SEQ},                            \
	    {"batch", required_argument, NULL, SKY_QUANT_O_BATCH},                        \
	{                                                                                  \
		"seed", required_argument, NULL, SKY_QUANT_O_SEED                          \
	}

/* If option c (spelt o, value v) is one of the table's, parses v into t and
 * returns 1; returns 0 if it is none of them; SKY_EINVAL (message printed by
 * sky_cli_int) for a bad value. */
int sky_quant_cli_task_opt(const char *cmd, int c, const char *o, const char *v,
			   sky_quant_cli_task *t);

/* The preset from --model or the file's metadata, with --seq/--batch.
 * Returns 0, or SKY_EINVAL (message printed) if the file names no model, the
 * name is unknown, or the shape does not fit the model or the task. */
int sky_quant_cli_cfg(const char *cmd, const sky_st_file *f, const sky_quant_cli_task *t,
		      sky_model_cfg *c);

/* `sky quantize` itself: the fp32 model in to int8 layers in out (written
 * atomically), calibrated on calib micro-batches of the synthetic task as
 * task says (model from the file's metadata unless task->model, seq and
 * batch 0: the preset's, seed). flags: SKY_QUANT_JSON prints the report
 * as JSON, SKY_QUANT_QUIET one line instead of the report. `sky job submit
 * --task infer` quantises an fp32 file with it. Returns 0, or a negative
 * SKY_E* code after printing why on stderr. */
enum { SKY_QUANT_JSON = 1, SKY_QUANT_QUIET = 2 };
int sky_quantize_file(const char *in, const char *out, long calib, const sky_quant_cli_task *task,
		      int flags);

#endif
