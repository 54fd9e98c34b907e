/* skyd: the board daemon. Until the control plane lands (issue #5) it only
 * explains itself. */
#include "sky_version.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	int help = argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0);
	fprintf(help ? stdout : stderr,
		"usage: skyd [options]\n"
		"skyd is Sky's board daemon: it probes the board, reports to the planner over MQTT\n"
		"and runs the stages of its plan. The control plane is not built yet, so skyd does\n"
		"nothing else in this version (%s).\n",
		SKY_VERSION);
	return help ? 0 : 1;
}
