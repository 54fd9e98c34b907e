#include <stdio.h>

int sky_bench_probe(int argc, char **argv)
{
	fprintf(stderr, "sky bench probe: not built yet\n");
	return 1;
}
