/* Workspace paths resolved relative to a directory fd, never leaving it and
 * never following a symlink (crun's safe_openat): openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV), with a
 * component-by-component O_NOFOLLOW walk where openat2 is missing (or when
 * TXBOX_NO_OPENAT2=1, so that the fallback is tested). */
#ifndef TXBOX_SAFEPATH_H
#define TXBOX_SAFEPATH_H

#include <sys/types.h>

#include "util.h"

/* Opens rel ("" = dirfd itself) beneath dirfd. Returns an fd or -1/errno
 * (ELOOP for a symlink anywhere on the way, EXDEV for an escape). */
MUST_CHECK int safe_openat(int dirfd, const char *rel, int flags, mode_t mode);
/* safe_openat for reading without touching the file's atime (O_NOATIME
 * set on it where the caller owns the file), as openat_noatime. */
MUST_CHECK int safe_openat_noatime(int dirfd, const char *rel, int flags);
/* Opens the directory that contains rel's last component (O_PATH); *base
 * points to that component inside rel. */
MUST_CHECK int safe_open_parent(int dirfd, const char *rel, const char **base);
/* The same, opened for reading (O_RDONLY: a descriptor fsync and the
 * *at calls that change entries take). */
MUST_CHECK int safe_open_parent_rd(int dirfd, const char *rel, const char **base);
/* Is there an entry name under dfd (a symlink is not followed)? 1: yes; 0:
 * no (ENOENT); -1: it cannot be told (errno: EACCES, EIO, ENOTDIR...), which
 * a caller must not take for either. */
MUST_CHECK int exists_at(int dfd, const char *name);
/* The extended attribute names of the entry name under dirfd (a final
 * symlink not followed), as llistxattr(2) gives them: listxattrat(2)
 * (Linux 6.13), else llistxattr of its /proc/self/fd path, which costs a
 * walk of /proc each time (twice the call: 4.2 against 1.9 us a file in a
 * scan of 10,000). safepath_force_fallback(true) takes the fallback. */
ssize_t xattr_list_at(int dirfd, const char *name, char *buf, size_t n);
/* Is rel a clean relative path: no leading '/', no empty, "." or ".."
 * component, no trailing '/'? */
bool safe_relpath_ok(const char *rel);
/* Tests: force the fallback walk (1) or openat2 (0). */
void safepath_force_fallback(bool on);

#endif
