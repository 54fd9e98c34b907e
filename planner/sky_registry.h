/* The fleet registry: what the planner knows about each board, built only
 * from what boards said on their own topics (the broker's ACL vouches that
 * sky/v1/board/<id>/... came from <id>).
 *
 * Liveness follows session numbers (as Sparkplug B's bdSeq does) within a
 * boot: every board connection has a number larger than the last, and
 * every run of skyd draws a random boot id (sky_caps.h); status, heartbeats,
 * capability reports and plan-acks carry both. A board whose session file
 * was lost starts again at session 1 under a new boot id, so a message is
 * placed by (boot, session) with this rule:
 *   - same boot as the current one: ordered by session; an older session is
 *     stale (a late will from an old connection never marks a live board
 *     dead);
 *   - a retired boot (one that a newer boot replaced; the last
 *     SKY_REG_RETIRED_BOOTS are kept, and saved across planner restarts):
 *     stale, whatever its session number;
 *   - a boot never seen: only proof of life moves the board to it, that is
 *     an online status or a heartbeat (the board is connected now, under
 *     its certificate); the current boot is then retired. A capability
 *     report or plan-ack from an unseen boot is held until that boot
 *     proves itself, then applied. An offline status (a will) from an unseen
 *     boot is ignored: it cannot be placed, and liveness never depends on
 *     it, since the heartbeat deadline below still marks a silent board
 *     offline;
 *   - a board the registry has never heard from takes whatever comes first.
 * So a late will of the old boot that arrives after the new boot's online
 * message is stale, and a new boot's online message is never stale. A
 * board is offline when its current session's will arrives (killed, or
 * cut off and timed out by the broker), when it says so on a clean
 * shutdown, or when nothing has come from it for 1.5 x its keepalive (the
 * planner's own deadline, so the bound holds even if the broker is slow to
 * fire the will): with heartbeats every keepalive/4 and ticks every 100 ms,
 * a cut-off board is marked offline within 1.5 x keepalive + 0.1 s of its
 * last message.
 *
 * Malformed or absurd reports are refused with a log line naming the
 * field, counted, and change nothing. The registry is plain data with the
 * clock passed in, so tests drive it without a broker. */
#ifndef SKY_REGISTRY_H
#define SKY_REGISTRY_H

#include "sky_caps.h"
#include "sky_err.h"
#include "sky_planmsg.h"
#include "sky_topics.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_REG_MAX_BOARDS 1024
#define SKY_REG_RETIRED_BOOTS 4

/* revoked: its certificate is on the CA's CRL (sky pki revoke); it stays
 * revoked whatever it sends (sky_registry_revoke) */
typedef enum {
	SKY_REG_ENROLLED = 0,
	SKY_REG_ONLINE = 1,
	SKY_REG_OFFLINE = 2,
	SKY_REG_REVOKED = 3
} sky_reg_state;

typedef struct sky_reg_board {
	char id[SKY_TOPIC_SEGMENT_MAX + 1];
	sky_reg_state state;
	char why[24];          /* why offline: will, shutdown, timeout; why revoked: the
	                          reason code's name, or "revoked" */
	int64_t session;       /* newest seen within the current boot */
	char boot[SKY_BOOT_ID_MAX + 1]; /* the current boot ("" before any, or from old boards) */
	char retired[SKY_REG_RETIRED_BOOTS][SKY_BOOT_ID_MAX + 1]; /* replaced boots, newest first */
	/* a report and an ack from a boot not proven yet (held, see above) */
	int has_held_caps, has_held_ack;
	sky_caps held_caps;
	sky_planack held_ack;
	int keepalive_s;
	double last_heard;     /* monotonic seconds of the last message */
	int64_t last_seen;     /* Unix seconds of the last message (for people) */
	int has_caps;
	sky_caps caps;
	/* current assignment */
	char job[SKY_TOPIC_SEGMENT_MAX + 1]; /* empty: none */
	int64_t epoch;
	int stage, first, last;
	int replica;           /* stage replicas: which of the stage's boards (0: its own) */
	int plan_batch;        /* the plan's micro-batch (a hybrid plan may choose another
				* than the job's) */
	int64_t expected_bytes;
	/* the board's last answer to a plan (may be for another epoch) */
	char ack_job[SKY_TOPIC_SEGMENT_MAX + 1];
	int64_t ack_epoch;
	int ack;               /* 1 accepted, -1 refused (0: no answer yet) */
	int64_t ack_bytes, ack_budget;
	int ack_stage;          /* the stage the ack answers for */
	int64_t ack_expected;   /* what the plan it answers gave that role */
	char ack_reason[160];
} sky_reg_board;

typedef struct sky_reg_counters {
	long caps_ok, caps_rejected;   /* reports accepted / refused (malformed, absurd, id mismatch) */
	long status_rejected;          /* unreadable status or heartbeat */
	long stale_ignored;            /* from an older session or boot (late wills included) */
	long boots;                    /* boards that moved to a new boot */
	long oversize;                 /* refused unparsed for size */
	long retained_dropped;         /* retained copies on classes that take none */
	long acks_ok, acks_refused, acks_rejected; /* board accepted / board refused / unreadable */
	long timeouts;                 /* boards marked offline by the heartbeat deadline */
	long enrolled, enroll_refused;
	long plans_published;
	long revoked;                  /* boards revoked (sky_registry_revoke) */
	long revoked_ignored;          /* messages from revoked boards, dropped */
} sky_reg_counters;

#define SKY_REG_MAX_JOBS 256
#define SKY_REG_MAX_LINKS 64

/* A site-to-site path the planner knows (sky_plan.h: sky_site_link), from
 * a links file or measured through the bridges; "" is the core site. */
typedef struct sky_reg_link {
	char a[SKY_TOPIC_SEGMENT_MAX + 1], b[SKY_TOPIC_SEGMENT_MAX + 1];
	double bw_Bps, lat_s;
	int64_t measured_unix; /* when the figures were taken (0: given, not measured) */
} sky_reg_link;

typedef struct sky_registry {
	int n;
	sky_reg_board b[SKY_REG_MAX_BOARDS];
	int n_jobs;
	struct {
		char job[SKY_TOPIC_SEGMENT_MAX + 1];
		int64_t epoch; /* newest plan seen for it */
	} jobs[SKY_REG_MAX_JOBS];
	sky_reg_counters c;
	int n_links;
	sky_reg_link links[SKY_REG_MAX_LINKS];
	int changed; /* set by every change; the service clears it after saving */
} sky_registry;

void sky_registry_init(sky_registry *r);
/* The board with this id, or NULL. */
sky_reg_board *sky_registry_find(sky_registry *r, const char *id);
/* Finds or adds (state enrolled). NULL if id is invalid or the registry is full. */
sky_reg_board *sky_registry_add(sky_registry *r, const char *id);

/* A message on sky/v1/board/<id>/<leaf>: leaf caps, status, heartbeat or
 * plan-ack (others are ignored, return 0). now: monotonic seconds; unix:
 * wall clock. Returns 0 if taken, 1 if ignored as stale, or a negative
 * error (counted, logged by the caller from d). */
int sky_registry_on_board_msg(sky_registry *r, const char *id, const char *leaf,
			      const char *payload, size_t len, double now, int64_t unix_s,
			      sky_diag *d);

/* Marks board id revoked (adding it if unknown): from now on its caps,
 * status, heartbeats and acks are ignored (counted in revoked_ignored, the
 * call returns 1 with d saying so), it is never online again, and its
 * caps and assignment are dropped, so no plan uses it. why: the reason's
 * name (NULL or "": "revoked"). Returns 1 if it was revoked now, 0 if it
 * already was, SKY_EINVAL for a bad id or a full registry. */
int sky_registry_revoke(sky_registry *r, const char *id, const char *why);

/* Marks boards whose last message is older than 1.5 x keepalive offline
 * ("timeout"). Returns how many it marked. */
int sky_registry_tick(sky_registry *r, double now);
/* skyplan itself heard nothing for `seconds` because it did not run (its
 * loop stalled: a loaded machine, a slow disk): every online board's
 * deadline moves on by that much, so the planner's own deafness is not
 * taken for the boards' silence. Cannot fail. */
void sky_registry_excuse(sky_registry *r, double seconds);

/* Records the assignment of every stage of plan p for boards whose current
 * assignment is not newer, and clears the assignment of boards that held a
 * stage of the same job at an older epoch. A plan older than the newest
 * seen for its job changes nothing. */
void sky_registry_assign(sky_registry *r, const sky_planmsg *p);

/* Sets (or adds) the path between sites a and b (either way round; "" or
 * "core" is the core site): bandwidth > 0 and latency >= 0, finite.
 * Returns 0, SKY_EINVAL (a bad name or figure, or a == b), SKY_ENOMEM (the
 * table is full). */
int sky_registry_set_link(sky_registry *r, const char *a, const char *b, double bw_Bps,
			  double lat_s, int64_t measured_unix);

/* Writes the registry as the fleet status document (`sky fleet status`),
 * which is also the planner's saved state:
 *   {"v":1,"updated_at":"<UTC>","updated_unix":N,"counters":{...},
 *    "jobs":[{"job","epoch"}, ...],
 *    "links":[{"a","b","bw_Bps","lat_s","measured_unix"}, ...],   (site paths; "core" named)
 *    "boards":[{"id","state","why","last_seen","session","boot","retired_boots":[...],
 *               "version","board","caps":{...,"site"}|null,"assignment":{...}|null}, ...]}
 * Returns the length or SKY_ERANGE / SKY_ENOMEM. */
int sky_registry_to_json(const sky_registry *r, int64_t unix_s, char *buf, size_t cap);

const char *sky_reg_state_name(sky_reg_state s);
/* The board's answer to its current assignment: 1 accepted, -1 refused,
 * 0 pending (no answer for that job and epoch yet). */
int sky_reg_ack(const sky_reg_board *b);

/* Re-adds the boards of a fleet status document written before (a planner
 * restart): enrolled boards stay enrolled, revoked ones revoked, the
 * others are offline ("not heard yet") until they speak. Each board's boot, session and retired boots
 * come back (so stale messages stay stale across the restart), and so do
 * assignments (job, epoch, stage, half-layer range, expected bytes) and the
 * newest epoch of every job, and the site paths; caps and acks come back
 * from the retained messages. Returns how many boards it added or
 * SKY_EFORMAT. */
int sky_registry_restore(sky_registry *r, const char *buf, size_t len, sky_diag *d);

#endif
