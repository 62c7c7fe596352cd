/* The file operations of the commit protocol and of recovery, routed through
 * one table so that tests can fail or crash at the Nth call (SQLite's
 * test6.c, curl's torture tests).
 *
 * TXBOX_FAULT=OP:N:ACTION
 *   OP     any | rename | fsync | write | mkdir | unlink
 *   N      1-based count of calls of OP since fs_fault_arm()
 *   ACTION kill (SIGKILL this process right before the call), stop (SIGSTOP
 *          it there: a test changes the world, then sends SIGCONT, and the
 *          call goes on), skip (an fsync or syncfs returns 0 without
 *          syncing: a lost flush, which tests/crash/powerloss must catch;
 *          other operations go on), or an errno name: EIO, ENOSPC, EDQUOT
 *          (the call fails with it, not performed)
 * Only the protocol's own operations count, between fs_fault_arm() and
 * fs_fault_disarm(); nothing else in txbox is affected. */
#ifndef TXBOX_FSOPS_H
#define TXBOX_FSOPS_H

#include <sys/types.h>

#include "util.h"

void fs_fault_arm(void);
void fs_fault_disarm(void);
/* Is it armed (a caller that arms for a part of its work gives the state
 * back after: recovery's finish inside a commit's sequence)? */
bool fs_fault_armed(void);

MUST_CHECK int fs_renameat(int ofd, const char *old, int nfd, const char *new, unsigned flags);
MUST_CHECK int fs_fsync(int fd);
/* syncfs(2) of fd's filesystem; a fault point of the fsync kind */
MUST_CHECK int fs_syncfs(int fd);
#define FS_SYNC_EACH 8
#define FS_SYNC_MAX 64
#define FS_SYNC_CLEAN_KB 8192
#define FS_SYNC_MANY_KB 32768

/* Files and directories made durable together, deduplicated by inode: the
 * commit's new data (scan.c, with the journal file), what an apply and
 * finalize touched (journal.c), an undo's staging (undo.c), a gc pass's
 * renames. fs_syncset_add remembers one (a dup of fd, up to FS_SYNC_MAX;
 * past that the set is "all"); fs_syncset_sync makes them all durable by
 * an fsync each or by one syncfs of the filesystem, as fs_sync_by_syncfs
 * decides. Either way a failure is reported: syncfs reports writeback
 * errors since Linux 5.8. Every entry must be on the filesystem of
 * fs_syncset_sync's fsfd (an "all" set syncs only that one). No ordering
 * among the entries: what must be durable before something else is done (a
 * file before the rename that publishes it) is not for a set.
 * Zero-initialised is empty; fs_syncset_free closes the kept fds. */
struct fs_syncset {
    int fd[FS_SYNC_MAX];
    dev_t dev[FS_SYNC_MAX];
    ino_t ino[FS_SYNC_MAX];
    size_t n;
    bool all; /* past FS_SYNC_MAX (or an fd could not be kept): syncfs */
};
void fs_syncset_add(struct fs_syncset *s, int fd);
/* One syncfs rather than n fsyncs, with dirty_kb of Dirty + Writeback in
 * the page cache (~0: unknown)? An fsync costs 0.2-0.5 ms on ext4 in a VM,
 * a syncfs about as much as two plus the writeback of everything dirty on
 * the filesystem (another process's writes too: make bench's copy backend
 * copies 250 MB). So: for 2 to FS_SYNC_EACH entries while at most
 * FS_SYNC_CLEAN_KB is dirty; for more (100 new files: 22 ms one by one,
 * 1.5 ms by syncfs) while at most FS_SYNC_MANY_KB is; always for an "all"
 * set. Under TXBOX_FAULT the set's fault points must not depend on the page
 * cache: an fsync each up to FS_SYNC_EACH, one syncfs past it. */
bool fs_sync_by_syncfs(size_t n, bool all, unsigned long long dirty_kb, bool fault);
/* 0, or -1 with errno; fsfd names the filesystem for a syncfs. */
MUST_CHECK int fs_syncset_sync(struct fs_syncset *s, int fsfd);
void fs_syncset_free(struct fs_syncset *s);
#define _cleanup_syncset_ __attribute__((cleanup(fs_syncset_free)))
/* Writeback started early: a thread that syncs fd's filesystem while the
 * caller works out what to commit (a big write set's scan and rules take
 * as long as its writeback), so that the commit's own sync, which alone
 * makes anything durable and reports errors, finds little left to write.
 * A hint, never a step of the protocol: it goes through a descriptor of
 * its own (syncfs reports an error once per open file, so the commit's
 * descriptor still sees every error), is no fault point, and is not
 * started while fewer than FS_WRITEBACK_MIN_KB are dirty (a small commit's
 * fsyncs would wait for its journal commit) or while TXBOX_FAULT is armed
 * (the crash matrices test the protocol's syncs alone).
 * fs_writeback_start: NULL when not started; fs_writeback_end (NULL is
 * fine) waits for it and frees it. */
#define FS_WRITEBACK_MIN_KB 16384
struct fs_writeback;
struct fs_writeback *fs_writeback_start(int fd);
void fs_writeback_end(struct fs_writeback *w);
MUST_CHECK int fs_write(int fd, const void *buf, size_t n);
MUST_CHECK int fs_mkdirat(int dfd, const char *name, mode_t mode);
MUST_CHECK int fs_unlinkat(int dfd, const char *name, int flags);

#endif
