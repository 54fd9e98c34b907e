/* Job owners and per-operator quotas (planner/owner.c): the first operator
 * owns a job id, across restarts (the record is a file); another is refused
 * with the reason and never learns whose it is; a damaged record gives the
 * job to nobody; a full quota refuses with the operator, count and limit. */
#include "sky_test.h"

#include "sky_file.h"
#include "sky_owner.h"

#include <stdio.h>
#include <string.h>

static char g_dir[600];

static void fresh(const char *name)
{
	snprintf(g_dir, sizeof g_dir, "%s/%s", sky_test_tmp_dir(), name);
	sky_file_mkdirs(g_dir, 0700);
}

SKY_TEST(first_operator_owns_the_job)
{
	sky_diag d;
	char op[SKY_TOPIC_SEGMENT_MAX + 1];
	fresh("owner1");
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_owner_get(g_dir, "j1", op, sizeof op), SKY_ENOTFOUND);
	SKY_EXPECT_EQ(sky_owner_claim(g_dir, "j1", "sky-op-alice", &d), 0);
	SKY_EXPECT_EQ(sky_owner_get(g_dir, "j1", op, sizeof op), 0);
	SKY_EXPECT(strcmp(op, "sky-op-alice") == 0);
	/* again by the owner: fine (a resubmit) */
	SKY_EXPECT_EQ(sky_owner_claim(g_dir, "j1", "sky-op-alice", &d), 0);
	SKY_EXPECT_EQ(sky_owner_check(g_dir, "j1", "sky-op-alice", &d), 0);
}

SKY_TEST(another_operator_is_refused_with_the_reason)
{
	sky_diag d;
	fresh("owner2");
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_owner_claim(g_dir, "j1", "sky-op-alice", &d), 0);
	SKY_EXPECT_EQ(sky_owner_claim(g_dir, "j1", "sky-op-bob", &d), SKY_EAUTH);
	SKY_EXPECT(strcmp(d.msg, "job j1 belongs to another operator") == 0);
	SKY_EXPECT(strstr(d.msg, "alice") == NULL);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_owner_check(g_dir, "j1", "sky-op-bob", &d), SKY_EAUTH);
	SKY_EXPECT(strcmp(d.msg, "job j1 belongs to another operator") == 0);
	/* the refusal left the owner as it was */
	char op[SKY_TOPIC_SEGMENT_MAX + 1];
	SKY_EXPECT_EQ(sky_owner_get(g_dir, "j1", op, sizeof op), 0);
	SKY_EXPECT(strcmp(op, "sky-op-alice") == 0);
	/* another id is bob's to take */
	SKY_EXPECT_EQ(sky_owner_claim(g_dir, "j2", "sky-op-bob", &d), 0);
}

SKY_TEST(unknown_job_and_bad_names)
{
	sky_diag d;
	fresh("owner3");
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_owner_check(g_dir, "nope", "sky-op-alice", &d), SKY_ENOTFOUND);
	SKY_EXPECT(strcmp(d.msg, "no job nope") == 0);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_owner_claim(g_dir, "../x", "sky-op-alice", &d), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_owner_claim(g_dir, "j1", "a/b", &d), SKY_EINVAL);
	SKY_EXPECT_EQ(sky_owner_check(g_dir, "..", "sky-op-alice", &d), SKY_ENOTFOUND);
}

SKY_TEST(damaged_record_belongs_to_nobody)
{
	sky_diag d;
	char path[700], op[SKY_TOPIC_SEGMENT_MAX + 1];
	fresh("owner4");
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_owner_claim(g_dir, "j1", "sky-op-alice", &d), 0);
	SKY_EXPECT_EQ(sky_owner_path(g_dir, "j1", path, sizeof path), 0);
	const char *junk = "sky-op-alice\nsky-op-bob\n";
	SKY_EXPECT_EQ(sky_file_write(path, junk, strlen(junk), 0600), 0);
	SKY_EXPECT_EQ(sky_owner_get(g_dir, "j1", op, sizeof op), SKY_EFORMAT);
	SKY_EXPECT_EQ(sky_owner_claim(g_dir, "j1", "sky-op-bob", &d), SKY_EAUTH);
	SKY_EXPECT_EQ(sky_owner_claim(g_dir, "j1", "sky-op-alice", &d), SKY_EAUTH);
	char big[400];
	memset(big, 'a', sizeof big);
	SKY_EXPECT_EQ(sky_file_write(path, big, sizeof big, 0600), 0);
	SKY_EXPECT_EQ(sky_owner_get(g_dir, "j1", op, sizeof op), SKY_EFORMAT);
}

SKY_TEST(quota)
{
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_owner_quota("sky-op-bob", 3, 4, "jobs waiting for boards", &d), 0);
	SKY_EXPECT_EQ(sky_owner_quota("sky-op-bob", 4, 4, "jobs waiting for boards", &d), SKY_ESTATE);
	SKY_EXPECT(strcmp(d.msg, "operator sky-op-bob has 4 jobs waiting for boards (its limit is 4)") ==
		   0);
	SKY_EXPECT_EQ(sky_owner_quota("sky-op-bob", 100, 0, "uploads", &d), 0);
}
