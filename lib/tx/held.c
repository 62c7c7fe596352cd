/* Held transactions: a rule on effects with action hold (lib/tx/effects.c
 * judges) keeps the transaction for a person to review.
 *
 * Holding (one mechanism for single runs and multi-command commits): the
 * scanned upper stays where the commit protocol wants it, tx/ID/upper, and
 * tx/ID/held (JSON, written whole then renamed, fsync'd) records the base
 * generation, the operations, the audit-log info and the verdict; outcome
 * "held". The transaction owns no active/ID lock, so recovery leaves it
 * alone, and gc does not prune a held upper. approve commits it through the
 * one commit sequence (commit.c: its lock, roll forward, conflict check
 * against every commit since the base generation (first committer wins: a
 * clash is a conflict, 123, and the transaction stays held), prechecks,
 * floor, journal), owning it meanwhile: a crash before the commit point
 * leaves it held (commit_end_dead), after it recovery finishes it. The held
 * file is removed only after the commit (a crash in between leaves a
 * journal, which marks it as no longer held). reject removes upper/ and
 * held, and logs outcome rejected. */
#include <fcntl.h>
#include <sys/stat.h>

#include "commit.h"
#include "effects.h"
#include "fsops.h"
#include "result.h"
#include "safepath.h"
#include "store.h"

#define HELD_MAX (256u << 20)

/* ---- holding ---- */

static json_t *meta_json(const struct tx_meta *m)
{
    return json_pack("[I,I,I,I,I,I,I]", (json_int_t)m->mode, (json_int_t)m->uid, (json_int_t)m->gid,
                     (json_int_t)m->atime_s, (json_int_t)m->atime_ns, (json_int_t)m->mtime_s,
                     (json_int_t)m->mtime_ns);
}

static bool meta_from(json_t *a, struct tx_meta *m)
{
    json_int_t v[7];
    if (!json_is_array(a) || json_array_size(a) != 7)
        return false;
    for (size_t i = 0; i < 7; i++) {
        if (!json_is_integer(json_array_get(a, i)))
            return false;
        v[i] = json_integer_value(json_array_get(a, i));
    }
    m->mode = (uint32_t)v[0];
    m->uid = (uint32_t)v[1];
    m->gid = (uint32_t)v[2];
    m->atime_s = v[3];
    m->atime_ns = v[4];
    m->mtime_s = v[5];
    m->mtime_ns = v[6];
    return true;
}

int effects_hold(txbox_ws *ws, uint64_t id, int txfd, uint64_t base_gen, const struct tx_ops *ops,
                 const char *info, const json_t *verdict, txbox_error *err)
{
    (void)ws;
    (void)id;
    json_t *jops = json_array();
    for (size_t i = 0; i < ops->n; i++) {
        const struct tx_op *o = &ops->v[i];
        json_array_append_new(jops, json_pack("[i,i,i,i,s,o,o]", o->kind, o->had_old, o->new_dir, o->old_dir,
                                              o->path, meta_json(&o->nw), meta_json(&o->old)));
    }
    json_t *h = json_pack("{s:I,s:s?,s:O,s:f,s:o}", "base_gen", (json_int_t)base_gen, "info", info, "verdict",
                          verdict, "held_at", wall_time(), "ops", jops);
    _cleanup_free_ char *s = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    if (!s)
        return tx_err(err, ENOMEM, "cannot record the held transaction");
    _cleanup_close_ int fd = openat(txfd, "held.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || fs_write(fd, s, strlen(s)) < 0 || fs_fsync(fd) < 0 ||
        fs_renameat(txfd, "held.tmp", txfd, "held", 0) < 0 || fs_fsync(txfd) < 0)
        return tx_errno(err, errno, "cannot record the held transaction");
    return 0;
}

bool effects_is_held(txbox_ws *ws, int txfd, const char *id)
{
    /* what cannot be told is not held (approve and reject refuse it) */
    return exists_at(txfd, "held") > 0 && exists_at(txfd, "upper") > 0 && exists_at(txfd, "journal") == 0 &&
           exists_at(ws->jnld, id) == 0;
}

struct heldrec {
    json_t *h;
    uint64_t base_gen;
    struct tx_ops ops;
};

static int load_held(int txfd, const char *id, struct heldrec *hr, txbox_error *err)
{
    memset(hr, 0, sizeof *hr);
    _cleanup_free_ char *s = NULL;
    if (read_file_at(txfd, "held", HELD_MAX, &s, NULL, err) < 0)
        return tx_err_ctx(err, "transaction %s", id);
    hr->h = json_loads(s, 0, NULL);
    json_t *ops = json_object_get(hr->h, "ops");
    json_int_t bg = json_integer_value(json_object_get(hr->h, "base_gen"));
    if (!json_is_array(ops) || bg < 0) {
        json_decref(hr->h);
        hr->h = NULL;
        return tx_err(err, EIO, "transaction %s: its held record is damaged", id);
    }
    hr->base_gen = (uint64_t)bg;
    size_t i;
    json_t *o;
    json_array_foreach(ops, i, o)
    {
        const char *path = json_string_value(json_array_get(o, 4));
        json_int_t kind = json_integer_value(json_array_get(o, 0));
        if (!path || kind < OP_REPLACE || kind > OP_META || (*path && !safe_relpath_ok(path))) {
            ops_free(&hr->ops);
            json_decref(hr->h);
            hr->h = NULL;
            return tx_err(err, EIO, "transaction %s: its held record is damaged", id);
        }
        struct tx_op *op = op_add(&hr->ops, (uint8_t)kind, path);
        op->had_old = json_integer_value(json_array_get(o, 1)) != 0;
        op->new_dir = json_integer_value(json_array_get(o, 2)) != 0;
        op->old_dir = json_integer_value(json_array_get(o, 3)) != 0;
        if (!meta_from(json_array_get(o, 5), &op->nw) || !meta_from(json_array_get(o, 6), &op->old)) {
            ops_free(&hr->ops);
            json_decref(hr->h);
            hr->h = NULL;
            return tx_err(err, EIO, "transaction %s: its held record is damaged", id);
        }
    }
    return 0;
}

static void heldrec_free(struct heldrec *hr)
{
    json_decref(hr->h);
    ops_free(&hr->ops);
}

/* Opens tx/ID of a held transaction. */
static int open_held(txbox_ws *ws, const char *id, char idn[static 32], int *txfd, txbox_error *err)
{
    uint64_t n;
    if (!parse_u64(id, &n) || !n)
        return tx_err(err, EINVAL, "'%s' is not a transaction id", id);
    snprintf(idn, 32, "%llu", (unsigned long long)n);
    *txfd = openat(ws->txd, idn, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*txfd < 0 || !effects_is_held(ws, *txfd, idn)) {
        if (*txfd >= 0)
            close(*txfd);
        *txfd = -1;
        tx_err(err, ENOENT, "transaction %s is not held", idn);
        return tx_remedy(err, TXBOX_REMEDY_REVIEW, NULL);
    }
    return 0;
}

static json_t *review_one(txbox_ws *ws, int txfd, const char *idn, bool full)
{
    struct heldrec hr;
    txbox_error e = {0};
    if (load_held(txfd, idn, &hr, &e) < 0)
        return json_pack("{s:s,s:s}", "tx", idn, "error", e.msg);
    json_t *info = json_loads(json_string_value(json_object_get(hr.h, "info")) ?: "{}", 0, NULL);
    json_t *v = json_object_get(hr.h, "verdict");
    json_t *o = json_pack("{s:s,s:O,s:O,s:O,s:O,s:O,s:O,s:O}", "tx", idn, "command",
                          json_object_get(info, "command") ?: json_null(), "effect_rule",
                          json_object_get(v, "effect_rule") ?: json_null(), "reason",
                          json_object_get(v, "reason") ?: json_null(), "suggestion",
                          json_object_get(v, "suggestion") ?: json_null(), "paths",
                          json_object_get(v, "paths") ?: json_null(), "held_at",
                          json_object_get(hr.h, "held_at") ?: json_null(), "base_gen",
                          json_object_get(hr.h, "base_gen") ?: json_null());
    if (full) {
        _cleanup_close_ int up = openat(txfd, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        json_object_set_new(o, "changes", up >= 0 ? ops_changes(up, ws->fd, &hr.ops, 10000) : json_null());
        json_object_set(o, "violations", json_object_get(v, "violations"));
    }
    json_decref(info);
    heldrec_free(&hr);
    return o;
}

int txbox_review(txbox_ws *ws, const char *id, char **json, txbox_error *err)
{
    *json = NULL;
    json_t *res;
    if (id) {
        char idn[32];
        int txfd;
        if (open_held(ws, id, idn, &txfd, err) < 0)
            return -1;
        res = review_one(ws, txfd, idn, true);
        close(txfd);
    } else {
        uint64_t *ids;
        size_t n;
        if (ws_tx_ids(ws, &ids, &n, err) < 0)
            return -1;
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++) {
            char idn[32];
            snprintf(idn, sizeof idn, "%llu", (unsigned long long)ids[i]);
            _cleanup_close_ int tfd = openat(ws->txd, idn, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (tfd >= 0 && effects_is_held(ws, tfd, idn))
                json_array_append_new(arr, review_one(ws, tfd, idn, false));
        }
        free(ids);
        res = json_pack("{s:o}", "held", arr);
    }
    *json = json_dumps(res, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(res);
    return 0;
}

/* The audit info of held transaction hr as decided in review: outcome, the
 * time under key, and the verdict that held it. */
static char *decided_info(const struct heldrec *hr, const char *outcome, const char *key)
{
    json_t *info = json_loads(json_string_value(json_object_get(hr->h, "info")) ?: "{}", 0, NULL);
    if (!info)
        info = json_object();
    json_object_set_new(info, "outcome", json_string(outcome));
    json_object_set_new(info, key, json_real(wall_time()));
    json_object_set(info, "held_by", json_object_get(hr->h, "verdict"));
    char *s = json_dumps(info, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(info);
    return s;
}

/* Approve: the held write set through the one commit sequence (commit.c),
 * its operations and upper as they were held, under an owner lock of its
 * own (a crash at any step leaves it held, or committed). */
struct approve {
    const char *id;
    char idn[32];
    struct heldrec hr;
    json_t *res;
    int *status;
};

/* Under the lock: is it held still (another approve or reject may have
 * come first), and its record. */
static int approve_prepare(struct tx_commit *c, txbox_error *err)
{
    struct approve *a = c->h->ctx;
    if (open_held(c->ws, a->id, a->idn, &c->txfd, err) < 0 || load_held(c->txfd, a->idn, &a->hr, err) < 0)
        return -1;
    c->base_gen = a->hr.base_gen;
    c->ops = a->hr.ops; /* the sequence's now */
    a->hr.ops = (struct tx_ops){0};
    return 0;
}

static char *approve_info(struct tx_commit *c)
{
    struct approve *a = c->h->ctx;
    return decided_info(&a->hr, "committed", "approved");
}

static void approve_finish(struct tx_commit *c, int rc, txbox_error *err)
{
    (void)err;
    struct approve *a = c->h->ctx;
    if (rc < 0 || !a->hr.h)
        return;
    a->res = json_pack("{s:s,s:O,s:O}", "tx", a->idn, "changes", c->changes ? c->changes : json_object(),
                       "effect_rule",
                       json_object_get(json_object_get(a->hr.h, "verdict"), "effect_rule") ?: json_null());
    switch (c->end) {
    case COMMIT_EMPTY: { /* no journal: its row is logged here */
        _cleanup_free_ char *is = approve_info(c);
        txbox_error le = {0};
        if (store_log(c->ws, c->id, "committed", is, NULL, c->txfd, &le) < 0)
            json_object_set_new(a->res, "log_error", json_string(le.msg));
    }
        /* fall through */
    case COMMIT_APPLIED:
        tx_write_outcome(c->txfd, "committed (approved)");
        json_object_set_new(a->res, "outcome", json_string("committed"));
        break;
    case COMMIT_NO_SPACE: /* it stays held, for later */
        json_object_set_new(a->res, "outcome", json_string("no_space"));
        json_object_set_new(a->res, "space",
                            json_pack("{s:I,s:I}", "free_bytes", (json_int_t)c->space.free_bytes,
                                      "floor_bytes", (json_int_t)c->space.floor));
        *a->status = TXBOX_EXIT_NO_SPACE;
        break;
    default: /* first committer wins; it stays held, for reject or a retry */
        json_object_set_new(a->res, "outcome", json_string("conflict"));
        json_object_set_new(a->res, "conflict_path", json_string(c->clash ? c->clash : "?"));
        if (c->held_by)
            json_object_set_new(a->res, "held_by", json_sprintf("%llu", (unsigned long long)c->held_by));
        *a->status = TXBOX_EXIT_CONFLICT;
        break;
    }
}

int txbox_approve(txbox_ws *ws, const char *id, char **json, int *status, txbox_error *err)
{
    *json = NULL;
    *status = 0;
    uint64_t t0 = now_ns(), n;
    if (!parse_u64(id, &n) || !n)
        return tx_err(err, EINVAL, "'%s' is not a transaction id", id);
    struct approve a = {.id = id, .status = status};
    const struct commit_hooks hooks = {
        .prepare = approve_prepare, .info = approve_info, .finish = approve_finish, .ctx = &a};
    struct tx_commit c = {
        .ws = ws, .id = n, .txfd = -1, .upperfd = -1, .own = true, .min_free = -1, .h = &hooks};
    int rc = commit_run(&c, err);
    if (c.upperfd >= 0)
        close(c.upperfd);
    if (c.txfd >= 0)
        close(c.txfd);
    commit_free(&c);
    heldrec_free(&a.hr);
    if (rc < 0) {
        json_decref(a.res);
        return -1;
    }
    json_object_set_new(a.res, "duration_ms", json_real((double)(now_ns() - t0) / 1e6));
    if (!strcmp(json_string_value(json_object_get(a.res, "outcome")), "committed"))
        history_autogc(ws);
    *json = json_dumps(a.res, JSON_COMPACT | JSON_REAL_PRECISION(12));
    json_decref(a.res);
    return 0;
}

int txbox_reject(txbox_ws *ws, const char *id, char **json, txbox_error *err)
{
    *json = NULL;
    int lockfd = -1;
    if (ws_lock(ws, &lockfd, err) < 0)
        return -1;
    char idn[32];
    int txfd = -1;
    struct heldrec hr = {0};
    int rc = open_held(ws, id, idn, &txfd, err);
    if (rc == 0)
        rc = load_held(txfd, idn, &hr, err);
    json_t *res = NULL;
    if (rc == 0) {
        _cleanup_free_ char *is = decided_info(&hr, "rejected", "rejected_in_review");
        /* the changes go first: a crash after this leaves no held transaction */
        if (tree_remove(txfd, "upper") < 0 || unlinkat(txfd, "held", 0) < 0)
            rc = tx_errno(err, errno, "transaction %s: cannot drop its changes", idn);
        if (rc == 0) {
            tx_write_outcome(txfd, "rejected (in review)");
            uint64_t txid = 0;
            (void)parse_u64(idn, &txid);
            res = json_pack("{s:s,s:s}", "tx", idn, "outcome", "rejected");
            txbox_error le = {0};
            if (store_log(ws, txid, "rejected", is, NULL, txfd, &le) < 0)
                json_object_set_new(res, "log_error", json_string(le.msg));
        }
    }
    heldrec_free(&hr);
    if (txfd >= 0)
        close(txfd);
    ws_unlock(lockfd);
    if (rc < 0)
        return -1;
    *json = json_dumps(res, JSON_COMPACT);
    json_decref(res);
    return 0;
}
