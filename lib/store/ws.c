/* A workspace and its state directory, .txbox/; crash recovery. */
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <pwd.h>
#include <time.h>

#include <jansson.h>

#include "fsops.h"
#include "tx.h"

static const char *const subdirs[] = {"tx", "active", "journal", "commits", "trash"};

static int open_dir(int at, const char *name, txbox_error *err)
{
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return tx_errno(err, errno, "cannot open %s/%s", TXBOX_STATE_DIR, name);
    return fd;
}

/* .txbox/format, "txbox-state N": written whole and made durable under a
 * name of its own, then linked into place (a new workspace: another
 * process may be setting it up too) or renamed over the old one (an
 * upgrade, workspace lock held), and the directory synced. After a power
 * loss the format file is complete or absent, never empty (an empty one
 * makes the workspace unreadable for good; an absent one is an unfinished
 * set-up). */
static int write_format(int sfd, bool replace, txbox_error *err)
{
    char tmp[40], v[32];
    snprintf(tmp, sizeof tmp, "format.%d", getpid());
    int n = snprintf(v, sizeof v, "txbox-state %d\n", TXBOX_STATE_FORMAT);
    int f = openat(sfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    int rc = f >= 0 && write_all(f, v, (size_t)n) == 0 && fsync(f) == 0 ? 0 : -1;
    int e = errno;
    if (f >= 0)
        close(f);
    if (rc == 0) {
        int r = replace ? renameat(sfd, tmp, sfd, "format") : linkat(sfd, tmp, sfd, "format", 0);
        if (r < 0 && (replace || errno != EEXIST)) {
            e = errno;
            rc = -1;
        }
    }
    (void)unlinkat(sfd, tmp, 0);
    if (rc == 0 && fsync(sfd) < 0) {
        e = errno;
        rc = -1;
    }
    if (rc < 0)
        return tx_errno(err, e, "cannot write %s/format", TXBOX_STATE_DIR);
    return 0;
}

static int init_state(int wsfd, txbox_error *err)
{
    if (mkdirat(wsfd, TXBOX_STATE_DIR, 0700) < 0 && errno != EEXIST)
        return tx_errno(err, errno, "cannot create %s", TXBOX_STATE_DIR);
    _cleanup_close_ int sfd = openat(wsfd, TXBOX_STATE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0)
        return tx_errno(err, errno, "cannot open %s", TXBOX_STATE_DIR);
    for (size_t i = 0; i < ARRAY_SIZE(subdirs); i++)
        if (mkdirat(sfd, subdirs[i], 0700) < 0 && errno != EEXIST)
            return tx_errno(err, errno, "cannot create %s/%s", TXBOX_STATE_DIR, subdirs[i]);
    /* Keep the state out of version control. */
    int g = openat(sfd, ".gitignore", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (g >= 0) {
        if (write_all(g, "*\n", 2) < 0) {
            close(g);
            return tx_errno(err, errno, "cannot write %s/.gitignore", TXBOX_STATE_DIR);
        }
        close(g);
    }
    /* Written whole under a name of its own, then linked into place: a
     * process opening a brand-new workspace at the same moment sees no
     * format file or a complete one, never an empty one. */
    if (faccessat(sfd, "format", F_OK, AT_SYMLINK_NOFOLLOW) == 0)
        return 0;
    return write_format(sfd, false, err);
}

/* Why the state directory could not be made, when it is the workspace
 * that takes no writes (not a damaged one). */
static bool state_unwritable(int code) { return code == EROFS || code == EACCES || code == EPERM; }

static bool dir_is_empty_at(int at, const char *name)
{
    _cleanup_dir_ DIR *d = opendir_at(at, name);
    struct dirent *de;
    bool empty = d != NULL;
    while (empty && (de = readdir(d)))
        empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
    return empty;
}

/* Was the set-up of this state directory cut short (a crash between the
 * mkdir of .txbox and the link of its format file)? Only if it holds
 * nothing but what init_state makes, with its subdirectories empty: then no
 * transaction ever started here, and finishing the set-up loses nothing. */
static bool init_interrupted(int sfd)
{
    _cleanup_dir_ DIR *d = opendir_at(sfd, ".");
    struct dirent *de;
    bool only_init = d != NULL;
    while (only_init && (de = readdir(d))) {
        const char *n = de->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, ".gitignore") || !strncmp(n, "format.", 7))
            continue;
        only_init = false;
        for (size_t i = 0; i < ARRAY_SIZE(subdirs); i++)
            if (!strcmp(n, subdirs[i]))
                only_init = dir_is_empty_at(sfd, n);
    }
    return only_init;
}

static int read_format(int sfd, int *v, txbox_error *err)
{
    _cleanup_free_ char *s = NULL;
    if (read_file_at(sfd, "format", 64, &s, NULL, err) < 0)
        return tx_err_ctx(err, "%s is not a txbox state directory", TXBOX_STATE_DIR);
    if (sscanf(s, "txbox-state %d", v) != 1)
        return tx_err(err, EINVAL, "%s/format is unreadable", TXBOX_STATE_DIR);
    return 0;
}

int ws_format_upgrade(txbox_ws *ws, txbox_error *err)
{
    int v = 0;
    if (read_format(ws->sfd, &v, err) < 0)
        return -1;
    return v < TXBOX_STATE_FORMAT ? write_format(ws->sfd, true, err) : 0;
}

static int check_format(int sfd, txbox_error *err)
{
    int v = 0;
    if (read_format(sfd, &v, err) < 0)
        return -1;
    if (v > TXBOX_STATE_FORMAT)
        return tx_err(err, EINVAL, "%s was written by a newer txbox (state format %d, this one reads %d)",
                      TXBOX_STATE_DIR, v, TXBOX_STATE_FORMAT);
    return 0;
}

int ws_open(const char *dir, unsigned flags, txbox_ws **out, txbox_error *err)
{
    *out = NULL;
    if (!dir || !*dir)
        return tx_err(err, EINVAL, "empty workspace path");
    _cleanup_free_ char *real = realpath(dir, NULL);
    if (!real)
        return tx_errno(err, errno, "workspace %s", dir);
    _cleanup_close_ int fd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return tx_errno(err, errno, "workspace %s", dir);
    if (!strcmp(real, "/"))
        return tx_err(err, EINVAL, "the root directory cannot be a workspace");
    struct stat st;
    if (fstat(fd, &st) < 0)
        return tx_errno(err, errno, "workspace %s", dir);
    bool stateless = false;
    if (flags & TXBOX_WS_CREATE) {
        txbox_error ie = {0};
        if (init_state(fd, &ie) < 0 &&
            !(stateless = (flags & TXBOX_WS_READ_ONLY) && state_unwritable(ie.code))) {
            *err = ie;
            return tx_err_ctx(err, "workspace %s", dir);
        }
        /* one there already, on a filesystem that takes no writes */
        struct statvfs v;
        stateless |= (flags & TXBOX_WS_READ_ONLY) && fstatvfs(fd, &v) == 0 && (v.f_flag & ST_RDONLY);
    }
    txbox_ws *ws = xcalloc(1, sizeof *ws);
    ws->fd = ws->sfd = ws->txd = ws->actd = ws->jnld = ws->cmtd = -1;
    ws->path = steal_pointer(&real);
    ws->fd = take_fd(&fd);
    ws->dev = st.st_dev;
    ws->root = tx_privileged(); /* the overlay of a user namespace otherwise */
    if (stateless) {            /* read-only runs only, recorded nowhere */
        ws->stateless = true;
        *out = ws;
        return 0;
    }
    ws->sfd = openat(ws->fd, TXBOX_STATE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (ws->sfd < 0) {
        int e = errno;
        txbox_ws_close(ws);
        if (e == ENOENT)
            return tx_err(err, ENOENT, "%s has no transactions yet (no %s/)", dir, TXBOX_STATE_DIR);
        return tx_errno(err, e, "cannot open %s/%s", dir, TXBOX_STATE_DIR);
    }
    struct stat sst;
    if (fstat(ws->sfd, &sst) < 0 || sst.st_dev != ws->dev) {
        txbox_ws_close(ws);
        return tx_err(err, EXDEV, "%s/%s must be on the workspace's filesystem", dir, TXBOX_STATE_DIR);
    }
    /* The state is trusted (journals are applied, pre-images moved back,
     * the log read): never one another user can change. Root above all
     * would otherwise act on files a user planted there. */
    if (sst.st_uid != geteuid()) {
        struct passwd *pw = getpwuid(sst.st_uid);
        tx_err(err, EPERM,
               "%s/%s belongs to %s%s(uid %u), not to this user (uid %u): txbox uses no state "
               "directory another user can change",
               dir, TXBOX_STATE_DIR, pw ? pw->pw_name : "", pw ? " " : "", (unsigned)sst.st_uid,
               (unsigned)geteuid());
        txbox_ws_close(ws);
        return -1;
    }
    if (faccessat(ws->sfd, "format", F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT &&
        init_interrupted(ws->sfd) && init_state(ws->fd, err) < 0) {
        txbox_ws_close(ws);
        return tx_err_ctx(err, "workspace %s: finishing an interrupted set-up", dir);
    }
    if (check_format(ws->sfd, err) < 0 || (ws->txd = open_dir(ws->sfd, "tx", err)) < 0 ||
        (ws->actd = open_dir(ws->sfd, "active", err)) < 0 ||
        (ws->jnld = open_dir(ws->sfd, "journal", err)) < 0 ||
        (ws->cmtd = open_dir(ws->sfd, "commits", err)) < 0) {
        txbox_ws_close(ws);
        return -1;
    }
    *out = ws;
    return 0;
}

void txbox_ws_close(txbox_ws *ws)
{
    if (!ws)
        return;
    if (ws->db && ws->db_close)
        ws->db_close(ws->db); /* the store's (a lower layer does not call up) */
    free(ws->hashes);
    int fds[] = {ws->fd, ws->sfd, ws->txd, ws->actd, ws->jnld, ws->cmtd};
    for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(ws->path);
    free(ws);
}

const char *txbox_ws_path(const txbox_ws *ws) { return ws->path; }

/* A wait for the lock is bounded and cancellable (tx_flock_wait): a holder
 * stopped by a debugger or SIGSTOP is named, and Ctrl-C ends the wait. */
static int lock_ws(txbox_ws *ws, int *lockfd, bool wait, const volatile int *cancel, txbox_error *err)
{
    int fd = openat(ws->sfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return tx_errno(err, errno, "cannot open the workspace lock");
    int rc = wait ? tx_flock_wait(fd, "the workspace lock", 0, cancel, err) : flock(fd, LOCK_EX | LOCK_NB);
    if (rc < 0) {
        int e = errno;
        close(fd);
        return wait ? -1 : tx_errno(err, e, "cannot lock the workspace");
    }
    *lockfd = fd;
    return 0;
}

int ws_lock(txbox_ws *ws, int *lockfd, txbox_error *err) { return lock_ws(ws, lockfd, true, NULL, err); }

int ws_wait_settled(txbox_ws *ws, txbox_error *err)
{
    uint64_t *ids;
    size_t n;
    if (ws_list_ids(ws->jnld, &ids, &n, err) < 0)
        return -1;
    free(ids);
    if (!n)
        return 0;
    int fd = -1;
    if (lock_ws(ws, &fd, true, NULL, err) < 0)
        return -1;
    ws_unlock(fd);
    return 0;
}

int ws_lock_cancel(txbox_ws *ws, int *lockfd, const volatile int *cancel, txbox_error *err)
{
    return lock_ws(ws, lockfd, true, cancel, err);
}

int ws_trylock(txbox_ws *ws, int *lockfd, txbox_error *err) { return lock_ws(ws, lockfd, false, NULL, err); }

void ws_unlock(int lockfd)
{
    if (lockfd >= 0)
        close(lockfd);
}

/* .txbox/seq and .txbox/gen, two counters that are hints (see their
 * users): each is a symbolic link whose target is the decimal number,
 * replaced by a rename. A short link's target lives in its inode, so the
 * replacement frees no data block: a regular file's rewrite freed one at
 * every transaction, twice, and on a filesystem mounted with `discard`
 * and without a journal (this project's VMs) each free is a synchronous
 * discard, 0.3-0.5 ms. A regular file (as earlier versions wrote) is
 * still read; the next write replaces it. Unreadable or garbage: 0, which
 * every user treats as "no hint". */
static uint64_t counter_read(int dirfd, const char *name)
{
    char b[32];
    ssize_t l = readlinkat(dirfd, name, b, sizeof b - 1);
    _cleanup_free_ char *f = NULL;
    const char *s = b;
    if (l >= 0) {
        b[l] = 0;
    } else if (errno == EINVAL && read_file_at(dirfd, name, 32, &f, NULL, NULL) == 0) {
        f[strcspn(f, "\n")] = 0;
        s = f;
    } else {
        return 0;
    }
    uint64_t v;
    return parse_u64(s, &v) ? v : 0;
}

static int counter_write(int dirfd, const char *name, uint64_t v)
{
    char s[32], tmp[64];
    snprintf(s, sizeof s, "%llu", (unsigned long long)v);
    snprintf(tmp, sizeof tmp, "%s.%d", name, getpid());
    if (symlinkat(s, dirfd, tmp) < 0) {
        /* a leftover of a crashed process that had this pid */
        if (errno != EEXIST || unlinkat(dirfd, tmp, 0) < 0 || symlinkat(s, dirfd, tmp) < 0)
            return -1;
    }
    if (renameat(dirfd, tmp, dirfd, name) < 0) {
        int e = errno;
        (void)unlinkat(dirfd, tmp, 0);
        errno = e;
        return -1;
    }
    return 0;
}

/* The id floor (.txbox/floor, a counter like seq but made durable): every id
 * at or below it may have been given out and its directory archived
 * (compact.c), so ids start above it even when the seq hint is lost. */
uint64_t ws_id_floor(txbox_ws *ws) { return counter_read(ws->sfd, "floor"); }

int ws_set_id_floor(txbox_ws *ws, uint64_t floor, txbox_error *err)
{
    if (floor <= ws_id_floor(ws))
        return 0;
    if (counter_write(ws->sfd, "floor", floor) < 0 || fs_fsync(ws->sfd) < 0)
        return tx_errno(err, errno, "cannot record the transaction id floor");
    return 0;
}

int ws_new_tx(txbox_ws *ws, uint64_t *id, int *txfd, int *activefd, uint64_t *base_gen, txbox_error *err)
{
    /* The owner lock exists under a temporary name until it is locked, so
     * recovery never sees an unlocked active/ID of a live process. */
    char tmp[64];
    snprintf(tmp, sizeof tmp, ".new.%d", getpid());
    _cleanup_close_ int afd = openat(ws->actd, tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (afd < 0)
        return tx_errno(err, errno, "cannot create a transaction lock");
    if (flock(afd, LOCK_EX) < 0)
        return tx_errno(err, errno, "cannot lock a transaction");
    uint64_t n = counter_read(ws->sfd, "seq"), floor = ws_id_floor(ws);
    if (n < floor)
        n = floor;
    char name[32];
    for (;;) {
        n++;
        snprintf(name, sizeof name, "%llu", (unsigned long long)n);
        if (mkdirat(ws->txd, name, 0700) == 0)
            break;
        if (errno != EEXIST) {
            int e = errno;
            (void)unlinkat(ws->actd, tmp, 0);
            return tx_errno(err, e, "cannot create a transaction directory");
        }
    }
    /* seq is only a hint (ids come from mkdir); no fsync needed. */
    (void)counter_write(ws->sfd, "seq", n);
    if (renameat(ws->actd, tmp, ws->actd, name) < 0) {
        int e = errno;
        (void)unlinkat(ws->actd, tmp, 0);
        (void)unlinkat(ws->txd, name, AT_REMOVEDIR);
        return tx_errno(err, e, "cannot register transaction %s", name);
    }
    /* The base generation, read after the registration and written into
     * the owner lock. Compaction (compact.c), which holds the workspace
     * lock (so no commit is made meanwhile), sees either no registration
     * (this read comes after its own), or an empty lock (and then archives
     * no commit), or this number (and keeps every commit after it). */
    uint64_t gen = 0;
    char gs[32];
    int tfd = -1;
    if (ws_read_gen(ws, &gen, err) == 0) {
        int gl = snprintf(gs, sizeof gs, "%llu\n", (unsigned long long)gen);
        if (fs_write(afd, gs, (size_t)gl) < 0)
            tx_errno(err, errno, "cannot write the lock of transaction %s", name);
        else if ((tfd = openat(ws->txd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
            tx_errno(err, errno, "cannot open transaction %s", name);
    }
    if (tfd < 0) {
        (void)unlinkat(ws->txd, name, AT_REMOVEDIR);
        (void)unlinkat(ws->actd, name, 0);
        return -1;
    }
    *id = n;
    *txfd = tfd;
    *activefd = take_fd(&afd);
    if (base_gen)
        *base_gen = gen;
    return 0;
}

int ws_own_tx(txbox_ws *ws, uint64_t id, int *activefd, txbox_error *err)
{
    char name[32];
    snprintf(name, sizeof name, "%llu", (unsigned long long)id);
    /* Under the workspace lock, which recovery takes before it looks at an
     * owner lock's state: made and locked before anyone can see it free. */
    _cleanup_close_ int fd = openat(ws->actd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return tx_errno(err, errno, "cannot register transaction %s", name);
    if (flock(fd, LOCK_EX | LOCK_NB) < 0)
        return tx_errno(err, errno == EWOULDBLOCK ? EBUSY : errno,
                        "transaction %s is owned by another process", name);
    *activefd = take_fd(&fd);
    return 0;
}

int ws_tx_live_base(txbox_ws *ws, uint64_t id, uint64_t *gen)
{
    char name[32];
    snprintf(name, sizeof name, "%llu", (unsigned long long)id);
    _cleanup_free_ char *s = NULL;
    if (read_file_at(ws->actd, name, 32, &s, NULL, NULL) < 0)
        return -1;
    s[strcspn(s, "\n")] = 0;
    return parse_u64(s, gen) ? 0 : -1;
}

void ws_end_tx(txbox_ws *ws, uint64_t id, int activefd)
{
    char name[32];
    snprintf(name, sizeof name, "%llu", (unsigned long long)id);
    (void)unlinkat(ws->actd, name, 0);
    if (activefd >= 0)
        close(activefd);
}

uint64_t ws_gen_cache(txbox_ws *ws) { return counter_read(ws->sfd, "gen"); }

static int u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int ws_tx_ids(txbox_ws *ws, uint64_t **ids, size_t *n, txbox_error *err)
{
    return ws_list_ids(ws->txd, ids, n, err);
}

int ws_list_ids(int dirfd, uint64_t **ids, size_t *n, txbox_error *err)
{
    *ids = NULL;
    *n = 0;
    DIR *d = opendir_at(dirfd, ".");
    if (!d)
        return tx_errno(err, errno, "cannot list transactions");
    struct dirent *de;
    while ((de = readdir(d))) {
        uint64_t v;
        if (!parse_u64(de->d_name, &v))
            continue;
        *ids = xrealloc(*ids, (*n + 1) * sizeof **ids);
        (*ids)[(*n)++] = v;
    }
    closedir(d);
    if (*n)
        qsort(*ids, *n, sizeof **ids, u64_cmp);
    return 0;
}

int ws_read_gen(txbox_ws *ws, uint64_t *gen, txbox_error *err)
{
    /* The file is a cache of the highest commits/GEN; it may lag after a
     * crash, never lead. */
    uint64_t g = ws_gen_cache(ws);
    for (;;) {
        char n[32];
        struct stat st;
        snprintf(n, sizeof n, "%llu", (unsigned long long)(g + 1));
        if (fstatat(ws->cmtd, n, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT)
                return tx_errno(err, errno, "cannot read commit records");
            break;
        }
        g++;
    }
    *gen = g;
    return 0;
}

int ws_write_gen(txbox_ws *ws, uint64_t gen, txbox_error *err)
{
    if (counter_write(ws->sfd, "gen", gen) < 0)
        return tx_errno(err, errno, "cannot record the generation");
    return 0;
}

bool ws_tx_owner_dead(txbox_ws *ws, uint64_t id)
{
    char name[32];
    snprintf(name, sizeof name, "%llu", (unsigned long long)id);
    _cleanup_close_ int fd = openat(ws->actd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return errno == ENOENT;
    return flock(fd, LOCK_EX | LOCK_NB) == 0;
}

/* Filesystems an overlay upper cannot live on (no trusted or user xattrs
 * with the semantics overlayfs needs, no whiteouts, no d_type; overlayfs
 * itself as an upper is refused by the kernel). statfs(2) magic numbers. */
static const struct {
    unsigned long magic;
    const char *name;
} no_overlay_fs[] = {
    {0x794c7630UL, "overlayfs"}, {0x65735546UL, "FUSE"}, {0x6969UL, "NFS"},     {0xff534d42UL, "CIFS"},
    {0xfe534d42UL, "SMB2"},      {0x517bUL, "SMB"},      {0x4d44UL, "FAT"},     {0x2011bab0UL, "exFAT"},
    {0x5346544eUL, "NTFS"},      {0x7366746eUL, "NTFS"}, {0x01021997UL, "9p"},  {0xf15fUL, "eCryptfs"},
    {0x73717368UL, "squashfs"},  {0x9660UL, "ISO 9660"}, {0x15013346UL, "UDF"}, {0x6165676cUL, "pstore"},
    {0x62656572UL, "sysfs"},     {0x9fa0UL, "procfs"},
};

const char *txbox_fs_without_overlay(const char *dir)
{
    struct statfs sf;
    if (!dir || statfs(dir, &sf) < 0)
        return NULL; /* the open that follows says what is wrong */
    for (size_t i = 0; i < ARRAY_SIZE(no_overlay_fs); i++)
        if ((unsigned long)(uint32_t)sf.f_type == no_overlay_fs[i].magic)
            return no_overlay_fs[i].name;
    return NULL;
}

/* ---- the trash (tx.h) ---- */

#define ARCHIVED ".archived"

static int open_trash(txbox_ws *ws)
{
    if (mkdirat(ws->sfd, "trash", 0700) < 0 && errno != EEXIST) /* state from before the trash */
        return -1;
    return openat(ws->sfd, "trash", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

int ws_trash(txbox_ws *ws, int txfd, const char *name, const char *txs, unsigned grant)
{
    if (faccessat(txfd, name, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -1;
    _cleanup_close_ int td = open_trash(ws);
    if (td < 0)
        return -1;
    if (grant)
        tree_grant_owner(txfd, name, grant & WS_TRASH_GRANT_FILES);
    char to[64];
    snprintf(to, sizeof to, "%s.%s", txs, name);
    return renameat2(txfd, name, td, to, RENAME_NOREPLACE) < 0 ? -1 : 1;
}

int ws_archive(txbox_ws *ws, const char *idn)
{
    _cleanup_close_ int td = open_trash(ws);
    if (td < 0)
        return -1;
    char to[64];
    snprintf(to, sizeof to, "%s" ARCHIVED, idn);
    return fs_renameat(ws->txd, idn, td, to, RENAME_NOREPLACE);
}

bool ws_trash_has_entries(txbox_ws *ws)
{
    struct stat st;
    if (fstatat(ws->sfd, "trash", &st, AT_SYMLINK_NOFOLLOW) < 0)
        return false;
    /* every entry is a directory: each adds a link (".." in it); a
     * filesystem that does not count them (btrfs: 1) cannot say */
    return st.st_nlink != 2;
}

struct trash_entry {
    uint64_t id;
    char name[64];
};

static int trash_cmp(const void *a, const void *b)
{
    const struct trash_entry *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id ? 1 : strcmp(x->name, y->name);
}

static void trash_clean_at(int td, const atomic_bool *stop, size_t keep)
{
    if (flock(td, LOCK_EX | LOCK_NB) < 0)
        return;
    _cleanup_dir_ DIR *d = opendir_at(td, ".");
    _cleanup_free_ struct trash_entry *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char base[32];
        const char *dot = strchr(de->d_name, '.');
        size_t bl = dot ? (size_t)(dot - de->d_name) : 0;
        uint64_t id;
        if (!bl || bl >= sizeof base || strlen(de->d_name) >= sizeof v->name)
            continue; /* not ours: left alone */
        memcpy(base, de->d_name, bl);
        base[bl] = 0;
        if (!parse_u64(base, &id))
            continue;
        /* an archived directory (compact.c) is the cleaner's: the bound
         * after a command (stop NULL, keep > 0) is for scratch, which every
         * command adds, not for the batch one compaction adds at once */
        if (!stop && keep && !strcmp(dot, ARCHIVED))
            continue;
        if (n == cap)
            v = xrealloc(v, (cap = cap ? cap * 2 : 16) * sizeof *v);
        v[n].id = id;
        snprintf(v[n++].name, sizeof v->name, "%s", de->d_name);
    }
    if (n <= keep)
        return;
    qsort(v, n, sizeof *v, trash_cmp);
    for (size_t i = 0; i < n - keep && !(stop && atomic_load(stop)); i++)
        (void)tree_remove_until(td, v[i].name, stop);
}

void ws_trash_clean(txbox_ws *ws, const atomic_bool *stop, size_t keep)
{
    _cleanup_close_ int td = openat(ws->sfd, "trash", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (td >= 0)
        trash_clean_at(td, stop, keep);
}

/* The detached cleaner: a grandchild in a session of its own (no signal
 * of the caller's terminal or process group reaches it), its standard
 * streams on /dev/null and every other descriptor closed but the trash's
 * (a caller reading our output sees its end at once; no lock of ours
 * outlives us), at idle priority: the next command comes first. Killed
 * midway it leaves part of a tree in the trash, which the next cleaner
 * removes. */
/* This process's command line (what ps and pgrep -f read) becomes title:
 * written over the argument strings in place (their range from
 * /proc/self/stat, fields 48 and 49), so that the cleaner is never taken
 * for the command it outlives (a caller that looks for processes by the
 * command's text). */
static void retitle(const char *title)
{
    char b[2048];
    _cleanup_close_ int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, b, sizeof b - 1) : -1;
    if (n <= 0)
        return;
    b[n] = 0;
    char *p = strrchr(b, ')'); /* after the name, which may hold spaces */
    unsigned long long start = 0, end = 0;
    for (int field = 2; p && field < 49; field++) {
        p = strchr(p + 1, ' ');
        if (p && field == 47)
            start = strtoull(p + 1, NULL, 10);
        else if (p && field == 48)
            end = strtoull(p + 1, NULL, 10);
    }
    if (!start || end <= start || end - start > (1u << 21))
        return;
    memset((char *)(uintptr_t)start, 0, (size_t)(end - start));
    snprintf((char *)(uintptr_t)start, (size_t)(end - start), "%s", title);
    (void)prctl(PR_SET_NAME, "txbox-trash");
}

static void trash_clean_detached(int td)
{
    if (setsid() < 0 || fork() != 0)
        _exit(0);
    retitle("txbox: emptying the trash");
    int keep = fcntl(td, F_DUPFD_CLOEXEC, 3);
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (keep < 0 || nul < 0)
        _exit(0);
    for (int i = 0; i < 3; i++)
        (void)dup2(nul, i);
    (void)syscall(SYS_close_range, 3, (unsigned)keep - 1, 0);
    (void)syscall(SYS_close_range, (unsigned)keep + 1, ~0u, 0);
    struct sched_param sp = {0};
    (void)sched_setscheduler(0, SCHED_IDLE, &sp);
    (void)syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, 0, 3 << 13 /* IOPRIO_CLASS_IDLE */);
    trash_clean_at(keep, NULL, 0);
    _exit(0);
}

void txbox_ws_clean_detached(txbox_ws *ws)
{
    if (!ws || !ws_trash_has_entries(ws))
        return;
    _cleanup_close_ int td = openat(ws->sfd, "trash", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (td < 0)
        return;
    pid_t pid = fork();
    if (pid == 0)
        trash_clean_detached(td);
    if (pid > 0)
        (void)waitpid(pid, NULL, 0); /* the child: gone as soon as it forked */
}
