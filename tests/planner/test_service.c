#include "sky_test.h"

#include "sky_json.h"
#include "sky_service.h"

#include <string.h>

static int parse(const char *doc, sky_job_req *j, sky_diag *d)
{
	sky_diag_clear(d);
	return sky_job_req_parse(doc, strlen(doc), j, d);
}

SKY_TEST(job_defaults_and_round_trip)
{
	sky_job_req j, back;
	sky_diag d;
	char buf[1024];
	SKY_EXPECT_EQ(parse("{\"job\":\"j1\",\"model\":\"tiny\"}", &j, &d), 0);
	SKY_EXPECT(!strcmp(j.algo, "optimal") && !strcmp(j.sched, "1f1b"));
	SKY_EXPECT(j.micro_batches == 4 && j.layers == 0 && j.min_boards == 0);
	SKY_EXPECT_NEAR(j.wait_s, 30, 0);
	j.layers = 16;
	j.seq = 8;
	int n = sky_job_req_encode(&j, buf, sizeof buf);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ(sky_job_req_parse(buf, (size_t)n, &back, &d), 0);
	SKY_EXPECT(back.layers == 16 && back.seq == 8 && back.batch == 0);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(bad_jobs_are_refused_and_named)
{
	sky_job_req j;
	sky_diag d;
	SKY_EXPECT_EQ(parse("{\"model\":\"tiny\"}", &j, &d), SKY_ENOTFOUND);
	SKY_EXPECT(strstr(d.msg, "job") != NULL);
	SKY_EXPECT_EQ(parse("{\"job\":\"a/b\",\"model\":\"tiny\"}", &j, &d), SKY_EINVAL);
	SKY_EXPECT_EQ(parse("{\"job\":\"j\",\"model\":\"huge\"}", &j, &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "huge") != NULL);
	SKY_EXPECT_EQ(parse("{\"job\":\"j\",\"model\":\"tiny\",\"algo\":\"fast\"}", &j, &d), SKY_EINVAL);
	SKY_EXPECT_EQ(parse("{\"job\":\"j\",\"model\":\"tiny\",\"layers\":0}", &j, &d), SKY_ERANGE);
	SKY_EXPECT_EQ(parse("{\"job\":\"j\",\"model\":\"tiny\",\"wait_s\":-1}", &j, &d), SKY_ERANGE);
	SKY_EXPECT_EQ(parse("{\"job\":\"j\",\"model\":\"tiny\",\"seq\":\"8\"}", &j, &d), SKY_EFORMAT);
	SKY_EXPECT_EQ(parse("{\"job\":", &j, &d), SKY_EFORMAT);
	static char big[5000];
	memset(big, ' ', sizeof big);
	SKY_EXPECT_EQ(sky_job_req_parse(big, sizeof big, &j, &d), SKY_ERANGE);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}
