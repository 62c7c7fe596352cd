/* Trees: removing, opening up and copying a whole directory tree under a
 * directory fd (tree.c). */
#ifndef TXBOX_TREE_H
#define TXBOX_TREE_H

#include <stdatomic.h>
#include <stdbool.h>

#include "util.h"

/* Removes name (file or whole tree) under dirfd; missing is fine. */
int tree_remove(int dirfd, const char *name);
/* Gives the owner rwx on every directory of the tree name under dirfd
 * (what overlayfs makes mode 000 in its work directory, what a command made
 * unwritable), so that anyone who may remove the tree's parent can remove
 * it, an unprivileged owner's rm -rf included; with files, also rw on every
 * regular file (one fstatat each: for small trees; overlayfs's
 * work/incompat/volatile/dirty is mode 000, which a cp -a of the workspace
 * by its owner could not read). */
void tree_grant_owner(int dirfd, const char *name, bool files);
/* The same, stopping (-1, errno EINTR, partly removed) once *stop is set. */
int tree_remove_until(int dirfd, const char *name, const atomic_bool *stop);
/* Copies the tree src (under sdir) to dst (under ddir), preserving type,
 * mode, owner (when permitted), times, symlinks, FIFOs and xattrs. skip: a
 * top-level name not to copy (NULL: none). */
MUST_CHECK int tree_copy(int sdir, const char *src, int ddir, const char *dst, const char *skip,
                         txbox_error *err);
/* The same for a tree of ours that may hold entries we may not read (a
 * directory or a file of mode 0 kept as a pre-image): each is
 * given the owner's read (and search) permission for the time of its
 * copy, then its mode back; the copy gets the mode it had. A file with
 * other links is never changed (they may be names outside the tree). */
MUST_CHECK int tree_copy_granting(int sdir, const char *src, int ddir, const char *dst, txbox_error *err);

/* The extended attributes of sname (under sdir) onto dname (under
 * ddir), not following a final symlink; each that cannot be set is left. */
void tree_copy_xattrs(int sdir, const char *sname, int ddir, const char *dname);

#endif
