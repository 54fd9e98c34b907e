#include "sky_test.h"

#include "planner_util.h"
#include "sky_svg.h"

#include <string.h>

static sky_fleet g_f;
static sky_plan g_p;
static char g_buf[1 << 20];

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;
	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

static void small_plan(sky_job *j)
{
	test_job(j, 6, 4, SKY_SCHED_1F1B);
	sky_rng r;
	sky_rng_seed(&r, 7);
	test_random_fleet(&r, 3, j, FLEET_PLAIN, &g_f);
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, j, SKY_ALGO_OPTIMAL, &g_p, NULL), 0);
}

SKY_TEST(plan_draws_one_row_per_stage_with_its_board_and_units)
{
	sky_job j;
	small_plan(&j);
	snprintf(g_f.board[g_p.stage[0].board].id, SKY_BOARD_ID_MAX, "b<&\"x");
	int n = sky_svg_plan(&g_f, &j, &g_p, "plan <one>", g_buf, sizeof g_buf);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ((size_t)n, strlen(g_buf));
	SKY_EXPECT(strncmp(g_buf, "<?xml", 5) == 0);
	SKY_EXPECT(strstr(g_buf, "</svg>\n") == g_buf + n - 7);
	/* one group per stage; raw markup from ids and titles never appears */
	SKY_EXPECT_EQ(count(g_buf, "<g>"), (size_t)g_p.n_stages);
	SKY_EXPECT_EQ(count(g_buf, "</g>"), (size_t)g_p.n_stages);
	SKY_EXPECT(strstr(g_buf, "b&lt;&amp;&quot;x") != NULL);
	SKY_EXPECT(strstr(g_buf, "b<&") == NULL);
	SKY_EXPECT(strstr(g_buf, "plan &lt;one&gt;") != NULL);
	/* the half-layer ranges in the tooltips are the plan's */
	for (int k = 0; k < g_p.n_stages; k++) {
		char want[64];
		snprintf(want, sizeof want, "half-layers %d-%d ", g_p.stage[k].first_unit,
			 g_p.stage[k].last_unit);
		SKY_EXPECT_MSG(strstr(g_buf, want) != NULL, "stage %d: no '%s'", k, want);
	}
	/* exactly one bottleneck marker */
	SKY_EXPECT_EQ(count(g_buf, " ms *</text>"), 1);
}

SKY_TEST(plan_refuses_what_it_cannot_draw_and_small_buffers)
{
	sky_job j;
	small_plan(&j);
	int n = sky_svg_plan(&g_f, &j, &g_p, NULL, g_buf, sizeof g_buf);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ(sky_svg_plan(&g_f, &j, &g_p, NULL, g_buf, (size_t)n), SKY_ERANGE);
	SKY_EXPECT_EQ(sky_svg_plan(&g_f, &j, &g_p, NULL, g_buf, 100), SKY_ERANGE);
	g_p.stage[g_p.n_stages - 1].last_unit = 2 * j.model.layers; /* past the model */
	SKY_EXPECT_EQ(sky_svg_plan(&g_f, &j, &g_p, NULL, g_buf, sizeof g_buf), SKY_EINVAL);
	small_plan(&j);
	g_p.stage[0].board = g_f.n;
	SKY_EXPECT_EQ(sky_svg_plan(&g_f, &j, &g_p, NULL, g_buf, sizeof g_buf), SKY_EINVAL);
}

SKY_TEST(timeline_draws_every_span_in_its_lane)
{
	const sky_svg_span s[] = {
		{0, 'F', 0, 0.000, 0.010}, {1, 'W', -1, 0.000, 0.011}, {0, 'S', 0, 0.010, 0.012},
		{1, 'F', 0, 0.011, 0.031}, {1, 'B', 0, 0.031, 0.071}, {0, 'B', 0, 0.072, 0.092},
		{0, 'O', -1, 0.092, 0.095}};
	const char *const labels[] = {"b1 (1x)", "b2 <slow>"};
	int n = sky_svg_timeline(s, 7, 2, labels, "step 3", g_buf, sizeof g_buf);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ(count(g_buf, "</rect>"), 7);
	SKY_EXPECT_EQ(count(g_buf, "<title>F mb 0:"), 2);
	SKY_EXPECT_EQ(count(g_buf, "<title>B mb 0:"), 2);
	SKY_EXPECT_EQ(count(g_buf, "<title>W:"), 1);
	SKY_EXPECT(strstr(g_buf, "b2 &lt;slow&gt;") != NULL);
	/* the last span ends at the right edge of the plot: 95 ms after the first */
	SKY_EXPECT(strstr(g_buf, ": 92.00-95.00 ms</title>") != NULL);
}

SKY_TEST(timeline_refuses_bad_spans)
{
	sky_svg_span s[] = {{0, 'F', 0, 0.0, 0.01}};
	SKY_EXPECT(sky_svg_timeline(s, 1, 1, NULL, NULL, g_buf, sizeof g_buf) > 0);
	s[0].stage = 1;
	SKY_EXPECT_EQ(sky_svg_timeline(s, 1, 1, NULL, NULL, g_buf, sizeof g_buf), SKY_EINVAL);
	s[0].stage = 0, s[0].t1_s = -1;
	SKY_EXPECT_EQ(sky_svg_timeline(s, 1, 1, NULL, NULL, g_buf, sizeof g_buf), SKY_EINVAL);
	s[0].t1_s = NAN;
	SKY_EXPECT_EQ(sky_svg_timeline(s, 1, 1, NULL, NULL, g_buf, sizeof g_buf), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_svg_timeline(s, 0, 0, NULL, NULL, g_buf, sizeof g_buf), SKY_EINVAL);
}

/* a plan over sites: a band per stage in its site's colour, the site
 * beside each board, and a red dashed line at every cut between sites */
SKY_TEST(plan_shows_sites_and_the_cuts_that_cross_them)
{
	sky_job j;
	test_job(&j, 6, 4, SKY_SCHED_1F1B);
	sky_rng r;
	sky_rng_seed(&r, 7);
	test_random_fleet(&r, 4, &j, FLEET_PLAIN, &g_f);
	static const char *const sites[4] = {"fac", "fac", "shop", ""};
	for (int i = 0; i < 4; i++)
		snprintf(g_f.board[i].site, sizeof g_f.board[i].site, "%s", sites[i]);
	g_f.n_links = 0;
	g_p.n_stages = 4; /* fac | fac | shop | core: two cuts cross */
	for (int k = 0; k < 4; k++)
		g_p.stage[k] = (sky_stage){.board = k, .first_unit = 3 * k, .last_unit = 3 * k + 2};
	SKY_EXPECT_EQ(sky_plan_evaluate(&g_f, &j, &g_p, NULL), 0);
	int n = sky_svg_plan(&g_f, &j, &g_p, NULL, g_buf, sizeof g_buf);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ(count(g_buf, "<title>site "), 4);
	SKY_EXPECT_EQ(count(g_buf, "<title>site fac<"), 2);
	SKY_EXPECT_EQ(count(g_buf, "<title>cut between sites "), 2);
	SKY_EXPECT(strstr(g_buf, "cut between sites fac and shop") != NULL);
	SKY_EXPECT(strstr(g_buf, "cut between sites shop and core") != NULL);
	SKY_EXPECT(strstr(g_buf, " @ shop</text>") != NULL);
	SKY_EXPECT(strstr(g_buf, "Bands: 3 sites; red dashes: 2 cuts between sites") != NULL);
	/* in one site nothing of it is drawn */
	for (int i = 0; i < 4; i++)
		g_f.board[i].site[0] = '\0';
	SKY_EXPECT_EQ(sky_plan_evaluate(&g_f, &j, &g_p, NULL), 0);
	n = sky_svg_plan(&g_f, &j, &g_p, NULL, g_buf, sizeof g_buf);
	SKY_EXPECT(n > 0 && strstr(g_buf, "site") == NULL && strstr(g_buf, " @ ") == NULL);
}
