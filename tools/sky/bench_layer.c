#include <stdio.h>

int sky_bench_layer(int argc, char **argv)
{
	fprintf(stderr, "sky bench layer: not built yet\n");
	return 1;
}
