/* Compaction: the directories of ended transactions that nothing reads any
 * more leave .txbox/tx/.
 *
 * Every transaction gets .txbox/tx/ID/ (ws.c). Once it has ended, what is
 * left there is its outcome and, for a commit, its journal (the commit
 * record); its pre-images go with retention (undo.c). Without compaction
 * the directories of all transactions ever run stay: 12 KB or more each
 * on disk, and every walk over them (txbox status, review, gc) grows with
 * the whole history (89 ms at 1,500 transactions).
 *
 * Who reads an ended transaction's directory:
 *   R1 undo of commit T reads the journals of every commit after T
 *      (generations T.gen+1 ..), and T's own pre-images;
 *   R2 the conflict check of a transaction with base generation B reads
 *      the journals of generations B+1 .. (a missing one counts as a
 *      conflict: safe, but a transaction lost to nothing); the bases are
 *      those of the live transactions (in their owner locks, active/ID,
 *      ws.c), of the held ones (held) and of the open multi-command ones
 *      (multi);
 *   R3 diff, for the pre-images of later commits (only retained ones have
 *      any), and the messages of undo for a transaction with no record;
 *   R4 recovery (journal/ID, active/ID: never an ended transaction's), the
 *      log import (log.row, until the log has the row), txbox status
 *      (effects that need attention, open transactions), review (held).
 *
 * So a directory is archived when (A1) its owner is gone and it is not in
 * journal/, (A2) it has an outcome and holds nothing but its outcome,
 * journal, closed multi-command state, a free lock and an imported log
 * row, and (A3) if it has a journal, its generation is at or below every
 * base of R2 and below every retained commit's (R1).
 *
 * Archiving is a rename of tx/ID to trash/ID.archived (one directory entry;
 * the trash is emptied while later commands run, ws.c), after the state
 * format has been raised to 2 (an older txbox, which knows neither the
 * floor nor archived records, then refuses the workspace) and the id floor
 * durably to the highest id archived: ids come from mkdir
 * in tx/ and the seq hint is not durable, so without the floor an archived
 * id could be given out again after a crash. A crash at any point leaves
 * some directories archived and the rest as they were; nothing reads an
 * archived one, and the next pass goes on. The audit log keeps every
 * transaction's row; commits/GEN records stay (ws_read_gen counts them).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "store.h"
#include "tx.h"
#include "util.h"

enum {
    E_JOURNAL = 1 << 0,
    E_OUTCOME = 1 << 1,
    E_UNDO = 1 << 2,
    E_HELD = 1 << 3,
    E_MULTI = 1 << 4,
    E_LOCK = 1 << 5,
    E_LOGROW = 1 << 6,
    E_OTHER = 1 << 7,
};

static unsigned entries(int tfd)
{
    static const struct {
        const char *name;
        unsigned bit;
    } known[] = {{"journal", E_JOURNAL}, {"outcome", E_OUTCOME}, {"undo", E_UNDO},     {"held", E_HELD},
                 {"multi", E_MULTI},     {"lock", E_LOCK},       {"log.row", E_LOGROW}};
    _cleanup_dir_ DIR *d = opendir_at(tfd, ".");
    if (!d)
        return E_OTHER;
    unsigned m = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        unsigned bit = E_OTHER;
        for (size_t i = 0; i < ARRAY_SIZE(known); i++)
            if (!strcmp(de->d_name, known[i].name))
                bit = known[i].bit;
        m |= bit;
    }
    return m;
}

/* base_gen of a JSON record in tfd/name (held, multi); 0 (keep every
 * commit) if unreadable */
static uint64_t record_base(int tfd, const char *name)
{
    _cleanup_free_ char *s = NULL;
    if (read_file_at(tfd, name, 64u << 20, &s, NULL, NULL) < 0)
        return 0;
    json_t *o = json_loads(s, 0, NULL);
    json_t *b = json_object_get(o, "base_gen");
    uint64_t g = json_is_integer(b) && json_integer_value(b) >= 0 ? (uint64_t)json_integer_value(b) : 0;
    json_decref(o);
    return g;
}

static void lower(uint64_t *limit, uint64_t g)
{
    if (g < *limit)
        *limit = g;
}

static bool lock_free(int tfd)
{
    _cleanup_close_ int fd = openat(tfd, "lock", O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    return fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0;
}

/* Is tx id's row in the audit log? (its log.row is then dead) */
static bool row_logged(txbox_ws *ws, sqlite3 **db, bool *imported, uint64_t id)
{
    if (!*db) {
        if (store_shared(ws, db, NULL) < 0)
            return false;
    }
    if (!*imported) {
        store_import_pending(ws);
        *imported = true;
    }
    sqlite3_stmt *st = NULL;
    bool r = false;
    if (sqlite3_prepare_v2(*db, "SELECT 1 FROM tx WHERE id=?1", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
        r = sqlite3_step(st) == SQLITE_ROW;
    }
    sqlite3_finalize(st);
    return r;
}

struct cand {
    uint64_t id, gen; /* gen 0: no journal */
};

int ws_compact(txbox_ws *ws, size_t *n, txbox_error *err)
{
    *n = 0;
    uint64_t *ids;
    size_t nids;
    if (ws_tx_ids(ws, &ids, &nids, err) < 0)
        return -1;
    struct cand *c = xcalloc(nids + 1, sizeof *c);
    size_t nc = 0;
    uint64_t limit = UINT64_MAX; /* A3: commits at or below it may go */
    sqlite3 *db = NULL;
    bool imported = false;
    for (size_t i = 0; i < nids; i++) {
        uint64_t id = ids[i], g;
        char idn[32];
        snprintf(idn, sizeof idn, "%llu", (unsigned long long)id);
        if (!ws_tx_owner_dead(ws, id)) { /* live: R2 by the base in its lock */
            if (ws_tx_live_base(ws, id, &g) < 0)
                g = 0; /* not written yet: keep every commit */
            lower(&limit, g);
            continue;
        }
        if (faccessat(ws->jnld, idn, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
            continue; /* recovery's */
        _cleanup_close_ int tfd = openat(ws->txd, idn, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (tfd < 0)
            continue;
        unsigned m = entries(tfd);
        if (m & E_HELD) { /* R2: may still commit, from its base */
            lower(&limit, record_base(tfd, "held"));
            continue;
        }
        if ((m & E_MULTI) && !(m & (E_OUTCOME | E_JOURNAL))) { /* open: R2 */
            lower(&limit, record_base(tfd, "multi"));
            continue;
        }
        if (m & E_JOURNAL) {
            if (journal_peek_gen(tfd, "journal", &g) < 0)
                continue;     /* kept: unreadable */
            if (m & E_UNDO) { /* retained: R1 */
                lower(&limit, g - 1);
                continue;
            }
        } else {
            g = 0;
        }
        if (!(m & E_OUTCOME) || (m & (E_UNDO | E_OTHER)))
            continue; /* A2 */
        if ((m & E_LOCK) && !lock_free(tfd))
            continue;
        if ((m & E_LOGROW) && !row_logged(ws, &db, &imported, id))
            continue;
        c[nc++] = (struct cand){id, g};
    }
    free(ids);
    uint64_t top = 0;
    size_t keep = 0;
    for (size_t i = 0; i < nc; i++) {
        if (c[i].gen > limit)
            continue;
        c[keep++] = c[i];
        if (c[i].id > top)
            top = c[i].id;
    }
    int rc = 0;
    if (keep && (rc = ws_format_upgrade(ws, err)) == 0 && (rc = ws_set_id_floor(ws, top, err)) == 0) {
        for (size_t i = 0; i < keep; i++) {
            char idn[32];
            snprintf(idn, sizeof idn, "%llu", (unsigned long long)c[i].id);
            if (ws_archive(ws, idn) < 0) {
                rc = tx_errno(err, errno, "cannot archive transaction %s", idn);
                break;
            }
            (*n)++;
        }
    }
    free(c);
    return rc;
}

void ws_compact_maybe(txbox_ws *ws, uint64_t id)
{
    if (id % TXBOX_COMPACT_EVERY)
        return;
    int lockfd = -1;
    if (ws_trylock(ws, &lockfd, NULL) < 0)
        return; /* busy: a later transaction does it */
    size_t n;
    if (ws_compact(ws, &n, NULL) < 0) {
        /* best effort: what it archived stays archived; the next pass or
         * txbox gc goes on and says why */
    }
    ws_unlock(lockfd);
}
