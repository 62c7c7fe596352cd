/* Losses (lib/tx/losses*.c): git's index read directly, the after state of
 * a path from a transaction's operations, databases' headers, the report's caps, and the rules
 * with `losses:` (lib/policy/effect_rules.c). The whole check, on real
 * repositories: tests/integration/losses.bats. argv[1]: the corpus of
 * indexes (tests/fuzz/corpus/git_index). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>

#include "losses_int.h"

static const char *corpus;

static void load(const char *name, struct gix *x)
{
    _cleanup_close_ int d = open(corpus, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const char *why = NULL;
    assert_true(d >= 0);
    assert_int_equal(gix_load(x, d, name, &why), 0);
}

static void index_versions(void **state)
{
    (void)state;
    struct gix v2, v4, v3;
    load("v2", &v2);
    load("v4", &v4);
    load("v3-flags", &v3);
    /* the same entries written as version 2 and as version 4 */
    assert_int_equal(v2.n, 6);
    assert_true(gix_same_entries(&v2, &v4));
    assert_string_equal(v4.v[3].path, "src/deep/er/x.h");
    /* skip-worktree and an intent to add are entries of their own kind */
    assert_false(gix_same_entries(&v2, &v3));
    const struct gix_entry *ita = gix_find(&v3, "ita.txt", 7);
    assert_non_null(ita);
    assert_true(ita->xflags & 0x2000);
    /* lookups: exact paths only, never a prefix */
    assert_non_null(gix_find(&v2, "sp ace.txt", 10));
    assert_null(gix_find(&v2, "src", 3));
    assert_null(gix_find(&v2, "src/main", 8));
    assert_int_equal(gix_lower(&v2, "src/", 4), 3);
    gix_free(&v2);
    gix_free(&v4);
    gix_free(&v3);
}

static void index_stages_and_refusals(void **state)
{
    (void)state;
    struct gix x;
    load("v2-stages", &x);
    const struct gix_entry *e = gix_find(&x, "c.txt", 5);
    assert_non_null(e);
    assert_int_equal((e->flags >> 12) & 3, 1); /* the lowest stage */
    gix_free(&x);
    _cleanup_close_ int d = open(corpus, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const char *why = NULL;
    assert_int_equal(gix_load(&x, d, "truncated", &why), -1);
    assert_non_null(why);
    why = NULL;
    assert_int_equal(gix_load(&x, d, "lying-count", &why), -1);
    assert_non_null(why);
    why = NULL; /* git writes its paths sorted: any other order is refused */
    assert_int_equal(gix_load(&x, d, "unsorted", &why), -1);
    assert_non_null(why);
    assert_int_equal(gix_load(&x, d, "no-such-index", &why), 1);
}

static void blob_ids(void **state)
{
    (void)state;
    unsigned char oid[20];
    static const unsigned char hello[20] = {0xce, 0x01, 0x36, 0x25, 0x03, 0x0b, 0xa8, 0xdb, 0xa9, 0x06,
                                            0xf7, 0x56, 0x96, 0x7f, 0x9e, 0x9c, 0xa3, 0x94, 0x46, 0x4a};
    gix_blob_oid("hello\n", 6, oid); /* git hash-object of "hello\n" */
    assert_memory_equal(oid, hello, 20);
}

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* A pack's index (version 2) lists its ids; a short, claiming or other
 * version's lists none. */
/* hdr: n bytes of zeros with text at offset at (the header losses_db_kind
 * reads), in buf. */
static size_t hdr(char *buf, size_t n, size_t at, const void *text, size_t len)
{
    memset(buf, 0, n);
    memcpy(buf + at, text, len);
    return n;
}

static void db_kinds(void **state)
{
    (void)state;
    char b[128];
    static const unsigned char lmdb[] = {0xde, 0xc0, 0xef, 0xbe};   /* 0xBEEFC0DE, little-endian */
    static const unsigned char bdb_le[] = {0x62, 0x31, 0x05, 0x00}; /* a btree's magic */
    static const unsigned char bdb_be[] = {0x00, 0x06, 0x15, 0x61}; /* a hash's, big-endian */
    assert_string_equal(losses_db_kind(b, hdr(b, 100, 8, "DUCK", 4)), "DuckDB");
    assert_string_equal(losses_db_kind(b, hdr(b, 100, 16, lmdb, 4)), "LMDB");
    assert_string_equal(losses_db_kind(b, hdr(b, 100, 12, bdb_le, 4)), "Berkeley DB");
    assert_string_equal(losses_db_kind(b, hdr(b, 100, 12, bdb_be, 4)), "Berkeley DB");
    assert_string_equal(losses_db_kind(b, hdr(b, 100, 0, "REDIS0011", 9)), "Redis");
    assert_string_equal(losses_db_kind(b, hdr(b, 100, 0, "H:2,block:0", 11)), "H2");
    assert_string_equal(losses_db_kind(b, hdr(b, 100, 4, "Standard Jet DB", 15)), "Microsoft Access");
    assert_string_equal(losses_db_kind(b, hdr(b, 100, 4, "Standard ACE DB", 15)), "Microsoft Access");
    assert_string_equal(losses_db_kind(b, hdr(b, 100, 16, "T-DB", 4)), "Realm");
    /* not one: text, zeros, a near miss, SQLite's own (judged by pages) */
    assert_null(losses_db_kind(b, hdr(b, 100, 0, "hello, world\n", 13)));
    assert_null(losses_db_kind(b, hdr(b, 100, 0, "", 0)));
    assert_null(losses_db_kind(b, hdr(b, 100, 0, "REDIS00x1", 9)));
    assert_null(losses_db_kind(b, hdr(b, 100, 0, "SQLite format 3", 16)));
    /* never read past n: each magic cut short by a byte is none */
    hdr(b, 100, 8, "DUCK", 4);
    assert_null(losses_db_kind(b, 11));
    hdr(b, 100, 16, lmdb, 4);
    assert_null(losses_db_kind(b, 19));
    hdr(b, 100, 0, "REDIS0011", 9);
    assert_null(losses_db_kind(b, 8));
    hdr(b, 100, 4, "Standard Jet DB", 15);
    assert_null(losses_db_kind(b, 18));
    assert_null(losses_db_kind(b, 0));
}

static void pack_index(void **state)
{
    (void)state;
    unsigned char ids[3][20] = {{0x00}, {0x7f}, {0xff}};
    for (int k = 0; k < 3; k++)
        ids[k][19] = (unsigned char)(k + 1);
    size_t len = 8 + 1024 + sizeof ids;
    unsigned char *b = calloc(1, len);
    assert_non_null(b);
    memcpy(b, "\377tOc", 4);
    put32(b + 4, 2);
    for (int i = 0; i < 256; i++)
        put32(b + 8 + 4 * i, (uint32_t)(1 + (i >= 0x7f) + (i >= 0xff)));
    memcpy(b + 8 + 1024, ids, sizeof ids);
    for (int k = 0; k < 3; k++)
        assert_true(gix_pack_has(b, len, ids[k]));
    unsigned char other[20] = {0x7f};
    other[19] = 9;
    assert_false(gix_pack_has(b, len, other));
    assert_false(gix_pack_has(b, len - 1, ids[2])); /* too short for its three */
    put32(b + 4, 3);
    assert_false(gix_pack_has(b, len, ids[0]));
    put32(b + 4, 2);
    put32(b + 8 + 255 * 4, 1000); /* claims more than it holds */
    assert_false(gix_pack_has(b, len, ids[2]));
    put32(b + 8 + 255 * 4, 3);
    put32(b + 8 + 0x7e * 4, 3); /* a fan-out that goes down */
    assert_false(gix_pack_has(b, len, ids[1]));
    free(b);
}

static void after_state(void **state)
{
    (void)state;
    struct tx_ops ops = {0};
    op_add(&ops, OP_META, "");
    op_add(&ops, OP_DELETE, "gone")->old_dir = 1;
    struct tx_op *o = op_add(&ops, OP_REPLACE, "newdir");
    o->new_dir = 1;
    op_add(&ops, OP_REPLACE, "a/file")->had_old = 1;
    op_add(&ops, OP_REPLACE, "a/new");
    op_add(&ops, OP_DELETE, "a/old");
    struct lview v;
    lview_init(&v, &ops);
    assert_int_equal(lview_where(&v, "kept"), LV_WS);
    assert_int_equal(lview_where(&v, "gone"), LV_GONE);
    assert_int_equal(lview_where(&v, "gone/deep/x"), LV_GONE);
    assert_int_equal(lview_where(&v, "newdir/x"), LV_UPPER);
    assert_int_equal(lview_where(&v, "a/file"), LV_UPPER);
    assert_int_equal(lview_where(&v, "a/file/x"), LV_GONE); /* under a file */
    assert_int_equal(lview_where(&v, "a/other"), LV_WS);
    assert_int_equal(lview_where(&v, "a/old"), LV_GONE);
    unsigned mask;
    assert_true(lview_under(&v, "a", &mask));
    assert_int_equal(mask, (1u << OP_REPLACE) | (1u << OP_DELETE));
    assert_false(lview_under(&v, "ab", &mask));
    lview_free(&v);
    ops_free(&ops);
}

static void report_caps(void **state)
{
    (void)state;
    struct losses l = {0};
    for (int i = 0; i < 150; i++) {
        char p[32];
        snprintf(p, sizeof p, "f%d", i);
        assert_non_null(losses_add(&l, EFF_LOSS_UNTRACKED, p, 10, "deleted"));
    }
    json_t *j = losses_json(&l);
    assert_int_equal(json_integer_value(json_object_get(j, "count")), 150);
    assert_int_equal(json_integer_value(json_object_get(j, "bytes")), 1500);
    assert_true(json_is_true(json_object_get(j, "truncated")));
    assert_int_equal(json_array_size(json_object_get(j, "items")), LOSSES_ITEMS_SHOWN);
    json_decref(j);
    losses_free(&l);
    j = losses_json(NULL);
    assert_int_equal(json_integer_value(json_object_get(j, "count")), 0);
    json_decref(j);
}

/* A judge over one losses rule. */
static json_t *judge_one(unsigned kinds, int64_t grace, const char *none, const struct effect_loss *l,
                         size_t n)
{
    effect_rule r = {.id = (char *)"lost",
                     .reason = (char *)"lost work",
                     .suggestion = (char *)"keep it",
                     .action = EFF_ASK,
                     .losses = kinds,
                     .losses_grace = grace,
                     .max_files_deleted = -1,
                     .max_bytes_written = -1,
                     .max_binary_added = -1,
                     .max_made_executable = -1};
    if (none)
        strlist_add(&r.paths_none, none);
    txbox_policy p = {.effects = &r, .neffects = 1};
    struct effect_judge j;
    effect_judge_init(&j, &p);
    for (size_t i = 0; i < n; i++)
        effect_judge_loss(&j, &l[i]);
    json_t *v = effect_judge_end(&j);
    json_decref(j.attention);
    strlist_free(&r.paths_none);
    return v;
}

static void losses_rules(void **state)
{
    (void)state;
    struct effect_loss mine = {
        .kind = EFF_LOSS_UNTRACKED, .path = "tmp.txt", .bytes = 5, .own = true, .age_s = 60};
    struct effect_loss person = {.kind = EFF_LOSS_UNCOMMITTED, .path = "a.py", .bytes = 9};
    unsigned both = 1u << EFF_LOSS_UNTRACKED | 1u << EFF_LOSS_UNCOMMITTED;
    /* the agent's own work of a minute ago does not count... */
    assert_null(judge_one(both, 3600, NULL, &mine, 1));
    /* ... with losses_grace 0 it does, and an hour later too */
    json_t *v = judge_one(both, 0, NULL, &mine, 1);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_object_get(v, "action")), "ask");
    json_decref(v);
    mine.age_s = 7200;
    v = judge_one(both, 3600, NULL, &mine, 1);
    assert_non_null(v);
    json_decref(v);
    /* a person's work counts; other kinds and excluded paths do not */
    v = judge_one(both, 3600, NULL, &person, 1);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_array_get(json_object_get(v, "paths"), 0)), "a.py");
    assert_non_null(strstr(json_string_value(json_object_get(v, "reason")), "uncommitted 1 (9 bytes)"));
    json_decref(v);
    assert_null(judge_one(1u << EFF_LOSS_STASH, 3600, NULL, &person, 1));
    assert_null(judge_one(both, 3600, "*.py", &person, 1));
    assert_int_equal(effect_loss_kind("history"), EFF_LOSS_HISTORY);
    assert_int_equal(effect_loss_kind("histories"), -1);
}

int main(int argc, char **argv)
{
    corpus = argc > 1 ? argv[1] : "tests/fuzz/corpus/git_index";
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(index_versions), cmocka_unit_test(index_stages_and_refusals),
        cmocka_unit_test(blob_ids),       cmocka_unit_test(pack_index),
        cmocka_unit_test(db_kinds),       cmocka_unit_test(after_state),
        cmocka_unit_test(report_caps),    cmocka_unit_test(losses_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
