/* A tiny int8 model file for the serving tests (tests/runtime/serve_model.c). */
#ifndef SKY_TEST_SERVE_MODEL_H
#define SKY_TEST_SERVE_MODEL_H

#include "sky_model.h"
#include "sky_planmsg.h"

#define SKY_TEST_SERVE_LAYERS 4
/* The int8 file's path, set by make_int8_model. */
extern char g_model[512];
/* Writes a tiny SKY_TEST_SERVE_LAYERS-layer model (batch 4), calibrated and
 * quantised, to g_model; *c gets its config. Returns 0. */
int make_int8_model(sky_model_cfg *c);
/* Fills *p with a 3-stage infer plan of job "j1" over g_model (config c):
 * stages b1..b3 on half-layers 0-2, 3-4, 5-7, batch 2, no wait, queue 16,
 * threads and sealed as given (a sealed plan's stages carry a key), each
 * stage's slice cut and put in the slice cache under state (made if
 * missing). Expectation failures are the caller's test's. */
void serve_plan3(sky_planmsg *p, const sky_model_cfg *c, const char *state, int64_t epoch,
		 int threads, int sealed);

#endif
