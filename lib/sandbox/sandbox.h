/* The sandbox: one command in new namespaces with the workspace mounted as
 * the transaction's view. See sandbox.c for the sequence. */
#ifndef TXBOX_SANDBOX_H
#define TXBOX_SANDBOX_H

#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "confine.h"
#include "connguard.h"
#include "keeper.h"
#include "netproxy.h"
#include "util.h"

#define SB_PROXY_ENV_N 6 /* HTTP_PROXY, HTTPS_PROXY, their lower case, ALL_PROXY, all_proxy */
#define SB_PROXY_ENV_LEN 64

enum sb_view {
    SB_VIEW_OVERLAY,  /* lower = workspace, upper/work given: the transaction */
    SB_VIEW_DIRECT,   /* the directory upper_rel, writable: the copy backend's copy */
    SB_VIEW_READONLY, /* the workspace itself, read-only (safe fast path) */
};

struct sb_spec {
    const char *ws_path; /* absolute real path of the workspace */
    int ws_fd;           /* the workspace directory */
    enum sb_view view;
    int upper_fd, work_fd;            /* SB_VIEW_OVERLAY: upper and work directories;
                              SB_VIEW_DIRECT: upper_fd is the copy */
    const char *upper_rel, *work_rel; /* the same, relative to the workspace */
    int lower_fd;                     /* SB_VIEW_OVERLAY, multi-command transactions: a
                              read-only layer between the upper and the
                              workspace (the transaction so far); -1: none */
    const char *lower_rel;            /* the same, relative to the workspace, or NULL */
    int lower_work_fd;                /* the work directory that layer's overlay needs */
    const char *lower_work_rel;
    const char *cwd;   /* absolute path to start in (inside the view) */
    char *const *argv; /* program to execute and its arguments */
    char *const *envp;
    bool net; /* share the host network namespace (--net=host) */
    /* network through the transaction's proxy (netproxy.h), when not net:
     * the command's namespace has a listener on 127.0.0.1:NP_PORT that txbox
     * serves; NULL: loopback only */
    const struct np_config *proxy;
    /* in a session: the proxy's variables of the command's environment
     * (envp points to them), NAME=VALUE each, which init writes anew with
     * the port it gets (the session's loopback is shared: no fixed port) */
    char (*proxy_env)[SB_PROXY_ENV_LEN];
    int in_fd, out_fd, err_fd;     /* the command's stdio; -1 = inherit */
    double timeout_s;              /* 0 = none */
    volatile int *cancel;          /* set non-zero (e.g. by a signal handler) to kill the command */
    struct confine_limits limits;  /* rlimits of the command */
    uint64_t pids_max, memory_max; /* per-transaction cgroup limits (root) */
    uint64_t max_write;            /* bytes the command may take on the workspace's filesystem */
    const char *const *hide;       /* absolute paths made unreadable (NULL-terminated) */
    const char *const *state_hide; /* txbox state directories besides the workspace's
                                      own: nested, or through other mounts (state.c) */
    bool allow_degraded;           /* run even where Landlock or a cgroup is missing */
    const char *name;              /* transaction id, names the cgroup */
    bool report_after;             /* report the directory the shell ended in and what
                                      was written where nothing persists (sb_status) */
    /* in a session (keeper.h): its namespaces are joined and its /tmp,
     * /var/tmp, /dev/shm and /proc cloned, instead of new ones made; NULL:
     * the command alone. One with net keeps the host's network. */
    const struct kp_fds *session;
    /* in a session: the command's processes left running when its shell
     * exits live on (sb_status: survivors, and what serves them); else
     * they are killed then */
    bool session_keep;
    /* called in this process once the command has been let go, before the
     * wait for it (NULL: none): idle time for the caller's own chores */
    void (*started)(void *arg);
    void *started_arg;
    /* with report_after, outside a session: once init has said that
     * every other process of the sandbox is gone, sb_run returns without
     * waiting for init's own end, which unmounts the overlay (2 ms for
     * each thousand entries it holds in its caches): a thread waits for
     * it and removes the cgroup, joined by sb_reap or sb_status_free */
    bool reap_later;
    /* init started ahead by sb_prestart (NULL: sb_run starts it); sb_run
     * takes it, whatever happens */
    struct sb_early *early;
    /* filled by sb_run: the directories that hold host services' sockets
     * (/run, the caller's XDG_RUNTIME_DIR...), masked whole (NULL-ended) */
    const char *sock_dirs[6];
};

/* Paths of what was written where nothing persists named at most
 * (sb_status.discarded; the count goes on). */
#define SB_DISCARD_PATHS 100

struct sb_status {
    bool ran;    /* the command was started */
    bool exited; /* wstatus is valid */
    int wstatus;
    bool timed_out, cancelled;
    bool overlay_failed; /* setup failed because overlayfs could not be mounted */
    bool write_limit;    /* killed: it wrote more than max_write */
    bool oom;            /* the memory limit was hit */
    bool pids_limit;     /* a fork was refused at the process limit (cgroup) */
    uint64_t cmd_ns;     /* time the command itself ran */
    uint64_t t_clone, t_go, t_started, t_exited, t_reaped; /* phase clock (now_ns) */
    json_t *protections;                                   /* what was in force (caller owns) */
    json_t *network; /* spec->proxy: np_stop's report (caller owns), else NULL */
    char *cwd_after; /* the directory the command's shell ended in, as the command
                        saw it (malloc'd), or NULL when not known */
    /* what the command wrote to its private /tmp, /var/tmp and /dev/shm, which
     * ended with it: known (init walked them), how many entries in all, and
     * the first paths (malloc'd; sb_status_free) */
    struct {
        bool known;
        size_t count, n;
        char *paths[SB_DISCARD_PATHS];
    } discarded;
    /* in a session: the command's user namespace (the mark of its
     * processes, keeper.h), how many of them were left running when its
     * shell exited (session_keep), and what serves them from then on: the
     * listener of their connect() calls, the command's root (for the paths
     * they connect to) and the mounts whose sockets they may reach
     * (connguard.h); the descriptors are the caller's (-1: none;
     * sb_status_free closes them) */
    uint64_t userns;
    size_t survivors;
    int guard_listener, rootfd;
    int output_rest[3]; /* [1], [2]: the command's stdout and stderr pipes, which the
                           processes left still hold (read ends; -1: none) */
    uint64_t guard_mounts[CONNGUARD_MAX_MOUNTS];
    size_t n_guard_mounts;
    /* ... and the command's control groups, which they still populate:
     * whoever keeps them removes these once they have ended (cg_remove;
     * "": none) */
    char cgroups[3][128];
    struct sb_reaper *reaper; /* spec.reap_later: init's end, still awaited */
};

/* An sb_status that holds nothing (sb_run makes its own so). */
void sb_status_init(struct sb_status *st);
/* Frees what sb_run left in st besides protections and network (after
 * sb_reap); st holds nothing afterwards. */
void sb_status_free(struct sb_status *st);
/* Waits for the end of the init sb_run left ending (spec.reap_later) and
 * removes its cgroup; at once when there is none. */
void sb_reap(struct sb_status *st);

/* Output pump: called with data read from the command's captured stdout (1)
 * or stderr (2). */
typedef void (*sb_output_fn)(void *ctx, int stream, const char *data, size_t n);

/* Runs the command and waits for it (and every process it started) to end.
 * out_pipe/err_pipe: read ends of pipes whose write ends are spec->out_fd /
 * err_fd, pumped into fn while the command runs (-1: none). Returns <0 when
 * the sandbox could not be set up (nothing ran; err says why). When a pipe is
 * given, sb_run closes the matching write end (spec->out_fd/err_fd) in this
 * process once the sandbox holds it; the read ends stay the caller's. */
MUST_CHECK int sb_run(const struct sb_spec *spec, int out_pipe, int err_pipe, sb_output_fn fn, void *ctx,
                      struct sb_status *st, txbox_error *err);

/* Start a sandbox's init ahead, so that its namespaces are made while the
 * caller prepares the rest: it waits for sb_run (spec->early), which uses
 * it if its network choice is the spec's (net: the host's network) and so
 * is its session's (session: it joins the namespaces of spec->session,
 * which need not be known yet). */
struct sb_early;
MUST_CHECK int sb_prestart(bool net, bool session, struct sb_early **out, txbox_error *err);
/* End one that sb_run will not take (NULL: nothing). */
void sb_early_cancel(struct sb_early *e);

/* Can this process create the namespaces and mount overlayfs here? */
bool sb_is_root(void);

#endif
