/* merge3_text: libgit2's three-way merge of buffers, loaded when needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "merge3.h"

#define M(b, o, t, out, len, err) merge3_text(b, strlen(b), o, strlen(o), t, strlen(t), out, len, err)

static void test_clean(void **state)
{
    (void)state;
    char *out = NULL;
    size_t len = 0;
    txbox_error err = {0};
    /* ours changed line 1, theirs line 5: both kept */
    assert_int_equal(M("a\nb\nc\nd\ne\n", "A\nb\nc\nd\ne\n", "a\nb\nc\nd\nE\n", &out, &len, &err), 1);
    assert_int_equal(len, 10);
    assert_memory_equal(out, "A\nb\nc\nd\nE\n", 10);
    free(out);
}

static void test_one_side(void **state)
{
    (void)state;
    char *out = NULL;
    size_t len = 0;
    txbox_error err = {0};
    assert_int_equal(M("x\n", "x\n", "y\nz\n", &out, &len, &err), 1);
    assert_int_equal(len, 4);
    assert_memory_equal(out, "y\nz\n", 4);
    free(out);
    /* no trailing newline, empty sides */
    assert_int_equal(M("", "", "t", &out, &len, &err), 1);
    assert_int_equal(len, 1);
    free(out);
}

static void test_conflict(void **state)
{
    (void)state;
    char *out = (char *)1;
    size_t len = 7;
    txbox_error err = {0};
    assert_int_equal(M("a\nb\nc\n", "a\nB1\nc\n", "a\nB2\nc\n", &out, &len, &err), 0);
    assert_null(out);
    assert_int_equal(len, 0);
    /* both sides added different text where there was none */
    assert_int_equal(M("", "one\n", "two\n", &out, &len, &err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clean),
        cmocka_unit_test(test_one_side),
        cmocka_unit_test(test_conflict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
