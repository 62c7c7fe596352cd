/* Undo and restore: what the retained pre-images (tx/ID/undo/N) are for
 * (diff.c and gc.c are their other users).
 *
 * Undo of a committed transaction T is a new transaction U that reverts T
 * the way `git revert` does (revert.c): each path T changed comes back as
 * it was before T where no later transaction changed it, is merged with
 * the later changes where it can be, and otherwise is a conflict, which
 * refuses the whole undo (status 123, each path with why and which
 * transactions changed it; recorded as a `conflict` row) with nothing
 * touched, unless forced. Restore of paths from T is the same transaction
 * for chosen paths, exact: what T changed there, as before T, whatever
 * came since (said).
 *
 *   T did                          U does (no later change)
 *   REPLACE P (undo/N holds old)   REPLACE P by a copy of the old entry
 *   REPLACE P (nothing was there)  DELETE P
 *   DELETE P (undo/N holds old)    REPLACE P by a copy of the old entry
 *   META P (old -> new)            META P back to old (mode/owner unless
 *                                  changed since; times unless a later
 *                                  transaction set them again; extended
 *                                  attributes from undo/N, staged on
 *                                  tx/U/upper/P)
 *
 * Upper and commit (under the workspace lock, held from the plan to the
 * end, so that no gc prunes a pre-image the plan reads): U writes into
 * tx/U/upper copies of the pre-images and the merged files (the prepare
 * step of the one commit sequence, commit.c), then commits through it as
 * a run does (its prechecks, journal and record): crash-safe and
 * logged like any commit, and U can be undone in turn (a redo). The
 * pre-images are copied, not moved: tx/T/undo stays whole, the merge base
 * of the revert of an earlier transaction and of T again. Before the commit
 * point nothing of the workspace or of T's pre-images is touched; a crash
 * there leaves tx/U/upper to recovery, which discards it like a dead run's.
 *
 * gc, which drops retained pre-images, is in gc.c. */
#include <fcntl.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "commit.h"
#include "fsops.h"
#include "history.h"
#include "result.h"
#include "revert.h"
#include "safepath.h"
#include "stage.h"
#include "store.h"

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
        if (c->cancelled || c->undo_of || history_undone(&h, i + 1, c->id))
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
    bool force, restore;
    const char *const *paths; /* restore: normalized */
    size_t npaths;
    struct tx_journal t;
    struct history later;
    struct revert *plan;
    /* its commit, through the sequence (commit.c) */
    const char *tx;
    char **json;
    double started;
    uint64_t t0;
};

/* ---- the record ---- */

static char *command_of(const struct undo_ctx *c)
{
    char ts[32];
    idname(ts, c->tid);
    /* what was done, whoever asked (the CLI, an MCP client, the agent) */
    if (!c->restore)
        return xasprintf("undo of tx %s%s", ts, c->force ? ", later changes overwritten" : "");
    dbuf b;
    dbuf_init(&b, 0);
    dbuf_addstr(&b, "restore from before tx ");
    dbuf_addstr(&b, ts);
    dbuf_addstr(&b, ":");
    for (size_t i = 0; i < c->npaths; i++) {
        dbuf_addstr(&b, " ");
        dbuf_addstr(&b, *c->paths[i] ? c->paths[i] : ".");
    }
    char *s = xstrdup(dbuf_str(&b));
    dbuf_free(&b);
    return s;
}

static char *undo_info(struct undo_ctx *c, const char *outcome, json_t *changes, double started)
{
    char ts[32], us[32];
    idname(ts, c->tid);
    idname(us, c->uid);
    _cleanup_free_ char *cmd = command_of(c);
    json_t *o =
        json_pack("{s:s,s:n,s:n,s:s,s:s,s:i,s:n,s:o,s:s,s:s,s:s,s:s,s:o,s:f,s:{}}", "tx", us, "verdict",
                  "rule", "reason",
                  c->restore ? "restore of paths as they were before a committed transaction"
                             : "undo of a committed transaction",
                  "outcome", outcome, "exit_code", !strcmp(outcome, "committed") ? 0 : 123, "signal",
                  "changes", changes ? changes : json_object(), "revert", c->restore ? "restore" : "merge",
                  "command", cmd, "cwd", ".", "backend", c->restore ? "restore" : "undo", "workspace",
                  json_text(c->ws->path, strlen(c->ws->path), true), "started", started, "protections");
    if (c->restore) {
        json_t *paths = json_array();
        for (size_t i = 0; i < c->npaths; i++)
            json_array_append_new(paths, json_text(*c->paths[i] ? c->paths[i] : ".",
                                                   *c->paths[i] ? strlen(c->paths[i]) : 1, true));
        json_object_set_new(o, "restore_of", json_string(ts));
        json_object_set_new(o, "paths", paths);
    } else {
        json_object_set_new(o, "undo_of", json_string(ts));
        json_object_set_new(o, "forced", json_boolean(c->force));
        json_object_set(o, "conflicts", revert_conflicts(c->plan));
        json_object_set(o, "merged", revert_merged(c->plan));
    }
    json_object_set(o, "overwritten", revert_overwritten(c->plan));
    json_object_set(o, "skipped", revert_skipped(c->plan));
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(o);
    return s;
}

/* ---- the transaction reverted ---- */

/* T's commit record, its pre-images and every commit after it. */
static int load_target(struct undo_ctx *c, txbox_error *err)
{
    txbox_ws *ws = c->ws;
    char tn[32];
    idname(tn, c->tid);
    c->tfd = open_dir_at(ws->txd, tn);
    if (c->tfd < 0 || !exists_at(c->tfd, "journal"))
        return not_undoable(ws, tn, err);
    if (journal_load(c->tfd, "journal", &c->t, err) < 0)
        return tx_err_ctx(err, "transaction %s cannot be %s", tn, c->restore ? "restored from" : "undone");
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
        return tx_err_more(err, ": it can no longer be %s", c->restore ? "restored from" : "undone");
    }
    if (history_load(ws, c->t.gen + 1, c->gen, &c->later, err) < 0)
        return tx_err_ctx(err, "cannot read the transactions after %s", tn);
    history_cancel_pairs(&c->later);
    return 0;
}

static int undone_already(struct undo_ctx *c, txbox_error *err)
{
    for (size_t i = 0; i < c->later.n; i++)
        if (c->later.v[i].undo_of == c->tid && !history_undone(&c->later, i + 1, c->later.v[i].id)) {
            char tn[32], un[32];
            idname(tn, c->tid);
            idname(un, c->later.v[i].id);
            return tx_err(err, EALREADY, "transaction %s was undone already (by transaction %s)", tn, un);
        }
    return 0;
}

/* Refused: recorded as a conflict row; nothing moved. */
static int refuse(struct undo_ctx *c, double started, char **json)
{
    _cleanup_free_ char *info = undo_info(c, "conflict", NULL, started);
    txbox_error le = {0};
    json_t *res = json_loads(info, 0, NULL);
    if (store_log(c->ws, c->uid, "conflict", info, NULL, c->txfd, &le) < 0)
        json_object_set_new(res, "log_error", json_string(le.msg));
    tx_write_outcome(c->txfd, "conflict");
    *json = json_dumps(res, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(res);
    return 1;
}

/* ---- its commit, through the one sequence (commit.c) ---- */

/* Under the workspace lock (the sequence's prepare step): the target, its
 * revert planned against the later transactions, the new transaction, and
 * its upper written (ops and the data to make durable are the
 * sequence's). 1: refused, recorded as a conflict; nothing moved. */
static int undo_prepare(struct tx_commit *cm, txbox_error *err)
{
    struct undo_ctx *c = cm->h->ctx;
    txbox_ws *ws = c->ws;
    c->started = wall_time();
    c->t0 = now_ns();
    if (ws_read_gen(ws, &c->gen, err) < 0)
        return -1;
    if (c->tx) {
        if (parse_txid(c->tx, &c->tid, err) < 0)
            return -1;
    } else if (default_target(ws, c->gen, &c->tid, err) < 0) {
        return -1;
    }
    if (load_target(c, err) < 0 || (!c->restore && undone_already(c, err) < 0))
        return -1;
    struct revert_req rq = {.ws = ws,
                            .t = &c->t,
                            .tundo = c->tundo,
                            .later = &c->later,
                            .mode = c->restore ? REVERT_EXACT
                                    : c->force ? REVERT_FORCE
                                               : REVERT_MERGE,
                            .paths = c->paths,
                            .npaths = c->npaths};
    if (revert_plan(&rq, &c->plan, err) < 0)
        return -1;
    if (ws_new_tx(ws, &c->uid, &c->txfd, &c->activefd, NULL, err) < 0)
        return -1;
    cm->id = c->uid;
    cm->txfd = c->txfd;
    cm->base_gen = c->gen; /* the later transactions are planned against above */
    if (json_array_size(revert_conflicts(c->plan)) && !c->force)
        return refuse(c, c->started, c->json);
    char tn[32];
    idname(tn, c->tid);
    if (revert_empty(c->plan))
        return c->restore ? tx_err(err, EALREADY,
                                   "nothing to restore: the paths are as they were before transaction %s", tn)
                          : tx_err(err, EINVAL, "transaction %s: nothing left to undo", tn);
    if (fs_mkdirat(c->txfd, "upper", 0700) < 0 && errno != EEXIST)
        return tx_errno(err, errno, "cannot create the upper of the %s", c->restore ? "restore" : "undo");
    cm->upperfd = open_dir_at(c->txfd, "upper");
    if (cm->upperfd < 0)
        return tx_errno(err, errno, "cannot open the upper of the %s", c->restore ? "restore" : "undo");
    return revert_build(c->plan, cm->upperfd, &cm->ops, &cm->durable, err);
}

/* The record: timed like a run (the log computes duration up to the
 * commit). */
static char *undo_commit_info(struct tx_commit *cm)
{
    struct undo_ctx *c = cm->h->ctx;
    _cleanup_free_ char *info = undo_info(c, "committed", json_incref(cm->changes), c->started);
    json_t *in = json_loads(info, 0, NULL);
    json_object_set_new(in, "command_ms", json_real(0));
    json_object_set_new(in, "duration_ms", json_real((double)(now_ns() - c->t0) / 1e6));
    char *s = json_dumps(in, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(in);
    return s;
}

static void undo_finish(struct tx_commit *cm, int rc, txbox_error *err)
{
    struct undo_ctx *c = cm->h->ctx;
    if (rc == 0 && cm->end == COMMIT_APPLIED) {
        _cleanup_free_ char *info = undo_commit_info(cm);
        json_t *res = json_loads(info, 0, NULL);
        json_object_set_new(res, "gen", json_integer((json_int_t)cm->gen));
        json_object_set_new(res, "duration_ms", json_real((double)(now_ns() - c->t0) / 1e6));
        *c->json = json_dumps(res, JSON_COMPACT | JSON_REAL_PRECISION(17));
        json_decref(res);
        return;
    }
    if (rc < 0 && cm->passed) {
        /* Past the commit point: recovery finishes it (I6). Release the
         * owner lock without removing it, so the next command does. */
        close(c->activefd);
        c->activefd = -1;
        tx_err_ctx(err, "%s interrupted after its commit point", c->restore ? "restore" : "undo");
        tx_remedy(err, TXBOX_REMEDY_RECOVER, NULL);
    }
}

static int run_locked(struct undo_ctx *c, const char *tx, char **json, txbox_error *err)
{
    c->tx = tx;
    c->json = json;
    const struct commit_hooks hooks = {
        .prepare = undo_prepare, .info = undo_commit_info, .finish = undo_finish, .ctx = c};
    /* keeps_no_data: an undo or a restore brings back what the workspace
     * held before; the free-space floor does not refuse the way back. */
    struct tx_commit cm = {
        .ws = c->ws, .txfd = -1, .upperfd = -1, .keeps_no_data = true, .min_free = -1, .h = &hooks};
    int rc = commit_run(&cm, err);
    if (rc == 0 && cm.end == COMMIT_CONFLICT) /* a stuck transaction holds a path (journal.c, I9) */
        rc = tx_err(err, EBUSY, "%s is held by transaction %llu, which could not be finished", cm.clash,
                    (unsigned long long)cm.held_by);
    if (rc < 0 && cm.end == COMMIT_CONFLICT) {
        tx_remedy(err, TXBOX_REMEDY_RECOVER, NULL);
        tx_err_more(err, "; nothing was changed");
    }
    if (rc == 0 && cm.end == COMMIT_DECIDED)
        rc = 1;
    if (rc == 0 && cm.end == COMMIT_EMPTY) /* the revert changes nothing after all */
        rc = tx_err(err, EINVAL, "nothing left to %s", c->restore ? "restore" : "undo");
    if (cm.upperfd >= 0)
        close(cm.upperfd);
    if (rc < 0 && c->activefd >= 0) {
        (void)tree_remove(c->txfd, "upper");
        tx_write_outcome(c->txfd, "failed");
    } else if (rc == 0) {
        tx_write_outcome(c->txfd, "committed");
    }
    commit_free(&cm);
    if (c->txfd >= 0)
        close(c->txfd);
    if (c->uid && c->activefd >= 0)
        ws_end_tx(c->ws, c->uid, c->activefd);
    if (c->tfd >= 0)
        close(c->tfd);
    if (c->tundo >= 0)
        close(c->tundo);
    journal_free(&c->t);
    history_free(&c->later);
    revert_free(c->plan);
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
    struct undo_ctx c = {
        .ws = ws, .txfd = -1, .activefd = -1, .tfd = -1, .tundo = -1, .force = !!opts->force};
    return run_locked(&c, opts->tx, json, err);
}

/* ---- restore ---- */

/* A path as the user gave it, relative to the workspace: "a/./b//c/" is
 * a/b/c, an absolute path inside the workspace loses its prefix, "." is
 * the whole workspace (""); ".." and paths outside are refused. */
static int norm_path(txbox_ws *ws, const char *in, char **out, txbox_error *err)
{
    const char *p = in;
    size_t wl = strlen(ws->path);
    if (*p == '/') {
        if (strncmp(p, ws->path, wl) || (p[wl] && p[wl] != '/'))
            return tx_err(err, EINVAL, "%s is not inside the workspace %s", in, ws->path);
        p += wl;
    }
    dbuf b;
    dbuf_init(&b, 0);
    while (*p) {
        size_t n = strcspn(p, "/");
        if (n == 2 && !strncmp(p, "..", 2)) {
            dbuf_free(&b);
            return tx_err(err, EINVAL, "the path %s leaves the workspace (..)", in);
        }
        if (n && !(n == 1 && *p == '.')) {
            if (b.len)
                dbuf_add(&b, "/", 1);
            dbuf_add(&b, p, n);
        }
        p += n + (p[n] == '/');
    }
    *out = xstrdup(dbuf_str(&b));
    dbuf_free(&b);
    if (!**out && !*in)
        return tx_err(err, EINVAL, "an empty path (give . for everything the transaction changed)");
    return 0;
}

int txbox_restore(txbox_ws *ws, const txbox_restore_opts *opts, char **json, txbox_error *err)
{
    *json = NULL;
    uint64_t id;
    if (!opts->tx || parse_txid(opts->tx, &id, err) < 0)
        return opts->tx ? -1 : tx_err(err, EINVAL, "restore needs a transaction id");
    if (!opts->npaths)
        return tx_err(err, EINVAL, "restore needs at least one path");
    char **paths = xcalloc(opts->npaths + 1, sizeof *paths);
    int rc = 0;
    for (size_t i = 0; i < opts->npaths && rc == 0; i++)
        rc = norm_path(ws, opts->paths[i], &paths[i], err);
    if (rc == 0) {
        struct undo_ctx c = {.ws = ws,
                             .txfd = -1,
                             .activefd = -1,
                             .tfd = -1,
                             .tundo = -1,
                             .restore = true,
                             .paths = (const char *const *)paths,
                             .npaths = opts->npaths};
        rc = run_locked(&c, opts->tx, json, err);
    }
    for (size_t i = 0; i < opts->npaths; i++)
        free(paths[i]);
    free(paths);
    return rc;
}
