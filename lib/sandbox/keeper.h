/* A session's keeper: the process that holds a session's namespaces and is
 * pid 1 of its pid namespace, so that what a command leaves running in the
 * background lives on after the command (reparented to it) and dies with
 * it. See keeper.c. */
#ifndef TXBOX_KEEPER_H
#define TXBOX_KEEPER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"

/* What a command needs to run in the session (sandbox.c, spec->session):
 * the namespaces to join and the mounts that persist from command to
 * command, as detached mounts to clone (open_tree): /tmp, /var/tmp,
 * /dev/shm, /dev (with its nodes, its devpts and /dev/shm below it),
 * /proc. -1: none. */
enum { KP_USER, KP_NET, KP_IPC, KP_UTS, KP_PID, KP_TMP, KP_VARTMP, KP_SHM, KP_DEV, KP_PROC, KP_NFDS };
/* Their names, as a session's steward and its commands exchange them. */
extern const char *const kp_fd_names[KP_NFDS];

struct kp_fds {
    int fd[KP_NFDS];
};

void kp_fds_init(struct kp_fds *f);
void kp_fds_close(struct kp_fds *f);

/* A started keeper: its pid, a pidfd, and the socket on which it reports
 * the processes it reaps (kp_next_exit). */
struct keeper {
    pid_t pid;
    int pidfd, sock;
};

/* Starts a keeper in new user (unless root), pid, network (loopback up),
 * ipc, uts and mount namespaces, with a tmpfs for /tmp, /var/tmp and
 * /dev/shm of tmp_bytes each (0: no size), a /dev (devfs.h) and a procfs
 * of its pid namespace; *fds receives what a command needs. The keeper dies with the
 * calling process (PR_SET_PDEATHSIG: call it from a single-threaded
 * process) and ignores every signal its namespace's processes can send
 * it. */
MUST_CHECK int kp_start(uint64_t tmp_bytes, struct keeper *k, struct kp_fds *fds, txbox_error *err);
/* One process the keeper reaped: 1 (*pid in the session's pid namespace,
 * *status as waitpid's, *userns the user namespace it was in, as
 * kp_userns_of, 0 if unknown), 0 when none is waiting (the socket is
 * non-blocking), -1 when the keeper is gone. A report is sent before its
 * process is reaped: once it is gone from the session's /proc, its report
 * (if the keeper reaped it) is waiting. */
int kp_next_exit(struct keeper *k, pid_t *pid, int *status, uint64_t *userns);
/* Ends the keeper, and with it every process of the session (its pid
 * namespace dies with it); returns once it is reaped. */
void kp_stop(struct keeper *k);

/* ---- the processes of one command in the session ----
 *
 * Every process a command starts is in the command's own user namespace
 * (sandbox.c: nested, which it can neither leave nor replace), so that
 * namespace's inode names the command's processes among the session's.
 * procfd: the session's /proc (KP_PROC). */

/* The inode of pid's user namespace (pid in procfd's namespace; 0 when it
 * cannot be read: gone, or a zombie). */
uint64_t kp_userns_of(int procfd, pid_t pid);
/* Calls fn for each live process of the command whose user namespace is
 * userns; returns how many there were. */
size_t kp_members(int procfd, uint64_t userns, void (*fn)(int procfd, pid_t pid, void *ctx), void *ctx);
/* Sends sig to each of them; how many. */
size_t kp_signal(int procfd, uint64_t userns, int sig);
/* Stops them all (SIGSTOP, again until every one of them is stopped and
 * none is left running, also one forked meanwhile); stopped[] receives the
 * pids it stopped (cap: how many fit), *n how many. Waits at most
 * timeout_ms for them to stop: -1 (ETIMEDOUT) then, with those it stopped
 * still in stopped[]. */
MUST_CHECK int kp_freeze(int procfd, uint64_t userns, pid_t *stopped, size_t cap, size_t *n, int timeout_ms);
/* Lets the processes kp_freeze stopped go on (SIGCONT to each that is still
 * one of the command's). */
void kp_thaw(int procfd, uint64_t userns, const pid_t *stopped, size_t n);

#endif
