/* upper_copy (lib/store/uppercopy.c): a whole copy of an upper with its
 * record, then the difference since the record (what a session's
 * background processes wrote after their command), as an upper of its
 * own: added and changed entries, a whiteout for each removed one, a new
 * or replaced directory whole and opaque, an unchanged one left out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>

#include "tree.h"
#include "uppercopy.h"

#define OPAQUE "user.overlay.opaque"

static char root[64];
static int top = -1;

static void mkfile(int dfd, const char *p, const char *text)
{
    int fd = openat(dfd, p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static char *slurp(int dfd, const char *p)
{
    static char buf[256];
    int fd = openat(dfd, p, O_RDONLY);
    if (fd < 0)
        return NULL;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    return buf;
}

static bool exists(int dfd, const char *p)
{
    struct stat st;
    return fstatat(dfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static bool is_whiteout(int dfd, const char *p)
{
    struct stat st;
    return fstatat(dfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISCHR(st.st_mode) &&
           st.st_rdev == makedev(0, 0);
}

static bool opaque(int dfd, const char *p)
{
    char path[PATH_MAX], v[4];
    snprintf(path, sizeof path, "/proc/self/fd/%d/%s", dfd, p);
    return lgetxattr(path, OPAQUE, v, sizeof v) == 1 && v[0] == 'y';
}

static int dir(const char *name)
{
    mkdirat(top, name, 0755);
    int fd = openat(top, name, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    return fd;
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/var/tmp/txbox-uppercopy-XXXXXX");
    if (!mkdtemp(root))
        return -1;
    top = open(root, O_RDONLY | O_DIRECTORY);
    return top < 0 ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    int p = open("/var/tmp", O_RDONLY | O_DIRECTORY);
    (void)tree_remove(p, root + strlen("/var/tmp/"));
    close(p);
    close(top);
    return 0;
}

/* The command's upper: kept.txt, touched.txt, gone.txt, d/in.txt,
 * d/gone-in.txt, rep/ (a directory later replaced), same/x.txt, a link. */
static void command_upper(int up)
{
    mkfile(up, "kept.txt", "kept\n");
    mkfile(up, "touched.txt", "v1\n");
    mkfile(up, "gone.txt", "gone\n");
    mkdirat(up, "d", 0755);
    mkfile(up, "d/in.txt", "in\n");
    mkfile(up, "d/gone-in.txt", "x\n");
    mkdirat(up, "rep", 0755);
    mkfile(up, "rep/old.txt", "old\n");
    mkdirat(up, "same", 0755);
    mkfile(up, "same/x.txt", "x\n");
    assert_int_equal(symlinkat("kept.txt", up, "link"), 0);
}

static void test_whole_copy(void **state)
{
    (void)state;
    int up = dir("u1"), cp = dir("c1");
    command_upper(up);
    assert_int_equal(mknodat(up, "wh", S_IFCHR | 0, 0), 0);
    struct urec rec;
    size_t n = 0;
    txbox_error err = {0};
    assert_int_equal(upper_copy(up, cp, NULL, &rec, OPAQUE, &n, &err), 0);
    assert_string_equal(slurp(cp, "kept.txt"), "kept\n");
    assert_string_equal(slurp(cp, "d/in.txt"), "in\n");
    assert_true(is_whiteout(cp, "wh"));
    char t[16] = "";
    assert_int_equal(readlinkat(cp, "link", t, sizeof t - 1), 8);
    /* copied, never linked: a later write to the upper leaves the copy */
    struct stat a, b;
    assert_int_equal(fstatat(up, "kept.txt", &a, 0), 0);
    assert_int_equal(fstatat(cp, "kept.txt", &b, 0), 0);
    assert_true(a.st_ino != b.st_ino);
    /* the record: every entry, and it reads back as written */
    assert_true(rec.n >= 12);
    assert_int_equal(urec_write(top, "rec", &rec, &err), 0);
    struct urec back;
    assert_int_equal(urec_read(top, "rec", &back, &err), 0);
    assert_int_equal(back.n, rec.n);
    for (size_t i = 0; i < rec.n; i++) {
        assert_string_equal(back.v[i].path, rec.v[i].path);
        assert_int_equal(back.v[i].ino, rec.v[i].ino);
        assert_int_equal(back.v[i].ctime.tv_nsec, rec.v[i].ctime.tv_nsec);
    }
    urec_free(&rec);
    urec_free(&back);
    close(up);
    close(cp);
}

static void test_difference(void **state)
{
    (void)state;
    int up = dir("u2"), c0 = dir("c2"), late = dir("l2");
    command_upper(up);
    struct urec rec;
    size_t n = 0;
    txbox_error err = {0};
    assert_int_equal(upper_copy(up, c0, NULL, &rec, OPAQUE, &n, &err), 0);
    /* ctimes move on a clock tick at least */
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
    /* what the background processes do afterwards */
    mkfile(up, "new.txt", "new\n");
    mkfile(up, "touched.txt", "v2\n");
    assert_int_equal(unlinkat(up, "gone.txt", 0), 0);
    assert_int_equal(unlinkat(up, "d/gone-in.txt", 0), 0);
    mkfile(up, "d/added-in.txt", "a\n");
    /* the old directory stays open while the new one is made, so that the
     * new one cannot reuse its inode (a reused one reads as the same
     * directory changed, merged rather than opaque) */
    int old_rep = openat(up, "rep", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(old_rep >= 0);
    (void)tree_remove(up, "rep");
    mkdirat(up, "rep", 0755);
    mkfile(up, "rep/fresh.txt", "fresh\n");
    mkdirat(up, "newdir", 0755);
    mkfile(up, "newdir/f.txt", "f\n");
    assert_int_equal(upper_copy(up, late, &rec, NULL, OPAQUE, &n, &err), 0);
    /* changed and added */
    assert_string_equal(slurp(late, "new.txt"), "new\n");
    assert_string_equal(slurp(late, "touched.txt"), "v2\n");
    assert_string_equal(slurp(late, "d/added-in.txt"), "a\n");
    /* removed: whiteouts, in the directory that held them */
    assert_true(is_whiteout(late, "gone.txt"));
    assert_true(is_whiteout(late, "d/gone-in.txt"));
    /* the same directory merged (not opaque), only its changes */
    assert_false(opaque(late, "d"));
    assert_false(exists(late, "d/in.txt"));
    /* a replaced or new directory: whole, opaque */
    assert_true(opaque(late, "rep"));
    assert_string_equal(slurp(late, "rep/fresh.txt"), "fresh\n");
    assert_false(exists(late, "rep/old.txt"));
    close(old_rep);
    assert_true(opaque(late, "newdir"));
    assert_string_equal(slurp(late, "newdir/f.txt"), "f\n");
    /* unchanged: left out */
    assert_false(exists(late, "kept.txt"));
    assert_false(exists(late, "link"));
    assert_false(exists(late, "same"));
    assert_int_equal(n, 10); /* 7 entries, 2 whiteouts, and d (merged) */
    /* nothing changed since: nothing */
    struct urec now;
    int l2 = dir("l3"), l4 = dir("l4");
    assert_int_equal(upper_copy(up, l2, NULL, &now, OPAQUE, &n, &err), 0);
    assert_int_equal(upper_copy(up, l4, &now, NULL, OPAQUE, &n, &err), 0);
    assert_int_equal(n, 0);
    urec_free(&rec);
    urec_free(&now);
    close(up);
    close(c0);
    close(late);
    close(l2);
    close(l4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_copy),
        cmocka_unit_test(test_difference),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
