/* Retention: its bounds (the setting table) and its count, cached in
 * .txbox/log.retained. */
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "store.h"
#include "store_int.h"

void store_get_retention(sqlite3 *db, struct retention *r)
{
    *r = (struct retention){DEFAULT_KEEP, DEFAULT_MAX_BYTES, DEFAULT_MAX_AGE, DEFAULT_LOSS_AGE};
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT key, value FROM setting", -1, &st, NULL) != SQLITE_OK)
        return;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(st, 0);
        sqlite3_int64 v = sqlite3_column_int64(st, 1);
        if (!k)
            continue;
        if (!strcmp(k, "keep"))
            r->keep = v >= 0 && v <= LONG_MAX ? (long)v : -1; /* <0: no bound */
        else if (!strcmp(k, "max_bytes") && v >= 0)
            r->max_bytes = v;
        else if (!strcmp(k, "max_age") && v >= 0)
            r->max_age = v;
        else if (!strcmp(k, "loss_age") && v >= 0)
            r->loss_age = v;
    }
    sqlite3_finalize(st);
}

const char *store_losses_sql(sqlite3 *db)
{
    sqlite3_stmt *st = NULL;
    bool col = sqlite3_prepare_v2(db, "SELECT lost_bytes FROM tx LIMIT 0", -1, &st, NULL) == SQLITE_OK;
    sqlite3_finalize(st);
    return col ? "(coalesce(lost_bytes, 0) > 0)"
               : "(CASE WHEN json_valid(info) THEN coalesce(json_extract(info, '$.losses.bytes'), 0) > 0 ELSE 0 "
                 "END)";
}

double store_retention_slack(const struct retention *r)
{
    double s = (double)r->max_age / 20;
    return s < 60 ? 60 : s;
}

double store_retained_due(sqlite3 *db, const struct retention *r)
{
    sqlite3_stmt *st = NULL;
    double due = 0;
    _cleanup_free_ char *sql =
        xasprintf("SELECT min(coalesce(finished, started, 0) + CASE WHEN %s THEN ?1 ELSE "
                  "?2 END) FROM tx WHERE outcome='committed' AND retained_bytes IS NOT "
                  "NULL AND pruned IS NULL",
                  store_losses_sql(db));
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, r->loss_age);
        sqlite3_bind_int64(st, 2, r->max_age);
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
            due = sqlite3_column_double(st, 0) + store_retention_slack(r);
    }
    sqlite3_finalize(st);
    return due;
}

/* ---- retention's count, cached ----
 *
 * history_autogc runs after every commit; its count of the retained
 * commits needs the log open, which a commit whose row waits in
 * log.pending no longer does. .txbox/log.retained caches it: "GEN COUNT
 * BYTES KEEP MAX_BYTES", the count and bytes of the unpruned commits'
 * pre-images (STORE_RETAINED_SQL) and the bounds, as of generation GEN.
 * Written from the log under the workspace lock (store_retained_refresh),
 * advanced by each commit whose row goes to log.pending (only from GEN-1
 * to GEN: a commit logged twice, by a crashed process and by recovery,
 * counts once), removed by gc (store_retained_forget). A cache of another
 * generation than the workspace's is no cache. It is a hint: it decides
 * only whether the log is opened to count; what gc prunes is decided
 * from the log. */
void store_retained_forget(txbox_ws *ws) { (void)unlinkat(ws->sfd, RETAINED_NAME, 0); }

struct retained {
    uint64_t gen;
    long long count, bytes;
    struct retention b;
    double due;
};

static bool retained_read(txbox_ws *ws, struct retained *r)
{
    _cleanup_close_ int fd = openat(ws->sfd, RETAINED_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    char b[192];
    ssize_t n = fd >= 0 ? read(fd, b, sizeof b - 1) : -1;
    if (n <= 0)
        return false;
    b[n] = 0;
    unsigned long long g;
    return sscanf(b, "%llu %lld %lld %ld %lld %lld %lld %lf", &g, &r->count, &r->bytes, &r->b.keep,
                  &r->b.max_bytes, &r->b.max_age, &r->b.loss_age, &r->due) == 8 &&
           (r->gen = g) > 0 && r->count >= 0 && r->bytes >= 0 && r->b.keep >= -1 && r->b.max_bytes >= 0 &&
           r->b.max_age >= 0 && r->b.loss_age >= 0 && r->due >= 0;
}

/* Rewritten in place, padded to a fixed length: a write cut short leaves
 * a line that does not parse, which is no cache (only writers under the
 * workspace lock write it). */
static void retained_write(txbox_ws *ws, const struct retained *r)
{
    char b[160];
    int n = snprintf(b, sizeof b, "%llu %lld %lld %ld %lld %lld %lld %.3f", (unsigned long long)r->gen,
                     r->count, r->bytes, r->b.keep < 0 ? -1L : r->b.keep, r->b.max_bytes, r->b.max_age,
                     r->b.loss_age, r->due);
    if (n < 0 || n >= (int)sizeof b - 1)
        return;
    memset(b + n, ' ', sizeof b - 1 - (size_t)n);
    b[sizeof b - 1] = '\n';
    _cleanup_close_ int fd =
        openat(ws->sfd, RETAINED_NAME, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 && pwrite(fd, b, sizeof b, 0) != (ssize_t)sizeof b)
        store_retained_forget(ws);
}

/* After the row of the commit that made generation gen went to
 * log.pending with bytes of pre-images. */
void store_retained_add(txbox_ws *ws, sqlite3_int64 gen, uint64_t bytes)
{
    struct retained r;
    if (gen <= 0 || !retained_read(ws, &r) || r.gen + 1 != (uint64_t)gen)
        return;
    r.gen = (uint64_t)gen;
    r.count++;
    r.bytes += (long long)bytes;
    if (r.due == 0) /* the first one retained: due when it is too old */
        r.due = wall_time() + (double)r.b.max_age + store_retention_slack(&r.b);
    retained_write(ws, &r);
}

int store_retained_cached(txbox_ws *ws, long long *count, long long *bytes, struct retention *b, double *due)
{
    struct retained r;
    uint64_t gen;
    if (!retained_read(ws, &r) || ws_read_gen(ws, &gen, NULL) < 0 || gen != r.gen)
        return -1;
    *count = r.count;
    *bytes = r.bytes;
    *b = r.b;
    *due = r.due;
    return 0;
}

void store_retained_refresh(txbox_ws *ws, sqlite3 *db, double due)
{
    struct retained r = {0};
    store_get_retention(db, &r.b);
    r.due = due >= 0 ? due : store_retained_due(db, &r.b);
    sqlite3_stmt *st = NULL;
    bool ok = ws_read_gen(ws, &r.gen, NULL) == 0 && r.gen > 0 &&
              sqlite3_prepare_v2(db, STORE_RETAINED_SQL, -1, &st, NULL) == SQLITE_OK &&
              sqlite3_step(st) == SQLITE_ROW;
    if (ok) {
        r.count = sqlite3_column_int64(st, 0);
        r.bytes = sqlite3_column_int64(st, 1);
    }
    sqlite3_finalize(st);
    if (ok)
        retained_write(ws, &r);
    else
        store_retained_forget(ws);
}
