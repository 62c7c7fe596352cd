/* One command, one transaction: the path of txbox_run(). */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include "txbox_policy.h"
#include "confine.h"
#include "effects.h"
#include "fsops.h"
#include "gitcfg.h"
#include "multi.h"
#include "result.h"
#include "safepath.h"
#include "saga.h"
#include "sandbox.h"
#include "store.h"
#include "tx.h"

extern char **environ;

#define MAX_COMMAND_BYTES (1u << 20) /* 1 MiB: see README, limits */
#define DEFAULT_OUTPUT_CAP (1u << 20)
#define CHANGES_CAP 10000

static void pump(void *ctx, int stream, const char *data, size_t n)
{
    txbox_result *r = ctx;
    dbuf_add(stream == 1 ? &r->out : &r->err, data, n);
    if (r->tee && write_all(stream == 1 ? 1 : 2, data, n) < 0)
        r->tee = false; /* the caller closed its end: keep capturing */
}

/* Secrets hidden from every command by default, relative to $HOME. */
static const char *const default_hidden[] = {
    ".ssh", ".aws", ".gnupg", ".config/gh", ".config/hub", ".netrc", ".docker/config.json",
    ".kube", ".npmrc", ".yarnrc.yml", ".pypirc", ".git-credentials", ".config/gcloud", ".azure",
    ".cargo/credentials", ".cargo/credentials.toml", ".gem/credentials", ".vault-token",
    ".pgpass", ".my.cnf", ".terraform.d/credentials.tfrc.json", ".config/op", ".password-store",
    ".local/share/keyrings", ".config/rclone", ".s3cfg", ".boto", ".oci",
};

static char *expand_home(const char *p, const char *home)
{
    if (p[0] == '~' && (p[1] == '/' || !p[1]))
        return home ? xasprintf("%s%s", home, p + 1) : NULL;
    return p[0] == '/' ? xstrdup(p) : NULL;
}

char **tx_hidden_paths(const char *const *extra)
{
    const char *home = getenv("HOME");
    size_t n = 0;
    while (extra && extra[n])
        n++;
    char **v = xcalloc(ARRAY_SIZE(default_hidden) + n + 1, sizeof *v);
    size_t k = 0;
    for (size_t i = 0; home && *home == '/' && i < ARRAY_SIZE(default_hidden); i++)
        v[k++] = xasprintf("%s/%s", home, default_hidden[i]);
    for (size_t i = 0; i < n; i++)
        if ((v[k] = expand_home(extra[i], home)))
            k++;
    return v;
}

void tx_free_strv(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* Where the command starts: the caller's cwd when it lies inside the
 * workspace, else the workspace root. */
static char *start_dir(const txbox_ws *ws, const char *cwd)
{
    _cleanup_free_ char *here = cwd ? realpath(cwd, NULL) : getcwd(NULL, 0);
    if (here) {
        size_t l = strlen(ws->path);
        if (!strncmp(here, ws->path, l) && (here[l] == 0 || here[l] == '/')) {
            const char *rest = here + l;
            /* Never start inside the hidden state directory. */
            if (strncmp(rest, "/" TXBOX_STATE_DIR, strlen(TXBOX_STATE_DIR) + 1) ||
                (rest[strlen(TXBOX_STATE_DIR) + 1] != 0 && rest[strlen(TXBOX_STATE_DIR) + 1] != '/'))
                return steal_pointer(&here);
        }
    }
    return xstrdup(ws->path);
}

/* A scratch directory of the transaction; like: a directory whose mode,
 * owner and times it takes (the upper's root is the merged root's). */
static int make_dir_fd(int at, const char *name, int like, txbox_error *err)
{
    if (mkdirat(at, name, 0700) < 0 && errno != EEXIST)
        return tx_errno(err, errno, "cannot create %s", name);
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return tx_errno(err, errno, "cannot open %s", name);
    struct stat st;
    if (like >= 0 && fstat(like, &st) == 0) {
        struct timespec ts[2] = {st.st_atim, st.st_mtim};
        if (fchown(fd, st.st_uid, st.st_gid) < 0 && errno != EPERM) {
            int e = errno;
            close(fd);
            return tx_errno(err, e, "cannot set the owner of %s", name);
        }
        if (fchmod(fd, st.st_mode & 07777) < 0 || futimens(fd, ts) < 0) {
            int e = errno;
            close(fd);
            return tx_errno(err, e, "cannot prepare %s", name);
        }
    }
    return fd;
}

/* Did the transactions committed since base_gen write any of our paths? */
int tx_check_conflict(txbox_ws *ws, uint64_t base_gen, uint64_t gen, const struct tx_ops *ops,
                      char **path, txbox_error *err)
{
    for (uint64_t g = base_gen + 1; g <= gen; g++) {
        char idn[32];
        struct tx_journal j;
        int lr = journal_load_gen(ws, g, &j, idn, err);
        if (lr < 0)
            return -1;
        if (lr > 0) {
            /* Its record is gone (pruned): assume the worst. */
            *path = xasprintf("(unknown: the record of transaction %s is gone)", idn);
            return 1;
        }
        const char *which = NULL;
        bool clash = ops_overlap(ops, &j.ops, &which);
        if (clash)
            *path = xstrdup(*which ? which : ".");
        journal_free(&j);
        if (clash)
            return 1;
    }
    return 0;
}

static int mount_id(int fd, uint64_t *id)
{
    struct statx stx;
    if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) < 0)
        return -1;
    if (!(stx.stx_mask & STATX_MNT_ID)) {
        errno = ENOTSUP;
        return -1;
    }
    *id = stx.stx_mnt_id;
    return 0;
}

/* A commit is renames within the workspace's mount. A path that lies on
 * another mount (something mounted inside the workspace: the overlay showed
 * the directory under it, so the command wrote there) cannot be committed
 * atomically: a rename across mounts fails (EXDEV), and it would fail after
 * the commit point. So it is refused before, with nothing changed. *bad gets
 * the path. */
static int ops_on_one_mount(int wsfd, const struct tx_ops *ops, char **bad, txbox_error *err)
{
    uint64_t ws_id, id;
    if (mount_id(wsfd, &ws_id) < 0)
        return tx_errno(err, errno, "cannot identify the workspace's mount");
    _cleanup_free_ char *last_parent = NULL;
    _cleanup_close_ int pfd = -1;
    for (size_t i = 0; i < ops->n; i++) {
        const char *path = ops->v[i].path;
        const char *slash = strrchr(path, '/');
        _cleanup_free_ char *parent = slash ? xasprintf("%.*s", (int)(slash - path), path) : xstrdup("");
        if (!last_parent || strcmp(parent, last_parent) != 0) {
            if (pfd >= 0)
                close(pfd);
            pfd = *parent ? safe_openat(wsfd, parent, O_PATH | O_DIRECTORY, 0) : dup(wsfd);
            free(last_parent);
            last_parent = steal_pointer(&parent);
            if (pfd < 0)
                continue; /* a new directory of the transaction: its parent is checked */
            if (mount_id(pfd, &id) < 0)
                return tx_errno(err, errno, "cannot identify the mount of %s", last_parent);
            if (id != ws_id) {
                *bad = xstrdup(*last_parent ? last_parent : ".");
                return 1;
            }
        }
        if (pfd < 0 || !*path)
            continue;
        /* the entry itself may be a mount point (a DELETE or a replaced directory) */
        _cleanup_close_ int efd = openat(pfd, slash ? slash + 1 : path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (efd >= 0 && mount_id(efd, &id) == 0 && id != ws_id) {
            *bad = xstrdup(path);
            return 1;
        }
    }
    return 0;
}

/* The trash's cleaner: a thread that empties .txbox/trash/ while the
 * command runs (the parent only waits then), stopped as soon as the
 * command is gone. Its signals are blocked: they stay the main thread's. */
struct cleaner {
    txbox_ws *ws;
    atomic_bool stop;
    bool running;
    pthread_t th;
};

static void *cleaner_main(void *arg)
{
    struct cleaner *c = arg;
    ws_trash_clean(c->ws, &c->stop, 0);
    return NULL;
}

static void cleaner_start(void *arg)
{
    struct cleaner *c = arg;
    c->running = ws_trash_has_entries(c->ws) && thread_start(&c->th, cleaner_main, c) == 0;
}

static void cleaner_stop(struct cleaner *c)
{
    if (!c->running)
        return;
    atomic_store(&c->stop, true);
    pthread_join(c->th, NULL);
    c->running = false;
}

/* A transaction's scratch directory goes to the trash, or is removed here
 * when it cannot. Did it go to the trash? */
static bool discard_dir(txbox_ws *ws, int txfd, const char *name, const char *txs, unsigned grant)
{
    int t = ws_trash(ws, txfd, name, txs, grant);
    if (t < 0)
        (void)tree_remove(txfd, name);
    return t > 0;
}

/* The overlay commit: scan, conflict check, journal, apply. */
static int overlay_commit(txbox_ws *ws, txbox_result *r, int txfd, int upperfd,
                          uint64_t base_gen, const char *hctx, const txbox_policy *pol,
                          const struct gitcfg_ctx *gc, txbox_error *err)
{
    int lockfd = -1;
    if (ws_lock(ws, &lockfd, err) < 0)
        return -1;
    /* History: finish first any commit whose process died after its commit
     * point since we opened the workspace (it holds the next generation). */
    if (ws_roll_forward_locked(ws, NULL, NULL, err) < 0) {
        ws_unlock(lockfd);
        return tx_err_ctx(err, "recovery");
    }
    tx_mark("lock");
    fs_fault_arm();
    struct tx_ops ops = {0};
    /* the new data: durable with the journal, before the commit point */
    _cleanup_syncset_ struct fs_syncset durable = {0};
    int rc = scan_upper(upperfd, ws->fd, !ws->root, &ops, &durable, err);
    tx_mark("scan");
    uint64_t gen = 0;
    if (rc == 0)
        rc = ws_read_gen(ws, &gen, err);
    if (rc == 0 && ops.n == 0) {
        r->outcome = TXBOX_OUTCOME_COMMITTED; /* nothing to apply */
        r->changes = json_pack("{s:[],s:[],s:[],s:b}", "added", "modified", "deleted",
                               "truncated", 0);
        goto out;
    }
    if (rc == 0 && gen != base_gen) {
        _cleanup_free_ char *clash = NULL;
        int c = tx_check_conflict(ws, base_gen, gen, &ops, &clash, err);
        if (c < 0) {
            rc = -1;
        } else if (c > 0) {
            r->outcome = TXBOX_OUTCOME_CONFLICT;
            r->conflict_path = steal_pointer(&clash);
            r->changes = ops_changes(upperfd, ws->fd, &ops, CHANGES_CAP);
            goto out;
        }
    }
    if (rc == 0 && pol) { /* rules on effects: rejected or held, nothing applied */
        int e = effects_gate_run(ws, pol, r, txfd, upperfd, base_gen, &ops, &durable, hctx, gc, err);
        if (e != 0) {
            rc = e < 0 ? -1 : 0;
            goto out;
        }
    }
    tx_mark("effects");
    if (rc == 0) {
        _cleanup_free_ char *elsewhere = NULL;
        int m = ops_on_one_mount(ws->fd, &ops, &elsewhere, err);
        if (m > 0)
            rc = tx_err(err, EXDEV, "%s lies on another mount inside the workspace: txbox cannot commit there atomically; nothing was changed (the changes are kept in .txbox/tx/%s/upper)",
                        elsewhere, r->txs);
        else if (m < 0)
            rc = -1;
    }
    if (rc == 0) {
        tx_mark("mounts");
        r->changes = ops_changes(upperfd, ws->fd, &ops, CHANGES_CAP);
        tx_mark("changes");
        _cleanup_free_ char *info = store_info(r, hctx); /* history: + command, cwd */
        rc = journal_commit(ws, r->id, txfd, base_gen, &ops, info, &durable, &gen, err);
        if (rc == 0) {
            r->outcome = TXBOX_OUTCOME_COMMITTED;
            r->logged = true;
        } else
            r->commit_point_passed = faccessat(ws->jnld, r->txs, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
    }
out:
    fs_fault_disarm();
    ops_free(&ops);
    ws_unlock(lockfd);
    return rc;
}

static int validate(const txbox_run_opts *o, txbox_error *err)
{
    if (!!o->shell == !!o->argv)
        return tx_err(err, EINVAL, "give exactly one of a shell string (-c) or a program (--)");
    if (o->shell) {
        size_t n = strnlen(o->shell, MAX_COMMAND_BYTES + 1);
        if (n == 0 || !o->shell[strspn(o->shell, " \t\n")])
            return tx_err(err, EINVAL, "empty command");
        if (n > MAX_COMMAND_BYTES)
            return tx_err(err, E2BIG, "command longer than %u bytes", MAX_COMMAND_BYTES);
    } else {
        if (!o->argv[0] || !*o->argv[0])
            return tx_err(err, EINVAL, "empty command");
        size_t total = 0;
        for (size_t i = 0; o->argv[i]; i++)
            total += strlen(o->argv[i]) + 1;
        if (total > MAX_COMMAND_BYTES)
            return tx_err(err, E2BIG, "command longer than %u bytes", MAX_COMMAND_BYTES);
    }
    if (o->multi && multi_aborting(o->multi))
        return tx_err(err, EINVAL, "the transaction is being aborted (run 'txbox abort %s' to finish)",
                      txbox_multi_id(o->multi));
    if (o->multi && (o->backend == TXBOX_BACKEND_COPY || o->allow_copy_fallback))
        return tx_err(err, EINVAL, "a multi-command transaction runs on the overlay backend only");
    if (o->timeout_s < 0 || o->timeout_s > 7 * 86400.0)
        return tx_err(err, EINVAL, "timeout must be between 0 and 604800 seconds");
    return 0;
}

/* Resolve a bare program name along PATH, as execvp would (the sandbox
 * uses execve). */
static char *resolve_program(const char *prog)
{
    if (strchr(prog, '/'))
        return xstrdup(prog);
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path;;) {
        const char *e = strchrnul(p, ':');
        _cleanup_free_ char *cand = xasprintf("%.*s/%s", (int)(e - p), p, prog);
        if (access(cand, X_OK) == 0)
            return steal_pointer(&cand);
        if (!*e)
            break;
        p = e + 1;
    }
    return xstrdup(prog);
}

/* An unsafe command: never run, but recorded, with an id. */
static int blocked(txbox_ws *ws, const txbox_run_opts *opts, txbox_result *r, uint64_t t0,
                   txbox_result **out, txbox_error *err)
{
    int txfd = -1, activefd = -1;
    if (ws_new_tx(ws, &r->id, &txfd, &activefd, NULL, err) < 0) {
        result_free(r);
        return -1;
    }
    snprintf(r->txs, sizeof r->txs, "%llu", (unsigned long long)r->id);
    r->outcome = TXBOX_OUTCOME_BLOCKED;
    r->backend = "none";
    r->changes = json_pack("{s:[],s:[],s:[],s:b}", "added", "modified", "deleted", "truncated", 0);
    r->duration_ms = r->overhead_ms = (double)(now_ns() - t0) / 1e6;
    txbox_error le = {0};
    /* logged with the same context as a command that ran: cwd, command text */
    _cleanup_free_ char *cwd = start_dir(ws, opts->cwd);
    _cleanup_free_ char *hctx = store_context(ws, opts, cwd, r->started);
    _cleanup_free_ char *info = store_info(r, hctx);
    if (store_log(ws, r->id, "blocked", info, NULL, txfd, &le) < 0)
        r->log_error = xstrdup(le.msg);
    tx_write_outcome(txfd, "blocked");
    close(txfd);
    ws_end_tx(ws, r->id, activefd);
    ws_compact_maybe(ws, r->id);
    *out = r;
    return 0;
}

/* The caller's temporary directory (TMPDIR, TMP, TEMP) is on the host,
 * read-only in the sandbox, or under the host's /tmp, which the sandbox
 * replaces with a private one: point it at the private /tmp unless it lies
 * in the workspace, where the command may write. */
static void private_tmpdir(char **envp, const char *ws_path)
{
    static char tmpdir[] = "TMPDIR=/tmp", tmp[] = "TMP=/tmp", temp[] = "TEMP=/tmp";
    static char *const fixed[] = {tmpdir, tmp, temp};
    for (size_t i = 0; envp[i]; i++)
        for (size_t k = 0; k < ARRAY_SIZE(fixed); k++) {
            size_t nl = (size_t)(strchr(fixed[k], '=') - fixed[k]) + 1;
            if (strncmp(envp[i], fixed[k], nl) != 0)
                continue;
            const char *v = envp[i] + nl;
            size_t wl = strlen(ws_path);
            bool in_ws = strncmp(v, ws_path, wl) == 0 && (v[wl] == 0 || v[wl] == '/');
            if (!in_ws)
                envp[i] = fixed[k];
        }
}

static void early_cancelp(struct sb_early **e) { sb_early_cancel(*e); }

int txbox_run(txbox_ws *ws, const txbox_run_opts *opts, txbox_result **out, txbox_error *err)
{
    *out = NULL;
    uint64_t t0 = now_ns();
    tx_marks_begin(t0);
    if (validate(opts, err) < 0)
        return -1;
    txbox_result *r = result_new();
    r->started = wall_time();
    bool read_only = opts->read_only && !opts->multi, net = opts->net; /* multi: its view */
    _cleanup_plan_ json_t *saga = NULL; /* external effects (saga.c) */
    if (opts->policy) {
        txbox_verdict v;
        int pr = opts->shell ? txbox_policy_check(opts->policy, opts->shell, strlen(opts->shell), &v, err)
                             : txbox_policy_check_argv(opts->policy, opts->argv, &v, err);
        if (pr < 0) {
            result_free(r);
            return tx_err_ctx(err, "policy");
        }
        r->verdict = xstrdup(txbox_verdict_name(v.verdict));
        r->rule = xstrdup(v.rule);
        r->reason = xstrdup(v.reason);
        if (v.verdict == TXBOX_VERDICT_UNSAFE) {
            r->suggestion = xstrdup(v.suggestion);
            return blocked(ws, opts, r, t0, out, err);
        }
        if (v.verdict == TXBOX_VERDICT_SAFE && !opts->multi)
            read_only = true;
        if (v.needs_network)
            net = true;
        if (!read_only)
            saga = saga_plan(opts->policy, opts->shell, opts->argv, &net);
    }
    /* The sandbox's namespaces are made meanwhile, on the other CPU: by the
     * time the transaction's directories and the command's environment are
     * ready, init is waiting for them. Not before the verdict: a blocked
     * command would pay for it (1.1 ms), and the network choice is known
     * only now. On failure sb_run tries again and says why. */
    __attribute__((cleanup(early_cancelp))) struct sb_early *early = NULL;
    txbox_error pe = {0};
    if (sb_prestart(net, &early, &pe) < 0)
        early = NULL;
    r->backend = read_only ? "none" : opts->backend == TXBOX_BACKEND_COPY ? "copy" : "overlay";
    size_t cap = opts->output_cap ? opts->output_cap : DEFAULT_OUTPUT_CAP;
    dbuf_init(&r->out, cap);
    dbuf_init(&r->err, cap);

    _cleanup_free_ char *cwd = start_dir(ws, opts->cwd);
    _cleanup_free_ char *hctx = store_context(ws, opts, cwd, r->started); /* history */
    json_t *scrubbed = json_array();
    _cleanup_free_ char **envp = confine_env(environ, opts->env_allow, scrubbed);
    private_tmpdir(envp, ws->path);
    char **hide = tx_hidden_paths(opts->deny_read);
    struct statvfs vfs;
    uint64_t max_write = opts->max_write_bytes;
    if (!max_write && fstatvfs(ws->fd, &vfs) == 0)
        max_write = (uint64_t)vfs.f_bavail * vfs.f_frsize / 2;
    _cleanup_free_ char *prog = NULL;
    char sh[] = "/bin/sh", dash_c[] = "-c";
    char *shell_argv[] = {sh, dash_c, (char *)opts->shell, NULL};
    char **argv = shell_argv;
    _cleanup_free_ char **argv_copy = NULL;
    if (!opts->shell) {
        size_t n = 0;
        while (opts->argv[n])
            n++;
        argv_copy = xcalloc(n + 1, sizeof *argv_copy);
        memcpy(argv_copy, opts->argv, n * sizeof *argv_copy);
        prog = resolve_program(opts->argv[0]);
        argv_copy[0] = prog;
        argv = argv_copy;
    }

    int txfd = -1, activefd = -1, upperfd = -1, workfd = -1;
    int pout[2] = {-1, -1}, perr[2] = {-1, -1};
    uint64_t base_gen = 0;
    bool use_copy = opts->backend == TXBOX_BACKEND_COPY && !read_only;
    int rc = ws_new_tx(ws, &r->id, &txfd, &activefd, &base_gen, err);
    if (rc < 0)
        goto fail;
    snprintf(r->txs, sizeof r->txs, "%llu", (unsigned long long)r->id);

retry:
    if (use_copy) {
        r->backend = "copy";
        if ((rc = copy_begin(ws, txfd, &upperfd, err)) < 0)
            goto fail;
    } else if (!read_only) {
        if ((upperfd = make_dir_fd(txfd, "upper", ws->fd, err)) < 0 ||
            (workfd = make_dir_fd(txfd, "work", -1, err)) < 0) {
            rc = -1;
            goto fail;
        }
        /* .txbox/ is not part of the view: a whiteout over it (a 0/0
         * character device, which the kernel lets any user make since 5.8).
         * The command cannot see or reach the real one, and the scan ignores
         * whatever it does at that name. */
        int hid = mknodat(upperfd, TXBOX_STATE_DIR, S_IFCHR, 0);
        if (hid < 0) {
            rc = tx_errno(err, errno, "cannot hide %s from the command", TXBOX_STATE_DIR);
            /* A filesystem that refuses whiteouts (overlayfs itself) cannot
             * hold an overlay upper either. */
            if (opts->allow_copy_fallback)
                goto fallback;
            goto fail;
        }
    }
    char upper_rel[64], work_rel[64];
    snprintf(upper_rel, sizeof upper_rel, "%s/tx/%s/%s", TXBOX_STATE_DIR, r->txs,
             use_copy ? "view" : "upper"); /* the copy backend's: its copy */
    snprintf(work_rel, sizeof work_rel, "%s/tx/%s/work", TXBOX_STATE_DIR, r->txs);
    /* a compensation that captures from the output needs it: captured and passed through */
    r->tee = !opts->capture && saga && saga_plan_needs_output(saga);
    if ((opts->capture || r->tee) && (pipe2(pout, O_CLOEXEC) < 0 || pipe2(perr, O_CLOEXEC) < 0)) {
        rc = tx_errno(err, errno, "pipe");
        goto fail;
    }
    struct cleaner cleaner = {.ws = ws};
    struct sb_spec spec = {
        .ws_path = ws->path,
        .ws_fd = ws->fd,
        .view = read_only ? SB_VIEW_READONLY : use_copy ? SB_VIEW_DIRECT : SB_VIEW_OVERLAY,
        .upper_fd = upperfd,
        .work_fd = workfd,
        .upper_rel = upper_rel,
        .work_rel = work_rel,
        .lower_fd = opts->multi ? multi_layer_fd(opts->multi) : -1,
        .lower_rel = opts->multi ? multi_layer_rel(opts->multi) : NULL,
        .lower_work_fd = opts->multi ? multi_layer_work_fd(opts->multi) : -1,
        .lower_work_rel = opts->multi ? multi_layer_work_rel(opts->multi) : NULL,
        .cwd = cwd,
        .argv = argv,
        .envp = envp,
        .net = net,
        .in_fd = -1,
        .out_fd = pout[1],
        .err_fd = perr[1],
        .timeout_s = opts->timeout_s,
        .cancel = opts->cancel,
        .limits = {.cpu_s = opts->cpu_seconds, .file_size = max_write},
        .pids_max = opts->max_processes ? opts->max_processes : 4096,
        .memory_max = opts->memory_bytes ? opts->memory_bytes : 8ull << 30,
        .max_write = max_write,
        .hide = (const char *const *)hide,
        .allow_degraded = opts->allow_degraded,
        .name = r->txs,
        .started = cleaner_start,
        .started_arg = &cleaner,
        .early = early, /* taken by sb_run */
    };
    early = NULL;
    struct sb_status st;
    int effd = opts->multi ? multi_txfd(opts->multi) : txfd; /* where its effects are recorded */
    if (saga && (rc = saga_started(effd, saga, r->txs, err)) < 0)
        goto fail;
    rc = sb_run(&spec, pout[0], perr[0], pump, r, &st, err);
    cleaner_stop(&cleaner);
    tx_mark_at("prepare", st.t_clone);
    tx_mark_at("clone->go", st.t_go);
    tx_mark_at("go->started", st.t_started);
    tx_mark_at("command", st.t_exited);
    tx_mark_at("exited->reaped", st.t_reaped);
    /* sb_run closed the write ends; the read ends are ours. */
    if (pout[0] >= 0)
        close(pout[0]);
    if (perr[0] >= 0)
        close(perr[0]);
    pout[0] = pout[1] = perr[0] = perr[1] = -1;
    if (rc < 0) {
        json_decref(st.protections);
        st.protections = NULL;
        if (!st.ran && st.overlay_failed && opts->allow_copy_fallback && !use_copy)
            goto fallback;
        goto fail;
    }
    r->protections = st.protections;
    st.protections = NULL;
    json_object_set(r->protections, "env_removed", scrubbed);
    /* rules on effects judge the scanned write set of an overlay commit;
     * the copy backend (chosen, or allowed as a fallback) has none */
    json_object_set_new(r->protections, "effect_rules",
                        json_string(read_only    ? "not needed (read-only)"
                                    : !opts->policy ? "none (no policy)"
                                    : use_copy   ? "not enforced (copy backend)"
                                                 : "enforced at commit"));
    r->write_limit = st.write_limit;
    r->oom = st.oom;
    r->cmd_ms = (double)st.cmd_ns / 1e6;
    r->timed_out = st.timed_out;
    if (st.exited) {
        if (WIFEXITED(st.wstatus)) {
            r->exit_code = WEXITSTATUS(st.wstatus);
        } else if (WIFSIGNALED(st.wstatus)) {
            r->signal = WTERMSIG(st.wstatus);
            r->exit_code = 128 + r->signal;
        }
    } else {
        r->signal = SIGKILL;
        r->exit_code = 128 + SIGKILL;
    }
    bool ok = st.exited && WIFEXITED(st.wstatus) && WEXITSTATUS(st.wstatus) == 0 && !st.timed_out &&
              !st.cancelled;
    /* external effects: recorded; undone now if the command failed */
    if (saga && (rc = saga_after(ws, effd, saga, r, ok, opts->multi != NULL, err)) < 0)
        goto fail;

    if (read_only) {
        /* killed at its deadline: a timeout like any other (status 124) */
        r->outcome = st.timed_out ? TXBOX_OUTCOME_TIMED_OUT : TXBOX_OUTCOME_READ_ONLY;
    } else if (use_copy) {
        if (ok) {
            rc = copy_commit(ws, txfd, &r->changes, CHANGES_CAP, err);
            r->outcome = TXBOX_OUTCOME_COMMITTED;
        } else {
            rc = copy_rollback(ws, txfd, err);
            r->outcome = st.timed_out ? TXBOX_OUTCOME_TIMED_OUT : TXBOX_OUTCOME_ROLLED_BACK;
        }
        if (rc < 0)
            goto fail;
    } else if (ok && opts->multi) {
        if ((rc = multi_absorb(opts->multi, txfd, r, err)) < 0)
            goto fail;
    } else if (ok) {
        struct gitcfg_ctx gc = {.ws = ws, .txfd = txfd, .txs = r->txs,
                                .hide = (const char *const *)hide,
                                .allow_degraded = opts->allow_degraded};
        rc = overlay_commit(ws, r, txfd, upperfd, base_gen, hctx, opts->policy, &gc, err);
        if (rc < 0) {
            if (r->commit_point_passed) {
                /* Past the commit point: leave the journal to recovery
                 * (invariant I6); release the owner lock so that the next
                 * txbox command on this workspace finishes the job. */
                close(activefd);
                activefd = -1;
                close(txfd);
                close(upperfd);
                close(workfd);
                tx_free_strv(hide);
                json_decref(scrubbed);
                result_free(r);
                return -1;
            }
            goto fail;
        }
    } else {
        r->outcome = st.timed_out ? TXBOX_OUTCOME_TIMED_OUT : TXBOX_OUTCOME_ROLLED_BACK;
    }

    tx_mark("decided");
    bool trashed = false;
    if (r->write_limit) /* its space back at once, not after the next command */
        (void)tree_remove(txfd, "upper");
    else if (r->outcome != TXBOX_OUTCOME_CONFLICT && r->outcome != TXBOX_OUTCOME_HELD)
        trashed = discard_dir(ws, txfd, "upper", r->txs,
                              r->outcome == TXBOX_OUTCOME_COMMITTED && !opts->multi ? 0
                                                                                : WS_TRASH_GRANT_DIRS);
    /* a conflict's or held upper stays, kept aside */
    trashed |= discard_dir(ws, txfd, "work", r->txs, WS_TRASH_GRANT_DIRS | WS_TRASH_GRANT_FILES);
    tx_mark("rm-upper");
    tx_write_outcome(txfd, txbox_outcome_name(r->outcome));
    if (!r->changes)
        r->changes = json_pack("{s:[],s:[],s:[],s:b}", "added", "modified", "deleted",
                               "truncated", 0);
    r->duration_ms = (double)(now_ns() - t0) / 1e6;
    r->overhead_ms = r->duration_ms - r->cmd_ms;
    if (!r->logged) {
        txbox_error le = {0};
        _cleanup_free_ char *info = store_info(r, hctx); /* history: + command, cwd */
        if (store_log(ws, r->id, txbox_outcome_name(r->outcome), info, NULL, txfd, &le) < 0)
            r->log_error = xstrdup(le.msg);
        tx_mark("log");
    }
    if (upperfd >= 0)
        close(upperfd);
    if (workfd >= 0)
        close(workfd);
    close(txfd);
    ws_end_tx(ws, r->id, activefd);
    tx_free_strv(hide);
    json_decref(scrubbed);
    if (r->outcome == TXBOX_OUTCOME_COMMITTED && r->logged)
        history_autogc(ws); /* history: retention bounds */
    /* Bounded: when commands end too soon for the cleaner to keep up. */
    if (trashed)
        ws_trash_clean(ws, NULL, TXBOX_TRASH_KEEP);
    tx_mark("gc");
    ws_compact_maybe(ws, r->id); /* every 64th: .txbox/tx/ stays bounded */
    tx_mark("end");
    tx_marks_print(stderr);
    *out = r;
    return 0;

fallback:
    /* Overlay cannot be used on this workspace: the copy backend instead. */
    r->fallback = xasprintf("overlay unavailable (%s); used the copy backend", err->msg);
    (void)tree_remove(txfd, "upper");
    (void)tree_remove(txfd, "work");
    close(upperfd);
    close(workfd);
    upperfd = workfd = -1;
    use_copy = true;
    goto retry;

fail:
    /* Nothing was applied: discard this transaction's scratch space. */
    if (txfd >= 0) {
        if (use_copy && copy_recover_one(ws, txfd, NULL) < 0)
            tx_err_ctx(err, "and the snapshot could not be restored (run 'txbox recover')");
        (void)tree_remove(txfd, "upper");
        (void)tree_remove(txfd, "work");
        tx_write_outcome(txfd, "failed");
        close(txfd);
    }
    for (int i = 0; i < 2; i++) {
        if (pout[i] >= 0)
            close(pout[i]);
        if (perr[i] >= 0)
            close(perr[i]);
    }
    if (upperfd >= 0)
        close(upperfd);
    if (workfd >= 0)
        close(workfd);
    if (r->id)
        ws_end_tx(ws, r->id, activefd);
    tx_free_strv(hide);
    json_decref(scrubbed);
    result_free(r);
    return -1;
}
