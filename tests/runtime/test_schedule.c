/* GPipe and 1F1B op orders: every micro-batch forward once and backward
 * once, backwards in order, forwards before their backwards, and never
 * more live activations than the schedule's in_flight. */
#include "sky_test.h"

#include "sky_plan.h"
#include "sky_schedule.h"

#include <string.h>

static void ops_str(sky_schedule_kind k, int stage, int n, int m, char *out)
{
	sky_schedule_op ops[64];
	int c = sky_schedule_ops(k, stage, n, m, ops, 64);
	out[0] = '\0';
	for (int i = 0; i < c; i++) {
		char t[8];
		snprintf(t, sizeof t, "%c%d ", ops[i].kind, ops[i].mb);
		strcat(out, t);
	}
}

SKY_TEST(schedule_gpipe_all_forwards_then_backwards_in_order)
{
	char s[256];
	ops_str(SKY_SCHEDULE_GPIPE, 1, 3, 3, s);
	SKY_EXPECT_MSG(strcmp(s, "F0 F1 F2 B0 B1 B2 ") == 0, "%s", s);
	SKY_EXPECT_EQ(sky_schedule_in_flight(SKY_SCHEDULE_GPIPE, 1, 3, 3), 3);
}

SKY_TEST(schedule_1f1b_warms_up_by_the_stages_below)
{
	char s[256];
	ops_str(SKY_SCHEDULE_1F1B, 0, 3, 4, s); /* two warm-up forwards */
	SKY_EXPECT_MSG(strcmp(s, "F0 F1 F2 B0 F3 B1 B2 B3 ") == 0, "%s", s);
	ops_str(SKY_SCHEDULE_1F1B, 2, 3, 4, s); /* the last stage alternates */
	SKY_EXPECT_MSG(strcmp(s, "F0 B0 F1 B1 F2 B2 F3 B3 ") == 0, "%s", s);
	ops_str(SKY_SCHEDULE_1F1B, 0, 8, 2, s); /* fewer micro-batches than stages */
	SKY_EXPECT_MSG(strcmp(s, "F0 F1 B0 B1 ") == 0, "%s", s);
}

SKY_TEST(schedule_invariants_and_in_flight)
{
	for (int k = 0; k < 2; k++)
		for (int n = 1; n <= 6; n++)
			for (int st = 0; st < n; st++)
				for (int m = 1; m <= 9; m++) {
					sky_schedule_op ops[32];
					int c = sky_schedule_ops((sky_schedule_kind)k, st, n, m, ops, 32);
					SKY_EXPECT_EQ(c, 2 * m);
					int f = 0, b = 0, live = 0, peak = 0;
					for (int i = 0; i < c; i++) {
						if (ops[i].kind == 'F') {
							SKY_EXPECT_EQ(ops[i].mb, f++);
							live++;
						} else {
							SKY_EXPECT_EQ(ops[i].mb, b++);
							SKY_EXPECT(b <= f);
							live--;
						}
						peak = live > peak ? live : peak;
					}
					SKY_EXPECT_EQ(peak, sky_schedule_in_flight((sky_schedule_kind)k, st,
										   n, m));
				}
	sky_schedule_op ops[4];
	SKY_EXPECT_EQ(sky_schedule_ops(SKY_SCHEDULE_GPIPE, 0, 1, 3, ops, 4), SKY_ERANGE);
	SKY_EXPECT_EQ(sky_schedule_ops(SKY_SCHEDULE_GPIPE, 2, 2, 1, ops, 4), SKY_EINVAL);
	sky_schedule_kind k;
	SKY_EXPECT(sky_schedule_parse("1f1b", &k) == 0 && k == SKY_SCHEDULE_1F1B);
	SKY_EXPECT(sky_schedule_parse("gpipe", &k) == 0 && k == SKY_SCHEDULE_GPIPE);
	SKY_EXPECT_EQ(sky_schedule_parse("pipedream", &k), SKY_EINVAL);
}

/* the data owner's order: each of its stages in its own schedule order,
 * its first stage's forward of i before the last's, the last's backward of
 * i before the first's; a worked example of the lag */
SKY_TEST(schedule_owner_merges_its_two_stages)
{
	for (int k = 0; k < 2; k++)
		for (int n = 3; n <= 8; n++)
			for (int m = 1; m <= 10; m++)
				for (int lag = 0; lag <= 11; lag++) {
					sky_schedule_op ops[40], own[2][20];
					int c = sky_schedule_owner_ops((sky_schedule_kind)k, n, m, lag, ops, 40);
					SKY_EXPECT_EQ(c, 4 * m);
					sky_schedule_ops((sky_schedule_kind)k, 0, n, m, own[0], 20);
					sky_schedule_ops((sky_schedule_kind)k, n - 1, n, m, own[1], 20);
					int at[2] = {0, 0}, pf[2][10], pb[2][10];
					for (int i = 0; i < c; i++) {
						int e = ops[i].last;
						SKY_EXPECT(e == 0 || e == 1);
						SKY_EXPECT(at[e] < 2 * m && ops[i].kind == own[e][at[e]].kind &&
							   ops[i].mb == own[e][at[e]].mb);
						at[e]++;
						(ops[i].kind == 'F' ? pf : pb)[e][ops[i].mb] = i;
					}
					for (int mb = 0; mb < m; mb++)
						SKY_EXPECT(pf[0][mb] < pf[1][mb] && pb[1][mb] < pb[0][mb]);
				}
	sky_schedule_op ops[16];
	char s[128] = "";
	/* 1F1B, 4 stages, 4 micro-batches, lag 1: the first stage warms up
	 * with 4 forwards, then each of its backwards trails the last stage's
	 * by one */
	int c = sky_schedule_owner_ops(SKY_SCHEDULE_1F1B, 4, 4, 1, ops, 16);
	for (int i = 0; i < c; i++) {
		char t[8];
		snprintf(t, sizeof t, "%c%c%d ", ops[i].last ? 'L' : 'f', ops[i].kind, ops[i].mb);
		strcat(s, t);
	}
	SKY_EXPECT_MSG(strcmp(s, "fF0 fF1 fF2 fF3 LF0 LB0 LF1 LB1 fB0 LF2 LB2 fB1 LF3 LB3 fB2 fB3 ") ==
			       0,
		       "%s", s);
	SKY_EXPECT_EQ(sky_schedule_owner_ops(SKY_SCHEDULE_1F1B, 2, 4, 1, ops, 16), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_schedule_owner_ops(SKY_SCHEDULE_1F1B, 4, 4, 1, ops, 15), SKY_ERANGE);
}

/* under 1F1B every stage's own order is the same in the runtime and in the
 * planner's simulator, so the owner's order the board runs is the one the
 * planner simulated (its step prediction and its lag choice hold). GPipe's
 * backwards differ (the simulator takes them last-in first-out). */
SKY_TEST(schedule_owner_order_is_the_planners_under_1f1b)
{
	for (int n = 3; n <= 8; n++)
		for (int m = 1; m <= 10; m++)
			for (int lag = 0; lag <= 11; lag++) {
				sky_schedule_op ops[40];
				int stage[40], op[40];
				int c = sky_schedule_owner_ops(SKY_SCHEDULE_1F1B, n, m, lag, ops, 40);
				SKY_EXPECT_EQ(sky_plan_owner_order(SKY_SCHED_1F1B, n, m, lag, stage, op), c);
				for (int i = 0; i < c; i++) {
					int want = ops[i].kind == 'F' ? ops[i].mb : -ops[i].mb - 1;
					SKY_EXPECT_MSG(stage[i] == (ops[i].last ? n - 1 : 0) && op[i] == want,
						       "n %d m %d lag %d op %d: runtime %c%d of %s, planner "
						       "%d of stage %d",
						       n, m, lag, i, ops[i].kind, ops[i].mb,
						       ops[i].last ? "last" : "first", op[i], stage[i]);
				}
			}
}
