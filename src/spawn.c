/* Starting a child txbox: see spawn.h. */
#include "spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

extern char **environ;

static void close_pair(int p[2])
{
    for (int i = 0; i < 2; i++)
        if (p[i] >= 0)
            close(p[i]);
}

int self_spawn(char *const argv[], char *const envp[], int cwd_fd, const char *dir, int tee_target,
               struct self_child *c, txbox_error *err)
{
    c->pid = -1;
    c->pidfd = c->out_fd = c->err_fd = c->tee_fd = -1;
    int outp[2] = {-1, -1}, errp[2] = {-1, -1}, teep[2] = {-1, -1};
    bool tee = tee_target >= 0;
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0 || pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
        (tee && pipe2(teep, O_CLOEXEC) < 0)) {
        int e = errno;
        if (devnull >= 0)
            close(devnull);
        close_pair(outp);
        close_pair(errp);
        close_pair(teep);
        return tx_errno(err, e, "cannot make the pipes for txbox %s", argv[1] ? argv[1] : "");
    }
    pid_t parent = getpid();
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        /* The child: default signals, nothing blocked, dies with the caller.
         * Only async-signal-safe calls from here on (the caller may have
         * threads). */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL); /* the caller's handlers must not run here */
        signal(SIGURG, SIG_DFL);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(TXBOX_EXIT_ERROR);
        /* the tee's end first out of the way of 0 .. tee_target */
        int teew = tee ? fcntl(teep[1], F_DUPFD_CLOEXEC, tee_target + 8) : -1;
        if (dup2(devnull, 0) < 0 || dup2(outp[1], 1) < 0 || dup2(errp[1], 2) < 0 ||
            (tee && (teew < 0 || dup2(teew, tee_target) < 0)))
            _exit(TXBOX_EXIT_ERROR);
        if ((cwd_fd >= 0 && fchdir(cwd_fd) < 0) || (cwd_fd < 0 && dir && chdir(dir) < 0)) {
            dprintf(2, "txbox: cannot enter the working directory: %s\n", strerrordesc_np(errno));
            _exit(TXBOX_EXIT_ERROR);
        }
        execve("/proc/self/exe", argv, envp ? envp : environ);
        dprintf(2, "txbox: cannot execute /proc/self/exe: %s\n", strerrordesc_np(errno));
        _exit(TXBOX_EXIT_ERROR);
    }
    int e = errno;
    close(devnull);
    close(outp[1]);
    close(errp[1]);
    if (tee)
        close(teep[1]);
    if (pid < 0) {
        close(outp[0]);
        close(errp[0]);
        if (tee)
            close(teep[0]);
        return tx_errno(err, e, "cannot start txbox %s", argv[1] ? argv[1] : "");
    }
    c->pid = pid;
    c->out_fd = outp[0];
    c->err_fd = errp[0];
    c->tee_fd = tee ? teep[0] : -1;
    int fds[] = {c->out_fd, c->err_fd, c->tee_fd};
    for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
        if (fds[i] >= 0)
            fcntl(fds[i], F_SETFL, O_NONBLOCK);
    c->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (c->pidfd < 0) {
        e = errno;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
            if (fds[i] >= 0)
                close(fds[i]);
        c->pid = -1;
        c->out_fd = c->err_fd = c->tee_fd = -1;
        return tx_errno(err, e, "pidfd_open");
    }
    return 0;
}
