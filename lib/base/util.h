/* Internal helpers shared by every part of libtxbox.
 *
 * Error contract (after crun's error_handling.md): a function that can fail
 * returns a negative value and fills `txbox_error *err` through tx_err();
 * callers add context with tx_err_ctx() while passing the error up. Only
 * main() and a sandboxed child after fork may die. */
#ifndef TXBOX_UTIL_H
#define TXBOX_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "txbox.h"

#define MUST_CHECK __attribute__((warn_unused_result))
#define PRINTF(a, b) __attribute__((format(printf, a, b)))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Fill err (if non-NULL) with code and a formatted message; returns -1. */
int tx_err(txbox_error *err, int code, const char *fmt, ...) PRINTF(3, 4);
/* Same, with ": strerror(code)" appended. */
int tx_errno(txbox_error *err, int code, const char *fmt, ...) PRINTF(3, 4);
/* Prefix the message already in err with context ("context: old"); returns -1. */
int tx_err_ctx(txbox_error *err, const char *fmt, ...) PRINTF(2, 3);
/* The remedy for the error in err (one per error: the last set wins), its
 * words to go at the end of the message as it stands; context prefixed
 * later goes before them, text added with tx_err_more after. The words are
 * the front's (src/remedy.c): lib/ states the fact only. Returns -1. */
int tx_remedy(txbox_error *err, txbox_remedy_kind kind, const char *arg);
/* Newlines and carriage returns in msg made spaces: txbox_error.msg is one
 * line (txbox.h), whatever its parts held. Every path into it folds. */
void tx_err_fold(char *msg);
/* Appends to the message in err; returns -1. */
int tx_err_more(txbox_error *err, const char *fmt, ...) PRINTF(2, 3);
/* r = kind with arg (may be NULL), its words to go at offset at. */
void remedy_set(txbox_remedy *r, txbox_remedy_kind kind, const char *arg, size_t at);

/* ---- scoped cleanup (bubblewrap/crun utils.h style) ---- */
static inline void cleanup_freep(void *p) { free(*(void **)p); }
static inline void cleanup_closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}
static inline void cleanup_dirp(DIR **d)
{
    if (*d)
        closedir(*d);
}
static inline void cleanup_filep(FILE **f)
{
    if (*f)
        fclose(*f);
}
#define _cleanup_free_ __attribute__((cleanup(cleanup_freep)))
#define _cleanup_close_ __attribute__((cleanup(cleanup_closep)))
#define _cleanup_dir_ __attribute__((cleanup(cleanup_dirp)))
#define _cleanup_file_ __attribute__((cleanup(cleanup_filep)))

static inline void *steal_ptr(void *pp)
{
    void **p = pp, *r = *p;
    *p = NULL;
    return r;
}
#define steal_pointer(pp) ((__typeof__(*(pp)))steal_ptr(pp))
static inline int take_fd(int *fd)
{
    int r = *fd;
    *fd = -1;
    return r;
}

/* Allocation that cannot fail (aborts on OOM, as there is nothing sane to do). */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t m);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) PRINTF(1, 2);

/* ---- a byte buffer with a hard cap (curl's dynbuf) ---- */
typedef struct dbuf {
    char *p;
    size_t len, alloc;
    size_t cap;       /* bytes kept at most; 0 = unlimited */
    uint64_t dropped; /* bytes refused because of the cap */
} dbuf;
void dbuf_init(dbuf *b, size_t cap);
/* Appends what fits under the cap, counts the rest as dropped. */
void dbuf_add(dbuf *b, const void *data, size_t n);
void dbuf_addstr(dbuf *b, const char *s);
void dbuf_free(dbuf *b);
/* NUL-terminated view (always valid after init). */
const char *dbuf_str(dbuf *b);

/* ---- a set of strings, NULL-terminated once one is added ---- */
typedef struct strvec {
    char **v;
    size_t n, cap;
} strvec;
/* Adds p (taking it; freed at once when it is there already). */
void strvec_add(strvec *s, char *p);
void strvec_free(strvec *s);

/* Monotonic clock in nanoseconds. */
uint64_t now_ns(void);
/* The TXBOX_TIMING probe: with that variable set, tx_mark(PHASE) notes the
 * time a phase ended, now, and tx_mark_at(PHASE, T) at T (now_ns(); 0 is
 * skipped); up to 32 marks from tx_marks_begin(T0) (without it, the first
 * mark starts the clock). tx_marks_print writes "phase ms | ..." to a
 * stream and restarts. */
void tx_marks_begin(uint64_t t0);
void tx_mark(const char *phase);
void tx_mark_at(const char *phase, uint64_t t);
void tx_marks_print(FILE *f);
/* Wall clock, seconds since the epoch, with sub-second precision. */
double wall_time(void);

/* write(2)/read(2) loops that retry EINTR and short transfers. */
MUST_CHECK int write_all(int fd, const void *buf, size_t n);
MUST_CHECK ssize_t read_all(int fd, void *buf, size_t n);

/* pthread_create with every signal blocked in the new thread (signals
 * stay the main thread's: its handlers, its EINTRs); 0 or an errno. */
int thread_start(pthread_t *th, void *(*fn)(void *), void *arg);
/* opendir(3) of NAME under the directory fd AT, not following a symlink
 * at NAME ("." for AT itself); NULL with errno set on failure (the fd is
 * never leaked). */
DIR *opendir_at(int at, const char *name);
/* openat(2) for reading that leaves the file's atime alone (O_NOATIME,
 * when the caller owns the file; else a plain open): txbox reads what a
 * command wrote, or the workspace's old content, without changing either
 * (ext4 with relatime wrote every new file's inode again at its first
 * read: 10,000 inode updates in a 10,000-file commit). */
int openat_noatime(int at, const char *name, int flags);
/* Read a whole small file relative to dirfd (cap: max bytes). */
MUST_CHECK int read_file_at(int dirfd, const char *name, size_t max, char **out, size_t *len,
                            txbox_error *err);

/* Is `s` a non-empty decimal u64 that fits? */
bool parse_u64(const char *s, uint64_t *out);
/* path's part below dir (both absolute, resolved, dir without a trailing
 * slash but "/" itself): "" for dir itself, NULL when path is not there. */
const char *path_below(const char *path, const char *dir);
static inline bool path_under(const char *path, const char *dir) { return path_below(path, dir) != NULL; }
/* A size: a whole number with an optional K, M, G or T (powers of 1024);
 * 0 only when zero_ok. */
bool tx_parse_size(const char *s, bool zero_ok, uint64_t *out);

/* ---- waits: cancelled, bounded, and saying what they wait for ---- */
/* The flag a front's signal handler sets (Ctrl-C, SIGTERM): every wait in
 * the library ends when it is set (NULL: none). */
void tx_cancel_watch(volatile int *flag);
/* Is the watched flag, or also (may be NULL), set? */
bool tx_cancel_requested(const volatile int *also);
/* Where a long wait says what it waits for, once (a fact, one line; the
 * front words it: the CLI on stderr). NULL: nowhere. */
void tx_set_notice(void (*fn)(const char *fact));
void tx_notice(const char *fmt, ...) PRINTF(1, 2);
/* Who holds the flock on the file open as fd, from /proc/locks: "pid N
 * (its command line), stopped" or "pid N (...)", or "" when it cannot be
 * told (another pid namespace, no /proc). */
void tx_lock_holder(int fd, char *buf, size_t n);
/* flock(fd, LOCK_EX) that waits at most bound_ms (0: TXBOX_LOCK_WAIT
 * seconds, default TX_LOCK_WAIT_S), ends when cancel or the watched flag is
 * set, and after TX_LOCK_NOTICE_MS says (tx_notice) who holds it: it tries
 * without blocking, sleeping 1 to 50 ms between tries, never blocks in
 * flock (a stopped holder, a signal: each is seen within 50 ms). 0; -1 with
 * err (what: the lock's name): ETIMEDOUT at the bound, ECANCELED when
 * cancelled, naming the holder. */
#define TX_LOCK_WAIT_S 120
#define TX_LOCK_NOTICE_MS 1000
MUST_CHECK int tx_flock_wait(int fd, const char *what, unsigned bound_ms, const volatile int *cancel,
                             txbox_error *err);

/* Does txbox run as root with the power to make namespaces and mounts
 * itself (euid 0 and CAP_SYS_ADMIN in its effective set)? Root in a
 * container without CAP_SYS_ADMIN, the runtimes' default, is not: it
 * works as an unprivileged user does, through a user namespace. */
bool tx_privileged(void);
/* Is capability CAP (CAP_SETUID...) in this process's effective set? */
bool tx_cap_effective(int cap);

#endif
