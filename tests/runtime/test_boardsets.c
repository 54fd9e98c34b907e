#include "sky_test.h"

#include "sky_boardsets.h"
#include "sky_dataset.h"
#include "sky_file.h"

#include <stdio.h>
#include <string.h>

/* A set of rows rows of 4 tokens, 2 labels, tokenizer hash tok, at path. */
static void write_set(const char *path, int rows, uint32_t tok)
{
	sky_ds_build b;
	sky_diag d;
	sky_diag_clear(&d);
	sky_ds_build_init(&b, 4);
	for (int i = 0; i < rows; i++) {
		int32_t *ids, *types, *mask;
		SKY_EXPECT_EQ(sky_ds_build_next(&b, &ids, &types, &mask), 0);
		int32_t row[4] = {2, 10 + i, 3, 0}, m[4] = {1, 1, 1, 0};
		memcpy(ids, row, sizeof row);
		memcpy(mask, m, sizeof m);
		memset(types, 0, 4 * sizeof *types);
		sky_ds_build_commit(&b, i % 2);
	}
	b.meta.nlabels = 2;
	strcpy(b.meta.label[0], "neg");
	strcpy(b.meta.label[1], "pos");
	strcpy(b.meta.label_source, "data");
	strcpy(b.meta.source, "t.tsv");
	memset(b.meta.source_sha256, 'a', 64);
	b.meta.tokenizer_hash = tok;
	SKY_EXPECT_MSG(sky_ds_write(path, &b, &d) == 0, "%s", d.msg);
	sky_ds_build_free(&b);
}

SKY_TEST(sets_from_the_command_line_and_the_state_folder)
{
	char p1[512], dir[600], p2[700], p3[700];
	sky_diag d;
	sky_diag_clear(&d);
	snprintf(p1, sizeof p1, "%s/one.skyds", sky_test_tmp_dir());
	snprintf(dir, sizeof dir, "%s/st/datasets", sky_test_tmp_dir());
	SKY_EXPECT_EQ(sky_file_mkdirs(dir, 0700), 0);
	snprintf(p2, sizeof p2, "%s/zeta.skyds", dir);
	snprintf(p3, sizeof p3, "%s/alpha.skyds", dir);
	write_set(p1, 6, 0x1234abcd);
	write_set(p2, 3, 7);
	write_set(p3, 5, 7);
	char arg[600];
	snprintf(arg, sizeof arg, "train=%s", p1);
	sky_boardsets b;
	sky_boardsets_init(&b);
	SKY_EXPECT_MSG(sky_boardsets_add_arg(&b, arg, &d) == 0, "%s", d.msg);
	char st[512];
	snprintf(st, sizeof st, "%s/st", sky_test_tmp_dir());
	SKY_EXPECT_MSG(sky_boardsets_scan(&b, st, &d) == 0, "%s", d.msg);
	SKY_EXPECT_EQ(b.n, 3);
	/* the folder in name order, each under its file's stem */
	SKY_EXPECT(strcmp(b.s[1].info.name, "alpha") == 0 && strcmp(b.s[2].info.name, "zeta") == 0);
	const sky_boardset *s = sky_boardsets_find(&b, "train");
	SKY_EXPECT(s && s->info.rows == 6 && s->info.labels == 2 && s->info.seq == 4);
	SKY_EXPECT_EQ(s->info.tokenizer, 0x1234abcdu);
	SKY_EXPECT(strcmp(s->path, p1) == 0);
	SKY_EXPECT_EQ(strlen(s->info.sha256), 64);
	SKY_EXPECT(sky_boardsets_find(&b, "nope") == NULL);
	/* the file's hash: equal content, equal hash; another set, another */
	SKY_EXPECT(strcmp(b.s[1].info.sha256, b.s[2].info.sha256) != 0);
	sky_caps c;
	memset(&c, 0, sizeof c);
	sky_boardsets_to_caps(&b, &c);
	SKY_EXPECT_EQ(c.n_datasets, 3);
	SKY_EXPECT(sky_caps_dataset_find(&c, "zeta")->rows == 3);
	/* a name taken twice */
	SKY_EXPECT_EQ(sky_boardsets_add_arg(&b, arg, &d), SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "'train' named twice") != NULL, "%s", d.msg);
}

SKY_TEST(bad_sets_and_arguments_are_refused_naming_them)
{
	char bad[512], arg[600];
	sky_diag d;
	sky_boardsets b;
	sky_boardsets_init(&b);
	snprintf(bad, sizeof bad, "%s/bad.skyds", sky_test_tmp_dir());
	SKY_EXPECT_EQ(sky_file_write(bad, "not a set", 9, 0600), 0);
	snprintf(arg, sizeof arg, "dev=%s", bad);
	sky_diag_clear(&d);
	SKY_EXPECT(sky_boardsets_add_arg(&b, arg, &d) < 0);
	SKY_EXPECT_MSG(strstr(d.msg, "data set 'dev'") != NULL && strstr(d.msg, bad) != NULL, "%s",
		       d.msg);
	snprintf(arg, sizeof arg, "dev=%s/missing.skyds", sky_test_tmp_dir());
	sky_diag_clear(&d);
	SKY_EXPECT(sky_boardsets_add_arg(&b, arg, &d) < 0);
	SKY_EXPECT_MSG(strstr(d.msg, "missing.skyds") != NULL, "%s", d.msg);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_boardsets_add_arg(&b, "noequals", &d), SKY_EINVAL);
	SKY_EXPECT(strstr(d.msg, "NAME=PATH") != NULL);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_boardsets_add_arg(&b, "=x", &d), SKY_EINVAL);
	sky_diag_clear(&d);
	SKY_EXPECT_EQ(sky_boardsets_add_arg(&b, "a/b=x", &d), SKY_EINVAL);
	SKY_EXPECT_MSG(strstr(d.msg, "'a/b'") != NULL, "%s", d.msg);
	/* a bad file in the folder stops the scan, named */
	char st[512], dir[600], p[700];
	snprintf(st, sizeof st, "%s/st2", sky_test_tmp_dir());
	snprintf(dir, sizeof dir, "%s/datasets", st);
	SKY_EXPECT_EQ(sky_file_mkdirs(dir, 0700), 0);
	snprintf(p, sizeof p, "%s/broken.skyds", dir);
	SKY_EXPECT_EQ(sky_file_write(p, "{}", 2, 0600), 0);
	sky_diag_clear(&d);
	SKY_EXPECT(sky_boardsets_scan(&b, st, &d) < 0);
	SKY_EXPECT_MSG(strstr(d.msg, "broken.skyds") != NULL, "%s", d.msg);
	SKY_EXPECT_EQ(b.n, 0);
	/* no folder: nothing, no error */
	snprintf(st, sizeof st, "%s/none", sky_test_tmp_dir());
	SKY_EXPECT_EQ(sky_boardsets_scan(&b, st, &d), 0);
}

