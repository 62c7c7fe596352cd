/* A multi-command transaction's layer (merge.c): its state file and the
 * merge of a command's upper into layer/, below run.c (which runs a
 * command of the transaction on the layer and merges it: multi.h, "for
 * run.c") and multi.c (begin, savepoints, commit...: the design is at the
 * top of multi.c). */
#ifndef TXBOX_MERGE_H
#define TXBOX_MERGE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include <jansson.h>

#include "multi.h"
#include "store.h"
#include "txbox_policy.h"

#define CHANGES_CAP 10000

struct txbox_multi {
    txbox_ws *ws;
    uint64_t id;
    char ids[32];
    char layer_rel[64], lwork_rel[64];
    int txfd, lockfd, layerfd, lworkfd;
    bool discard; /* the command being run is a verify: drop its writes */
    json_t *state;
    const txbox_policy *policy; /* its rules on effects judge the commit */
};

static inline const char *ovl_pfx(const txbox_ws *ws)
{
    return ws->root ? "trusted.overlay." : "user.overlay.";
}

/* Where multi_open_dir_rw records the modes it changes: file (under tx/ID/),
 * opened at the first record (fd -1 before). */
struct modes_log {
    txbox_multi *m;
    const char *file;
    int fd;
    bool unrestored; /* link_copy: a mode could not be given back */
};

struct merge {
    txbox_multi *m;
    json_t *added, *modified, *deleted;
    size_t listed;
    bool truncated;
    txbox_error *err;
    struct modes_log ml; /* merge.modes */
    size_t count[3];     /* added, modified, deleted: all of them, past the cap too */
};

/* The state file, tx/ID/multi, replaced whole; a number of it (0: none). */
MUST_CHECK int multi_write_state(txbox_multi *m, txbox_error *err);
uint64_t multi_state_u64(const txbox_multi *m, const char *k);
/* Is directory dfd of the layer opaque (overlay's attribute)? */
bool multi_is_opaque(const txbox_multi *m, int dfd);
/* Opens directory name (path in its tree) with owner rwx, recording its
 * mode in ml first when it lacks them (merge.c says why). */
int multi_open_dir_rw(struct modes_log *ml, int at, const char *name, const char *path, struct stat *st);
/* Gives back the modes recorded in file (merge.modes, link.modes). */
MUST_CHECK int multi_restore_modes(txbox_multi *m, const char *file, txbox_error *err);
/* afd (the layer's directory at p) takes ufd's metadata (ust). */
MUST_CHECK int multi_copy_dir_meta(struct merge *g, int ufd, const struct stat *ust, int afd, const char *p);
/* Merges incoming/ into layer/ and removes it (restartable); *changes
 * (may be NULL): what it added, modified, deleted. */
MUST_CHECK int multi_finish_merge(txbox_multi *m, json_t **changes, txbox_error *err);

#endif
