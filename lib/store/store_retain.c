/* Retention: its bounds (the setting table) and its count, cached in
 * .txbox/log.retained. */
#include <fcntl.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "store.h"
#include "store_int.h"

void store_get_retention(sqlite3 *db, long *keep, long long *max_bytes)
{
    *keep = DEFAULT_KEEP;
    *max_bytes = DEFAULT_MAX_BYTES;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT key, value FROM setting", -1, &st, NULL) != SQLITE_OK)
        return;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(st, 0);
        sqlite3_int64 v = sqlite3_column_int64(st, 1);
        if (k && !strcmp(k, "keep") && v >= 0)
            *keep = (long)v;
        else if (k && !strcmp(k, "max_bytes") && v >= 0)
            *max_bytes = v;
    }
    sqlite3_finalize(st);
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
    long long count, bytes, keep, max_bytes;
};

static bool retained_read(txbox_ws *ws, struct retained *r)
{
    _cleanup_close_ int fd = openat(ws->sfd, RETAINED_NAME, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    char b[160];
    ssize_t n = fd >= 0 ? read(fd, b, sizeof b - 1) : -1;
    if (n <= 0)
        return false;
    b[n] = 0;
    unsigned long long g;
    return sscanf(b, "%llu %lld %lld %lld %lld", &g, &r->count, &r->bytes, &r->keep, &r->max_bytes) == 5 &&
           (r->gen = g) > 0 && r->count >= 0 && r->bytes >= 0 && r->keep >= 0 && r->max_bytes >= 0;
}

/* Rewritten in place, padded to a fixed length: a write cut short leaves
 * a line that does not parse, which is no cache (only writers under the
 * workspace lock write it). */
static void retained_write(txbox_ws *ws, const struct retained *r)
{
    char b[128];
    int n = snprintf(b, sizeof b, "%llu %lld %lld %lld %lld", (unsigned long long)r->gen, r->count, r->bytes,
                     r->keep, r->max_bytes);
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
    retained_write(ws, &r);
}

int store_retained_cached(txbox_ws *ws, long long *count, long long *bytes, long *keep, long long *max_bytes)
{
    struct retained r;
    uint64_t gen;
    if (!retained_read(ws, &r) || ws_read_gen(ws, &gen, NULL) < 0 || gen != r.gen)
        return -1;
    *count = r.count;
    *bytes = r.bytes;
    *keep = (long)r.keep;
    *max_bytes = r.max_bytes;
    return 0;
}

void store_retained_refresh(txbox_ws *ws, sqlite3 *db)
{
    struct retained r = {0};
    long keep;
    store_get_retention(db, &keep, &r.max_bytes);
    r.keep = keep;
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
