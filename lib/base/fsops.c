#include "fsops.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>

enum { OP_ANY, OP_RENAME, OP_FSYNC, OP_WRITE, OP_MKDIR, OP_UNLINK, OP_N };
static const char *const op_names[OP_N] = {"any", "rename", "fsync", "write", "mkdir", "unlink"};

static struct {
    bool parsed, armed;
    int op; /* which operation counts; -1: none configured */
    unsigned long n;
    int action; /* 0 = kill, -1 = stop, -2 = skip, else errno */
    unsigned long count[OP_N];
} F = {.op = -1};

static void fault_parse(void)
{
    if (F.parsed)
        return;
    F.parsed = true;
#ifndef TXBOX_TEST_HOOKS
    return; /* fault injection is for test builds (meson -Dtests=true) only */
#endif
    const char *s = getenv("TXBOX_FAULT");
    if (!s || !*s)
        return;
    char op[16], act[16];
    unsigned long n;
    if (sscanf(s, "%15[a-z]:%lu:%15[A-Za-z]", op, &n, act) != 3 || n == 0) {
        fprintf(stderr, "txbox: ignoring malformed TXBOX_FAULT '%s'\n", s);
        return;
    }
    for (int i = 0; i < OP_N; i++)
        if (!strcmp(op, op_names[i]))
            F.op = i;
    if (!strcmp(act, "kill"))
        F.action = 0;
    else if (!strcmp(act, "stop"))
        F.action = -1;
    else if (!strcmp(act, "skip"))
        F.action = -2;
    else if (!strcmp(act, "EIO"))
        F.action = EIO;
    else if (!strcmp(act, "ENOSPC"))
        F.action = ENOSPC;
    else if (!strcmp(act, "EDQUOT"))
        F.action = EDQUOT;
    else
        F.op = -1;
    if (F.op < 0)
        fprintf(stderr, "txbox: ignoring malformed TXBOX_FAULT '%s'\n", s);
    F.n = n;
}

void fs_fault_arm(void)
{
    fault_parse();
    F.armed = true;
}

void fs_fault_disarm(void) { F.armed = false; }

bool fs_fault_armed(void) { return F.armed; }

/* Returns 0 to proceed, 1 to skip the operation as if it had succeeded
 * (skip), or -1 with errno set to fail it. */
static int fault_point(int op)
{
    if (!F.armed || F.op < 0)
        return 0;
    F.count[OP_ANY]++;
    F.count[op]++;
    if (F.count[F.op] != F.n || (F.op != OP_ANY && F.op != op))
        return 0;
    if (F.action == 0) {
        fflush(NULL);
        kill(getpid(), SIGKILL);
        for (;;)
            pause();
    }
    if (F.action == -1) {
        fflush(NULL);
        kill(getpid(), SIGSTOP); /* until the test's SIGCONT */
        return 0;
    }
    if (F.action == -2)
        return 1;
    errno = F.action;
    return -1;
}

int fs_renameat(int ofd, const char *old, int nfd, const char *new, unsigned flags)
{
    if (fault_point(OP_RENAME) < 0)
        return -1;
    return renameat2(ofd, old, nfd, new, flags);
}

int fs_fsync(int fd)
{
    int f = fault_point(OP_FSYNC);
    if (f)
        return f < 0 ? -1 : 0;
    return fsync(fd);
}

int fs_syncfs(int fd)
{
    int f = fault_point(OP_FSYNC);
    if (f)
        return f < 0 ? -1 : 0;
    return syncfs(fd);
}

void fs_syncset_add(struct fs_syncset *s, int fd)
{
    if (s->all)
        return;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        s->all = true;
        return;
    }
    for (size_t i = 0; i < s->n; i++)
        if (s->ino[i] == st.st_ino && s->dev[i] == st.st_dev)
            return;
    int d = s->n < FS_SYNC_MAX ? fcntl(fd, F_DUPFD_CLOEXEC, 3) : -1;
    if (d < 0) {
        s->all = true;
        return;
    }
    s->fd[s->n] = d;
    s->dev[s->n] = st.st_dev;
    s->ino[s->n++] = st.st_ino;
}

/* Dirty + Writeback in /proc/meminfo, in KiB, of every filesystem (the
 * set's own data included); ~0 when it cannot be read. Not read under
 * TXBOX_FAULT (fs_sync_by_syncfs). F.op is read without parsing: the count
 * runs only while armed, and arming parses (parsing here would fix
 * TXBOX_FAULT before a test sets it). */
static unsigned long long dirty_kb(void)
{
    char buf[4096];
    _cleanup_close_ int fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (n <= 0)
        return ~0ULL;
    buf[n] = 0;
    const char *d = strstr(buf, "\nDirty:"), *w = strstr(buf, "\nWriteback:");
    unsigned long long dk, wk;
    return d && w && sscanf(d, " Dirty: %llu", &dk) == 1 && sscanf(w, " Writeback: %llu", &wk) == 1 ? dk + wk
                                                                                                    : ~0ULL;
}

bool fs_sync_by_syncfs(size_t n, bool all, unsigned long long dirty, bool fault)
{
    if (all)
        return true;
    if (fault)
        return n > FS_SYNC_EACH;
    return n > 1 && (dirty <= FS_SYNC_CLEAN_KB || (n > FS_SYNC_EACH && dirty <= FS_SYNC_MANY_KB));
}

/* Are all of s's entries on fsfd's filesystem (so that its syncfs covers
 * them)? */
static bool same_fs(const struct fs_syncset *s, int fsfd)
{
    struct stat st;
    if (fstat(fsfd, &st) < 0)
        return false;
    for (size_t i = 0; i < s->n; i++)
        if (s->dev[i] != st.st_dev)
            return false;
    return true;
}

int fs_syncset_sync(struct fs_syncset *s, int fsfd)
{
    bool fault = F.op >= 0;
    unsigned long long d = fault || s->all || s->n < 2 ? ~0ULL : dirty_kb();
    if (fs_sync_by_syncfs(s->n, s->all, d, fault) && (s->all || same_fs(s, fsfd)))
        return fs_syncfs(fsfd);
    for (size_t i = 0; i < s->n; i++)
        if (fs_fsync(s->fd[i]) < 0)
            return -1;
    return 0;
}

void fs_syncset_free(struct fs_syncset *s)
{
    for (size_t i = 0; i < s->n; i++)
        close(s->fd[i]);
    s->n = 0;
    s->all = false;
}

struct fs_writeback {
    pthread_t th;
    int fd;
};

static void *writeback_main(void *arg)
{
    struct fs_writeback *w = arg;
    (void)!syncfs(w->fd);
    return NULL;
}

struct fs_writeback *fs_writeback_start(int fd)
{
    fault_parse(); /* as arming does, which the commit does next */
    if (F.op >= 0 || dirty_kb() < FS_WRITEBACK_MIN_KB)
        return NULL;
    struct fs_writeback *w = xmalloc(sizeof *w);
    w->fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (w->fd >= 0 && thread_start(&w->th, writeback_main, w) == 0)
        return w;
    if (w->fd >= 0)
        close(w->fd);
    free(w);
    return NULL;
}

void fs_writeback_end(struct fs_writeback *w)
{
    if (!w)
        return;
    pthread_join(w->th, NULL);
    close(w->fd);
    free(w);
}

int fs_write(int fd, const void *buf, size_t n)
{
    if (fault_point(OP_WRITE) < 0)
        return -1;
    return write_all(fd, buf, n);
}

int fs_mkdirat(int dfd, const char *name, mode_t mode)
{
    if (fault_point(OP_MKDIR) < 0)
        return -1;
    return mkdirat(dfd, name, mode);
}

int fs_unlinkat(int dfd, const char *name, int flags)
{
    if (fault_point(OP_UNLINK) < 0)
        return -1;
    return unlinkat(dfd, name, flags);
}
