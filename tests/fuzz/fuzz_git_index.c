/* libFuzzer target for git's index read directly (lib/tx/losses_index.c,
 * gix_parse): the index is the workspace's .git/index, a file any command
 * can write. Replayed over tests/fuzz/corpus/git_index by the meson test
 * git-index-fuzz-replay.
 *
 * Invariants, checked with abort():
 *   - the reader ends, within its bounds, on any bytes (ASan, UBSan), and
 *     so does a pack index's lookup (gix_pack_has) and a database file's
 *     header's (losses_db_kind);
 *   - what it accepts is sorted as git sorts it, every path non-empty and
 *     found again by gix_find (its lowest stage), and no more entries than
 *     the bytes can hold;
 *   - an index compares equal to itself (gix_same_entries). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "losses.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a pack's index read from the same bytes ends within them too */
    static const unsigned char id[20] = {0x5a};
    (void)gix_pack_has(data, size, id);
    /* and so does the look at a database file's header */
    (void)losses_db_kind((const char *)data, size);
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    struct gix x;
    const char *why = NULL;
    if (gix_parse(&x, buf, size, &why) < 0) {
        if (!why)
            abort(); /* a refusal always says why */
        free(buf);
        return 0;
    }
    if (x.n > size / 62 + 1)
        abort();
    for (size_t i = 0; i < x.n; i++) {
        const char *p = x.v[i].path;
        if (!*p)
            abort();
        if (i && strcmp(x.v[i - 1].path, p) > 0)
            abort();
        const struct gix_entry *e = gix_find(&x, p, strlen(p));
        if (!e || strcmp(e->path, p) || e > &x.v[i])
            abort();
    }
    if (!gix_same_entries(&x, &x))
        abort();
    gix_free(&x); /* frees buf */
    return 0;
}
