/* git's index, read directly: what a commit's loss check needs on every
 * commit that changes a file of a repository (is the old content the
 * index's blob?), without loading libgit2, whose loading costs each
 * process more than the check itself (losses_git.c says how much).
 *
 * The format (gitformat-index(5)): "DIRC", a version (2, 3 or 4), the
 * number of entries; each entry 40 bytes of stat data, a 20-byte object
 * id (SHA-1), 16 bits of flags (assume-valid, extended, the stage, the
 * name's length up to 0xfff), version 3 and up 16 more when extended,
 * then the path: versions 2 and 3 NUL-terminated and padded with NULs to
 * a multiple of 8 bytes from the entry's start; version 4 as a varint
 * (bytes to drop from the previous path's end) and the rest of it,
 * NUL-terminated. Extensions and a trailing checksum follow.
 *
 * The file is untrusted (the workspace's .git): every length is checked
 * against the buffer, the paths must be sorted as git writes them, and an
 * index split into a shared one (extension "link") or of a sparse
 * checkout's directories is refused rather than half read: the caller
 * then counts what it could not check as lost (fail closed). The fuzzer
 * tests/fuzz/fuzz_git_index.c feeds it. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <nettle/base16.h>
#include <nettle/sha1.h>

#include "losses_int.h"
#include "safepath.h"

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint16_t be16(const unsigned char *p) { return (uint16_t)(p[0] << 8 | p[1]); }

void gix_free(struct gix *x)
{
    free(x->v);
    free(x->names);
    free(x->buf);
    memset(x, 0, sizeof *x);
}

/* git's order: bytes compared as unsigned, a shorter path first; then the
 * stage. */
static int entry_cmp(const struct gix_entry *a, const struct gix_entry *b)
{
    int c = strcmp(a->path, b->path);
    if (c)
        return c;
    return (int)((a->flags >> 12) & 3) - (int)((b->flags >> 12) & 3);
}

/* Version 4's varint: 7 bits a byte, high bit continues, each
 * continuation adding one (git's offset encoding). */
static bool varint(const unsigned char **p, const unsigned char *end, uint64_t *out)
{
    const unsigned char *q = *p;
    if (q >= end)
        return false;
    uint64_t v = *q & 0x7f;
    while (*q++ & 0x80) {
        if (q >= end || v > (UINT64_MAX >> 8))
            return false;
        v = ((v + 1) << 7) | (*q & 0x7f);
    }
    *p = q;
    *out = v;
    return true;
}

/* The extensions after the entries: a split index refers to entries kept
 * elsewhere, which this reader does not follow. */
static int check_extensions(const unsigned char *p, const unsigned char *end, const char **why)
{
    while (end - p >= 8 + 20) {
        uint32_t sz = be32(p + 4);
        if (!memcmp(p, "link", 4)) {
            *why = "the index is split (core.splitIndex)";
            return -1;
        }
        if ((uint64_t)sz > (uint64_t)(end - p) - 8)
            break; /* the checksum is what is left: not an extension */
        p += 8 + (size_t)sz;
    }
    return 0;
}

int gix_parse(struct gix *x, char *buf, size_t len, const char **why)
{
    memset(x, 0, sizeof *x); /* buf is x's only once parsed */
    const unsigned char *b = (const unsigned char *)buf, *end = b + len;
    if (len < 12 + 20 || memcmp(b, "DIRC", 4)) {
        *why = "not a git index";
        return -1;
    }
    uint32_t ver = be32(b + 4), n = be32(b + 8);
    if (ver < 2 || ver > 4) {
        *why = "an index version this reader does not know";
        return -1;
    }
    if (n > GIX_MAX_ENTRIES || (uint64_t)n * 62 > len) {
        *why = "more entries than the index can hold";
        return -1;
    }
    x->v = xcalloc(n ? n : 1, sizeof *x->v);
    dbuf names; /* version 4: the paths, rebuilt */
    dbuf_init(&names, 0);
    size_t *offs = ver == 4 ? xcalloc(n ? n : 1, sizeof *offs) : NULL;
    const unsigned char *p = b + 12;
    size_t prev_off = 0, prev_len = 0;
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        struct gix_entry *e = &x->v[i];
        const unsigned char *start = p;
        if (end - p < 62) {
            *why = "an entry runs past the end of the index";
            rc = -1;
            break;
        }
        uint32_t *f = &e->ctime_s;
        for (int k = 0; k < 10; k++)
            f[k] = be32(p + 4 * k);
        memcpy(e->oid, p + 40, 20);
        e->flags = be16(p + 60);
        p += 62;
        if (e->flags & 0x4000) {
            if (ver < 3 || end - p < 2) {
                *why = "an extended entry where none can be";
                rc = -1;
                break;
            }
            e->xflags = be16(p);
            p += 2;
        }
        if ((e->mode & 0170000) == 0040000) {
            *why = "a sparse index (directories as entries)";
            rc = -1;
            break;
        }
        if (ver == 4) {
            uint64_t drop;
            if (!varint(&p, end, &drop) || drop > prev_len) {
                *why = "a path that cannot be rebuilt";
                rc = -1;
                break;
            }
            const unsigned char *z = memchr(p, 0, (size_t)(end - p));
            if (!z) {
                *why = "a path runs past the end of the index";
                rc = -1;
                break;
            }
            size_t keep = prev_len - (size_t)drop, add = (size_t)(z - p);
            size_t off = names.len;
            dbuf_add(&names, names.p ? names.p + prev_off : "", keep);
            dbuf_add(&names, p, add);
            dbuf_add(&names, "", 1);
            offs[i] = off;
            prev_off = off;
            prev_len = keep + add;
            p = z + 1;
        } else {
            const unsigned char *z = memchr(p, 0, (size_t)(end - p));
            if (!z) {
                *why = "a path runs past the end of the index";
                rc = -1;
                break;
            }
            size_t nl = (size_t)(z - p);
            if ((e->flags & 0xfff) != (nl < 0xfff ? nl : 0xfff)) {
                *why = "a path whose length is not what its entry says";
                rc = -1;
                break;
            }
            e->path = (const char *)p;
            /* 1 to 8 NULs, to a multiple of 8 from the entry's start */
            size_t used = (size_t)(z - start), padded = (used + 8) & ~(size_t)7;
            if ((size_t)(end - start) < padded) {
                *why = "an entry runs past the end of the index";
                rc = -1;
                break;
            }
            p = start + padded;
        }
    }
    if (rc == 0 && ver == 4) {
        x->names = names.p; /* taken */
        names.p = NULL;
        for (uint32_t i = 0; i < n; i++)
            x->v[i].path = x->names + offs[i];
    }
    dbuf_free(&names);
    free(offs);
    x->n = n;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (!*x->v[i].path || (i && entry_cmp(&x->v[i - 1], &x->v[i]) >= 0)) {
            *why = "the index's paths are not in git's order";
            rc = -1;
        }
    }
    if (rc == 0)
        rc = check_extensions(p, end, why);
    if (rc < 0) {
        free(x->v);
        free(x->names);
        memset(x, 0, sizeof *x);
        return -1;
    }
    x->buf = buf;
    x->len = len;
    return 0;
}

int gix_load(struct gix *x, int dfd, const char *name, const char **why)
{
    memset(x, 0, sizeof *x);
    _cleanup_close_ int fd = safe_openat_noatime(dfd, name, O_RDONLY | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT)
            return 1;
        *why = "the index cannot be opened";
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        *why = "the index is not a regular file";
        return -1;
    }
    if ((uint64_t)st.st_size > GIX_MAX_BYTES) {
        *why = "the index is larger than txbox reads";
        return -1;
    }
    char *buf = xmalloc((size_t)st.st_size + 1);
    ssize_t r = read_all(fd, buf, (size_t)st.st_size);
    if (r != st.st_size) {
        free(buf);
        *why = "the index cannot be read";
        return -1;
    }
    if (gix_parse(x, buf, (size_t)r, why) < 0) {
        free(buf);
        return -1;
    }
    x->mtime_s = st.st_mtim.tv_sec;
    x->mtime_ns = st.st_mtim.tv_nsec;
    return 0;
}

static const char *entry_path_at(const void *ctx, size_t i) { return ((const struct gix *)ctx)->v[i].path; }

size_t gix_lower(const struct gix *x, const char *key, size_t n)
{
    return losses_lower(x->n, entry_path_at, x, key, n);
}

const struct gix_entry *gix_find(const struct gix *x, const char *path, size_t n)
{
    size_t i = gix_lower(x, path, n);
    if (i < x->n && strlen(x->v[i].path) == n && !memcmp(x->v[i].path, path, n))
        return &x->v[i]; /* the lowest stage: 0 when there is one */
    return NULL;
}

bool gix_same_entries(const struct gix *a, const struct gix *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++) {
        const struct gix_entry *x = &a->v[i], *y = &b->v[i];
        /* the flags but the name's length and assume-valid, which a
         * refresh leaves; the extended ones (skip-worktree, intent-to-add) */
        if (strcmp(x->path, y->path) || x->mode != y->mode || memcmp(x->oid, y->oid, 20) ||
            (x->flags & 0x3000) != (y->flags & 0x3000) || (x->xflags & 0x6000) != (y->xflags & 0x6000))
            return false;
    }
    return true;
}

void gix_entries_digest(const struct gix *x, char hex[41])
{
    struct sha1_ctx c;
    sha1_init(&c);
    for (size_t i = 0; i < x->n; i++) {
        const struct gix_entry *e = &x->v[i];
        /* what gix_same_entries compares */
        uint32_t f[3] = {e->mode, (uint32_t)(e->flags & 0x3000), (uint32_t)(e->xflags & 0x6000)};
        sha1_update(&c, strlen(e->path) + 1, (const uint8_t *)e->path);
        sha1_update(&c, sizeof f, (const uint8_t *)f);
        sha1_update(&c, 20, e->oid);
    }
    unsigned char d[SHA1_DIGEST_SIZE];
    sha1_digest(&c, sizeof d, d);
    base16_encode_update(hex, sizeof d, d);
    hex[2 * sizeof d] = 0;
}

void gix_blob_oid(const void *data, size_t n, unsigned char oid[20])
{
    struct sha1_ctx c;
    char h[32];
    int hl = snprintf(h, sizeof h, "blob %zu", n);
    sha1_init(&c);
    sha1_update(&c, (size_t)hl + 1, (const uint8_t *)h);
    sha1_update(&c, n, data);
    sha1_digest(&c, SHA1_DIGEST_SIZE, oid);
}

/* Version 2: "\377tOc", 2, a fan-out table (256 big-endian counts: the
 * objects whose first byte is at most i), then the sorted ids. */
bool gix_pack_has(const unsigned char *buf, size_t len, const unsigned char id[20])
{
    if (len < 8 + 1024 || memcmp(buf, "\377tOc", 4) || be32(buf + 4) != 2)
        return false;
    const unsigned char *fan = buf + 8, *ids = buf + 8 + 1024;
    uint32_t n = be32(fan + 255 * 4);
    if ((len - 8 - 1024) / 20 < n)
        return false;
    uint32_t lo = id[0] ? be32(fan + (id[0] - 1) * 4) : 0, hi = be32(fan + id[0] * 4);
    if (lo > hi || hi > n)
        return false;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int d = memcmp(ids + (size_t)mid * 20, id, 20);
        if (!d)
            return true;
        if (d < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

/* The packs' indexes of one objects/pack directory (under root), read
 * into r->packs (at most LOSS_PACKS of them, LOSS_PACK_IDX_MAX bytes
 * each: more are not read). */
static void read_packs(struct lrepo *r, int root, const char *dir)
{
    _cleanup_close_ int dfd = safe_openat(root, dir, O_RDONLY | O_DIRECTORY, 0);
    DIR *d = dfd >= 0 ? fdopendir(dup(dfd)) : NULL;
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) && r->npacks < LOSS_PACKS) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".idx"))
            continue;
        _cleanup_close_ int fd = openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 8 + 1024 ||
            st.st_size > LOSS_PACK_IDX_MAX)
            continue;
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED)
            continue;
        r->packs[r->npacks].p = m;
        r->packs[r->npacks++].n = (size_t)st.st_size;
    }
    closedir(d);
}

bool losses_object_known(struct lctx *c, struct lrepo *r, const unsigned char id[20])
{
    if (!r->gitdir || r->linked)
        return false;
    char hex[41];
    base16_encode_update(hex, 20, id);
    hex[40] = 0;
    _cleanup_free_ char *loose =
        xasprintf("%s%sobjects/%.2s/%s", r->gitdir, *r->gitdir ? "/" : "", hex, hex + 2);
    int roots[2] = {c->in->upperfd, c->in->ws->fd};
    for (int k = 0; k < 2; k++) {
        int fd = safe_openat(roots[k], loose, O_PATH, 0);
        if (fd >= 0) {
            close(fd);
            return true;
        }
    }
    if (!r->packs_read) {
        r->packs_read = true;
        _cleanup_free_ char *pd = xasprintf("%s%sobjects/pack", r->gitdir, *r->gitdir ? "/" : "");
        for (int k = 0; k < 2; k++)
            read_packs(r, roots[k], pd);
    }
    for (size_t i = 0; i < r->npacks; i++)
        if (gix_pack_has(r->packs[i].p, r->packs[i].n, id))
            return true;
    return false;
}

void losses_packs_free(struct lrepo *r)
{
    for (size_t i = 0; i < r->npacks; i++)
        munmap(r->packs[i].p, r->packs[i].n);
    r->npacks = 0;
}
