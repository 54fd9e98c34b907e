/* Pictures of plans and pipelines as standalone SVG documents, for people:
 * the demo and `sky plan --svg` draw which board holds which half-layers,
 * and a step's measured (or simulated) timeline per stage.
 *
 * Both renderers write into a caller's buffer (no allocation, no files:
 * the caller saves it with sky_file_write) and return the length, or
 * SKY_ERANGE when the buffer is too small (then nothing usable is in it)
 * or SKY_EINVAL for input they cannot draw. Text that comes from outside
 * (board ids, titles) is escaped for XML. */
#ifndef SKY_SVG_H
#define SKY_SVG_H

#include "sky_err.h"
#include "sky_plan.h"

#include <stddef.h>

/* The plan: one row per stage in pipeline order, a bar over the job's
 * half-layer units [first_unit, last_unit], and beside it the stage's time
 * per micro-batch against the bottleneck (the bottleneck stage is marked).
 * title may be NULL. */
int sky_svg_plan(const sky_fleet *f, const sky_job *j, const sky_plan *p, const char *title,
		 char *buf, size_t cap);

/* One span of a stage's time line: kind is 'F' forward, 'B' backward,
 * 'S' send, 'W' waiting for a frame, 'O' optimizer (anything else is drawn
 * grey); mb is the micro-batch (-1: none). Times in seconds from any
 * common origin. */
typedef struct sky_svg_span {
	int stage;
	char kind;
	int mb;
	double t0_s, t1_s;
} sky_svg_span;

/* A pipeline time line: one lane per stage (labels[k] names it, or NULL
 * for "stage k"), time across. Spans with a stage outside [0, n_stages),
 * t1 < t0 or non-finite times are SKY_EINVAL. */
int sky_svg_timeline(const sky_svg_span *s, size_t n, int n_stages, const char *const *labels,
		     const char *title, char *buf, size_t cap);

#endif
