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
/* The most files or directories a sync set fsyncs one by one; past that,
 * one fs_syncfs of the filesystem: an fsync costs 0.2-0.5 ms on ext4 in a
 * VM, a syncfs about as much as two (plus whatever else is dirty on that
 * filesystem). */
#define FS_SYNC_EACH 8

/* Files and directories made durable together, deduplicated by inode: the
 * commit's new data (scan.c), the directories an apply touched (journal.c),
 * an undo's staging (undo.c). fs_syncset_add remembers one (a dup of fd);
 * fs_syncset_sync makes them all durable, by an fsync each, or by one
 * syncfs of the filesystem when there are more than FS_SYNC_EACH or when
 * little else is dirty (then the syncfs writes back not much more than the
 * set, for one journal commit and one cache flush instead of one each).
 * Either way a failure is reported: syncfs reports writeback errors since
 * Linux 5.8. Every entry must be on the filesystem of fs_syncset_sync's
 * fsfd (past FS_SYNC_EACH only that one is synced). No ordering among the
 * entries: what must be durable before something else is done (a file
 * before the rename that publishes it) is not for a set.
 * Zero-initialised is empty; fs_syncset_free closes the kept fds. */
struct fs_syncset {
    int fd[FS_SYNC_EACH];
    dev_t dev[FS_SYNC_EACH];
    ino_t ino[FS_SYNC_EACH];
    size_t n;
    bool all; /* past FS_SYNC_EACH (or an fd could not be kept): syncfs */
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
