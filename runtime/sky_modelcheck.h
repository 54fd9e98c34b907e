/* Does a model file fit a job? The planner's check of an uploaded int8
 * model before it plans an infer job on it (planner/sky_deploy.h): the
 * file must hold int8 encoder layers (`sky quantize`), as many as the job
 * has, and every tensor must have the dtype and shape the job's preset
 * gives it (vocabulary, hidden size, heads, FFN, positions, classes). */
#ifndef SKY_MODELCHECK_H
#define SKY_MODELCHECK_H

#include "sky_err.h"
#include "sky_model.h"

/* Opens path and checks it against cfg (cfg->layers included). Returns 0,
 * or SKY_ENOTFOUND / SKY_EFORMAT / SKY_EINVAL with d naming the tensor or
 * the count that differs. */
int sky_modelcheck_int8(const char *path, const sky_model_cfg *cfg, sky_diag *d);

#endif
