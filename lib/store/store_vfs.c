/* The audit log's SQLite VFS (store.c's "VFS"): "txbox", the default VFS
 * but for real_open() (a journal or WAL that exists is opened without a
 * directory fsync); with TXBOX_FAULT set in a test build, "txbox-fault",
 * whose writes and syncs are also fault points of fsops.c. */
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "fsops.h"
#include "store.h"
#include "store_int.h"

/* ---- a fault-injecting VFS shim (only with TXBOX_FAULT, in test builds) ---- */

static sqlite3_vfs *real_vfs;

#ifdef TXBOX_TEST_HOOKS
struct shim_file {
    sqlite3_file base;
    sqlite3_file *real; /* follows this struct in the same allocation */
};

static sqlite3_vfs shim_vfs;

/* A fault point of fsops.c without a real operation: fs_fsync(-1) and
 * fs_write(-1, "", 0) only count (and maybe fail or kill); the real
 * operation is then done by SQLite's own VFS. */
static bool fault_sync(void)
{
    errno = 0;
    return fs_fsync(-1) < 0 && errno != EBADF;
}

static bool fault_write(void) { return fs_write(-1, "", 0) < 0; }

#define REAL(f) (((struct shim_file *)(f))->real)
static int sh_close(sqlite3_file *f)
{
    int rc = REAL(f)->pMethods ? REAL(f)->pMethods->xClose(REAL(f)) : SQLITE_OK;
    return rc;
}
static int sh_read(sqlite3_file *f, void *p, int n, sqlite3_int64 o)
{
    return REAL(f)->pMethods->xRead(REAL(f), p, n, o);
}
static int sh_write(sqlite3_file *f, const void *p, int n, sqlite3_int64 o)
{
    if (fault_write())
        return SQLITE_IOERR_WRITE;
    return REAL(f)->pMethods->xWrite(REAL(f), p, n, o);
}
static int sh_truncate(sqlite3_file *f, sqlite3_int64 n) { return REAL(f)->pMethods->xTruncate(REAL(f), n); }
static int sh_sync(sqlite3_file *f, int flags)
{
    if (fault_sync())
        return SQLITE_IOERR_FSYNC;
    return REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int sh_size(sqlite3_file *f, sqlite3_int64 *n) { return REAL(f)->pMethods->xFileSize(REAL(f), n); }
static int sh_lock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xLock(REAL(f), l); }
static int sh_unlock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xUnlock(REAL(f), l); }
static int sh_reserved(sqlite3_file *f, int *r) { return REAL(f)->pMethods->xCheckReservedLock(REAL(f), r); }
static int sh_fcntl(sqlite3_file *f, int op, void *a)
{
    return REAL(f)->pMethods->xFileControl(REAL(f), op, a);
}
static int sh_sector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int sh_devchar(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }
static int sh_shmmap(sqlite3_file *f, int pg, int sz, int ext, void volatile **pp)
{
    return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, ext, pp);
}
static int sh_shmlock(sqlite3_file *f, int off, int n, int flags)
{
    return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void sh_shmbarrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int sh_shmunmap(sqlite3_file *f, int del) { return REAL(f)->pMethods->xShmUnmap(REAL(f), del); }

static const sqlite3_io_methods shim_io = {
    .iVersion = 2,
    .xClose = sh_close,
    .xRead = sh_read,
    .xWrite = sh_write,
    .xTruncate = sh_truncate,
    .xSync = sh_sync,
    .xFileSize = sh_size,
    .xLock = sh_lock,
    .xUnlock = sh_unlock,
    .xCheckReservedLock = sh_reserved,
    .xFileControl = sh_fcntl,
    .xSectorSize = sh_sector,
    .xDeviceCharacteristics = sh_devchar,
    .xShmMap = sh_shmmap,
    .xShmLock = sh_shmlock,
    .xShmBarrier = sh_shmbarrier,
    .xShmUnmap = sh_shmunmap,
};

#endif /* TXBOX_TEST_HOOKS */

/* Opening a journal or WAL without a directory fsync when it already
 * exists.
 *
 * SQLite's unix VFS marks a WAL (or rollback journal) opened with
 * SQLITE_OPEN_CREATE for a directory fsync at its first sync: a file just
 * created must have a durable name before a commit in it is acknowledged.
 * SQLite opens the WAL with CREATE in every process, so every txbox run
 * paid an fsync of .txbox (0.3-0.5 ms here) for a WAL that PERSIST_WAL
 * keeps for the log's lifetime. A file that already exists as a regular
 * file is opened without CREATE (no O_CREAT: the same file, just no
 * DIRSYNC); a file that does not is created as before (a WAL's directory
 * is then also fsynced right after its creation, here; SQLite fsyncs it
 * again at the file's first sync).
 *
 * Durability: the directory fsync only makes the file's name durable; the
 * frames are made durable by the WAL's own fdatasync, unchanged. A WAL
 * that exists was created by a process that opened it through this
 * function, which fsynced .txbox before returning it (even a process that
 * only reads, which SQLite itself would never sync): so its name is
 * durable before any process can open it without CREATE. The one gap: a
 * process killed between creating the file and fsyncing the directory (a
 * few microseconds) leaves a name whose durability rests on the next
 * fsync of .txbox or on the filesystem (ext4, xfs and btrfs commit a new
 * file's name with its first fdatasync). A WAL removed between our
 * lstat() and the open fails with CANTOPEN and is retried with CREATE.
 * A WAL left by an older txbox (no shim) had its directory fsynced by
 * every process that wrote to it. A rollback journal (only while a new
 * log switches to WAL) is deleted after each transaction: it is created,
 * with CREATE and DIRSYNC, each time. */
static int real_open(const char *name, sqlite3_file *f, int flags, int *out)
{
    bool journal = flags & (SQLITE_OPEN_WAL | SQLITE_OPEN_MAIN_JOURNAL);
    if (!name || !journal || !(flags & SQLITE_OPEN_CREATE))
        return real_vfs->xOpen(real_vfs, name, f, flags, out);
    struct stat st;
    if (lstat(name, &st) == 0) {
        if (S_ISREG(st.st_mode)) {
            int rc = real_vfs->xOpen(real_vfs, name, f, flags & ~SQLITE_OPEN_CREATE, out);
            if ((rc & 0xff) != SQLITE_CANTOPEN)
                return rc;
            f->pMethods = NULL; /* removed meanwhile: create it */
        }
        return real_vfs->xOpen(real_vfs, name, f, flags, out);
    }
    bool absent = errno == ENOENT;
    int rc = real_vfs->xOpen(real_vfs, name, f, flags, out);
    if (rc == SQLITE_OK && absent && (flags & SQLITE_OPEN_WAL)) {
        /* Best effort, as SQLite's own DIRSYNC (which ignores failures). */
        _cleanup_free_ char *dir = xstrdup(name);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = 0;
        _cleanup_close_ int dfd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0)
            (void)fsync(dfd);
    }
    return rc;
}

static int plain_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)vfs;
    return real_open(name, f, flags, out);
}

#ifdef TXBOX_TEST_HOOKS
static int shim_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)vfs;
    struct shim_file *sf = (struct shim_file *)f;
    sf->real = (sqlite3_file *)(sf + 1);
    memset(sf->real, 0, (size_t)real_vfs->szOsFile);
    int rc = real_open(name, sf->real, flags, out);
    f->pMethods = rc == SQLITE_OK && sf->real->pMethods ? &shim_io : NULL;
    return rc;
}
#endif

/* The VFS the log is opened with: "txbox" (the default VFS, but for
 * real_open), or "txbox-fault" under TXBOX_FAULT (also every write and
 * sync a fault point). */
static bool vfs_ok;

static void register_vfs(void)
{
    static sqlite3_vfs plain_vfs;
    sqlite3_vfs *r = sqlite3_vfs_find(NULL);
    if (!r)
        return;
    real_vfs = r;
    plain_vfs = *r;
    plain_vfs.zName = "txbox";
    plain_vfs.xOpen = plain_open;
    plain_vfs.pNext = NULL;
    vfs_ok = sqlite3_vfs_register(&plain_vfs, 0) == SQLITE_OK;
#ifdef TXBOX_TEST_HOOKS
    shim_vfs = *r;
    shim_vfs.zName = "txbox-fault";
    shim_vfs.szOsFile = (int)sizeof(struct shim_file) + r->szOsFile;
    shim_vfs.xOpen = shim_open;
    shim_vfs.pNext = NULL;
    vfs_ok = vfs_ok && sqlite3_vfs_register(&shim_vfs, 0) == SQLITE_OK;
#endif
}

const char *store_vfs_name(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_vfs);
    if (!vfs_ok)
        return NULL;
#ifdef TXBOX_TEST_HOOKS
    if (getenv("TXBOX_FAULT"))
        return "txbox-fault";
#endif
    return "txbox";
}
