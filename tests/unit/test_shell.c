/* The shell that runs a -c string (txbox_shell_resolve) and the check of
 * strings that POSIX sh reads otherwise than bash (sh_reads_differently):
 * every construct of the class is caught, plain POSIX commands are not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"
#include "tx.h"

static void test_resolve(void **state)
{
    (void)state;
    char *path = NULL;
    int posix = -1;
    txbox_error err = {0};
    assert_int_equal(txbox_shell_resolve(NULL, &path, &posix, &err), 0);
    if (access("/bin/bash", X_OK) == 0 || access("/usr/bin/bash", X_OK) == 0) {
        assert_non_null(strstr(path, "/bash"));
        assert_int_equal(posix, 0);
        free(path);
        assert_int_equal(txbox_shell_resolve("bash", &path, &posix, &err), 0);
        assert_int_equal(posix, 0);
    }
    free(path);
    assert_int_equal(txbox_shell_resolve("sh", &path, &posix, &err), 0);
    assert_string_equal(path, "/bin/sh");
    assert_int_equal(posix, 1);
    free(path);
    static const char *const bad[] = {
        "zsh",          "fish",        "bash ", "./bash", "bin/sh", "/nonexistent/sh",
        "/usr/bin/env", "/etc/passwd", "/bin",  ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        path = NULL;
        assert_true(txbox_shell_resolve(bad[i], &path, &posix, &err) < 0);
        assert_null(path);
        assert_true(err.msg[0] != 0);
    }
}

static void test_differs(void **state)
{
    (void)state;
    static const char *const differ[] = {
        "echo $'a\\'b'",
        "echo $'\\x41'",
        "((x=1))",
        "(( x++ ))",
        "echo ((a))",
        "[[ -f x ]]",
        "cat <(ls)",
        "tee >(wc)",
        "ls &> f",
        "ls |& cat",
        "cat <<< x",
        "case x in a) ;& esac",
        "a=(1 2)",
        "ls ?(a)",
        "ls *(a)",
        "ls +(a)",
        "ls @(a)",
        "ls !(a)",
        "function f { ls; }",
        "alias ls=true\nls",
        "echo a\\\\nb | sh",
        "echo {a,b}",
        "cat x{1..3}",
        "{./x,y}",
        "echo pre{a,b}post",
    };
    for (size_t i = 0; i < sizeof differ / sizeof *differ; i++)
        if (!sh_reads_differently(differ[i]))
            fail_msg("not caught: %s", differ[i]);
    static const char *const same[] = {
        "ls -la",
        "echo $((1+2))",
        "x=$(ls); echo \"$x\"",
        "grep -r foo src | wc -l",
        "for f in *.c; do cc -c \"$f\"; done",
        "{ ls; pwd; }",
        "echo ${HOME}",
        "test -f x && cat x",
        "printf '%s\\n' a b",
        "ls 2>&1 >/dev/null",
        "cat <<EOF\nhi\nEOF",
    };
    for (size_t i = 0; i < sizeof same / sizeof *same; i++)
        if (sh_reads_differently(same[i]))
            fail_msg("false alarm: %s", same[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_differs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
