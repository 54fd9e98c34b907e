/* int8 layers in safetensors: a layer written and read back computes the
 * same bits; a file with a wrong dtype, a zero or NaN scale, or missing
 * ranges is refused with a message naming the tensor. */
#include "sky_test.h"

#include "sky_arena.h"
#include "sky_kernels_s8.h"
#include "sky_layer.h"
#include "sky_layer_s8.h"
#include "sky_rng.h"
#include "sky_safetensors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct qlayer {
	sky_layer_s8 L;
	void *mem;
} qlayer;

static int carve(qlayer *q, const sky_model_cfg *c)
{
	sky_arena m, a;
	sky_arena_init(&m, NULL, 0);
	sky_layer_s8_carve(&q->L, c, sky_k_s8_variant_active(), &m);
	size_t need = sky_arena_required(&m);
	q->mem = malloc(need);
	sky_arena_init(&a, q->mem, need);
	sky_layer_s8_carve(&q->L, c, sky_k_s8_variant_active(), &a);
	return sky_arena_seal(&a);
}

typedef struct fixture {
	sky_model_cfg c;
	float *w, *x, *y1, *y2;
	qlayer a, b;
	sky_st_entry e[SKY_LAYER_S8_NENTRIES];
	int8_t *wbuf;
	char *names;
	void *tmp;
} fixture;

static void setup(fixture *f)
{
	sky_model_preset("tiny", &f->c);
	f->c.batch = 2;
	sky_model_cfg *c = &f->c;
	size_t np = (size_t)sky_model_layer_params(c), nx = (size_t)sky_model_tokens(c) * c->hidden;
	f->w = malloc(np * 4), f->x = malloc(nx * 4), f->y1 = malloc(nx * 4), f->y2 = malloc(nx * 4);
	f->tmp = malloc(sky_layer_s8_tmp_bytes(c));
	f->wbuf = malloc(sky_layer_s8_weight_bytes(c));
	f->names = malloc(SKY_LAYER_S8_NENTRIES * 96);
	sky_layer_init(c, f->w, 3);
	sky_rng r;
	sky_rng_seed(&r, 4);
	for (size_t i = 0; i < nx; i++)
		f->x[i] = sky_rng_normal(&r);
	float *cs = malloc(sky_layer_s8_calib_scratch_floats(c) * 4);
	sky_layer_s8_calib cal;
	sky_layer_s8_calib_init(&cal);
	sky_diag d;
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_layer_s8_calibrate(c, f->w, f->x, NULL, cs, &cal, &d), 0);
	SKY_EXPECT_EQ(carve(&f->a, c), 0);
	SKY_EXPECT_EQ(carve(&f->b, c), 0);
	SKY_EXPECT_EQ(sky_layer_s8_from_f32(&f->a.L, f->w, &cal, f->tmp, &d), 0);
	int n = sky_layer_s8_entries(&f->a.L, "bert.encoder.layer.0.", f->wbuf, f->names, f->e, &d);
	SKY_EXPECT_EQ(n, SKY_LAYER_S8_NENTRIES);
	free(cs);
}

static void teardown(fixture *f)
{
	free(f->w), free(f->x), free(f->y1), free(f->y2), free(f->tmp), free(f->wbuf), free(f->names);
	free(f->a.mem), free(f->b.mem);
}

/* encodes the entries, parses them back and loads layer b; returns rc */
static int roundtrip(fixture *f, sky_diag *d)
{
	size_t size = 0, len = 0;
	SKY_EXPECT_EQ(sky_st_encoded_size(f->e, SKY_LAYER_S8_NENTRIES, NULL, 0, &size, d), 0);
	unsigned char *buf = malloc(size);
	SKY_EXPECT_EQ(sky_st_encode(f->e, SKY_LAYER_S8_NENTRIES, NULL, 0, buf, size, &len, d), 0);
	sky_st_file st;
	sky_st_init(&st);
	int rc = sky_st_parse(&st, buf, len, d);
	SKY_EXPECT_EQ(rc, 0);
	if (rc == 0)
		rc = sky_layer_s8_load(&f->b.L, &st, "bert.encoder.layer.0.", f->tmp, d);
	sky_st_close(&st);
	free(buf);
	return rc;
}

SKY_TEST(written_and_read_back_gives_the_same_bits)
{
	fixture f;
	setup(&f);
	sky_diag d;
	sky_diag_clear(&d);
	int rc = roundtrip(&f, &d);
	SKY_EXPECT_MSG(rc == 0, "load: %s", d.msg);
	size_t nx = (size_t)sky_model_tokens(&f.c) * f.c.hidden;
	SKY_EXPECT_EQ(sky_layer_s8_forward(&f.a.L, f.x, NULL, f.y1), 0);
	SKY_EXPECT_EQ(sky_layer_s8_forward(&f.b.L, f.x, NULL, f.y2), 0);
	SKY_EXPECT(memcmp(f.y1, f.y2, nx * 4) == 0);
	/* int8 weight matrices are a quarter of fp32's (16-channel padding aside) */
	size_t fp32 = 4 * (4 * (size_t)f.c.hidden * f.c.hidden + 2 * (size_t)f.c.hidden * f.c.ffn);
	SKY_EXPECT_EQ(sky_layer_s8_weight_bytes(&f.c) * 4, fp32);
	teardown(&f);
}

SKY_TEST(bad_files_are_refused_naming_the_tensor)
{
	fixture f;
	setup(&f);
	sky_diag d;
	/* a weight stored as F32 where I8 is expected */
	sky_st_entry keep = f.e[0];
	float *as_f32 = calloc((size_t)f.c.hidden * f.c.hidden, 4);
	f.e[0].dtype = SKY_ST_F32;
	f.e[0].data = as_f32;
	sky_diag_clear(&d);
	SKY_EXPECT(roundtrip(&f, &d) != 0);
	SKY_EXPECT_MSG(strstr(d.msg, "attention.self.query.weight") && strstr(d.msg, "I8"), "%s",
		       d.msg);
	f.e[0] = keep;
	free(as_f32);
	/* a zero scale, then a NaN scale */
	float *sc = (float *)f.e[1].data, s0 = sc[3];
	for (int k = 0; k < 2; k++) {
		sc[3] = k ? NAN : 0.0f;
		sky_diag_clear(&d);
		SKY_EXPECT(roundtrip(&f, &d) == SKY_EINVAL);
		SKY_EXPECT_MSG(strstr(d.msg, "query.weight_scale") && strstr(d.msg, "scale 3"), "%s",
			       d.msg);
	}
	sc[3] = s0;
	/* an activation range of zero */
	float *am = (float *)f.e[SKY_LAYER_S8_NENTRIES - 1].data, a0 = am[SKY_Q_G];
	am[SKY_Q_G] = 0;
	sky_diag_clear(&d);
	SKY_EXPECT(roundtrip(&f, &d) == SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "'g'") && strstr(d.msg, "scale of zero"), "%s", d.msg);
	am[SKY_Q_G] = a0;
	/* biases as F16 */
	keep = f.e[12];
	f.e[12].dtype = SKY_ST_F16;
	sky_diag_clear(&d);
	SKY_EXPECT(roundtrip(&f, &d) != 0);
	SKY_EXPECT_MSG(strstr(d.msg, "F32") != NULL, "%s", d.msg);
	f.e[12] = keep;
	/* and the good file still loads */
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(roundtrip(&f, &d), 0);
	teardown(&f);
}
