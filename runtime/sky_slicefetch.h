/* A board getting the slice its serving plan names (the agent's side of
 * deployment; the cache and the chunk checks are sky_slicecache.h).
 *
 * sky_slicefetch_start looks in <state>/slices: a file that hashes to the
 * plan's slice is a cache hit (counted, logged, nothing downloaded).
 * Otherwise the download starts, or resumes from the verified chunks of a
 * .part left by an earlier run: the board subscribes to
 * sky/v1/job/<job>/slice/<id> and asks on sky/v1/board/<id>/slice-req from
 * its first missing chunk. Chunks go through sky_slicefetch_on_msg; bad ones
 * are dropped and counted by reason. If nothing arrives for
 * SKY_SLICEFETCH_RETRY_S the board asks again (from where it is), which
 * also covers a planner or a connection that restarted; after a reconnect
 * it subscribes and asks again at once. The counters go to
 * <state>/slices/stats.json (sky_slicecache_stats_save; a restart goes on
 * counting from it) and the log says
 * what happened: "slice cache hit", "resuming", "slice ... in place: N
 * chunks fetched, K resumed". */
#ifndef SKY_SLICEFETCH_H
#define SKY_SLICEFETCH_H

#include "sky_err.h"
#include "sky_planmsg.h"
#include "sky_slicecache.h"
#include "sky_topics.h"
#include "sky_transport.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_SLICEFETCH_RETRY_S 5.0

typedef struct sky_slicefetch {
	char dir[600]; /* <state>/slices */
	char board[SKY_TOPIC_SEGMENT_MAX + 1];
	sky_slice_rx rx;
	sky_slice_stats st;
	int fetching;   /* a download runs */
	int subscribed; /* to its chunk topic, in this connection */
	char topic[SKY_TOPIC_BUF];
	char job[SKY_TOPIC_SEGMENT_MAX + 1];
	int64_t epoch;
	double asked_at;   /* last request (monotonic; 0: not yet) */
	double heard_at;   /* last verified chunk */
	long fetched;      /* chunks received for this download */
	long long wire_bytes; /* chunk messages' bytes for this download */
} sky_slicefetch;

/* Cannot fail: directories are made when first needed. */
void sky_slicefetch_init(sky_slicefetch *f, const char *state_dir, const char *board);

/* For job's slice s at epoch: returns 1 if it is in the cache (its path in
 * path), 0 if a download started (net may be not connected yet: the next
 * tick asks), or an error with d saying why. */
int sky_slicefetch_start(sky_slicefetch *f, const char *job, int64_t epoch,
			 const sky_plan_slice *s, const sky_transport_net *net, char *path,
			 size_t cap, sky_diag *d);

/* A received message. Returns 0 if it is not on a slice topic of this
 * board, 1 if it was one (taken or dropped), 2 when it completed the
 * download (the slice's path in path). */
int sky_slicefetch_on_msg(sky_slicefetch *f, const char *topic, const unsigned char *p, size_t len,
			  char *path, size_t cap);

/* Subscribes and asks when due (start, reconnect, no progress). */
void sky_slicefetch_tick(sky_slicefetch *f, double now, const sky_transport_net *net);

/* The connection was made anew: subscribe and ask again at the next tick. */
void sky_slicefetch_reconnected(sky_slicefetch *f);

#endif
