#include "sky_cli.h"

#include <stdio.h>

int sky_cmd_train(int argc, char **argv)
{
	fprintf(stderr, "sky train: not built yet (issue #2 in progress)\n");
	return 1;
}
