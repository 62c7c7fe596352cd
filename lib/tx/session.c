/* An agent's session (include/txbox.h, "sessions").
 *
 *   opener (txbox_session_open, CREATE) ──fork, setsid, fork──▶ steward (host namespaces, the caller)
 *                                                                 │ clone (keeper.c)
 *                                                                 ▼
 *                                                     keeper: pid 1 of the session's pid namespace
 *   each command's txbox_run ──.txbox/sessions/ID/ctl──▶ steward
 *
 * The steward is the session: a process of the caller's, in the host's
 * namespaces, that lives as long as the session. It starts the keeper
 * (the session's user, pid, network, ipc and uts namespaces, and its
 * /tmp, /var/tmp, /dev/shm and /proc), hands these to each command that
 * attaches (sesslink.h: its sandbox's init joins them), and looks after
 * what a command leaves running:
 *
 *  1. At the command's end its runner hands over the processes left
 *     (begin: their user namespace, the command's own, which they can
 *     neither leave nor replace, so it tells them apart from the
 *     session's other processes): the steward stops them (kp_freeze:
 *     SIGSTOP until every one is stopped), the runner copies the
 *     command's write set out of its upper and commits the copy, and
 *     records the upper as copied (run.c, run_keep), and the steward
 *     lets them go on (keep) or kills them. Stopped, because what a
 *     process writes while its upper is copied would tear the copy;
 *     copied, because the upper cannot be moved into the workspace while
 *     they hold the overlay (their cached dentries would then write
 *     straight into the workspace), nor the overlay made read-only while
 *     they hold a file open for writing (EBUSY).
 *  2. It serves their connect() calls (the connection guard, from the
 *     command's root) and drains their output pipes.
 *  3. When the last of them has exited, what they wrote to the workspace
 *     since (the upper's difference from the record) is a transaction of
 *     its own (run.c, run_late): committed through the commit protocol
 *     from the generation the command left (rules on effects, conflicts)
 *     when every one of them that the keeper reaped exited 0, else rolled
 *     back. Its report goes with the next command's result and into the
 *     session's end report.
 *  4. A command's commit is answered once applied and recorded, its
 *     journal left open (run.c, run_retire_later): the steward retires it
 *     (recovery: the sync, the journal's close, the write set's removal)
 *     right after the answer, off the command's time (do_retire).
 *  5. The session ends on request (end), after idle_s without a command
 *     attached, when its owner process ends, or on SIGTERM: the keeper is
 *     killed (its pid namespace, every background process, dies with it),
 *     the late writes of those still running are rolled back, and what
 *     the session leaves in its /tmp is reported as discarded.
 *
 * The steward is single-threaded and forked from the opener: it must be
 * opened from a process that other threads do not hold library locks in
 * at that moment (the fronts open their session before their threads run
 * commands). */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "connguard.h"
#include "fdpass.h"
#include "keeper.h"
#include "losses.h"
#include "run.h"
#include "sesslink.h"
#include "store.h"
#include "tmpsync.h"
#include "tree.h"
#include "tx.h"
#include "written.h"

#define DEFAULT_IDLE_S 1800.0
/* The session's /tmp, /var/tmp and /dev/shm (tmpfs, memory) each at most
 * half of a command's default memory limit, as a command's own are. */
#define SESSION_TMP_BYTES (4ull << 30)
#define MAX_GROUPS 64
#define MAX_CLIENTS 64
#define MAX_PIDS 4096
#define FREEZE_MS 3000
#define REPORT_NAME "report.json"

/* The processes one command left running. */
struct group {
    uint64_t tx, userns, base_gen;
    int rootfd, listener, out, err, activefd;
    struct connguard guard;
    pid_t *stopped;
    size_t n_stopped;
    enum { G_FROZEN, G_RUNNING } state;
    bool ok, has_upper;
    bool ending; /* none of its processes was left at the last check */
    char why[160];
    char *command;
    int client;      /* the connection that stopped them: lost, they are killed */
    char cg[3][128]; /* their command's control groups, removed once they end */
};

struct steward {
    txbox_ws *ws;
    char *id;
    int dirfd, lsock, sigfd, owner;
    const struct txbox_policy *pol;
    struct keeper k;
    struct kp_fds fds;
    double idle_s, started;
    uint64_t idle_since; /* now_ns() when the last client left; 0 while one is attached */
    double last_command;
    int clients[MAX_CLIENTS];
    size_t nclients;
    struct group g[MAX_GROUPS];
    size_t ng;
    struct {
        pid_t pid;
        uint64_t tx;
    } pids[MAX_PIDS]; /* whose each process is, for the keeper's exit reports */
    size_t npids;
    json_t *pending; /* late reports not yet given to a command */
    json_t *history; /* all of them, for the end report */
    size_t killed;
    struct {
        pid_t pid;        /* 0: none */
        int pidfd;        /* its end, polled */
        bool off;         /* libgit2 cannot start here: none again */
        uint64_t started; /* readers started */
    } warm;               /* git's warm reader (losses.h, losses_git_warm) */
};

static void reply_error(int sock, const txbox_error *e)
{
    json_t *o =
        json_pack("{s:s,s:i}", "error", e->msg[0] ? e->msg : "failed", "errno", e->code ? e->code : EIO);
    txbox_error se = {0};
    if (sl_send(sock, o, NULL, 0, &se) < 0) {
        /* the client is gone: its loss is seen at its next poll */
    }
    json_decref(o);
}

static void reply(int sock, json_t *o, const int *fds, int n)
{
    txbox_error se = {0};
    if (sl_send(sock, o, fds, n, &se) < 0) {
        /* the client is gone: its loss is seen at its next poll */
    }
    json_decref(o);
}

/* ---- processes and groups ---- */

static void note_pid(struct steward *st, pid_t pid, uint64_t tx)
{
    for (size_t i = 0; i < st->npids; i++)
        if (st->pids[i].pid == pid) {
            st->pids[i].tx = tx;
            return;
        }
    if (st->npids < MAX_PIDS)
        st->pids[st->npids++] = (typeof(st->pids[0])){pid, tx};
}

static struct group *group_of_tx(struct steward *st, uint64_t tx)
{
    for (size_t i = 0; i < st->ng; i++)
        if (st->g[i].tx == tx)
            return &st->g[i];
    return NULL;
}

struct note_ctx {
    struct steward *st;
    uint64_t tx;
};

static void note_member(int procfd, pid_t pid, void *ctx)
{
    (void)procfd;
    struct note_ctx *n = ctx;
    note_pid(n->st, pid, n->tx);
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void group_free(struct steward *st, struct group *g)
{
    close_fd(&g->rootfd);
    close_fd(&g->listener);
    close_fd(&g->out);
    close_fd(&g->err);
    close_fd(&g->activefd);
    free(g->stopped);
    free(g->command);
    for (size_t k = 0; k < ARRAY_SIZE(g->cg); k++)
        if (g->cg[k][0])
            cg_remove(g->cg[k]); /* left populated (and to the next sweep) if one still runs */
    size_t i = (size_t)(g - st->g);
    st->g[i] = st->g[--st->ng];
}

/* Kills the group's processes, until none is left (they may fork
 * meanwhile), for a few seconds at most. */
static void group_kill(struct steward *st, struct group *g)
{
    int procfd = st->fds.fd[KP_PROC];
    for (int i = 0; i < 3000 && kp_signal(procfd, g->userns, SIGKILL); i++) {
        if (g->state == G_FROZEN && g->n_stopped)
            kp_thaw(procfd, g->userns, g->stopped, g->n_stopped); /* a stopped process dies once continued */
        usleep(1000);
    }
}

/* The group is over (its processes exited, or the session ends): its late
 * writes become a transaction of their own, or are rolled back. */
static void group_done(struct steward *st, struct group *g)
{
    json_t *rep = NULL;
    txbox_error e = {0};
    if (g->has_upper) {
        if (run_late(st->ws, g->tx, g->base_gen, g->ok, g->ok ? NULL : g->why, st->pol, st->id, g->command,
                     &rep, &e) < 0 &&
            !rep)
            rep = json_pack("{s:n,s:s,s:s,s:s}", "tx", "from_tx", "", "outcome", "failed", "reason", e.msg);
        if (rep && json_is_string(json_object_get(rep, "from_tx")) &&
            !*json_string_value(json_object_get(rep, "from_tx")))
            json_object_set_new(rep, "from_tx", json_sprintf("%llu", (unsigned long long)g->tx));
    } else {
        ws_end_tx(st->ws, g->tx, -1); /* a read-only command's: nothing to commit */
    }
    if (rep) {
        json_array_append(st->pending, rep);
        json_array_append_new(st->history, rep);
    }
    group_free(st, g);
}

/* A reaped process (the keeper's report): one of a group that failed or
 * was killed fails the group's late transaction. Whose it is: its user
 * namespace (the report's, read before it was reaped), so that a process
 * born and gone between two looks counts; by the pids seen, if unknown. */
static void on_exit_report(struct steward *st, pid_t pid, int status, uint64_t userns)
{
    struct group *g = NULL;
    for (size_t i = 0; userns && !g && i < st->ng; i++)
        if (st->g[i].userns == userns)
            g = &st->g[i];
    for (size_t i = 0; i < st->npids; i++) {
        if (st->pids[i].pid != pid)
            continue;
        if (!g && !userns)
            g = group_of_tx(st, st->pids[i].tx);
        st->pids[i] = st->pids[--st->npids];
        break;
    }
    if (g && g->ok && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        g->ok = false;
        if (WIFSIGNALED(status))
            snprintf(g->why, sizeof g->why, "a background process of tx %llu was killed by signal %d",
                     (unsigned long long)g->tx, WTERMSIG(status));
        else
            snprintf(g->why, sizeof g->why, "a background process of tx %llu exited with status %d",
                     (unsigned long long)g->tx, WEXITSTATUS(status));
    }
}

static void drain_exits(struct steward *st)
{
    pid_t p;
    int s;
    uint64_t ns;
    while (kp_next_exit(&st->k, &p, &s, &ns) == 1)
        on_exit_report(st, p, s, ns);
}

/* Is a process of the group seen alive still in the session's /proc (a
 * zombie not reaped yet)? Those gone are forgotten: reaped by their own
 * parent, or by the keeper, whose report was sent before it reaped and
 * names the group by its user namespace. */
static bool group_zombies(struct steward *st, const struct group *g)
{
    bool any = false;
    for (size_t i = 0; i < st->npids;) {
        char p[24];
        snprintf(p, sizeof p, "%d", (int)st->pids[i].pid);
        if (st->pids[i].tx != g->tx) {
            i++;
        } else if (faccessat(st->fds.fd[KP_PROC], p, F_OK, 0) == 0) {
            any = true;
            i++;
        } else {
            st->pids[i] = st->pids[--st->npids];
        }
    }
    return any;
}

/* Groups whose processes have all exited are done: once none is left, no
 * zombie of theirs either, and the keeper has had a turn to report the
 * last of them (the next check). */
static void check_groups(struct steward *st)
{
    for (size_t i = 0; i < st->ng;) {
        struct group *g = &st->g[i];
        struct note_ctx n = {st, g->tx};
        if (g->state != G_RUNNING || kp_members(st->fds.fd[KP_PROC], g->userns, note_member, &n) > 0) {
            g->ending = false;
            i++;
            continue;
        }
        drain_exits(st);
        if (group_zombies(st, g) || !g->ending) {
            g->ending = !group_zombies(st, g);
            i++;
            continue;
        }
        drain_exits(st);
        group_done(st, g);
    }
}

/* ---- requests ---- */

static void do_attach(struct steward *st, int sock)
{
    int fds[KP_NFDS], n = 0;
    json_t *names = json_array();
    for (int i = 0; i < KP_NFDS; i++)
        if (st->fds.fd[i] >= 0) {
            fds[n++] = st->fds.fd[i];
            json_array_append_new(names, json_string(kp_fd_names[i]));
        }
    st->last_command = wall_time();
    json_t *o = json_pack("{s:o,s:o}", "fds", names, "late", st->pending);
    st->pending = json_array();
    reply(sock, o, fds, n);
}

/* A command's transaction committed with its journal left open (run.c,
 * run_retire_later), its answer given: recovery closes it (the sync, the
 * journal's close, the write set's removal), then what its run left
 * (history's bounds, .txbox/tx/'s compaction). No answer. Any recovery
 * that comes first does the same; a failure is the next one's to meet. */
static void do_retire(struct steward *st, uint64_t tx)
{
    txbox_error e = {0};
    if (!tx || txbox_recover(st->ws, NULL, &e) < 0)
        return;
    history_autogc(st->ws);
    ws_compact_maybe(st->ws, tx);
}

static void do_begin(struct steward *st, int sock, json_t *req, int *fds, int nfds)
{
    txbox_error e = {0};
    uint64_t tx = (uint64_t)json_integer_value(json_object_get(req, "tx"));
    uint64_t userns = (uint64_t)json_integer_value(json_object_get(req, "userns"));
    json_t *has = json_object_get(req, "fds");
    if (!tx || !userns || st->ng == MAX_GROUPS || group_of_tx(st, tx) ||
        (size_t)nfds != json_array_size(has)) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        tx_err(&e, st->ng == MAX_GROUPS ? EAGAIN : EINVAL, "the session cannot keep these processes");
        reply_error(sock, &e);
        return;
    }
    struct group *g = &st->g[st->ng++];
    *g = (struct group){.tx = tx,
                        .userns = userns,
                        .rootfd = -1,
                        .listener = -1,
                        .out = -1,
                        .err = -1,
                        .activefd = -1,
                        .state = G_FROZEN,
                        .ok = true,
                        .client = sock,
                        .command = xstrdup(json_string_value(json_object_get(req, "command")) ?: "")};
    json_t *cgs = json_object_get(req, "cgroups"), *cv;
    size_t ci;
    json_array_foreach(cgs, ci, cv) if (ci < ARRAY_SIZE(g->cg) && json_string_length(cv) < sizeof g->cg[0])
        snprintf(g->cg[ci], sizeof g->cg[ci], "%s", json_string_value(cv) ?: "");
    for (int i = 0; i < nfds; i++) {
        const char *nm = json_string_value(json_array_get(has, (size_t)i)) ?: "";
        int *slot = !strcmp(nm, "root")       ? &g->rootfd
                    : !strcmp(nm, "listener") ? &g->listener
                    : !strcmp(nm, "out")      ? &g->out
                    : !strcmp(nm, "err")      ? &g->err
                                              : NULL;
        if (slot && *slot < 0)
            *slot = fds[i];
        else
            close(fds[i]);
    }
    if (connguard_init(&g->guard) == 0) {
        g->guard.rootfd = g->rootfd;
        json_t *m = json_object_get(req, "mounts"), *v;
        size_t i;
        json_array_foreach(m, i, v) if (g->guard.n_mounts < CONNGUARD_MAX_MOUNTS)
            g->guard.mounts[g->guard.n_mounts++] = (uint64_t)json_integer_value(v);
    } else {
        close_fd(&g->listener); /* no guard: their connect() calls fail (ENOSYS) */
    }
    g->stopped = xcalloc(MAX_PIDS, sizeof *g->stopped);
    int rc = kp_freeze(st->fds.fd[KP_PROC], userns, g->stopped, MAX_PIDS, &g->n_stopped, FREEZE_MS);
    for (size_t i = 0; i < g->n_stopped; i++)
        note_pid(st, g->stopped[i], tx);
    if (rc < 0) {
        tx_errno(&e, errno, "cannot stop the command's background processes");
        group_kill(st, g);
        group_free(st, g);
        reply_error(sock, &e);
        return;
    }
    reply(sock, json_pack("{s:I}", "stopped", (json_int_t)g->n_stopped), NULL, 0);
}

static void do_keep(struct steward *st, int sock, json_t *req, int *fds, int nfds)
{
    txbox_error e = {0};
    struct group *g = group_of_tx(st, (uint64_t)json_integer_value(json_object_get(req, "tx")));
    if (!g) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        tx_err(&e, ENOENT, "the session keeps no processes of that transaction");
        reply_error(sock, &e);
        return;
    }
    if (!json_is_true(json_object_get(req, "keep"))) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        group_kill(st, g);
        group_free(st, g);
        reply(sock, json_object(), NULL, 0);
        return;
    }
    g->activefd = nfds > 0 ? fds[0] : -1;
    for (int i = 1; i < nfds; i++)
        close(fds[i]);
    g->has_upper = json_is_true(json_object_get(req, "upper"));
    g->base_gen = (uint64_t)json_integer_value(json_object_get(req, "base_gen"));
    kp_thaw(st->fds.fd[KP_PROC], g->userns, g->stopped, g->n_stopped);
    g->state = G_RUNNING;
    g->client = -1;
    reply(sock, json_object(), NULL, 0);
}

static json_t *status_json(struct steward *st)
{
    json_t *procs = json_array();
    for (size_t i = 0; i < st->ng; i++) {
        struct group *g = &st->g[i];
        json_array_append_new(procs,
                              json_pack("{s:s%,s:s,s:I,s:s}", "tx", "", 0, "command", g->command, "processes",
                                        (json_int_t)kp_members(st->fds.fd[KP_PROC], g->userns, NULL, NULL),
                                        "state", g->state == G_FROZEN ? "stopped" : "running"));
        json_object_set_new(json_array_get(procs, json_array_size(procs) - 1), "tx",
                            json_sprintf("%llu", (unsigned long long)g->tx));
    }
    json_t *o =
        json_pack("{s:s,s:b,s:f,s:f,s:f,s:o,s:I,s:I}", "session", st->id, "running", 1, "started",
                  st->started, "idle_s", st->idle_s, "last_command", st->last_command, "background", procs,
                  "pending", (json_int_t)json_array_size(st->pending), "pid", (json_int_t)getpid());
    json_object_set_new(o, "owner", st->owner >= 0 ? json_true() : json_null());
    json_t *gr = json_pack("{s:s,s:I}", "state",
                           st->warm.off   ? "off"
                           : st->warm.pid ? "running"
                                          : "none",
                           "started", (json_int_t)st->warm.started);
    if (st->warm.pid)
        json_object_set_new(gr, "pid", json_integer(st->warm.pid));
    json_object_set_new(o, "git_reader", gr);
    return o;
}

/* ---- the end ---- */

struct disc {
    json_t *paths;
    size_t n;
    const char *ws; /* the workspace's path: the directories that lead to it are init's */
    struct tmpsync *ts;
    int tmpfd;
};

static bool add_discard(const char *path, void *ctx)
{
    struct disc *d = ctx;
    size_t l = strlen(path);
    if (!strncmp(d->ws, path, l) && (d->ws[l] == '/' || !d->ws[l]))
        return true; /* made to hold the workspace's view, not written */
    struct stat sb;
    if (!strncmp(path, "/tmp/", 5) && fstatat(d->tmpfd, path + 5, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
        tmpsync_is_copy(d->ts, path, &sb))
        return true; /* the host's file, copied in and left as it was */
    d->n++;
    if (json_array_size(d->paths) < 100)
        json_array_append_new(d->paths, json_string(path));
    return json_array_size(d->paths) < 100 || true;
}

/* What the session leaves in its /tmp, /var/tmp and /dev/shm. */
static json_t *session_discarded(struct steward *st)
{
    struct disc d = {.paths = json_array(),
                     .ws = st->ws->path,
                     .ts = tmpsync_load(st->dirfd),
                     .tmpfd = st->fds.fd[KP_TMP]};
    static const struct {
        int idx;
        const char *label;
    } dirs[] = {{KP_TMP, "/tmp"}, {KP_VARTMP, "/var/tmp"}, {KP_SHM, "/dev/shm"}};
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
        if (st->fds.fd[dirs[i].idx] >= 0)
            (void)written_walk(st->fds.fd[dirs[i].idx], ".", dirs[i].label, add_discard, &d);
    tmpsync_free(d.ts);
    return json_pack("{s:I,s:o,s:b}", "count", (json_int_t)d.n, "paths", d.paths, "truncated",
                     d.n > json_array_size(d.paths));
}

static size_t count_all(int procfd)
{
    /* every process but the keeper: those of no group too */
    size_t n = 0;
    _cleanup_dir_ DIR *d = opendir_at(procfd, ".");
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char *end;
        long p = strtol(de->d_name, &end, 10);
        n += !*end && p > 1;
    }
    return n;
}

static void warm_stop(struct steward *st);

__attribute__((noreturn)) static void session_end(struct steward *st, const char *by, int client)
{
    for (size_t i = 0; i < st->ng; i++) {
        struct group *g = &st->g[i];
        if (g->ok) {
            g->ok = false;
            snprintf(g->why, sizeof g->why, "killed at the session's end (%s)", by);
        }
    }
    warm_stop(st);
    st->killed = count_all(st->fds.fd[KP_PROC]);
    kp_stop(&st->k); /* its pid namespace dies with it */
    while (st->ng)
        group_done(st, &st->g[0]);
    json_t *rep = json_pack("{s:s,s:s,s:I,s:O,s:o}", "session", st->id, "ended_by", by, "processes_killed",
                            (json_int_t)st->killed, "late_transactions", st->history, "discarded",
                            session_discarded(st));
    (void)unlinkat(st->dirfd, SL_CTL, 0);
    (void)unlinkat(st->dirfd, SL_GIT, 0);
    if (client >= 0) {
        json_t *o = json_pack("{s:O}", "report", rep);
        reply(client, o, NULL, 0);
        _cleanup_close_ int sd = openat(st->ws->sfd, SESSIONS_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sd >= 0)
            (void)tree_remove(sd, st->id);
    } else {
        _cleanup_free_ char *text = json_dumps(rep, JSON_COMPACT);
        _cleanup_close_ int fd = openat(st->dirfd, REPORT_NAME ".new",
                                        O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 && text && write_all(fd, text, strlen(text)) == 0)
            (void)renameat(st->dirfd, REPORT_NAME ".new", st->dirfd, REPORT_NAME);
    }
    json_decref(rep);
    _exit(0);
}

/* ---- the loop ---- */

static void drop_client(struct steward *st, size_t i)
{
    int sock = st->clients[i];
    for (size_t j = 0; j < st->ng;) {
        struct group *g = &st->g[j];
        if (g->state == G_FROZEN && g->client == sock) {
            /* its command's runner is gone before it decided: its upper is
             * recovery's now */
            group_kill(st, g);
            group_free(st, g);
            continue;
        }
        j++;
    }
    close(sock);
    st->clients[i] = st->clients[--st->nclients];
    if (!st->nclients)
        st->idle_since = now_ns();
}

/* ---- git's warm reader ----
 * A commit's losses check may need libgit2 (losses_git.c), whose loading
 * and start cost a commit about 3 ms: the steward keeps a reader started
 * from the first command that asks for one on (gitreader), listening on
 * the session's socket SL_GIT, which only it holds. The questions go to
 * it straight, never through the steward: a command asks while it holds
 * the workspace's lock, which the steward may be waiting for (a late
 * transaction's commit, a retirement). */

static void warm_start(struct steward *st)
{
    if (st->warm.pid || st->warm.off)
        return;
    txbox_error e = {0};
    int ls = sl_listen(st->dirfd, SL_GIT, 16, &e);
    if (ls < 0)
        return;
    pid_t me = getpid(), pid = fork();
    if (pid == 0) {
        /* never outlives the steward, even one gone before this line */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != me)
            _exit(0);
        losses_git_warm(ls, st->ws->path);
    }
    close(ls); /* the reader's alone: gone with it (ECONNREFUSED) */
    int pfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
    if (pfd < 0) {
        if (pid > 0) {
            kill(pid, SIGKILL);
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        }
        (void)unlinkat(st->dirfd, SL_GIT, 0);
        return;
    }
    st->warm.pid = pid;
    st->warm.pidfd = pfd;
    st->warm.started++;
}

static void warm_stop(struct steward *st)
{
    if (!st->warm.pid)
        return;
    kill(st->warm.pid, SIGKILL);
    while (waitpid(st->warm.pid, NULL, 0) < 0 && errno == EINTR)
        ;
    close_fd(&st->warm.pidfd);
    st->warm.pid = 0;
}

/* The reader ended (its pidfd readable): reaped; the next one started at
 * once when it ended after its share of questions (exit 0), none again
 * when libgit2 cannot start (4), else when a command asks again. */
static void warm_ended(struct steward *st)
{
    int status = 0;
    while (waitpid(st->warm.pid, &status, 0) < 0 && errno == EINTR)
        ;
    close_fd(&st->warm.pidfd);
    st->warm.pid = 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 4)
        st->warm.off = true;
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        warm_start(st);
}

/* A request of client i. false: the client is gone. */
static bool on_request(struct steward *st, size_t i)
{
    int sock = st->clients[i];
    json_t *req = NULL;
    int fds[SL_MAX_FDS], n = 0;
    txbox_error e = {0};
    if (sl_recv(sock, &req, fds, SL_MAX_FDS, &n, 0, &e) < 0)
        return false;
    const char *op = json_string_value(json_object_get(req, "op")) ?: "";
    if (!strcmp(op, "begin") || !strcmp(op, "keep")) {
        if (!strcmp(op, "begin"))
            do_begin(st, sock, req, fds, n);
        else
            do_keep(st, sock, req, fds, n);
        json_decref(req);
        return true;
    }
    for (int k = 0; k < n; k++)
        close(fds[k]);
    if (!strcmp(op, "attach")) {
        do_attach(st, sock);
    } else if (!strcmp(op, "gitreader")) {
        warm_start(st); /* not answered: the asker does not wait */
    } else if (!strcmp(op, "retire")) {
        do_retire(st, (uint64_t)json_integer_value(json_object_get(req, "tx")));
    } else if (!strcmp(op, "status")) {
        reply(sock, status_json(st), NULL, 0);
    } else if (!strcmp(op, "end")) {
        json_decref(req);
        session_end(st, "request", sock);
    } else {
        tx_err(&e, EINVAL, "unknown session request '%.40s'", op);
        reply_error(sock, &e);
    }
    json_decref(req);
    return true;
}

static void on_accept(struct steward *st)
{
    int c = accept4(st->lsock, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0)
        return;
    if (st->nclients == MAX_CLIENTS || !sl_peer_ok(c)) {
        close(c);
        return;
    }
    st->clients[st->nclients++] = c;
    st->idle_since = 0;
}

/* The output of the processes a command left: read, and dropped (their
 * command's answer is long given). */
static void drain(int *fd)
{
    char buf[16384];
    ssize_t r = read(*fd, buf, sizeof buf);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
        close_fd(fd);
}

enum { PF_LISTEN, PF_SIG, PF_KEEPER, PF_KEEPER_DEAD, PF_OWNER, PF_WARM, PF_FIXED };

static __attribute__((noreturn)) void steward_loop(struct steward *st)
{
    for (;;) {
        struct pollfd pf[PF_FIXED + MAX_CLIENTS + 3 * MAX_GROUPS];
        struct {
            int kind, idx; /* 0 client, 1 listener, 2 out, 3 err */
        } map[MAX_CLIENTS + 3 * MAX_GROUPS];
        pf[PF_LISTEN] = (struct pollfd){.fd = st->lsock, .events = POLLIN};
        pf[PF_SIG] = (struct pollfd){.fd = st->sigfd, .events = POLLIN};
        pf[PF_KEEPER] = (struct pollfd){.fd = st->k.sock, .events = POLLIN};
        pf[PF_KEEPER_DEAD] = (struct pollfd){.fd = st->k.pidfd, .events = POLLIN};
        pf[PF_OWNER] = (struct pollfd){.fd = st->owner, .events = POLLIN};
        pf[PF_WARM] = (struct pollfd){.fd = st->warm.pidfd, .events = POLLIN};
        size_t n = PF_FIXED;
        for (size_t i = 0; i < st->nclients; i++) {
            map[n - PF_FIXED] = (typeof(map[0])){0, (int)i};
            pf[n++] = (struct pollfd){.fd = st->clients[i], .events = POLLIN};
        }
        for (size_t i = 0; i < st->ng; i++) {
            struct group *g = &st->g[i];
            int fds[3] = {g->state == G_RUNNING ? g->listener : -1, g->out, g->err};
            for (int k = 0; k < 3; k++)
                if (fds[k] >= 0) {
                    map[n - PF_FIXED] = (typeof(map[0])){1 + k, (int)i};
                    pf[n++] = (struct pollfd){.fd = fds[k], .events = POLLIN};
                }
        }
        int tmo = st->ng ? 200 : -1;
        if (st->idle_since) {
            uint64_t idle_end = st->idle_since + (uint64_t)(st->idle_s * 1e9), now = now_ns();
            int left = now >= idle_end ? 0 : (int)((idle_end - now) / 1000000) + 1;
            tmo = tmo < 0 || left < tmo ? left : tmo;
        }
        int r = poll(pf, (nfds_t)n, tmo);
        if (r < 0 && errno != EINTR)
            session_end(st, "error", -1);
        if (r > 0 && pf[PF_SIG].revents) {
            struct signalfd_siginfo si;
            while (read(st->sigfd, &si, sizeof si) > 0)
                ;
            session_end(st, "signal", -1);
        }
        if (r > 0 && pf[PF_OWNER].revents)
            session_end(st, "owner", -1);
        if (r > 0 && pf[PF_KEEPER_DEAD].revents)
            session_end(st, "keeper", -1);
        if (r > 0 && pf[PF_KEEPER].revents)
            drain_exits(st);
        if (r > 0 && pf[PF_WARM].revents && st->warm.pid)
            warm_ended(st);
        /* groups and clients by index, from the last (a removal moves the
         * last one into its place) */
        for (size_t j = n; r > 0 && j-- > PF_FIXED;) {
            if (!pf[j].revents)
                continue;
            int kind = map[j - PF_FIXED].kind, idx = map[j - PF_FIXED].idx;
            if (kind == 0) {
                if (!on_request(st, (size_t)idx))
                    drop_client(st, (size_t)idx);
                continue;
            }
            if ((size_t)idx >= st->ng)
                continue;
            struct group *g = &st->g[idx];
            if (kind == 1) {
                if ((pf[j].revents & POLLIN) && connguard_serve(&g->guard, g->listener) < 0)
                    close_fd(&g->listener);
                else if (!(pf[j].revents & POLLIN))
                    close_fd(&g->listener);
            } else {
                drain(kind == 2 ? &g->out : &g->err);
            }
        }
        if (r > 0 && pf[PF_LISTEN].revents)
            on_accept(st);
        check_groups(st);
        if (st->idle_since && now_ns() >= st->idle_since + (uint64_t)(st->idle_s * 1e9))
            session_end(st, "idle", -1);
    }
}

/* The steward's start: its own descriptors only, the keeper, the
 * workspace opened anew; "ok" (or why not) on ready. */
static __attribute__((noreturn)) void steward_main(const char *ws_path, const char *id, int lsock, int ready,
                                                   const txbox_session_opts *o)
{
    int keep[2] = {lsock, ready};
    if (fd_keep_only(keep, 2) < 0)
        _exit(1);
    lsock = keep[0];
    ready = keep[1];
    struct steward st = {.lsock = lsock,
                         .owner = -1,
                         .idle_s = o->idle_s > 0 ? o->idle_s : DEFAULT_IDLE_S,
                         .warm = {.pidfd = -1}};
    txbox_error e = {0};
    const char *fail = NULL;
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    signal(SIGPIPE, SIG_IGN);
    if (sigprocmask(SIG_BLOCK, &sigs, NULL) < 0 ||
        (st.sigfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
        fail = "cannot watch signals";
    if (!fail && txbox_ws_open(ws_path, TXBOX_WS_NO_RECOVER, &st.ws, &e) < 0)
        fail = e.msg;
    if (!fail && (st.dirfd = sl_dir_open(st.ws, id, false, &e)) < 0)
        fail = e.msg;
    if (!fail && o->owner > 0 && (st.owner = (int)syscall(SYS_pidfd_open, o->owner, 0)) < 0)
        fail = "its owner process is gone";
    if (!fail && kp_start(SESSION_TMP_BYTES, &st.k, &st.fds, &e) < 0)
        fail = e.msg;
    if (fail) {
        (void)!write(ready, fail, strlen(fail));
        _exit(1);
    }
    st.id = xstrdup(id);
    st.pol = o->policy;
    st.started = st.last_command = wall_time();
    st.idle_since = now_ns();
    st.pending = json_array();
    st.history = json_array();
    json_t *meta = json_pack("{s:s,s:I,s:I,s:f,s:f}", "session", id, "pid", (json_int_t)getpid(), "keeper",
                             (json_int_t)st.k.pid, "started", st.started, "idle_s", st.idle_s);
    _cleanup_free_ char *mt = json_dumps(meta, JSON_COMPACT);
    json_decref(meta);
    _cleanup_close_ int mfd =
        openat(st.dirfd, "meta.json", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (mfd >= 0 && mt)
        (void)!write_all(mfd, mt, strlen(mt));
    (void)!write(ready, "ok", 2);
    close(ready);
    steward_loop(&st);
}

/* Starts the session's steward (dirfd: its directory, locked by the
 * caller): 0 once it runs. */
static int steward_start(txbox_ws *ws, const char *id, int dirfd, const txbox_session_opts *o,
                         txbox_error *err)
{
    (void)unlinkat(dirfd, REPORT_NAME, 0);
    _cleanup_close_ int ls = sl_listen(dirfd, SL_CTL, 64, err);
    if (ls < 0)
        return -1;
    int rd[2];
    if (pipe2(rd, O_CLOEXEC) < 0)
        return tx_errno(err, errno, "pipe");
    fflush(NULL);
    pid_t a1 = fork();
    if (a1 == 0) {
        close(rd[0]);
        setsid();
        pid_t s = fork();
        if (s != 0)
            _exit(s < 0);
        steward_main(ws->path, id, ls, rd[1], o);
    }
    close(rd[1]);
    if (a1 < 0) {
        close(rd[0]);
        return tx_errno(err, errno, "cannot start the session");
    }
    while (waitpid(a1, NULL, 0) < 0 && errno == EINTR)
        ;
    char msg[512];
    ssize_t n = read_all(rd[0], msg, sizeof msg - 1);
    close(rd[0]);
    msg[n > 0 ? n : 0] = 0;
    if (strcmp(msg, "ok") != 0) {
        (void)unlinkat(dirfd, SL_CTL, 0);
        return tx_err(err, EIO, "cannot start the session: %s", n > 0 ? msg : "its process ended");
    }
    return 0;
}

/* ---- the API ---- */

static char *new_id(void)
{
    unsigned char b[6];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        uint64_t t = now_ns() ^ (uint64_t)getpid();
        memcpy(b, &t, sizeof b);
    }
    return xasprintf("s%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5]);
}

static bool running(int dirfd)
{
    txbox_error e = {0};
    int s = sl_connect(dirfd, &e);
    if (s < 0)
        return false;
    close(s);
    return true;
}

int txbox_session_open(txbox_ws *ws, const txbox_session_opts *o, txbox_session **out, txbox_error *err)
{
    *out = NULL;
    bool create = o->flags & TXBOX_SESSION_CREATE;
    _cleanup_free_ char *id = o->id ? xstrdup(o->id) : create ? new_id() : NULL;
    if (!sl_id_valid(id))
        return tx_err(err, EINVAL,
                      "'%.80s' is not a session id (1-64 of A-Z a-z 0-9 . _ -, not starting with . or -)",
                      id ? id : "");
    if (o->idle_s < 0 || o->idle_s > 30 * 86400.0)
        return tx_err(err, EINVAL, "a session's idle limit is between 0 and 2592000 seconds");
    int dirfd = sl_dir_open(ws, id, create, err);
    if (dirfd < 0)
        return -1;
    int rc = 0;
    _cleanup_close_ int lk =
        create ? openat(dirfd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600) : -1;
    if (create && (lk < 0 || flock(lk, LOCK_EX) < 0))
        rc = tx_errno(err, errno, "cannot lock the session");
    bool up = rc == 0 && running(dirfd);
    if (rc == 0 && up && create && (o->flags & TXBOX_SESSION_EXCL))
        rc = tx_err(err, EEXIST, "session %s runs already", id);
    /* one that ended on its own keeps its report until it is read */
    struct stat sb;
    bool ended = rc == 0 && !up && fstatat(dirfd, REPORT_NAME, &sb, 0) == 0;
    if (rc == 0 && !up && !create && !ended)
        rc = tx_err(err, ENOENT, "no session %s runs", id);
    if (rc == 0 && !up && create)
        rc = steward_start(ws, id, dirfd, o, err);
    if (rc < 0) {
        close(dirfd);
        return -1;
    }
    txbox_session *s = xcalloc(1, sizeof *s);
    s->ws = ws;
    s->id = steal_pointer(&id);
    s->dirfd = dirfd;
    s->policy = o->policy;
    s->started = !up && create ? 1 + ended : 0;
    *out = s;
    return 0;
}

void txbox_session_close(txbox_session *s)
{
    if (!s)
        return;
    if (s->dirfd >= 0)
        close(s->dirfd);
    free(s->id);
    free(s);
}

/* A request to a running session, or -1 with ENOENT/ECONNREFUSED. */
static int ask(txbox_session *s, const char *op, json_t **rep, txbox_error *err)
{
    int sock = sl_connect(s->dirfd, err);
    if (sock < 0)
        return -1;
    json_t *req = json_pack("{s:s}", "op", op);
    int rc = sl_call(sock, req, NULL, 0, rep, NULL, 0, NULL, err);
    json_decref(req);
    close(sock);
    return rc;
}

int txbox_session_end(txbox_session *s, char **report, txbox_error *err)
{
    if (report)
        *report = NULL;
    json_t *rep = NULL;
    txbox_error ae = {0};
    if (ask(s, "end", &rep, &ae) == 0) {
        if (report)
            *report = json_dumps(json_object_get(rep, "report"), JSON_COMPACT);
        json_decref(rep);
        return 0;
    }
    if (ae.code != ENOENT && ae.code != ECONNREFUSED) {
        *err = ae;
        return tx_err_ctx(err, "session %s", s->id);
    }
    /* ended on its own (idle, owner): its report is there */
    _cleanup_free_ char *text = NULL;
    if (read_file_at(s->dirfd, REPORT_NAME, 1u << 24, &text, NULL, NULL) < 0)
        return tx_err(err, ENOENT, "no session %s runs", s->id);
    if (report)
        *report = steal_pointer(&text);
    _cleanup_close_ int sd = openat(s->ws->sfd, SESSIONS_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sd >= 0)
        (void)tree_remove(sd, s->id);
    return 0;
}

int txbox_session_status(txbox_session *s, char **json, txbox_error *err)
{
    *json = NULL;
    json_t *rep = NULL;
    if (ask(s, "status", &rep, err) < 0)
        return tx_err_ctx(err, "session %s", s->id);
    *json = json_dumps(rep, JSON_COMPACT);
    json_decref(rep);
    return 0;
}

int txbox_session_list(txbox_ws *ws, char **json, txbox_error *err)
{
    *json = NULL;
    json_t *list = json_array();
    _cleanup_close_ int sd = openat(ws->sfd, SESSIONS_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_dir_ DIR *d = sd >= 0 ? opendir_at(sd, ".") : NULL;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!sl_id_valid(de->d_name))
            continue;
        txbox_session s = {.ws = ws, .id = de->d_name, .dirfd = -1};
        s.dirfd = openat(sd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (s.dirfd < 0)
            continue;
        json_t *rep = NULL;
        txbox_error e = {0};
        if (ask(&s, "status", &rep, &e) == 0) {
            json_array_append_new(list, rep);
        } else {
            _cleanup_free_ char *text = NULL;
            json_t *r = read_file_at(s.dirfd, REPORT_NAME, 1u << 24, &text, NULL, NULL) == 0
                            ? json_loads(text, 0, NULL)
                            : NULL;
            json_array_append_new(list,
                                  json_pack("{s:s,s:b,s:o}", "session", de->d_name, "running", 0, "ended_by",
                                            json_incref(json_object_get(r, "ended_by")) ?: json_null()));
            json_decref(r);
        }
        close(s.dirfd);
    }
    json_t *o = json_pack("{s:o}", "sessions", list);
    *json = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    (void)err;
    return 0;
}
