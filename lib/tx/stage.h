/* The staging of an undo (undo.c) and its reversal, which recovery runs
 * too (recover.c: undo_unstage, declared in store.h). See stage.c. */
#ifndef TXBOX_STAGE_H
#define TXBOX_STAGE_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "store.h"
#include "tx.h"

/* The staging record, tx/U/staged. */
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
/* Writes the staging record under a temporary name and renames it into
 * place, so that tx/U/staged exists only complete. *installed: it is in
 * place (possibly not durably: the caller then unstages). */
MUST_CHECK int undo_plan_write(int txfd, const struct undo_plan *p, bool *installed, txbox_error *err);
/* Moves the pre-images into tx/U/upper (each keeps the mode T's journal
 * records), stages the directory attributes to give back, and makes that
 * durable. */
MUST_CHECK int undo_stage(int txfd, int tundo, const struct tx_journal *t, const struct undo_plan *p,
                          const struct tx_ops *ops, txbox_error *err);
/* Renames tx/U/upper/PATH back to tx/T/undo/N for every staged entry that
 * moved (idempotent), each with the mode T's journal records for it, then
 * drops the staging record. */
MUST_CHECK int undo_unstage_plan(txbox_ws *ws, int txfd, const struct undo_plan *p, txbox_error *err);

/* Small helpers of undo.c and stage.c. */
static inline bool exists_at(int dirfd, const char *name)
{
    struct stat st;
    return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static inline int open_dir_at(int at, const char *name)
{
    return openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static inline void idname(char b[static 32], uint64_t id) { snprintf(b, 32, "%llu", (unsigned long long)id); }

#endif
