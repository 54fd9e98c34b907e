#include "sky_cli.h"

#include <stdio.h>

int sky_cmd_layer(int argc, char **argv)
{
	fprintf(stderr, "sky layer: not built yet (issue #2 in progress)\n");
	return 1;
}
