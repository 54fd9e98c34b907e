#include <stdio.h>

int sky_bench_planner(int argc, char **argv)
{
	fprintf(stderr, "sky bench planner: not built yet\n");
	return 1;
}
