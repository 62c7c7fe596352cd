/* The commit sequence: one path from a prepared write set to the applied,
 * recorded workspace, whoever commits.
 *
 * Callers: txbox_run (run.c: the command's upper, scanned here),
 * txbox_multi_commit (multi.c: the transaction's layer, renamed to the
 * upper by its prepare hook, scanned here), txbox_approve (held.c: the
 * held upper and its recorded operations), txbox_undo (undo.c: the
 * operations it plans and the pre-images its prepare hook stages), and
 * recovery (commit_roll_forward: the same journal, apply and record for a
 * commit whose process died after its commit point).
 *
 * The steps, in order (steps[] below; each 0: go on, 1: the commit ended,
 * c->end says how, <0: an error):
 *
 *   lock        the workspace lock (bounded, cancellable: tx_flock_wait)
 *   recover     every journal whose owner died rolled forward first
 *               (commit_roll_forward): it holds the next generation
 *   own         a transaction no process owns (multi, held) gets an owner
 *               lock for the commit, so that a crash at any step is
 *               recovery's to finish or give back (commit_end_dead)
 *   prepare     the caller's hook makes the write set (tx/ID/upper)
 *   scan        the upper into operations, its new data noted durable
 *   generation  the generation now, under the lock
 *   limit       a file the command wrote up to the file size limit: the
 *               limit stopped it, whatever its status said
 *   empty       nothing to apply
 *   changes     the paths added, modified, deleted (with whole counts)
 *   conflicts   a later commit or a stuck journal (I9) holds a path
 *   effects     the caller's judge (the rules on effects): held, rejected
 *   prechecks   what the filesystem is known to refuse (another mount or
 *               device, immutable or append-only entries, a state directory
 *               or log file it cannot write): refused here, before the
 *               commit point (journal.c, I8)
 *   record      the audit log's record (the caller's info hook)
 *   space       the free-space floor (tx_space_floor) and room for what
 *               the commit writes after its commit point
 *   journal     journal_commit: the commit point, the apply, the record
 *
 * A check added to a step holds for every caller. Then, under the lock
 * still: the caller's finish hook records the end (or gives back what its
 * prepare took), a committed transaction's scratch goes (commit_tidy), the
 * owner lock and the workspace lock are released.
 *
 * Recovery's part (moved here from recover.c so that both use one finish):
 * commit_roll_forward, commit_end_dead, commit_tidy. */
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>

#include "commit.h"
#include "safepath.h"
#include "saga.h"
#include "store.h"

/* ---- what the filesystem refuses (prechecks) ---- */

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
    if (statx(dfd, name, (*name ? 0 : AT_EMPTY_PATH) | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID | STATX_TYPE, &stx) <
        0)
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
        _cleanup_close_ int fd =
            openat(dfd, *name ? name : ".", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
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
static char *entry_refusal(const txbox_ws *ws, uint64_t ws_mnt, const struct entry_facts *f, const char *path,
                           bool is_parent, bool removes)
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
        /* In a directory without search permission (an unprivileged
         * owner's mode 0: the apply grants it first, journal.c I3), what is
         * there cannot be seen now: its own attributes go unchecked (the
         * rollback is the guard), its parent is checked as if it were. */
        bool hidden = !exists && errno == EACCES;
        if (!exists && !hidden && errno != ENOENT)
            return tx_errno(err, errno, "cannot stat %s", path);
        if (o->kind != OP_META && pfacts &&
            (*why = entry_refusal(ws, wf.mnt, &f, last_parent, true, exists || hidden)))
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
    } dirs[] = {{ws->sfd, "", ""},    {ws->jnld, "", "/journal"}, {ws->cmtd, "", "/commits"},
                {ws->txd, "", "/tx"}, {txfd, "", "/tx/ID"},       {txfd, "undo", "/tx/ID/undo"}};
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

/* ---- free space ---- */

/* The floor's default: 5% of the filesystem (what ext4 reserves for root
 * by default: the level at which a host's own administrators expect
 * trouble), at least 256 MiB (logs, a package upgrade, an editor's swap
 * files on a small disk) and at most 4 GiB (on a big disk 5% would keep
 * tens of GB from the user), and never more than a quarter of a small
 * filesystem (a 100 MB one still takes commits). */
#define FLOOR_MIN (256ull << 20)
#define FLOOR_MAX (4ull << 30)

int64_t tx_min_free_env(uint64_t fs_bytes, txbox_error *err)
{
    const char *s = getenv("TXBOX_MIN_FREE");
    if (!s || !*s)
        return -1;
    size_t n = strlen(s);
    uint64_t v;
    if (n > 1 && s[n - 1] == '%') {
        char b[8];
        if (n - 1 >= sizeof b)
            goto bad;
        memcpy(b, s, n - 1);
        b[n - 1] = 0;
        if (!parse_u64(b, &v) || v > 50)
            goto bad;
        return (int64_t)(fs_bytes / 100 * v);
    }
    if (tx_parse_size(s, true, &v) && v <= INT64_MAX)
        return (int64_t)v;
bad:
    tx_err(err, EINVAL,
           "TXBOX_MIN_FREE is a size (512M, 2G, 0 for none) or a percentage up to 50%%, not '%.40s'", s);
    return -2;
}

uint64_t tx_space_floor(int fd, int64_t min_free)
{
    struct statvfs v;
    if (min_free == 0 || fstatvfs(fd, &v) < 0)
        return 0;
    uint64_t size = (uint64_t)v.f_blocks * v.f_frsize;
    if (min_free > 0)
        return (uint64_t)min_free;
    int64_t env = tx_min_free_env(size, NULL);
    if (env >= 0)
        return (uint64_t)env;
    uint64_t f = size / 20;
    f = f < FLOOR_MIN ? FLOOR_MIN : f > FLOOR_MAX ? FLOOR_MAX : f;
    return f < size / 4 ? f : size / 4;
}

/* Room for what the commit writes after its commit point: a directory
 * entry in undo/ per operation, the commit record and generation (two
 * inodes), a kept set of attributes per changed directory (an inode), the
 * audit log's row (about twice its record, as the log writes it), with a
 * margin. The journal and the new data are written before the commit point
 * and fail it there. Whatever still runs out is rolled back (journal.c).
 * And the floor: a commit that keeps new data must leave at least the
 * floor free (1: COMMIT_NO_SPACE, c->space says how much). */
#define COMMIT_SPACE_MARGIN (1u << 20)
static int space_precheck(struct tx_commit *c, size_t info_len, char **why, txbox_error *err)
{
    txbox_ws *ws = c->ws;
    struct statvfs v;
    if (fstatvfs(ws->fd, &v) < 0)
        return 0; /* unknown: the rollback is the guard */
    uint64_t inodes = 8, bytes = COMMIT_SPACE_MARGIN + 2 * (uint64_t)info_len;
    for (size_t i = 0; i < c->ops.n; i++) {
        bytes += 64 + 2 * strlen(c->ops.v[i].path);
        inodes += c->ops.v[i].kind == OP_META && c->ops.v[i].had_old;
    }
    uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
    if (!c->keeps_no_data) {
        txbox_error fe = {0};
        if (c->min_free < 0 && tx_min_free_env((uint64_t)v.f_blocks * v.f_frsize, &fe) == -2)
            return tx_err(err, fe.code, "%s", fe.msg);
        uint64_t floor = tx_space_floor(ws->fd, c->min_free);
        if (floor && avail < floor + bytes) {
            c->space = (struct commit_space){.free_bytes = avail, .floor = floor, .need = bytes};
            return 2;
        }
    }
    uint64_t bfree = ws->root ? (uint64_t)v.f_bfree * v.f_frsize : avail;
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

/* Did the command reach the file size limit (RLIMIT_FSIZE, the write
 * budget)? A file the commit would install at that size was cut there: the
 * process that wrote it got SIGXFSZ or EFBIG, whatever the command's own
 * status says. (The sandbox also reports the signal itself: run.c.) */
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

/* ---- conflicts ---- */

struct all_clashes {
    const struct tx_ops *ops;
    json_t *paths;
};

static int add_clashes(void *ctx, const char *idn, const struct tx_journal *j)
{
    struct all_clashes *c = ctx;
    const struct tx_ops *ops = c->ops;
    if (!j) {
        json_array_append_new(c->paths, json_sprintf("(unknown: the record of transaction %s is gone)", idn));
        return 0;
    }
    for (size_t i = 0; i < ops->n && json_array_size(c->paths) < TX_CHANGES_CAP; i++) {
        struct tx_ops one = {.v = &ops->v[i], .n = 1, .cap = 1};
        const char *which = NULL;
        if (!ops_overlap(&one, &j->ops, &which))
            continue;
        const char *p = *ops->v[i].path ? ops->v[i].path : ".";
        bool dup = false;
        size_t k;
        json_t *v;
        json_array_foreach(c->paths, k, v) dup = dup || !strcmp(json_string_value(v), p);
        if (!dup)
            json_array_append_new(c->paths, json_string(p));
    }
    return 0;
}

/* ---- the steps ---- */

static int step_lock(struct tx_commit *c, txbox_error *err)
{
    return ws_lock_cancel(c->ws, &c->lockfd, c->cancel, err) < 0 ? -1 : 0;
}

static int step_recover(struct tx_commit *c, txbox_error *err)
{
    /* History: finish first any commit whose process died after its commit
     * point since we opened the workspace (it holds the next generation). */
    if (ws_roll_forward_locked(c->ws, NULL, NULL, err) < 0)
        return tx_err_ctx(err, "recovery");
    tx_mark("lock");
    fs_fault_arm(); /* the crash matrices count from here */
    return 0;
}

static int step_own(struct tx_commit *c, txbox_error *err)
{
    return c->own && ws_own_tx(c->ws, c->id, &c->activefd, err) < 0 ? -1 : 0;
}

static int step_prepare(struct tx_commit *c, txbox_error *err)
{
    c->prepared = true;
    int p = c->h && c->h->prepare ? c->h->prepare(c, err) : 0;
    snprintf(c->ids, sizeof c->ids, "%llu", (unsigned long long)c->id); /* it may have made it */
    if (p != 0) {
        if (p > 0)
            c->end = COMMIT_DECIDED;
        return p;
    }
    if (c->upperfd < 0) {
        c->upperfd = openat(c->txfd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        /* an undo that only deletes stages nothing */
        if (c->upperfd < 0 && (c->scan || errno != ENOENT))
            return tx_errno(err, errno, "transaction %s: cannot open its changes", c->ids);
    }
    return 0;
}

static int step_scan(struct tx_commit *c, txbox_error *err)
{
    if (!c->scan)
        return 0;
    int rc = scan_upper(c->upperfd, c->ws->fd, !c->ws->root, &c->ops, &c->durable, err);
    tx_mark("scan");
    return rc;
}

static int step_generation(struct tx_commit *c, txbox_error *err) { return ws_read_gen(c->ws, &c->gen, err); }

static int step_limit(struct tx_commit *c, txbox_error *err)
{
    (void)err;
    if (!file_at_limit(c->upperfd, &c->ops, c->file_limit))
        return 0;
    c->end = COMMIT_WRITE_LIMIT;
    return 1;
}

static int step_empty(struct tx_commit *c, txbox_error *err)
{
    (void)err;
    if (c->ops.n)
        return 0;
    c->changes = ops_changes(-1, c->ws->fd, &c->ops, TX_CHANGES_CAP);
    c->end = COMMIT_EMPTY;
    return 1;
}

static int step_changes(struct tx_commit *c, txbox_error *err)
{
    (void)err;
    c->changes = ops_changes(c->upperfd, c->ws->fd, &c->ops, TX_CHANGES_CAP);
    tx_mark("changes");
    return 0;
}

static int step_conflicts(struct tx_commit *c, txbox_error *err)
{
    /* another commit since ours began wrote our paths */
    if (c->gen != c->base_gen) {
        if (c->all_clashes) {
            c->clashes = json_array();
            struct all_clashes a = {&c->ops, c->clashes};
            if (tx_each_later(c->ws, c->base_gen, c->gen, add_clashes, &a, err) < 0)
                return -1;
            if (json_array_size(c->clashes))
                c->clash = xstrdup(json_string_value(json_array_get(c->clashes, 0)));
        } else if (tx_check_conflict(c->ws, c->base_gen, c->gen, &c->ops, &c->clash, err) < 0) {
            return -1;
        }
    }
    /* or a stuck transaction holds them (journal.c, I9) */
    if (!c->clash) {
        int h = journal_held(c->ws, &c->ops, &c->clash, &c->held_by, err);
        if (h < 0)
            return -1;
        if (h > 0 && c->all_clashes)
            json_array_append_new(c->clashes ? c->clashes : (c->clashes = json_array()),
                                  json_string(c->clash));
    }
    if (!c->clash)
        return 0;
    c->end = COMMIT_CONFLICT;
    return 1;
}

static int step_effects(struct tx_commit *c, txbox_error *err)
{
    int e = c->h && c->h->judge ? c->h->judge(c, err) : 0;
    tx_mark("effects");
    if (e > 0)
        c->end = COMMIT_DECIDED;
    return e;
}

static int step_prechecks(struct tx_commit *c, txbox_error *err)
{
    _cleanup_free_ char *why = NULL;
    int m = ops_precheck(c->ws, &c->ops, &why, err);
    tx_mark("mounts");
    if (m > 0)
        return tx_err(err, EXDEV, "%s: txbox cannot commit the changes there; nothing was changed", why);
    if (m < 0)
        return -1;
    if (state_precheck(c->ws, c->txfd, &why) > 0)
        return tx_err(err, EPERM, "%s: the commit could not be completed; nothing was changed", why);
    return 0;
}

static int step_space(struct tx_commit *c, char *info, txbox_error *err)
{
    _cleanup_free_ char *why = NULL;
    int s = space_precheck(c, info ? strlen(info) : 0, &why, err);
    if (s == 1)
        return tx_err(err, ENOSPC, "%s: the commit could not be completed; nothing was changed", why);
    if (s == 2)
        c->end = COMMIT_NO_SPACE;
    return s < 0 ? -1 : s == 2 ? 1 : 0;
}

static int step_journal(struct tx_commit *c, char *info, txbox_error *err)
{
    uint64_t gen = 0;
    int rc = journal_commit(c->ws, c->id, c->txfd, c->base_gen, &c->ops, info, &c->durable,
                            c->leave_open ? JOURNAL_LEAVE_OPEN : 0, &gen, err);
    if (rc < 0) {
        c->passed = faccessat(c->ws->jnld, c->ids, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
        return -1;
    }
    c->gen = gen;
    c->end = COMMIT_APPLIED;
    c->left_open = rc > 0;
    return 0;
}

typedef int (*commit_step)(struct tx_commit *c, txbox_error *err);

/* The steps up to the record; then space and journal, which take it. A
 * new check is a step here, in its place, and holds for every caller:
 * what a commit destroys is measured between conflicts and effects (the
 * rules judge it); what only one caller does is its hook (prepare: the
 * write set it builds; judge; info; finish). */
static const struct {
    const char *name;
    commit_step run;
} steps[] = {
    {"lock", step_lock},           {"recover", step_recover}, {"own", step_own},
    {"prepare", step_prepare},     {"scan", step_scan},       {"generation", step_generation},
    {"limit", step_limit},         {"empty", step_empty},     {"changes", step_changes},
    {"conflicts", step_conflicts}, {"effects", step_effects}, {"prechecks", step_prechecks},
};

int commit_run(struct tx_commit *c, txbox_error *err)
{
    snprintf(c->ids, sizeof c->ids, "%llu", (unsigned long long)c->id);
    c->lockfd = c->activefd = -1;
    c->end = 0;
    c->passed = c->prepared = c->left_open = false;
    int rc = 0;
    for (size_t i = 0; i < ARRAY_SIZE(steps) && rc == 0; i++)
        rc = steps[i].run(c, err);
    if (rc == 0) {
        _cleanup_free_ char *info = c->h && c->h->info ? c->h->info(c) : NULL;
        rc = step_space(c, info, err);
        if (rc == 0)
            rc = step_journal(c, info, err);
    }
    if (rc > 0)
        rc = 0; /* ended as c->end */
    bool armed = c->lockfd >= 0;
    if (c->lockfd >= 0 && c->h && c->h->finish)
        c->h->finish(c, rc, err);
    if (rc == 0 && (c->end == COMMIT_APPLIED || c->end == COMMIT_EMPTY) && !c->left_open)
        commit_tidy(c->txfd, c->keep_upper);
    if (armed)
        fs_fault_disarm();
    store_hash_forget(c->ws); /* the effect rules' (store_hash_note), this commit's only */
    if (c->activefd >= 0) {
        if (c->passed) /* recovery finishes it: the lock stays, free */
            close(c->activefd);
        else
            ws_end_tx(c->ws, c->id, c->activefd);
        c->activefd = -1;
    }
    ws_unlock(c->lockfd);
    c->lockfd = -1;
    return rc;
}

void commit_free(struct tx_commit *c)
{
    ops_free(&c->ops);
    fs_syncset_free(&c->durable);
    free(c->clash);
    c->clash = NULL;
    json_decref(c->clashes);
    c->clashes = NULL;
    json_decref(c->changes);
    c->changes = NULL;
}

/* ---- the end of a transaction, and recovery's finish ---- */

/* A line in tx/ID/name (informational; not part of the protocol). */
static void write_note(int txfd, const char *name, const char *text)
{
    int fd = openat(txfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    if (write_all(fd, text, strlen(text)) == 0 && write_all(fd, "\n", 1) < 0) {
        /* informational only */
    }
    close(fd);
}

void tx_write_outcome(int txfd, const char *outcome) { write_note(txfd, "outcome", outcome); }

void commit_tidy(int txfd, bool keep_upper)
{
    /* upper, work: the write set; staged: an undo's staging record; intent:
     * the journal's copy (journal.c, I8); stuck: recovery's note (I9);
     * held: a held transaction's record; layer.keep, sp, lwork: a
     * multi-command transaction's copy of its layer, savepoints and
     * overlay work directory */
    static const char *const dirs[] = {"upper", "work", "layer.keep", "sp", "lwork"};
    static const char *const files[] = {"staged", "intent", TX_STUCK, "held"};
    for (size_t i = keep_upper ? 2 : 0; i < ARRAY_SIZE(dirs); i++)
        (void)tree_remove(txfd, dirs[i]);
    for (size_t i = 0; i < ARRAY_SIZE(files); i++)
        (void)unlinkat(txfd, files[i], 0);
}

bool commit_relist_changes(struct tx_commit *c)
{
    bool quiet = false;
    for (size_t i = 0; i < c->ops.n && !quiet; i++)
        quiet = c->ops.v[i].quiet;
    if (quiet) {
        json_decref(c->changes);
        c->changes = ops_changes(c->upperfd, c->ws->fd, &c->ops, TX_CHANGES_CAP);
    }
    return quiet;
}

void commit_tidy_dead(int txfd)
{
    commit_tidy(txfd, false);
    /* a session's background processes' upper and its record (run.c):
     * they died with their owner, the steward */
    (void)tree_remove(txfd, "live");
    (void)unlinkat(txfd, "survivors.rec", 0);
}

/* The multi-command layer's copies (multi.c): hard links of what became
 * workspace files at the commit. */
static const char *const layer_copies[] = {"layer.keep", "sp", "lwork"};

static bool has_layer_copies(int txfd)
{
    if (exists_at(txfd, "journal") <= 0)
        return false;
    for (size_t i = 0; i < ARRAY_SIZE(layer_copies); i++)
        if (exists_at(txfd, layer_copies[i]) > 0)
            return true;
    return false;
}

int commit_tidy_closed(txbox_ws *ws, bool locked, txbox_error *err)
{
    uint64_t *ids = NULL;
    size_t n = 0;
    if (ws_list_ids(ws->txd, &ids, &n, err) < 0)
        return -1;
    int lockfd = -1, rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "%llu", (unsigned long long)ids[i]);
        _cleanup_close_ int txfd = openat(ws->txd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (txfd < 0 || !has_layer_copies(txfd))
            continue;
        /* under the lock (no commit in its own clean-up meanwhile), again */
        if (!locked && lockfd < 0 && ws_lock(ws, &lockfd, err) < 0) {
            rc = -1;
            break;
        }
        if (!has_layer_copies(txfd))
            continue;
        for (size_t k = 0; k < ARRAY_SIZE(layer_copies); k++)
            if (tree_remove(txfd, layer_copies[k]) < 0 && errno != ENOENT)
                rc = tx_errno(err, errno, "transaction %s: cannot remove its %s", name, layer_copies[k]);
    }
    ws_unlock(lockfd);
    free(ids);
    return rc;
}

bool commit_is_stuck(txbox_ws *ws, uint64_t id)
{
    char p[48];
    snprintf(p, sizeof p, "%llu/" TX_STUCK, (unsigned long long)id);
    return faccessat(ws->txd, p, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

int commit_end_dead(txbox_ws *ws, uint64_t id, int txfd, const char *outcome, txbox_error *err)
{
    /* A transaction that outlives its processes was only being committed:
     * a multi-command one still open (its next open repairs it: multi.c)
     * or a held one (its upper and record are as approve wants them). */
    int multi = exists_at(txfd, "multi"), ended = exists_at(txfd, "outcome");
    int held = exists_at(txfd, "held"), upper = exists_at(txfd, "upper");
    if (multi < 0 || ended < 0 || held < 0 || upper < 0)
        return tx_errno(err, errno, "cannot read the state of transaction %llu", (unsigned long long)id);
    if ((multi && !ended) || (held && upper)) {
        (void)unlinkat(txfd, "intent", 0);
        return 1;
    }
    /* History: an undo puts back the pre-images it had staged. */
    if (copy_recover_one(ws, txfd, err) < 0 || undo_unstage(ws, txfd, err) < 0)
        return -1;
    commit_tidy_dead(txfd);
    tx_write_outcome(txfd, outcome);
    /* History: the audit log records it (a row the transaction wrote
     * itself, e.g. a conflict, is kept). Best effort. */
    if (store_log(ws, id, "rolled_back", NULL, NULL, txfd, NULL) < 0) {
        /* the log is damaged or busy: recovery goes on */
    }
    return 0;
}

/* Step 1 of recovery, for each journal in ids whose owner died. A journal
 * that can be neither finished nor rolled back is held (journal.c, I9) and
 * listed in failed. retry (an explicit recovery): try the held ones again
 * too, and put the first one's error in *held; without it, held ones are
 * left alone. Either way the others go on. */
/* One journal: finished (0), rolled back (1), or held (2). Its file
 * operations are fault points (the crash matrices' recover phase), as a
 * commit's are. */
static int finish_one_armed(txbox_ws *ws, uint64_t id, const char *name, json_t *failed, txbox_error *held,
                            txbox_error *err);

static int finish_one(txbox_ws *ws, uint64_t id, const char *name, json_t *failed, txbox_error *held,
                      txbox_error *err)
{
    bool armed = fs_fault_armed();
    fs_fault_arm();
    int r = finish_one_armed(ws, id, name, failed, held, err);
    if (!armed)
        fs_fault_disarm();
    return r;
}

static int finish_one_armed(txbox_ws *ws, uint64_t id, const char *name, json_t *failed, txbox_error *held,
                            txbox_error *err)
{
    txbox_error e = {0};
    int r = journal_recover_one(ws, id, &e);
    _cleanup_close_ int txfd = openat(ws->txd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (r < 0) {
        if (failed)
            json_array_append_new(failed, json_pack("{s:s,s:s}", "tx", name, "error", e.msg));
        /* held: the journal stays, its paths wait; the rest goes on */
        txbox_error he = {0};
        if (journal_hold(ws, id, &he) < 0)
            return tx_err(err, he.code, "transaction %s: %s; and it cannot be held apart: %s", name, e.msg,
                          he.msg);
        if (held && !held->code) {
            *held = e; /* with its remedy */
            tx_err_ctx(held, "transaction %s", name);
        }
        if (txfd >= 0)
            write_note(txfd, TX_STUCK, e.msg);
        return 2;
    }
    if (r > 0) {
        /* Rolled back from its pre-images (journal.c, I8): back in S1,
         * ended as any dead transaction without a journal is. */
        txbox_error be = {0};
        if (txfd >= 0 && commit_end_dead(ws, id, txfd,
                                         "rolled_back (its commit could not be "
                                         "completed: restored from the pre-images)",
                                         &be) < 0) {
            if (failed)
                json_array_append_new(failed, json_pack("{s:s,s:s}", "tx", name, "error", be.msg));
            return tx_err(err, be.code, "transaction %s: %s", name, be.msg);
        }
        ws_end_tx(ws, id, -1);
        return 1;
    }
    if (txfd >= 0) {
        commit_tidy_dead(txfd);
        (void)saga_recovered(txfd, NULL); /* best effort, as the outcome */
        /* one its run wrote stays: a journal left open on purpose
         * (JOURNAL_LEAVE_OPEN) was answered "committed" */
        if (exists_at(txfd, "outcome") <= 0)
            tx_write_outcome(txfd, "committed (completed by recovery)");
    }
    ws_end_tx(ws, id, -1);
    return 0;
}

static int roll_forward(txbox_ws *ws, const uint64_t *ids, size_t nids, bool wait, bool retry,
                        json_t *rolled_forward, json_t *rolled_back, json_t *failed, txbox_error *held,
                        txbox_error *err)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < nids; i++) {
        uint64_t id = ids[i];
        char name[32];
        snprintf(name, sizeof name, "%llu", (unsigned long long)id);
        /* With wait (the commit path, lock held): a journal whose owner
         * still holds its lock is one whose commit was interrupted and
         * whose process is going away (or whose forked children still hold
         * the lock for an instant): wait for it, never overtake it. */
        for (int ms = 0; !ws_tx_owner_dead(ws, id); ms += 10) {
            if (!wait)
                break;
            if (ms >= 60000) {
                rc = tx_err(err, EBUSY,
                            "transaction %s was interrupted after its commit point "
                            "but its process still holds it",
                            name);
                break;
            }
            usleep(10000);
        }
        if (rc < 0 || !ws_tx_owner_dead(ws, id))
            continue;
        /* Listed before the lock was taken: another process may have
         * finished it meanwhile. */
        if (faccessat(ws->jnld, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
            continue;
        if (!retry && commit_is_stuck(ws, id))
            continue; /* tried and held: for 'txbox recover' */
        int r = finish_one(ws, id, name, failed, held, err);
        if (r < 0)
            rc = -1;
        else if (r == 0 && rolled_forward)
            json_array_append_new(rolled_forward, json_string(name));
        else if (r == 1 && rolled_back)
            json_array_append_new(rolled_back, json_string(name));
    }
    return rc;
}

int commit_roll_forward(txbox_ws *ws, bool wait, bool retry, json_t *rolled_forward, json_t *rolled_back,
                        json_t *failed, txbox_error *held, txbox_error *err)
{
    uint64_t *ids;
    size_t n;
    if (ws_list_ids(ws->jnld, &ids, &n, err) < 0)
        return -1;
    int rc = roll_forward(ws, ids, n, wait, retry, rolled_forward, rolled_back, failed, held, err);
    free(ids);
    return rc;
}

int ws_roll_forward_locked(txbox_ws *ws, json_t *done, json_t *failed, txbox_error *err)
{
    return commit_roll_forward(ws, true, false, done, NULL, failed, NULL, err);
}
