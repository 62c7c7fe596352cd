/* A session as the commands run in it see it: its state directory, and a
 * link to its steward (session.c), the process that keeps the session for
 * them. The messages are JSON objects on a SOCK_SEQPACKET socket, with
 * descriptors (SCM_RIGHTS) where they carry some. */
#ifndef TXBOX_SESSLINK_H
#define TXBOX_SESSLINK_H

#include <jansson.h>

#include "keeper.h"
#include "tx.h"
#include "util.h"

#define SESSIONS_DIR "sessions"
#define SL_MSG_MAX (256u << 10)
#define SL_MAX_FDS 12

struct txbox_session {
    txbox_ws *ws; /* not owned */
    char *id;
    int dirfd; /* .txbox/sessions/ID */
    const struct txbox_policy *policy;
    int started;     /* txbox_session_started */
    bool start_told; /* a command's result said so (sl_take_started) */
};

/* Is id a session id (1-64 of [A-Za-z0-9._-], not starting with '.')? */
bool sl_id_valid(const char *id);
/* .txbox/sessions/ID, made (0700) when create; -1 with ENOENT when it is
 * not there. */
int sl_dir_open(txbox_ws *ws, const char *id, bool create, txbox_error *err);
#define SL_CTL "ctl" /* the steward's socket in the session's directory */
#define SL_GIT "git" /* its warm reader of git's (losses.h, losses_git_warm) */

/* A connection to the steward of the session whose directory is dirfd:
 * -1 with ECONNREFUSED or ENOENT when none runs. */
int sl_connect(int dirfd, txbox_error *err);
/* ... to socket name there (SL_CTL, SL_GIT). */
int sl_connect_to(int dirfd, const char *name, txbox_error *err);
/* A listening socket made at dirfd/name (what was there removed first). */
int sl_listen(int dirfd, const char *name, int backlog, txbox_error *err);
/* Is the peer of a connected socket the caller's own user, or root? */
bool sl_peer_ok(int sock);

/* One message: obj, and nfds descriptors. */
MUST_CHECK int sl_send(int sock, json_t *obj, const int *fds, int nfds, txbox_error *err);
/* The next message (*obj: the caller's), its descriptors in fds (at most
 * max; *nfds how many). timeout_ms < 0: wait as long as it takes. */
MUST_CHECK int sl_recv(int sock, json_t **obj, int *fds, int max, int *nfds, int timeout_ms,
                       txbox_error *err);
/* A request and its answer: the answer's "error" becomes err (-1). */
MUST_CHECK int sl_call(int sock, json_t *req, const int *fds, int nfds, json_t **reply, int *rfds, int rmax,
                       int *rn, txbox_error *err);

/* A command's link to its session for the time it runs: connected (the
 * session is not idle meanwhile), the session's namespaces and mounts
 * (keeper.h), and the late transactions the steward has to report with
 * this command's result. */
struct sess_link {
    int sock;
    struct kp_fds fds;
    json_t *late; /* array, or NULL */
};

MUST_CHECK int sl_attach(txbox_session *s, struct sess_link *l, txbox_error *err);
/* txbox_session_started, for the first command run with the handle only
 * (the one whose open started it; a handle serves many commands, from
 * several threads at once); 0 for the others. */
int sl_take_started(txbox_session *s);
void sl_detach(struct sess_link *l);
/* Transaction tx committed with its journal left open (commit.h,
 * leave_open): the steward retires it (recovery), after the answer. Not
 * answered; were the steward gone, the next recovery does it. */
void sl_retire(struct sess_link *l, uint64_t tx);

/* The command's processes left running when its shell exited (sandbox.h,
 * sb_status): the steward stops them all while the command's transaction
 * is taken from its upper (sl_group_begin), then lets them go on and keeps
 * them (sl_group_keep), or kills them (keep false). */
struct sl_group {
    uint64_t tx;
    uint64_t userns;
    int rootfd, listener, out, err; /* -1: none */
    const uint64_t *mounts;
    size_t n_mounts;
    const char *command;
    const char (*cgroups)[128]; /* [3]: their control groups (sb_status), NULL: none */
};
MUST_CHECK int sl_group_begin(struct sess_link *l, const struct sl_group *g, size_t *stopped,
                              txbox_error *err);
/* keep: the upper stays theirs (tx/ID/upper, recorded in tx/ID/survivors.rec
 * when has_upper), what they write later a transaction of its own from
 * base_gen; activefd: the transaction's owner lock, which the steward
 * holds from then on (-1: none). */
MUST_CHECK int sl_group_keep(struct sess_link *l, uint64_t tx, bool keep, bool has_upper, uint64_t base_gen,
                             int activefd, txbox_error *err);

#define SURVIVORS_REC "survivors.rec"

#endif
