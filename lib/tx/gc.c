/* gc: what drops the retained pre-images (tx/ID/undo/N, undo.c), by hand
 * (txbox gc) and after every commit within the configured bounds
 * (history_autogc).
 *
 * What stays (struct retention, store.h): the pre-images of every commit
 * younger than max_age, of one that destroyed work (its row's losses)
 * younger than loss_age; of a later commit that changed a path such a
 * commit changed, while that one stays (pinned: its pre-image is the merge
 * base of that commit's undo, revert.c); then, within keep and max_bytes,
 * those of commits that destroyed work first, then the pinned ones, then
 * the rest, then the large ones (over a 64th of max_bytes), each newest
 * first. A prune: tx/ID/undo is renamed to
 * tx/ID/undo.pruned (atomic: an undo sees all of them or none), then
 * removed; the log row records when and how many bytes. gc and undo both
 * hold the workspace lock throughout, so no undo ever reads a pre-image
 * that gc is pruning. */
#include <fcntl.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "fsops.h"
#include "result.h"
#include "safepath.h"
#include "stage.h"
#include "store.h"

static bool exec_sql(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK;
}

static uint64_t tree_bytes(int at, const char *name, unsigned depth)
{
    struct stat st;
    if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    if (!S_ISDIR(st.st_mode))
        return S_ISREG(st.st_mode) || S_ISLNK(st.st_mode) ? (uint64_t)st.st_size : 0;
    if (depth > 4096)
        return 0;
    int fd = open_dir_at(at, name);
    if (fd < 0)
        return 0;
    _cleanup_dir_ DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return 0;
    }
    uint64_t sum = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            sum += tree_bytes(dirfd(d), de->d_name, depth + 1);
    return sum;
}

struct held {
    uint64_t id;
    const char *what; /* "undo" (pre-images) or "upper" (a conflict's kept-aside changes) */
    uint64_t bytes;
    double finished; /* when it ended (unix time; 0: unknown, taken as now) */
    bool losses;     /* it destroyed work */
    bool pinned;     /* kept for an older commit that destroyed work */
    double due;      /* when its bound by age runs out */
    const char *why; /* why it is pruned */
};

/* When transaction id ended and whether it destroyed work (from the log). */
static void row_of(sqlite3 *db, uint64_t id, struct held *h)
{
    sqlite3_stmt *st = NULL;
    _cleanup_free_ char *sql =
        xasprintf("SELECT coalesce(finished, started, 0), %s FROM tx WHERE id=?1", store_losses_sql(db));
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
        if (sqlite3_step(st) == SQLITE_ROW) {
            h->finished = sqlite3_column_double(st, 0);
            h->losses = sqlite3_column_int(st, 1) != 0;
        }
    }
    sqlite3_finalize(st);
}

static void list_held(txbox_ws *ws, sqlite3 *db, struct held **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    uint64_t *ids;
    size_t nids;
    if (ws_tx_ids(ws, &ids, &nids, NULL) < 0)
        return;
    for (size_t i = 0; i < nids; i++) { /* oldest first */
        uint64_t id = ids[i];
        if (!ws_tx_owner_dead(ws, id))
            continue; /* in flight: not ours to touch */
        char idn[32];
        idname(idn, id);
        _cleanup_close_ int tfd = open_dir_at(ws->txd, idn);
        if (tfd < 0)
            continue;
        if (exists_at(tfd, "undo.pruned") > 0)
            (void)tree_remove(tfd, "undo.pruned"); /* an interrupted gc */
        if (exists_at(tfd, "held") > 0)
            continue; /* held for review (effects.c): its upper is the pending change */
        if (exists_at(ws->jnld, idn) > 0)
            continue; /* recovery's: stuck (journal.c, I9), its upper still to apply */
        const char *what = exists_at(tfd, "journal") > 0 && exists_at(tfd, "undo") > 0     ? "undo"
                           : exists_at(tfd, "journal") <= 0 && exists_at(tfd, "upper") > 0 ? "upper"
                                                                                           : NULL;
        if (!what)
            continue;
        *out = xrealloc(*out, (*n + 1) * sizeof **out);
        struct held *h = &(*out)[(*n)++];
        *h = (struct held){.id = id, .what = what, .bytes = tree_bytes(tfd, what, 0)};
        row_of(db, id, h);
    }
    free(ids);
}

/* What retention after a commit (history_autogc) prunes: the commits whose
 * pre-images are kept, oldest first, read from the log's partial index
 * tx_retained (the rows the trigger counts) with their retained bytes,
 * instead of list_held's walk over every transaction directory ever made:
 * that walk, six system calls per transaction, made every eleventh commit
 * cost time in proportion to the whole history (40 ms at 1,400
 * transactions). The kept-aside changes of conflicts and the pre-images of
 * undone commits are txbox gc's (list_held). */
static void list_retained(txbox_ws *ws, sqlite3 *db, struct held **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t cap = 0;
    sqlite3_stmt *st = NULL;
    /* INDEXED BY: without it SQLite's planner scanned the whole table in id
     * order rather than sort the hundred rows of the index, and the first
     * read of the log in a process then took 10 ms at 858 transactions
     * (the log's pages), in proportion to the history. The plain query if
     * the index is missing. */
#define RETAINED_WHERE " WHERE outcome='committed' AND retained_bytes IS NOT NULL AND pruned IS NULL"
    const char *losses = store_losses_sql(db);
    _cleanup_free_ char *indexed =
        xasprintf("SELECT id, retained_bytes, coalesce(finished, started, 0), %s FROM "
                  "tx INDEXED BY tx_retained" RETAINED_WHERE " ORDER BY id",
                  losses);
    _cleanup_free_ char *plain = xasprintf(
        "SELECT id, retained_bytes, coalesce(finished, started, 0), %s FROM tx" RETAINED_WHERE " ORDER BY id",
        losses);
#undef RETAINED_WHERE
    if (sqlite3_prepare_v2(db, indexed, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        st = NULL;
        if (sqlite3_prepare_v2(db, plain, -1, &st, NULL) != SQLITE_OK) {
            sqlite3_finalize(st);
            return;
        }
    }
    while (sqlite3_step(st) == SQLITE_ROW) {
        sqlite3_int64 id = sqlite3_column_int64(st, 0), bytes = sqlite3_column_int64(st, 1);
        char idn[32];
        idname(idn, (uint64_t)id);
        _cleanup_close_ int tfd = id > 0 ? open_dir_at(ws->txd, idn) : -1;
        if (tfd < 0 || !ws_tx_owner_dead(ws, (uint64_t)id) || exists_at(tfd, "undo") <= 0 ||
            exists_at(tfd, "journal") <= 0)
            continue; /* in flight (not ours to touch), or nothing left to prune */
        if (*n == cap)
            *out = xrealloc(*out, (cap = cap ? 2 * cap : 64) * sizeof **out);
        (*out)[(*n)++] = (struct held){.id = (uint64_t)id,
                                       .what = "undo",
                                       .bytes = bytes > 0 ? (uint64_t)bytes : 0,
                                       .finished = sqlite3_column_double(st, 2),
                                       .losses = sqlite3_column_int(st, 3) != 0};
    }
    sqlite3_finalize(st);
}

/* Prunes the dropped entries of h, in three steps for all of them: each
 * undo/ renamed to undo.pruned (all or nothing for a later undo), the
 * renames made durable in one sync set; the log told, in one transaction
 * (the renamed ones even when a later rename failed); the trees moved to
 * the trash, for the next command's cleaner (ws.c), else removed here.
 * One by one, each was an fsync of its directory, an fsync of the log's
 * WAL and a removal that waits on the disk's discards: 70 ms for the
 * eleven of one retention pass. An interrupted prune leaves undo.pruned
 * trees, which list_held removes. */
static int prune_all(txbox_ws *ws, sqlite3 *db, const struct held *h, const bool *drop, size_t n,
                     txbox_error *err)
{
    _cleanup_syncset_ struct fs_syncset sync = {0};
    int *tfd = xmalloc((n + 1) * sizeof *tfd); /* >= 0: pruned, its tx/ID/ */
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        tfd[i] = -1;
        if (!drop[i] || rc < 0)
            continue;
        char tn[32];
        idname(tn, h[i].id);
        int fd = open_dir_at(ws->txd, tn);
        bool undo = !strcmp(h[i].what, "undo");
        if (fd < 0)
            rc = tx_errno(err, errno, "cannot open transaction %s", tn);
        else if (undo && fs_renameat(fd, "undo", fd, "undo.pruned", RENAME_NOREPLACE) < 0)
            rc = tx_errno(err, errno, "cannot prune the pre-images of transaction %s", tn);
        if (rc < 0) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        tfd[i] = fd;
        if (undo)
            fs_syncset_add(&sync, fd);
    }
    if (fs_syncset_sync(&sync, ws->txd) < 0 && rc == 0)
        rc = tx_errno(err, errno, "cannot prune the pre-images");
    sqlite3_stmt *st = NULL;
    bool txn = exec_sql(db, "BEGIN IMMEDIATE");
    if (sqlite3_prepare_v2(db, "UPDATE tx SET pruned=?1, pruned_bytes=?2 WHERE id=?3", -1, &st, NULL) ==
        SQLITE_OK) {
        for (size_t i = 0; i < n; i++) {
            if (tfd[i] < 0)
                continue;
            sqlite3_reset(st);
            sqlite3_bind_double(st, 1, wall_time());
            sqlite3_bind_int64(st, 2, (sqlite3_int64)h[i].bytes);
            sqlite3_bind_int64(st, 3, (sqlite3_int64)h[i].id);
            (void)sqlite3_step(st);
        }
    }
    sqlite3_finalize(st);
    if (txn && !exec_sql(db, "COMMIT"))
        (void)exec_sql(db, "ROLLBACK");
    for (size_t i = 0; i < n; i++) {
        if (tfd[i] < 0)
            continue;
        bool undo = !strcmp(h[i].what, "undo");
        const char *name = undo ? "undo.pruned" : "upper";
        char tn[32];
        idname(tn, h[i].id);
        if (ws_trash(ws, tfd[i], name, tn, WS_TRASH_GRANT_DIRS) < 0 && tree_remove(tfd[i], name) < 0 &&
            rc == 0)
            rc = tx_errno(err, errno, "cannot remove the %s of transaction %s",
                          undo ? "pre-images" : "kept-aside changes", tn);
        close(tfd[i]);
    }
    free(tfd);
    return rc;
}

static void set_setting(sqlite3 *db, const char *k, long long v)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO setting(key, value) VALUES(?1, ?2)", -1, &st, NULL) ==
        SQLITE_OK) {
        sqlite3_bind_text(st, 1, k, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, v);
        (void)sqlite3_step(st);
    }
    sqlite3_finalize(st);
}

static bool load_journal(txbox_ws *ws, uint64_t id, struct tx_journal *j)
{
    char tn[32];
    idname(tn, id);
    _cleanup_close_ int tfd = open_dir_at(ws->txd, tn);
    return tfd >= 0 && journal_load(tfd, "journal", j, NULL) == 0;
}

/* The later commits, dropped for their age, that changed a path of a kept
 * commit that destroyed work and outlived max_age: kept with it (pinned),
 * until that one goes. */
static void pin(txbox_ws *ws, struct held *h, size_t n, bool *drop, const struct retention *b, double now)
{
    for (size_t i = 0; i < n; i++) {
        if (drop[i] || !h[i].losses || strcmp(h[i].what, "undo") || h[i].finished + (double)b->max_age >= now)
            continue;
        struct tx_journal t;
        if (!load_journal(ws, h[i].id, &t))
            continue;
        for (size_t k = i + 1; k < n; k++) {
            if (!drop[k] || strcmp(h[k].what, "undo"))
                continue;
            struct tx_journal x;
            const char *which;
            if (!load_journal(ws, h[k].id, &x))
                continue;
            if (ops_overlap(&t.ops, &x.ops, &which)) {
                drop[k] = false;
                h[k].pinned = true;
                if (h[k].due < h[i].due)
                    h[k].due = h[i].due;
            }
            journal_free(&x);
        }
        journal_free(&t);
    }
}

/* Within keep and max_bytes: those that destroyed work first, then the
 * pinned ones, then the rest, then the large ones (over a 64th of
 * max_bytes: a build's rewritten outputs, which a rebuild makes again;
 * kept first, they would push out a week of edits in an hour), each newest
 * first; what does not fit goes. */
static void budget(struct held *h, size_t n, bool *drop, const struct retention *b, long *kept,
                   unsigned long long *kept_bytes)
{
    *kept = 0;
    *kept_bytes = 0;
    unsigned long long large = (unsigned long long)b->max_bytes / 64;
    for (int pass = 0; pass < 4; pass++)
        for (size_t i = n; i-- > 0;) {
            int cls = h[i].losses ? 0 : h[i].pinned ? 1 : h[i].bytes <= large ? 2 : 3;
            if (drop[i] || cls != pass)
                continue;
            if ((b->keep >= 0 && *kept >= b->keep) ||
                *kept_bytes + h[i].bytes > (unsigned long long)b->max_bytes) {
                drop[i] = true;
                h[i].why = b->keep >= 0 && *kept >= b->keep ? "over the count bound" : "over the size bound";
                continue;
            }
            ++*kept;
            *kept_bytes += h[i].bytes;
        }
}

/* What stays and what goes (the top of the file); *due: when the next
 * prune by age is due (0: nothing kept). */
static void decide(txbox_ws *ws, struct held *h, size_t n, bool *drop, const struct retention *b, long *kept,
                   unsigned long long *kept_bytes, double *due)
{
    double now = wall_time();
    for (size_t i = 0; i < n; i++) {
        double end = h[i].finished > 0 ? h[i].finished : now;
        h[i].due = end + (double)(h[i].losses ? b->loss_age : b->max_age);
        drop[i] = now >= h[i].due;
        h[i].why = drop[i]
                       ? (h[i].losses ? "older than the bound for destroyed work" : "older than the bound")
                       : NULL;
    }
    pin(ws, h, n, drop, b, now);
    budget(h, n, drop, b, kept, kept_bytes);
    *due = 0;
    for (size_t i = 0; i < n; i++)
        if (!drop[i] && (*due == 0 || h[i].due < *due))
            *due = h[i].due;
    if (*due > 0)
        *due += store_retention_slack(b);
}

static void bounds_of(sqlite3 *db, const txbox_gc_opts *o, struct retention *b)
{
    store_get_retention(db, b);
    if (o->keep >= 0)
        b->keep = o->keep >= TXBOX_GC_KEEP_ALL ? -1 : o->keep;
    if (o->max_bytes >= 0)
        b->max_bytes = o->max_bytes;
    if (o->max_age >= 0)
        b->max_age = o->max_age;
    if (o->loss_age >= 0)
        b->loss_age = o->loss_age;
}

static void save_bounds(sqlite3 *db, const struct retention *b)
{
    set_setting(db, "keep", b->keep);
    set_setting(db, "max_bytes", b->max_bytes);
    set_setting(db, "max_age", b->max_age);
    set_setting(db, "loss_age", b->loss_age);
}

static void gc_run_row(sqlite3 *db, json_t *pruned, unsigned long long freed)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "INSERT INTO gc_run(at, txs, bytes, detail) VALUES(?1,?2,?3,?4)", -1, &st,
                           NULL) == SQLITE_OK) {
        char *d = json_dumps(pruned, JSON_COMPACT);
        sqlite3_bind_double(st, 1, wall_time());
        sqlite3_bind_int64(st, 2, (sqlite3_int64)json_array_size(pruned));
        sqlite3_bind_int64(st, 3, (sqlite3_int64)freed);
        sqlite3_bind_text(st, 4, d ? d : "[]", -1, SQLITE_TRANSIENT);
        (void)sqlite3_step(st);
        free(d);
    }
    sqlite3_finalize(st);
}

/* retained_only: what history_autogc prunes (list_retained), else every
 * kind txbox gc prunes (list_held). *due: when the next prune by age is
 * due. */
static int gc_locked(txbox_ws *ws, sqlite3 *db, const txbox_gc_opts *o, bool retained_only, json_t *res,
                     double *due, txbox_error *err)
{
    struct retention b;
    bounds_of(db, o, &b);
    if (!o->dry_run)
        store_retained_forget(ws); /* counted again from the log, after the next commit */
    if (o->save && !o->dry_run)
        save_bounds(db, &b);
    struct held *h;
    size_t n;
    if (retained_only)
        list_retained(ws, db, &h, &n);
    else
        list_held(ws, db, &h, &n);
    bool *drop = xcalloc(n + 1, sizeof *drop);
    long kept;
    unsigned long long kept_bytes;
    decide(ws, h, n, drop, &b, &kept, &kept_bytes, due);
    json_t *pruned = json_array();
    unsigned long long freed = 0;
    int rc = 0;
    if (!o->dry_run)
        rc = prune_all(ws, db, h, drop, n, err);
    size_t nl = 0, np = 0;
    for (size_t i = 0; i < n; i++) {
        nl += !drop[i] && h[i].losses;
        np += !drop[i] && h[i].pinned;
    }
    for (size_t i = 0; i < n && rc == 0; i++) { /* oldest first */
        if (!drop[i])
            continue;
        char tn[32];
        idname(tn, h[i].id);
        json_array_append_new(
            pruned, json_pack("{s:s,s:s,s:I,s:s,s:b}", "tx", tn, "what",
                              !strcmp(h[i].what, "upper") ? "kept-aside changes of a conflict" : "pre-images",
                              "bytes", (json_int_t)h[i].bytes, "why", h[i].why ? h[i].why : "over the bounds",
                              "losses", h[i].losses));
        freed += h[i].bytes;
    }
    if (!o->dry_run && json_array_size(pruned))
        gc_run_row(db, pruned, freed);
    json_object_set_new(res, "dry_run", json_boolean(o->dry_run));
    json_object_set_new(res, "pruned", pruned);
    json_object_set_new(res, "freed_bytes", json_integer((json_int_t)freed));
    json_object_set_new(res, "kept",
                        json_pack("{s:i,s:I,s:i,s:i}", "transactions", (int)kept, "bytes",
                                  (json_int_t)kept_bytes, "destroyed_work", (int)nl, "pinned", (int)np));
    json_t *lim = json_pack("{s:I,s:I,s:I}", "max_bytes", (json_int_t)b.max_bytes, "max_age",
                            (json_int_t)b.max_age, "loss_age", (json_int_t)b.loss_age);
    json_object_set_new(lim, "keep", b.keep >= 0 ? json_integer(b.keep) : json_null());
    json_object_set_new(res, "limits", lim);
    free(drop);
    free(h);
    return rc;
}

int txbox_gc(txbox_ws *ws, const txbox_gc_opts *o, char **json, txbox_error *err)
{
    *json = NULL;
    /* The lock first: the log then has the rows of every commit, the
     * pending ones moved in when it opens (a commit that ended while gc
     * waited would otherwise have its pre-images pruned unrecorded). */
    int lockfd = -1;
    if (ws_lock(ws, &lockfd, err) < 0)
        return -1;
    sqlite3 *db;
    if (store_open(ws, true, &db, err) < 0) {
        ws_unlock(lockfd);
        return -1;
    }
    json_t *res = json_object();
    double due;
    int rc = gc_locked(ws, db, o, false, res, &due, err);
    size_t archived = 0;
    if (rc == 0 && !o->dry_run) { /* and the directories nothing reads any more */
        fs_fault_arm();           /* crash tests (compact.bats): the floor's fsync, the renames */
        rc = ws_compact(ws, &archived, err);
        fs_fault_disarm();
    }
    json_object_set_new(res, "archived", json_integer((json_int_t)archived));
    ws_unlock(lockfd);
    store_close(db);
    if (!o->dry_run)
        ws_trash_clean(ws, NULL, 0); /* and the scratch of ended transactions */
    if (rc == 0)
        *json = json_dumps(res, JSON_COMPACT);
    json_decref(res);
    return rc;
}

/* After a commit: prunes back to the retention bounds once they are
 * exceeded by a tenth (of the count, of the bytes) or a commit is older
 * than its bound by the slack (store_retention_slack), so that the walk
 * over the retained transactions runs every few commits or hours, not
 * after each one. The count and when the next prune by age is due come
 * from .txbox/log.retained while that is of this generation (store.c: the
 * log stays closed); otherwise from the log, under the workspace lock,
 * which then refreshes the cache. */
static bool within(long long count, long long bytes, const struct retention *b, double due)
{
    return (b->keep < 0 || count <= b->keep + b->keep / 10) && bytes <= b->max_bytes + b->max_bytes / 10 &&
           (due == 0 || wall_time() < due);
}

void history_autogc(txbox_ws *ws)
{
    struct retention b;
    long long count, bytes;
    double due;
    if (!ws->db && store_retained_cached(ws, &count, &bytes, &b, &due) == 0 && within(count, bytes, &b, due))
        return;
    int lockfd = -1;
    if (ws_lock(ws, &lockfd, NULL) < 0)
        return;
    sqlite3 *db;
    if (store_shared(ws, &db, NULL) < 0) {
        ws_unlock(lockfd);
        return;
    }
    store_import_pending(ws); /* rows appended since this connection opened */
    store_get_retention(db, &b);
    sqlite3_stmt *st = NULL;
    bool over = false;
    if (sqlite3_prepare_v2(db, STORE_RETAINED_SQL, -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        over =
            !within(sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), &b, store_retained_due(db, &b));
    sqlite3_finalize(st);
    due = -1;
    if (over) {
        txbox_gc_opts o = {.keep = -1, .max_bytes = -1, .max_age = -1, .loss_age = -1};
        json_t *res = json_object();
        (void)gc_locked(ws, db, &o, true, res, &due, NULL);
        json_decref(res);
    }
    store_retained_refresh(ws, db, due);
    ws_unlock(lockfd);
}
