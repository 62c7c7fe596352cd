/* What a command wrote where it does not persist: see written.h. No
 * allocation (init calls it), no stdio. */
#include "written.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define WALK_DEPTH 32
#define DENTS_BUF 2048

struct walk {
    bool (*fn)(const char *path, void *ctx);
    void *ctx;
    dev_t dev;
    size_t n;
    bool stop;
    char path[PATH_MAX];
};

static void report(struct walk *w)
{
    w->n++;
    if (!w->stop && !w->fn(w->path, w->ctx))
        w->stop = true;
}

/* dfd's entries; w->path names dfd (its length: len). Returns whether
 * the directory holds anything. */
static bool walk_dir(struct walk *w, int dfd, size_t len, unsigned depth)
{
    char buf[DENTS_BUF] __attribute__((aligned(8)));
    bool any = false;
    for (;;) {
        long n = syscall(SYS_getdents64, dfd, buf, sizeof buf);
        if (n <= 0)
            return any;
        for (long off = 0; off < n;) {
            struct written_dent *d = (struct written_dent *)(buf + off);
            off += d->d_reclen;
            const char *nm = d->d_name;
            if (nm[0] == '.' && (!nm[1] || (nm[1] == '.' && !nm[2])))
                continue;
            any = true;
            int l = snprintf(w->path + len, sizeof w->path - len, "/%s", nm);
            if (l < 0 || (size_t)l >= sizeof w->path - len) {
                w->path[len] = 0;
                continue; /* a name beyond PATH_MAX: not walked */
            }
            struct stat st;
            bool dir = d->d_type == DT_DIR;
            if (d->d_type == DT_DIR || d->d_type == DT_UNKNOWN) {
                if (fstatat(dfd, nm, &st, AT_SYMLINK_NOFOLLOW) < 0)
                    goto next;
                if (st.st_dev != w->dev)
                    goto next; /* another mount: not this directory's */
                dir = S_ISDIR(st.st_mode);
            }
            if (!dir) {
                report(w);
            } else if (depth + 1 >= WALK_DEPTH) {
                report(w); /* too deep to look inside: named as written */
            } else {
                int sub = openat(dfd, nm, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub >= 0) {
                    if (!walk_dir(w, sub, len + (size_t)l, depth + 1))
                        report(w); /* an empty directory */
                    close(sub);
                }
            }
        next:
            w->path[len] = 0;
        }
    }
}

size_t written_walk(int at, const char *dir, const char *label, bool (*fn)(const char *path, void *ctx),
                    void *ctx)
{
    struct walk w = {.fn = fn, .ctx = ctx};
    int dfd = openat(at, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (dfd < 0)
        return 0;
    if (fstat(dfd, &st) < 0) {
        close(dfd);
        return 0;
    }
    w.dev = st.st_dev;
    int l = snprintf(w.path, sizeof w.path, "%s", label && strcmp(label, "/") ? label : "");
    if (l < 0 || (size_t)l >= sizeof w.path)
        l = 0;
    walk_dir(&w, dfd, (size_t)l, 0);
    close(dfd);
    return w.n;
}
