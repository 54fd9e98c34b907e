#include "board_bytes.h"

#include "sky_trainjob.h"

int64_t test_board_bytes(const sky_planmsg *p, int stage, const char *board, sky_diag *d)
{
	return sky_trainjob_bytes_as(p, stage, board, d);
}
