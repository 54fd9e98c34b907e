/* The build's version: `git describe` of the tree it was built from. The
 * string lives in one generated file (build/<board>/gen/version.c), so a new
 * commit relinks the binaries instead of recompiling every object. */
#ifndef SKY_VERSION_H
#define SKY_VERSION_H

const char *sky_version(void);
#define SKY_VERSION sky_version()

#endif
