/* The replay window of a serving stage's frames: per sender and per plan
 * epoch, batch numbers only grow.
 *
 * A serving stage k > 0 takes int8 frames of batches from stage k - 1
 * (runtime/sky_servejob.h). The first stage numbers its batches from the
 * Unix time << 20 and counts up, and every stage passes them on in arrival
 * order, so from one sender within one epoch a frame's batch is always
 * above the last one taken (MQTT keeps one publisher's order on a topic;
 * a QoS 1 re-delivery repeats an old number). A frame is unpacked only
 * when its claimed batch is above its sender's last, and the receiver then
 * expects exactly that step (sky_frame_expect.step): the sealed header
 * authenticates it, so a recorded frame replayed later, in any rotation,
 * is refused however many frames came between, and a fresh frame cannot
 * claim a number the receiver did not expect. The window only moves for a
 * frame that verified (sky_servewin_take), and per sender, so one board's
 * frames cannot move another's window.
 *
 * No allocation; a plain struct. */
#ifndef SKY_SERVEWIN_H
#define SKY_SERVEWIN_H

#include "sky_err.h"
#include "sky_topics.h"

#include <stdint.h>

#define SKY_SERVEWIN_SENDERS 8 /* senders tracked: a stage has one (stage k - 1) */

typedef struct sky_servewin {
	int64_t epoch; /* the plan the window is of */
	int n;
	struct {
		char who[SKY_TOPIC_SEGMENT_MAX + 1];
		uint64_t last; /* the highest batch taken from it */
	} s[SKY_SERVEWIN_SENDERS];
	long replays;   /* frames refused: batch not above the sender's last */
	long strangers; /* refused: the table of senders full */
} sky_servewin;

/* Empties w for the plan of epoch. Cannot fail. */
void sky_servewin_init(sky_servewin *w, int64_t epoch);

/* Before unpacking a frame from sender claiming `batch` at `epoch`: the
 * step the receiver expects of it into *want. Returns 0, or SKY_ESTATE with
 * d saying why (counted): another epoch than the window's, a batch not
 * above the sender's last ("replay"), or a new sender with the table full.
 * Nothing changes until sky_servewin_take. */
int sky_servewin_expect(sky_servewin *w, const char *sender, int64_t epoch, uint64_t batch,
			int64_t *want, sky_diag *d);

/* The frame of batch from sender verified and is taken: the sender's
 * window moves to it. Returns 0 or SKY_ESTATE (no room for a new sender,
 * or batch not above its last: call sky_servewin_expect first). */
int sky_servewin_take(sky_servewin *w, const char *sender, uint64_t batch);

#endif
