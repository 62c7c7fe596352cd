/* Per-transaction control groups: process-count and memory limits. */
#ifndef TXBOX_CGROUP_H
#define TXBOX_CGROUP_H

#include <sys/types.h>

#include "util.h"

struct cgroup {
    const char *kind; /* "cgroup v2", "cgroup v1", or NULL when none */
    char v2[128], v1_pids[128], v1_mem[128];
    int lock_fd; /* the group's directory, flock'ed while it is in use (-1: none) */
};

/* Creates the group (named after this process, txname and a random part)
 * with its limits; -1 when no cgroup can be had here. Sweeps the groups
 * no live txbox holds. */
int cg_create(struct cgroup *cg, const char *name, uint64_t pids, uint64_t memory);
/* Moves pid (and its future children) into the group. */
int cg_attach(const struct cgroup *cg, pid_t pid);
/* cgroup v1: the group's `tasks` files (pids, memory), opened for the
 * process that will move itself in with cg_attach_self; 0, or -1 where
 * that is not the way (v2, no group): cg_attach then. */
int cg_self_fds(const struct cgroup *cg, int fds[2]);
/* In that process (single-threaded; no allocation): moves the calling
 * thread into the group, through the fds of cg_self_fds. */
int cg_attach_self(const int fds[2]);
/* Did the memory limit bite? */
bool cg_oom(const struct cgroup *cg);
/* Was a fork refused at the process limit? */
bool cg_pids_hit(const struct cgroup *cg);
void cg_destroy(struct cgroup *cg);
/* The directories of cg's group, into out (a slot "" when none), for
 * whoever outlives the maker: cg_remove takes them once the group's
 * processes have ended. */
void cg_paths(const struct cgroup *cg, char out[3][128]);
/* Removes a group that cg_paths gave (an empty one: rmdir refuses a
 * populated one, which the next maker's sweep takes once empty); a path
 * that is no txbox group is left alone. */
void cg_remove(const char *path);

#endif
