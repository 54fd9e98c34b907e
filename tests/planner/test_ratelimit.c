#include "sky_test.h"

#include "sky_ratelimit.h"

#include <stdio.h>

SKY_TEST(bucket_allows_a_burst_then_the_rate)
{
	sky_bucket b;
	sky_bucket_init(&b, 3, 2); /* 3 at once, then 2 per second */
	int got = 0;
	for (int i = 0; i < 10; i++)
		got += sky_bucket_take(&b, 100.0);
	SKY_EXPECT_EQ(got, 3);
	SKY_EXPECT_EQ(sky_bucket_take(&b, 100.4), 0); /* 0.8 of a token */
	SKY_EXPECT_EQ(sky_bucket_take(&b, 100.5), 1);
	/* a long pause refills only up to the burst */
	got = 0;
	for (int i = 0; i < 10; i++)
		got += sky_bucket_take(&b, 200.0);
	SKY_EXPECT_EQ(got, 3);
	/* 3000 requests in 0.6 s: the burst and 0.6 s of rate, no more */
	sky_bucket_init(&b, 32, 16);
	got = 0;
	for (int i = 0; i < 3000; i++)
		got += sky_bucket_take(&b, 10.0 + 0.6 * i / 3000);
	SKY_EXPECT_MSG(got >= 32 && got <= 32 + 10, "%d taken", got);
	/* a clock that steps back takes nothing extra */
	SKY_EXPECT_EQ(sky_bucket_take(&b, 5.0), 0);
}

SKY_TEST(keyed_buckets_are_per_key_and_bounded)
{
	static sky_keyed_buckets k;
	sky_keyed_init(&k, 2, 0.5);
	SKY_EXPECT_EQ(sky_keyed_take(&k, "n1", 1.0), 1);
	SKY_EXPECT_EQ(sky_keyed_take(&k, "n1", 1.0), 1);
	SKY_EXPECT_EQ(sky_keyed_take(&k, "n1", 1.0), 0);
	SKY_EXPECT_EQ(sky_keyed_take(&k, "n2", 1.0), 1); /* another key has its own */
	SKY_EXPECT_EQ(sky_keyed_take(&k, "n1", 3.0), 1); /* 2 s: one more */
	/* more keys than slots: the table stays bounded, old keys start anew */
	char key[16];
	for (int i = 0; i < 3 * SKY_KEYED_MAX; i++) {
		snprintf(key, sizeof key, "k%d", i);
		SKY_EXPECT_EQ(sky_keyed_take(&k, key, 4.0 + i), 1);
	}
	SKY_EXPECT_EQ(sky_keyed_take(&k, "k0", 1000.0), 1);
}

SKY_TEST(throttle_collapses_a_flood_into_a_count)
{
	sky_log_throttle t;
	sky_log_throttle_init(&t, 5, 10.0);
	long flushed = -1;
	int printed = 0;
	for (int i = 0; i < 3000; i++) {
		printed += sky_log_throttle_allow(&t, 1.0 + 0.6 * i / 3000, &flushed);
		SKY_EXPECT_EQ(flushed, 0);
	}
	SKY_EXPECT_EQ(printed, 5);
	SKY_EXPECT_EQ(sky_log_throttle_flush(&t, 5.0), 0); /* window not over */
	SKY_EXPECT_EQ(sky_log_throttle_flush(&t, 11.5), 2995);
	SKY_EXPECT_EQ(sky_log_throttle_flush(&t, 30.0), 0);
	/* a line in a later window reports what the earlier one suppressed */
	for (int i = 0; i < 7; i++)
		sky_log_throttle_allow(&t, 31.0, &flushed);
	SKY_EXPECT_EQ(sky_log_throttle_allow(&t, 45.0, &flushed), 1);
	SKY_EXPECT_EQ(flushed, 2);
}
