/* blkrec: a FUSE file system that serves one disk image and records, in
 * order, every write and every flush that reaches it; tests/crash/powerloss
 * puts a loop device over it, a file system on the loop device, and replays
 * the recording (tests/crash/blklog).
 *
 * usage: blkrec IMAGE LOG MOUNTPOINT
 *
 * MOUNTPOINT/img   IMAGE's bytes (its size is fixed): reads come from IMAGE,
 *                  writes go to IMAGE and to LOG
 * MOUNTPOINT/ctl   write-only: "NAME\n" puts a mark named NAME in LOG, in
 *                  order with the image's writes and flushes
 *
 * What reaches the file: the loop driver turns a block write into a write
 * of the file, a flush (REQ_PREFLUSH, and the flush the block layer adds
 * after a REQ_FUA write, since loop does not claim FUA) into fsync(2) of the
 * file, which FUSE sends here as FSYNC; discards and write-zeroes into
 * fallocate(2) (punch hole, zero range). The file is opened with
 * FOPEN_DIRECT_IO, so no page cache of FUSE's stands between the loop
 * driver and this process: each write arrives when the loop driver issues
 * it, and an fsync finds nothing of FUSE's own left to write back.
 *
 * LOG: a sequence of records, each a struct rec (little-endian) followed
 * by len bytes: WRIT (off, the data), ZERO (off, len bytes that now read as
 * zeros; no data follows), SYNC (off = 1 for fdatasync), MARK (the name).
 * seq numbers them from 0. The process serves one request at a time
 * (run single-threaded), so the log's order is the order in which the
 * requests were served; a write completed before a flush was issued was
 * served before it. LOG is not synced: the host does not crash here.
 *
 * Test code only: built with -Dtests=true, never installed. */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define MARK_MAX 200

enum { REC_WRIT = 0x54495257, REC_ZERO = 0x4f52455a, REC_SYNC = 0x434e5953, REC_MARK = 0x4b52414d };

struct rec {
    uint32_t tag, len;
    uint64_t seq, off;
};

static struct {
    int img, log;
    off_t size;
    uint64_t seq;
    int failed; /* a log write failed: every later request fails with EIO */
} st;

static int log_rec(uint32_t tag, uint64_t off, const void *data, uint32_t len, uint32_t datalen)
{
    struct rec r = {.tag = tag, .len = len, .seq = st.seq++, .off = off};
    if (st.failed || write(st.log, &r, sizeof r) != (ssize_t)sizeof r ||
        (datalen && write(st.log, data, datalen) != (ssize_t)datalen)) {
        if (!st.failed)
            fprintf(stderr, "blkrec: cannot write the log: %s\n", strerror(errno));
        st.failed = 1;
        return -EIO;
    }
    return 0;
}

static int rec_getattr(const char *path, struct stat *s, struct fuse_file_info *fi)
{
    (void)fi;
    memset(s, 0, sizeof *s);
    s->st_uid = getuid();
    s->st_gid = getgid();
    s->st_nlink = 1;
    if (!strcmp(path, "/")) {
        s->st_mode = S_IFDIR | 0755;
        s->st_nlink = 2;
    } else if (!strcmp(path, "/img")) {
        s->st_mode = S_IFREG | 0600;
        s->st_size = st.size;
        s->st_blksize = 4096;
        s->st_blocks = st.size / 512;
    } else if (!strcmp(path, "/ctl")) {
        s->st_mode = S_IFREG | 0200;
    } else {
        return -ENOENT;
    }
    return 0;
}

static int rec_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                       struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
    (void)off, (void)fi, (void)flags;
    if (strcmp(path, "/"))
        return -ENOENT;
    fill(buf, ".", NULL, 0, 0);
    fill(buf, "..", NULL, 0, 0);
    fill(buf, "img", NULL, 0, 0);
    fill(buf, "ctl", NULL, 0, 0);
    return 0;
}

static int rec_open(const char *path, struct fuse_file_info *fi)
{
    if (strcmp(path, "/img") && strcmp(path, "/ctl"))
        return -ENOENT;
    if (!strcmp(path, "/ctl") && (fi->flags & O_ACCMODE) == O_RDONLY)
        return -EACCES;
    fi->direct_io = 1;
    fi->keep_cache = 0;
    return 0;
}

static int rec_read(const char *path, char *buf, size_t n, off_t off, struct fuse_file_info *fi)
{
    (void)fi;
    if (strcmp(path, "/img"))
        return -EACCES;
    if (off >= st.size)
        return 0;
    if ((off_t)n > st.size - off)
        n = (size_t)(st.size - off);
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(st.img, buf + done, n - done, off + (off_t)done);
        if (r < 0)
            return -errno;
        if (r == 0) { /* past IMAGE's end: cannot be, its size is fixed */
            memset(buf + done, 0, n - done);
            break;
        }
        done += (size_t)r;
    }
    return (int)n;
}

static int mark(const char *buf, size_t n)
{
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        n--;
    if (n == 0 || n > MARK_MAX)
        return -EINVAL;
    return log_rec(REC_MARK, 0, buf, (uint32_t)n, (uint32_t)n);
}

static int rec_write(const char *path, const char *buf, size_t n, off_t off, struct fuse_file_info *fi)
{
    (void)fi;
    if (!strcmp(path, "/ctl")) {
        int rc = mark(buf, n);
        return rc < 0 ? rc : (int)n;
    }
    if (strcmp(path, "/img"))
        return -EACCES;
    if (off < 0 || off > st.size || (off_t)n > st.size - off)
        return -ENOSPC;
    int rc = log_rec(REC_WRIT, (uint64_t)off, buf, (uint32_t)n, (uint32_t)n);
    if (rc < 0)
        return rc;
    size_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(st.img, buf + done, n - done, off + (off_t)done);
        if (w <= 0)
            return w < 0 ? -errno : -EIO;
        done += (size_t)w;
    }
    return (int)n;
}

static int rec_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
    (void)fi;
    if (strcmp(path, "/img"))
        return 0;
    return log_rec(REC_SYNC, datasync ? 1 : 0, NULL, 0, 0);
}

/* Discard (punch hole) and write-zeroes (zero range, or punch hole): the
 * range reads as zeros afterwards, on the image and in the replay. */
static int rec_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
    (void)fi;
    if (strcmp(path, "/img"))
        return -EOPNOTSUPP;
    if (!(mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)))
        return -EOPNOTSUPP;
    if (off < 0 || len <= 0 || off > st.size || len > st.size - off || len > UINT32_MAX)
        return -EINVAL;
    int rc = log_rec(REC_ZERO, (uint64_t)off, NULL, (uint32_t)len, 0);
    if (rc < 0)
        return rc;
    if (fallocate(st.img, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len) < 0)
        return -errno;
    return 0;
}

static int rec_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
    (void)fi, (void)size;
    return strcmp(path, "/ctl") ? -EPERM : 0;
}

static const struct fuse_operations ops = {
    .getattr = rec_getattr,
    .readdir = rec_readdir,
    .open = rec_open,
    .read = rec_read,
    .write = rec_write,
    .fsync = rec_fsync,
    .fallocate = rec_fallocate,
    .truncate = rec_truncate,
};

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: blkrec IMAGE LOG MOUNTPOINT\n");
        return 2;
    }
    st.img = open(argv[1], O_RDWR | O_CLOEXEC);
    st.log = open(argv[2], O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
    struct stat s;
    if (st.img < 0 || st.log < 0 || fstat(st.img, &s) < 0) {
        fprintf(stderr, "blkrec: %s: %s\n", st.img < 0 ? argv[1] : argv[2], strerror(errno));
        return 2;
    }
    st.size = s.st_size;
    /* gone with the test that started it, even one killed outright: its
     * FUSE mount then goes, and the loop device over it can detach */
    pid_t parent = getppid();
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
        return 2;
    /* in the foreground, one request at a time (the log's order) */
    static char fg[] = "-f", single[] = "-s", o[] = "-o", name[] = "fsname=blkrec,subtype=blkrec";
    char *fargv[] = {argv[0], fg, single, o, name, argv[3], NULL};
    return fuse_main(6, fargv, &ops, NULL);
}
