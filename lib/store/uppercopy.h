/* A copy of an overlay upper that the overlay may still write (a session's
 * command whose background processes live on, tx/session.c): what the
 * command wrote is committed from the copy, and what they write later is
 * told apart by a record of the upper as it was copied. */
#ifndef TXBOX_UPPERCOPY_H
#define TXBOX_UPPERCOPY_H

#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "util.h"

/* One entry of an upper as it was: its inode, change time, type and
 * permissions, owner. */
struct urec_ent {
    char *path;
    uint64_t ino;
    struct timespec ctime;
    mode_t mode;
    uid_t uid;
    gid_t gid;
};

struct urec {
    struct urec_ent *v; /* sorted by path */
    size_t n, cap;
};

void urec_free(struct urec *r);
/* The record, as a file name under dirfd (written whole, then renamed). */
MUST_CHECK int urec_write(int dirfd, const char *name, const struct urec *r, txbox_error *err);
MUST_CHECK int urec_read(int dirfd, const char *name, struct urec *r, txbox_error *err);

/* Copies the upper src into the empty directory dst as an upper of its
 * own: entries are copied, never moved or linked (the overlay may write
 * src's inodes later: its processes are stopped meanwhile), whiteouts and
 * overlay attributes kept. With since (a record of an earlier copy of the
 * same upper), only what changed since it was made: entries added or
 * changed (a directory that is new or replaced whole, and marked opaque so
 * that it replaces what is there), a whiteout for each recorded entry that
 * is gone, and the directories that lead to them (merged: not opaque).
 * Every entry gets the owner's permissions it needs to be read, and its
 * mode back. now (may be NULL) receives the record of src as it is at the
 * end; *copied how many entries went into dst. opaque_key: the overlay's
 * opaque attribute ("trusted.overlay.opaque", or "user.overlay.opaque" in
 * a user namespace). */
MUST_CHECK int upper_copy(int src, int dst, const struct urec *since, struct urec *now,
                          const char *opaque_key, size_t *copied, txbox_error *err);

#endif
