#include "util.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <time.h>

__attribute__((format(printf, 4, 0))) static int vfill(txbox_error *err, int code, bool with_errno,
                                                       const char *fmt, va_list ap)
{
    if (!err)
        return -1;
    err->code = code ? code : EIO;
    err->remedy = (txbox_remedy){0};
    int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    if (n < 0)
        err->msg[0] = 0;
    if (with_errno) {
        size_t l = strlen(err->msg);
        snprintf(err->msg + l, sizeof err->msg - l, ": %s", strerror(code));
    }
    tx_err_fold(err->msg);
    return -1;
}

void tx_err_fold(char *msg)
{
    /* one line whatever the inputs held (a path with a newline in it) */
    for (char *c = msg; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
}

int tx_err(txbox_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfill(err, code, false, fmt, ap);
    va_end(ap);
    return -1;
}

int tx_errno(txbox_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfill(err, code, true, fmt, ap);
    va_end(ap);
    return -1;
}

int tx_err_ctx(txbox_error *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    char old[sizeof err->msg];
    memcpy(old, err->msg, sizeof old);
    char pre[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    snprintf(err->msg, sizeof err->msg, "%s: %s", pre, old);
    tx_err_fold(err->msg);
    if (err->remedy.kind) {
        size_t at = err->remedy.at + strlen(pre) + 2, len = strlen(err->msg);
        err->remedy.at = (unsigned int)(at < len ? at : len);
    }
    return -1;
}

void remedy_set(txbox_remedy *r, txbox_remedy_kind kind, const char *arg, size_t at)
{
    *r = (txbox_remedy){.kind = kind, .at = (unsigned int)at};
    snprintf(r->arg, sizeof r->arg, "%s", arg ? arg : "");
}

int tx_remedy(txbox_error *err, txbox_remedy_kind kind, const char *arg)
{
    if (err)
        remedy_set(&err->remedy, kind, arg, strlen(err->msg));
    return -1;
}

int tx_err_more(txbox_error *err, const char *fmt, ...)
{
    if (!err)
        return -1;
    size_t l = strlen(err->msg);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg + l, sizeof err->msg - l, fmt, ap);
    va_end(ap);
    tx_err_fold(err->msg + l);
    return -1;
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        abort();
    return p;
}

void *xcalloc(size_t n, size_t m)
{
    void *p = calloc(n ? n : 1, m ? m : 1);
    if (!p)
        abort();
    return p;
}

void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        abort();
    return p;
}

char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        abort();
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        abort();
    return s;
}

void dbuf_init(dbuf *b, size_t cap)
{
    memset(b, 0, sizeof *b);
    b->cap = cap;
}

void dbuf_add(dbuf *b, const void *data, size_t n)
{
    size_t take = n;
    if (b->cap && b->len + take > b->cap)
        take = b->cap > b->len ? b->cap - b->len : 0;
    b->dropped += n - take;
    if (!take)
        return;
    if (b->len + take + 1 > b->alloc) {
        size_t na = b->alloc ? b->alloc : 256;
        while (na < b->len + take + 1)
            na *= 2;
        b->p = xrealloc(b->p, na);
        b->alloc = na;
    }
    memcpy(b->p + b->len, data, take);
    b->len += take;
    b->p[b->len] = 0;
}

void dbuf_addstr(dbuf *b, const char *s) { dbuf_add(b, s, strlen(s)); }

void dbuf_free(dbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

const char *dbuf_str(dbuf *b) { return b->p ? b->p : ""; }

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct {
    int on; /* 0 unknown, 1 on, -1 off */
    unsigned n;
    uint64_t start;
    const char *name[64];
    uint64_t at[64];
} marks;

void tx_marks_begin(uint64_t t)
{
    marks.n = 0;
    marks.start = t;
}

void tx_mark(const char *phase) { tx_mark_at(phase, now_ns()); }

void tx_mark_at(const char *phase, uint64_t t)
{
    if (!marks.on)
        marks.on = getenv("TXBOX_TIMING") ? 1 : -1;
    if (marks.on < 0 || !t)
        return;
    if (!marks.start)
        marks.start = t;
    if (marks.n < ARRAY_SIZE(marks.at)) {
        marks.name[marks.n] = phase;
        marks.at[marks.n++] = t;
    }
}

void tx_marks_print(FILE *f)
{
    if (marks.on <= 0 || !marks.n)
        return;
    uint64_t prev = marks.start;
    fputs("txbox timing (ms):", f);
    for (unsigned i = 0; i < marks.n; i++) {
        fprintf(f, "%s %s %.2f", i ? " |" : "", marks.name[i], (double)(marks.at[i] - prev) / 1e6);
        prev = marks.at[i];
    }
    fputc('\n', f);
    marks.n = 0;
    marks.start = 0;
}

double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

ssize_t read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

int thread_start(pthread_t *th, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(th, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int openat_noatime(int at, const char *name, int flags)
{
    int fd = openat(at, name, flags | O_NOATIME);
    if (fd < 0 && errno == EPERM)
        fd = openat(at, name, flags);
    return fd;
}

DIR *opendir_at(int at, const char *name)
{
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return d;
}

void strvec_add(strvec *s, char *p)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], p)) {
            free(p);
            return;
        }
    if (s->n + 2 > s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->v = xrealloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n++] = p;
    s->v[s->n] = NULL;
}

void strvec_free(strvec *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

int read_file_at(int dirfd, const char *name, size_t max, char **out, size_t *len, txbox_error *err)
{
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return tx_errno(err, errno, "cannot open %s", name);
    dbuf b;
    dbuf_init(&b, 0);
    char tmp[8192];
    for (;;) {
        ssize_t r = read(fd, tmp, sizeof tmp);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            dbuf_free(&b);
            return tx_errno(err, e, "cannot read %s", name);
        }
        if (r == 0)
            break;
        if (b.len + (size_t)r > max) {
            dbuf_free(&b);
            return tx_err(err, EFBIG, "%s is larger than %zu bytes", name, max);
        }
        dbuf_add(&b, tmp, (size_t)r);
    }
    if (len)
        *len = b.len;
    *out = b.p ? b.p : xcalloc(1, 1);
    return 0;
}

const char *path_below(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    if (n == 1 && dir[0] == '/')
        return path[0] == '/' ? path + 1 : NULL;
    if (strncmp(path, dir, n))
        return NULL;
    return path[n] == 0 ? path + n : path[n] == '/' ? path + n + 1 : NULL;
}

bool parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return false;
    uint64_t v = 0;
    for (const char *c = s; *c; c++) {
        if (*c < '0' || *c > '9')
            return false;
        unsigned d = (unsigned)(*c - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

bool tx_cap_effective(int cap)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof d);
    if (cap < 0 || cap >= 64 || syscall(SYS_capget, &h, d) < 0)
        return false;
    return d[cap / 32].effective & (1U << (cap % 32));
}

bool tx_privileged(void) { return geteuid() == 0 && tx_cap_effective(CAP_SYS_ADMIN); }

bool tx_parse_size(const char *s, bool zero_ok, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!s || !*s || *s < '0' || *s > '9')
        return false;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || (v == 0 && !zero_ok))
        return false;
    unsigned shift = 0;
    if (*end) {
        const char *u = strchr("KMGT", *end & ~0x20);
        if (!u || !*u || end[1])
            return false;
        shift = 10 * (unsigned)(u - "KMGT" + 1);
    }
    if (shift && v > (UINT64_MAX >> shift))
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

/* ---- waits ---- */

static volatile int *cancel_flag;
static void (*notice_fn)(const char *fact);

void tx_cancel_watch(volatile int *flag) { cancel_flag = flag; }

bool tx_cancel_requested(const volatile int *also)
{
    return (cancel_flag && *cancel_flag) || (also && *also);
}

void tx_set_notice(void (*fn)(const char *fact)) { notice_fn = fn; }

void tx_notice(const char *fmt, ...)
{
    if (!notice_fn)
        return;
    char b[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    tx_err_fold(b);
    notice_fn(b);
}

/* pid N's command line (NULs as spaces) and whether it is stopped. */
static void describe_pid(long pid, char *buf, size_t n)
{
    char p[64], cmd[200] = "", st[512] = "";
    snprintf(p, sizeof p, "/proc/%ld/cmdline", pid);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    ssize_t l = fd >= 0 ? read(fd, cmd, sizeof cmd - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (l > 0) {
        for (ssize_t i = 0; i < l; i++)
            if (cmd[i] == 0 || cmd[i] == '\n')
                cmd[i] = ' ';
        while (l > 0 && cmd[l - 1] == ' ')
            l--;
        cmd[l] = 0;
    }
    snprintf(p, sizeof p, "/proc/%ld/stat", pid);
    fd = open(p, O_RDONLY | O_CLOEXEC);
    l = fd >= 0 ? read(fd, st, sizeof st - 1) : -1;
    if (fd >= 0)
        close(fd);
    st[l > 0 ? l : 0] = 0;
    const char *rp = strrchr(st, ')'); /* after the name, which may hold anything */
    char state = rp && rp[1] == ' ' ? rp[2] : '?';
    snprintf(buf, n, "pid %ld%s%.160s%s%s", pid, *cmd ? " (" : "", cmd, *cmd ? ")" : "",
             state == 'T' || state == 't' ? ", stopped" : "");
    tx_err_fold(buf);
}

void tx_lock_holder(int fd, char *buf, size_t n)
{
    buf[0] = 0;
    struct stat me;
    if (fstat(fd, &me) < 0)
        return;
    FILE *f = fopen("/proc/locks", "re");
    if (!f)
        return;
    char line[256];
    long pid = 0;
    while (!pid && fgets(line, sizeof line, f)) {
        /* "1: FLOCK  ADVISORY  WRITE 1234 fd:00:5678 0 EOF"; a waiter's
         * has "->" after the number */
        char kind[16], adv[16], rw[16];
        long p;
        unsigned maj, min;
        unsigned long long ino;
        if (strstr(line, "->") ||
            sscanf(line, "%*d: %15s %15s %15s %ld %x:%x:%llu", kind, adv, rw, &p, &maj, &min, &ino) != 7)
            continue;
        if (!strcmp(kind, "FLOCK") && maj == major(me.st_dev) && min == minor(me.st_dev) &&
            ino == (unsigned long long)me.st_ino && p > 0)
            pid = p;
    }
    fclose(f);
    if (pid)
        describe_pid(pid, buf, n);
}

static unsigned lock_bound_ms(void)
{
    const char *s = getenv("TXBOX_LOCK_WAIT");
    uint64_t v;
    if (s && parse_u64(s, &v) && v > 0 && v <= 7 * 86400)
        return (unsigned)v * 1000;
    return TX_LOCK_WAIT_S * 1000;
}

int tx_flock_wait(int fd, const char *what, unsigned bound_ms, const volatile int *cancel, txbox_error *err)
{
    if (!bound_ms)
        bound_ms = lock_bound_ms();
    uint64_t t0 = now_ns(), pause_us = 1000;
    bool told = false;
    char who[256];
    for (;;) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return 0;
        if (errno != EWOULDBLOCK && errno != EINTR)
            return tx_errno(err, errno, "cannot lock %s", what);
        uint64_t ms = (now_ns() - t0) / 1000000;
        if (tx_cancel_requested(cancel) || ms >= bound_ms) {
            bool cancelled = ms < bound_ms;
            tx_lock_holder(fd, who, sizeof who);
            if (cancelled)
                tx_err(err, ECANCELED, "cancelled while waiting for %s, held by %s", what,
                       *who ? who : "another process");
            else
                tx_err(err, ETIMEDOUT, "%s is held by %s: gave up after %u s; nothing was done", what,
                       *who ? who : "another process", bound_ms / 1000);
            return -1;
        }
        if (!told && ms >= TX_LOCK_NOTICE_MS) {
            told = true;
            tx_lock_holder(fd, who, sizeof who);
            tx_notice("waiting for %s, held by %s (at most %u s)", what, *who ? who : "another process",
                      bound_ms / 1000);
        }
        struct timespec ts = {0, (long)pause_us * 1000};
        nanosleep(&ts, NULL); /* a signal ends it early: the flag is looked at next */
        if (pause_us < 50000)
            pause_us *= 2;
    }
}
