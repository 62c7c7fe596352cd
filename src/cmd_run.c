/* txbox run: one command as one transaction. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cmds.h"
#include "run_args.h"
#include "txbox_policy.h"

static volatile int cancelled;

static void on_signal(int sig)
{
    (void)sig;
    cancelled = 1;
}

static void usage(FILE *f, const char *name)
{
    fprintf(f, "usage: txbox run [-C DIR] [--json] [--timeout S] [--backend overlay|copy]\n"
               "                 [--allow-copy-fallback] [--net[=proxy|host]] [--allow-domain D]...\n"
               "                 [--policy FILE] [--allow-degraded]\n"
               "                 [--memory SIZE] [--pids N] [--cpu S] [--max-write SIZE]\n"
               "                 [--keep-env PATTERN]... [--hide PATH]... [--tx ID]\n"
               "                 [--shell bash|sh|PATH] [--read-only] [--tee-fd FD]\n"
               "                 [--session ID] [--cwd-file PATH]\n"
               "                 (-c 'STRING' | -- PROG ARGS...)\n"
               "\n"
               "Runs the command in a sandbox where the workspace is a copy-on-write view;\n"
               "exit status 0 commits its changes atomically, anything else rolls them back.\n"
               "-c STRING runs as SHELL -c STRING. --shell: bash (the default where there is\n"
               "one: /bin/bash, /usr/bin/bash), sh (/bin/sh), or the absolute path of bash,\n"
               "sh or dash. The policy reads commands as bash; run by sh, a command that sh\n"
               "reads otherwise ($'..', ((..)), {a,b}, [[, aliases, ...) is never read-only\n"
               "and gets no network from a rule. --read-only: run without a transaction, the\n"
               "workspace read-only, whatever the verdict. --tee-fd FD (with --json): also\n"
               "copy the command's output to descriptor FD as it comes.\n"
               "Exit status: the command's own; 122 blocked, 123 conflict, 124 timed out,\n"
               "125 txbox error; 121 held for review (txbox review), e.g. a change to a\n"
               "policy file in the workspace.\n"
               "A commit that would destroy work that exists nowhere else (uncommitted or\n"
               "untracked files, staged changes, a stash, commits, a repository, a database)\n"
               "is held for you when stdin and stderr are a terminal (and not --json);\n"
               "otherwise it commits, and the status line and 'losses' say what was lost\n"
               "and that 'txbox undo TX' brings it back (docs/guarantees.md, Losses).\n"
               "The policy: the built-in one, then --policy FILE (yours), then the\n"
               "workspace's .txbox-policy.yaml, which can only tighten unless you trust the\n"
               "workspace (docs/policy.md); what it was refused: 'txbox: warning:' lines.\n"
               "With --tx ID the command runs inside the open multi-command transaction ID\n"
               "(txbox begin): it sees the transaction's changes so far; if it succeeds its\n"
               "own are added to them (outcome staged), else only they are rolled back.\n"
               "With --session ID the command runs in the session ID (txbox session), which is\n"
               "started when none of that id runs: its /tmp, loopback network and background\n"
               "processes carry over from command to command (docs/sessions.md).\n"
               "--cwd-file PATH: write the directory the command's shell ended in (when it\n"
               "lies in the workspace or the session's /tmp; else the file is left empty) to\n"
               "PATH, created 0600, never through a symbolic link.\n"
               "\n"
               "Network: the command always has its own network namespace (loopback only).\n"
               "When a policy rule (npm install, pip install, git fetch, ...) or --net grants\n"
               "network, its one way out is txbox's proxy for the transaction (HTTP_PROXY and\n"
               "HTTPS_PROXY are set to it): HTTP CONNECT and plain HTTP to the package\n"
               "registries the built-in rules name, and to each --allow-domain D (a host name,\n"
               "or *.example.org for its subdomains); anything else gets HTTP 403, and no\n"
               "name that resolves to a loopback, link-local or private address is reached.\n"
               "--net=host gives the command the host's network namespace instead (reported\n"
               "as protections.network \"host\").\n"
               "\n"
               "--memory SIZE bounds the whole transaction through a cgroup (as root); as an\n"
               "unprivileged user it is an rlimit per process: processes together, or a\n"
               "shared mapping, may hold more (protections.limits.memory_scope says which).\n"
               "The command's environment passes through an allowlist (the shell's, locale,\n"
               "proxies, toolchains' variables without credentials); --keep-env PATTERN keeps\n"
               "more. Other users' homes, the shadow files, credential stores and histories\n"
               "are hidden; --hide PATH (and a policy's hide: list) hides more.\n");
}

/* A positive whole number, with an optional K/M/G/T suffix (powers of 1024)
 * when sizes are wanted. */
static bool parse_size(const char *s, bool suffix, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!*s || *s == '-')
        return false;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || v == 0)
        return false;
    unsigned shift = 0;
    if (suffix && *end) {
        const char *u = strchr("KMGT", *end & ~0x20);
        if (!u || end[1])
            return false;
        shift = 10 * (unsigned)(u - "KMGT" + 1);
        end++;
    }
    if (*end || (shift && v > (UINT64_MAX >> shift)))
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

static bool parse_seconds(const char *s, double *out)
{
    /* plain decimal seconds only: strtod would also take " 5", "0x10",
     * "1e3" */
    size_t digits = strspn(s, "0123456789"), frac = 0;
    if (s[digits] == '.')
        frac = strspn(s + digits + 1, "0123456789");
    if (s[digits + (s[digits] == '.' ? frac + 1 : 0)] || (!digits && !frac) || (s[digits] == '.' && !frac))
        return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v <= 0 || v > 604800)
        return false;
    *out = v;
    return true;
}

/* Would the command get an overlay? Only an uncertain one does: a safe one
 * runs in a read-only view, an unsafe one never runs. On any doubt (the
 * policy cannot be read: the run itself says why), yes. */
static bool needs_overlay(const char *policy_file, const char *dir, const char *shell, char *const *prog)
{
    _cleanup_free_ char *real = realpath(dir, NULL);
    txbox_policy *p = NULL;
    txbox_error e = {0};
    if (!real || txbox_policy_load(policy_file, real, &p, &e) < 0)
        return true;
    txbox_verdict v;
    int rc = shell ? txbox_policy_check(p, shell, strlen(shell), &v, &e)
                   : txbox_policy_check_argv(p, prog, &v, &e);
    txbox_policy_free(p);
    return rc < 0 || v.verdict == TXBOX_VERDICT_UNCERTAIN;
}

int run_parse(int argc, char **argv, struct run_args *a)
{
    enum {
        O_TIMEOUT = 256,
        O_BACKEND,
        O_FALLBACK,
        O_NET,
        O_POLICY,
        O_DEGRADED,
        O_MEMORY,
        O_PIDS,
        O_CPU,
        O_MAXWRITE,
        O_KEEPENV,
        O_HIDE,
        O_TX,
        O_DOMAIN,
        O_SHELL,
        O_READONLY,
        O_TEEFD,
        O_SESSION,
        O_CWDFILE
    };
    static const struct option opts[] = {
        CLI_LONG_JSON,
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"backend", required_argument, NULL, O_BACKEND},
        {"allow-copy-fallback", no_argument, NULL, O_FALLBACK},
        {"net", optional_argument, NULL, O_NET},
        {"allow-domain", required_argument, NULL, O_DOMAIN},
        {"policy", required_argument, NULL, O_POLICY},
        CLI_LONG_HELP,
        {"allow-degraded", no_argument, NULL, O_DEGRADED},
        {"memory", required_argument, NULL, O_MEMORY},
        {"pids", required_argument, NULL, O_PIDS},
        {"cpu", required_argument, NULL, O_CPU},
        {"max-write", required_argument, NULL, O_MAXWRITE},
        {"keep-env", required_argument, NULL, O_KEEPENV},
        {"hide", required_argument, NULL, O_HIDE},
        {"tx", required_argument, NULL, O_TX},
        {"shell", required_argument, NULL, O_SHELL},
        {"read-only", no_argument, NULL, O_READONLY},
        {"tee-fd", required_argument, NULL, O_TEEFD},
        {"session", required_argument, NULL, O_SESSION},
        {"cwd-file", required_argument, NULL, O_CWDFILE},
        {0},
    };
    cli_opts cli = {
        .name = "run", .help = usage, .shorts = "+C:c:h", .longs = opts, .argc = argc, .argv = argv};
    int c;
    while ((c = cli_opt_next(&cli)) >= 0) {
        switch (c) {
        case 'c':
            a->shell = optarg;
            break;
        case O_TIMEOUT:
            if (!parse_seconds(optarg, &a->ro.timeout_s))
                return cli_usage(argc, argv,
                                 "run: --timeout wants a number of seconds (0 < S <= 604800), not '%s'",
                                 optarg);
            break;
        case O_BACKEND:
            if (!strcmp(optarg, "overlay"))
                a->ro.backend = TXBOX_BACKEND_OVERLAY;
            else if (!strcmp(optarg, "copy"))
                a->ro.backend = TXBOX_BACKEND_COPY;
            else
                return cli_usage(argc, argv, "run: --backend is overlay or copy, not '%s'", optarg);
            break;
        case O_FALLBACK:
            a->ro.allow_copy_fallback = 1;
            break;
        case O_NET:
            if (!optarg || !strcmp(optarg, "proxy"))
                a->ro.net = TXBOX_NET_PROXY;
            else if (!strcmp(optarg, "host"))
                a->ro.net = TXBOX_NET_HOST;
            else
                return cli_usage(argc, argv,
                                 "run: --net is --net (the proxy), --net=proxy or --net=host, not '--net=%s'",
                                 optarg);
            break;
        case O_DOMAIN:
            if (a->ndomains >= 64)
                return cli_usage(argc, argv, "run: at most 64 --allow-domain options");
            for (char *p = optarg; *p; p++) /* names are compared in lower case */
                if (*p >= 'A' && *p <= 'Z')
                    *p = (char)(*p - 'A' + 'a');
            a->domains[a->ndomains++] = optarg;
            break;
        case O_POLICY:
            a->policy_file = optarg;
            break;
        case O_DEGRADED:
            a->ro.allow_degraded = 1;
            break;
        case O_MEMORY:
        case O_MAXWRITE:
        case O_PIDS:
        case O_CPU: {
            uint64_t v;
            if (!parse_size(optarg, c == O_MEMORY || c == O_MAXWRITE, &v))
                return cli_usage(argc, argv, "run: %s wants a positive %s, not '%s'", argv[optind - 1],
                                 c == O_MEMORY || c == O_MAXWRITE ? "size (bytes, or with K/M/G)"
                                                                  : "whole number",
                                 optarg);
            if (c == O_MEMORY)
                a->ro.memory_bytes = v;
            else if (c == O_MAXWRITE)
                a->ro.max_write_bytes = v;
            else if (c == O_PIDS)
                a->ro.max_processes = v;
            else
                a->ro.cpu_seconds = v;
            break;
        }
        case O_KEEPENV:
        case O_HIDE:
            if ((c == O_KEEPENV ? a->nkeep : a->nhide) >= 64)
                return cli_usage(argc, argv, "run: at most 64 %s options",
                                 c == O_KEEPENV ? "--keep-env" : "--hide");
            if (c == O_KEEPENV)
                a->keep[a->nkeep++] = optarg;
            else if (optarg[0] != '/' && strcmp(optarg, "~") && strncmp(optarg, "~/", 2))
                return cli_usage(argc, argv, "run: --hide wants an absolute path or one under ~/, not '%s'",
                                 optarg);
            else
                a->hide[a->nhide++] = optarg;
            break;
        case O_TX:
            a->tx = optarg;
            break;
        case O_SHELL:
            a->shell_spec = optarg;
            break;
        case O_READONLY:
            a->ro.read_only = 1;
            break;
        case O_SESSION:
            a->session = optarg;
            break;
        case O_CWDFILE:
            if (!*optarg)
                return cli_usage(argc, argv, "run: --cwd-file wants a path");
            a->cwd_file = optarg;
            break;
        case O_TEEFD: {
            uint64_t v;
            if (!parse_size(optarg, false, &v) || v < 3 || v > 65535 || fcntl((int)v, F_GETFD) < 0)
                return cli_usage(argc, argv, "run: --tee-fd wants an open descriptor of 3 or more, not '%s'",
                                 optarg);
            a->ro.tee_fd = (int)v;
            break;
        }
        }
    }
    if (c == CLI_OPT_STOP)
        return cli.status;
    a->dir = cli.dir;
    a->json = cli.json;
    a->prog = argv + optind;
    if (a->shell && *a->prog)
        return cli_usage(argc, argv, "run: give either -c 'STRING' or -- PROG ARGS, not both");
    if (!a->shell && !*a->prog)
        return cli_usage(argc, argv, "run: no command (use -c 'STRING' or -- PROG ARGS...)");
    if (a->shell_spec && !a->shell)
        return cli_usage(argc, argv, "run: --shell goes with -c 'STRING'");
    if (a->ro.read_only && a->tx)
        return cli_usage(argc, argv, "run: --read-only and --tx do not go together");
    if (a->ro.tee_fd && !a->json)
        return cli_usage(argc, argv, "run: --tee-fd goes with --json");
    if (a->session && a->tx)
        return cli_usage(argc, argv, "run: --session and --tx do not go together");
    const char *words = getenv(RUN_NET_WORDS_ENV);
    a->ro.net_refusal_words = words && *words ? words : "add it with txbox run --allow-domain {host}";
    return -1;
}

/* SIGINT, SIGTERM and SIGHUP cancel the command (its transaction rolls
 * back). */
static void catch_signals(void)
{
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* Opens the workspace, its policy and the multi-command transaction of
 * --tx, and runs the command in them: txbox_run's return. */
static int run_in_workspace(struct run_args *a, txbox_result **r, txbox_error *err)
{
    /* A filesystem the overlay backend cannot use, for a command that
     * would need it: said before anything is made there (no .txbox left
     * behind), with the option that works. */
    const char *nofs = a->ro.backend == TXBOX_BACKEND_COPY || a->ro.allow_copy_fallback || a->ro.read_only
                           ? NULL
                           : txbox_fs_without_overlay(a->dir);
    if (nofs && (a->tx || needs_overlay(a->policy_file, a->dir, a->shell, a->prog))) {
        /* and whatever else the sandbox lacks here, in the same message */
        txbox_error pe = {0};
        bool more = txbox_sandbox_probe(a->ro.allow_degraded, &pe) < 0;
        *err = (txbox_error){.code = EXDEV};
        /* the copy backend named with what it lacks: not an equal choice */
        int at = snprintf(err->msg, sizeof err->msg,
                          "the workspace %s is on %s, where no overlay can be made: use a volume or "
                          "tmpfs, or --backend copy (no undo, no effect rules)",
                          a->dir, nofs);
        size_t room = at > 0 && (size_t)at < sizeof err->msg ? sizeof err->msg - (size_t)at : 0;
        if (more && room > strlen("; and ") + strlen(pe.msg)) {
            snprintf(err->msg + at, room, "; and %s", pe.msg);
            err->remedy = pe.remedy;
            err->remedy.at += (unsigned)at + (unsigned)strlen("; and ");
        }
        return -1;
    }
    txbox_ws *ws = NULL;
    if (txbox_ws_open(a->dir, TXBOX_WS_CREATE | (a->ro.read_only ? TXBOX_WS_READ_ONLY : 0), &ws, err) < 0) {
        /* a workspace that takes no writes: what still works there */
        if (!a->ro.read_only && (err->code == EROFS || err->code == EACCES) && strstr(err->msg, ".txbox"))
            tx_err_more(err, "; a command that changes nothing runs there with --read-only (not recorded)");
        return -1;
    }
    txbox_policy *pol = NULL;
    if (txbox_policy_load(a->policy_file, txbox_ws_path(ws), &pol, err) < 0) {
        txbox_ws_close(ws);
        return -1;
    }
    cli_policy_notes(pol);
    a->ro.policy = pol;
    txbox_multi *multi = NULL;
    if (a->tx && txbox_multi_open(ws, a->tx, &multi, err) < 0) {
        txbox_ws_close(ws);
        txbox_policy_free(pol);
        return -1;
    }
    a->ro.multi = multi;
    txbox_session *sess = NULL;
    if (a->session) {
        txbox_session_opts so = {.id = a->session, .flags = TXBOX_SESSION_CREATE, .policy = pol};
        if (txbox_session_open(ws, &so, &sess, err) < 0) {
            txbox_ws_close(ws);
            txbox_policy_free(pol);
            return -1;
        }
    }
    a->ro.session = sess;
    int rc = txbox_run(ws, &a->ro, r, err);
    txbox_session_close(sess);
    txbox_multi_close(multi);
    /* A rolled-back command's upper, everything it wrote, lies in the
     * trash: a detached process removes it after this one ends, off the
     * command's time. After a commit the trash holds only the emptied
     * upper and the overlay's work directory, which the next command's own
     * cleaner takes for less than the detached process's two forks cost
     * this one (about 0.5 ms a run). */
    txbox_outcome oc = rc == 0 && *r ? txbox_result_outcome(*r) : TXBOX_OUTCOME_ROLLED_BACK;
    if (oc == TXBOX_OUTCOME_ROLLED_BACK || oc == TXBOX_OUTCOME_TIMED_OUT || oc == TXBOX_OUTCOME_REJECTED)
        txbox_ws_clean_detached(ws);
    txbox_ws_close(ws);
    /* The process ends here: freeing the policy's thousands of blocks would
     * write to every heap page again, and each write is a page fault (the
     * sandbox's fork made them copy-on-write; ~12 us each on a VM): about
     * 1 ms. Freed under AddressSanitizer, whose leak check wants it. */
#ifdef __SANITIZE_ADDRESS__
    txbox_policy_free(pol);
#endif
    return rc;
}

int run_status(const txbox_result *r)
{
    switch (txbox_result_outcome(r)) {
    case TXBOX_OUTCOME_TIMED_OUT:
        return TXBOX_EXIT_TIMEOUT;
    case TXBOX_OUTCOME_CONFLICT:
        return TXBOX_EXIT_CONFLICT;
    case TXBOX_OUTCOME_BLOCKED:
    case TXBOX_OUTCOME_REJECTED: /* an effect rule refused what it wrote */
        return TXBOX_EXIT_BLOCKED;
    case TXBOX_OUTCOME_HELD:
        return TXBOX_EXIT_HELD;
    case TXBOX_OUTCOME_NO_SPACE:
        return TXBOX_EXIT_NO_SPACE;
    default:
        return txbox_result_exit_code(r);
    }
}

/* --cwd-file: the shell's last directory (nothing when it is not known),
 * in a file made 0600 or emptied, never reached through a symbolic link
 * and never a FIFO or a device. */
static int write_cwd_file(const char *path, const txbox_result *r)
{
    const char *d = r ? txbox_result_cwd_after(r) : NULL;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        int e = fd < 0 ? errno : EINVAL;
        if (fd >= 0)
            close(fd);
        return cli_failf("--cwd-file %s: %s", path, fd < 0 ? strerror(e) : "not a regular file");
    }
    int rc = d && write_all(fd, d, strlen(d)) < 0 ? cli_failf("--cwd-file %s: %s", path, strerror(errno)) : 0;
    close(fd);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    struct run_args a = {0};
    int status = run_parse(argc, argv, &a);
    if (status >= 0)
        return status;
    txbox_error err = {0};
    _cleanup_free_ char *shell_path = NULL;
    if (a.shell && txbox_shell_resolve(a.shell_spec, &shell_path, &a.ro.shell_posix, &err) < 0)
        return a.json ? cli_fail_json(&err) : cli_fail(&err);
    a.ro.shell = a.shell;
    a.ro.shell_path = shell_path;
    a.ro.argv = a.shell ? NULL : a.prog;
    a.ro.env_allow = a.keep;
    a.ro.deny_read = a.hide;
    a.ro.allow_domains = a.domains;
    a.ro.capture = a.json;
    a.ro.cancel = &cancelled;
    /* a person at a terminal can answer a hold now: rules with action ask
     * (work a commit would destroy) hold for them; else it commits and
     * the status line says what was lost and how to bring it back */
    a.ro.interactive = !a.json && isatty(STDIN_FILENO) && isatty(STDERR_FILENO);

    catch_signals();
    tx_cancel_watch(&cancelled); /* a wait for a lock ends too */
    txbox_result *r = NULL;
    if (run_in_workspace(&a, &r, &err) < 0) {
        if (a.cwd_file)
            (void)write_cwd_file(a.cwd_file, NULL);
        return a.json ? cli_fail_json(&err) : cli_fail(&err);
    }
    if (a.json) {
        char *s = txbox_result_json(r);
        if (s)
            printf("%s\n", s);
        free(s);
    } else {
        txbox_remedy rem;
        _cleanup_free_ char *s = txbox_result_summary(r, &rem);
        char *line = remedy_apply(s, &rem);
        fprintf(stderr, "%s\n", line);
        free(line);
    }
    status = run_status(r);
    if (a.cwd_file && write_cwd_file(a.cwd_file, r) != 0 && status == 0)
        status = TXBOX_EXIT_ERROR;
    txbox_result_free(r);
    fflush(stdout);
    return status;
}
