#include "sky_cli.h"

#include <stdio.h>

int sky_cmd_bench(int argc, char **argv)
{
	fprintf(stderr, "sky bench: not built yet (issue #2 in progress)\n");
	return 1;
}
