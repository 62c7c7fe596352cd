/* A three-way merge of texts, as `git merge-file` does it (merge3.c). */
#ifndef TXBOX_MERGE3_H
#define TXBOX_MERGE3_H

#include <stddef.h>

#include "util.h"

/* Merges the changes from base to ours and from base to theirs, line by
 * line (libgit2's git_merge_file on buffers: no repository, nothing read
 * from any configuration). 1: merged cleanly, *out (malloc'd, *outlen
 * bytes) is the result; 0: both sides changed the same lines (no result);
 * -1: error in err (libgit2 cannot be loaded, out of memory). */
MUST_CHECK int merge3_text(const char *base, size_t blen, const char *ours, size_t olen, const char *theirs,
                           size_t tlen, char **out, size_t *outlen, txbox_error *err);

#endif
