/* Multi-command transactions: many commands, one commit.
 *
 * Files (under .txbox/tx/ID/, next to those of journal.c):
 *   multi        the transaction's state (JSON: name, base generation, start
 *                time, commands staged, next savepoint number); its presence
 *                marks ID as a multi-command transaction
 *   lock         flock'd by the process working on ID (run --tx, savepoint,
 *                rollback, commit, abort): one at a time, the others wait
 *   layer/       the transaction so far: an overlay upper relative to the
 *                workspace (whiteouts, opaque directories), never more than
 *                one layer whatever the number of commands
 *   incoming/    the upper of the command being merged into layer/
 *   merge.modes  while a merge works: the modes of incoming/'s directories
 *                it granted owner rwx to (multi_open_dir_rw), for its restart
 *   link.modes   while a copy as hard links (link_copy: savepoint, rollback,
 *                commit) works: the modes of the source's directories it
 *                granted owner rwx to, given back by repair() after a crash
 *   sp/N.NAME/   savepoint NAME: layer/ as it was, as hard links
 *   layer.new/, layer.old/   a rollback in progress
 *   upper/       layer/ renamed for the commit (journal.c applies tx/ID/upper)
 *   layer.keep/  layer/ as hard links while a commit scans upper/ (which the
 *                scan changes): what a commit stopped before its commit
 *                point returns to
 *   outcome      written when the transaction ends (committed, conflict,
 *                aborted): from then on it is closed
 *
 * A command of the transaction (run.c, opts->multi) runs on an overlay with
 * two lower layers, layer/ over the workspace, and a fresh upper of its own
 * (tx/RUN/upper). It sees every earlier command's effects. If it fails its
 * upper is discarded as for a single run; the transaction is untouched. If it
 * succeeds, its upper is renamed to incoming/ and merged into layer/
 * (merge_dir): an entry of incoming replaces the layer's entry at its path
 * (files, symlinks, whiteouts, opaque or new directories: one rename); a
 * directory that is neither opaque nor new in both is merged entry by entry
 * and then takes the incoming directory's metadata. layer/ is then again one
 * overlay upper of the whole transaction over the workspace, which the commit
 * scans and applies exactly as a single command's upper (scan_upper,
 * journal_commit: the same commit point and recovery), so that the commit of
 * a 500-command transaction costs what the commit of its final changes does.
 *
 * Crashes: every step can be restarted. A merge consumes incoming/ entry by
 * entry (each replace is "remove the layer's entry, rename the incoming one
 * in", both idempotent given what exists), and txbox_multi_open() finishes a
 * merge it finds. A rollback builds layer.new/ completely before two renames
 * swap it in; open() completes or undoes the swap. The commit renames layer/
 * to upper/ under the workspace lock (after a copy, layer.keep/); a crash
 * before the commit point leaves upper/ without a journal, which open()
 * replaces by layer.keep/ (the transaction stays open); after it, recovery
 * rolls the journal forward. The transaction owns
 * no active/ID lock while it is open (it outlives the processes that work on
 * it), so recovery, which only looks at active/ entries, leaves it alone.
 * What is not promised: the layer is not fsync'd per command (a power loss
 * may lose commands staged since the last commit; the commit itself makes
 * everything durable before its commit point).
 *
 * Conflicts: the transaction records the generation at begin; at commit,
 * every transaction committed since then is checked against its write set
 * (ops_overlap, as for single runs): first committer wins, and the loser
 * gets outcome conflict with the paths, its changes kept in tx/ID/upper.
 *
 * Files: the layer's part (the state file, the merge, what run.c asks of an
 * open transaction) is merge.c, below run.c; this file, above run.c, runs
 * the verify command and the compensations through it. */
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "commit.h"
#include "effects.h"
#include "fsops.h"
#include "gitcfg.h"
#include "losses.h"
#include "merge.h"
#include "multi.h"
#include "result.h"
#include "run.h"
#include "safepath.h"
#include "saga.h"
#include "store.h"
#include "tx.h"

#define MAX_NAME 64

static bool name_ok(const char *n)
{
    size_t l = strlen(n);
    if (!l || l > MAX_NAME || n[0] == '.')
        return false;
    return strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == l;
}

static json_t *read_state(int txfd)
{
    _cleanup_free_ char *s = NULL;
    if (read_file_at(txfd, "multi", 1 << 20, &s, NULL, NULL) < 0)
        return NULL;
    json_t *o = json_loads(s, 0, NULL);
    if (o && !json_is_object(o)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* An empty layer: the workspace root's metadata, and .txbox hidden (a
 * whiteout, as run.c puts in every upper). */
static int make_layer(txbox_ws *ws, int txfd, const char *name, txbox_error *err)
{
    (void)tree_remove(txfd, name);
    if (mkdirat(txfd, name, 0700) < 0)
        return tx_errno(err, errno, "cannot create %s", name);
    _cleanup_close_ int fd = openat(txfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(ws->fd, &st) < 0)
        return tx_errno(err, errno, "cannot open %s", name);
    if (fchown(fd, st.st_uid, st.st_gid) < 0 && errno != EPERM)
        return tx_errno(err, errno, "cannot set the owner of %s", name);
    if (mknodat(fd, TXBOX_STATE_DIR, S_IFCHR, 0) < 0)
        return tx_errno(err, errno, "cannot hide %s in the transaction's layer", TXBOX_STATE_DIR);
    struct timespec ts[2] = {st.st_atim, st.st_mtim};
    if (fchmod(fd, st.st_mode & 07777) < 0 || futimens(fd, ts) < 0)
        return tx_errno(err, errno, "cannot prepare %s", name);
    return 0;
}

int txbox_multi_begin(txbox_ws *ws, const char *name, char **id, txbox_error *err)
{
    *id = NULL;
    if (name && !name_ok(name))
        return tx_err(err, EINVAL,
                      "a transaction name is 1 to %d letters, digits, '.', '_' or '-', "
                      "not starting with '.'",
                      MAX_NAME);
    uint64_t gen = 0;
    txbox_multi m = {.ws = ws, .txfd = -1, .lockfd = -1, .layerfd = -1};
    int activefd = -1;
    if (ws_new_tx(ws, &m.id, &m.txfd, &activefd, &gen, err) < 0)
        return -1;
    snprintf(m.ids, sizeof m.ids, "%llu", (unsigned long long)m.id);
    int rc = make_layer(ws, m.txfd, "layer", err);
    if (rc == 0) {
        m.state = json_pack("{s:s?,s:I,s:f,s:I,s:I,s:I}", "name", name, "base_gen", (json_int_t)gen,
                            "started", wall_time(), "commands", (json_int_t)0, "failed", (json_int_t)0,
                            "next_savepoint", (json_int_t)1);
        rc = multi_write_state(&m, err);
    }
    if (rc < 0) {
        (void)tree_remove(m.txfd, "layer");
        tx_write_outcome(m.txfd, "failed");
    } else {
        *id = xstrdup(m.ids);
    }
    json_decref(m.state);
    close(m.txfd);
    /* From here on it is no process's: recovery leaves it alone. */
    ws_end_tx(ws, m.id, activefd);
    return rc;
}

/* ---- open, and the repairs of steps a crash cut short ---- */

/* Which of the transaction's own entries exist (exists_at for each): what
 * repair() decides by, so that one it cannot tell stops it. */
enum { H_LAYER, H_UPPER, H_JOURNAL, H_OPEN_JOURNAL, H_KEEP, H_NEW, H_OLD, H_N };

static int survey(txbox_multi *m, int has[H_N], txbox_error *err)
{
    static const char *const names[H_N] = {"layer",      "upper",     "journal",  NULL,
                                           "layer.keep", "layer.new", "layer.old"};
    for (int i = 0; i < H_N; i++) {
        has[i] = i == H_OPEN_JOURNAL ? exists_at(m->ws->jnld, m->ids) : exists_at(m->txfd, names[i]);
        if (has[i] < 0)
            return tx_errno(err, errno, "transaction %s: cannot read its state (%s)", m->ids,
                            names[i] ? names[i] : "journal");
    }
    return 0;
}

static int repair(txbox_multi *m, txbox_error *err)
{
    /* A copy as hard links cut short: its source's directories get their
     * own modes back (the source is where it was: each caller renames
     * only after the copy ended). */
    if (multi_restore_modes(m, "link.modes", err) < 0)
        return tx_err_ctx(err, "transaction %s", m->ids);
    int has[H_N];
    if (survey(m, has, err) < 0)
        return -1;
    /* A commit that stopped before its commit point: back to the layer as
     * it was before the scan (layer.keep), or to the upper if the scan
     * had not begun. */
    if (!has[H_LAYER] && has[H_UPPER] && !has[H_JOURNAL] && !has[H_OPEN_JOURNAL]) {
        if (has[H_KEEP] && tree_remove(m->txfd, "upper") < 0)
            return tx_errno(err, errno, "transaction %s: cannot drop its scanned changes", m->ids);
        if (renameat(m->txfd, has[H_KEEP] ? "layer.keep" : "upper", m->txfd, "layer") < 0)
            return tx_errno(err, errno, "transaction %s: cannot restore its layer", m->ids);
        has[H_LAYER] = 1;
        has[H_KEEP] = 0;
    }
    if (has[H_KEEP] && tree_remove(m->txfd, "layer.keep") < 0)
        return tx_errno(err, errno, "transaction %s: cannot drop its layer's copy", m->ids);
    /* A rollback: layer.new is complete once layer has been moved away. */
    if (has[H_NEW]) {
        if (!has[H_LAYER]) {
            if (renameat(m->txfd, "layer.new", m->txfd, "layer") < 0)
                return tx_errno(err, errno, "transaction %s: cannot finish a rollback", m->ids);
        } else if (tree_remove(m->txfd, "layer.new") < 0) {
            return tx_errno(err, errno, "transaction %s: cannot drop an unfinished rollback", m->ids);
        }
    }
    if (has[H_OLD] && tree_remove(m->txfd, "layer.old") < 0)
        return tx_errno(err, errno, "transaction %s: cannot drop its old layer", m->ids);
    (void)tree_remove(m->txfd, "sp.tmp");
    /* a commit's journal, cut short before its commit point (recovery
     * leaves it: no process owns the transaction) */
    char jt[48];
    snprintf(jt, sizeof jt, "%s.tmp", m->ids);
    (void)unlinkat(m->ws->jnld, jt, 0);
    return 0;
}

static int open_layer(txbox_multi *m, txbox_error *err)
{
    if (m->layerfd >= 0)
        close(m->layerfd);
    m->layerfd = openat(m->txfd, "layer", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (m->layerfd < 0)
        return tx_errno(err, errno, "transaction %s: cannot open its layer", m->ids);
    return 0;
}

void txbox_multi_close(txbox_multi *m)
{
    if (!m)
        return;
    if (m->layerfd >= 0)
        close(m->layerfd);
    if (m->lworkfd >= 0) {
        close(m->lworkfd);
        (void)tree_remove(m->txfd, "lwork"); /* overlay leaves work/ there, mode 0 */
    }
    if (m->txfd >= 0)
        close(m->txfd);
    if (m->lockfd >= 0)
        close(m->lockfd); /* releases the flock */
    json_decref(m->state);
    free(m);
}

int txbox_multi_open(txbox_ws *ws, const char *id, txbox_multi **out, txbox_error *err)
{
    *out = NULL;
    uint64_t n;
    if (!parse_u64(id, &n) || !n)
        return tx_err(err, EINVAL, "'%s' is not a transaction id", id);
    txbox_multi *m = xcalloc(1, sizeof *m);
    char *oc = NULL;
    m->ws = ws;
    m->id = n;
    m->lockfd = m->layerfd = m->lworkfd = -1;
    snprintf(m->ids, sizeof m->ids, "%llu", (unsigned long long)n);
    snprintf(m->layer_rel, sizeof m->layer_rel, "%s/tx/%s/layer", TXBOX_STATE_DIR, m->ids);
    snprintf(m->lwork_rel, sizeof m->lwork_rel, "%s/tx/%s/lwork", TXBOX_STATE_DIR, m->ids);
    m->txfd = openat(ws->txd, m->ids, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int rc = 0;
    if (m->txfd < 0 || exists_at(m->txfd, "multi") <= 0) {
        tx_err(err, ENOENT, "no multi-command transaction %s", m->ids);
        rc = tx_remedy(err, TXBOX_REMEDY_STATUS, NULL);
        goto out;
    }
    m->lockfd = openat(m->txfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (m->lockfd < 0) {
        rc = tx_errno(err, errno, "cannot lock transaction %s", m->ids);
        goto out;
    }
    /* one process at a time: the others wait, bounded and cancellable */
    char what[64];
    snprintf(what, sizeof what, "the lock of transaction %s", m->ids);
    if ((rc = tx_flock_wait(m->lockfd, what, 0, NULL, err)) < 0)
        goto out;
    if (read_file_at(m->txfd, "outcome", 256, &oc, NULL, NULL) == 0) {
        oc[strcspn(oc, "\n")] = 0;
        rc = tx_err(err, EINVAL, "transaction %s is closed (%s)", m->ids, oc);
        goto out;
    }
    int closed = exists_at(m->txfd, "journal");
    if (closed < 0) {
        rc = tx_errno(err, errno, "transaction %s: cannot read its state", m->ids);
        goto out;
    }
    if (closed) {
        /* its commit record: committed, the process died before it wrote
         * the outcome */
        tx_write_outcome(m->txfd, "committed");
        rc = tx_err(err, EINVAL, "transaction %s is closed (committed)", m->ids);
        goto out;
    }
    if (!(m->state = read_state(m->txfd))) {
        rc = tx_err(err, EIO, "transaction %s: its state is unreadable", m->ids);
        goto out;
    }
    if ((rc = repair(m, err)) < 0 || (rc = open_layer(m, err)) < 0)
        goto out;
    /* the work directory of the overlay that shows the layer (empty) */
    (void)tree_remove(m->txfd, "lwork");
    if (mkdirat(m->txfd, "lwork", 0700) < 0 ||
        (m->lworkfd = openat(m->txfd, "lwork", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        rc = tx_errno(err, errno, "transaction %s: cannot create a work directory", m->ids);
        goto out;
    }
    int incoming = exists_at(m->txfd, "incoming");
    if (incoming < 0) {
        rc = tx_errno(err, errno, "transaction %s: cannot read its state", m->ids);
        goto out;
    }
    if (incoming) {
        /* A command that succeeded but whose merge was cut short. */
        if ((rc = multi_finish_merge(m, NULL, err)) < 0)
            goto out;
        json_object_set_new(m->state, "commands",
                            json_integer((json_int_t)multi_state_u64(m, "commands") + 1));
        rc = multi_write_state(m, err);
    }
out:
    free(oc);
    if (rc < 0)
        txbox_multi_close(m);
    else
        *out = m;
    return rc;
}

static int refuse_aborting(const txbox_multi *m, txbox_error *err)
{
    tx_err(err, EINVAL, "transaction %s is being aborted", m->ids);
    return tx_remedy(err, TXBOX_REMEDY_ABORT, m->ids);
}

/* ---- savepoints: layer/ as hard links ---- */

/* Copies the directory sfd (at rel under tx/ID/) into dfd as hard links; a
 * source directory without owner rwx is granted them while it is read, its
 * mode recorded in ml first (a crash between leaves the record for
 * repair()). Each directory made counts as a fault point (crash tests). */
static int link_tree(const txbox_multi *m, struct modes_log *ml, int sfd, const char *rel, int dfd,
                     unsigned depth, txbox_error *err)
{
    if (depth > 4096)
        return tx_err(err, ELOOP, "directory tree too deep");
    _cleanup_dir_ DIR *d = fdopendir(dup(sfd));
    if (!d)
        return tx_errno(err, errno, "cannot read the layer");
    rewinddir(d);
    struct dirent *de;
    while ((errno = 0, de = readdir(d))) {
        const char *name = de->d_name;
        if (!strcmp(name, ".") || !strcmp(name, ".."))
            continue;
        struct stat st;
        if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return tx_errno(err, errno, "cannot stat %s in the layer", name);
        if (!S_ISDIR(st.st_mode)) {
            if (linkat(sfd, name, dfd, name, 0) == 0)
                continue;
            if (tree_copy(sfd, name, dfd, name, NULL, err) < 0) /* e.g. hard links refused */
                return -1;
            continue;
        }
        if (fs_mkdirat(dfd, name, 0700) < 0)
            return tx_errno(err, errno, "cannot create %s in a savepoint", name);
        struct stat cst;
        _cleanup_free_ char *crel = xasprintf("%s/%s", rel, name);
        _cleanup_close_ int cs = multi_open_dir_rw(ml, sfd, name, crel, &cst);
        _cleanup_close_ int cd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (cs < 0 || cd < 0)
            return tx_errno(err, errno, "cannot open %s", name);
        int rc = link_tree(m, ml, cs, crel, cd, depth + 1, err);
        struct merge g = {.err = err};
        if (rc == 0)
            rc = multi_copy_dir_meta(&g, cs, &st, cd, name);
        if (rc == 0 && multi_is_opaque(m, cs)) {
            char x[64];
            snprintf(x, sizeof x, "%sopaque", ovl_pfx(m->ws));
            if (fsetxattr(cd, x, "y", 1, 0) < 0)
                rc = tx_errno(err, errno, "cannot mark %s opaque", name);
        }
        if (fchmod(cs, st.st_mode & 07777) < 0) {
            ml->unrestored = true;
            if (rc == 0)
                rc = tx_errno(err, errno, "cannot restore the mode of %s", name);
        }
        if (rc < 0)
            return -1;
    }
    if (errno)
        return tx_errno(err, errno, "cannot read the layer");
    return 0;
}

/* Copies directory src (under txfd) to dst, as hard links. */
static int link_copy(txbox_multi *m, const char *src, const char *dst, txbox_error *err)
{
    (void)tree_remove(m->txfd, dst);
    struct stat st;
    struct modes_log ml = {m, "link.modes", -1, false};
    _cleanup_close_ int s = multi_open_dir_rw(&ml, m->txfd, src, src, &st);
    if (s < 0) {
        int e = errno;
        if (ml.fd >= 0)
            close(ml.fd);
        return tx_errno(err, e, "cannot open %s", src);
    }
    int rc = 0;
    _cleanup_close_ int d = -1;
    if (fs_mkdirat(m->txfd, dst, 0700) < 0)
        rc = tx_errno(err, errno, "cannot create %s", dst);
    else if ((d = openat(m->txfd, dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        rc = tx_errno(err, errno, "cannot open %s", dst);
    struct merge g = {.err = err};
    if (rc == 0)
        rc = link_tree(m, &ml, s, src, d, 0, err);
    if (rc == 0)
        rc = multi_copy_dir_meta(&g, s, &st, d, dst);
    if (fchmod(s, st.st_mode & 07777) < 0) {
        ml.unrestored = true;
        if (rc == 0)
            rc = tx_errno(err, errno, "cannot restore the mode of %s", src);
    }
    if (ml.fd >= 0) {
        close(ml.fd);
        /* every granted mode given back: the records go (else repair()
         * gives them back at the next open of the transaction) */
        if (!ml.unrestored && unlinkat(m->txfd, ml.file, 0) < 0 && errno != ENOENT && rc == 0)
            rc = tx_errno(err, errno, "cannot remove %s", ml.file);
    }
    return rc;
}

/* The savepoints, in the order they were made: sp/N.NAME. */
struct sps {
    char **v; /* directory names */
    uint64_t *seq;
    size_t n;
};

static void sps_free(struct sps *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    free(s->seq);
}

static void list_savepoints(int txfd, struct sps *out)
{
    memset(out, 0, sizeof *out);
    DIR *d = opendir_at(txfd, "sp");
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        char *dot = strchr(de->d_name, '.');
        if (!dot || dot == de->d_name)
            continue;
        _cleanup_free_ char *num = strndup(de->d_name, (size_t)(dot - de->d_name));
        uint64_t s;
        if (!num || !parse_u64(num, &s))
            continue;
        size_t i = out->n++;
        out->v = xrealloc(out->v, out->n * sizeof *out->v);
        out->seq = xrealloc(out->seq, out->n * sizeof *out->seq);
        /* insertion by sequence number */
        while (i > 0 && out->seq[i - 1] > s) {
            out->v[i] = out->v[i - 1];
            out->seq[i] = out->seq[i - 1];
            i--;
        }
        out->v[i] = xstrdup(de->d_name);
        out->seq[i] = s;
    }
    closedir(d);
}

static ssize_t find_savepoint(const struct sps *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(strchr(s->v[i], '.') + 1, name))
            return (ssize_t)i;
    return -1;
}

int txbox_multi_savepoint(txbox_multi *m, const char *name, txbox_error *err)
{
    if (multi_aborting(m))
        return refuse_aborting(m, err);
    if (!name_ok(name))
        return tx_err(err, EINVAL,
                      "a savepoint name is 1 to %d letters, digits, '.', '_' or '-', "
                      "not starting with '.'",
                      MAX_NAME);
    if (mkdirat(m->txfd, "sp", 0700) < 0 && errno != EEXIST)
        return tx_errno(err, errno, "cannot create the savepoints directory");
    uint64_t seq = multi_state_u64(m, "next_savepoint");
    if (!seq)
        seq = 1;
    _cleanup_close_ int spd = openat(m->txfd, "sp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (spd < 0)
        return tx_errno(err, errno, "cannot open the savepoints directory");
    fs_fault_arm(); /* crash tests: the copy and its rename */
    if (link_copy(m, "layer", "sp.tmp", err) < 0) {
        fs_fault_disarm();
        return tx_err_ctx(err, "savepoint %s", name);
    }
    struct sps s;
    list_savepoints(m->txfd, &s);
    ssize_t old = find_savepoint(&s, name);
    _cleanup_free_ char *dn = xasprintf("%llu.%s", (unsigned long long)seq, name);
    int rc = 0;
    if (old >= 0 && tree_remove(spd, s.v[old]) < 0)
        rc = tx_errno(err, errno, "cannot replace savepoint %s", name);
    if (rc == 0 && fs_renameat(m->txfd, "sp.tmp", spd, dn, 0) < 0)
        rc = tx_errno(err, errno, "cannot record savepoint %s", name);
    fs_fault_disarm();
    sps_free(&s);
    if (rc < 0)
        return -1;
    json_object_set_new(m->state, "next_savepoint", json_integer((json_int_t)seq + 1));
    if (!json_is_object(json_object_get(m->state, "sp_effects"))) /* saga.c: effects before it */
        json_object_set_new(m->state, "sp_effects", json_object());
    json_object_set_new(json_object_get(m->state, "sp_effects"), name,
                        json_integer((json_int_t)saga_count(m->txfd)));
    return multi_write_state(m, err);
}

int txbox_multi_rollback(txbox_multi *m, const char *name, txbox_error *err)
{
    struct sps s;
    list_savepoints(m->txfd, &s);
    ssize_t at = -1;
    int rc = 0;
    if (name && (at = find_savepoint(&s, name)) < 0)
        rc = tx_err(err, ENOENT, "transaction %s has no savepoint %s", m->ids, name);
    _cleanup_free_ char *src = at >= 0 ? xasprintf("sp/%s", s.v[at]) : NULL;
    if (rc == 0 && multi_aborting(m))
        rc = refuse_aborting(m, err);
    /* 0. the external effects of the commands rolled back are compensated */
    if (rc == 0) {
        json_int_t from =
            name ? json_integer_value(json_object_get(json_object_get(m->state, "sp_effects"), name)) : 0;
        rc = saga_compensate(m->ws, m->txfd, (size_t)from, NULL, txbox_run, err);
    }
    /* 1. the state to return to, complete, as layer.new */
    fs_fault_arm(); /* crash tests: the copy and the swap */
    if (rc == 0)
        rc = src ? link_copy(m, src, "layer.new", err) : make_layer(m->ws, m->txfd, "layer.new", err);
    /* 2. swap (repair() finishes or undoes an interrupted swap) */
    if (rc == 0 && (fs_renameat(m->txfd, "layer", m->txfd, "layer.old", 0) < 0 ||
                    fs_renameat(m->txfd, "layer.new", m->txfd, "layer", 0) < 0))
        rc = tx_errno(err, errno, "transaction %s: cannot roll back", m->ids);
    fs_fault_disarm();
    if (rc == 0 && tree_remove(m->txfd, "layer.old") < 0)
        rc = tx_errno(err, errno, "transaction %s: cannot drop the rolled-back changes", m->ids);
    /* 3. the savepoints made after it are gone */
    _cleanup_close_ int spd = openat(m->txfd, "sp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    for (size_t i = at >= 0 ? (size_t)at + 1 : 0; rc == 0 && spd >= 0 && i < s.n; i++)
        if (tree_remove(spd, s.v[i]) < 0)
            rc = tx_errno(err, errno, "cannot drop savepoint %s", s.v[i]);
    sps_free(&s);
    if (rc < 0)
        return rc;
    return open_layer(m, err);
}

/* ---- the end of a transaction ---- */

static char *end_info(const txbox_multi *m, const char *outcome, json_t *changes, json_t *extra)
{
    const char *name = json_string_value(json_object_get(m->state, "name"));
    json_t *o = json_pack("{s:s,s:s,s:s,s:O,s:I,s:s}", "tx", m->ids, "outcome", outcome, "command",
                          name ? name : "(multi-command transaction)", "started",
                          json_object_get(m->state, "started"), "commands",
                          (json_int_t)multi_state_u64(m, "commands"), "verdict", "uncertain");
    json_object_set_new(o, "exit_code", json_integer(0));
    json_object_set_new(o, "workspace", json_string(m->ws->path));
    json_object_set_new(o, "backend", json_string("overlay"));
    if (changes)
        json_object_set(o, "changes", changes);
    if (extra)
        json_object_update(o, extra);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

static int multi_drop(txbox_multi *m, json_t *eff, txbox_error *err);

int txbox_multi_abort(txbox_multi *m, txbox_error *err) { return txbox_multi_abort_report(m, NULL, err); }

int txbox_multi_abort_report(txbox_multi *m, char **report, txbox_error *err)
{
    if (report)
        *report = NULL;
    /* saga.c: compensations first, newest first; "aborting" makes the
     * transaction refuse everything but abort until they are done */
    json_t *eff = NULL;
    json_object_set_new(m->state, "aborting", json_true());
    if (multi_write_state(m, err) < 0 || saga_compensate(m->ws, m->txfd, 0, &eff, txbox_run, err) < 0)
        return -1;
    if (report)
        *report = json_dumps(eff, JSON_COMPACT);
    int rc = multi_drop(m, eff, err);
    json_decref(eff);
    if (rc < 0 && report) {
        free(*report);
        *report = NULL;
    }
    return rc;
}

static int multi_drop(txbox_multi *m, json_t *eff, txbox_error *err)
{
    if (tree_remove(m->txfd, "layer") < 0 || tree_remove(m->txfd, "sp") < 0 ||
        tree_remove(m->txfd, "lwork") < 0)
        return tx_errno(err, errno, "transaction %s: cannot drop its changes", m->ids);
    tx_write_outcome(m->txfd, "aborted");
    _cleanup_free_ char *info =
        end_info(m, "rolled_back", NULL, json_array_size(json_object_get(eff, "effects")) ? eff : NULL);
    txbox_error le = {0};
    if (store_log(m->ws, m->id, "rolled_back", info, NULL, m->txfd, &le) < 0)
        return tx_err(err, le.code, "transaction %s aborted, but the audit log: %s", m->ids, le.msg);
    return 0;
}

void txbox_multi_set_policy(txbox_multi *m, const txbox_policy *p) { m->policy = p; }

/* Rules on effects (effects.c): an effect rule refused the write set (v).
 * rollback: the transaction ends, nothing applied (rejected); hold: it ends
 * held, its scanned upper kept for txbox approve / reject. */
static int effect_stop(txbox_multi *m, json_t *v, const struct tx_ops *ops, uint64_t base, json_t *changes,
                       json_t *res, int *status, const char **outcome, char **first, txbox_remedy *remedy,
                       txbox_error *err)
{
    bool hold = !strcmp(json_string_value(json_object_get(v, "action")), "hold");
    *outcome = hold ? "held" : "rejected";
    *status = hold ? TXBOX_EXIT_HELD : TXBOX_EXIT_BLOCKED;
    json_object_update(res, v);
    json_object_set(res, "effect_action", json_object_get(v, "action"));
    json_object_set(res, "effect_violations", json_object_get(v, "violations"));
    json_object_del(res, "violations");
    json_object_del(res, "action");
    if (hold) {
        _cleanup_free_ char *ci = end_info(m, "committed", changes, NULL);
        if (effects_hold(m->ws, m->id, m->txfd, base, ops, ci, v, err) < 0)
            return -1;
    } else {
        (void)tree_remove(m->txfd, "upper");
    }
    (void)tree_remove(m->txfd, "sp");
    (void)tree_remove(m->txfd, "lwork");
    tx_write_outcome(m->txfd, *outcome);
    _cleanup_free_ char *h =
        xasprintf("txbox: tx %s %s", m->ids, hold ? "held for review" : "rejected, nothing applied,");
    if (hold)
        remedy_set(remedy, TXBOX_REMEDY_REVIEW, NULL, strlen(h));
    *first =
        xasprintf("%s by effect rule %s: %s — %s", h, json_string_value(json_object_get(v, "effect_rule")),
                  json_string_value(json_object_get(v, "reason")),
                  json_string_value(json_object_get(v, "suggestion")) ?: "");
    _cleanup_free_ char *info = end_info(m, *outcome, changes, v);
    txbox_error le = {0};
    if (store_log(m->ws, m->id, *outcome, info, NULL, m->txfd, &le) < 0)
        json_object_set_new(res, "log_error", json_string(le.msg));
    return 0;
}

/* ---- the commit, through the one sequence (commit.c) ---- */

struct multi_commit {
    txbox_multi *m;
    const txbox_run_opts *verify;
    json_t *res, *eff;
    json_t *losses; /* what the commit destroys (losses.h), as reported */
    int *status;
    const char **outcome;
    char **first;
    txbox_remedy *remedy;
};

/* The floor of the verify command's options (txbox_run_opts.min_free_bytes),
 * as commit.c takes it. */
static int64_t run_min_free_of(const txbox_run_opts *o)
{
    return o->min_free_bytes > 0 ? o->min_free_bytes : o->min_free_bytes < 0 ? 0 : -1;
}

/* The layer becomes the upper the sequence scans. The scan changes it in
 * place (it strips overlay attributes such as a directory's opaqueness):
 * layer.keep, the layer as hard links, is what the transaction returns to
 * if the commit stops before its commit point (mc_finish or, after a
 * crash, repair()). */
static int mc_prepare(struct tx_commit *c, txbox_error *err)
{
    struct multi_commit *mc = c->h->ctx;
    txbox_multi *m = mc->m;
    if (link_copy(m, "layer", "layer.keep", err) < 0)
        return -1;
    if (fs_renameat(m->txfd, "layer", m->txfd, "upper", 0) < 0)
        return tx_errno(err, errno, "transaction %s: cannot prepare its commit", m->ids);
    return 0;
}

static int mc_judge(struct tx_commit *c, txbox_error *err)
{
    struct multi_commit *mc = c->h->ctx;
    txbox_multi *m = mc->m;
    const txbox_policy *pol = m->policy ? m->policy : mc->verify ? mc->verify->policy : NULL;
    char **hide = tx_hidden_paths(mc->verify ? mc->verify->deny_read : NULL, pol, c->ws);
    struct gitcfg_ctx gc = {.ws = c->ws,
                            .txfd = m->txfd,
                            .txs = m->ids,
                            .hide = (const char *const *)hide,
                            .allow_degraded = mc->verify ? mc->verify->allow_degraded
                                                         : getenv("TXBOX_ALLOW_DEGRADED") != NULL};
    /* what the commit would destroy that exists nowhere else, as for a
     * single command (run.c's judge): reported, and judged by the rules
     * with losses: (no person answers an `ask` here: reported) */
    struct losses ls = {0};
    fs_fault_disarm();
    int rc = losses_measure(&(struct losses_in){.ws = c->ws,
                                                .txfd = m->txfd,
                                                .txs = m->ids,
                                                .upperfd = c->upperfd,
                                                .ops = &c->ops,
                                                .now = wall_time(),
                                                .pol = pol},
                            &ls, err);
    fs_fault_arm();
    if (rc == 0) {
        mc->losses = losses_json(&ls);
        json_object_set(mc->res, "losses", mc->losses);
        if (commit_relist_changes(c))
            json_object_set(mc->res, "changes", c->changes);
    }
    json_t *ev = NULL, *att = NULL;
    if (rc == 0)
        rc = effects_judge(pol, c->upperfd, c->ws->fd, &c->ops, &gc, &ls, &ev, &att, err);
    losses_free(&ls);
    tx_free_strv(hide);
    if (ev && effects_ask_unanswered(ev, &att))
        ev = NULL;
    if (att) /* reported in the result and logged with it */
        json_object_set_new(mc->res, "attention", att);
    if (rc < 0 || !ev)
        return rc;
    json_object_set(mc->res, "changes", c->changes);
    bool hold = !strcmp(json_string_value(json_object_get(ev, "action")), "hold");
    /* the scan's new data, durable before the hold as before a commit */
    if (hold && fs_syncset_sync(&c->durable, c->ws->fd) < 0)
        rc = tx_errno(err, errno, "cannot make the transaction's changes durable");
    if (rc == 0)
        rc = effect_stop(m, ev, &c->ops, c->base_gen, c->changes, mc->res, mc->status, mc->outcome, mc->first,
                         mc->remedy, err);
    json_decref(ev);
    return rc < 0 ? -1 : 1;
}

static char *mc_info(struct tx_commit *c)
{
    struct multi_commit *mc = c->h->ctx;
    json_t *eff = mc->eff = saga_kept(mc->m->txfd, false); /* external effects: they stay */
    if (eff)
        json_object_set(mc->res, "effects", json_object_get(eff, "effects"));
    if (json_object_get(mc->res, "attention")) { /* logged as for a single run */
        if (!eff)
            eff = mc->eff = json_object();
        json_object_set(eff, "attention", json_object_get(mc->res, "attention"));
    }
    if (mc->losses) { /* logged as for a single run: retention keeps them longest */
        if (!eff)
            eff = mc->eff = json_object();
        json_object_set(eff, "losses", mc->losses);
    }
    return end_info(mc->m, "committed", c->changes, eff);
}

static void mc_log(struct multi_commit *mc, const char *outcome, json_t *changes, json_t *extra)
{
    _cleanup_free_ char *info = end_info(mc->m, outcome, changes, extra);
    txbox_error le = {0};
    if (store_log(mc->m->ws, mc->m->id, outcome, info, NULL, mc->m->txfd, &le) < 0)
        json_object_set_new(mc->res, "log_error", json_string(le.msg));
}

static void mc_conflict(struct tx_commit *c, struct multi_commit *mc)
{
    txbox_multi *m = mc->m;
    *mc->outcome = "conflict";
    *mc->status = TXBOX_EXIT_CONFLICT;
    json_t *paths = c->clashes ? c->clashes : json_pack("[s]", c->clash);
    json_object_set(mc->res, "conflict_paths", paths);
    json_object_set(mc->res, "conflict_path", json_array_get(paths, 0));
    size_t more = json_array_size(paths) - 1;
    _cleanup_free_ char *and = more ? xasprintf(" (and %zu more paths)", more) : xstrdup("");
    if (c->held_by) {
        json_object_set_new(mc->res, "held_by", json_sprintf("%llu", (unsigned long long)c->held_by));
        _cleanup_free_ char *h = xasprintf("txbox: tx %s conflict: %s is held by transaction %llu, "
                                           "which could not be finished",
                                           m->ids, c->clash, (unsigned long long)c->held_by);
        remedy_set(mc->remedy, TXBOX_REMEDY_RECOVER, NULL, strlen(h));
        *mc->first = xasprintf("%s; its changes are kept in .txbox/tx/%s/upper, not applied", h, m->ids);
    } else {
        *mc->first = xasprintf("txbox: tx %s conflict: %s%s changed by another transaction "
                               "since begin; its changes are kept in .txbox/tx/%s/upper, not "
                               "applied",
                               m->ids, c->clash, and, m->ids);
    }
    if (!c->clashes)
        json_decref(paths);
    tx_write_outcome(m->txfd, "conflict");
    mc_log(mc, "conflict", c->changes, NULL);
}

/* The end, under the workspace lock: committed, conflict, held or
 * rejected end the transaction; an error before the commit point, or the
 * floor, leave it open, its layer as it was (repair(), which the next open
 * also runs). */
static void mc_finish(struct tx_commit *c, int rc, txbox_error *err)
{
    (void)err;
    struct multi_commit *mc = c->h->ctx;
    txbox_multi *m = mc->m;
    if (c->changes && !json_object_get(mc->res, "changes"))
        json_object_set(mc->res, "changes", c->changes);
    if (rc == 0 && (c->end == COMMIT_APPLIED || c->end == COMMIT_EMPTY)) {
        *mc->outcome = "committed";
        json_decref(saga_kept(m->txfd, true));
        tx_write_outcome(m->txfd, "committed");
        if (c->end == COMMIT_EMPTY) /* no journal: its row is logged here */
            mc_log(mc, "committed", c->changes, mc->eff);
    } else if (rc == 0 && c->end == COMMIT_CONFLICT) {
        mc_conflict(c, mc);
    } else if (rc == 0 && c->end == COMMIT_NO_SPACE) {
        *mc->outcome = "no_space";
        *mc->status = TXBOX_EXIT_NO_SPACE;
        json_object_set_new(mc->res, "space",
                            json_pack("{s:I,s:I}", "free_bytes", (json_int_t)c->space.free_bytes,
                                      "floor_bytes", (json_int_t)c->space.floor));
        *mc->first = xasprintf("txbox: tx %s not committed: the workspace's filesystem would keep %llu MiB "
                               "free, below its floor of %llu MiB; the transaction stays open",
                               m->ids, (unsigned long long)(c->space.free_bytes >> 20),
                               (unsigned long long)(c->space.floor >> 20));
    }
    if (rc == 0 && c->end != COMMIT_NO_SPACE) {
        /* it ended: the copy of its layer goes */
        (void)tree_remove(m->txfd, "layer.keep");
    } else if (!c->passed) {
        txbox_error re = {0};
        if (repair(m, &re) < 0) {
            /* the next open does it */
        }
    }
}

static int verify_status(const txbox_result *r)
{
    switch (txbox_result_outcome(r)) {
    case TXBOX_OUTCOME_BLOCKED:
        return TXBOX_EXIT_BLOCKED;
    case TXBOX_OUTCOME_TIMED_OUT:
        return TXBOX_EXIT_TIMEOUT;
    default:
        return txbox_result_exit_code(r) ? txbox_result_exit_code(r) : 1;
    }
}

int txbox_multi_commit(txbox_multi *m, const txbox_run_opts *verify, char **json, int *status, char **summary,
                       txbox_remedy *summary_remedy, txbox_error *err)
{
    txbox_remedy none, *remedy = summary_remedy ? summary_remedy : &none;
    *remedy = (txbox_remedy){0};
    *json = *summary = NULL;
    *status = 0;
    if (multi_aborting(m))
        return refuse_aborting(m, err);
    uint64_t t0 = now_ns();
    txbox_ws *ws = m->ws;
    json_t *res = json_pack("{s:s,s:O,s:I}", "tx", m->ids, "name", json_object_get(m->state, "name"),
                            "commands", (json_int_t)multi_state_u64(m, "commands"));
    if (!json_object_get(res, "name"))
        json_object_set_new(res, "name", json_null());
    const char *outcome = NULL;
    _cleanup_free_ char *first = NULL;
    if (verify) {
        txbox_run_opts vo = *verify;
        vo.multi = m;
        vo.capture = 1;
        m->discard = true;
        txbox_result *vr = NULL;
        int vrc = txbox_run(ws, &vo, &vr, err);
        m->discard = false;
        if (vrc < 0) {
            json_decref(res);
            return tx_err_ctx(err, "verify");
        }
        _cleanup_free_ char *vj = txbox_result_json(vr);
        json_object_set_new(res, "verify", json_loads(vj, 0, NULL));
        bool passed = txbox_result_outcome(vr) == TXBOX_OUTCOME_READ_ONLY && !txbox_result_exit_code(vr);
        if (!passed) {
            *status = verify_status(vr);
            outcome = "verify_failed";
            first = xasprintf("txbox: tx %s not committed: the verify command failed (exit status %d, "
                              "its run: tx %s); the transaction stays open",
                              m->ids, txbox_result_exit_code(vr), txbox_result_tx(vr));
        }
        txbox_result_free(vr);
    }
    int rc = 0;
    if (!outcome) {
        uint64_t t_commit = now_ns();
        struct multi_commit mc = {.m = m,
                                  .verify = verify,
                                  .res = res,
                                  .status = status,
                                  .outcome = &outcome,
                                  .first = &first,
                                  .remedy = remedy};
        const struct commit_hooks hooks = {
            .prepare = mc_prepare, .judge = mc_judge, .info = mc_info, .finish = mc_finish, .ctx = &mc};
        struct tx_commit c = {.ws = ws,
                              .id = m->id,
                              .txfd = m->txfd,
                              .upperfd = -1,
                              .base_gen = multi_state_u64(m, "base_gen"),
                              .scan = true,
                              .own = true,
                              .all_clashes = true,
                              .min_free = verify ? run_min_free_of(verify) : -1,
                              .cancel = verify ? verify->cancel : NULL,
                              .h = &hooks};
        rc = commit_run(&c, err);
        if (c.upperfd >= 0)
            close(c.upperfd);
        commit_free(&c);
        json_decref(mc.eff);
        json_decref(mc.losses);
        json_object_set_new(res, "commit_ms", json_real((double)(now_ns() - t_commit) / 1e6));
        if (rc == 0 && !strcmp(outcome, "committed")) {
            history_autogc(ws);
            size_t a, mo, d;
            changes_counts(json_object_get(res, "changes"), &a, &mo, &d);
            first = xasprintf("txbox: tx %s committed (%llu commands; %zu added, %zu modified, %zu deleted)",
                              m->ids, (unsigned long long)multi_state_u64(m, "commands"), a, mo, d);
            if (json_integer_value(json_object_get(mc.losses, "count")) > 0) {
                dbuf o; /* what was lost, and the way back */
                dbuf_init(&o, 0);
                dbuf_addstr(&o, first);
                result_losses_phrase(mc.losses, &o);
                free(first);
                first = xstrdup(dbuf_str(&o));
                dbuf_free(&o);
                remedy_set(remedy, TXBOX_REMEDY_UNDO, m->ids, strlen(first));
            }
        }
    }
    if (rc < 0) {
        json_decref(res);
        return -1;
    }
    if (!json_object_get(res, "changes"))
        json_object_set_new(
            res, "changes",
            json_pack("{s:[],s:[],s:[],s:b}", "added", "modified", "deleted", "truncated", 0));
    json_object_set_new(res, "outcome", json_string(outcome));
    json_object_set_new(res, "exit_code", json_integer(*status));
    json_object_set_new(res, "duration_ms", json_real((double)(now_ns() - t0) / 1e6));
    *json = json_dumps(res, JSON_COMPACT | JSON_REAL_PRECISION(12));
    *summary = steal_pointer(&first);
    json_decref(res);
    return 0;
}

int txbox_multi_status(txbox_ws *ws, char **json, txbox_error *err)
{
    *json = NULL;
    uint64_t *ids;
    size_t nids;
    if (ws_tx_ids(ws, &ids, &nids, err) < 0)
        return -1;
    json_t *arr = json_array(), *att = json_array(); /* att: saga.c */
    json_t *stuck = json_array();
    for (size_t t = 0; t < nids; t++) { /* oldest first */
        char idn[32];
        snprintf(idn, sizeof idn, "%llu", (unsigned long long)ids[t]);
        _cleanup_close_ int tfd = openat(ws->txd, idn, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (tfd >= 0) /* external effects that need attention (saga.c), open or closed */
            saga_attention_add(att, tfd, idn);
        if (tfd >= 0 && exists_at(ws->jnld, idn) > 0 && exists_at(tfd, TX_STUCK) > 0) {
            /* recovery could neither finish nor roll it back (journal.c, I9) */
            char why[1024] = "";
            _cleanup_close_ int wf = openat(tfd, TX_STUCK, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            ssize_t n = wf >= 0 ? read(wf, why, sizeof why - 1) : -1;
            why[n > 0 ? n : 0] = 0;
            why[strcspn(why, "\n")] = 0;
            json_array_append_new(stuck, json_pack("{s:s,s:s}", "tx", idn, "error", why));
            continue;
        }
        if (tfd < 0 || exists_at(tfd, "outcome") != 0 || exists_at(tfd, "journal") != 0)
            continue; /* closed (a commit record: committed) */
        json_t *st = read_state(tfd);
        if (!st)
            continue;
        struct sps s;
        list_savepoints(tfd, &s);
        json_t *sp = json_array();
        for (size_t i = 0; i < s.n; i++)
            json_array_append_new(sp, json_string(strchr(s.v[i], '.') + 1));
        sps_free(&s);
        /* busy: a process works on it now */
        _cleanup_close_ int lf = openat(tfd, "lock", O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        bool busy = lf >= 0 && flock(lf, LOCK_EX | LOCK_NB) < 0;
        json_t *name = json_object_get(st, "name");
        json_array_append_new(arr,
                              json_pack("{s:s,s:O,s:O,s:O,s:O,s:o,s:b}", "tx", idn, "name",
                                        name ? name : json_null(), "started", json_object_get(st, "started"),
                                        "base_gen", json_object_get(st, "base_gen"), "commands",
                                        json_object_get(st, "commands"), "savepoints", sp, "busy", busy));
        if (json_is_true(json_object_get(st, "aborting"))) /* saga.c: an abort cut short */
            json_object_set_new(json_array_get(arr, json_array_size(arr) - 1), "aborting", json_true());
        json_decref(st);
    }
    free(ids);
    json_t *o = json_pack("{s:o,s:o,s:o}", "transactions", arr, "attention", att, /* saga.c */
                          "stuck", stuck);
    *json = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return 0;
}
