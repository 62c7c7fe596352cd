/* The rules of the syscall filter (see confine.c for what it is for).
 *
 * Compiled into the build-time generator gen_seccomp, which writes the BPF
 * program libseccomp makes of them as C data (txbox_seccomp_bpf), and into
 * tests/unit/test_confine, which builds the program again and compares it
 * with the compiled-in one. txbox loads that program directly. */
#include "seccomp_rules.h"

#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Calls a build or a test never needs, and those that reach past the
 * sandbox: they fail with EPERM (a clear error, not a kill). */
static const char *const denied_calls[] = {
    /* mounts and namespaces */
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "setns",
    "chroot",
    /* other processes' memory */
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    /* the kernel itself */
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "bpf",
    "perf_event_open",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "quotactl_fd",
    "syslog",
    "lookup_dcookie",
    "iopl",
    "ioperm",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "vhangup",
    "userfaultfd",
    "open_by_handle_at",
    "name_to_handle_at",
    "nfsservctl",
    /* the kernel keyring */
    "keyctl",
    "add_key",
    "request_key",
    /* io_uring: its operations (IORING_OP_CONNECT, ...) bypass this filter */
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
};

/* Calls refused only for some argument values: arg & mask == value. */
static const struct arg_rule {
    int nr;
    unsigned arg;
    uint64_t mask, value;
    int err;
} arg_rules[] = {
    /* new user or mount namespaces (to regain capabilities) */
    {SCMP_SYS(unshare), 0, CLONE_NEWUSER, CLONE_NEWUSER, EPERM},
    {SCMP_SYS(unshare), 0, CLONE_NEWNS, CLONE_NEWNS, EPERM},
    {SCMP_SYS(clone), 0, CLONE_NEWUSER, CLONE_NEWUSER, EPERM},
    /* terminal injection */
    {SCMP_SYS(ioctl), 1, 0xffffffffu, TIOCSTI, EPERM},
    {SCMP_SYS(ioctl), 1, 0xffffffffu, TIOCLINUX, EPERM},
    /* device nodes (a FIFO or a socket is fine) */
    {SCMP_SYS(mknod), 1, S_IFMT, S_IFCHR, EPERM},
    {SCMP_SYS(mknod), 1, S_IFMT, S_IFBLK, EPERM},
    {SCMP_SYS(mknodat), 2, S_IFMT, S_IFCHR, EPERM},
    {SCMP_SYS(mknodat), 2, S_IFMT, S_IFBLK, EPERM},
};

/* Unix datagram sockets: a datagram names its destination in each
 * sendto()/sendmsg(), in memory a filter cannot read, so a host socket by
 * path would be reached past the connection guard. Refused for socket()
 * and socketpair() (whose sockets may send to any address too); stream and
 * seqpacket sockets connect once, through the guard. */
static const int dgram_calls[] = {SCMP_SYS(socket), SCMP_SYS(socketpair)};

int confine_seccomp_build(scmp_filter_ctx ctx)
{
    int rc = 0;
    for (size_t i = 0; i < N_OF(denied_calls) && rc == 0; i++) {
        int nr = seccomp_syscall_resolve_name(denied_calls[i]);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not on this architecture */
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
    }
    for (size_t i = 0; i < N_OF(arg_rules) && rc == 0; i++) {
        const struct arg_rule *a = &arg_rules[i];
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(a->err), a->nr, 1,
                              SCMP_CMP64(a->arg, SCMP_CMP_MASKED_EQ, a->mask, a->value));
    }
    for (size_t i = 0; i < N_OF(dgram_calls) && rc == 0; i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), dgram_calls[i], 2, SCMP_A0(SCMP_CMP_EQ, AF_UNIX),
                              SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_DGRAM));
    /* connect() goes to the sandbox's init, which connects on the
     * command's behalf (connguard.h) */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(connect), 0);
    /* and every end of a thread or process, so that init sees a write the
     * file size limit refused (connguard.h: the write limit) */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(exit), 0);
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(exit_group), 0);
    /* clone3 passes its flags in memory a filter cannot read: make libc fall
     * back to clone, which a rule above sees. */
    if (rc == 0)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
    return rc;
}

scmp_filter_ctx confine_seccomp_new(void)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        errno = ENOMEM;
        return NULL;
    }
    int rc = confine_seccomp_build(ctx);
    if (rc < 0) {
        seccomp_release(ctx);
        errno = -rc;
        return NULL;
    }
    return ctx;
}
