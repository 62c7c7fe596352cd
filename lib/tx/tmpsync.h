/* A session's /tmp sees the caller's own files of the host's /tmp: before
 * each command they are copied in, those the host changed since. See
 * tmpsync.c. */
#ifndef TXBOX_TMPSYNC_H
#define TXBOX_TMPSYNC_H

#include <stdbool.h>
#include <sys/stat.h>

#include "util.h"

#define TMPSYNC_STATE "tmpsync"

/* Brings into the session's /tmp (its root: stmp) the caller's own files
 * of the host's /tmp that the command may read (those under the /tmp
 * paths command or argv name, and those brought in before) when the host changed them since the last time, under the caps
 * of tmpsync.c; removes there what the host removed and the session did
 * not change. skip: paths never brought in (the hidden paths, the
 * workspace, NULL-terminated). The record of what came from where is
 * dirfd/tmpsync (flock'd while this runs). Best effort: what cannot be
 * copied is left. */
void tmpsync_in(int dirfd, int stmp, const char *const *skip, const char *command, char *const *argv);

/* The record (dirfd/tmpsync), for tmpsync_is_copy: NULL when none. */
struct tmpsync;
struct tmpsync *tmpsync_load(int dirfd);
/* Is /tmp/path (st: the session's entry) still the copy of the host's file
 * that tmpsync_in made? Such a file is the host's, not the session's. */
bool tmpsync_is_copy(const struct tmpsync *t, const char *path, const struct stat *st);
void tmpsync_free(struct tmpsync *t);

#endif
