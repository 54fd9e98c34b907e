#include "sky_test.h"

#include "sky_plan.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static sky_fleet g_f, g_g;

/* extra keys come first: cJSON reads the first of duplicate keys, so an
 * extra key overrides the default that follows it */
#define BOARD(id, extra) \
	"{\"id\":\"" id "\"" extra ",\"fwd_s\":0.5,\"bwd_s\":1.0,\"mem_bytes\":4294967296," \
	"\"bw_Bps\":1.25e8,\"lat_s\":0.001}"

SKY_TEST(parses_a_good_fleet)
{
	const char *doc = "{\"what\":\"two boards\",\"boards\":[" BOARD("rpi4-a", "") "," BOARD(
		"rpi5-b", ",\"fwd_int8_s\":0.2,\"bwd_int8_s\":0.6,\"attn_share\":0.4,"
			  "\"attn_share_int8\":0.47,\"embed_int8_s\":0.003,\"head_int8_s\":0.002") "]}";
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fleet_parse(doc, strlen(doc), &g_f, &d), 0);
	SKY_EXPECT_EQ(g_f.n, 2);
	SKY_EXPECT(strcmp(g_f.board[1].id, "rpi5-b") == 0);
	SKY_EXPECT_NEAR(g_f.board[0].fwd_s, 0.5, 0);
	SKY_EXPECT_NEAR(g_f.board[0].fwd_int8_s, 0, 0);
	SKY_EXPECT_NEAR(g_f.board[1].bwd_int8_s, 0.6, 0);
	SKY_EXPECT_NEAR(g_f.board[1].attn_share, 0.4, 0);
	SKY_EXPECT_NEAR(g_f.board[1].attn_share_int8, 0.47, 0);
	SKY_EXPECT_NEAR(g_f.board[1].embed_int8_s, 0.003, 0);
	SKY_EXPECT_NEAR(g_f.board[1].head_int8_s, 0.002, 0);
	SKY_EXPECT_NEAR(g_f.board[0].embed_int8_s, 0, 0); /* absent: not measured */
	SKY_EXPECT_EQ(g_f.board[1].mem_bytes, 4294967296ll);
	SKY_EXPECT_NEAR(g_f.board[1].bw_Bps, 1.25e8, 0);
	/* write and read back: the same fleet, bit for bit */
	static char buf[1 << 16];
	int n = sky_fleet_write(&g_f, "a \"quoted\" note", buf, sizeof buf);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ(sky_fleet_parse(buf, (size_t)n, &g_g, &d), 0);
	SKY_EXPECT_EQ(g_g.n, 2);
	SKY_EXPECT(memcmp(g_f.board, g_g.board, 2 * sizeof(sky_board)) == 0);
	SKY_EXPECT_EQ(sky_fleet_write(&g_f, NULL, buf, 40), SKY_ERANGE);
}

SKY_TEST(sites_and_links_round_trip)
{
	const char *doc =
		"{\"boards\":[" BOARD("f1", ",\"site\":\"factory\"") "," BOARD("c1", "") "," BOARD(
			"c2", ",\"site\":\"core\"") "],"
		"\"links\":[{\"a\":\"factory\",\"b\":\"core\",\"bw_Bps\":2.5e6,\"lat_s\":0.03},"
		"{\"a\":\"shop\",\"b\":\"factory\",\"bw_Bps\":1e6,\"lat_s\":0.05}]}";
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fleet_parse(doc, strlen(doc), &g_f, &d), 0);
	SKY_EXPECT_MSG(d.msg[0] == 0, "%s", d.msg);
	SKY_EXPECT(strcmp(g_f.board[0].site, "factory") == 0);
	SKY_EXPECT(g_f.board[1].site[0] == '\0' && g_f.board[2].site[0] == '\0');
	SKY_EXPECT_EQ(g_f.n_links, 2);
	SKY_EXPECT(strcmp(g_f.link[0].a, "factory") == 0 && g_f.link[0].b[0] == '\0');
	SKY_EXPECT_NEAR(g_f.link[1].lat_s, 0.05, 0);
	static char buf[1 << 16];
	int n = sky_fleet_write(&g_f, NULL, buf, sizeof buf);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_MSG(strstr(buf, "\"b\":\"core\"") != NULL, "%s", buf);
	SKY_EXPECT_EQ(sky_fleet_parse(buf, (size_t)n, &g_g, &d), 0);
	SKY_EXPECT_EQ(g_g.n, 3);
	SKY_EXPECT(memcmp(g_f.board, g_g.board, 3 * sizeof(sky_board)) == 0);
	SKY_EXPECT_EQ(g_g.n_links, 2);
	SKY_EXPECT(memcmp(g_f.link, g_g.link, 2 * sizeof(sky_site_link)) == 0);
	/* a fleet without links writes none and reads back none */
	g_f.n_links = 0;
	n = sky_fleet_write(&g_f, NULL, buf, sizeof buf);
	SKY_EXPECT(n > 0 && strstr(buf, "links") == NULL);
	SKY_EXPECT_EQ(sky_fleet_parse(buf, (size_t)n, &g_g, &d), 0);
	SKY_EXPECT_EQ(g_g.n_links, 0);
}

SKY_TEST(bad_sites_and_links_are_named)
{
	const struct {
		const char *doc, *word;
		int rc;
	} cases[] = {
		{"{\"boards\":[" BOARD("s1", ",\"site\":\"a b\"") "]}", "board s1: field 'site'",
		 SKY_EINVAL},
		{"{\"boards\":[" BOARD("s1", ",\"site\":3") "]}", "site", SKY_EFORMAT},
		{"{\"boards\":[" BOARD("s1", "") "],\"links\":[{\"a\":\"x\",\"b\":\"x\","
		 "\"bw_Bps\":1,\"lat_s\":0}]}",
		 "link #0: joins site x to itself", SKY_EINVAL},
		{"{\"boards\":[" BOARD("s1", "") "],\"links\":[{\"a\":\"x\",\"b\":\"core\","
		 "\"bw_Bps\":1,\"lat_s\":0},{\"a\":\"core\",\"b\":\"x\",\"bw_Bps\":2,\"lat_s\":0}]}",
		 "link #1: core-x is given twice", SKY_EINVAL},
		{"{\"boards\":[" BOARD("s1", "") "],\"links\":[{\"a\":\"x\",\"b\":\"y\","
		 "\"bw_Bps\":0,\"lat_s\":0}]}",
		 "link x-y: field 'bw_Bps'", SKY_EINVAL},
		{"{\"boards\":[" BOARD("s1", "") "],\"links\":[{\"a\":\"x\",\"b\":\"y\","
		 "\"bw_Bps\":1,\"lat_s\":-1}]}",
		 "link x-y: field 'lat_s'", SKY_EINVAL},
		{"{\"boards\":[" BOARD("s1", "") "],\"links\":[{\"a\":\"\",\"b\":\"y\","
		 "\"bw_Bps\":1,\"lat_s\":0}]}",
		 "link #0: a site name is empty", SKY_EINVAL},
		{"{\"boards\":[" BOARD("s1", "") "],\"links\":[{\"a\":\"x\",\"bw_Bps\":1,"
		 "\"lat_s\":0}]}",
		 "link #0: missing field 'b'", SKY_ENOTFOUND},
		{"{\"boards\":[" BOARD("s1", "") "],\"links\":{}}", "'links' must be an array",
		 SKY_EFORMAT},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		sky_diag d;
		sky_diag_clear(&d);
		int rc = sky_fleet_parse(cases[i].doc, strlen(cases[i].doc), &g_f, &d);
		SKY_EXPECT_MSG(rc == cases[i].rc, "case %zu: rc %d (%s)", i, rc, d.msg);
		SKY_EXPECT_MSG(strstr(d.msg, cases[i].word) != NULL, "case %zu: '%s' lacks '%s'", i,
			       d.msg, cases[i].word);
		SKY_EXPECT_EQ(g_f.n, 0);
		SKY_EXPECT_EQ(g_f.n_links, 0);
	}
}

/* each bad case: the error must name the board and the field */
SKY_TEST(bad_fleets_name_the_board_and_field)
{
	const struct {
		const char *doc, *board, *field;
	} cases[] = {
		{"{\"boards\":[{\"id\":\"a1\",\"bwd_s\":1,\"mem_bytes\":1,\"bw_Bps\":1,\"lat_s\":0}]}",
		 "a1", "fwd_s"},
		{"{\"boards\":[" BOARD("a1", "") ",{\"id\":\"a2\",\"fwd_s\":1,\"bwd_s\":1,"
		 "\"mem_bytes\":1,\"bw_Bps\":1}]}",
		 "a2", "lat_s"},
		{"{\"boards\":[{\"id\":\"neg\",\"fwd_s\":-0.5,\"bwd_s\":1,\"mem_bytes\":1,"
		 "\"bw_Bps\":1,\"lat_s\":0}]}",
		 "neg", "fwd_s"},
		{"{\"boards\":[{\"id\":\"z\",\"fwd_s\":0.5,\"bwd_s\":0,\"mem_bytes\":1,"
		 "\"bw_Bps\":1,\"lat_s\":0}]}",
		 "z", "bwd_s"},
		{"{\"boards\":[" BOARD("a1", "") "," BOARD("bw0", ",\"bw_Bps\":0") "]}", "bw0",
		 "bw_Bps"},
		{"{\"boards\":[" BOARD("dup", "") "," BOARD("dup", "") "]}", "dup", "id"},
		{"{\"boards\":[" BOARD("m0", ",\"mem_bytes\":0") "]}", "m0", "mem_bytes"},
		{"{\"boards\":[" BOARD("mf", ",\"mem_bytes\":1.5") "]}", "mf", "mem_bytes"},
		{"{\"boards\":[" BOARD("lat", ",\"lat_s\":-1") "]}", "lat", "lat_s"},
		{"{\"boards\":[" BOARD("str", ",\"fwd_s\":\"fast\"") "]}", "str", "fwd_s"},
		{"{\"boards\":[" BOARD("i8", ",\"fwd_int8_s\":0.1") "]}", "i8", "bwd_int8_s"},
		{"{\"boards\":[" BOARD("sh", ",\"attn_share\":1.5") "]}", "sh", "attn_share"},
		{"{\"boards\":[" BOARD("s8", ",\"attn_share_int8\":1") "]}", "s8", "attn_share_int8"},
		{"{\"boards\":[" BOARD("e8", ",\"embed_int8_s\":-0.1") "]}", "e8", "embed_int8_s"},
		{"{\"boards\":[" BOARD("h8", ",\"head_int8_s\":\"x\"") "]}", "h8", "head_int8_s"},
		{"{\"boards\":[" BOARD("huge", ",\"fwd_s\":1e999") "]}", "huge", "fwd_s"},
		{"{\"boards\":[" BOARD("a1", "") ",{\"fwd_s\":1}]}", "#1", "id"},
		{"{\"boards\":[" BOARD("has space", "") "]}", "#0", "id"},
		{"{\"boards\":[" BOARD("", "") "]}", "#0", "id"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		sky_diag d;
		sky_diag_clear(&d);
		int rc = sky_fleet_parse(cases[i].doc, strlen(cases[i].doc), &g_f, &d);
		SKY_EXPECT_MSG(rc < 0, "case %zu accepted", i);
		SKY_EXPECT_EQ(g_f.n, 0);
		char want_field[64];
		snprintf(want_field, sizeof want_field, "'%s'", cases[i].field);
		SKY_EXPECT_MSG(strstr(d.msg, cases[i].board) && strstr(d.msg, want_field),
			       "case %zu: '%s' should name %s and %s", i, d.msg, cases[i].board,
			       want_field);
	}
}

SKY_TEST(bad_documents_are_refused)
{
	const char *docs[] = {"", "{", "[]", "{\"boards\":{}}", "{\"boards\":[]}",
			      "{\"boards\":[1]}", "{\"boards\":[" BOARD("nan", ",\"fwd_s\":NaN") "]}"};
	for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
		sky_diag d;
		sky_diag_clear(&d);
		SKY_EXPECT_MSG(sky_fleet_parse(docs[i], strlen(docs[i]), &g_f, &d) < 0, "doc %zu", i);
		SKY_EXPECT(d.msg[0] != 0);
	}
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fleet_load("/nonexistent/fleet.json", &g_f, &d), SKY_ENOTFOUND);
	SKY_EXPECT(strstr(d.msg, "/nonexistent/fleet.json") != NULL);
}

/* fleets built in memory (as the control plane will) go through the same
 * checks: NaN and infinities cannot come from JSON, but can from C */
SKY_TEST(in_memory_fleets_are_validated)
{
	memset(&g_f, 0, sizeof g_f);
	g_f.n = 2;
	for (int i = 0; i < 2; i++) {
		snprintf(g_f.board[i].id, SKY_BOARD_ID_MAX, "c%d", i);
		g_f.board[i].fwd_s = 1, g_f.board[i].bwd_s = 2;
		g_f.board[i].mem_bytes = 1 << 30, g_f.board[i].bw_Bps = 1e6;
	}
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fleet_validate(&g_f, &d), 0);
	g_f.board[1].bwd_s = NAN;
	SKY_EXPECT_EQ(sky_fleet_validate(&g_f, &d), SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "board c1") && strstr(d.msg, "'bwd_s'"), "%s", d.msg);
	g_f.board[1].bwd_s = 2;
	g_f.board[0].bw_Bps = INFINITY;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_fleet_validate(&g_f, &d), SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "board c0") && strstr(d.msg, "'bw_Bps'"), "%s", d.msg);
	/* and partition refuses them before planning */
	static sky_plan p;
	sky_job j;
	sky_job_init(&j, "tiny");
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &p, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "board c0") != NULL);
	/* int8 job on a fleet without int8 times */
	g_f.board[0].bw_Bps = 1e6;
	j.prec = SKY_PREC_INT8;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_plan_partition(&g_f, &j, SKY_ALGO_OPTIMAL, &p, &d), SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "board c0") && strstr(d.msg, "fwd_int8_s"), "%s", d.msg);
}
