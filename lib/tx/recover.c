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

#include "commit.h"
#include "fsops.h"
#include "saga.h"
#include "store.h"
#include "tx.h"

int txbox_ws_open(const char *dir, unsigned flags, txbox_ws **out, txbox_error *err)
{
    if (ws_open(dir, flags, out, err) < 0)
        return -1;
    if ((*out)->stateless)
        return 0; /* nothing to recover, nothing it could write */
    if ((flags & TXBOX_WS_NO_RECOVER) && ws_wait_settled(*out, err) < 0) {
        txbox_ws_close(*out);
        *out = NULL;
        return -1;
    }
    if (!(flags & TXBOX_WS_NO_RECOVER) && txbox_recover(*out, NULL, err) < 0) {
        txbox_ws_close(*out);
        *out = NULL;
        return tx_err_ctx(err, "recovery");
    }
    return 0;
}

/* ---- recovery ---- */

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
    struct {
        uint64_t *v;
        size_t n;
    } jl = {0}, al = {0};
    if (ws_list_ids(ws->jnld, &jl.v, &jl.n, NULL) < 0 || ws_list_ids(ws->actd, &al.v, &al.n, NULL) < 0) {
        free(jl.v);
        return tx_errno(err, errno, "cannot list the transactions in flight");
    }
    json_t *rolled_forward = json_array(), *rolled_back = json_array(), *failed = json_array();
    int lockfd = -1, rc = 0;
    /* An explicit recovery (one that wants the report) tries the held
     * transactions again; the one every command runs first leaves them. */
    bool retry = report != NULL;
    /* Fast path: nothing in flight whose owner died. */
    bool work = false;
    for (size_t i = 0; i < jl.n && !work; i++)
        work = ws_tx_owner_dead(ws, jl.v[i]) && (retry || !commit_is_stuck(ws, jl.v[i]));
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
        rc = commit_roll_forward(ws, false, retry, rolled_forward, rolled_back, failed, retry ? &held : NULL,
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
                /* Fully committed; only the owner's clean-up was cut short
                 * (a crash or a power loss after the journal closed): a
                 * multi-command or held one is closed too. */
                commit_tidy_dead(txfd);
                if (fstatat(txfd, "outcome", &st, AT_SYMLINK_NOFOLLOW) < 0)
                    tx_write_outcome(txfd, "committed (completed by recovery)");
                ws_end_tx(ws, id, -1);
                continue;
            }
            txbox_error e = {0};
            int d = commit_end_dead(ws, id, txfd, "rolled_back (its process died)", &e);
            if (d < 0) {
                json_array_append_new(failed, json_pack("{s:s,s:s}", "tx", name, "error", e.msg));
                rc = tx_err(err, e.code, "transaction %s: %s", name, e.msg);
                continue;
            }
            if (d > 0) { /* still open or held: only its commit ended */
                ws_end_tx(ws, id, -1);
                continue;
            }
        }
        json_array_append_new(rolled_back, json_string(name));
        ws_end_tx(ws, id, -1);
    }
    /* An explicit recovery also tidies what committed transactions left
     * that holds workspace files as hard links (commit_tidy_closed). */
    if (report && rc == 0 && commit_tidy_closed(ws, lockfd >= 0, err) < 0)
        rc = -1;
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
