#include "svc_fake.h"

#include "sky_file.h"
#include "sky_test.h"

#include <stdio.h>
#include <string.h>

svc_fake_pub svc_fake_pubs[SVC_FAKE_MAX_PUBS];
int svc_fake_n_pubs;

static svc g_fake; /* far too big for a stack */
static sky_service_opts g_opts;
static sky_jobstate g_js;

static int record(void *ctx, const char *topic, const void *data, size_t len, int qos,
		  int retained, sky_diag *d)
{
	if (svc_fake_n_pubs == SVC_FAKE_MAX_PUBS)
		return SKY_ENET;
	svc_fake_pub *p = &svc_fake_pubs[svc_fake_n_pubs++];
	snprintf(p->topic, sizeof p->topic, "%s", topic);
	size_t n = len < sizeof p->data - 1 ? len : sizeof p->data - 1;
	memcpy(p->data, data, n);
	p->data[n] = '\0';
	p->len = len;
	p->qos = qos;
	p->retained = retained;
	return 0;
}

svc *svc_fake_fresh(const char *name)
{
	svc *s = &g_fake;
	memset(s, 0, sizeof *s);
	memset(&g_opts, 0, sizeof g_opts);
	svc_fake_n_pubs = 0;
	g_opts.pki_dir = sky_test_tmp_dir();
	g_opts.replan_holdoff_s = 1e9; /* no voluntary re-plans unless a test wants them */
	s->o = &g_opts;
	s->publish = record;
	snprintf(s->state_dir, sizeof s->state_dir, "%s/%s", sky_test_tmp_dir(), name);
	sky_file_mkdirs(s->state_dir, 0700);
	sky_registry_init(&s->reg);
	sky_ckpt_init(&s->ckpt, s->state_dir);
	svc_log_init(s);
	svc_enroll_init(s);
	sky_nojob_init(&s->nojob);
	sky_servefault_init(&s->sf);
	return s;
}

sky_reg_board *svc_fake_board(svc *s, const char *id, int state)
{
	sky_reg_board *b = sky_registry_add(&s->reg, id);
	if (b)
		b->state = state;
	return b;
}

run_job *svc_fake_follow(svc *s, const char *doc, const char *board, int grace)
{
	memset(&g_js, 0, sizeof g_js);
	if (sky_job_req_parse(doc, strlen(doc), &g_js.req, NULL) != 0)
		return NULL;
	g_js.epoch = 3;
	g_js.generation = 1;
	g_js.n_stages = 1;
	snprintf(g_js.board[0], sizeof g_js.board[0], "%s", board);
	g_js.first[0] = 0;
	g_js.last[0] = 3;
	run_job *r = svc_follow_from_state(s, &g_js);
	if (!r)
		return NULL;
	svc_follow_add(s);
	if (!grace)
		r->restored_until = 0;
	return r;
}

const svc_fake_pub *svc_fake_last(const char *topic)
{
	for (int i = svc_fake_n_pubs - 1; i >= 0; i--)
		if (strcmp(svc_fake_pubs[i].topic, topic) == 0)
			return &svc_fake_pubs[i];
	return NULL;
}
