/* libFuzzer harness: checkpoint images and the planner's checkpoint store.
 *
 * The input is a list of messages. Each starts with a 4-byte op: the
 * sender (one of three plan stages over a model of 6 blocks, or a board
 * outside the plan), a step, an epoch choice and a flag; flag bit 0 clear
 * makes a well-formed part of the sender's blocks at that step (bit 1: of
 * blocks one off), bit 0 set takes the next 2-byte-length-prefixed run of
 * the input as the raw image. Whatever comes:
 *   - sky_ckpt_parse_header reads only inside the image and an accepted one
 *     has exactly nblk x (1 + nvec) non-empty tensors tiling its data;
 *   - the store never commits a step twice or one at or before the last,
 *     open steps stay after the last commit with covered blocks within the
 *     model and parts that do not overlap, a part from outside the plan or
 *     of another board's blocks is never stored, and refusals are counted
 *     by reason (the reasons add up to the total);
 *   - the JSON pool is empty afterwards. */
#include "sky_ckpt.h"
#include "sky_json.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NB 6
static const sky_ckpt_sender SENDERS[4] = {{"b1", 0, 2}, {"b2", 2, 2}, {"b3", 4, 2}, {"b9", 0, 0}};

static void check_image(const unsigned char *img, size_t len)
{
	static sky_ckpt_tensor t[256];
	sky_ckpt_meta m;
	int nt = 0;
	if (sky_ckpt_parse_header(img, len, &m, t, 256, &nt, NULL) != 0)
		return;
	uint64_t hlen = 0;
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | img[i];
	size_t sum = 0;
	if (nt != m.nblk * (1 + m.nvec))
		abort();
	for (int i = 0; i < nt; i++) {
		const unsigned char *p = (const unsigned char *)t[i].data;
		if (t[i].n == 0 || t[i].blk < m.blk0 || t[i].blk >= m.blk0 + m.nblk ||
		    p < img + 8 + hlen || p + 4 * t[i].n > img + len)
			abort();
		sum += 4 * t[i].n;
	}
	if (sum != len - 8 - hlen)
		abort();
}

static void check_store(const sky_ckpt_job *j, int64_t last_before)
{
	long by = 0;
	for (int r = 0; r < SKY_CKPT_R_N; r++)
		by += j->refused_by[r];
	if (by != j->refused || j->done[0].step < last_before ||
	    (j->done[1].step > 0 && j->done[1].step >= j->done[0].step))
		abort();
	for (int i = 0; i < SKY_CKPT_OPEN; i++) {
		const sky_ckpt_step *o = &j->open[i];
		if (o->step == 0)
			continue;
		if (o->step <= j->done[0].step || o->covered > j->n_blocks || o->covered >= j->n_blocks)
			abort();
		for (int a = 0; a < o->n_parts; a++) {
			const sky_ckpt_part *p = &o->part[a];
			int mine = 0;
			for (int s = 0; s < 3; s++)
				mine |= p->blk0 == SENDERS[s].blk0 && p->nblk == SENDERS[s].nblk;
			if (!mine)
				abort();
			for (int b = a + 1; b < o->n_parts; b++)
				if (p->blk0 < o->part[b].blk0 + o->part[b].nblk &&
				    o->part[b].blk0 < p->blk0 + p->nblk)
					abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static sky_ckpt_store s;
	static char dir[64];
	static unsigned char img[1 << 13];
	static float vals[2][NB][3];
	if (!dir[0]) {
		/* the store writes and syncs files: in memory where there is a tmpfs */
		snprintf(dir, sizeof dir, "%s/sky-fuzz-ckpt-XXXXXX",
			 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
		if (!mkdtemp(dir))
			abort();
	}
	sky_ckpt_init(&s, dir);
	sky_ckpt_job *j = sky_ckpt_begin(&s, "j1", 5, NB);
	if (!j)
		abort();
	if (size > 0)
		sky_ckpt_schedule(&s, "j1", 1 + data[0] % 64, data[0] & 0x80 ? 0 : 1 + data[0] % 3);
	size_t at = size > 0 ? 1 : 0;
	for (int msgs = 0; at + 4 <= size && msgs < 32; msgs++) {
		const uint8_t *op = data + at;
		at += 4;
		const sky_ckpt_sender *from = &SENDERS[op[0] % 4];
		size_t len = 0;
		if (op[3] & 1) {
			if (at + 2 > size)
				break;
			len = (size_t)data[at] | (size_t)data[at + 1] << 8;
			at += 2;
			if (len > size - at)
				len = size - at;
			if (len > sizeof img)
				len = sizeof img;
			memcpy(img, data + at, len);
			at += len;
		} else {
			sky_ckpt_meta m;
			sky_ckpt_tensor t[2 * NB];
			memset(&m, 0, sizeof m);
			strcpy(m.job, "j1");
			m.epoch = op[2] & 1 ? 4 : 5;
			m.step = op[1];
			m.blk0 = (op[3] & 2 ? 1 : 0) + (from->nblk ? from->blk0 : 0);
			if (m.blk0 + 2 > NB)
				m.blk0 = NB - 2;
			m.nblk = 2;
			m.nvec = 1;
			int k = 0;
			for (int v = -1; v < 1; v++)
				for (int b = m.blk0; b < m.blk0 + m.nblk; b++) {
					for (int i = 0; i < 3; i++)
						vals[v + 1][b][i] = (float)(op[1] * 10 + b);
					t[k++] = (sky_ckpt_tensor){v, b, vals[v + 1][b], 1 + (size_t)(op[2] >> 7)};
				}
			if (sky_ckpt_encode(&m, t, k, img, sizeof img, &len, NULL) != 0)
				abort();
		}
		check_image(img, len);
		int64_t last = j->done[0].step, c = 0;
		int reason = -1;
		int rc = sky_ckpt_on_part_from(&s, "j1", from, img, len, 1.0, &c, &reason, NULL);
		if (rc < 0 && (reason <= SKY_CKPT_R_NONE || reason >= SKY_CKPT_R_N))
			abort();
		if (rc >= 0 && from->nblk == 0)
			abort(); /* a board outside the plan got a part in */
		if (rc == 1 && (c <= last || c != j->done[0].step))
			abort();
		if (rc != 1 && j->done[0].step != last)
			abort();
		check_store(j, last);
	}
	if (sky_json_pool_used() != 0)
		abort();
	return 0;
}
