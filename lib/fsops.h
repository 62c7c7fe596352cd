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
/* A commit fsyncs up to this many files or directories one by one; past
 * that, one fs_syncfs of the workspace's filesystem (scan.c, journal.c):
 * an fsync costs 0.2-0.5 ms on ext4 in a VM, a syncfs about as much as two
 * (plus whatever else is dirty on that filesystem). */
#define FS_SYNC_EACH 8
MUST_CHECK int fs_write(int fd, const void *buf, size_t n);
MUST_CHECK int fs_mkdirat(int dfd, const char *name, mode_t mode);
MUST_CHECK int fs_unlinkat(int dfd, const char *name, int flags);

#endif
