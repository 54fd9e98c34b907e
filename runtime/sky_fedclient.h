/* A federated owner's local training (docs/federation.md): the round's
 * global model in, E local steps on the owner's own shard, its weights
 * out. Used by skyd (runtime/agent_fed.c) for an owner that holds the
 * model alone, and by `sky fed ref`, which runs every owner of a job in
 * one process to compute the reference the fleet must equal bit for bit.
 *
 * The rule, the same everywhere: round r's local step k is the job's step
 * s = r * E + k. It reads the rows sky_trainorder gives step s of the
 * owner's shard (seeded by the job's seed), its dropout masks are keyed by
 * s, its learning rate is sky_optim_lr_at(lr, s, rounds * E, warmup). The
 * owner's optimizer state is its own and carries over from round to round;
 * each round starts from the global weights. With FedProx (prox_mu > 0)
 * every step adds mu * (w - w_global) to the gradients after clipping;
 * with DP (dp_clip > 0) the update (weights - global) is clipped to that
 * L2 norm before it is sent (sky_dp_clip). With one owner and one round of
 * all the steps, this is `sky train --data` with the same options.
 *
 * Memory: one arena for the model (malloc'd at init), the shard's row
 * order and one step's token buffers; a round allocates nothing. */
#ifndef SKY_FEDCLIENT_H
#define SKY_FEDCLIENT_H

#include "sky_bert.h"
#include "sky_dataset.h"
#include "sky_err.h"
#include "sky_hfmodel.h"
#include "sky_trainorder.h"

#include <stddef.h>
#include <stdint.h>

#define SKY_FEDCLIENT_MAX_MICRO 64

typedef struct sky_fedclient_opts {
	int batch, micro, local_steps;
	long total_steps; /* rounds x local_steps */
	char optim[8];    /* adamw, sgd */
	double lr, clip;
	int seed, warmup;
	double prox_mu, dp_clip;
} sky_fedclient_opts;

typedef struct sky_fedclient {
	sky_fedclient_opts o;
	sky_hf_config *hc; /* the bundle's config (heap: it is large) */
	sky_bert m;
	void *buf;
	const sky_dataset *ds; /* the caller's, open for the client's life */
	sky_trainorder ord;
	uint32_t *perm;
	int32_t *ids, *types, *attn, *labels;
	sky_bert_batch views[SKY_FEDCLIENT_MAX_MICRO];
	float *global; /* (n_params) the round's global weights (FedProx, DP) */
	float base_lr;
	double last_loss;
} sky_fedclient;

/* Sets c up: the model of config (config.json text) at the shard's seq and
 * o's batch, carved in one arena and sealed. Returns 0, or SKY_EINVAL /
 * SKY_EFORMAT / SKY_ENOMEM with d saying what (a shard whose labels do not
 * match the model's, fewer rows than one step, an unknown optimizer). */
int sky_fedclient_init(sky_fedclient *c, const char *config, size_t config_len,
		       const sky_dataset *ds, const sky_fedclient_opts *o, sky_diag *d);

/* The model's words (floats), which a bundle must carry. */
uint64_t sky_fedclient_words(const sky_fedclient *c);

/* Round r: the model set to global[0..words), E local steps, the weights
 * (or, with DP, global + the clipped update) into out[0..words). Returns 0
 * or a training step's error (d says which step). */
int sky_fedclient_round(sky_fedclient *c, uint64_t round, const float *global, float *out,
			sky_diag *d);

/* NULL-safe; may be called twice. */
void sky_fedclient_free(sky_fedclient *c);

/* The bundle (sky_fedmsg.h) of the model directory dir: its config.json
 * and its weights as sky_bert loads them (from the seed instead with
 * init_weights), into *out (malloc'd, *len bytes). Returns 0 or an error
 * with d saying what. */
int sky_fedclient_bundle_dir(const char *dir, int init_weights, int seed, unsigned char **out,
			     size_t *len, sky_diag *d);

/* A bundle's model into a Hugging Face directory (config, weights; label
 * names from the config). Returns 0 or an error with d saying what. */
int sky_fedclient_save_dir(const unsigned char *bundle, size_t len, const char *dir,
			   sky_diag *d);

#endif
