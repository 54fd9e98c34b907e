/* A tiny int8 model file for the serving tests (tests/runtime/serve_model.c). */
#ifndef SKY_TEST_SERVE_MODEL_H
#define SKY_TEST_SERVE_MODEL_H

#include "sky_model.h"

#define SKY_TEST_SERVE_LAYERS 4
/* The int8 file's path, set by make_int8_model. */
extern char g_model[512];
/* Writes a tiny SKY_TEST_SERVE_LAYERS-layer model (batch 4), calibrated and
 * quantised, to g_model; *c gets its config. Returns 0. */
int make_int8_model(sky_model_cfg *c);

#endif
