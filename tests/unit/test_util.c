#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "result.h"
#include "util.h"

static void dbuf_caps_and_counts(void **state)
{
    (void)state;
    dbuf b;
    dbuf_init(&b, 5);
    dbuf_add(&b, "abc", 3);
    dbuf_add(&b, "defg", 4);
    assert_int_equal(b.len, 5);
    assert_string_equal(dbuf_str(&b), "abcde");
    assert_int_equal(b.dropped, 2);
    dbuf_add(&b, "xyz", 3);
    assert_int_equal(b.dropped, 5);
    dbuf_free(&b);
    dbuf_init(&b, 0);
    assert_string_equal(dbuf_str(&b), "");
    for (int i = 0; i < 1000; i++)
        dbuf_addstr(&b, "0123456789");
    assert_int_equal(b.len, 10000);
    assert_int_equal(b.dropped, 0);
    dbuf_free(&b);
}

static void parse_u64_rejects_junk(void **state)
{
    (void)state;
    uint64_t v;
    assert_true(parse_u64("0", &v) && v == 0);
    assert_true(parse_u64("18446744073709551615", &v) && v == UINT64_MAX);
    assert_false(parse_u64("18446744073709551616", &v));
    assert_false(parse_u64("", &v));
    assert_false(parse_u64("12a", &v));
    assert_false(parse_u64("-1", &v));
    assert_false(parse_u64(" 1", &v));
}

static void errors_are_one_line_with_context(void **state)
{
    (void)state;
    txbox_error e = {0};
    assert_int_equal(tx_errno(&e, ENOENT, "cannot open %s", "a\nb"), -1);
    assert_int_equal(e.code, ENOENT);
    assert_null(strchr(e.msg, '\n'));
    assert_non_null(strstr(e.msg, "No such file"));
    tx_err_ctx(&e, "workspace %s", "w");
    assert_true(!strncmp(e.msg, "workspace w: cannot open a b", 28));
    /* the context folds too (a workspace path with a newline in it) */
    tx_err_ctx(&e, "workspace %s", "/tmp/a\nb\rc");
    assert_null(strchr(e.msg, '\n'));
    assert_null(strchr(e.msg, '\r'));
    assert_true(!strncmp(e.msg, "workspace /tmp/a b c: workspace w:", 34));
    tx_err_more(&e, "; and\nmore");
    assert_null(strchr(e.msg, '\n'));
}

/* File names through JSON and back: UTF-8 kept, other bytes and the
 * backslash as \xNN; what json_text cannot have written is refused. */
static void json_text_round_trip(void **state)
{
    (void)state;
    const char *names[] = {"plain.txt", "caf\xc3\xa9", "n\xff\xfe", "back\\slash", "\\x41", ""};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        json_t *j = json_text(names[i], strlen(names[i]), true);
        char *b = json_text_bytes(json_string_value(j), json_string_length(j));
        assert_non_null(b);
        assert_string_equal(b, names[i]);
        free(b);
        json_decref(j);
    }
    json_t *j = json_text("n\xff", 2, true);
    assert_string_equal(json_string_value(j), "n\\xff");
    json_decref(j);
    const char *bad[] = {"a\\", "a\\x", "a\\x4", "a\\y41", "a\\xzz", "a\\x00", "a\\x4G"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_null(json_text_bytes(bad[i], strlen(bad[i])));
    assert_null(json_text_bytes("a\0b", 3));
}

/* path_below: the part under dir, "" for dir itself, NULL beside it (a
 * longer name that starts the same is not under it) */
static void path_below_parts(void **state)
{
    (void)state;
    assert_string_equal(path_below("/a/b/c", "/a/b"), "c");
    assert_string_equal(path_below("/a/b", "/a/b"), "");
    assert_null(path_below("/a/bc", "/a/b"));
    assert_null(path_below("/a", "/a/b"));
    assert_string_equal(path_below("/a/b", "/"), "a/b");
    assert_string_equal(path_below("/", "/"), "");
    assert_null(path_below("a/b", "/"));
    assert_true(path_under("/w/x", "/w"));
    assert_false(path_under("/wx", "/w"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dbuf_caps_and_counts),   cmocka_unit_test(json_text_round_trip),
        cmocka_unit_test(parse_u64_rejects_junk), cmocka_unit_test(errors_are_one_line_with_context),
        cmocka_unit_test(path_below_parts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
