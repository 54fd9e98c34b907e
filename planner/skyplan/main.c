/* skyplan: the planner service beside the broker. Until the control plane
 * lands (issue #5) it only explains itself. */
#include "sky_version.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	int help = argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0);
	fprintf(help ? stdout : stderr,
		"usage: skyplan [options]\n"
		"skyplan is Sky's planner service: it keeps the fleet registry and publishes signed\n"
		"plans over MQTT. The service is not built yet, so skyplan does nothing else in this\n"
		"version (%s); `sky plan` and `sky sim` run the planner locally.\n",
		SKY_VERSION);
	return help ? 0 : 1;
}
