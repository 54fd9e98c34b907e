/* The planner's Prometheus metrics: the text exposition format (version
 * 0.0.4) rendered from the fleet registry and from what the data plane
 * feeds in, into a caller's buffer, so it is tested without HTTP.
 *
 * Families (every one with HELP and TYPE once, samples under it):
 *   sky_build_info{version}                      gauge, 1
 *   sky_registry_updated_timestamp_seconds       gauge, the snapshot's time
 *                                                (fleet.json's updated_unix)
 *   sky_boards{state=online|offline|enrolled}    gauge
 *   sky_board_online{board}                      gauge, 1 or 0
 *   sky_board_last_seen_timestamp_seconds{board} gauge, boards heard from
 *   sky_board_layer_forward_seconds{board}       gauge  \
 *   sky_board_layer_backward_seconds{board}      gauge   | from the board's
 *   sky_board_layer_int8_forward_seconds{board}  gauge   | last capability
 *   sky_board_memory_budget_bytes{board}         gauge   | report (the
 *   sky_board_link_rtt_seconds{board}            gauge   | figures `sky fleet
 *   sky_board_link_bandwidth_bytes_per_second{board} gauge | status` shows)
 *   sky_board_probe_duration_seconds{board}      gauge  /
 *   sky_board_stage{board,job}                   gauge, the stage it holds
 *   sky_job_plan_epoch{job}                      gauge, newest plan epoch
 *   sky_job_replans_total{job}                   counter, fed (0 until then)
 *   sky_messages_refused_total{reason}           counter, registry counters
 *   sky_caps_reports_accepted_total, sky_board_boots_total,
 *   sky_board_heartbeat_timeouts_total, sky_enrollments_total,
 *   sky_plans_published_total, sky_plan_acks_total{answer} counters
 *   sky_job_step_measured_seconds{job}           gauge, fed
 *   sky_job_step_predicted_seconds{job}          gauge, fed
 *   sky_frames_dropped_total{job,reason}         counter, fed
 * A fed family has HELP and TYPE but no sample until something is fed.
 *
 * Threads: the registry belongs to skyplan's main loop. The main loop
 * renders a snapshot (sky_metrics_publish, called where it saves
 * fleet.json, with the registry lock held) and the HTTP thread serves the
 * newest snapshot (sky_metrics_scrape); m->lock guards the snapshot and
 * the fed figures, never the registry. So a scrape is at most one save
 * interval old (200 ms while the fleet changes, 2 s otherwise) and agrees
 * with the fleet.json written at the same moment. */
#ifndef SKY_METRICS_H
#define SKY_METRICS_H

#include "sky_err.h"
#include "sky_registry.h"
#include "sky_thread.h"
#include "sky_topics.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SKY_METRICS_MAX_JOBS 64
#define SKY_METRICS_MAX_REASONS 16
#define SKY_METRICS_REASON_MAX 31
/* 1024 boards x ~10 samples x ~90 bytes, plus jobs, with room */
#define SKY_METRICS_MAX_TEXT (2u << 20)
#define SKY_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef struct sky_metrics_job {
	char job[SKY_TOPIC_SEGMENT_MAX + 1];
	int has_measured, has_predicted;
	double step_measured_s, step_predicted_s;
	long replans;
	int n_drops;
	struct {
		char reason[SKY_METRICS_REASON_MAX + 1];
		long count;
	} drops[SKY_METRICS_MAX_REASONS];
	int n_refused;
	struct {
		char reason[SKY_METRICS_REASON_MAX + 1];
		long count;
	} refused[SKY_METRICS_MAX_REASONS]; /* job messages refused, by reason */
} sky_metrics_job;

typedef struct sky_metrics {
	sky_mutex lock; /* the fed figures and the published snapshot */
	int n_jobs;
	sky_metrics_job jobs[SKY_METRICS_MAX_JOBS];
	_Atomic int serving; /* publish renders only while someone serves */
	size_t text_len;     /* 0: nothing published yet */
	char text[SKY_METRICS_MAX_TEXT];    /* the published snapshot */
	char scratch[SKY_METRICS_MAX_TEXT]; /* publish renders here (main loop only) */
} sky_metrics;

/* Cannot fail; zeroes m (it is large: keep it static). */
void sky_metrics_init(sky_metrics *m);
void sky_metrics_free(sky_metrics *m);
/* The process's instance, which skyplan serves and the data plane feeds
 * (initialised once, on first use, from any thread). */
sky_metrics *sky_metrics_default(void);

/* The data plane's setters; any thread. job is a topic segment, reason
 * 1 to SKY_METRICS_REASON_MAX characters. Return 0, SKY_EINVAL for a bad
 * name or value, or SKY_ENOMEM when SKY_METRICS_MAX_JOBS jobs (or
 * SKY_METRICS_MAX_REASONS reasons of a job) are already held. */
int sky_metrics_set_step_measured(sky_metrics *m, const char *job, double seconds);
int sky_metrics_set_step_predicted(sky_metrics *m, const char *job, double seconds);
int sky_metrics_add_frames_dropped(sky_metrics *m, const char *job, const char *reason, long n);
int sky_metrics_add_replan(sky_metrics *m, const char *job);
/* A message on the job's topics refused (sender not allowed by the plan,
 * revoked, rate limited): sky_job_messages_refused_total{job,reason}. */
int sky_metrics_add_refused(sky_metrics *m, const char *job, const char *reason);

/* Renders every family from r (may be NULL: no boards, no jobs) as of
 * unix_s and the fed figures of m. Takes m->lock; the caller holds
 * whatever guards r. Returns the length written (NUL-terminated), or
 * SKY_ERANGE if cap is too small. */
int sky_metrics_render(sky_metrics *m, const sky_registry *r, int64_t unix_s, char *buf,
		       size_t cap);

/* Renders into m->scratch and makes it the snapshot that scrapes get.
 * Does nothing (returns 0) unless m is being served. Main loop only.
 * Returns 0 or SKY_ERANGE (the old snapshot stays). */
int sky_metrics_publish(sky_metrics *m, const sky_registry *r, int64_t unix_s);
/* Marks m served or not (the HTTP part does this). */
void sky_metrics_set_serving(sky_metrics *m, int on);
/* Calls fn(text, len, arg) with the newest snapshot under m->lock (len 0
 * before the first publish) and returns what fn returns. */
int sky_metrics_scrape(sky_metrics *m, int (*fn)(const char *text, size_t len, void *arg),
		       void *arg);

#endif
