/* An undo's upper (revert.c), and the reversal of an older txbox's
 * staging, which recovery runs (recover.c: undo_unstage, declared in
 * store.h). See stage.c. */
#ifndef TXBOX_STAGE_H
#define TXBOX_STAGE_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "safepath.h"
#include "store.h"
#include "tx.h"

/* The staging record of an older txbox's undo, tx/U/staged. */
#define STAGED "staged"

struct undo_stage {
    size_t n;   /* T's operation index: tx/T/undo/N */
    char *path; /* where it goes: tx/U/upper/PATH */
};

struct undo_plan {
    uint64_t from; /* T */
    struct undo_stage *v;
    size_t n;
};

void undo_plan_free(struct undo_plan *p);
/* mkdir -p of path's parent directories inside upper (mode 0700), each
 * added to sync; the parent's fd (*base: path's last component). */
MUST_CHECK int stage_parent(int upper, const char *path, const char **base, struct fs_syncset *sync,
                            txbox_error *err);
/* The directory path in upper gets the extended attributes T's META
 * operation on it kept in tundo (tx/T/undo/N); the apply sets them. */
MUST_CHECK int undo_stage_xattrs(int upper, int tundo, const struct tx_journal *t, const char *path,
                                 struct fs_syncset *sync, txbox_error *err);
/* Renames tx/U/upper/PATH back to tx/T/undo/N for every staged entry that
 * moved (idempotent), each with the mode T's journal records for it, then
 * drops the staging record. */
MUST_CHECK int undo_unstage_plan(txbox_ws *ws, int txfd, const struct undo_plan *p, txbox_error *err);

/* Small helpers of undo.c and stage.c (exists_at: safepath.h). */
static inline int open_dir_at(int at, const char *name)
{
    return openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static inline void idname(char b[static 32], uint64_t id) { snprintf(b, 32, "%llu", (unsigned long long)id); }

#endif
