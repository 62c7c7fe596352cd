/* The sync set of fsops.c: entries deduplicated by inode, an fd kept for
 * each up to FS_SYNC_MAX, then one syncfs; and under TXBOX_FAULT always
 * the deterministic path (an fsync each up to FS_SYNC_EACH, whatever
 * /proc/meminfo says, one syncfs past it), which the crash tests count on.
 * Needs no privilege. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "fsops.h"
#include "tx.h"

static char root[64];
static int dir = -1;

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/txbox-fsops-XXXXXX");
    if (!mkdtemp(root))
        return -1;
    dir = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return dir < 0 ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    if (dir >= 0) {
        close(dir);
        assert_int_equal(tree_remove(AT_FDCWD, root), 0);
    }
    return 0;
}

/* A new file "fI" in dir with some data, open for reading. */
static int mkfile(unsigned i)
{
    char name[16];
    snprintf(name, sizeof name, "f%u", i);
    int fd = openat(dir, name, O_CREAT | O_RDWR | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, name, strlen(name)), (ssize_t)strlen(name));
    return fd;
}

static bool fd_open(int fd) { return fcntl(fd, F_GETFD) >= 0; }

static void dedup_by_inode(void **state)
{
    (void)state;
    struct fs_syncset s = {0};
    int a = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int b = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(a >= 0 && b >= 0 && a != b);
    fs_syncset_add(&s, a);
    fs_syncset_add(&s, b);
    fs_syncset_add(&s, dir);
    assert_int_equal(s.n, 1);
    assert_false(s.all);
    int f = mkfile(0);
    int g = openat(dir, "f0", O_RDONLY | O_CLOEXEC); /* the same file again */
    fs_syncset_add(&s, f);
    fs_syncset_add(&s, g);
    assert_int_equal(s.n, 2);
    /* The set keeps fds of its own: the caller's may be gone by the sync. */
    assert_true(s.fd[0] != a && s.fd[0] != b && s.fd[1] != f && s.fd[1] != g);
    close(a);
    close(b);
    close(f);
    close(g);
    int kept[2] = {s.fd[0], s.fd[1]};
    assert_true(fd_open(kept[0]) && fd_open(kept[1]));
    assert_int_equal(fs_syncset_sync(&s, dir), 0);
    fs_syncset_free(&s);
    assert_int_equal(s.n, 0);
    assert_false(fd_open(kept[0]));
    assert_false(fd_open(kept[1]));
    fs_syncset_free(&s); /* twice is harmless */
    /* Empty: nothing to do. */
    assert_int_equal(fs_syncset_sync(&s, dir), 0);
}

static void past_the_limit_all(void **state)
{
    (void)state;
    struct fs_syncset s = {0};
    int fds[FS_SYNC_MAX + 1];
    for (unsigned i = 0; i < FS_SYNC_MAX + 1; i++)
        fds[i] = mkfile(i);
    for (unsigned i = 0; i < FS_SYNC_MAX; i++)
        fs_syncset_add(&s, fds[i]);
    assert_int_equal(s.n, FS_SYNC_MAX);
    assert_false(s.all);
    fs_syncset_add(&s, fds[0]); /* known: still not past */
    assert_false(s.all);
    fs_syncset_add(&s, fds[FS_SYNC_MAX]);
    assert_true(s.all);
    int kept[FS_SYNC_MAX];
    memcpy(kept, s.fd, sizeof kept);
    fs_syncset_add(&s, dir); /* nothing more is kept */
    assert_int_equal(s.n, FS_SYNC_MAX);
    assert_int_equal(fs_syncset_sync(&s, dir), 0);
    fs_syncset_free(&s);
    assert_int_equal(s.n, 0);
    assert_false(s.all);
    for (unsigned i = 0; i < FS_SYNC_MAX; i++)
        assert_false(fd_open(kept[i]));
    for (unsigned i = 0; i < FS_SYNC_MAX + 1; i++)
        close(fds[i]);
}

/* In a child (TXBOX_FAULT is read once per process): with fault set, sync
 * a set of nfiles files; the child exits 0 on success, 1 on EIO, 2 on any
 * other error. */
static int faulted_sync(const char *fault, unsigned nfiles)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("TXBOX_FAULT", fault, 1);
        fs_fault_arm();
        struct fs_syncset s = {0};
        for (unsigned i = 0; i < nfiles; i++) {
            int fd = mkfile(i);
            fs_syncset_add(&s, fd);
            close(fd);
        }
        int r = fs_syncset_sync(&s, dir);
        int e = errno;
        fs_syncset_free(&s);
        _exit(r == 0 ? 0 : e == EIO ? 1 : 2);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* Under TXBOX_FAULT the count of fsync fault points is the set's size up to
 * FS_SYNC_EACH and one past it, however little is dirty: a 2-entry set
 * fails at the 1st and the 2nd fsync and passes the 3rd (a syncfs would be
 * one point: it would pass the 2nd). */
static void fault_injection_is_per_entry(void **state)
{
    (void)state;
    assert_int_equal(faulted_sync("fsync:1:EIO", 2), 1);
    assert_int_equal(faulted_sync("fsync:2:EIO", 2), 1);
    assert_int_equal(faulted_sync("fsync:3:EIO", 2), 0);
    assert_int_equal(faulted_sync("fsync:8:EIO", FS_SYNC_EACH), 1);
    assert_int_equal(faulted_sync("fsync:1:EIO", FS_SYNC_EACH + 1), 1);
    assert_int_equal(faulted_sync("fsync:2:EIO", FS_SYNC_EACH + 1), 0);
}

/* In a child, with TXBOX_FAULT=fault: fs_fsync(-1), fs_fsync(-1),
 * fs_syncfs(-1) and a rename of a missing file; returns a bit for each call
 * that returned 0 (a real one fails: EBADF, ENOENT). */
static int skipped_calls(const char *fault)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("TXBOX_FAULT", fault, 1);
        fs_fault_arm();
        int bits = fs_fsync(-1) == 0; /* one call a statement: in this order */
        bits |= (fs_fsync(-1) == 0) << 1;
        bits |= (fs_syncfs(-1) == 0) << 2;
        bits |= (fs_renameat(dir, "missing", dir, "missing2", 0) == 0) << 3;
        _exit(bits);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* skip: the Nth fsync or syncfs returns 0 without syncing (a lost flush,
 * for tests/crash/powerloss's self-test); the others run; a skip on
 * another operation lets it run. */
static void skip_loses_one_flush(void **state)
{
    (void)state;
    assert_int_equal(skipped_calls("fsync:1:skip"), 1);
    assert_int_equal(skipped_calls("fsync:2:skip"), 2);
    assert_int_equal(skipped_calls("fsync:3:skip"), 4);
    assert_int_equal(skipped_calls("fsync:4:skip"), 0);
    assert_int_equal(skipped_calls("rename:1:skip"), 0);
}

/* The choice between one syncfs and an fsync each (fsops.h). */
static void syncfs_or_each(void **state)
{
    (void)state;
    const unsigned long long unknown = ~0ULL;
    /* one entry: its fsync */
    assert_false(fs_sync_by_syncfs(1, false, 0, false));
    /* a few: syncfs only while little is dirty */
    assert_true(fs_sync_by_syncfs(2, false, FS_SYNC_CLEAN_KB, false));
    assert_false(fs_sync_by_syncfs(2, false, FS_SYNC_CLEAN_KB + 1, false));
    assert_false(fs_sync_by_syncfs(FS_SYNC_EACH, false, FS_SYNC_MANY_KB, false));
    /* more: syncfs up to the larger bound, else one by one */
    assert_true(fs_sync_by_syncfs(FS_SYNC_EACH + 1, false, FS_SYNC_MANY_KB, false));
    assert_false(fs_sync_by_syncfs(FS_SYNC_EACH + 1, false, FS_SYNC_MANY_KB + 1, false));
    assert_false(fs_sync_by_syncfs(FS_SYNC_MAX, false, unknown, false));
    /* past what a set keeps: syncfs whatever is dirty */
    assert_true(fs_sync_by_syncfs(FS_SYNC_MAX, true, unknown, false));
    /* under TXBOX_FAULT: by size alone */
    assert_false(fs_sync_by_syncfs(FS_SYNC_EACH, false, 0, true));
    assert_true(fs_sync_by_syncfs(FS_SYNC_EACH + 1, false, unknown, true));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(syncfs_or_each),       cmocka_unit_test(dedup_by_inode),
        cmocka_unit_test(past_the_limit_all),   cmocka_unit_test(fault_injection_is_per_entry),
        cmocka_unit_test(skip_loses_one_flush),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
