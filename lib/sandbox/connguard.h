/* The connection guard: every connect() the command makes is done by the
 * sandbox's init on its behalf, and one to a unix socket by path only when
 * that socket was made inside the sandbox.
 *
 * Why: a unix socket is reached by its path whatever the mounts say
 * (connect() needs no write access to the file system), the host's
 * sockets can live anywhere (a docker.sock in /srv, an agent's socket in a
 * home directory), can be bound in another network namespace (absent from
 * /proc/net/unix) or after the command started, and Landlock has no right
 * over such connections at the ABIs of today's kernels. So the syscall
 * filter sends connect() to init (seccomp user notification) and init
 * decides with the socket file in hand: the file must live on one of the
 * mounts the sandbox made for the command (its private /tmp, /var/tmp,
 * /dev/shm, the workspace view), which no host process can bind into.
 *
 * init does the connect() itself, on a duplicate of the command's socket
 * (pidfd_getfd), with its own copy of the address: what it checked is what
 * is connected, whatever another thread of the command rewrites
 * meanwhile. A path is opened once (O_PATH), checked, and connected to
 * through /proc/self/fd, so it cannot be swapped between the two either.
 * Other families (TCP to the proxy, UDP) are connected the same way: the
 * command's socket is shared, so its flags (O_NONBLOCK) and options hold.
 *
 * Allocation-free: init shares txbox's memory (sandbox.c) and must not
 * allocate. */
#ifndef TXBOX_CONNGUARD_H
#define TXBOX_CONNGUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONNGUARD_MAX_MOUNTS 8

struct connguard {
    uint64_t mounts[CONNGUARD_MAX_MOUNTS]; /* mount ids where sockets may be reached */
    size_t n_mounts;
    unsigned notif_size, resp_size; /* the kernel's (SECCOMP_GET_NOTIF_SIZES) */
    uint64_t refused;               /* connections refused (EACCES) */
    /* the command's root, when the guard is served from another mount
     * namespace (a session's steward, for the processes a command left
     * running): absolute paths are resolved in it (RESOLVE_IN_ROOT, no
     * magic links); -1 (connguard_init): the server's own root */
    int rootfd;
    /* processes that ended with SIGXFSZ pending: the file size limit (the
     * write budget) refused one of their writes (connguard_serve) */
    uint64_t xfsz;
};

/* Reads the kernel's notification sizes: 0, or a negative errno. */
int connguard_init(struct connguard *g);
/* Sockets on the mount that holds path may be reached: 0, or a negative
 * errno (path missing: -ENOENT; too many mounts: -E2BIG). */
int connguard_allow_mount(struct connguard *g, const char *path);
/* Receives one notification from the listener and answers it: 0 (also
 * when its process died meanwhile), or a negative errno when the listener
 * itself failed. */
int connguard_serve(struct connguard *g, int listener);

/* The write limit, seen whatever the command's status says: the command
 * runs with SIGXFSZ blocked, so that a write past RLIMIT_FSIZE fails
 * (EFBIG) and leaves SIGXFSZ pending instead of killing a process whose
 * parent, not init, would reap it; the filter sends exit() and
 * exit_group() to init as it does connect(), and connguard_serve counts
 * in xfsz each process that ends with it pending, then lets it end. Does
 * task pid (of init's pid namespace) have SIGXFSZ pending? */
bool connguard_xfsz_pending(int pid);
/* Every task of init's pid namespace that has it pending (init's last look,
 * when the command ends: what is still running is killed with it): their
 * number. */
unsigned connguard_xfsz_scan(void);

/* Asks the kernel (Linux 6.6+) to switch between the command and init on
 * one CPU for each call, as a synchronous call would, instead of waking
 * init on another: best effort. */
void connguard_fast_wakeup(int listener);

/* The decision alone, for a socket file open (O_PATH) as fd: 0 when it may
 * be connected to, else the errno the command gets. */
int connguard_check_socket(const struct connguard *g, int fd);

#endif
