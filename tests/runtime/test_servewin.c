/* The replay window of serving frames: per sender, per epoch, batch
 * numbers only grow; the step a frame must carry comes from the window. */
#include "sky_test.h"

#include "sky_servewin.h"

#include <stdio.h>
#include <string.h>

/* a receiver: expect, then (as if the frame verified) take */
static int frame(sky_servewin *w, const char *who, int64_t epoch, uint64_t batch, sky_diag *d)
{
	int64_t want = 0;
	sky_diag_clear(d);
	int rc = sky_servewin_expect(w, who, epoch, batch, &want, d);
	if (rc)
		return rc;
	SKY_EXPECT_EQ(want, (int64_t)batch);
	return sky_servewin_take(w, who, batch);
}

SKY_TEST(sixty_five_frames_replayed_in_rotation_are_all_refused)
{
	sky_servewin w;
	sky_diag d;
	sky_servewin_init(&w, 3);
	const uint64_t base = 1883540181484522ull;
	for (uint64_t i = 0; i < 65; i++)
		SKY_EXPECT_EQ(frame(&w, "b1", 3, base + i, &d), 0);
	for (int r = 0; r < 3 * 65; r++) {
		SKY_EXPECT_EQ(frame(&w, "b1", 3, base + (uint64_t)(r % 65), &d), SKY_ESTATE);
		char want[160];
		snprintf(want, sizeof want, "replay: batch %llu from b1 is not after its last, %llu",
			 (unsigned long long)(base + (uint64_t)(r % 65)),
			 (unsigned long long)(base + 64));
		SKY_EXPECT_MSG(strstr(d.msg, want) != NULL, "%s", d.msg);
	}
	SKY_EXPECT_EQ(w.replays, 3 * 65);
	/* a gap (frames lost on the way) is fine: numbers only have to grow */
	SKY_EXPECT_EQ(frame(&w, "b1", 3, base + 1000, &d), 0);
}

SKY_TEST(each_sender_has_its_own_window_and_epochs_do_not_mix)
{
	sky_servewin w;
	sky_diag d;
	int64_t want = 0;
	sky_servewin_init(&w, 3);
	SKY_EXPECT_EQ(frame(&w, "b1", 3, 100, &d), 0);
	/* another board's high number does not move b1's window */
	SKY_EXPECT_EQ(frame(&w, "b7", 3, 1ull << 62, &d), 0);
	SKY_EXPECT_EQ(frame(&w, "b1", 3, 101, &d), 0);
	/* a frame of another epoch */
	SKY_EXPECT_EQ(frame(&w, "b1", 2, 500, &d), SKY_ESTATE);
	SKY_EXPECT_MSG(strstr(d.msg, "frame from b1 of epoch 2, the window is of 3") != NULL, "%s",
		       d.msg);
	/* a frame that fails to verify (expect, no take) leaves the window */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_servewin_expect(&w, "b1", 3, 900, &want, &d), 0);
	SKY_EXPECT_EQ(frame(&w, "b1", 3, 102, &d), 0);
	/* take without a matching expect is refused */
	SKY_EXPECT_EQ(sky_servewin_take(&w, "b1", 102), SKY_ESTATE);
	/* a refusal leaves no step a frame could carry */
	SKY_EXPECT_EQ(sky_servewin_expect(&w, "b1", 3, 50, &want, &d), SKY_ESTATE);
	SKY_EXPECT_EQ(want, -1);
	/* the table of senders is bounded */
	for (int i = 0; i < SKY_SERVEWIN_SENDERS; i++) {
		char who[16];
		snprintf(who, sizeof who, "x%d", i);
		frame(&w, who, 3, 1, &d);
	}
	SKY_EXPECT_EQ(frame(&w, "late", 3, 1, &d), SKY_ESTATE);
	SKY_EXPECT_MSG(strstr(d.msg, "already 8 senders") != NULL, "%s", d.msg);
	/* a new plan: a new window */
	sky_servewin_init(&w, 4);
	SKY_EXPECT_EQ(frame(&w, "b1", 4, 100, &d), 0);
}
