/* The board's own arena figure for the planner's tests (board_bytes.c):
 * runtime's sky_trainjob_bytes_as, which the service's tests cannot name
 * beside svc_internal.h (both have a sky_stage). */
#ifndef SKY_TEST_BOARD_BYTES_H
#define SKY_TEST_BOARD_BYTES_H

#include "sky_err.h"
#include "sky_planmsg.h"

#include <stdint.h>

/* The arena bytes board computes for stage `stage` of training plan p
 * (NULL: the stage's own board), or a negative SKY_E* with d set. */
int64_t test_board_bytes(const sky_planmsg *p, int stage, const char *board, sky_diag *d);

#endif
