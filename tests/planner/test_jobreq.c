#include "sky_test.h"

#include "sky_json.h"
#include "sky_jobreq.h"
#include "sky_model.h"
#include "sky_topics.h"

#include <stdio.h>
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
	SKY_EXPECT(!strcmp(j.objective, "step"));
	SKY_EXPECT(j.micro_batches == 4 && j.layers == 0 && j.min_boards == 0);
	SKY_EXPECT_NEAR(j.wait_s, 30, 0);
	j.layers = 16;
	j.seq = 8;
	snprintf(j.objective, sizeof j.objective, "bottleneck");
	int n = sky_job_req_encode(&j, buf, sizeof buf);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ(sky_job_req_parse(buf, (size_t)n, &back, &d), 0);
	SKY_EXPECT(back.layers == 16 && back.seq == 8 && back.batch == 0);
	SKY_EXPECT(!strcmp(back.objective, "bottleneck"));
	SKY_EXPECT_EQ(back.link_blind, 0);
	SKY_EXPECT(strstr(buf, "link_blind") == NULL); /* the default is left out */
	j.link_blind = 1;
	n = sky_job_req_encode(&j, buf, sizeof buf);
	SKY_EXPECT(n > 0 && strstr(buf, "\"link_blind\":true") != NULL);
	SKY_EXPECT_EQ(sky_job_req_parse(buf, (size_t)n, &back, &d), 0);
	SKY_EXPECT_EQ(back.link_blind, 1);
	SKY_EXPECT_EQ(parse("{\"job\":\"j\",\"model\":\"tiny\",\"link_blind\":1}", &j, &d),
		      SKY_EFORMAT);
	SKY_EXPECT(strstr(d.msg, "link_blind") != NULL);
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
	SKY_EXPECT_EQ(parse("{\"job\":\"j\",\"model\":\"tiny\",\"objective\":\"speed\"}", &j, &d),
		      SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "objective 'speed'") != NULL);
	SKY_EXPECT_EQ(parse("{\"job\":\"j\",\"model\":\"tiny\",\"layers\":0}", &j, &d), SKY_ERANGE);
	SKY_EXPECT_EQ(parse("{\"job\":\"j\",\"model\":\"tiny\",\"wait_s\":-1}", &j, &d), SKY_ERANGE);
	SKY_EXPECT_EQ(parse("{\"job\":\"j\",\"model\":\"tiny\",\"seq\":\"8\"}", &j, &d), SKY_EFORMAT);
	SKY_EXPECT_EQ(parse("{\"job\":", &j, &d), SKY_EFORMAT);
	static char big[5000];
	memset(big, ' ', sizeof big);
	SKY_EXPECT_EQ(sky_job_req_parse(big, sizeof big, &j, &d), SKY_ERANGE);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(submit_ids_and_replies)
{
	sky_job_req j, back;
	sky_diag d;
	char buf[1024];
	SKY_EXPECT_EQ(parse("{\"job\":\"j1\",\"model\":\"tiny\",\"submit_id\":\"0123456789abcdef\"}", &j,
			    &d),
		      0);
	SKY_EXPECT(strcmp(j.submit_id, "0123456789abcdef") == 0);
	int n = sky_job_req_encode(&j, buf, sizeof buf);
	SKY_EXPECT(n > 0 && sky_job_req_parse(buf, (size_t)n, &back, &d) == 0);
	SKY_EXPECT(strcmp(back.submit_id, j.submit_id) == 0);
	/* the id names a submission: hex, 8 to 32 */
	SKY_EXPECT_EQ(parse("{\"job\":\"j1\",\"model\":\"tiny\",\"submit_id\":\"abc\"}", &j, &d),
		      SKY_EINVAL);
	SKY_EXPECT_EQ(parse("{\"job\":\"j1\",\"model\":\"tiny\",\"submit_id\":\"0123456789ABCDEF\"}",
			    &j, &d),
		      SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "submit_id") != NULL);
	/* a refusal still names the submission it answers */
	SKY_EXPECT_EQ(parse("{\"submit_id\":\"0123456789abcdef\",\"model\":\"huge\",\"job\":\"j\"}", &j,
			    &d),
		      SKY_EINVAL);
	SKY_EXPECT(strcmp(j.submit_id, "0123456789abcdef") == 0);

	sky_job_reply r, rb;
	memset(&r, 0, sizeof r);
	snprintf(r.submit_id, sizeof r.submit_id, "0123456789abcdef");
	snprintf(r.job, sizeof r.job, "j1");
	r.ok = 1;
	snprintf(r.state, sizeof r.state, "queued");
	n = sky_job_reply_encode(&r, buf, sizeof buf);
	SKY_EXPECT(n > 0 && (unsigned)n <= SKY_JOB_REPLY_MAX_BYTES);
	SKY_EXPECT_EQ(sky_job_reply_decode(buf, (size_t)n, &rb, &d), 0);
	SKY_EXPECT(rb.ok && !strcmp(rb.state, "queued") && !strcmp(rb.job, "j1") &&
		   !strcmp(rb.submit_id, r.submit_id));
	r.ok = 0;
	snprintf(r.error, sizeof r.error, "job j1 refused: 16 jobs already waiting");
	n = sky_job_reply_encode(&r, buf, sizeof buf);
	SKY_EXPECT_EQ(sky_job_reply_decode(buf, (size_t)n, &rb, &d), 0);
	SKY_EXPECT(!rb.ok && strstr(rb.error, "already waiting") != NULL);
	const char *bad[] = {"{\"submit_id\":\"x\",\"job\":\"j\",\"ok\":1,\"state\":\"q\"}",
			     "{\"submit_id\":\"x\",\"job\":\"j\",\"ok\":false}", "{\"ok\":true}", "["};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		SKY_EXPECT_MSG(sky_job_reply_decode(bad[i], strlen(bad[i]), &rb, &d) == SKY_EFORMAT,
			       "accepted %s", bad[i]);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

#define W64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

SKY_TEST(infer_jobs_round_trip)
{
	sky_job_req j, back;
	sky_diag d;
	char buf[4096];
	SKY_EXPECT_EQ(parse("{\"job\":\"s1\",\"model\":\"tiny\",\"task\":\"infer\",\"weights\":\"" W64
			    "\",\"serve_batch\":4,\"clients\":[\"sky-client-a\",\"sky-client-b\"]}",
			    &j, &d),
		      0);
	SKY_EXPECT(j.infer && !j.train && j.serve_batch == 4 && j.wait_ms == 2 && j.queue == 64);
	SKY_EXPECT(j.n_clients == 2 && !strcmp(j.clients[1], "sky-client-b"));
	SKY_EXPECT(!strcmp(j.weights, W64));
	j.wait_ms = 7;
	int n = sky_job_req_encode(&j, buf, sizeof buf);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ(sky_job_req_parse(buf, (size_t)n, &back, &d), 0);
	SKY_EXPECT(back.infer && back.serve_batch == 4 && back.wait_ms == 7 && back.n_clients == 2);
	SKY_EXPECT(!strcmp(back.weights, W64) && !strcmp(back.clients[0], "sky-client-a"));
	SKY_EXPECT(!j.no_replan && !back.no_replan && !strstr(buf, "replan"));
	/* "replan":false: a board's death leaves the plan waiting for it */
	j.no_replan = 1;
	n = sky_job_req_encode(&j, buf, sizeof buf);
	SKY_EXPECT(n > 0 && strstr(buf, "\"replan\":false") != NULL);
	SKY_EXPECT_EQ(sky_job_req_parse(buf, (size_t)n, &back, &d), 0);
	SKY_EXPECT(back.no_replan == 1);
	/* the served model's tokenizer hash, when given, round-trips */
	SKY_EXPECT(!strstr(buf, "tokenizer") && !back.tokenizer[0]);
	strcpy(j.tokenizer, "12ab34cd");
	n = sky_job_req_encode(&j, buf, sizeof buf);
	SKY_EXPECT(n > 0 && strstr(buf, "\"tokenizer\":\"12ab34cd\"") != NULL);
	SKY_EXPECT_EQ(sky_job_req_parse(buf, (size_t)n, &back, &d), 0);
	SKY_EXPECT(!strcmp(back.tokenizer, "12ab34cd"));
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(bad_infer_jobs_are_refused_with_the_reason)
{
	sky_job_req j;
	sky_diag d;
	SKY_EXPECT_EQ(parse("{\"job\":\"s1\",\"model\":\"tiny\",\"task\":\"infer\"}", &j, &d),
		      SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "task infer needs weights") != NULL, "%s", d.msg);
	SKY_EXPECT(parse("{\"job\":\"s1\",\"model\":\"tiny\",\"task\":\"infer\",\"weights\":\"abc\"}",
			 &j, &d) != 0);
	SKY_EXPECT_MSG(strstr(d.msg, "64 lower-case hex") != NULL, "%s", d.msg);
	SKY_EXPECT(parse("{\"job\":\"s1\",\"model\":\"tiny\",\"task\":\"infer\",\"weights\":\"" W64
			 "\",\"serve_batch\":0}",
			 &j, &d) != 0);
	SKY_EXPECT(parse("{\"job\":\"s1\",\"model\":\"tiny\",\"task\":\"infer\",\"weights\":\"" W64
			 "\",\"clients\":[\"bob\"]}",
			 &j, &d) != 0);
	SKY_EXPECT_MSG(strstr(d.msg, "not a client CN") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(parse("{\"job\":\"s1\",\"model\":\"tiny\",\"task\":\"infer\",\"weights\":\"" W64
			    "\",\"replan\":\"no\"}",
			    &j, &d),
		      SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "replan must be true or false") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(parse("{\"job\":\"s1\",\"model\":\"tiny\",\"task\":\"infer\",\"weights\":\"" W64
			    "\",\"tokenizer\":\"12ab34c\"}",
			    &j, &d),
		      SKY_EFORMAT);
	SKY_EXPECT_MSG(strstr(d.msg, "tokenizer must be 8 lower-case hex") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(parse("{\"job\":\"s1\",\"model\":\"tiny\",\"task\":\"dance\"}", &j, &d),
		      SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "unknown task 'dance' (train, infer)") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}

SKY_TEST(defaults_are_written_once_for_every_field_a_document_may_leave_out)
{
	sky_job_req j, parsed;
	sky_diag d;
	sky_job_req_defaults(&j, NULL);
	SKY_EXPECT(j.micro_batches == 4 && j.wait_s == 30 && !strcmp(j.algo, "optimal") &&
		   !strcmp(j.sched, "1f1b") && !strcmp(j.objective, "step"));
	SKY_EXPECT(j.steps == 0 && j.queue == 0 && !j.train && !j.infer);
	sky_job_req_defaults(&j, "train");
	SKY_EXPECT(j.steps == 10 && j.seed == 1 && j.clip == 1.0 && j.ckpt_every == 10 &&
		   !strcmp(j.optim, "adamw") && j.lr < 0 && j.warmup < 0 && j.queue == 0);
	sky_job_req_resolve(&j);
	SKY_EXPECT(j.lr == 1e-3 && j.warmup == 1);
	sky_job_req_defaults(&j, "infer");
	SKY_EXPECT(j.wait_ms == 2 && j.queue == 64 && j.steps == 0);
	sky_job_req_defaults(&j, "*");
	SKY_EXPECT(j.steps == 10 && j.queue == 64 && !j.train && !j.infer);
	/* a document with only what is required parses to the defaults */
	const char *doc = "{\"job\":\"j1\",\"model\":\"tiny\",\"task\":\"train\",\"optim\":\"sgd\"}";
	SKY_EXPECT_EQ(parse(doc, &parsed, &d), 0);
	sky_job_req_defaults(&j, "train");
	snprintf(j.job, sizeof j.job, "j1");
	snprintf(j.model, sizeof j.model, "tiny");
	snprintf(j.optim, sizeof j.optim, "sgd");
	j.train = 1;
	sky_job_req_resolve(&j);
	SKY_EXPECT(j.lr == 0.05);
	SKY_EXPECT(memcmp(&j, &parsed, sizeof j) == 0);
}

/* ---- federated jobs ("federated":{...}) ---- */

#define FED_SHA "\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\""

SKY_TEST(federated_jobs_round_trip)
{
	static sky_job_req j, back;
	static char buf[SKY_JOB_MAX_BYTES];
	sky_diag d;
	SKY_EXPECT_EQ(parse("{\"job\":\"f\",\"model\":\"tiny\",\"task\":\"train\",\"dataset\":\"train\","
			    "\"federated\":{\"model\":" FED_SHA ",\"owners\":[\"b1\",\"b2\"],"
			    "\"rounds\":3,\"local_steps\":5,\"straggler\":\"close\",\"deadline_s\":4,"
			    "\"min_owners\":2,\"server_opt\":\"adam\",\"dp_clip\":1,\"dp_noise\":1.1}}",
			    &j, &d), 0);
	SKY_EXPECT(j.fed.on && j.fed.n_owners == 2 && j.fed.rounds == 3 && j.fed.local_steps == 5);
	SKY_EXPECT(j.steps == 15 && j.warmup == 1); /* the schedule's length: rounds x E */
	SKY_EXPECT(j.fed.straggler_close && j.fed.min_owners == 2 && j.fed.fraction == 1);
	int n = sky_job_req_encode(&j, buf, sizeof buf);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ(parse(buf, &back, &d), 0);
	SKY_EXPECT(back.fed.on && !strcmp(back.fed.owners[1], "b2") && back.fed.dp_noise == 1.1);
	SKY_EXPECT(!strcmp(back.fed.server_opt, "adam") && back.fed.deadline_s == 4);
	SKY_EXPECT_EQ(parse("{\"job\":\"f\",\"model\":\"tiny\",\"task\":\"train\",\"dataset\":\"t\","
			    "\"federated\":{\"model\":" FED_SHA ",\"owners\":\"all\",\"rounds\":1,"
			    "\"local_steps\":1}}", &j, &d), 0);
	SKY_EXPECT(j.fed.all_owners && j.fed.n_owners == 0);
}

SKY_TEST(bad_federated_jobs_are_refused_and_named)
{
	static sky_job_req j;
	sky_diag d;
	static const struct { const char *fed, *why; } k[] = {
		{"\"owners\":[\"b1\"],\"rounds\":1,\"local_steps\":1}", "missing field 'model'"},
		{"\"model\":" FED_SHA ",\"owners\":[\"b1\",\"b1\"],\"rounds\":1,\"local_steps\":1}",
		 "owner b1 named twice"},
		{"\"model\":" FED_SHA ",\"owners\":[\"b/1\"],\"rounds\":1,\"local_steps\":1}",
		 "federated owner 0 is not a board id"},
		{"\"model\":" FED_SHA ",\"owners\":[\"b1\"],\"rounds\":1,\"local_steps\":1,"
		 "\"min_owners\":2}", "min_owners 2 is more than the 1 owners"},
		{"\"model\":" FED_SHA ",\"owners\":[\"b1\"],\"rounds\":1,\"local_steps\":1,"
		 "\"straggler\":\"drop\"}", "straggler 'drop' (wait, close)"},
		{"\"model\":" FED_SHA ",\"owners\":[\"b1\"],\"rounds\":1,\"local_steps\":1,"
		 "\"server_opt\":\"sgd\"}", "server_opt 'sgd'"},
		{"\"model\":" FED_SHA ",\"owners\":[\"b1\"],\"rounds\":1,\"local_steps\":1,"
		 "\"dp_noise\":1}", "dp_noise and dp_clip go together"},
	};
	char doc[1024];
	for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
		snprintf(doc, sizeof doc, "{\"job\":\"f\",\"model\":\"tiny\",\"task\":\"train\","
			 "\"dataset\":\"t\",\"federated\":{%s}", k[i].fed);
		SKY_EXPECT(parse(doc, &j, &d) != 0);
		SKY_EXPECT_MSG(strstr(d.msg, k[i].why) != NULL, "case %zu: %s", i, d.msg);
	}
	SKY_EXPECT(parse("{\"job\":\"f\",\"model\":\"tiny\",\"task\":\"train\",\"federated\":{"
			 "\"model\":" FED_SHA ",\"owners\":[\"b1\"],\"rounds\":1,\"local_steps\":1}}",
			 &j, &d) != 0);
	SKY_EXPECT(strstr(d.msg, "needs dataset") != NULL);
}

/* a config.json's model: "model":"hf" and its block, every number kept */
SKY_TEST(hf_jobs_round_trip_and_bad_ones_are_named)
{
	sky_job_req j, back;
	sky_diag d;
	char buf[2048];
	const char *doc =
		"{\"job\":\"f1\",\"model\":\"hf\",\"layers\":2,\"seq\":24,\"task\":\"train\","
		"\"hf\":{\"hidden\":80,\"heads\":5,\"ffn\":136,\"vocab\":600,\"max_pos\":64,"
		"\"type_vocab\":2,\"classes\":3,\"act\":0,\"ln_eps\":1.0000000116860974e-07,"
		"\"hidden_drop\":0.10000000149011612,\"attn_drop\":0.10000000149011612,"
		"\"init\":\"" "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" "\"}}";
	SKY_EXPECT_EQ(parse(doc, &j, &d), 0);
	SKY_EXPECT(j.hf.on && j.hf.hidden == 80 && j.hf.classes == 3 && j.hf.init[0] == '0');
	int n = sky_job_req_encode(&j, buf, sizeof buf);
	SKY_EXPECT(n > 0);
	SKY_EXPECT_EQ(sky_job_req_parse(buf, (size_t)n, &back, &d), 0);
	SKY_EXPECT(back.hf.on && back.hf.ffn == 136 && back.hf.vocab == 600 &&
		   (float)back.hf.ln_eps == 1e-7f && (float)back.hf.attn_drop == 0.1f &&
		   !strcmp(back.hf.init, j.hf.init));
	sky_model_cfg c;
	SKY_EXPECT_EQ(sky_job_req_model(&back, &c), 0);
	SKY_EXPECT(c.hidden == 80 && c.layers == 2 && c.seq == 24 && c.classes == 3 &&
		   c.hidden_drop == 0.1f && !strcmp(c.name, "hf"));
	/* refusals name what is wrong */
	SKY_EXPECT_EQ(parse("{\"job\":\"f2\",\"model\":\"hf\",\"task\":\"train\"}", &j, &d),
		      SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "needs its 'hf' block") != NULL);
	SKY_EXPECT_EQ(parse("{\"job\":\"f3\",\"model\":\"hf\",\"task\":\"train\",\"hf\":{\"hidden\":80,"
			    "\"heads\":3,\"ffn\":136,\"vocab\":600,\"max_pos\":64,\"type_vocab\":2,"
			    "\"classes\":3,\"act\":0,\"ln_eps\":0,\"hidden_drop\":0,\"attn_drop\":0}}",
			    &j, &d),
		      SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "hf.heads 3 does not divide hidden 80") != NULL);
	SKY_EXPECT_EQ(parse("{\"job\":\"f4\",\"model\":\"tiny\",\"hf\":{}}", &j, &d), SKY_EFORMAT);
	SKY_EXPECT(strstr(d.msg, "'hf' must be an object, with") != NULL);
	SKY_EXPECT_EQ(sky_json_pool_used(), 0);
}
