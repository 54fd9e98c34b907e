/* The replay window of serving frames (see sky_servewin.h). */
#include "sky_servewin.h"

#include <stdio.h>
#include <string.h>

void sky_servewin_init(sky_servewin *w, int64_t epoch)
{
	memset(w, 0, sizeof *w);
	w->epoch = epoch;
}

static int find(const sky_servewin *w, const char *sender)
{
	for (int i = 0; i < w->n; i++)
		if (!strcmp(w->s[i].who, sender))
			return i;
	return -1;
}

int sky_servewin_expect(sky_servewin *w, const char *sender, int64_t epoch, uint64_t batch,
			int64_t *want, sky_diag *d)
{
	if (!sender)
		sender = "";
	*want = -1; /* no frame claims it: a refusal never matches */
	if (epoch != w->epoch) {
		w->replays++;
		return sky_diag_set(d, SKY_ESTATE, "frame from %s of epoch %lld, the window is of %lld",
				    sender, (long long)epoch, (long long)w->epoch);
	}
	if (batch > (uint64_t)INT64_MAX) {
		w->replays++;
		return sky_diag_set(d, SKY_ESTATE, "frame from %s: batch %llu out of range", sender,
				    (unsigned long long)batch);
	}
	int i = find(w, sender);
	if (i < 0 && w->n >= SKY_SERVEWIN_SENDERS) {
		w->strangers++;
		return sky_diag_set(d, SKY_ESTATE, "frame from %s: already %d senders in epoch %lld",
				    sender, SKY_SERVEWIN_SENDERS, (long long)epoch);
	}
	if (i >= 0 && batch <= w->s[i].last) {
		w->replays++;
		return sky_diag_set(d, SKY_ESTATE,
				    "replay: batch %llu from %s is not after its last, %llu (epoch %lld)",
				    (unsigned long long)batch, sender,
				    (unsigned long long)w->s[i].last, (long long)epoch);
	}
	*want = (int64_t)batch;
	return 0;
}

int sky_servewin_take(sky_servewin *w, const char *sender, uint64_t batch)
{
	if (!sender)
		sender = "";
	int i = find(w, sender);
	if (i < 0) {
		if (w->n >= SKY_SERVEWIN_SENDERS)
			return SKY_ESTATE;
		i = w->n++;
		snprintf(w->s[i].who, sizeof w->s[i].who, "%s", sender);
	} else if (batch <= w->s[i].last) {
		return SKY_ESTATE;
	}
	w->s[i].last = batch;
	return 0;
}
