/* safe_openat never follows a symlink and never leaves its directory, with
 * openat2 and with the fallback walk. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include "safepath.h"
#include "tx.h"

static char root[64];
static int rootfd = -1;

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/txbox-safepath-XXXXXX");
    if (!mkdtemp(root))
        return -1;
    rootfd = open(root, O_RDONLY | O_DIRECTORY);
    mkdirat(rootfd, "a", 0755);
    mkdirat(rootfd, "a/b", 0755);
    close(openat(rootfd, "a/b/file", O_CREAT | O_WRONLY, 0644));
    if (symlinkat("/etc", rootfd, "etc") < 0 || symlinkat("..", rootfd, "a/up") < 0 ||
        symlinkat("b", rootfd, "a/lb") < 0 || symlinkat("b/file", rootfd, "a/lf") < 0)
        return -1;
    char f[128];
    snprintf(f, sizeof f, "%s/a/b/file", root);
    if (setxattr(f, "user.txbox.a", "1", 1, 0) < 0 || setxattr(f, "user.txbox.b", "2", 1, 0) < 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tree_remove(AT_FDCWD, root);
    close(rootfd);
    return 0;
}

static void check_all(void)
{
    int fd = safe_openat(rootfd, "a/b/file", O_RDONLY, 0);
    assert_true(fd >= 0);
    close(fd);
    fd = safe_openat(rootfd, "", O_RDONLY | O_DIRECTORY, 0);
    assert_true(fd >= 0);
    close(fd);
    /* A symlink anywhere on the way is refused. */
    errno = 0;
    assert_int_equal(safe_openat(rootfd, "etc/passwd", O_RDONLY, 0), -1);
    assert_int_equal(errno, ELOOP);
    assert_int_equal(safe_openat(rootfd, "a/up/a/b/file", O_RDONLY, 0), -1);
    assert_int_equal(safe_openat(rootfd, "a/lb/file", O_RDONLY, 0), -1);
    /* A final symlink is not followed. */
    assert_int_equal(safe_openat(rootfd, "etc", O_RDONLY | O_DIRECTORY, 0), -1);
    /* Escapes are not even resolved. */
    errno = 0;
    assert_int_equal(safe_openat(rootfd, "../etc/passwd", O_RDONLY, 0), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(safe_openat(rootfd, "/etc/passwd", O_RDONLY, 0), -1);
    assert_int_equal(safe_openat(rootfd, "a//b", O_RDONLY, 0), -1);
    assert_int_equal(safe_openat(rootfd, "a/./b", O_RDONLY, 0), -1);
    const char *base;
    fd = safe_open_parent(rootfd, "a/b/file", &base);
    assert_true(fd >= 0);
    assert_string_equal(base, "file");
    close(fd);
    assert_int_equal(safe_open_parent(rootfd, "etc/x", &base), -1);
    /* the same, opened for reading (what fsync and the renames take) */
    fd = safe_open_parent_rd(rootfd, "a/b/file", &base);
    assert_true(fd >= 0);
    assert_string_equal(base, "file");
    assert_true((fcntl(fd, F_GETFL) & O_PATH) == 0);
    assert_int_equal(fsync(fd), 0);
    close(fd);
    assert_int_equal(safe_open_parent_rd(rootfd, "a/lb/x", &base), -1);
}

/* exists_at says yes, no, or that it cannot tell: never "no" for an error
 * other than ENOENT. */
static void exists_is_three_valued(void **state)
{
    (void)state;
    assert_int_equal(exists_at(rootfd, "a"), 1);
    assert_int_equal(exists_at(rootfd, "etc"), 1); /* the link itself */
    assert_int_equal(exists_at(rootfd, "nothing"), 0);
    errno = 0;
    assert_int_equal(exists_at(-1, "a"), -1);
    assert_int_equal(errno, EBADF);
    int f = openat(rootfd, "a/b/file", O_RDONLY);
    assert_true(f >= 0);
    assert_int_equal(exists_at(f, "x"), -1); /* ENOTDIR: not "absent" */
    assert_int_equal(errno, ENOTDIR);
    close(f);
}

static void with_openat2(void **state)
{
    (void)state;
    safepath_force_fallback(false);
    check_all();
}

static void with_fallback_walk(void **state)
{
    (void)state;
    safepath_force_fallback(true);
    check_all();
    safepath_force_fallback(false);
}

/* The names of file's attributes, and none of them through a link to it
 * (the link itself is listed, not followed), by either way of listing. */
static void xattr_names(bool fallback)
{
    safepath_force_fallback(fallback);
    _cleanup_close_ int d = openat(rootfd, "a", O_RDONLY | O_DIRECTORY);
    assert_true(d >= 0);
    char buf[4096];
    ssize_t n = xattr_list_at(d, "b/file", buf, sizeof buf);
    assert_true(n > 0);
    bool a = false, b = false;
    for (char *k = buf; k < buf + n; k += strlen(k) + 1) {
        a |= !strcmp(k, "user.txbox.a");
        b |= !strcmp(k, "user.txbox.b");
    }
    assert_true(a && b);
    n = xattr_list_at(d, "lf", buf, sizeof buf);
    assert_true(n >= 0);
    for (char *k = buf; k < buf + n; k += strlen(k) + 1)
        assert_true(strncmp(k, "user.txbox.", 11));
    errno = 0;
    assert_int_equal(xattr_list_at(d, "missing", buf, sizeof buf), -1);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(xattr_list_at(d, "b/file", buf, 4), -1); /* too small */
    assert_int_equal(errno, ERANGE);
    safepath_force_fallback(false);
}

static void xattr_list_by_syscall(void **state)
{
    (void)state;
    xattr_names(false);
}

static void xattr_list_by_proc(void **state)
{
    (void)state;
    xattr_names(true);
}

static void relpath_rules(void **state)
{
    (void)state;
    assert_true(safe_relpath_ok(""));
    assert_true(safe_relpath_ok("a/b c/\xff"));
    assert_false(safe_relpath_ok("a/"));
    assert_false(safe_relpath_ok("/a"));
    assert_false(safe_relpath_ok("a/.."));
    assert_false(safe_relpath_ok(".."));
    assert_false(safe_relpath_ok("."));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(with_openat2),       cmocka_unit_test(with_fallback_walk),
        cmocka_unit_test(relpath_rules),      cmocka_unit_test(xattr_list_by_syscall),
        cmocka_unit_test(xattr_list_by_proc), cmocka_unit_test(exists_is_three_valued),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
