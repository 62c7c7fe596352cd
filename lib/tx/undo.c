/* Undo: what the retained pre-images (tx/ID/undo/N) are for (diff.c and
 * gc.c are their other users).
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
#include <sys/stat.h>

#include <sqlite3.h>

#include "fsops.h"
#include "history.h"
#include "result.h"
#include "safepath.h"
#include "stage.h"
#include "store.h"

/* ---- undo ---- */

struct clash {
    json_t *list; /* [{path, tx}] */
};

static void clash_add(json_t *list, const char *path, uint64_t tx, const char *why)
{
    char t[32];
    idname(t, tx);
    json_array_append_new(list, json_pack("{s:o,s:s?,s:s?}", "path",
                                          json_text(*path ? path : ".", *path ? strlen(path) : 1, true), "tx",
                                          tx ? t : NULL, "why", why));
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
    struct tx_ops a = {.v = (struct tx_op *)t, .n = 1, .cap = 1},
                  b = {.v = (struct tx_op *)x, .n = 1, .cap = 1};
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
                     bool force, struct tx_ops *ops, struct undo_plan *plan, json_t *clashes, json_t *skipped,
                     txbox_error *err)
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
            bool xattrs =
                o->had_old && fstatat(tundo, un, &xs, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(xs.st_mode);
            if (o->had_old && !xattrs) {
                clash_add(force ? skipped : clashes, o->path, 0, "its old extended attributes were not kept");
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
    if (history_load(ws, gen ? kept_from(ws, gen) : 1, gen, &h, err) < 0)
        return -1;
    history_cancel_pairs(&h);
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
        return tx_err(err, ENOENT,
                      "nothing to undo: no committed transaction that is not "
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
        if (!strcmp(oc, "committed")) {
            tx_err(err, EINVAL, "transaction %s is too old to undo: its pre-images were pruned", tn);
            tx_remedy(err, TXBOX_REMEDY_GC, NULL);
            return tx_err_more(err, " (retention) and its record archived");
        }
        return tx_err(err, EINVAL, "transaction %s was not committed (%s): nothing to undo", tn, oc);
    }
    _cleanup_free_ char *oc = NULL;
    if (read_file_at(tfd, "outcome", 256, &oc, NULL, NULL) == 0) {
        oc[strcspn(oc, "\n")] = 0;
        if (!strncmp(oc, "committed", 9))
            return tx_err(err, EINVAL,
                          "transaction %s changed nothing in the workspace (or was "
                          "committed by the copy backend, which keeps no pre-images): nothing "
                          "to undo",
                          tn);
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
                          "tx", us, "verdict", "rule", "reason", "undo of a committed transaction", "outcome",
                          outcome, "exit_code", !strcmp(outcome, "committed") ? 0 : 123, "signal", "changes",
                          changes ? changes : json_object(), "undo_of", ts, "forced", c->force, "conflicts",
                          c->clashes, "skipped", c->skipped, "command", cmd, "cwd", ".", "workspace",
                          json_text(c->ws->path, strlen(c->ws->path), true), "backend", "undo", "started",
                          started, "protections");
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(o);
    return s;
}

static int undo_locked(struct undo_ctx *c, const txbox_undo_opts *opts, char **json, txbox_error *err)
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
        history_load_commit(ws, c->t.gen, &chk, NULL) < 0)
        return tx_err(err, EBADMSG, "transaction %s has no valid commit record", tn);
    bool ok = chk.id == c->tid;
    journal_free(&chk.j);
    if (!ok)
        return tx_err(err, EBADMSG, "transaction %s has no valid commit record", tn);
    c->tundo = open_dir_at(c->tfd, "undo");
    if (c->tundo < 0) {
        tx_err(err, ENOENT, "the pre-images of transaction %s were pruned", tn);
        tx_remedy(err, TXBOX_REMEDY_GC, NULL);
        return tx_err_more(err, ": it can no longer be undone");
    }
    if (history_load(ws, c->t.gen + 1, c->gen, &c->later, err) < 0)
        return tx_err_ctx(err, "cannot check the transactions after %s", tn);
    history_cancel_pairs(&c->later);
    for (size_t i = 0; i < c->later.n; i++)
        if (c->later.v[i].undo_of == c->tid) {
            char un[32];
            idname(un, c->later.v[i].id);
            return tx_err(err, EALREADY, "transaction %s was undone already (by transaction %s%s)", tn, un,
                          c->later.v[i].cancelled ? ", itself undone since: undo that one "
                                                    "again instead"
                                                  : "");
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
        rc = build_ops(ws, c->tundo, &c->t, &c->later, c->force, &ops, &plan, c->clashes, c->skipped, err);
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
        tx_err_ctx(err, "undo interrupted after its commit point");
        return tx_remedy(err, TXBOX_REMEDY_RECOVER, NULL);
    }
    if (rc < 0 && staged) {
        txbox_error ue = {0};
        if (undo_unstage_plan(ws, c->txfd, &plan, &ue) < 0) {
            /* Leave it to recovery, which retries the same. */
            close(c->activefd);
            c->activefd = -1;
            tx_err_ctx(err, "and the pre-images could not be put back yet (%s)", ue.msg);
            tx_remedy(err, TXBOX_REMEDY_RECOVER, NULL);
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
    struct undo_ctx c = {.ws = ws,
                         .txfd = -1,
                         .activefd = -1,
                         .tfd = -1,
                         .tundo = -1,
                         .force = !!opts->force,
                         .clashes = json_array(),
                         .skipped = json_array()};
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
