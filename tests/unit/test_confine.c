/* The syscall filter compiled into txbox (txbox_seccomp_bpf, written at
 * build time by lib/sandbox/gen_seccomp.c) is the program libseccomp makes of the
 * rules in lib/sandbox/seccomp_rules.c, instruction for instruction; and once
 * installed by confine_seccomp() it refuses what the rules say. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "confine.h"
#include "connguard.h"
#include "seccomp_rules.h"

/* ctx's BPF program, exported through a memfd (gen_seccomp uses a
 * tmpfile: a different path to the same bytes). */
static struct sock_filter *export_prog(scmp_filter_ctx ctx, size_t *n)
{
    int fd = memfd_create("test-seccomp", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(seccomp_export_bpf(ctx, fd), 0);
    off_t size = lseek(fd, 0, SEEK_END);
    assert_true(size > 0);
    assert_int_equal(size % (off_t)sizeof(struct sock_filter), 0);
    struct sock_filter *p = malloc((size_t)size);
    assert_non_null(p);
    assert_int_equal(pread(fd, p, (size_t)size, 0), size);
    close(fd);
    *n = (size_t)size / sizeof *p;
    return p;
}

static bool same_prog(const struct sock_filter *a, size_t na, const struct sock_filter *b, size_t nb)
{
    return na == nb && memcmp(a, b, na * sizeof *a) == 0;
}

static void compiled_in_filter_is_libseccomps(void **state)
{
    (void)state;
    scmp_filter_ctx ctx = confine_seccomp_new();
    assert_non_null(ctx);
    size_t n;
    struct sock_filter *p = export_prog(ctx, &n);
    seccomp_release(ctx);
    /* the rules make a real program, not an allow-all stub */
    assert_true(n > 50);
    assert_int_equal(n, txbox_seccomp_bpf_len);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(p[i].code, txbox_seccomp_bpf[i].code);
        assert_int_equal(p[i].jt, txbox_seccomp_bpf[i].jt);
        assert_int_equal(p[i].jf, txbox_seccomp_bpf[i].jf);
        assert_int_equal(p[i].k, txbox_seccomp_bpf[i].k);
    }
    assert_true(same_prog(p, n, txbox_seccomp_bpf, txbox_seccomp_bpf_len));

    /* A difference in any one instruction is seen. */
    for (size_t i = 0; i < n; i++) {
        p[i].k ^= 1;
        assert_false(same_prog(p, n, txbox_seccomp_bpf, txbox_seccomp_bpf_len));
        p[i].k ^= 1;
        p[i].jf ^= 1;
        assert_false(same_prog(p, n, txbox_seccomp_bpf, txbox_seccomp_bpf_len));
        p[i].jf ^= 1;
    }
    assert_false(same_prog(p, n - 1, txbox_seccomp_bpf, txbox_seccomp_bpf_len));
    free(p);

    /* So is one rule more than the tables give. */
    ctx = confine_seccomp_new();
    assert_non_null(ctx);
    assert_int_equal(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(getpid), 0), 0);
    p = export_prog(ctx, &n);
    seccomp_release(ctx);
    assert_false(same_prog(p, n, txbox_seccomp_bpf, txbox_seccomp_bpf_len));
    free(p);
}

/* The filter sends exit() and exit_group() to its listener: a child under it
 * hands the listener to its parent (send_fd), which serves it (serve_until)
 * until the child has ended. */
static void send_fd(int sock, int fd)
{
    char ch = 'L';
    struct iovec iov = {.iov_base = &ch, .iov_len = 1};
    char room[CMSG_SPACE(sizeof(int))] = {0};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = room, .msg_controllen = sizeof room};
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &fd, sizeof fd);
    if (sendmsg(sock, &m, 0) != 1)
        _exit(0x7f);
    close(fd);
}

/* In a child: no_new_privs, the compiled-in filter, its listener sent on
 * sock. 0, or the bits of a child's status that say which failed. */
static int filter_on(int sock)
{
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return 0x80;
    txbox_error e = {0};
    int l = -1;
    if (confine_seccomp(&l, &e) < 0 || l < 0)
        return 0x40;
    send_fd(sock, l);
    return 0;
}

/* The listener the child at the other end of sock sends, served with g
 * until the child ends: its status; *served: how many notifications. */
static int serve_until(struct connguard *g, int sock, pid_t pid, int *served)
{
    char ch;
    char room[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {.iov_base = &ch, .iov_len = 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = room, .msg_controllen = sizeof room};
    assert_int_equal(recvmsg(sock, &m, MSG_CMSG_CLOEXEC), 1);
    int l;
    memcpy(&l, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof l);
    int st;
    *served = 0;
    for (;;) {
        struct pollfd pf = {.fd = l, .events = POLLIN};
        int r = poll(&pf, 1, 100);
        if (r > 0 && (pf.revents & POLLIN)) {
            assert_int_equal(connguard_serve(g, l), 0);
            (*served)++;
        } else if (waitpid(pid, &st, WNOHANG) == pid) {
            break;
        }
    }
    close(l);
    return st;
}

/* child(sock, arg) in a child process, which puts itself under the filter
 * (filter_on(sock)); its notifications served with g until it ends: its
 * exit status (it must exit), *served how many were served. */
static int under_filter(int (*child)(int sock, const void *arg), const void *arg, struct connguard *g,
                        int *served)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        _exit(child(sv[1], arg));
    }
    close(sv[1]);
    int st = serve_until(g, sv[0], pid, served);
    close(sv[0]);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* In a child: install the compiled-in filter and try what it refuses.
 * The exit status has one bit per check that went wrong. */
static int child_checks(int sock, const void *arg)
{
    (void)arg;
    int bad = filter_on(sock);
    if (bad)
        return bad;
    if (getppid() <= 0) /* allowed calls still work */
        bad |= 0x01;
    if (!(unshare(CLONE_NEWUSER) < 0 && errno == EPERM))
        bad |= 0x02;
    if (!(syscall(SYS_clone3, NULL, 0) < 0 && errno == ENOSYS))
        bad |= 0x04;
    if (!(mknodat(AT_FDCWD, "/nonexistent-dir/x", S_IFCHR | 0600, 0) < 0 && errno == EPERM))
        bad |= 0x08;
    char c = 'x';
    if (!(ioctl(0, TIOCSTI, &c) < 0 && errno == EPERM))
        bad |= 0x10;
    if (!(syscall(SYS_ptrace, 0, 0, 0, 0) < 0 && errno == EPERM))
        bad |= 0x20;
    /* unix datagrams (any address in every send), io_uring (bypasses the
     * filter); unix streams and other datagrams are fine */
    int sv[2];
    if (!(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0) < 0 && errno == EPERM) ||
        !(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, sv) < 0 && errno == EPERM) ||
        !(syscall(SYS_io_uring_setup, 1, NULL) < 0 && errno == EPERM))
        bad |= 0x100;
    if (socket(AF_UNIX, SOCK_STREAM, 0) < 0 || socket(AF_INET, SOCK_DGRAM, 0) < 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) < 0)
        bad |= 0x200;
    return bad;
}

static void installed_filter_refuses_the_rules(void **state)
{
    (void)state;
    struct connguard g;
    assert_int_equal(connguard_init(&g), 0);
    int served;
    assert_int_equal(under_filter(child_checks, NULL, &g, &served), 0);
    assert_int_equal(served, 1); /* its exit */
    assert_int_equal(g.xfsz, 0);
}

/* The write limit: a write past RLIMIT_FSIZE with SIGXFSZ blocked (as the
 * sandbox runs a command) fails with EFBIG and leaves the signal pending;
 * the process ends normally, and the guard counts it at its exit. One
 * that stays within the limit is not counted. */
static int xfsz_child(int sock, const void *arg)
{
    bool past = *(const bool *)arg;
    int f = filter_on(sock);
    if (f)
        return f;
    sigset_t x;
    sigemptyset(&x);
    sigaddset(&x, SIGXFSZ);
    sigprocmask(SIG_BLOCK, &x, NULL);
    struct rlimit rl = {4096, 4096};
    if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
        return 0x20;
    char path[] = "/tmp/txbox-xfsz-XXXXXX";
    int fd = mkstemp(path);
    unlink(path);
    if (fd < 0)
        return 0x10;
    int bad = 0;
    errno = 0;
    if (past && !(ftruncate(fd, 1 << 20) < 0 && errno == EFBIG))
        bad |= 0x01; /* refused, not killed */
    if (!past && ftruncate(fd, 1024) < 0)
        bad |= 0x02;
    close(fd);
    return bad;
}

static void guard_counts_ends_past_the_write_limit(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++) {
        bool past = i;
        struct connguard g;
        assert_int_equal(connguard_init(&g), 0);
        int served;
        assert_int_equal(under_filter(xfsz_child, &past, &g, &served), 0);
        assert_int_equal(g.xfsz, (uint64_t)past);
    }
}

/* ---- the connection guard ---- */

static int listen_unix(const char *path)
{
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    unlink(path);
    assert_true(s >= 0);
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(s, 8), 0);
    return s;
}

/* connect(2) to a unix path: 0 or errno */
static int try_unix(const char *path)
{
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int r = connect(s, (struct sockaddr *)&a, sizeof a) < 0 ? errno : 0;
    close(s);
    return r;
}

struct guard_case {
    char own[64], host[64]; /* directories: on the allowed mount, on another */
    int tcp_port;
};

/* The child: under the filter, its listener sent to the parent, it tries
 * each connection; one bit per result that is not the expected one. */
static int guard_child(int sock, const void *arg)
{
    const struct guard_case *c = arg;
    int bad = filter_on(sock);
    if (bad)
        return bad;
    char p[160];
    snprintf(p, sizeof p, "%s/s.sock", c->own);
    if (try_unix(p) != 0)
        bad |= 0x01; /* a socket on the allowed mount */
    snprintf(p, sizeof p, "%s/s.sock", c->host);
    if (try_unix(p) != EACCES)
        bad |= 0x02; /* a socket elsewhere */
    snprintf(p, sizeof p, "%s/link.sock", c->own);
    if (try_unix(p) != EACCES)
        bad |= 0x04; /* a symlink on the allowed mount to a socket elsewhere */
    snprintf(p, sizeof p, "%s/plain", c->own);
    if (try_unix(p) != ECONNREFUSED)
        bad |= 0x08; /* not a socket */
    if (chdir(c->own) < 0 || try_unix("s.sock") != 0 || chdir(c->host) < 0 || try_unix("s.sock") != EACCES ||
        try_unix("../nonexistent-dir/x.sock") != ENOENT)
        bad |= 0x10; /* relative to the working directory */
    int t = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in in = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)c->tcp_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(t, (struct sockaddr *)&in, sizeof in) < 0)
        bad |= 0x100; /* another family: connected by the guard */
    if (connect(t, (struct sockaddr *)1, sizeof in) == 0 || errno != EFAULT)
        bad |= 0x200; /* a bad address */
    if (connect(12345, (struct sockaddr *)&in, sizeof in) == 0 || errno != EBADF)
        bad |= 0x400; /* a bad descriptor */
    return bad;
}

static void guard_connects_only_to_own_sockets(void **state)
{
    (void)state;
    struct guard_case c = {0};
    snprintf(c.own, sizeof c.own, "/dev/shm/txbox-guard-XXXXXX");
    snprintf(c.host, sizeof c.host, "/var/tmp/txbox-guard-XXXXXX");
    assert_non_null(mkdtemp(c.own));
    assert_non_null(mkdtemp(c.host));
    char p[200], q[200];
    snprintf(p, sizeof p, "%s/s.sock", c.own);
    int own = listen_unix(p);
    snprintf(p, sizeof p, "%s/s.sock", c.host);
    int host = listen_unix(p);
    snprintf(q, sizeof q, "%s/link.sock", c.own);
    assert_int_equal(symlink(p, q), 0);
    snprintf(p, sizeof p, "%s/plain", c.own);
    close(open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    int tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t il = sizeof in;
    assert_int_equal(bind(tcp, (struct sockaddr *)&in, sizeof in), 0);
    assert_int_equal(listen(tcp, 8), 0);
    assert_int_equal(getsockname(tcp, (struct sockaddr *)&in, &il), 0);
    c.tcp_port = ntohs(in.sin_port);

    struct connguard g;
    assert_int_equal(connguard_init(&g), 0);
    assert_int_equal(connguard_allow_mount(&g, c.own), 0);
    /* the test proves something only if the two are on different mounts */
    struct connguard other;
    assert_int_equal(connguard_init(&other), 0);
    assert_int_equal(connguard_allow_mount(&other, c.host), 0);
    assert_true(other.mounts[0] != g.mounts[0]);

    int served;
    assert_int_equal(under_filter(guard_child, &c, &g, &served), 0);
    assert_int_equal(served, 11); /* ten connections, and its exit */
    assert_int_equal(g.refused, 3);
    assert_int_equal(g.xfsz, 0);
    close(own);
    close(host);
    close(tcp);
    snprintf(p, sizeof p, "rm -rf '%s' '%s'", c.own, c.host);
    assert_int_equal(system(p), 0);
}

/* The environment's allowlist: names a build needs pass, any other name
 * does not, a credential in an allowed name's value does not, and
 * --keep-env's patterns keep anything. */
static void env_allowlist(void **state)
{
    (void)state;
    static const char *const pass[] = {
        "PATH=/usr/bin",
        "HOME=/home/u",
        "LANG=C.UTF-8",
        "LC_ALL=C",
        "CC=gcc",
        "CFLAGS=-O2",
        "GOPATH=/go",
        "CARGO_HOME=/c",
        "JAVA_HOME=/j",
        "VIRTUAL_ENV=/v",
        "NODE_ENV=production",
        "HTTPS_PROXY=http://127.0.0.1:3128",
        "npm_config_cache=/n",
        "PIP_INDEX_URL=https://pypi.org/simple",
    };
    static const char *const drop[] = {
        "MYSQL_PWD=x",
        "DB_PASS=x",
        "SMTP_PASS=x",
        "CI_JOB_JWT=x",
        "STRIPE_SK=x",
        "BASIC_AUTH=x",
        "SLACK_WEBHOOK_URL=https://hooks.slack.com/services/T/B/x",
        "DOCKER_AUTH_CONFIG={}",
        "DATABASE_URL=postgres://app:pw@db/app",
        "MY_SETTING=1",
        "SSH_AUTH_SOCK=/run/a",
        "HTTPS_PROXY=http://u:pw@proxy:3128",
        "PIP_INDEX_URL=https://__token__:pw@pypi.example/simple",
        "GOPROXY=https://tok@goproxy.example",
        "npm_config__authToken=x",
        "npm_config_//r/:_password=x",
        "CFLAGS=-DX Password=hunter2",
        "PATH",
        "=x",
    };
    for (size_t i = 0; i < ARRAY_SIZE(pass); i++)
        if (!confine_env_passes(pass[i], NULL))
            fail_msg("dropped: %s", pass[i]);
    for (size_t i = 0; i < ARRAY_SIZE(drop); i++)
        if (confine_env_passes(drop[i], NULL))
            fail_msg("passed: %s", drop[i]);
    const char *const keep[] = {"DB_*", "DATABASE_URL", NULL};
    assert_true(confine_env_passes("DB_PASS=x", keep));
    assert_true(confine_env_passes("DATABASE_URL=postgres://app:pw@db/app", keep));
    assert_false(confine_env_passes("MYSQL_PWD=x", keep));
    assert_true(confine_env_value_secret("AccountName=a;AccountKey=k"));
    assert_false(confine_env_value_secret("https://example.com/a@b")); /* @ in the path */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(env_allowlist),
        cmocka_unit_test(compiled_in_filter_is_libseccomps),
        cmocka_unit_test(installed_filter_refuses_the_rules),
        cmocka_unit_test(guard_connects_only_to_own_sockets),
        cmocka_unit_test(guard_counts_ends_past_the_write_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
