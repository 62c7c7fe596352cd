/* The transaction engine's internal interfaces: workspace state, the scan of
 * an overlay upper into operations, the commit journal, recovery, the copy
 * backend and tree utilities. */
#ifndef TXBOX_TX_H
#define TXBOX_TX_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>

#include <jansson.h>

#include "tree.h"
#include "util.h"

/* ---- workspace (ws.c) ---- */
struct txbox_ws {
    char *path; /* real absolute path */
    int fd;     /* the workspace directory (O_RDONLY|O_DIRECTORY) */
    int sfd;    /* .txbox/ */
    int txd;    /* .txbox/tx/ */
    int actd;   /* .txbox/active/ */
    int jnld;   /* .txbox/journal/ */
    int cmtd;   /* .txbox/commits/ */
    dev_t dev;
    bool root;
    bool stateless;     /* opened without .txbox (TXBOX_WS_READ_ONLY): the fds above but fd are -1 */
    struct sqlite3 *db; /* the audit log, kept open for this handle (store_shared) */
    void (*db_close)(struct sqlite3 *db); /* set with db by the store: closes it */
    struct ws_hashes *hashes;             /* store_hash_note's, for one commit; one block (free) */
};

#define TXBOX_STATE_DIR ".txbox"
/* 2: transactions' directories may be archived (compact.c) and ids start
 * above .txbox/floor, which format 1's txbox does not know; a format-1
 * workspace is upgraded (ws_format_upgrade) by its first compaction. */
#define TXBOX_STATE_FORMAT 2

/* txbox_ws_open without the crash recovery (recover.c adds it). */
MUST_CHECK int ws_open(const char *dir, unsigned flags, txbox_ws **out, txbox_error *err);
/* flock(2) on .txbox/lock: serializes commits, recovery, gc. Released by
 * the kernel when the holder dies, so a lock is never stale; a wait for it
 * is bounded (TXBOX_LOCK_WAIT), ends on cancel or the front's watched flag
 * (tx_cancel_watch), and names the holder (tx_flock_wait). */
MUST_CHECK int ws_lock(txbox_ws *ws, int *lockfd, txbox_error *err);
MUST_CHECK int ws_lock_cancel(txbox_ws *ws, int *lockfd, const volatile int *cancel, txbox_error *err);
/* A reader that does not recover (log, show, diff): while a journal is in
 * flight and the workspace lock is held (a commit applying it, or a
 * recovery), waits for the lock (bounded, as ws_lock) so that it reads the
 * state the apply leaves, not the one before; at once otherwise. */
MUST_CHECK int ws_wait_settled(txbox_ws *ws, txbox_error *err);
/* ws_lock, or -1 (EWOULDBLOCK) at once if another process holds it. */
MUST_CHECK int ws_trylock(txbox_ws *ws, int *lockfd, txbox_error *err);
void ws_unlock(int lockfd);
/* Allocates the next transaction id (above the id floor) and creates
 * .txbox/tx/ID/ and the owner lock .txbox/active/ID (held, flock'd, in
 * *activefd), into which it writes the base generation, read after the
 * registration (*base_gen when not NULL: the transaction's base). */
MUST_CHECK int ws_new_tx(txbox_ws *ws, uint64_t *id, int *txfd, int *activefd, uint64_t *base_gen,
                         txbox_error *err);
/* Registers this process as the owner of transaction id, which no process
 * owned (a multi-command transaction, a held one, while it commits): the
 * owner lock active/ID, held in *activefd until ws_end_tx. Workspace lock
 * held. */
MUST_CHECK int ws_own_tx(txbox_ws *ws, uint64_t id, int *activefd, txbox_error *err);
/* The base generation a live transaction recorded in its owner lock (-1:
 * none readable). */
int ws_tx_live_base(txbox_ws *ws, uint64_t id, uint64_t *gen);
/* The id floor: ids at or below it are never given out again. Raised
 * durably (fsync) by compaction before it archives any directory. */
uint64_t ws_id_floor(txbox_ws *ws);
/* .txbox/format raised to TXBOX_STATE_FORMAT (durably) if it is older. */
MUST_CHECK int ws_format_upgrade(txbox_ws *ws, txbox_error *err);
MUST_CHECK int ws_set_id_floor(txbox_ws *ws, uint64_t floor, txbox_error *err);
/* Archives (moves to the trash) the directories of ended transactions that
 * nothing can read any more (compact.c). Workspace lock held. *n: how
 * many. */
MUST_CHECK int ws_compact(txbox_ws *ws, size_t *n, txbox_error *err);
/* ws_compact when id is a multiple of TXBOX_COMPACT_EVERY, if the lock can
 * be had at once; best effort. */
void ws_compact_maybe(txbox_ws *ws, uint64_t id);
#define TXBOX_COMPACT_EVERY 64
/* Releases and removes the owner lock. */
void ws_end_tx(txbox_ws *ws, uint64_t id, int activefd);
MUST_CHECK int ws_read_gen(txbox_ws *ws, uint64_t *gen, txbox_error *err);
/* The cached generation (.txbox/gen): ws_read_gen's starting point, which
 * then counts the commit records beyond it; 0 when absent. */
uint64_t ws_gen_cache(txbox_ws *ws);
/* The ids of the transactions in .txbox/tx/, ascending (*ids: caller frees;
 * NULL when there are none). */
MUST_CHECK int ws_tx_ids(txbox_ws *ws, uint64_t **ids, size_t *n, txbox_error *err);
/* The same of any directory of ids (journal/, active/). */
MUST_CHECK int ws_list_ids(int dirfd, uint64_t **ids, size_t *n, txbox_error *err);
MUST_CHECK int ws_write_gen(txbox_ws *ws, uint64_t gen, txbox_error *err);
/* Is the process that owns transaction id gone? (its active lock is free) */
bool ws_tx_owner_dead(txbox_ws *ws, uint64_t id);

/* The trash, .txbox/trash/: the scratch directories of ended transactions
 * (an overlay's upper and work directory), moved there whole by one rename
 * and removed later: by a detached process once the CLI's txbox has
 * ended (txbox_ws_clean_detached), else while a later command runs, or by
 * gc: no result waits for it. Removing a directory is
 * mostly waiting, not work: on ext4 mounted with discard (this project's
 * machines) the freed block is discarded synchronously at the directory's
 * last close, about 0.2 ms each, so removing the upper of a ten-file
 * change took 2-6 ms after every transaction.
 *
 * ws_trash moves txfd/name to trash/TXS.name (1; 0: there is no txfd/name;
 * -1: the caller removes it itself). ws_trash_has_entries: may the trash
 * hold something (one fstatat, for the hot path: no thread, no listing when
 * it is empty)? ws_trash_clean removes trash entries, oldest transaction
 * first, until at most keep are left or *stop is set (NULL: never); one
 * process at a time (a lock on the trash directory: a second one returns at
 * once). */
#define TXBOX_TRASH_KEEP 16
/* grant: first give the owner rwx on the tree's directories (and with
 * WS_TRASH_GRANT_FILES rw on its files: tree_grant_owner) so that an
 * unprivileged owner's rm -rf or cp -a of the workspace still works while
 * it lies in the trash: overlayfs makes work/work and
 * work/incompat/volatile/dirty mode 000, a command may leave a directory
 * so. A committed upper needs none: the scan gave every directory left in
 * it owner rwx. */
enum { WS_TRASH_GRANT_DIRS = 1, WS_TRASH_GRANT_FILES = 2 };
MUST_CHECK int ws_trash(txbox_ws *ws, int txfd, const char *name, const char *txs, unsigned grant);
/* Moves tx/IDN to trash/IDN.archived (compact.c): 0, or -1 with errno. The
 * bound a command keeps after it ends (stop NULL, keep > 0) leaves these to
 * the cleaner. */
MUST_CHECK int ws_archive(txbox_ws *ws, const char *idn);
bool ws_trash_has_entries(txbox_ws *ws);
void ws_trash_clean(txbox_ws *ws, const atomic_bool *stop, size_t keep);

/* ---- operations (scan.c) ---- */
enum op_kind { OP_REPLACE = 1, OP_DELETE = 2, OP_META = 3 };

struct tx_meta {
    uint32_t mode, uid, gid;
    int64_t atime_s, atime_ns, mtime_s, mtime_ns;
};

struct tx_op {
    uint8_t kind;
    uint8_t had_old;        /* REPLACE: the workspace had an entry at path; META: the
                         directory's extended attributes changed */
    uint8_t new_dir;        /* REPLACE: the new entry is a directory (whole subtree) */
    uint8_t old_dir;        /* the old entry was a directory */
    uint8_t linked;         /* REPLACE, from the scan (not journaled): the old entry is a
                         regular file with other hard links (links.c) */
    uint8_t quiet;          /* REPLACE of a file, not journaled: a rewrite that changed
                         nothing anyone reads (git's index with only its stat cache
                         refreshed, lib/tx/losses.c): ops_changes leaves it out */
    uint32_t news_first;    /* REPLACE, from the scan (not journaled): its new */
    uint32_t news_n;        /* entries in ops->news (0: none recorded) */
    char *path;             /* relative to the workspace root; "" = the root */
    struct tx_meta nw, old; /* META: new and old metadata of the directory.
                               REPLACE: the new entry and the old one (if
                               any) as committed; DELETE: the old entry.
                               The type bits of mode are set (meta_entry)
                               when recorded, unset in older journals. */
};

struct tx_ops {
    struct tx_op *v;
    size_t n, cap;
    /* files changed in place whose hard-link group the commit splits (a
     * name outside the workspace): links.c */
    char **split_links;
    size_t n_split;
    /* Every entry of the new entries' trees, as the scan left them in the
     * upper (their committed modes set), in the scan's order (a tree's
     * root first, each directory before what it holds): what the effect
     * rules and the audit row's hashes read instead of walking the upper
     * again. In memory only, for at most TX_NEWS_MAX entries; an
     * operation without them (news_n 0: a journal's, a big change's) is
     * walked as before. */
    struct tx_new *news;
    size_t n_news, cap_news;
};

struct tx_new {
    char *path; /* relative to the workspace root */
    struct stat st;
};
#define TX_NEWS_MAX 200000

/* o's entries in ops->news (*n of them; the first is o's own path), or
 * NULL when the scan recorded none for it. */
const struct tx_new *ops_news(const struct tx_ops *ops, const struct tx_op *o, size_t *n);

void ops_free(struct tx_ops *ops);
/* Appends an operation of kind on path (copied); every other field zero. */
struct tx_op *op_add(struct tx_ops *ops, uint8_t kind, const char *path);
/* The metadata of st as a META operation records it (permission bits
 * only). */
void meta_of(const struct stat *st, struct tx_meta *m);
/* ... and as REPLACE and DELETE record the entries they move: with the
 * file type bits in mode. */
void meta_entry(const struct stat *st, struct tx_meta *m);

struct fs_syncset;
/* Turns the upper of a finished overlay transaction into operations on the
 * workspace, validating it: a device node or an unknown overlay attribute
 * is an error. Also strips overlay xattrs from the new entries, and makes
 * their data durable — everything the commit point needs: at once, or,
 * given durable (empty), by adding the entries to it, for the caller to
 * sync with the journal (journal_commit's pre) or before a hold. */
MUST_CHECK int scan_upper(int upperfd, int wsfd, bool userxattr, struct tx_ops *ops,
                          struct fs_syncset *durable, txbox_error *err);

/* Hard-link groups kept whole: for each file the command changed in place
 * whose other names are all in the workspace, those names get the new file
 * too (a link in the upper and a REPLACE each, synced with sync); the
 * others are listed in ops->split_links. Before the commit point. */
MUST_CHECK int links_complete(int upperfd, int wsfd, struct tx_ops *ops, struct fs_syncset *sync,
                              txbox_error *err);

/* The paths added, modified and deleted by ops (before they are applied):
 * {added, modified, deleted: at most cap paths in all, truncated, counts:
 * {added, modified, deleted}: how many there are, all of them}. */
json_t *ops_changes(int upperfd, int wsfd, const struct tx_ops *ops, size_t cap);

/* Do the write sets overlap (same path, or one inside the other)? */
bool ops_overlap(const struct tx_ops *a, const struct tx_ops *b, const char **which);
/* Calls each(ctx, idn, j) for every transaction committed after base_gen
 * up to gen, oldest first, with its journal (NULL: its record is gone,
 * pruned); idn names it. Stops at the first call that returns nonzero and
 * returns that; 0 when none did; <0: an error reading the journals.
 * (conflict.c: the loop of the conflict checks) */
struct tx_journal;
typedef int (*tx_later_fn)(void *ctx, const char *idn, const struct tx_journal *j);
MUST_CHECK int tx_each_later(txbox_ws *ws, uint64_t base_gen, uint64_t gen, tx_later_fn each, void *ctx,
                             txbox_error *err);
/* Did a transaction committed after base_gen (up to gen) write a path of
 * ops? 1: yes, *path (caller frees) names it; 0: no; <0: error.
 * (conflict.c) */
MUST_CHECK int tx_check_conflict(txbox_ws *ws, uint64_t base_gen, uint64_t gen, const struct tx_ops *ops,
                                 char **path, txbox_error *err);

/* Do two directories' extended attributes differ (overlay's own and
 * security.* ignored)? */
bool dir_xattrs_differ(int a, int b);
/* Make b's extended attributes those of a (same exclusions). */
MUST_CHECK int dir_xattrs_copy(int a, int b, txbox_error *err);

/* ---- journal (journal.c) ---- */
struct tx_journal {
    uint64_t id, gen, base_gen;
    struct tx_ops ops;
    char *info; /* JSON object: what the audit log records of this
                        transaction (command, cwd, verdict, exit status,
                        output tail, changes...); NUL-terminated, may be NULL */
};

/* The commit protocol, from a scanned upper to the applied workspace. The
 * caller holds the workspace lock. 0: applied, recorded and closed; 1
 * (flags JOURNAL_LEAVE_OPEN): applied, its record and audit row written,
 * the journal left open for recovery to make durable and close (what a
 * crash at that point leaves), the write set kept; -1: an error. */
enum { JOURNAL_LEAVE_OPEN = 1 };
MUST_CHECK int journal_commit(txbox_ws *ws, uint64_t id, int txfd, uint64_t base_gen, struct tx_ops *ops,
                              const char *info, struct fs_syncset *pre, unsigned flags, uint64_t *gen_out,
                              txbox_error *err);
/* Renames old (under ofd) to new (under nfd), never replacing, for the
 * commit protocol. Unprivileged, moving a directory to another parent needs
 * write permission on the directory itself: one that lacks it is given it
 * for the rename, then has the mode m records (a REPLACE's or DELETE's
 * nw/old; NULL or not recorded: the mode it had). */
MUST_CHECK int tx_move(int ofd, const char *old, int nfd, const char *new, const struct tx_meta *m);
/* If m records a directory and name under dfd is one, gives it m's mode
 * (what tx_move does last, again after a crash). */
MUST_CHECK int tx_fix_mode(int dfd, const char *name, const struct tx_meta *m);
/* Reads and validates a journal (checksum, format). */
MUST_CHECK int journal_load(int dirfd, const char *name, struct tx_journal *j, txbox_error *err);
/* The generation a journal's header names, without reading the rest (-1:
 * unreadable or not a journal). */
MUST_CHECK int journal_peek_gen(int dirfd, const char *name, uint64_t *gen);
void journal_free(struct tx_journal *j);
/* The journal of the transaction committed as generation gen (what conflict
 * checks compare a write set with). 0: loaded into j; 1: its record is gone
 * (pruned), idn names the transaction; <0: error. */
MUST_CHECK int journal_load_gen(txbox_ws *ws, uint64_t gen, struct tx_journal *j, char idn[static 32],
                                txbox_error *err);
/* Rolls forward the journal of transaction id (lock held). */
MUST_CHECK int journal_recover_one(txbox_ws *ws, uint64_t id, txbox_error *err);
/* Transaction id can be neither finished nor rolled back (recovery failed,
 * lock held): its journal stays for a person to act on, and it holds no
 * generation meanwhile (a commit record it made is withdrawn; it is
 * numbered anew when it is finished). */
MUST_CHECK int journal_hold(txbox_ws *ws, uint64_t id, txbox_error *err);
/* Does a journal still in journal/ (a stuck transaction's, once recovery
 * ran under the lock) hold a path of ops? 1: *path (to free) and *by, its
 * id; a journal that cannot be read holds every path. 0: none; <0: error. */
MUST_CHECK int journal_held(txbox_ws *ws, const struct tx_ops *ops, char **path, uint64_t *by,
                            txbox_error *err);

/* tx/ID/stuck: recovery could neither finish nor roll back transaction ID
 * (journal.c, I9); what it said, one line. Recovery on opening a workspace
 * leaves such a transaction alone (it holds its paths), an explicit 'txbox
 * recover' tries it again; 'txbox status' lists it. */
#define TX_STUCK "stuck"

/* Records an outcome in tx/ID/outcome (informational; not part of the
 * protocol). */
void tx_write_outcome(int txfd, const char *outcome);

/* ---- copy backend (copy.c) ---- */
/* Copies the workspace (all but .txbox) into tx/ID/view, the directory the
 * command then runs on (SB_VIEW_DIRECT); *viewfd: it, opened (caller
 * closes). The workspace itself is not changed until copy_commit. */
MUST_CHECK int copy_begin(txbox_ws *ws, int txfd, int *viewfd, txbox_error *err);
/* After the command: merge the copy into the workspace, listing the
 * changes. */
MUST_CHECK int copy_commit(txbox_ws *ws, int txfd, json_t **changes, size_t cap, txbox_error *err);
/* After the command: drop the copy. */
MUST_CHECK int copy_rollback(txbox_ws *ws, int txfd, txbox_error *err);
/* Recovery of a copy transaction whose process died: finish the merge if
 * the commit was decided, else drop the copy. No-op for overlay ones. */
MUST_CHECK int copy_recover_one(txbox_ws *ws, int txfd, txbox_error *err);

/* ---- audit log (store.c) ---- */
struct store_prep;
/* Records transaction id in the audit log with its outcome; idempotent
 * (recovery calls it again). info: the JSON object described at
 * struct tx_journal; ops: the applied write set (NULL unless committed; a
 * commit's row with its write set is store_log_commit's, inside the commit
 * protocol, so that a committed transaction is never left unlogged). */
MUST_CHECK int store_log(txbox_ws *ws, uint64_t id, const char *outcome, const char *info,
                         const struct tx_ops *ops, int txfd, txbox_error *err);
/* The committed row of finalize: written without an fsync of its own, the
 * log's WAL file added to sync instead, which finalize makes durable (with
 * the workspace's changes) before it closes the journal. */
MUST_CHECK int store_log_commit(txbox_ws *ws, uint64_t id, const char *info, const struct tx_ops *ops,
                                int txfd, struct fs_syncset *sync, struct store_prep *prep, txbox_error *err);
/* The commit's write set (its rows, each file's size and SHA-256 before
 * and after) computed in a thread before the apply: the old entries from
 * the workspace, the new ones from tx/ID/upper, while the journal and the
 * new data are made durable. ops must stay as they are until
 * store_prep_wait, which must come before the apply moves anything (the
 * entries are read at their paths). store_log_commit with a waited prep
 * of the same ops takes its rows; with NULL (recovery) it hashes after the
 * apply. NULL when there is no upper. store_prep_free waits first. */
struct store_prep *store_prep_begin(txbox_ws *ws, int txfd, const struct tx_ops *ops);
void store_prep_wait(struct store_prep *p);
void store_prep_free(struct store_prep *p);

#endif
