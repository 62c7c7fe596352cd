/* The syscall filter compiled into txbox (txbox_seccomp_bpf, written at
 * build time by lib/gen_seccomp.c) is the program libseccomp makes of the
 * rules in lib/seccomp_rules.c, instruction for instruction; and once
 * installed by confine_seccomp() it refuses what the rules say. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
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

/* In a child: install the compiled-in filter and try what it refuses.
 * The exit status has one bit per check that went wrong. */
static int child_checks(void)
{
    int bad = 0;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return 0x80;
    txbox_error e = {0};
    if (confine_seccomp(&e) < 0)
        return 0x40;
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
    return bad;
}

static void installed_filter_refuses_the_rules(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(child_checks());
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* The environment's allowlist: names a build needs pass, any other name
 * does not, a credential in an allowed name's value does not, and
 * --keep-env's patterns keep anything. */
static void env_allowlist(void **state)
{
    (void)state;
    static const char *const pass[] = {
        "PATH=/usr/bin", "HOME=/home/u", "LANG=C.UTF-8", "LC_ALL=C", "CC=gcc", "CFLAGS=-O2",
        "GOPATH=/go", "CARGO_HOME=/c", "JAVA_HOME=/j", "VIRTUAL_ENV=/v", "NODE_ENV=production",
        "HTTPS_PROXY=http://127.0.0.1:3128", "npm_config_cache=/n", "PIP_INDEX_URL=https://pypi.org/simple",
    };
    static const char *const drop[] = {
        "MYSQL_PWD=x", "DB_PASS=x", "SMTP_PASS=x", "CI_JOB_JWT=x", "STRIPE_SK=x", "BASIC_AUTH=x",
        "SLACK_WEBHOOK_URL=https://hooks.slack.com/services/T/B/x", "DOCKER_AUTH_CONFIG={}",
        "DATABASE_URL=postgres://app:pw@db/app", "MY_SETTING=1", "SSH_AUTH_SOCK=/run/a",
        "HTTPS_PROXY=http://u:pw@proxy:3128", "PIP_INDEX_URL=https://__token__:pw@pypi.example/simple",
        "GOPROXY=https://tok@goproxy.example", "npm_config__authToken=x", "npm_config_//r/:_password=x",
        "CFLAGS=-DX Password=hunter2", "PATH", "=x",
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
