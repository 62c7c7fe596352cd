/* The host's home directories (homes.h).
 *
 * Every command hides every home but the caller's, so every command needs
 * the list, and enumerating the user database is most of what that costs:
 * getpwent loads every NSS module of nsswitch.conf's passwd line (with
 * systemd's, a shared library and a dozen directories probed) for about
 * 0.5 ms of a command's 10. So the list is kept in the workspace's state
 * directory, in HOMES_CACHE, and used again while nothing it came from has
 * changed: not the caller's uid, /etc/passwd, /etc/nsswitch.conf or /home
 * (an entry added or removed changes its mtime), and for HOMES_TTL seconds
 * at most, which bounds how late a home that only another NSS source (a
 * directory service) knows about is hidden.
 *
 * The cache: "TXBOXHOMES1\0" KEY "\0" then each path and "\0"; written to
 * a temporary file and renamed over the old one (a reader sees one or the
 * other); not synced (lost in a crash, it is made again). Anything that
 * does not read back as one (a damaged file, a path that is not absolute)
 * is ignored and made again. The state directory is out of every
 * command's reach, so a command cannot plant one. */
#include "homes.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <time.h>

#define HOMES_CACHE "homes"
#define HOMES_MAGIC "TXBOXHOMES1"
#define HOMES_TTL 60
#define HOMES_CAP (256u << 10)

static void add_real(strvec *sv, const char *dir)
{
    char *h = realpath(dir, NULL);
    if (h && strcmp(h, "/"))
        strvec_add(sv, h);
    else
        free(h);
}

static void lookup(strvec *sv)
{
    _cleanup_dir_ DIR *d = opendir_at(AT_FDCWD, "/home");
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
            continue;
        _cleanup_free_ char *p = xasprintf("/home/%s", de->d_name);
        struct stat st;
        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
            add_real(sv, p);
    }
    add_real(sv, "/root");
    setpwent();
    struct passwd *pw;
    while ((pw = getpwent())) {
        struct stat st;
        if (pw->pw_dir && pw->pw_dir[0] == '/' && stat(pw->pw_dir, &st) == 0 && S_ISDIR(st.st_mode) &&
            st.st_uid == pw->pw_uid && pw->pw_uid != getuid())
            add_real(sv, pw->pw_dir);
    }
    endpwent();
}

/* What the list depends on, as one string. */
static void cache_key(char *key, size_t n)
{
    static const char *const from[] = {"/etc/passwd", "/etc/nsswitch.conf", "/home"};
    int at = snprintf(key, n, "%u", (unsigned)getuid());
    for (size_t i = 0; i < ARRAY_SIZE(from) && at > 0 && (size_t)at < n; i++) {
        struct stat st;
        if (stat(from[i], &st) < 0)
            at += snprintf(key + at, n - (size_t)at, " -%d", errno);
        else
            at += snprintf(key + at, n - (size_t)at, " %llu:%llu:%lld.%09ld:%lld",
                           (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
                           (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, (long long)st.st_size);
    }
}

/* The cached list into sv, if the cache is there, young enough and made
 * from key: true. */
static bool cache_read(int statefd, const char *key, strvec *sv)
{
    _cleanup_close_ int fd = openat(statefd, HOMES_CACHE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t)HOMES_CAP ||
        st.st_uid != geteuid())
        return false;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (now.tv_sec < st.st_mtim.tv_sec || now.tv_sec - st.st_mtim.tv_sec > HOMES_TTL)
        return false;
    size_t len = (size_t)st.st_size;
    _cleanup_free_ char *buf = xmalloc(len + 1);
    if (read_all(fd, buf, len + 1) != (ssize_t)len)
        return false; /* changed while read */
    size_t ml = strlen(HOMES_MAGIC) + 1, kl = strlen(key) + 1;
    if (len < ml + kl || memcmp(buf, HOMES_MAGIC, ml) || memcmp(buf + ml, key, kl) || buf[len - 1])
        return false;
    strvec got = {0};
    for (size_t i = ml + kl; i < len; i += strlen(buf + i) + 1) {
        if (buf[i] != '/') {
            strvec_free(&got);
            return false;
        }
        strvec_add(&got, xstrdup(buf + i));
    }
    for (size_t i = 0; i < got.n; i++)
        strvec_add(sv, got.v[i]);
    free(got.v);
    return true;
}

static void cache_write(int statefd, const char *key, const strvec *list)
{
    char tmp[64];
    snprintf(tmp, sizeof tmp, HOMES_CACHE ".%d", (int)getpid());
    _cleanup_close_ int fd =
        openat(statefd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    dbuf b;
    dbuf_init(&b, HOMES_CAP);
    dbuf_add(&b, HOMES_MAGIC, strlen(HOMES_MAGIC) + 1);
    dbuf_add(&b, key, strlen(key) + 1);
    for (size_t i = 0; i < list->n; i++)
        dbuf_add(&b, list->v[i], strlen(list->v[i]) + 1);
    bool ok = !b.dropped && write_all(fd, b.p, b.len) == 0;
    dbuf_free(&b);
    if (!ok || renameat(statefd, tmp, statefd, HOMES_CACHE) < 0)
        (void)unlinkat(statefd, tmp, 0);
}

void homes_all(strvec *sv, int statefd)
{
    char key[512];
    cache_key(key, sizeof key);
    if (statefd >= 0 && cache_read(statefd, key, sv))
        return;
    strvec found = {0};
    lookup(&found);
    if (statefd >= 0)
        cache_write(statefd, key, &found);
    for (size_t i = 0; i < found.n; i++)
        strvec_add(sv, found.v[i]);
    free(found.v);
}
