/* One command, one transaction: the path of txbox_run(). */
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include "txbox_policy.h"
#include "confine.h"
#include "effects.h"
#include "fsops.h"
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

static char **hidden_paths(const char *const *extra)
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

static void free_strv(char **v)
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

/* What a commit needs to know of an entry: its mount, device and the
 * attributes that make a rename or a change of it fail (EPERM). */
struct entry_facts {
    uint64_t mnt;
    dev_t dev;
    bool immutable, append;
};

static int entry_facts(int dfd, const char *name, struct entry_facts *f)
{
    struct statx stx;
    if (statx(dfd, name, (*name ? 0 : AT_EMPTY_PATH) | AT_SYMLINK_NOFOLLOW,
              STATX_MNT_ID | STATX_TYPE, &stx) < 0)
        return -1;
    if (!(stx.stx_mask & STATX_MNT_ID)) {
        errno = ENOTSUP;
        return -1;
    }
    f->mnt = stx.stx_mnt_id;
    f->dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
    f->immutable = stx.stx_attributes & stx.stx_attributes_mask & STATX_ATTR_IMMUTABLE;
    f->append = stx.stx_attributes & stx.stx_attributes_mask & STATX_ATTR_APPEND;
    /* A filesystem that does not report them through statx: the flags. */
    if (!(stx.stx_attributes_mask & (STATX_ATTR_IMMUTABLE | STATX_ATTR_APPEND)) &&
        (S_ISREG(stx.stx_mode) || S_ISDIR(stx.stx_mode))) {
        _cleanup_close_ int fd = openat(dfd, *name ? name : ".",
                                        O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        int fl = 0;
        if (fd >= 0 && ioctl(fd, FS_IOC_GETFLAGS, &fl) == 0) {
            f->immutable = fl & FS_IMMUTABLE_FL;
            f->append = fl & FS_APPEND_FL;
        }
    }
    return 0;
}

/* Why path (under dfd as name) cannot take part in a commit: another mount
 * or device (a rename across them fails, EXDEV: a mount, a btrfs subvolume),
 * or an attribute that refuses the rename or change (immutable; append-only:
 * also, for a directory, removing or replacing an entry in it). NULL: it
 * can. */
static char *entry_refusal(const txbox_ws *ws, uint64_t ws_mnt, const struct entry_facts *f,
                           const char *path, bool is_parent, bool removes)
{
    const char *p = *path ? path : ".";
    if (f->mnt != ws_mnt)
        return xasprintf("%s lies on another mount inside the workspace", p);
    if (f->dev != ws->dev)
        return xasprintf("%s lies on another filesystem or subvolume inside the workspace "
                         "(device %u:%u, the workspace's %u:%u)",
                         p, major(f->dev), minor(f->dev), major(ws->dev), minor(ws->dev));
    if (f->immutable)
        return xasprintf("%s is immutable (chattr +i)", p);
    if (f->append && (!is_parent || removes))
        return xasprintf("%s is append-only (chattr +a)", p);
    return NULL;
}

/* A commit is renames within the workspace's mount and filesystem, and
 * changes of the entries it replaces. Everything of that the filesystem is
 * known to refuse is found here, before the commit point, so that the apply
 * does not fail half-way (journal.c, I8): a path on another mount or device
 * (something mounted inside the workspace, a btrfs subvolume: a rename
 * across them fails, EXDEV), an immutable or append-only entry, or a
 * directory that refuses the renames into or out of it. 1 and *why: refused;
 * 0: none; <0: error. */
static int ops_precheck(txbox_ws *ws, const struct tx_ops *ops, char **why, txbox_error *err)
{
    struct entry_facts wf, f;
    if (entry_facts(ws->fd, "", &wf) < 0)
        return tx_errno(err, errno, "cannot identify the workspace's mount");
    _cleanup_free_ char *last_parent = NULL;
    _cleanup_close_ int pfd = -1;
    bool pfacts = false;
    for (size_t i = 0; i < ops->n; i++) {
        const struct tx_op *o = &ops->v[i];
        const char *path = o->path;
        const char *slash = strrchr(path, '/');
        _cleanup_free_ char *parent = slash ? xasprintf("%.*s", (int)(slash - path), path) : xstrdup("");
        if (!last_parent || strcmp(parent, last_parent) != 0) {
            if (pfd >= 0)
                close(pfd);
            pfd = *parent ? safe_openat(ws->fd, parent, O_PATH | O_DIRECTORY, 0) : dup(ws->fd);
            free(last_parent);
            last_parent = steal_pointer(&parent);
            pfacts = false;
            if (pfd < 0 && errno == EXDEV) {
                *why = xasprintf("%s lies on another mount inside the workspace", last_parent);
                return 1;
            }
            if (pfd >= 0) { /* else a new directory of the transaction: its parent is checked */
                if (entry_facts(pfd, "", &f) < 0)
                    return tx_errno(err, errno, "cannot identify the mount of %s", last_parent);
                pfacts = true;
            }
        }
        if (pfd < 0)
            continue;
        if (!*path) { /* the root's META: the root itself */
            if ((*why = entry_refusal(ws, wf.mnt, &f, path, false, false)))
                return 1;
            continue;
        }
        struct entry_facts ef;
        bool exists = entry_facts(pfd, slash ? slash + 1 : path, &ef) == 0;
        if (!exists && errno != ENOENT)
            return tx_errno(err, errno, "cannot stat %s", path);
        if (o->kind != OP_META && pfacts &&
            (*why = entry_refusal(ws, wf.mnt, &f, last_parent, true, exists)))
            return 1;
        if (exists && (*why = entry_refusal(ws, wf.mnt, &ef, path, false, false)))
            return 1;
    }
    return 0;
}

/* The state the commit writes after its commit point (journal.c: undo/,
 * commits/, the generation, the audit log) must take it: an immutable or
 * append-only state directory or log file would fail it half-way. */
static int state_precheck(txbox_ws *ws, int txfd, char **why)
{
    static const char *const files[] = {"log.db", "log.db-wal", "log.db-shm", "log.pending"};
    struct {
        int fd;
        const char *name, *label;
    } dirs[] = {{ws->sfd, "", ""},           {ws->jnld, "", "/journal"},
                {ws->cmtd, "", "/commits"},  {ws->txd, "", "/tx"},
                {txfd, "", "/tx/ID"},        {txfd, "undo", "/tx/ID/undo"}};
    struct entry_facts f;
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
        if (entry_facts(dirs[i].fd, dirs[i].name, &f) == 0 && (f.immutable || f.append)) {
            *why = xasprintf("the state directory %s%s is %s", TXBOX_STATE_DIR, dirs[i].label,
                             f.immutable ? "immutable (chattr +i)" : "append-only (chattr +a)");
            return 1;
        }
    for (size_t i = 0; i < ARRAY_SIZE(files); i++)
        if (entry_facts(ws->sfd, files[i], &f) == 0 && (f.immutable || f.append)) {
            *why = xasprintf("the audit log's file %s/%s is %s", TXBOX_STATE_DIR, files[i],
                             f.immutable ? "immutable (chattr +i)" : "append-only (chattr +a)");
            return 1;
        }
    return 0;
}

/* Room for what the commit writes after its commit point: a directory
 * entry in undo/ per operation, the commit record and generation (two
 * inodes), a kept set of attributes per changed directory (an inode), the
 * audit log's row (about twice its record, as the log writes it), with a
 * margin. The journal and the new data are written before the commit point
 * and fail it there. Whatever still runs out is rolled back (journal.c). */
#define COMMIT_SPACE_MARGIN (1u << 20)
static int space_precheck(txbox_ws *ws, const struct tx_ops *ops, size_t info_len, char **why)
{
    struct statvfs v;
    if (fstatvfs(ws->fd, &v) < 0)
        return 0; /* unknown: the rollback is the guard */
    uint64_t inodes = 8, bytes = COMMIT_SPACE_MARGIN + 2 * (uint64_t)info_len;
    for (size_t i = 0; i < ops->n; i++) {
        bytes += 64 + 2 * strlen(ops->v[i].path);
        inodes += ops->v[i].kind == OP_META && ops->v[i].had_old;
    }
    uint64_t bfree = (uint64_t)(ws->root ? v.f_bfree : v.f_bavail) * v.f_frsize;
    uint64_t ifree = ws->root ? v.f_ffree : v.f_favail;
    if (bfree < bytes) {
        *why = xasprintf("the workspace's filesystem has %llu KiB free, less than the %llu KiB "
                         "the commit needs",
                         (unsigned long long)(bfree >> 10), (unsigned long long)(bytes >> 10));
        return 1;
    }
    if (v.f_files && ifree < inodes) { /* f_files 0: no fixed count (btrfs) */
        *why = xasprintf("the workspace's filesystem has %llu free inodes, less than the %llu "
                         "the commit needs",
                         (unsigned long long)ifree, (unsigned long long)inodes);
        return 1;
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
/* Did the command reach the file size limit (RLIMIT_FSIZE, the write
 * budget)? A file the commit would install at that size was cut there: the
 * process that wrote it got SIGXFSZ or EFBIG, whatever the command's own
 * status says. */
static bool file_at_limit(int upperfd, const struct tx_ops *ops, uint64_t limit)
{
    for (size_t i = 0; limit && i < ops->n; i++) {
        const struct tx_op *o = &ops->v[i];
        struct stat st;
        if (o->kind == OP_REPLACE && S_ISREG(o->nw.mode) &&
            fstatat(upperfd, o->path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
            (uint64_t)st.st_size >= limit)
            return true;
    }
    return false;
}

static int overlay_commit(txbox_ws *ws, txbox_result *r, int txfd, int upperfd,
                          uint64_t base_gen, const char *hctx, const txbox_policy *pol,
                          uint64_t file_limit, txbox_error *err)
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
    if (rc == 0 && file_at_limit(upperfd, &ops, file_limit)) {
        r->write_limit = true;
        r->exit_code = 128 + SIGXFSZ;
        r->outcome = TXBOX_OUTCOME_ROLLED_BACK;
        goto out;
    }
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
        int e = effects_gate_run(ws, pol, r, txfd, upperfd, base_gen, &ops, &durable, hctx, err);
        if (e != 0) {
            rc = e < 0 ? -1 : 0;
            goto out;
        }
    }
    tx_mark("effects");
    if (rc == 0) {
        _cleanup_free_ char *why = NULL;
        int m = ops_precheck(ws, &ops, &why, err);
        if (m > 0)
            rc = tx_err(err, EXDEV, "%s: txbox cannot commit the command's changes there; nothing was changed",
                        why);
        else if (m < 0)
            rc = -1;
    }
    if (rc == 0) {
        tx_mark("mounts");
        r->changes = ops_changes(upperfd, ws->fd, &ops, CHANGES_CAP);
        tx_mark("changes");
        _cleanup_free_ char *info = store_info(r, hctx); /* history: + command, cwd */
        _cleanup_free_ char *why = NULL;
        int e = state_precheck(ws, txfd, &why) > 0 ? EPERM
                : space_precheck(ws, &ops, info ? strlen(info) : 0, &why) > 0 ? ENOSPC
                                                                            : 0;
        if (e) {
            rc = tx_err(err, e, "%s: the commit could not be completed; nothing was changed", why);
            goto out;
        }
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
    char **hide = hidden_paths(opts->deny_read);
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
    if (ok && (st.write_limit || st.oom)) {
        /* Stopped by a limit, yet the command says success: a process it
         * started was stopped (killed by the kernel's OOM killer, the write
         * budget) while the rest went on. Never committed; the status says
         * it failed. */
        ok = false;
        r->exit_code = 128 + (st.oom ? SIGKILL : SIGXFSZ);
    }
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
        rc = overlay_commit(ws, r, txfd, upperfd, base_gen, hctx, opts->policy, max_write, err);
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
                free_strv(hide);
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
    free_strv(hide);
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
    free_strv(hide);
    json_decref(scrubbed);
    result_free(r);
    return -1;
}
