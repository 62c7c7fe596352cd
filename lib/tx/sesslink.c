/* A session as the commands run in it see it: see sesslink.h. */
#include "sesslink.h"
#include "fdpass.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

bool sl_id_valid(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    if (n == 0 || n > 64 || id[0] == '.' || id[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

int sl_dir_open(txbox_ws *ws, const char *id, bool create, txbox_error *err)
{
    if (create && mkdirat(ws->sfd, SESSIONS_DIR, 0700) < 0 && errno != EEXIST)
        return tx_errno(err, errno, "cannot create %s/%s", TXBOX_STATE_DIR, SESSIONS_DIR);
    _cleanup_close_ int sd = openat(ws->sfd, SESSIONS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sd < 0)
        return errno == ENOENT ? tx_err(err, ENOENT, "no session %s", id)
                               : tx_errno(err, errno, "cannot open %s/%s", TXBOX_STATE_DIR, SESSIONS_DIR);
    if (create && mkdirat(sd, id, 0700) < 0 && errno != EEXIST)
        return tx_errno(err, errno, "cannot create the session's directory");
    int fd = openat(sd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? tx_err(err, ENOENT, "no session %s", id)
                               : tx_errno(err, errno, "cannot open the session's directory");
    return fd;
}

/* dirfd/NAME, as a socket address: through /proc/self/fd, so that a long
 * workspace path does not overflow sun_path. */
static socklen_t sock_addr(int dirfd, const char *name, struct sockaddr_un *a)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    snprintf(a->sun_path, sizeof a->sun_path, "/proc/self/fd/%d/%s", dirfd, name);
    return (socklen_t)sizeof *a;
}

int sl_connect_to(int dirfd, const char *name, txbox_error *err)
{
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s < 0)
        return tx_errno(err, errno, "socket");
    struct sockaddr_un a;
    socklen_t al = sock_addr(dirfd, name, &a);
    if (connect(s, (struct sockaddr *)&a, al) < 0) {
        int e = errno;
        close(s);
        return tx_errno(err, e, "cannot reach the session");
    }
    /* the steward is the caller's own process, or root's */
    if (!sl_peer_ok(s)) {
        close(s);
        return tx_err(err, EPERM, "the session's socket is not the caller's");
    }
    return s;
}

int sl_connect(int dirfd, txbox_error *err) { return sl_connect_to(dirfd, SL_CTL, err); }

int sl_listen(int dirfd, const char *name, int backlog, txbox_error *err)
{
    (void)unlinkat(dirfd, name, 0);
    int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un a;
    socklen_t al = sock_addr(dirfd, name, &a);
    if (s < 0 || bind(s, (struct sockaddr *)&a, al) < 0 || listen(s, backlog) < 0) {
        int e = errno;
        if (s >= 0)
            close(s);
        return tx_errno(err, e, "cannot make the session's socket");
    }
    return s;
}

bool sl_peer_ok(int sock)
{
    struct ucred uc;
    socklen_t ul = sizeof uc;
    return getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &uc, &ul) == 0 && (uc.uid == getuid() || uc.uid == 0);
}

int sl_send(int sock, json_t *obj, const int *fds, int nfds, txbox_error *err)
{
    _cleanup_free_ char *text = json_dumps(obj, JSON_COMPACT);
    if (!text || strlen(text) >= SL_MSG_MAX)
        return tx_err(err, E2BIG, "a session message too large to send");
    if (fd_send(sock, text, strlen(text), fds, nfds) < 0)
        return tx_errno(err, errno, "cannot talk to the session");
    return 0;
}

int sl_recv(int sock, json_t **obj, int *fds, int max, int *nfds, int timeout_ms, txbox_error *err)
{
    *obj = NULL;
    int got[SL_MAX_FDS], n = 0;
    if (nfds)
        *nfds = 0;
    struct pollfd pf = {.fd = sock, .events = POLLIN};
    int pr;
    while ((pr = poll(&pf, 1, timeout_ms)) < 0 && errno == EINTR)
        ;
    if (pr == 0)
        return tx_err(err, ETIMEDOUT, "the session did not answer");
    _cleanup_free_ char *buf = xmalloc(SL_MSG_MAX + 1);
    bool trunc;
    ssize_t r = fd_recv(sock, buf, SL_MSG_MAX, 0, got, SL_MAX_FDS, &n, &trunc);
    json_error_t je;
    if (r > 0 && !trunc) {
        buf[r] = 0;
        *obj = json_loads(buf, 0, &je);
    }
    if (!json_is_object(*obj)) {
        json_decref(*obj);
        *obj = NULL;
        for (int i = 0; i < n; i++)
            close(got[i]);
        return r == 0  ? tx_err(err, ECONNRESET, "the session ended")
               : r < 0 ? tx_errno(err, errno, "cannot read the session's answer")
                       : tx_err(err, EPROTO, "a session message that is not a JSON object");
    }
    for (int i = 0; i < n; i++) {
        if (fds && i < max)
            fds[(*nfds)++] = got[i];
        else
            close(got[i]);
    }
    return 0;
}

int sl_call(int sock, json_t *req, const int *fds, int nfds, json_t **reply, int *rfds, int rmax, int *rn,
            txbox_error *err)
{
    *reply = NULL;
    if (sl_send(sock, req, fds, nfds, err) < 0 || sl_recv(sock, reply, rfds, rmax, rn, -1, err) < 0)
        return -1;
    json_t *e = json_object_get(*reply, "error");
    if (e) {
        int code = (int)json_integer_value(json_object_get(*reply, "errno"));
        tx_err(err, code > 0 ? code : EIO, "%s", json_string_value(e) ?: "the session refused");
        json_decref(*reply);
        *reply = NULL;
        for (int i = 0; rn && i < *rn; i++)
            close(rfds[i]);
        if (rn)
            *rn = 0;
        return -1;
    }
    return 0;
}

int sl_attach(txbox_session *s, struct sess_link *l, txbox_error *err)
{
    *l = (struct sess_link){.sock = -1};
    kp_fds_init(&l->fds);
    l->sock = sl_connect(s->dirfd, err);
    if (l->sock < 0)
        return tx_err_ctx(err, "session %s", s->id);
    json_t *req = json_pack("{s:s}", "op", "attach"), *rep = NULL;
    int fds[SL_MAX_FDS], n = 0;
    int rc = sl_call(l->sock, req, NULL, 0, &rep, fds, SL_MAX_FDS, &n, err);
    json_decref(req);
    if (rc < 0) {
        sl_detach(l);
        return tx_err_ctx(err, "session %s", s->id);
    }
    /* "fds": the names of those sent, in order (no user namespace as root) */
    json_t *names = json_object_get(rep, "fds");
    for (int i = 0; i < n; i++) {
        const char *nm = json_string_value(json_array_get(names, (size_t)i));
        int k = -1;
        for (int j = 0; nm && j < KP_NFDS; j++)
            if (!strcmp(nm, kp_fd_names[j]))
                k = j;
        if (k < 0 || l->fds.fd[k] >= 0)
            close(fds[i]);
        else
            l->fds.fd[k] = fds[i];
    }
    l->late = json_incref(json_object_get(rep, "late"));
    json_decref(rep);
    /* (a /dev of its own: a steward of a txbox before it made one has
     * none, and each command makes its own) */
    for (int j = KP_NET; j < KP_NFDS; j++)
        if (l->fds.fd[j] < 0 && j != KP_DEV) {
            sl_detach(l);
            return tx_err(err, EPROTO, "session %s: its answer lacks what a command needs", s->id);
        }
    return 0;
}

const char *txbox_session_id(const txbox_session *s) { return s ? s->id : NULL; }

int txbox_session_started(const txbox_session *s) { return s ? s->started : 0; }

int sl_take_started(txbox_session *s)
{
    return s && s->started && !__atomic_exchange_n(&s->start_told, true, __ATOMIC_RELAXED) ? s->started : 0;
}

void sl_detach(struct sess_link *l)
{
    if (l->sock >= 0)
        close(l->sock);
    l->sock = -1;
    kp_fds_close(&l->fds);
    json_decref(l->late);
    l->late = NULL;
}

void sl_retire(struct sess_link *l, uint64_t tx)
{
    if (l->sock < 0)
        return;
    json_t *req = json_pack("{s:s,s:I}", "op", "retire", "tx", (json_int_t)tx);
    txbox_error e = {0};
    if (sl_send(l->sock, req, NULL, 0, &e) < 0) {
        /* the steward is gone: the next recovery retires it */
    }
    json_decref(req);
}

int sl_group_begin(struct sess_link *l, const struct sl_group *g, size_t *stopped, txbox_error *err)
{
    *stopped = 0;
    json_t *mounts = json_array();
    for (size_t i = 0; i < g->n_mounts; i++)
        json_array_append_new(mounts, json_integer((json_int_t)g->mounts[i]));
    json_t *has = json_array();
    int fds[4], n = 0;
    const struct {
        const char *name;
        int fd;
    } f[] = {{"root", g->rootfd}, {"listener", g->listener}, {"out", g->out}, {"err", g->err}};
    for (size_t i = 0; i < ARRAY_SIZE(f); i++)
        if (f[i].fd >= 0) {
            fds[n++] = f[i].fd;
            json_array_append_new(has, json_string(f[i].name));
        }
    json_t *cgs = json_array();
    for (size_t i = 0; g->cgroups && i < 3; i++)
        if (g->cgroups[i][0])
            json_array_append_new(cgs, json_string(g->cgroups[i]));
    json_t *req = json_pack("{s:s,s:I,s:I,s:o,s:o,s:s,s:o}", "op", "begin", "tx", (json_int_t)g->tx, "userns",
                            (json_int_t)g->userns, "mounts", mounts, "fds", has, "command",
                            g->command ? g->command : "", "cgroups", cgs);
    json_t *rep = NULL;
    int rc = sl_call(l->sock, req, fds, n, &rep, NULL, 0, NULL, err);
    json_decref(req);
    if (rc == 0)
        *stopped = (size_t)json_integer_value(json_object_get(rep, "stopped"));
    json_decref(rep);
    return rc;
}

int sl_group_keep(struct sess_link *l, uint64_t tx, bool keep, bool has_upper, uint64_t base_gen,
                  int activefd, txbox_error *err)
{
    json_t *req = json_pack("{s:s,s:I,s:b,s:b,s:I}", "op", "keep", "tx", (json_int_t)tx, "keep", keep,
                            "upper", has_upper, "base_gen", (json_int_t)base_gen);
    json_t *rep = NULL;
    int rc = sl_call(l->sock, req, activefd >= 0 ? &activefd : NULL, activefd >= 0, &rep, NULL, 0, NULL, err);
    json_decref(req);
    json_decref(rep);
    return rc;
}
