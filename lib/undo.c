/* Undo and diff: what the retained pre-images (tx/ID/undo/N) are for.
 *
 * Undo of a committed transaction T is a new transaction U whose operations
 * are T's reversed, applied by the same commit protocol (journal_commit), so
 * it is crash-safe and logged like any commit:
 *
 *   T did                          U does
 *   REPLACE P (undo/N holds old)   REPLACE P by the old entry
 *   REPLACE P (nothing was there)  DELETE P
 *   DELETE P (undo/N holds old)    REPLACE P by the old entry
 *   META P (old -> new)            META P back to old (mode/owner only if
 *                                  T changed them; times unless a later
 *                                  transaction set them again; extended
 *                                  attributes if T changed them: the old set
 *                                  is in undo/N, staged on tx/U/upper/P)
 *
 * Staging (all under the workspace lock): U writes tx/U/staged (the list
 * of pre-images it takes, fsync'd), then renames each tx/T/undo/N to
 * tx/U/upper/P, then fsyncs both directories, then journal_commit(). Before
 * the commit point nothing of T's pre-images is lost: a failure renames
 * them back at once, and after a crash recovery does (undo_unstage() in
 * stage.c, called by txbox_recover for a dead transaction without a
 * journal). After the commit point the journal owns them: the apply
 * renames them into the workspace and moves T's after-images into
 * tx/U/undo/, so U can be undone in turn (a redo).
 *
 * Conflicts: every commit after T (by generation) whose write set overlaps
 * T's (ops_overlap: the same path, or one inside the other; two META on one
 * directory when both change mode/owner or both its attributes) makes the undo
 * refuse, naming the paths and transactions, unless forced. A later
 * transaction X and a later un-forced undo of X cancel out and are left out
 * of the check (so N transactions undo one by one in reverse order).
 *
 * gc, which drops retained pre-images, is in gc.c. */
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <sqlite3.h>

#include "fsops.h"
#include "result.h"
#include "safepath.h"
#include "stage.h"
#include "store.h"

#define DIFF_MAX_BYTES (16u << 20)

extern char **environ;

/* ---- the committed history ---- */

struct commit {
    uint64_t id, gen;
    struct tx_journal j;
    uint64_t undo_of; /* 0: not an undo */
    bool forced, cancelled;
};

struct history {
    struct commit *v;
    size_t n;
};

static void history_free(struct history *h)
{
    for (size_t i = 0; i < h->n; i++)
        journal_free(&h->v[i].j);
    free(h->v);
    memset(h, 0, sizeof *h);
}

/* The commit that made generation gen: its id and journal. */
static int load_commit(txbox_ws *ws, uint64_t gen, struct commit *c, txbox_error *err)
{
    memset(c, 0, sizeof *c);
    char gn[32], t[32];
    idname(gn, gen);
    ssize_t l = readlinkat(ws->cmtd, gn, t, sizeof t - 1);
    if (l < 0)
        return tx_errno(err, errno, "cannot read the record of generation %s", gn);
    t[l] = 0;
    if (!parse_u64(t, &c->id))
        return tx_err(err, EBADMSG, "the record of generation %s is damaged", gn);
    c->gen = gen;
    _cleanup_close_ int tfd = open_dir_at(ws->txd, t);
    if (tfd < 0)
        return tx_errno(err, errno, "transaction %s (generation %s) is gone", t, gn);
    if (journal_load(tfd, "journal", &c->j, err) < 0)
        return tx_err_ctx(err, "transaction %s", t);
    json_t *in = c->j.info ? json_loads(c->j.info, 0, NULL) : NULL;
    const char *uo = json_string_value(json_object_get(in, "undo_of"));
    if (uo && !parse_u64(uo, &c->undo_of))
        c->undo_of = 0;
    c->forced = json_is_true(json_object_get(in, "forced"));
    json_decref(in);
    return 0;
}

/* The commits of generations from..to (inclusive). */
static int load_history(txbox_ws *ws, uint64_t from, uint64_t to, struct history *h,
                        txbox_error *err)
{
    memset(h, 0, sizeof *h);
    if (to < from)
        return 0;
    h->v = xcalloc((size_t)(to - from + 1), sizeof *h->v);
    for (uint64_t g = from; g <= to; g++) {
        if (load_commit(ws, g, &h->v[h->n], err) < 0) {
            history_free(h);
            return -1;
        }
        h->n++;
    }
    return 0;
}

/* Marks each un-forced undo and the transaction it undid, both in h. */
static void cancel_pairs(struct history *h)
{
    for (size_t i = h->n; i-- > 0;) {
        struct commit *u = &h->v[i];
        if (!u->undo_of || u->forced || u->cancelled)
            continue;
        for (size_t k = 0; k < i; k++)
            if (h->v[k].id == u->undo_of && !h->v[k].cancelled) {
                h->v[k].cancelled = u->cancelled = true;
                break;
            }
    }
}

/* ---- undo ---- */

struct clash {
    json_t *list; /* [{path, tx}] */
};

static void clash_add(json_t *list, const char *path, uint64_t tx, const char *why)
{
    char t[32];
    idname(t, tx);
    json_array_append_new(list, json_pack("{s:o,s:s?,s:s?}", "path",
                                          json_text(*path ? path : ".", *path ? strlen(path) : 1, true),
                                          "tx", tx ? t : NULL, "why", why));
}

static bool changes_owner_or_mode(const struct tx_op *o)
{
    return o->nw.mode != o->old.mode || o->nw.uid != o->old.uid || o->nw.gid != o->old.gid;
}

/* Does later operation x collide with T's operation t? */
static bool op_clash(const struct tx_op *t, const struct tx_op *x)
{
    /* META: had_old = the extended attributes changed */
    if (t->kind == OP_META && x->kind == OP_META)
        return !strcmp(t->path, x->path) &&
               ((changes_owner_or_mode(t) && changes_owner_or_mode(x)) || (t->had_old && x->had_old));
    struct tx_ops a = {.v = (struct tx_op *)t, .n = 1, .cap = 1}, b = {.v = (struct tx_op *)x, .n = 1, .cap = 1};
    const char *which;
    return ops_overlap(&a, &b, &which);
}

static bool later_sets_meta(const struct history *later, const char *path)
{
    for (size_t i = 0; i < later->n; i++) {
        if (later->v[i].cancelled)
            continue;
        for (size_t k = 0; k < later->v[i].j.ops.n; k++) {
            const struct tx_op *x = &later->v[i].j.ops.v[k];
            if (x->kind == OP_META && !strcmp(x->path, path))
                return true;
        }
    }
    return false;
}

/* The reversed operations of T, checked against the workspace as it is
 * now (lock held). What cannot apply any more (its directory is gone) is a
 * clash, or with force, skipped. */
static int build_ops(txbox_ws *ws, int tundo, const struct tx_journal *t, const struct history *later,
                     bool force, struct tx_ops *ops, struct undo_plan *plan, json_t *clashes,
                     json_t *skipped, txbox_error *err)
{
    for (size_t i = 0; i < t->ops.n; i++) {
        const struct tx_op *o = &t->ops.v[i];
        const char *disp = *o->path ? o->path : ".";
        if (o->kind == OP_META) {
            /* O_PATH: T may have left it without read permission */
            _cleanup_close_ int d = safe_openat(ws->fd, o->path, O_PATH | O_DIRECTORY, 0);
            struct stat st;
            if (d < 0 || fstat(d, &st) < 0) {
                clash_add(force ? skipped : clashes, o->path, 0, "the directory is gone");
                continue;
            }
            char un[32];
            idname(un, i);
            struct stat xs;
            bool xattrs = o->had_old && fstatat(tundo, un, &xs, AT_SYMLINK_NOFOLLOW) == 0 &&
                          S_ISDIR(xs.st_mode);
            if (o->had_old && !xattrs) {
                clash_add(force ? skipped : clashes, o->path, 0,
                          "its old extended attributes were not kept");
                if (!force)
                    continue;
            }
            struct tx_op *u = op_add(ops, OP_META, o->path);
            u->had_old = xattrs; /* they come back from tx/T/undo/N (stage) */
            meta_of(&st, &u->old);
            u->nw = u->old;
            if (changes_owner_or_mode(o)) {
                u->nw.mode = o->old.mode;
                u->nw.uid = o->old.uid;
                u->nw.gid = o->old.gid;
            }
            if (!later_sets_meta(later, o->path)) {
                u->nw.atime_s = o->old.atime_s;
                u->nw.atime_ns = o->old.atime_ns;
                u->nw.mtime_s = o->old.mtime_s;
                u->nw.mtime_ns = o->old.mtime_ns;
            }
            u->old_dir = u->new_dir = 1;
            continue;
        }
        const char *base = NULL;
        _cleanup_close_ int wp = safe_open_parent(ws->fd, o->path, &base);
        if (wp < 0) {
            clash_add(force ? skipped : clashes, o->path, 0, "its directory is gone");
            continue;
        }
        struct stat cur, pre;
        bool have_cur = fstatat(wp, base, &cur, AT_SYMLINK_NOFOLLOW) == 0;
        /* Not known (T left the directory without search permission): the
         * apply moves aside whatever is there, and deletes only what is. */
        bool unknown = !have_cur && errno != ENOENT;
        char un[32];
        idname(un, i);
        if (fstatat(tundo, un, &pre, AT_SYMLINK_NOFOLLOW) == 0) {
            struct tx_op *u = op_add(ops, OP_REPLACE, o->path);
            u->had_old = have_cur;
            u->old_dir = have_cur && S_ISDIR(cur.st_mode);
            u->new_dir = S_ISDIR(pre.st_mode);
            if (o->old.mode & S_IFMT)
                u->nw = o->old;
            else
                meta_entry(&pre, &u->nw);
            if (have_cur)
                meta_entry(&cur, &u->old);
            plan->v = xrealloc(plan->v, (plan->n + 1) * sizeof *plan->v);
            plan->v[plan->n++] = (struct undo_stage){i, xstrdup(o->path)};
        } else if (errno != ENOENT) {
            return tx_errno(err, errno, "cannot read the pre-image of %s", disp);
        } else if (o->kind == OP_REPLACE && (have_cur || unknown)) {
            /* T added it: remove it. */
            struct tx_op *u = op_add(ops, OP_DELETE, o->path);
            u->old_dir = have_cur && S_ISDIR(cur.st_mode);
            if (have_cur)
                meta_entry(&cur, &u->old);
        }
        /* DELETE of nothing: nothing to give back. */
    }
    return 0;
}

/* The oldest generation from which every commit up to gen still has its
 * record: compaction (compact.c) archives the records of old commits, never
 * one at or after a commit whose pre-images are retained, so no commit
 * before that one can be undone. */
static uint64_t kept_from(txbox_ws *ws, uint64_t gen)
{
    uint64_t g = gen;
    for (; g > 1; g--) {
        char gn[32], t[32];
        idname(gn, g - 1);
        ssize_t l = readlinkat(ws->cmtd, gn, t, sizeof t - 1);
        if (l <= 0)
            break;
        t[l] = 0;
        _cleanup_close_ int tfd = open_dir_at(ws->txd, t);
        if (tfd < 0 || !exists_at(tfd, "journal"))
            break;
    }
    return g;
}

/* The latest committed transaction that is not an undo and not undone. */
static int default_target(txbox_ws *ws, uint64_t gen, uint64_t *id, txbox_error *err)
{
    struct history h;
    if (load_history(ws, gen ? kept_from(ws, gen) : 1, gen, &h, err) < 0)
        return -1;
    cancel_pairs(&h);
    int rc = 1;
    for (size_t i = h.n; i-- > 0;) {
        const struct commit *c = &h.v[i];
        bool undone = false;
        for (size_t k = i + 1; k < h.n; k++)
            if (h.v[k].undo_of == c->id)
                undone = true;
        if (c->cancelled || c->undo_of || undone)
            continue;
        *id = c->id;
        rc = 0;
        break;
    }
    history_free(&h);
    if (rc)
        return tx_err(err, ENOENT, "nothing to undo: no committed transaction that is not "
                      "undone already");
    return 0;
}

/* Why transaction id has no commit record, in words. */
static int not_undoable(txbox_ws *ws, const char *tn, txbox_error *err)
{
    _cleanup_close_ int tfd = open_dir_at(ws->txd, tn);
    if (tfd < 0) { /* never made, or archived (compact.c): the log says which */
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        _cleanup_free_ char *oc = NULL;
        uint64_t id = 0;
        if (parse_u64(tn, &id) && store_shared(ws, &db, NULL) == 0 &&
            sqlite3_prepare_v2(db, "SELECT outcome FROM tx WHERE id=?1", -1, &st, NULL) == SQLITE_OK) {
            sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
            if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
                oc = xstrdup((const char *)sqlite3_column_text(st, 0));
        }
        sqlite3_finalize(st);
        if (!oc)
            return tx_err(err, ENOENT, "no transaction %s in this workspace", tn);
        if (!strcmp(oc, "committed"))
            return tx_err(err, EINVAL, "transaction %s is too old to undo: its pre-images were "
                          "pruned (retention, 'txbox gc') and its record archived", tn);
        return tx_err(err, EINVAL, "transaction %s was not committed (%s): nothing to undo", tn, oc);
    }
    _cleanup_free_ char *oc = NULL;
    if (read_file_at(tfd, "outcome", 256, &oc, NULL, NULL) == 0) {
        oc[strcspn(oc, "\n")] = 0;
        if (!strncmp(oc, "committed", 9))
            return tx_err(err, EINVAL, "transaction %s changed nothing in the workspace (or was "
                          "committed by the copy backend, which keeps no pre-images): nothing "
                          "to undo", tn);
        return tx_err(err, EINVAL, "transaction %s was not committed (%s): nothing to undo", tn, oc);
    }
    return tx_err(err, EINVAL, "transaction %s has no commit record: nothing to undo", tn);
}

struct undo_ctx {
    txbox_ws *ws;
    uint64_t tid, uid, gen;
    int txfd, activefd, tfd, tundo;
    bool force;
    struct tx_journal t;
    struct history later;
    json_t *clashes, *skipped;
};

static char *undo_info(struct undo_ctx *c, const char *outcome, json_t *changes, double started)
{
    char ts[32], us[32];
    idname(ts, c->tid);
    idname(us, c->uid);
    _cleanup_free_ char *cmd = xasprintf("txbox undo %s%s", ts, c->force ? " --force" : "");
    json_t *o = json_pack("{s:s,s:n,s:n,s:s,s:s,s:i,s:n,s:o,s:s,s:b,s:O,s:O,s:s,s:s,s:o,s:s,"
                          "s:f,s:{}}",
                          "tx", us, "verdict", "rule", "reason", "undo of a committed transaction",
                          "outcome", outcome, "exit_code", !strcmp(outcome, "committed") ? 0 : 123,
                          "signal", "changes", changes ? changes : json_object(), "undo_of", ts,
                          "forced", c->force, "conflicts", c->clashes, "skipped", c->skipped,
                          "command", cmd, "cwd", ".", "workspace",
                          json_text(c->ws->path, strlen(c->ws->path), true), "backend", "undo",
                          "started", started, "protections");
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(o);
    return s;
}

static int undo_locked(struct undo_ctx *c, const txbox_undo_opts *opts, char **json,
                       txbox_error *err)
{
    txbox_ws *ws = c->ws;
    double started = wall_time();
    uint64_t t0 = now_ns();
    if (ws_read_gen(ws, &c->gen, err) < 0)
        return -1;
    if (opts->tx) {
        if (parse_txid(opts->tx, &c->tid, err) < 0)
            return -1;
    } else if (default_target(ws, c->gen, &c->tid, err) < 0) {
        return -1;
    }
    char tn[32];
    idname(tn, c->tid);
    c->tfd = open_dir_at(ws->txd, tn);
    if (c->tfd < 0 || !exists_at(c->tfd, "journal"))
        return not_undoable(ws, tn, err);
    if (journal_load(c->tfd, "journal", &c->t, err) < 0)
        return tx_err_ctx(err, "transaction %s cannot be undone", tn);
    struct commit chk;
    if (c->t.id != c->tid || c->t.gen == 0 || c->t.gen > c->gen ||
        load_commit(ws, c->t.gen, &chk, NULL) < 0)
        return tx_err(err, EBADMSG, "transaction %s has no valid commit record", tn);
    bool ok = chk.id == c->tid;
    journal_free(&chk.j);
    if (!ok)
        return tx_err(err, EBADMSG, "transaction %s has no valid commit record", tn);
    c->tundo = open_dir_at(c->tfd, "undo");
    if (c->tundo < 0)
        return tx_err(err, ENOENT, "the pre-images of transaction %s were pruned by 'txbox gc': "
                      "it can no longer be undone", tn);
    if (load_history(ws, c->t.gen + 1, c->gen, &c->later, err) < 0)
        return tx_err_ctx(err, "cannot check the transactions after %s", tn);
    cancel_pairs(&c->later);
    for (size_t i = 0; i < c->later.n; i++)
        if (c->later.v[i].undo_of == c->tid) {
            char un[32];
            idname(un, c->later.v[i].id);
            return tx_err(err, EALREADY, "transaction %s was undone already (by transaction %s%s)",
                          tn, un, c->later.v[i].cancelled ? ", itself undone since: undo that one "
                          "again instead" : "");
        }
    /* Conflicts with the later transactions. */
    for (size_t i = 0; i < c->t.ops.n; i++) {
        const struct tx_op *o = &c->t.ops.v[i];
        for (size_t k = 0; k < c->later.n; k++) {
            const struct commit *x = &c->later.v[k];
            if (x->cancelled)
                continue;
            bool hit = false;
            for (size_t m = 0; m < x->j.ops.n && !hit; m++)
                hit = op_clash(o, &x->j.ops.v[m]);
            if (hit) {
                clash_add(c->clashes, o->path, x->id, "changed later");
                break;
            }
        }
    }
    if (ws_new_tx(ws, &c->uid, &c->txfd, &c->activefd, NULL, err) < 0)
        return -1;
    struct tx_ops ops = {0};
    struct undo_plan plan = {.from = c->tid};
    int rc = 0;
    if (json_array_size(c->clashes) == 0 || c->force)
        rc = build_ops(ws, c->tundo, &c->t, &c->later, c->force, &ops, &plan, c->clashes,
                       c->skipped, err);
    char us[32];
    idname(us, c->uid);
    if (rc == 0 && json_array_size(c->clashes) && !c->force) {
        /* Refused: recorded as a conflict; nothing moved. */
        _cleanup_free_ char *info = undo_info(c, "conflict", NULL, started);
        txbox_error le = {0};
        json_t *res = json_loads(info, 0, NULL);
        if (store_log(ws, c->uid, "conflict", info, NULL, c->txfd, &le) < 0)
            json_object_set_new(res, "log_error", json_string(le.msg));
        tx_write_outcome(c->txfd, "conflict");
        *json = json_dumps(res, JSON_COMPACT | JSON_REAL_PRECISION(17));
        json_decref(res);
        ops_free(&ops);
        undo_plan_free(&plan);
        return 1;
    }
    if (rc == 0 && ops.n == 0)
        rc = tx_err(err, EINVAL, "transaction %s: nothing left to undo", tn);
    bool staged = false, passed = false;
    _cleanup_free_ char *info = NULL;
    if (rc == 0) {
        fs_fault_arm();
        rc = undo_plan_write(c->txfd, &plan, &staged, err);
        if (rc == 0)
            rc = undo_stage(c->txfd, c->tundo, &c->t, &plan, &ops, err);
        json_t *changes = NULL;
        if (rc == 0) {
            _cleanup_close_ int upper = open_dir_at(c->txfd, "upper");
            changes = ops_changes(upper, ws->fd, &ops, 10000);
            info = undo_info(c, "committed", changes, started);
        }
        uint64_t gen = 0;
        if (rc == 0) {
            /* Timed like a run: the log computes duration up to the commit. */
            json_t *in = json_loads(info, 0, NULL);
            json_object_set_new(in, "command_ms", json_real(0));
            json_object_set_new(in, "duration_ms", json_real((double)(now_ns() - t0) / 1e6));
            free(info);
            info = json_dumps(in, JSON_COMPACT | JSON_REAL_PRECISION(17));
            json_decref(in);
            rc = journal_commit(ws, c->uid, c->txfd, c->gen, &ops, info, NULL, &gen, err);
            if (rc < 0)
                passed = faccessat(ws->jnld, us, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
        }
        if (rc == 0) {
            json_t *res = json_loads(info, 0, NULL);
            json_object_set_new(res, "gen", json_integer((json_int_t)gen));
            json_object_set_new(res, "duration_ms", json_real((double)(now_ns() - t0) / 1e6));
            *json = json_dumps(res, JSON_COMPACT | JSON_REAL_PRECISION(17));
            json_decref(res);
        }
    }
    if (rc < 0 && passed) {
        /* Past the commit point: recovery finishes it (I6). Release the
         * owner lock without removing it, so the next command does. */
        close(c->activefd);
        c->activefd = -1;
        fs_fault_disarm();
        ops_free(&ops);
        undo_plan_free(&plan);
        return tx_err_ctx(err, "undo interrupted after its commit point (run 'txbox recover')");
    }
    if (rc < 0 && staged) {
        txbox_error ue = {0};
        if (undo_unstage_plan(ws, c->txfd, &plan, &ue) < 0) {
            /* Leave it to recovery, which retries the same. */
            close(c->activefd);
            c->activefd = -1;
            tx_err_ctx(err, "and the pre-images could not be put back yet (%s; run 'txbox "
                       "recover')", ue.msg);
        }
    }
    fs_fault_disarm();
    if (rc == 0)
        (void)unlinkat(c->txfd, STAGED, 0);
    if (c->activefd >= 0) {
        (void)tree_remove(c->txfd, "upper");
        tx_write_outcome(c->txfd, rc == 0 ? "committed" : "failed");
    }
    ops_free(&ops);
    undo_plan_free(&plan);
    return rc;
}

int txbox_undo(txbox_ws *ws, const txbox_undo_opts *opts, char **json, txbox_error *err)
{
    *json = NULL;
    if (opts->tx) {
        uint64_t id;
        if (parse_txid(opts->tx, &id, err) < 0)
            return -1;
    }
    int lockfd = -1;
    if (ws_lock(ws, &lockfd, err) < 0)
        return -1;
    struct undo_ctx c = {.ws = ws, .txfd = -1, .activefd = -1, .tfd = -1, .tundo = -1,
                         .force = !!opts->force, .clashes = json_array(), .skipped = json_array()};
    int rc = ws_roll_forward_locked(ws, NULL, NULL, err);
    if (rc < 0)
        tx_err_ctx(err, "recovery");
    else
        rc = undo_locked(&c, opts, json, err);
    if (c.txfd >= 0)
        close(c.txfd);
    if (c.uid && c.activefd >= 0)
        ws_end_tx(ws, c.uid, c.activefd);
    if (c.tfd >= 0)
        close(c.tfd);
    if (c.tundo >= 0)
        close(c.tundo);
    journal_free(&c.t);
    history_free(&c.later);
    json_decref(c.clashes);
    json_decref(c.skipped);
    ws_unlock(lockfd);
    return rc;
}

/* ---- diff ---- */

struct image {
    bool found;
    char *data; /* file contents or symlink target */
    size_t len;
};

/* Reads the entry at dirfd/rel (no symlinks followed on the way) if its
 * type and hash are what the log says. */
static bool read_image(int dirfd, const char *rel, char type, const char *hash, struct image *im)
{
    const char *base = NULL;
    _cleanup_close_ int pd = *rel ? safe_open_parent(dirfd, rel, &base) : -1;
    if (pd < 0)
        return false;
    struct stat st;
    if (fstatat(pd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return false;
    if (type == 'l' && S_ISLNK(st.st_mode)) {
        char t[PATH_MAX];
        ssize_t n = readlinkat(pd, base, t, sizeof t);
        if (n < 0)
            return false;
        im->data = xmalloc((size_t)n + 1);
        memcpy(im->data, t, (size_t)n);
        im->data[n] = 0;
        im->len = (size_t)n;
    } else if (type == 'f' && S_ISREG(st.st_mode) && (uint64_t)st.st_size <= DIFF_MAX_BYTES) {
        _cleanup_close_ int fd = openat(pd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
            return false;
        im->data = xmalloc((size_t)st.st_size + 1);
        ssize_t n = read_all(fd, im->data, (size_t)st.st_size + 1);
        if (n != st.st_size) {
            free(im->data);
            im->data = NULL;
            return false;
        }
        im->data[n] = 0;
        im->len = (size_t)n;
    } else {
        return false;
    }
    /* Verify against the log. */
    char hex[65];
    hash_bytes_hex(im->data, im->len, hex);
    if (hash && strcmp(hex, hash)) {
        free(im->data);
        im->data = NULL;
        return false;
    }
    im->found = true;
    return true;
}

struct dctx {
    txbox_ws *ws;
    int tundo;
    struct history later;
    FILE *out;
};

static char *after_prefix(const char *path, const char *q)
{
    size_t l = strlen(q);
    if (!*q)
        return xstrdup(path);
    if (strncmp(path, q, l) || (path[l] && path[l] != '/'))
        return NULL;
    return xstrdup(path[l] ? path + l + 1 : "");
}

/* Finds the content that path had with the given hash: in T's pre-images
 * (before_rel), then in the pre-images of each later commit that replaced
 * path or a directory above it, then in the workspace. */
static void locate(struct dctx *d, const char *path, char type, const char *hash,
                   const char *before_rel, struct image *im)
{
    memset(im, 0, sizeof *im);
    if (before_rel && d->tundo >= 0 && read_image(d->tundo, before_rel, type, hash, im))
        return;
    for (size_t i = 0; i < d->later.n; i++) {
        const struct commit *x = &d->later.v[i];
        char xn[32];
        idname(xn, x->id);
        _cleanup_close_ int xfd = open_dir_at(d->ws->txd, xn);
        _cleanup_close_ int xu = xfd >= 0 ? open_dir_at(xfd, "undo") : -1;
        if (xu < 0)
            continue;
        for (size_t m = 0; m < x->j.ops.n; m++) {
            const struct tx_op *o = &x->j.ops.v[m];
            if (o->kind == OP_META)
                continue;
            _cleanup_free_ char *rest = after_prefix(path, o->path);
            if (!rest)
                continue;
            _cleanup_free_ char *rel = *rest ? xasprintf("%zu/%s", m, rest) : xasprintf("%zu", m);
            if (read_image(xu, rel, type, hash, im))
                return;
        }
    }
    (void)read_image(d->ws->fd, path, type, hash, im);
}

static bool is_binary(const struct image *im)
{
    return memchr(im->data, 0, im->len < 8000 ? im->len : 8000) != NULL;
}

static int memfd_of(const struct image *im)
{
    int fd = memfd_create("txbox-diff", 0); /* inherited by diff(1) */
    if (fd < 0)
        return -1;
    if (write_all(fd, im->data, im->len) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* diff -u of two images (NULL: /dev/null) with the given labels. */
static int run_diff(FILE *out, const struct image *a, const struct image *b, const char *la,
                    const char *lb, txbox_error *err)
{
    int fa = a ? memfd_of(a) : -1, fb = b ? memfd_of(b) : -1;
    char pa[64] = "/dev/null", pb[64] = "/dev/null";
    if ((a && fa < 0) || (b && fb < 0)) {
        if (fa >= 0)
            close(fa);
        if (fb >= 0)
            close(fb);
        return tx_errno(err, errno, "cannot prepare the diff");
    }
    if (a)
        snprintf(pa, sizeof pa, "/proc/self/fd/%d", fa);
    if (b)
        snprintf(pb, sizeof pb, "/proc/self/fd/%d", fb);
    char *argv[] = {(char *)"diff", (char *)"-u", (char *)"--label", (char *)la, (char *)"--label",
                    (char *)lb, pa, pb, NULL};
    fflush(out);
    posix_spawn_file_actions_t fa_;
    posix_spawn_file_actions_init(&fa_);
    if (fileno(out) != 1)
        posix_spawn_file_actions_adddup2(&fa_, fileno(out), 1);
    pid_t pid;
    int rc = posix_spawnp(&pid, "diff", &fa_, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa_);
    if (fa >= 0)
        close(fa);
    if (fb >= 0)
        close(fb);
    if (rc != 0)
        return tx_errno(err, rc, "cannot run diff(1) (Debian package diffutils)");
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return tx_errno(err, errno, "waitpid");
    if (!WIFEXITED(st) || WEXITSTATUS(st) > 1)
        return tx_err(err, EIO, "diff(1) failed");
    return 0;
}

int txbox_diff_text(FILE *out, const char *a, size_t alen, const char *b, size_t blen,
                    const char *la, const char *lb, txbox_error *err)
{
    struct image ia = {.found = true, .data = (char *)a, .len = alen};
    struct image ib = {.found = true, .data = (char *)b, .len = blen};
    return run_diff(out, a ? &ia : NULL, b ? &ib : NULL, a ? la : "/dev/null", b ? lb : "/dev/null",
                    err);
}

static const char *type_word(char t)
{
    switch (t) {
    case 'f':
        return "file";
    case 'd':
        return "directory";
    case 'l':
        return "symlink";
    case 'p':
        return "fifo";
    case 's':
        return "socket";
    default:
        return "entry";
    }
}

struct drow {
    char *path, *kind, *before_rel, *hb, *ha;
    char tb, ta;
    long long sb, sa;
    int mb, ma;
};

static void short_hash(char out[16], const char *h)
{
    snprintf(out, 16, "%.12s", h ? h : "-");
}

static int diff_row(struct dctx *d, const struct drow *r, txbox_error *err)
{
    FILE *out = d->out;
    json_t *pj = json_text(r->path, strlen(r->path), true);
    const char *p = json_string_value(pj);
    int rc = 0;
    _cleanup_free_ char *la = xasprintf("a/%s", p), *lb = xasprintf("b/%s", p);
    char t = r->ta ? r->ta : r->tb;
    fprintf(out, "diff --txbox a/%s b/%s\n", p, p);
    if (r->tb && r->ta && r->mb != r->ma)
        fprintf(out, "old mode %04o\nnew mode %04o\n", (unsigned)r->mb, (unsigned)r->ma);
    if (!r->tb)
        fprintf(out, "new %s mode %04o\n", type_word(r->ta), (unsigned)r->ma);
    else if (!r->ta)
        fprintf(out, "deleted %s mode %04o\n", type_word(r->tb), (unsigned)r->mb);
    if (t != 'f' && t != 'l') {
        json_decref(pj);
        return 0;
    }
    struct image a = {0}, b = {0};
    if (r->tb)
        locate(d, r->path, r->tb, r->hb, r->before_rel, &a);
    if (r->ta)
        locate(d, r->path, r->ta, r->ha, NULL, &b);
    bool missing = (r->tb && !a.found) || (r->ta && !b.found);
    if (t == 'l' && !missing) {
        if (a.found)
            fprintf(out, "-> %s (before)\n", a.data);
        if (b.found)
            fprintf(out, "-> %s (after)\n", b.data);
    } else if (missing || (a.found && is_binary(&a)) || (b.found && is_binary(&b))) {
        char h1[16], h2[16];
        short_hash(h1, r->hb);
        short_hash(h2, r->ha);
        fprintf(out, "%s %s: %lld -> %lld bytes, sha256 %s -> %s", missing ? "contents of" : "binary",
                p, r->tb ? r->sb : 0, r->ta ? r->sa : 0, h1, h2);
        if (missing)
            fprintf(out, " (%s no longer retained: pruned by gc, or changed outside txbox)",
                    r->tb && !a.found ? "the before-image is" : "the after-image is");
        fputc('\n', out);
    } else {
        rc = run_diff(out, r->tb ? &a : NULL, r->ta ? &b : NULL, r->tb ? la : "/dev/null",
                      r->ta ? lb : "/dev/null", err);
    }
    free(a.data);
    free(b.data);
    json_decref(pj);
    return rc;
}

static char *col_dup(sqlite3_stmt *st, int i)
{
    const void *v = sqlite3_column_blob(st, i);
    int n = sqlite3_column_bytes(st, i);
    if (!v)
        return NULL;
    char *s = xmalloc((size_t)n + 1);
    memcpy(s, v, (size_t)n);
    s[n] = 0;
    return s;
}

static char col_type(sqlite3_stmt *st, int i)
{
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? (char)t[0] : 0;
}

/* The commits from gen on, as far as they are complete (no lock: a commit
 * in progress ends the list). */
static void load_later(txbox_ws *ws, uint64_t from, struct history *h)
{
    memset(h, 0, sizeof *h);
    uint64_t gen = 0;
    if (ws_read_gen(ws, &gen, NULL) < 0)
        return;
    for (uint64_t g = from; g <= gen; g++) {
        struct commit c;
        if (load_commit(ws, g, &c, NULL) < 0)
            continue; /* its record archived (compact.c): it has no pre-images */
        h->v = xrealloc(h->v, (h->n + 1) * sizeof *h->v);
        h->v[h->n++] = c;
    }
}

int txbox_diff(txbox_ws *ws, const char *tx, FILE *out, txbox_error *err)
{
    uint64_t id;
    sqlite3 *db;
    if (store_open_for(ws, tx, &id, &db, err) < 0)
        return -1;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT outcome, gen, changes_truncated FROM tx WHERE id=?1",
                                -1, &st, NULL);
    _cleanup_free_ char *outcome = NULL;
    sqlite3_int64 gen = 0;
    bool truncated = false;
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            outcome = col_dup(st, 0);
            gen = sqlite3_column_int64(st, 1);
            truncated = sqlite3_column_int(st, 2);
        }
    }
    sqlite3_finalize(st);
    st = NULL;
    if (rc != SQLITE_ROW) {
        store_close(db);
        if (rc == SQLITE_DONE)
            return tx_err(err, ENOENT, "transaction %s is not in the audit log", tx);
        return tx_err(err, EIO, "the audit log cannot be read");
    }
    if (!outcome || strcmp(outcome, "committed") || gen <= 0) {
        store_close(db);
        fprintf(out, "transaction %s: %s; it applied no change to the workspace\n", tx,
                outcome ? outcome : "?");
        return 0;
    }
    struct dctx d = {.ws = ws, .tundo = -1, .out = out};
    char tn[32];
    idname(tn, id);
    _cleanup_close_ int tfd = open_dir_at(ws->txd, tn);
    if (tfd >= 0)
        d.tundo = open_dir_at(tfd, "undo");
    load_later(ws, (uint64_t)gen + 1, &d.later);
    rc = sqlite3_prepare_v2(db, "SELECT path, kind, op, sub, type_before, type_after, size_before,"
                            " size_after, mode_before, mode_after, hash_before, hash_after"
                            " FROM change WHERE tx=?1 ORDER BY seq", -1, &st, NULL);
    int r = 0;
    if (rc == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
        while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            struct drow x = {0};
            x.path = col_dup(st, 0);
            x.kind = col_dup(st, 1);
            _cleanup_free_ char *sub = col_dup(st, 3);
            long long op = sqlite3_column_int64(st, 2);
            x.before_rel = sub && *sub ? xasprintf("%lld/%s", op, sub) : xasprintf("%lld", op);
            x.tb = col_type(st, 4);
            x.ta = col_type(st, 5);
            x.sb = sqlite3_column_int64(st, 6);
            x.sa = sqlite3_column_int64(st, 7);
            x.mb = sqlite3_column_int(st, 8);
            x.ma = sqlite3_column_int(st, 9);
            x.hb = col_dup(st, 10);
            x.ha = col_dup(st, 11);
            if (x.path && x.kind)
                r = diff_row(&d, &x, err);
            free(x.path);
            free(x.kind);
            free(x.before_rel);
            free(x.hb);
            free(x.ha);
        }
    }
    sqlite3_finalize(st);
    if (r == 0 && rc != SQLITE_DONE)
        r = tx_err(err, EIO, "the audit log cannot be read: %s", sqlite3_errmsg(db));
    if (r == 0 && truncated)
        fprintf(out, "(the write set was larger than the log keeps; the rest is not shown)\n");
    store_close(db);
    history_free(&d.later);
    if (d.tundo >= 0)
        close(d.tundo);
    return r;
}
