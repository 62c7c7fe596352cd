/* The file operations of the commit protocol and of recovery, routed through
 * one table so that tests can fail or crash at the Nth call (SQLite's
 * test6.c, curl's torture tests).
 *
 * TXBOX_FAULT=OP:N:ACTION
 *   OP     any | rename | fsync | write | mkdir | unlink
 *   N      1-based count of calls of OP since fs_fault_arm()
 *   ACTION kill (SIGKILL this process right before the call) or an errno
 *          name: EIO, ENOSPC, EDQUOT (the call fails with it, not performed)
 * Only the protocol's own operations count, between fs_fault_arm() and
 * fs_fault_disarm(); nothing else in txbox is affected. */
#ifndef TXBOX_FSOPS_H
#define TXBOX_FSOPS_H

#include <sys/types.h>

#include "util.h"

void fs_fault_arm(void);
void fs_fault_disarm(void);

MUST_CHECK int fs_renameat(int ofd, const char *old, int nfd, const char *new, unsigned flags);
MUST_CHECK int fs_fsync(int fd);
/* syncfs(2) of fd's filesystem; a fault point of the fsync kind */
MUST_CHECK int fs_syncfs(int fd);
/* A sync set of up to FS_SYNC_EACH entries fsyncs each (an fsync costs
 * 0.2-0.5 ms on ext4 in a VM) unless little is dirty (8 MiB); a larger one
 * takes one syncfs unless much is dirty (32 MiB: a syncfs writes back
 * everything dirty on the filesystem), then an fsync each up to
 * FS_SYNC_MAX; past that, one syncfs whatever is dirty. Under TXBOX_FAULT,
 * past FS_SYNC_EACH one syncfs (the fault points of a set stay few and
 * fixed). */
#define FS_SYNC_EACH 8
#define FS_SYNC_MAX 64

/* Files and directories made durable together, deduplicated by inode: the
 * commit's new data (scan.c), the directories an apply touched (journal.c),
 * an undo's staging (undo.c). fs_syncset_add remembers one (a dup of fd);
 * fs_syncset_sync makes them all durable, by one syncfs of the filesystem
 * when little else is dirty (then the syncfs writes back not much more than
 * the set, for one journal commit and one cache flush instead of one each)
 * or when there are more than FS_SYNC_MAX, else by an fsync each: a syncfs
 * while another process has written much (make bench's copy backend: 250
 * MB) waits for all of it to reach the disk, tens to hundreds of ms.
 * Either way a failure is reported: syncfs reports writeback errors since
 * Linux 5.8. Every entry must be on the filesystem of fs_syncset_sync's
 * fsfd (past FS_SYNC_EACH only that one is synced). No ordering among the
 * entries: what must be durable before something else is done (a file
 * before the rename that publishes it) is not for a set.
 * Zero-initialised is empty; fs_syncset_free closes the kept fds. */
struct fs_syncset {
    int fd[FS_SYNC_MAX];
    dev_t dev[FS_SYNC_MAX];
    ino_t ino[FS_SYNC_MAX];
    size_t n;
    bool all; /* past FS_SYNC_MAX (or an fd could not be kept): syncfs */
};
void fs_syncset_add(struct fs_syncset *s, int fd);
/* 0, or -1 with errno; fsfd names the filesystem for a syncfs. */
MUST_CHECK int fs_syncset_sync(struct fs_syncset *s, int fsfd);
void fs_syncset_free(struct fs_syncset *s);
#define _cleanup_syncset_ __attribute__((cleanup(fs_syncset_free)))
MUST_CHECK int fs_write(int fd, const void *buf, size_t n);
MUST_CHECK int fs_mkdirat(int dfd, const char *name, mode_t mode);
MUST_CHECK int fs_unlinkat(int dfd, const char *name, int flags);

#endif
