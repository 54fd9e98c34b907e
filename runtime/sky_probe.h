/* The board probe: what this board can do for one job's model and shapes.
 *
 * It times one encoder layer (sky_layer.h) at the job's shapes, block by
 * block (attention forward, feed-forward forward, feed-forward backward,
 * attention backward: the half-layers a plan cuts at), on random weights
 * and inputs, and, when the int8 kernels can run it, the whole layer's int8
 * forward (sky_layer_s8.h, calibrated on the probe's own input; inference
 * only), its attention and FFN halves timed apart (a serving stage may start
 * or end at either). Each figure is the median of the measured runs.
 *
 * It also times the serving ends at the job's shapes (int8 on): what a
 * serving stage does per batch beyond its int8 half-layers when it is the
 * first (parse B requests of S token ids, as `sky bench infer` sends them,
 * and embed the B*S tokens: int8_embed_s) or the last (pooler and
 * classifier of B sequences and B response documents: int8_head_s). They
 * are timed as the serving job runs them (sky_servejob.h): the embedding
 * and the head inside the stage's forward, so through the profile's
 * stretch; parsing and response writing outside it, so not stretched.
 * Publishing the messages is not timed (the link probe's business).
 *
 * The bound (max_s, default 3 s) holds on a slow board too. A board that
 * cannot run the job's shape a few times within it times a smaller shape
 * and scales: the probe climbs a ladder from one sequence of 16 tokens (seq
 * doubling up to S, then the batch doubling up to B), jumping after each run
 * to the largest rung whose warm-up and three runs are predicted (from that
 * run, by FLOPs) to fit what is left, and scales the medians to the job's
 * shape by each block's FLOP ratio: exact in work for a sub-batch, by the
 * formula's S^2 term for a shorter sequence. The fp32 part gets 60% of
 * max_s, the int8 part (its calibration and quantisation included) the rest.
 * Only a floor can pass the bound: the first rung's warm-up and one measured
 * run, then int8's first-rung setup, warm-up and run, then the ends' warm-up
 * and three runs (a few ms at the job's shapes). On this 2-core machine
 * (loaded) a `mini` probe took 2.0-2.4 s natively (3 s bound; 0.26-0.31 s
 * at 0.3 s) and 2.9-6.8 s under qemu-aarch64 -cpu max (3 s; was 80 s,
 * most of it two full-shape fp32 runs of 29 s). Scaled against a probe of the
 * job's shape itself (tools/probe-scale-check.sh, median of rounds): natively
 * from batch 1-4 x seq 128, fp32 1.06x, int8 1.03x; from the first rung
 * natively 2.0x and 1.55x (small GEMMs run slower per FLOP); under qemu
 * -cpu max from the first rung 0.75x and 1.13x (5 rounds; single rounds
 * 0.3x-1.5x, the machine's load changing under 150-450 s full probes).
 * Compute goes through sky_profile_stretch, so a board emulating a slower
 * board (profile speed < 1) measures the time its steps will really take.
 *
 * Memory comes from one arena: measure, allocate once, seal; the timed
 * loop allocates nothing. The memory budget is sky_profile_mem_budget (the
 * smaller of the profile's cap and what the OS says is available). The
 * link (bandwidth and latency through the broker) needs the connection and
 * is measured by the agent (sky_agent.h).
 *
 * Results are cached in <state>/probe-cache.json keyed by board id, build,
 * profile (name, threads, speed) and model shape; any change invalidates
 * the cache and the next start probes again. */
#ifndef SKY_PROBE_H
#define SKY_PROBE_H

#include "sky_caps.h"
#include "sky_err.h"
#include "sky_model.h"
#include "sky_profile.h"

#include <stdint.h>

#define SKY_PROBE_DEFAULT_MAX_S 3.0
#define SKY_PROBE_CACHE_FILE "probe-cache.json"

typedef struct sky_probe_opts {
	sky_model_cfg model; /* hidden, heads, ffn, seq, batch are what count */
	int warmup;          /* unmeasured runs at each shape tried (default 1; at least 1) */
	int runs;            /* measured runs, at most (default 7) */
	double max_s;        /* the bound on the whole probe (default 3 s); see above */
	uint64_t seed;
	int int8;            /* 1: also time the int8 forward (default 1) */
} sky_probe_opts;

typedef struct sky_probe_result {
	sky_caps_times fp32;  /* medians, seconds per micro-batch */
	int has_int8;
	double int8_fwd_s;    /* int8 whole-layer forward: its two halves' medians */
	double int8_attn_s;   /* the attention half of it */
	int has_ends;         /* the serving ends were timed */
	double int8_embed_s;  /* first serving stage: requests parsed and embedded, one batch */
	double int8_head_s;   /* last serving stage: head and responses, one batch */
	int runs;             /* measured runs done */
	int timed_batch;      /* the shape the fp32 runs were timed at: the job's, */
	int timed_seq;        /* or a smaller one when that would not fit the bound */
	double scale_attn;    /* FLOP ratio job/timed shape applied to the attention */
	double scale_ffn;     /* and the feed-forward figures (1 at the job's shape) */
	int int8_batch;       /* the shape the int8 forward was timed at */
	int int8_seq;
	int ladder_steps;     /* fp32 shapes tried, the timed one included */
	double layer_cv;      /* coefficient of variation of whole-layer times over the runs */
	double probe_s;       /* wall time of the probe, warm-up included */
	uint64_t arena_bytes; /* what the probe's arena held */
	uint64_t mem_budget;  /* sky_profile_mem_budget */
} sky_probe_result;

/* warmup 1, runs 7, max_s 3, seed 1, int8 on, model as given. */
void sky_probe_opts_default(sky_probe_opts *o, const sky_model_cfg *model);

/* Runs the probe. prof may be NULL (defaults). Returns 0, SKY_EINVAL (bad
 * model), or SKY_ENOMEM (the arena cannot be had) with d set. */
int sky_probe_run(const sky_probe_opts *o, sky_profile *prof, sky_probe_result *r, sky_diag *d);

/* The cached probe for (id, prof, o->model) from <state_dir>, or a fresh
 * probe that is then written there. Fills c's shape, fp32, probe_s,
 * probed_at, threads, board and version (SKY_VERSION), mem_bytes (always
 * re-read: available memory changes); leaves link and session alone.
 * *hit is 1 when the cache answered. Returns 0 or the sky_probe_run errors
 * (a cache that cannot be written is only logged). */
int sky_probe_cached(const char *state_dir, const char *id, const sky_probe_opts *o,
		     sky_profile *prof, sky_caps *c, int *hit, sky_diag *d);

/* Bytes of the arena a stage holding half-layers [first, last] of model c
 * needs, measured by carving it into a measuring arena: parameters,
 * gradients and Adam's two moments for its units (and the embeddings on the
 * first stage, the classifier on the last), activations kept for backward
 * times in_flight micro-batches, one layer's scratch, and four cut buffers
 * (activation in and out, gradient in and out). If buf is not NULL and
 * cap is at least that, carves the same layout into buf and seals it (the
 * agent uses this to reserve the memory). Returns the byte count (> 0) or
 * SKY_EINVAL for a bad range. */
int64_t sky_probe_stage_bytes(const sky_model_cfg *c, int first, int last, int n_units,
			      int in_flight, void *buf, uint64_t cap);

#endif
