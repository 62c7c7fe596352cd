/* Per-transaction control groups: process-count and memory limits. */
#ifndef TXBOX_CGROUP_H
#define TXBOX_CGROUP_H

#include <sys/types.h>

#include "util.h"

struct cgroup {
    const char *kind; /* "cgroup v2", "cgroup v1", or NULL when none */
    char v2[128], v1_pids[128], v1_mem[128];
    int v1_tasks[2];  /* v1: the groups' tasks files, for cg_attach_self (-1: none) */
};

/* Creates the group (named after this process and txname) with its limits;
 * -1 when no cgroup can be had here. Sweeps groups of dead txbox processes. */
int cg_create(struct cgroup *cg, const char *name, uint64_t pids, uint64_t memory);
/* Moves pid (and its future children) into a v2 group: 0 at once for v1
 * (whose process joins it itself: cg_attach_self). */
int cg_attach(const struct cgroup *cg, pid_t pid);
/* v1, in the process to move (single-threaded) before it forks: writes
 * "0" to each group's tasks file, then closes them. Writing another
 * process's pid to cgroup.procs takes the kernel's global threadgroup lock
 * for writing, a wait for an RCU grace period: 1-2.4 ms of every run's
 * start, against 0.06 ms for a thread moving itself (the kernel skips that
 * lock then). 0 for v2 or no group. */
int cg_attach_self(struct cgroup *cg);
/* Did the memory limit bite? */
bool cg_oom(const struct cgroup *cg);
void cg_destroy(struct cgroup *cg);

#endif
