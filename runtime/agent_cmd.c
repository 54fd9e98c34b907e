/* The planner's commands to a board, on sky/v1/board/<id>/cmd: a probe at
 * given shapes (it saw this board's times drift), and a checkpoint after a
 * given step (a voluntary re-plan is coming), and a stop of the job it
 * trains or serves (the job was cancelled). */
#include "agent_internal.h"

#include "sky_json.h"
#include "sky_log.h"

#include <string.h>

/* {"cmd":"probe","model":M,"seq":S,"batch":B}: the main loop (or the job's
 * chores) probes at those shapes and reports again. */
static void cmd_probe(agent *a, const cJSON *doc)
{
	char model[16] = "";
	int64_t seq = 0, batch = 0;
	sky_mutex_lock(&a->lock);
	int64_t hidden = 0, heads = 0, ffn = 0, act = 0;
	double hd = 0, ad = 0;
	sky_model_cfg hf;
	/* a config.json's model ("hf"): its shapes on a preset's other sizes */
	int is_hf = sky_json_str(doc, "model", model, sizeof model, "cmd", NULL) == 0 &&
		    !strcmp(model, "hf") && sky_model_preset("tiny", &hf) == 0 &&
		    sky_json_i64(doc, "hidden", 1, SKY_CAPS_MAX_DIM, &hidden, "cmd", NULL) == 0 &&
		    sky_json_i64(doc, "heads", 1, SKY_CAPS_MAX_DIM, &heads, "cmd", NULL) == 0 &&
		    sky_json_i64(doc, "ffn", 1, SKY_CAPS_MAX_DIM, &ffn, "cmd", NULL) == 0 &&
		    hidden % heads == 0;
	if (is_hf) {
		if (cJSON_GetObjectItemCaseSensitive(doc, "act"))
			sky_json_i64(doc, "act", 0, 1, &act, "cmd", NULL);
		if (cJSON_GetObjectItemCaseSensitive(doc, "hidden_drop"))
			sky_json_num(doc, "hidden_drop", 0, 0.999, &hd, "cmd", NULL);
		if (cJSON_GetObjectItemCaseSensitive(doc, "attn_drop"))
			sky_json_num(doc, "attn_drop", 0, 0.999, &ad, "cmd", NULL);
		snprintf(hf.name, sizeof hf.name, "hf");
		hf.hidden = (int)hidden;
		hf.heads = (int)heads;
		hf.ffn = (int)ffn;
		hf.act = (int)act;
		hf.hidden_drop = (float)hd;
		hf.attn_drop = (float)ad;
		a->probe_model = hf;
	}
	if (is_hf || (model[0] && sky_model_preset(model, &a->probe_model) == 0)) {
		if (sky_json_i64(doc, "seq", 1, SKY_CAPS_MAX_DIM, &seq, "cmd", NULL) == 0)
			a->probe_model.seq = (int)seq;
		if (sky_json_i64(doc, "batch", 1, SKY_CAPS_MAX_BATCH, &batch, "cmd", NULL) == 0)
			a->probe_model.batch = (int)batch;
	}
	atomic_store(&a->probe_requested, 1);
	sky_mutex_unlock(&a->lock);
	SKY_INFO("probe requested by the planner (model %s)", a->probe_model.name);
}

/* {"cmd":"ckpt","job":J,"epoch":E,"step":S}: a voluntary re-plan is
 * coming: a checkpoint after step `step` (every stage gets the same step),
 * then the new plan resumes from it, so no step is lost */
static void cmd_ckpt(agent *a, const cJSON *doc, sky_diag *d)
{
	char job[SKY_TOPIC_SEGMENT_MAX + 1] = "";
	int64_t epoch = 0, step = 0;
	if (sky_json_str(doc, "job", job, sizeof job, "cmd", d) == 0 &&
	    sky_json_i64(doc, "epoch", 1, SKY_JSON_INT_MAX, &epoch, "cmd", d) == 0 &&
	    sky_json_i64(doc, "step", 1, SKY_PLANMSG_MAX_STEPS, &step, "cmd", d) == 0 &&
	    a->training && a->job && !strcmp(job, a->plan.job) && epoch == a->plan.epoch) {
		a->job->ckpt_at = step;
		SKY_INFO("job %s: checkpoint after step %lld asked by the planner", job,
			 (long long)step);
	} else {
		SKY_DEBUG("checkpoint request ignored (not for the job this board runs)");
	}
}

/* A serving plan held at epoch a->plan.epoch is stopped: the epoch is
 * written down first (<state>/cancelled), so neither the retained plan
 * after a reconnect nor the saved one after a restart serves it again
 * (agent_plan.c); the serving loop ends (sj->stop, checked between
 * messages) and run_serve lets the job go, or it goes now when it is not
 * running (its slice still coming, or between two turns of the loop). */
static void stop_serving(agent *a)
{
	agent_write_counter(a->o->state_dir, "cancelled", a->plan.epoch);
	if (a->sj && a->serving) {
		a->serve_cancelled = 1;
		atomic_store(&a->sj->stop, 1);
	} else if (a->sj) {
		agent_serve_drop(a);
	}
	SKY_INFO("job %s epoch %lld: stop asked by the planner (the job was cancelled): serving "
		 "ends, requests to it are the planner's to answer",
		 a->plan.job, (long long)a->plan.epoch);
}

/* {"cmd":"stop","job":J,"epoch":E}: the job was cancelled. The board
 * stops it if it is the job it holds at epoch E or before. Training (or
 * about to): the running step is abandoned (run_job sees a->cancelled),
 * the job counts as run, so neither a reconnect nor a restart runs it
 * again. Serving: stop_serving. Either way the board is free for the next
 * plan. Only the planner can write a board's command topic (the ACL). */
static void cmd_stop(agent *a, const cJSON *doc, sky_diag *d)
{
	char job[SKY_TOPIC_SEGMENT_MAX + 1] = "";
	int64_t epoch = 0;
	int held = sky_json_str(doc, "job", job, sizeof job, "cmd", d) == 0 &&
		   sky_json_i64(doc, "epoch", 1, SKY_JSON_INT_MAX, &epoch, "cmd", d) == 0 &&
		   a->plan.job[0] && strcmp(job, a->plan.job) == 0 && epoch >= a->plan.epoch;
	if (held && a->plan.infer.on) {
		if (agent_cancelled_epoch(a->o->state_dir) < a->plan.epoch)
			stop_serving(a);
		return;
	}
	if (!held || !a->job || (!a->training && !a->train_pending)) {
		SKY_INFO("stop of job %s ignored (not a job this board trains or serves)",
			 job[0] ? job : "(none)");
		return;
	}
	if (a->training) {
		a->cancelled = 1;
		a->abandon = 1;
	} else {
		a->train_pending = 0;
		agent_write_counter(a->o->state_dir, "trained", a->plan.epoch);
	}
	SKY_INFO("job %s epoch %lld: stop asked by the planner (the job was cancelled)", job,
		 (long long)a->plan.epoch);
}

void agent_on_cmd(agent *a, const unsigned char *p, size_t len)
{
	sky_diag d;
	sky_diag_clear(&d);
	if (len > SKY_CMD_MAX_BYTES)
		return;
	cJSON *doc = sky_json_parse((const char *)p, len, &d);
	char cmd[16] = "";
	if (doc && sky_json_str(doc, "cmd", cmd, sizeof cmd, "cmd", &d) == 0 &&
	    strcmp(cmd, "probe") == 0)
		cmd_probe(a, doc);
	else if (doc && !strcmp(cmd, "ckpt"))
		cmd_ckpt(a, doc, &d);
	else if (doc && !strcmp(cmd, "stop"))
		cmd_stop(a, doc, &d);
	else
		SKY_WARN("command ignored: %s", d.msg[0] ? d.msg : "unknown command");
	sky_json_free(doc);
}
