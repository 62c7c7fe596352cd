/* What a command wrote in a directory that does not persist (its private
 * /tmp, /var/tmp and /dev/shm, or a session's): walked without allocating,
 * so that the sandbox's init (which shares txbox's memory) and the session's
 * keeper can both call it. */
#ifndef TXBOX_WRITTEN_H
#define TXBOX_WRITTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One entry of getdents64's answer (what a walk without readdir, which
 * allocates, reads). */
struct written_dent {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Calls fn(path, ctx) for every entry under dir (an absolute path, which
 * names it in the paths given) that is not a directory, and for every
 * directory that holds nothing: what a command wrote there. Never leaves
 * dir's filesystem (a mount inside it, the workspace's view under /tmp, is
 * not walked) and goes at most 32 directories deep. fn returns false to
 * stop the walk. at: where dir is opened from (AT_FDCWD, or a directory:
 * dir is then relative to it, and "label" names it in the paths). Returns
 * how many entries fn was called for. */
size_t written_walk(int at, const char *dir, const char *label, bool (*fn)(const char *path, void *ctx),
                    void *ctx);

#endif
