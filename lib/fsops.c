#include "fsops.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>

enum { OP_ANY, OP_RENAME, OP_FSYNC, OP_WRITE, OP_MKDIR, OP_UNLINK, OP_N };
static const char *const op_names[OP_N] = {"any", "rename", "fsync", "write", "mkdir", "unlink"};

static struct {
    bool parsed, armed;
    int op;        /* which operation counts; -1: none configured */
    unsigned long n;
    int action;    /* 0 = kill, else errno */
    unsigned long count[OP_N];
} F = {.op = -1};

static void fault_parse(void)
{
    if (F.parsed)
        return;
    F.parsed = true;
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

/* Returns 0 to proceed, or -1 with errno set to fail the operation. */
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
    errno = F.action;
    return -1;
}

int fs_renameat(int ofd, const char *old, int nfd, const char *new, unsigned flags)
{
    if (fault_point(OP_RENAME))
        return -1;
    return renameat2(ofd, old, nfd, new, flags);
}

int fs_fsync(int fd)
{
    if (fault_point(OP_FSYNC))
        return -1;
    return fsync(fd);
}

int fs_syncfs(int fd)
{
    if (fault_point(OP_FSYNC))
        return -1;
    return syncfs(fd);
}

int fs_write(int fd, const void *buf, size_t n)
{
    if (fault_point(OP_WRITE))
        return -1;
    return write_all(fd, buf, n);
}

int fs_mkdirat(int dfd, const char *name, mode_t mode)
{
    if (fault_point(OP_MKDIR))
        return -1;
    return mkdirat(dfd, name, mode);
}

int fs_unlinkat(int dfd, const char *name, int flags)
{
    if (fault_point(OP_UNLINK))
        return -1;
    return unlinkat(dfd, name, flags);
}
