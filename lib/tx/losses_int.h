/* The losses check's parts, private to them (losses.h is the interface). */
#ifndef TXBOX_LOSSES_INT_H
#define TXBOX_LOSSES_INT_H

#include "losses.h"

/* ---- caps (docs/guarantees.md, "Losses"): past one, what is left is
 * reported as not verified and counted as lost ---- */
#define LOSS_REPOS_MAX 32               /* repositories looked at per commit */
#define LOSS_WALK_MAX 200000            /* entries of deleted trees walked */
#define LOSS_FILE_CAP (64u << 20)       /* bytes of one file read */
#define LOSS_READ_BUDGET (512ull << 20) /* bytes of files read per commit */
#define LOSS_GIT_TIMEOUT_S 10.0         /* the git child's deadline */
#define LOSS_GIT_OUT_MAX (4u << 20)     /* its answer */
#define LOSS_MIRROR_MAX 20000           /* entries of a git directory mirrored */
#define LOSS_TIPS_MAX 200000            /* refs and reflog entries read per state */
#define LOSS_WALK_COMMITS 200000        /* commits walked for what became unreachable */
#define LOSS_NEW_COMMITS 256            /* new commits whose trees may hold a file's content */
#define LOSS_PACKS 64                   /* packs' indexes read per repository */
#define LOSS_PACK_IDX_MAX (256u << 20)  /* bytes of one (about 9 million objects) */
#define LOSS_STAGED_MAX 50000           /* index entries compared with HEAD */
#define LOSS_ORIGIN_MAX 200             /* files whose last writer is looked up */

/* A list of strings (strvec is a set: its add is linear). */
struct lnames {
    char **v;
    size_t n, cap;
};
void lnames_push(struct lnames *l, char *s); /* takes s */
void lnames_free(struct lnames *l);

/* The first of n sorted strings (at(ctx, i)) that is >= key (kn bytes; a
 * string that starts with key and is longer counts as greater). */
size_t losses_lower(size_t n, const char *(*at)(const void *ctx, size_t i), const void *ctx, const char *key,
                    size_t kn);

/* ---- the after state of a path (losses_view.c) ---- */
struct lview {
    const struct tx_ops *ops;
    size_t *ord; /* op indices sorted by path */
    size_t n;
};
enum { LV_WS, LV_UPPER, LV_GONE };
void lview_init(struct lview *v, const struct tx_ops *ops);
void lview_free(struct lview *v);
const struct tx_op *lview_op(const struct lview *v, const char *path, size_t n);
/* Where path's entry is after the commit: the workspace's (unchanged or
 * a merged directory), the upper's, or gone. */
int lview_where(const struct lview *v, const char *path);
/* The names in directory dir after the commit (appended to out), at most
 * max (then *more). */
void lview_list(const struct lview *v, int wsfd, int upperfd, const char *dir, struct lnames *out, size_t max,
                bool *more);
/* Does any op lie at or under dir (a path prefix)? Its kinds in *mask
 * (1 << OP_*) */
bool lview_under(const struct lview *v, const char *dir, unsigned *mask);

/* ---- the commit's view of what it destroys ---- */

enum { LF_PENDING, LF_SAFE, LF_LOST, LF_EDITED };
enum { LFR_DELETED, LFR_MODIFIED };

struct lfile {
    char *path; /* workspace-relative */
    int repo;   /* index into repos; -1: none */
    uint64_t size;
    uint8_t what;        /* LFR_* */
    uint8_t state;       /* LF_*; LF_EDITED: an ordinary edit, unless git says it was a reset */
    bool tracked;        /* in the index before */
    bool db;             /* a database file (SQLite: judged by its pages) */
    bool db_dir;         /* db_kind: by the directory it lies in (a database server's) */
    const char *db_kind; /* another database's (static): by its header or directory */
    bool secret;         /* named by the policy's secrets: never a build product */
    bool folded;         /* counted in its removed repository's item */
    bool unverified;
    bool have_oid, have_noid, have_sha;
    unsigned char oid[20], noid[20]; /* git blob ids of the old and new content */
    char sha[65];                    /* SHA-256 of the old content */
    char *why;                       /* the item's detail */
    size_t droot;                    /* 1 + index of the deleted tree it came from; 0: none */
};

struct lrepo {
    char *wt;     /* the worktree, workspace-relative ("" the root); NULL: above the workspace */
    char *wt_abs; /* absolute */
    char *prefix; /* the workspace's path inside the worktree ("" or "sub/dir/") */
    char *gitdir; /* workspace-relative git directory; NULL when outside the workspace */
    char *gitdir_abs;
    bool linked;      /* the git directory has a commondir (a linked worktree's) */
    char *common_abs; /* ... the common directory it names (NULL: none) */
    bool removed;     /* its git directory is removed by the commit */
    uint64_t removed_bytes, removed_files;
    bool git_changed, index_changed, refs_changed;
    bool need_git;          /* the child looks at it */
    const char *why;        /* it cannot be read: why (static) */
    int ib_state, ia_state; /* 0 loaded; 1 none; -1 unreadable */
    struct gix ib, ia;
    char *mirror_abs; /* the after state's git directory for libgit2 (losses_git.c) */
    struct {
        void *p;
        size_t n;
    } packs[LOSS_PACKS]; /* its packs' indexes, mapped (losses_object_known) */
    size_t npacks;
    bool packs_read;
};

/* A repository removal noted while collecting (losses.c). */
struct lremoval {
    char *gitdir;
    uint64_t bytes, files;
};

/* A directory -> repository map (losses_repo_of; open addressing). */
struct ldmap {
    char **keys;
    int *vals;
    size_t cap, n;
};

/* The directory of the last file opened under a root (losses.c): a
 * commit's files come directory by directory. */
struct ldircache {
    char *dir;
    int fd;
};

struct lctx {
    const struct losses_in *in;
    struct ldircache dws, dup; /* the workspace's, the upper's */
    struct lremoval *rm;
    size_t nrm;
    struct ldmap dm;
    struct losses *out;
    struct lview view;
    struct lfile *f;
    size_t nf, cf;
    struct lrepo *r;
    size_t nr;
    struct lnames droots; /* deleted trees (workspace paths), for git's ignore rules */
    struct ldmap dbm;     /* directory -> the database server's above it (losses.c: db_above) */
    size_t walked;
    uint64_t budget; /* bytes left to read */
    bool walk_capped;
};

/* The repository of workspace path p (index into c->r), -1 for none;
 * found once per directory. */
int losses_repo_of(struct lctx *c, const char *p);
/* What probe(c, dir) says of the nearest of path's parent directories
 * (workspace paths; "" the root) for which it says anything but -2 (look
 * further up; the root's must not be -2); each directory asked once per
 * map m. */
int losses_dir_up(struct lctx *c, struct ldmap *m, const char *path,
                  int (*probe)(struct lctx *, const char *));
/* p inside its repository's worktree, as the index names it (caller
 * frees). */
char *losses_index_path(const struct lrepo *r, const char *p);

/* Does r's object store hold the object id (raw), before or after the
 * commit: a loose object, or one its packs' indexes list (losses_index.c)?
 * false when that cannot be told (a git directory outside the workspace,
 * a linked worktree's, an alternate's objects). */
bool losses_object_known(struct lctx *c, struct lrepo *r, const unsigned char id[20]);
void losses_packs_free(struct lrepo *r);

/* losses_git.c: the checks only git's objects can answer, for the
 * repositories with need_git, in a confined child; results into c's files
 * and c->out. Never fails: what cannot be checked is counted as lost. */
void losses_git(struct lctx *c);
/* The directory of its git mirror (txfd-relative) and its removal. */
void losses_git_cleanup(struct lctx *c);

#endif
