/* Crash recovery (txbox_recover) and opening a workspace with it
 * (txbox_ws_open): the transactions layer's, since finishing or undoing a
 * transaction that a crash cut short takes the journal, the copy backend,
 * undo's staging and the sagas' records (ws.c, below, only opens the state
 * directory: ws_open). */
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>

#include "fsops.h"
#include "saga.h"
#include "store.h"
#include "tx.h"

int txbox_ws_open(const char *dir, unsigned flags, txbox_ws **out, txbox_error *err)
{
    if (ws_open(dir, flags, out, err) < 0)
        return -1;
    if (!(flags & TXBOX_WS_NO_RECOVER) && txbox_recover(*out, NULL, err) < 0) {
        txbox_ws_close(*out);
        *out = NULL;
        return tx_err_ctx(err, "recovery");
    }
    return 0;
}

/* ---- recovery ---- */

struct idlist {
    uint64_t *v;
    size_t n;
};

static void list_ids(int dirfd, struct idlist *l)
{
    memset(l, 0, sizeof *l);
    _cleanup_dir_ DIR *d = opendir_at(dirfd, ".");
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        uint64_t id;
        if (!parse_u64(de->d_name, &id))
            continue;
        l->v = xrealloc(l->v, (l->n + 1) * sizeof *l->v);
        l->v[l->n++] = id;
    }
}

static void remove_scratch(int txfd)
{
    (void)tree_remove(txfd, "upper");
    (void)tree_remove(txfd, "work");
    (void)tree_remove(txfd, "live"); /* a session's background processes' upper (run.c) */
    (void)unlinkat(txfd, "survivors.rec", 0);
    (void)unlinkat(txfd, "staged", 0); /* history: an undo's staging record */
    (void)unlinkat(txfd, "intent", 0); /* the journal's copy (journal.c, I8): done */
    (void)unlinkat(txfd, TX_STUCK, 0);
}

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

static bool is_stuck(txbox_ws *ws, uint64_t id)
{
    char p[48];
    snprintf(p, sizeof p, "%llu/" TX_STUCK, (unsigned long long)id);
    return faccessat(ws->txd, p, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* A dead transaction without a journal (never committed, or rolled back
 * from its pre-images) ends: its scratch goes, its outcome and the audit
 * log say so. */
static int roll_back_dead(txbox_ws *ws, uint64_t id, int txfd, const char *outcome, txbox_error *err)
{
    /* History: an undo puts back the pre-images it had staged. */
    if (copy_recover_one(ws, txfd, err) < 0 || undo_unstage(ws, txfd, err) < 0)
        return -1;
    remove_scratch(txfd);
    tx_write_outcome(txfd, outcome);
    /* History: the audit log records it (a row the transaction wrote
     * itself, e.g. a conflict, is kept). Best effort. */
    if (store_log(ws, id, "rolled_back", NULL, NULL, txfd, NULL) < 0) {
        /* the log is damaged or busy: recovery goes on */
    }
    return 0;
}

/* Step 1 of recovery, for each journal in jl whose owner died. (History,
 * issue 5: moved out of txbox_recover() so that a commit can run it under
 * its lock, see ws_roll_forward_locked() in store.h.) A journal that can be
 * neither finished nor rolled back is held (journal.c, I9) and listed in
 * failed. retry (an explicit recovery): try the held ones again too, and
 * put the first one's error in *held; without it, held ones are left alone.
 * Either way the others go on. */
static int roll_forward(txbox_ws *ws, const struct idlist *jl, bool wait, bool retry, json_t *rolled_forward,
                        json_t *rolled_back, json_t *failed, txbox_error *held, txbox_error *err)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < jl->n; i++) {
        uint64_t id = jl->v[i];
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
        if (!retry && is_stuck(ws, id))
            continue; /* tried and held: for 'txbox recover' */
        txbox_error e = {0};
        int r = journal_recover_one(ws, id, &e);
        _cleanup_close_ int txfd = openat(ws->txd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (r < 0) {
            if (failed)
                json_array_append_new(failed, json_pack("{s:s,s:s}", "tx", name, "error", e.msg));
            /* held: the journal stays, its paths wait; the rest goes on */
            txbox_error he = {0};
            if (journal_hold(ws, id, &he) < 0)
                rc = tx_err(err, he.code, "transaction %s: %s; and it cannot be held apart: %s", name, e.msg,
                            he.msg);
            else if (held && !held->code) {
                *held = e; /* with its remedy */
                tx_err_ctx(held, "transaction %s", name);
            }
            if (txfd >= 0)
                write_note(txfd, TX_STUCK, e.msg);
            continue;
        }
        if (r > 0) {
            /* Rolled back from its pre-images (journal.c, I8): back in S1,
             * ended as any dead transaction without a journal is. */
            txbox_error be = {0};
            if (txfd >= 0 && roll_back_dead(ws, id, txfd,
                                            "rolled_back (its commit could not be "
                                            "completed: restored from the pre-images)",
                                            &be) < 0) {
                if (failed)
                    json_array_append_new(failed, json_pack("{s:s,s:s}", "tx", name, "error", be.msg));
                rc = tx_err(err, be.code, "transaction %s: %s", name, be.msg);
                continue;
            }
            if (rolled_back)
                json_array_append_new(rolled_back, json_string(name));
            ws_end_tx(ws, id, -1);
            continue;
        }
        if (txfd >= 0) {
            remove_scratch(txfd);
            (void)saga_recovered(txfd, NULL); /* best effort, as the outcome */
            tx_write_outcome(txfd, "committed (completed by recovery)");
        }
        if (rolled_forward)
            json_array_append_new(rolled_forward, json_string(name));
        ws_end_tx(ws, id, -1);
    }
    return rc;
}

int ws_roll_forward_locked(txbox_ws *ws, json_t *done, json_t *failed, txbox_error *err)
{
    struct idlist jl;
    list_ids(ws->jnld, &jl);
    int rc = roll_forward(ws, &jl, true, false, done, NULL, failed, NULL, err);
    free(jl.v);
    return rc;
}

/* History (stress test): ws_new_tx's owner lock under its temporary name
 * (.new.PID), left by a process killed before it registered the id. Removed
 * when unlocked and older than 5 s (a live process locks it at once). */
static void clean_new_locks(txbox_ws *ws)
{
    _cleanup_dir_ DIR *d = opendir_at(ws->actd, ".");
    struct dirent *de;
    time_t now = time(NULL);
    while (d && (de = readdir(d))) {
        struct stat st;
        if (strncmp(de->d_name, ".new.", 5) || fstatat(ws->actd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
            now - st.st_mtime < 5)
            continue;
        _cleanup_close_ int lf = openat(ws->actd, de->d_name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (lf >= 0 && flock(lf, LOCK_EX | LOCK_NB) == 0)
            (void)unlinkat(ws->actd, de->d_name, 0);
    }
}

int txbox_recover(txbox_ws *ws, char **report, txbox_error *err)
{
    clean_new_locks(ws);
    struct idlist jl, al;
    list_ids(ws->jnld, &jl);
    list_ids(ws->actd, &al);
    json_t *rolled_forward = json_array(), *rolled_back = json_array(), *failed = json_array();
    int lockfd = -1, rc = 0;
    /* An explicit recovery (one that wants the report) tries the held
     * transactions again; the one every command runs first leaves them. */
    bool retry = report != NULL;
    /* Fast path: nothing in flight whose owner died. */
    bool work = false;
    for (size_t i = 0; i < jl.n && !work; i++)
        work = ws_tx_owner_dead(ws, jl.v[i]) && (retry || !is_stuck(ws, jl.v[i]));
    for (size_t i = 0; i < al.n && !work; i++) {
        char name[32];
        struct stat st;
        snprintf(name, sizeof name, "%llu", (unsigned long long)al.v[i]);
        /* one with a journal: above */
        work = ws_tx_owner_dead(ws, al.v[i]) && fstatat(ws->jnld, name, &st, 0) < 0;
    }
    if (work && ws_lock(ws, &lockfd, err) < 0)
        rc = -1;
    /* 1. Journals: roll forward (the commit point was passed). */
    txbox_error held = {0};
    if (work && rc == 0)
        rc = roll_forward(ws, &jl, false, retry, rolled_forward, rolled_back, failed, retry ? &held : NULL,
                          err);
    /* 2. Transactions in flight without a journal: roll back. */
    for (size_t i = 0; work && rc == 0 && i < al.n; i++) {
        uint64_t id = al.v[i];
        char name[32];
        snprintf(name, sizeof name, "%llu", (unsigned long long)id);
        struct stat st;
        if (fstatat(ws->jnld, name, &st, 0) == 0 || !ws_tx_owner_dead(ws, id))
            continue;
        /* History (stress test): listed before the lock was taken, it may
         * have ended normally meanwhile (its lock file is gone). */
        if (fstatat(ws->actd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        _cleanup_close_ int txfd = openat(ws->txd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (txfd >= 0) {
            /* external effects (saga.c) its process left started or
             * running: interrupted, for a person to look at */
            txbox_error se = {0};
            if (saga_recovered(txfd, &se) < 0) {
                json_array_append_new(failed, json_pack("{s:s,s:s}", "tx", name, "error", se.msg));
                rc = tx_err(err, se.code, "transaction %s: %s", name, se.msg);
                continue;
            }
            if (fstatat(txfd, "journal", &st, 0) == 0) {
                /* Fully committed; only the owner's clean-up was cut short. */
                remove_scratch(txfd);
                ws_end_tx(ws, id, -1);
                continue;
            }
            txbox_error e = {0};
            if (roll_back_dead(ws, id, txfd, "rolled_back (its process died)", &e) < 0) {
                json_array_append_new(failed, json_pack("{s:s,s:s}", "tx", name, "error", e.msg));
                rc = tx_err(err, e.code, "transaction %s: %s", name, e.msg);
                continue;
            }
        }
        json_array_append_new(rolled_back, json_string(name));
        ws_end_tx(ws, id, -1);
    }
    /* An explicit recovery (one that wants the report) leaves the audit
     * log complete: the rows still pending go into it. */
    if (report && rc == 0)
        store_import_pending(ws);
    /* Leftover temporary files of dead writers. */
    if (work && rc == 0) {
        _cleanup_dir_ DIR *d = opendir_at(ws->jnld, ".");
        struct dirent *de;
        while (d && (de = readdir(d))) {
            uint64_t id;
            char base[32];
            const char *dot = strstr(de->d_name, ".tmp");
            if (!dot || dot[4] || (size_t)(dot - de->d_name) >= sizeof base)
                continue;
            memcpy(base, de->d_name, (size_t)(dot - de->d_name));
            base[dot - de->d_name] = 0;
            if (parse_u64(base, &id) && ws_tx_owner_dead(ws, id))
                (void)unlinkat(ws->jnld, de->d_name, 0);
        }
    }
    ws_unlock(lockfd);
    free(jl.v);
    free(al.v);
    if (rc == 0 && held.code) { /* all else done: what a person must do */
        if (err)
            *err = held;
        rc = -1;
    }
    if (report) {
        json_t *o = json_pack("{s:o,s:o,s:o}", "rolled_forward", rolled_forward, "rolled_back", rolled_back,
                              "failed", failed);
        *report = json_dumps(o, JSON_COMPACT);
        json_decref(o);
    } else {
        json_decref(rolled_forward);
        json_decref(rolled_back);
        json_decref(failed);
    }
    return rc;
}
