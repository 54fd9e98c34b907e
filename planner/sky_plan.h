/* The planner: which board runs which layers.
 *
 * A fleet (boards with measured layer times, memory and links) and a job
 * (model, shapes, micro-batches, optimizer, schedule) go in; a plan comes
 * out: an ordered list of pipeline stages, each a board and a contiguous run
 * of half-layer units, with its predicted time per micro-batch and the bytes
 * it needs. Three algorithms sit behind one call (sky_plan_partition):
 *
 *   even     equal layer counts in the fleet's order (the paper's baseline)
 *   sky      the paper's dynamic allocation, as its code does it
 *   optimal  the shortest simulated step (the default objective; exact on
 *            small fleets), or with the bottleneck objective the exact
 *            minimum-bottleneck split for a board order plus a board-order
 *            heuristic with local search
 *
 * and a simulator (sky_sim_run) predicts one training step of a plan under
 * GPipe or 1F1B. A job that names a data owner (sky_job.owner) gets a
 * U-shaped plan instead (partition_owner.c): the owner's board holds the
 * first stage and the last, so its tokens and labels never leave it.
 *
 * Units. A model of L encoder layers has U = 2L units: unit 2i is layer i's
 * attention block, unit 2i+1 its feed-forward block (see sky_cost.h).
 *
 * Cost model (per micro-batch; sky_plan_evaluate is the one place it lives):
 *   compute  = (fwd_s + bwd_s) * (attention units * share + ffn units * (1 - share))
 *              where share is the board's attn_share, or the attention
 *              block's share of a layer's FLOPs when the fleet leaves it 0
 *   send     = lat_s + cut_bytes / bw_Bps for each message the stage sends on
 *              its own link: the activation forward (all but the last stage)
 *              and the gradient backward (all but the first)
 *   time     = compute + sends; the plan's bottleneck is the largest time
 *              (serving: + the board's embed_int8_s on the first stage and
 *              head_int8_s on the last, and share is its attn_share_int8)
 *   memory   = params * (weight + grad + optimizer bytes)
 *              + in_flight * saved activation bytes of its units
 *              + one layer's scratch + 4 cut buffers (act in/out, grad in/out)
 *              + the embedding on the first stage, the head on the last
 *   in_flight = m under GPipe; min(m, stages from this one to the end) under 1F1B
 * Receiving a message is assumed to overlap compute (full-duplex links); the
 * simulator still delays a message by the receiver's lat + bytes/bw.
 *
 * Sites (sky_caps.h). A board's link is its path to its own site's broker.
 * A cut between two stages of one site costs what is above (the sender's
 * link, then the receiver's: the site broker relays). A cut between two
 * sites also crosses the route between their brokers (a link the fleet
 * names for the pair, else site A's uplink to the core and the core's
 * downlink to site B, over the bridges; sky_fleet_site_path gives its
 * slowest hop and summed latency). Each hop, in each direction, is a FIFO
 * queue that every cut crossing it shares: a message is stored and
 * forwarded at each broker, holds a hop for cut_bytes / bw (wan_hop_s),
 * waits behind the messages that reached the hop before it (its own
 * cut's and other cuts' alike), and reaches the next broker the hop's
 * latency later (wan_hop_lat_s); activations forward and gradients
 * backward each take their own direction (links are full duplex). The
 * path does not occupy the sender. That is what the simulator runs. The
 * closed form, for the bottleneck and the searches, is a hop's load: per
 * micro-batch a hop is busy cut_bytes / bw for every stream that crosses
 * it (site B's uplink carries cut A|B's gradients and cut B|C's
 * activations; an interleaved order sends many streams over one uplink),
 * and a cut's wan_xfer_s (wan_xfer_b_s backward) is its busiest hop's
 * load: no step runs m micro-batches faster than m times that. A pair of
 * sites with no known path is charged nothing beyond the boards' links
 * (sky plan warns). The bottleneck counts a cut's load as a stage of its own
 * (the path's throughput). plan_price_cuts (plan_internal.h) is the one
 * place a cut is priced: the partition algorithms, sky_plan_evaluate and
 * the simulator all use its figures (the minimum-bottleneck split prices a
 * cut as if it had its route alone, so it is exact only when no two of
 * its streams share a hop; the step search and evaluation count every
 * stream).
 * With job.link_blind the planner prices every cut as if all boards were
 * in one site (Sky before sites), for comparison. In
 * training, the embedding lookup and the classifier head are counted in
 * memory but not in time (far below 0.1% of a layer's FLOPs for BERT); in
 * serving, where a layer is int8 and a batch's requests are parsed and its
 * responses written, the first and last stages' measured ends are added
 * (about 0.1 and 0.07 of an int8 `mini` layer's time).
 *
 * Memory: the fleet and plan structs are fixed-capacity (large: allocate
 * them statically or on the heap); `sky`, `optimal` and the simulator
 * allocate their working memory at the start of a call and free it before
 * returning (nothing is allocated inside their loops, except that the step
 * objective's sweep runs the exact split once per board count, and its
 * site-grouped seeds once per order, each run with its own working memory);
 * sky_plan_evaluate allocates a small table of the fleet's sites to price
 * the cuts, and frees it before returning. No global state: calls
 * on different threads do not interfere (the JSON pool is thread-safe). */
#ifndef SKY_PLAN_H
#define SKY_PLAN_H

#include "sky_caps.h"
#include "sky_cost.h"
#include "sky_err.h"
#include "sky_model.h"

#include <stdint.h>

#define SKY_PLAN_MAX_BOARDS 4096
#define SKY_PLAN_MAX_LAYERS 4096
#define SKY_PLAN_MAX_UNITS (2 * SKY_PLAN_MAX_LAYERS)
#define SKY_PLAN_MAX_MICRO 4096
#define SKY_BOARD_ID_MAX 64
#define SKY_FLEET_MAX_BYTES (16u << 20) /* a fleet file larger than this is refused */
#define SKY_PLAN_MAX_LINKS 256 /* site-to-site links a fleet may name */

/* One board as the planner sees it. Times are for one encoder layer and one
 * micro-batch at the job's shapes (what the board's probe measured). */
typedef struct sky_board {
	char id[SKY_BOARD_ID_MAX]; /* unique in the fleet */
	double fwd_s, bwd_s;       /* fp32 forward and backward of one layer, > 0 */
	double fwd_int8_s, bwd_int8_s; /* the same with int8 kernels; 0 = not measured */
	double attn_share;         /* share of a layer's time in its attention block,
				      in (0,1); 0 = take it from the FLOP counts */
	/* serving (sky_job.infer) only; 0 = not measured: */
	double attn_share_int8;    /* the same share of the int8 forward (else attn_share) */
	double embed_int8_s;       /* a first stage's time beyond its layers: requests
				      parsed and embedded, one micro-batch */
	double head_int8_s;        /* a last stage's: pooler, classifier, responses */
	int64_t mem_bytes;         /* memory Sky may use on the board, > 0 */
	double bw_Bps;             /* link bandwidth to its broker (its site's), bytes/s, > 0 */
	double lat_s;              /* link latency to its broker, >= 0 */
	char site[SKY_SITE_MAX + 1]; /* its site, "" = the core site (sky_caps.h) */
} sky_board;

/* A measured path between two sites' brokers (through the bridges), or one
 * hop of it: a site to the core ("core" is written as b or a). Symmetric. */
typedef struct sky_site_link {
	char a[SKY_SITE_MAX + 1], b[SKY_SITE_MAX + 1]; /* "" = the core site */
	double bw_Bps;             /* bytes/s, > 0 */
	double lat_s;              /* one way, >= 0 */
} sky_site_link;

typedef struct sky_fleet {
	int n;
	sky_board board[SKY_PLAN_MAX_BOARDS];
	int n_links;               /* 0: no site-to-site figures */
	sky_site_link link[SKY_PLAN_MAX_LINKS];
} sky_fleet;

typedef enum { SKY_SCHED_GPIPE = 0, SKY_SCHED_1F1B = 1 } sky_sched;
typedef enum { SKY_PREC_FP32 = 0, SKY_PREC_INT8 = 1 } sky_prec;
typedef enum { SKY_ALGO_EVEN = 0, SKY_ALGO_SKY = 1, SKY_ALGO_OPTIMAL = 2 } sky_algo;
/* SKY_OBJ_STEP (sky_job_init's default): the simulated training step
 * (sky_sim_run: fill, steady state and drain of the job's schedule, with
 * sends and memory limits); exact on small fleets, a seeded local search
 * on larger ones (partition_step.c). SKY_OBJ_BOTTLENECK: the slowest stage
 * (throughput once the pipeline is full), exact for a board order. */
typedef enum { SKY_OBJ_BOTTLENECK = 0, SKY_OBJ_STEP = 1 } sky_objective;
#define SKY_ALGO_COUNT 3

typedef struct sky_job {
	sky_model_cfg model; /* preset with layers, seq and batch (the micro-batch size) set */
	int micro_batches;   /* m, micro-batches per training step */
	sky_optim optim;
	sky_sched sched;
	sky_prec prec;       /* which measured times the stages use */
	/* knobs of `optimal` */
	int keep_order;      /* 1: plan for the fleet's order only (no reordering) */
	int order_evals;     /* local-search budget: board orders tried after the seeds */
	sky_objective objective; /* what `optimal` minimises (default the step) */
	/* 1: serving with int8 kernels: forward only (a stage's time is its
	 * int8 forward; no backward), int8 activations between stages (a cut
	 * is 1 byte per value, not 4), only the forward message is sent, and
	 * a stage's memory is its int8 layer weights (1 byte a parameter), the
	 * fp32 embeddings or head, a layer's scratch and the cut buffers.
	 * Plan it with prec SKY_PREC_INT8 and the bottleneck objective (the
	 * pipeline's throughput once full). */
	int infer;
	int link_blind;      /* 1: price cuts without sites (every board in one site) */
	int no_exact;        /* 1: the step search skips its branch and bound, as it does
				above 8 boards (tests measure the heuristic with it) */
	int fix_micro_batch; /* > 0: sky_plan_hybrid plans micro-batches of this many
				sequences only (M = the global batch / it): a re-plan of
				a running job, whose steps stay the sums of the same
				micro-batches; the boards' figures stay at model.batch */
	/* 1: the job checkpoints (training with ckpt_every > 0): each stage's
	 * arena also holds the image it sends, its blocks' weights and
	 * optimizer state (sky_ckpt_bound), so a unit weighs
	 * sky_cost_ckpt_bytes_per_param more per parameter */
	int ckpt;
	/* The data owner ("" none): the board whose data (tokens and labels)
	 * must stay on it. The plan is U-shaped (partition_owner.c): the owner
	 * holds stage 0 (embeddings and half-layers [0, a)) and the last stage
	 * (half-layers [b, U), head, labels, loss); the other boards split
	 * [a, b) between them. Both of the owner's stages run on its one CPU:
	 * the cost model adds their times and the simulator runs them as one
	 * machine (sky_sim_run). Planned with even or optimal. */
	char owner[SKY_BOARD_ID_MAX];
} sky_job;

/* One pipeline stage. Times are per micro-batch. */
typedef struct sky_stage {
	int board;            /* index into the fleet */
	int first_unit;       /* first half-layer unit (2*layer + 0 attention, 1 ffn) */
	int last_unit;        /* last unit, inclusive */
	double fwd_s, bwd_s;  /* compute forward and backward */
	double link_s;        /* one message on this board's link: lat + cut_bytes / bw */
	double send_s;        /* messages this stage sends per micro-batch * link_s */
	double time_s;        /* fwd_s + bwd_s + send_s */
	int in_flight;        /* micro-batches whose activations it keeps at once */
	int64_t mem_bytes;    /* what it needs */
	/* the cut to the next stage (0 for the last stage, in one site, or link-blind): */
	int cross_site;       /* 1: the next stage's board is in another site */
	double wan_lat_s;     /* latency of the site path between the two sites' brokers
				 (its hops' latencies added) */
	double wan_xfer_s;    /* the path's load per micro-batch forward: the busiest hop's
				 time spent on the plan's messages that cross it (the
				 cut's throughput limit, counted in the bottleneck) */
	double wan_xfer_b_s;  /* the same for the gradients coming back */
	/* the route, hop by hop, as the simulator runs it (forward direction;
	 * a gradient takes the hops in reverse, each the other way round): */
	int wan_hops;         /* 0 (no path priced), 1 (a named link) or 2 (via the core) */
	int wan_hop[2];       /* the hop: link index * 2 + direction (0: link's a to b) */
	double wan_hop_s[2];  /* one message alone on the hop: cut bytes / its bandwidth */
	double wan_hop_lat_s[2]; /* the hop's latency */
} sky_stage;

typedef struct sky_plan {
	sky_algo algo;
	int n_stages;
	sky_stage stage[SKY_PLAN_MAX_BOARDS + 1]; /* + 1: a data owner's board holds two */
	double bottleneck_s;  /* largest stage time (or a cut's path time, if larger) */
	int bottleneck_stage; /* that stage (for a cut: the stage before it) */
	int cross_site_cuts;  /* cuts whose two stages are in different sites */
	double wan_bytes_per_step; /* bytes that cross between sites per training step:
				      2 (activation, gradient) x m x cut bytes per such cut */
	double lower_bound_s; /* L / sum over all boards of 1/(fwd_s + bwd_s): no split beats it */
	/* set by `optimal` with the step objective (0 for the others): */
	double step_s;        /* the plan's simulated step (sky_sim_run's step_s) */
	int step_exact;       /* 1: proven the shortest step over every board order,
				 subset and contiguous split (small fleets, see
				 partition_step.c); 0: the best the search found */
	double step_lower_bound_s; /* no plan of any order, subset or split has a
				      shorter step (a relaxation that ignores
				      links and memory); the step when exact */
	/* U-shaped plans (sky_job.owner): */
	int owner;            /* 1: stage 0 and the last stage are the owner's board */
	int owner_lag;        /* the owner's op order (sky_plan_owner_order): how many
				 of its last stage's backwards its first stage's
				 backwards trail by; chosen by the simulator */
	double owner_time_s;  /* the owner's two stages' time_s added (in bottleneck_s) */
} sky_plan;

/* ---- fleet (fleet.c) ------------------------------------------------------ */

/* Empties f (no boards, no links). */
void sky_fleet_init(sky_fleet *f);
/* Checks every board: id non-empty, printable and unique; times finite and
 * positive (int8 ones 0 or positive, both or neither); attn_share 0 or in
 * (0,1); mem_bytes > 0; bw_Bps > 0 and finite; lat_s finite and >= 0; site
 * "" or a valid name (sky_site_ok), never "core" (normalised to "").
 * Every link: two different valid sites (at most one of them the core), no
 * pair twice, bw_Bps > 0 and finite, lat_s finite and >= 0.
 * Returns 0 or SKY_EINVAL with d naming the board or link and the field. */
int sky_fleet_validate(const sky_fleet *f, sky_diag *d);
/* Parses a fleet document (len bytes, no terminator needed) into f and
 * validates it. Format (every key documented in README):
 *   {"boards": [{"id": "rpi4-a", "fwd_s": 0.8, "bwd_s": 1.6,
 *                "fwd_int8_s": 0.3, "bwd_int8_s": 0.9,      (optional)
 *                "attn_share": 0.36,                          (optional)
 *                "attn_share_int8": 0.47, "embed_int8_s": 0.001,
 *                "head_int8_s": 0.0005,                       (optional: serving)
 *                "mem_bytes": 4294967296, "bw_Bps": 1.25e8, "lat_s": 0.002,
 *                "site": "factory"},                          (optional; "core" or
 *                                                              absent: the core site)
 *                ...],
 *    "links": [{"a": "factory", "b": "core", "bw_Bps": 2.5e6, "lat_s": 0.03}, ...],
 *                                                             (optional: site paths)
 *    "what": "free text" (optional)}
 * A board's bw_Bps / lat_s are its path to its own broker (its site's).
 * Returns 0, or SKY_EFORMAT / SKY_ERANGE / SKY_ENOTFOUND / SKY_EINVAL with d
 * naming the board (by id, or by index when the id is bad) and the field. */
int sky_fleet_parse(const char *buf, size_t len, sky_fleet *f, sky_diag *d);
/* Reads and parses a fleet file. SKY_ENOTFOUND / SKY_EIO for the file. */
int sky_fleet_load(const char *path, sky_fleet *f, sky_diag *d);
/* The same for the "links" alone (skyplan --links): "boards" may be absent
 * and is ignored; f->n is 0 afterwards. */
int sky_fleet_parse_links(const char *buf, size_t len, sky_fleet *f, sky_diag *d);
int sky_fleet_load_links(const char *path, sky_fleet *f, sky_diag *d);
/* Writes f as a fleet document into buf. Returns the length or SKY_ERANGE. */
int sky_fleet_write(const sky_fleet *f, const char *what, char *buf, size_t cap);
/* The path between the brokers of sites a and b ("" = core): a link f
 * names for the pair (either way round); else, for two sites other than the
 * core, the links a-core and core-b (*bw_Bps the smaller bandwidth, *lat_s
 * the sum). Returns 1 and fills both, 0 when a and b are one site (nothing
 * filled), SKY_ENOTFOUND when f knows no path. */
int sky_fleet_site_path(const sky_fleet *f, const char *a, const char *b, double *bw_Bps,
			double *lat_s);

/* ---- job and cost (cost.c) ------------------------------------------------ */

/* A job for preset `model` (NULL: "base") with its default shapes, 8
 * micro-batches, Adam, 1F1B, fp32, reordering on with the default budget.
 * Returns 0 or SKY_ENOTFOUND for an unknown preset. */
int sky_job_init(sky_job *j, const char *model);
/* Checks the job's fields (model shapes, 1 <= m <= SKY_PLAN_MAX_MICRO,
 * layers <= SKY_PLAN_MAX_LAYERS). Returns 0 or SKY_EINVAL naming the field. */
int sky_job_validate(const sky_job *j, sky_diag *d);
const char *sky_sched_name(sky_sched s);
const char *sky_algo_name(sky_algo a);
/* "even", "sky", "optimal" -> *out; "gpipe", "1f1b" -> *out. 0 or SKY_EINVAL. */
int sky_algo_parse(const char *name, sky_algo *out);
int sky_sched_parse(const char *name, sky_sched *out);
/* "bottleneck", "step" -> *out. 0 or SKY_EINVAL. */
int sky_objective_parse(const char *name, sky_objective *out);
const char *sky_objective_name(sky_objective o);

/* Fills every derived field of p (stage times, memory, in-flight counts,
 * the cuts' site paths, bottleneck, lower bound, cuts that cross sites and
 * their bytes) from the stages' boards and units. Checks that
 * every unit is assigned exactly once, in order, contiguously, that no board
 * is used twice, and that every stage fits its board's memory. Returns 0;
 * SKY_EINVAL (coverage, order, board index) or SKY_ENOMEM (a stage does not
 * fit: d names the board, what it needs and has) with the fields still
 * filled for what could be computed. */
int sky_plan_evaluate(const sky_fleet *f, const sky_job *j, sky_plan *p, sky_diag *d);
/* The lower bound alone: L / sum_j 1/(fwd_j + bwd_j) over the whole fleet
 * (exact for boards sharing one attn_share; it ignores links and memory). */
double sky_plan_lower_bound(const sky_fleet *f, const sky_job *j);

/* ---- partition (partition.c, partition_*.c) -------------------------------- */

/* Splits the job's layers over the fleet with algorithm `algo` into *out
 * (then evaluated as sky_plan_evaluate does). Returns 0, SKY_EINVAL for a
 * bad fleet or job, or SKY_ENOMEM when the algorithm finds no split that
 * fits: d names the shortfall (for `optimal` that means no split fits at
 * all: the job needs more memory than the fleet has). */
int sky_plan_partition(const sky_fleet *f, const sky_job *j, sky_algo algo, sky_plan *out,
		       sky_diag *d);

/* `optimal` for one given board order, without reordering: order[0..n_order)
 * are fleet indices (a board may be left out of the plan). Exact: the
 * smallest bottleneck over every contiguous split of the units into stages
 * on any subsequence of the order, within every board's memory, to a
 * relative 1e-12. Returns 0 or SKY_ENOMEM if no split fits. */
int sky_plan_optimal_order(const sky_fleet *f, const sky_job *j, const int *order, int n_order,
			   sky_plan *out, sky_diag *d);

/* ---- simulator (sim.c) ----------------------------------------------------- */

typedef struct sky_sim_result {
	double step_s;         /* from the first forward to the last backward */
	double bubble;         /* 1 - sum(busy) / (stages * step_s) */
	int n_stages;
	double busy_s[SKY_PLAN_MAX_BOARDS + 1]; /* per stage: compute + sends */
} sky_sim_result;

/* Simulates one training step of an evaluated plan: m micro-batches under
 * the job's schedule (GPipe: all forwards, then backwards in reverse order;
 * 1F1B: min(stages - k - 1, m) warm-up forwards on stage k, then one forward
 * one backward, then the rest of the backwards). An operation starts when
 * its stage is free and its input has arrived: a message leaves when the
 * sender's compute and send are done and arrives after the receiver's link
 * time (between sites, after its route's hops, each a FIFO queue shared by
 * the plan's cuts, stored and forwarded at each broker). Returns 0, SKY_EINVAL for an empty plan, SKY_ENOMEM if working
 * memory cannot be had. */
int sky_sim_run(const sky_plan *p, const sky_job *j, sky_sim_result *out, sky_diag *d);

/* The owner's one op order in a U-shaped plan of P stages (P >= 3, m
 * micro-batches, lag >= 0): 4m entries, stage[i] 0 or P-1 and op[i] as the
 * schedules number them (mb >= 0 a forward, -(mb + 1) a backward). Each
 * stage keeps its own schedule order; the last stage's ops come one by one,
 * and before each the first stage runs ahead as far as it may: its
 * forwards, and its backward of the j-th micro-batch (in backward order)
 * once the last stage has done j + 1 + lag backwards (a gradient needs the
 * trip through the middle stages: the lag leaves time for it). The lag is
 * capped at the first stage's leading forwards - 1, above which a held
 * back backward would hold back a forward the last stage needs. No order
 * deadlocks (tested in the simulator for P <= 7, m <= 10, every lag), and
 * the runtime (sky_schedule_owner_ops) uses the same rule. Returns 4m. */
int sky_plan_owner_order(sky_sched sched, int P, int m, int lag, int *stage, int *op);

/* ---- the paper's fleet (paper.c) ------------------------------------------- */

/* The Sky Computing paper's experiment (arXiv 2202.11836; its code,
 * hpcaitech/SkyComputing, experiment/config.py): 63 worker boards, worker i
 * slowed by a factor slowdown_plus_one[i] in {2..7}. */
#define SKY_PAPER_WORKERS 63
extern const double sky_paper_slowdown_plus_one[SKY_PAPER_WORKERS];
/* What the planner assumes for the experiment (all stated in README). */
/* BERT-large layer, micro-batch 1 x 128 tokens, fp32, one thread, measured
 * on the development machine (best of 3 x 15 runs of `sky bench layer
 * --model large --batch 1 --seq 128`, 2026-11-30): forward 29.3 ms,
 * forward + backward 83.1 ms. An unslowed worker runs at this speed. */
#define SKY_PAPER_LAYER_FWD_S 0.0293
#define SKY_PAPER_LAYER_BWD_S 0.0538
#define SKY_PAPER_BATCH 32
#define SKY_PAPER_SEQ 128
#define SKY_PAPER_LAYERS 160
#define SKY_PAPER_MICRO_BATCHES 32    /* micro-batches of one sequence */
#define SKY_PAPER_MEM_BYTES (4ll << 30) /* every worker: a 4 GiB board */
#define SKY_PAPER_BW_BPS 125e6        /* 1 Gbit/s to the broker */
#define SKY_PAPER_LAT_S 0.0005

/* The paper's job: BERT-large, 160 layers, batch 32 as 32 micro-batches of
 * one sequence of 128 tokens, Adam, 1F1B. */
int sky_paper_job(sky_job *j);
/* The paper's fleet for that job: worker i's layer times are the measured
 * ones above times slowdown_plus_one[i] (for other shapes than the paper's
 * they are scaled by the FLOP ratio). */
void sky_paper_fleet(const sky_job *j, sky_fleet *f);


/* ---- hybrid plans: stage replicas and micro-batching (hybrid.c, partition_hybrid.c)
 *
 * A planner-side plan in which a stage may run on R boards at once (data
 * parallel inside the pipeline). The job's global batch G = job.model.batch
 * x job.micro_batches is trained as M micro-batches of B sequences (B x M =
 * G, both chosen by the planner). Stage k's replicas share the M
 * micro-batches (replica r takes share[r] >= 1 of them, unequal shares
 * allowed, summing to M). Routing: micro-batch mb goes, at each stage, to
 * the replica furthest behind its share (the largest share * (mb + 1) / M
 * - taken so far; the first replica on a tie), so each replica's
 * micro-batches are spread evenly over the step. Every replica holds the
 * stage's weights, gradients and optimizer state; at the end of the step
 * the replicas of a stage reduce their gradients (sky_hsim_run says how
 * that is timed). The pipeline plan (sky_plan) and the signed wire plan are
 * untouched: a hybrid plan with one replica per stage and the job's B and M
 * is today's pipeline plan, and simulates to the same step.
 *
 * Cost model: a board's measured fwd_s / bwd_s are at the job's micro-batch
 * size B0 = job.model.batch; at B they are taken as B / B0 times that
 * (compute linear in the sequences; small batches are in truth a little
 * less efficient per sequence, which this ignores). Cut bytes, saved
 * activations and scratch are the cost model's at B. Cuts are priced by the
 * boards' links only (hybrid plans are planned for one-site fleets). */
#define SKY_HPLAN_MAX_REPS 64 /* replicas of one stage */

typedef struct sky_hrep {
	int board;            /* index into the fleet */
	int share;            /* micro-batches it runs per step, >= 1 */
	double fwd_s, bwd_s;  /* compute per micro-batch of B */
	double link_s;        /* one message of B sequences on its link: lat + cut / bw */
	double attn_share;    /* its board's share of a layer's time in attention */
	int in_flight;        /* GPipe: share; 1F1B: min(share, stages from here to the end) */
	int64_t mem_bytes;    /* weights + gradients + optimizer + in_flight x saved + scratch */
} sky_hrep;

typedef struct sky_hstage {
	int first_unit, last_unit; /* half-layer units, inclusive */
	int n_rep;
	sky_hrep rep[SKY_HPLAN_MAX_REPS];
	double grad_bytes;    /* the stage's fp32 gradient (what its replicas reduce) */
} sky_hstage;

typedef struct sky_hplan {
	int micro_batch;      /* B: sequences per micro-batch */
	int micro_batches;    /* M: micro-batches per step (B x M = the job's global batch) */
	int n_stages;
	sky_hstage *stage;    /* heap, cap entries (sky_hplan_alloc) */
	int cap;
	/* set by sky_plan_hybrid: */
	double step_s;        /* simulated step (sky_hsim_run) */
	int step_exact;       /* 1: proven the shortest over every plan it searches (small fleets) */
	double work_bound_s;  /* G sequences' compute / the fleet's total speed */
	double path_bound_s;  /* one micro-batch of the smallest B through the model and back */
	double step_lower_bound_s; /* max of the two (the step when exact): no plan is shorter */
	double pipeline_step_s; /* the pipeline-only optimal's simulated step (a seed) */
	int evals;            /* plans simulated */
} sky_hplan;

/* 0 or SKY_ENOMEM; cap stages. sky_hplan_free is NULL-safe, twice-safe. */
int sky_hplan_alloc(sky_hplan *h, int cap);
void sky_hplan_free(sky_hplan *h);
/* Boards the plan uses (replicas over all stages). */
int sky_hplan_boards(const sky_hplan *h);
/* Fills each replica's times, in-flight count and memory and each stage's
 * gradient bytes from its boards, units, shares and h's B and M. Checks: B
 * x M = the job's global batch, units covered once in order, no board
 * twice, shares >= 1 summing to M per stage, every replica within its
 * board's memory, one site. 0, SKY_EINVAL naming what is wrong, SKY_ENOMEM
 * naming the board that does not fit. */
int sky_hplan_evaluate(const sky_fleet *f, const sky_job *j, sky_hplan *h, sky_diag *d);
/* The replica (index in its stage) micro-batch mb goes to at stage k. */
int sky_hplan_route(const sky_hstage *s, int M, int mb);

typedef struct sky_hsim_result {
	double step_s;        /* last backward or last reduction chunk, whichever is later */
	double compute_end_s; /* the last backward */
	double reduce_end_s[SKY_PLAN_MAX_BOARDS]; /* per stage (0: one replica) */
	double reduce_s[SKY_PLAN_MAX_BOARDS];     /* per stage: its chunks' link time, alone */
} sky_hsim_result;

/* Simulates one step of an evaluated hybrid plan (the model is stated in
 * hybrid.c and docs/planner.md). 0, SKY_EINVAL, SKY_ENOMEM, SKY_ESTATE when
 * the schedule deadlocks. */
int sky_hsim_run(const sky_fleet *f, const sky_hplan *h, const sky_job *j, sky_hsim_result *out,
		 sky_diag *d);
/* The pipeline plan p (evaluated) as a hybrid plan: one replica a stage,
 * the job's B and M. 0 or SKY_ENOMEM / SKY_EINVAL. */
int sky_hplan_from_plan(const sky_fleet *f, const sky_job *j, const sky_plan *p, sky_hplan *h,
			sky_diag *d);
/* work_bound_s, path_bound_s and their max, valid for every hybrid plan of
 * the job on the fleet (any B, boards, replicas, shares, split). */
void sky_hplan_bounds(const sky_fleet *f, const sky_job *j, double *work_s, double *path_s);
/* `optimal` with replicas: the shortest simulated step over stage
 * boundaries, which boards form each stage and how many, each replica's
 * share, and B (a divisor of the global batch, M = G / B). Exact (an
 * exhaustive search with pruning, step_exact = 1) on fleets of at most
 * SKY_HYBRID_EXACT_BOARDS boards, SKY_HYBRID_EXACT_UNITS units and a global
 * batch of at most SKY_HYBRID_EXACT_BATCH; otherwise seeded from the
 * pipeline-only optimal (whose step it never exceeds when that plan fits
 * with every stage's fixed-point sums, hybrid.c) and improved by a
 * simulator-driven local search. Training only, one site, no data owner,
 * no kept order: SKY_EINVAL saying which. SKY_ENOMEM when nothing fits. */
#define SKY_HYBRID_EXACT_BOARDS 4
#define SKY_HYBRID_EXACT_UNITS 8
#define SKY_HYBRID_EXACT_BATCH 8
int sky_plan_hybrid(const sky_fleet *f, const sky_job *j, sky_hplan *out, sky_diag *d);

#endif
