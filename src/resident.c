/* A workspace kept open across transactions run in this process: see
 * resident.h. */
#include "resident.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cmds.h"
#include "remedy.h"
#include "txbox_policy.h"

#define KEY_FILE_CAP (4u << 20) /* beyond: the policy is loaded again each time */

struct resident {
    char *dir, *policy_file;
    txbox_ws *ws;
    dev_t dev, state_dev; /* the directory and the .txbox/ ws was opened on */
    ino_t ino, state_ino;
    txbox_policy *pol;
    dbuf key; /* what pol was loaded from (policy_key) */
};

resident *resident_new(const char *dir, const char *policy_file)
{
    resident *r = xcalloc(1, sizeof *r);
    r->dir = xstrdup(dir);
    r->policy_file = policy_file ? xstrdup(policy_file) : NULL;
    dbuf_init(&r->key, 0);
    return r;
}

void resident_free(resident *r)
{
    if (!r)
        return;
    txbox_ws_close(r->ws);
    txbox_policy_free(r->pol);
    dbuf_free(&r->key);
    free(r->dir);
    free(r->policy_file);
    free(r);
}

bool resident_can_run(const resident *r, const struct run_args *a)
{
    return a->ro.backend == TXBOX_BACKEND_COPY || a->ro.allow_copy_fallback || a->ro.read_only ||
           !txbox_fs_without_overlay(r->dir);
}

/* One input of the policy into the key: what stat says of it and, for a
 * regular file, its bytes. Never blocks (a fifo is not opened) and never
 * follows a symlink where nofollow. Unreadable: the error, which differs
 * from any content. */
static void key_file(dbuf *k, int at, const char *path, bool nofollow)
{
    char head[160];
    struct stat st;
    int fd = openat(at, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (nofollow ? O_NOFOLLOW : 0));
    if (fd < 0 || fstat(fd, &st) < 0) {
        snprintf(head, sizeof head, "%s: error %d\n", path, errno);
        dbuf_addstr(k, head);
        if (fd >= 0)
            close(fd);
        return;
    }
    snprintf(head, sizeof head, "%s: %llu %llu %o %lld %lld.%09ld %lld.%09ld\n", path,
             (unsigned long long)st.st_dev, (unsigned long long)st.st_ino, (unsigned)st.st_mode,
             (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
             (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec);
    dbuf_addstr(k, head);
    if (S_ISREG(st.st_mode) && st.st_size <= (off_t)KEY_FILE_CAP) {
        char buf[16384];
        ssize_t n;
        size_t total = 0;
        while ((n = read(fd, buf, sizeof buf)) > 0 && total <= KEY_FILE_CAP) {
            dbuf_add(k, buf, (size_t)n);
            total += (size_t)n;
        }
        if (n < 0 || total > KEY_FILE_CAP)
            dbuf_addstr(k, "\n(unread)");
    }
    close(fd);
}

/* Everything txbox_policy_load reads, as a key: equal keys, equal
 * policies. (The configuration's path as lib/policy/load.c finds it.) */
static void policy_key(const resident *r, dbuf *k)
{
    dbuf_init(k, 0);
    const char *path = getenv("PATH");
    dbuf_addstr(k, "PATH=");
    dbuf_addstr(k, path ? path : "(unset)");
    dbuf_addstr(k, "\n");
    if (r->policy_file)
        key_file(k, AT_FDCWD, r->policy_file, false);
    _cleanup_free_ char *wsfile = xasprintf("%s/.txbox-policy.yaml", r->dir);
    key_file(k, AT_FDCWD, wsfile, true);
    const char *x = getenv("XDG_CONFIG_HOME"), *h = getenv("HOME");
    _cleanup_free_ char *cfg = x && x[0] == '/'   ? xasprintf("%s/txbox/config.yaml", x)
                               : h && h[0] == '/' ? xasprintf("%s/.config/txbox/config.yaml", h)
                                                  : NULL;
    if (cfg)
        key_file(k, AT_FDCWD, cfg, false);
}

/* The policy, loaded again when its inputs changed since. */
static int fresh_policy(resident *r, txbox_error *err)
{
    dbuf k;
    policy_key(r, &k);
    if (r->pol && k.len == r->key.len && !k.dropped && !memcmp(dbuf_str(&k), dbuf_str(&r->key), k.len)) {
        dbuf_free(&k);
        return 0;
    }
    txbox_policy_free(r->pol);
    r->pol = NULL;
    dbuf_free(&r->key);
    r->key = k;
    if (txbox_policy_load(r->policy_file, r->dir, &r->pol, err) < 0)
        return -1;
    cli_policy_notes(r->pol);
    return 0;
}

static bool same_dir(const char *path, dev_t dev, ino_t ino)
{
    struct stat st;
    return stat(path, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

/* The workspace handle: kept while its directory and .txbox/ are the
 * ones it opened; then recovery, as every open does. */
static int fresh_ws(resident *r, txbox_error *err)
{
    _cleanup_free_ char *state = xasprintf("%s/.txbox", r->dir);
    if (r->ws && same_dir(r->dir, r->dev, r->ino) && same_dir(state, r->state_dev, r->state_ino))
        return txbox_recover(r->ws, NULL, err) < 0 ? tx_err_ctx(err, "recovery") : 0;
    txbox_ws_close(r->ws);
    r->ws = NULL;
    if (txbox_ws_open(r->dir, TXBOX_WS_CREATE, &r->ws, err) < 0)
        return -1;
    struct stat a, b;
    if (stat(r->dir, &a) < 0 || stat(state, &b) < 0) {
        r->dev = r->state_dev = 0;
        r->ino = r->state_ino = 0; /* opened again next time */
        return 0;
    }
    r->dev = a.st_dev;
    r->ino = a.st_ino;
    r->state_dev = b.st_dev;
    r->state_ino = b.st_ino;
    return 0;
}

/* cmd_run's run_in_workspace with the kept handle and policy. */
static int run_here(resident *r, struct run_args *a, txbox_result **res, txbox_error *err)
{
    if (fresh_ws(r, err) < 0 || fresh_policy(r, err) < 0)
        return -1;
    a->ro.policy = r->pol;
    txbox_multi *multi = NULL;
    if (a->tx && txbox_multi_open(r->ws, a->tx, &multi, err) < 0)
        return -1;
    a->ro.multi = multi;
    /* --session: as the CLI opens it (started when none of that id runs) */
    txbox_session *sess = NULL;
    txbox_session_opts so = {.id = a->session, .flags = TXBOX_SESSION_CREATE, .policy = r->pol};
    if (a->session && txbox_session_open(r->ws, &so, &sess, err) < 0) {
        txbox_multi_close(multi);
        a->ro.multi = NULL;
        a->ro.policy = NULL;
        return -1;
    }
    a->ro.session = sess;
    int rc = txbox_run(r->ws, &a->ro, res, err);
    txbox_session_close(sess);
    a->ro.session = NULL;
    txbox_multi_close(multi);
    a->ro.multi = NULL;
    a->ro.policy = NULL;
    return rc;
}

/* What cli_fail_json prints, on stdout and on stderr. */
static int fail(const txbox_error *err, char **out, char **errtext)
{
    char t[REMEDY_TEXT_MAX];
    remedy_error_text(err, t, sizeof t);
    json_t *o = json_pack("{s:{s:s,s:i}}", "error", "message", t, "code", err->code);
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    *out = xasprintf("%s\n", s ? s : "");
    free(s);
    *errtext = xasprintf("txbox: %s\n", t);
    return TXBOX_EXIT_ERROR;
}

int resident_run(resident *r, struct run_args *a, const char *cwd, int tee_fd, volatile int *cancel,
                 char **out, char **errtext)
{
    *out = *errtext = NULL;
    txbox_error err = {0};
    _cleanup_free_ char *shell_path = NULL;
    if (a->shell && txbox_shell_resolve(a->shell_spec, &shell_path, &a->ro.shell_posix, &err) < 0)
        return fail(&err, out, errtext);
    a->ro.shell = a->shell;
    a->ro.shell_path = shell_path;
    a->ro.argv = a->shell ? NULL : a->prog;
    a->ro.env_allow = a->keep;
    a->ro.deny_read = a->hide;
    a->ro.allow_domains = a->domains;
    a->ro.capture = a->json;
    a->ro.cancel = cancel;
    a->ro.cwd = cwd ? cwd : r->dir;
    if (tee_fd > 0)
        a->ro.tee_fd = tee_fd;
    txbox_result *res = NULL;
    if (run_here(r, a, &res, &err) < 0)
        return fail(&err, out, errtext);
    char *s = txbox_result_json(res);
    *out = xasprintf("%s\n", s ? s : "");
    *errtext = xstrdup("");
    free(s);
    int status = run_status(res);
    txbox_result_free(res);
    return status;
}
