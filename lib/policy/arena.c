/* The per-check bump allocator and the string-list helpers of the policy. */
#include <fnmatch.h>

#include "pol.h"

struct arena_chunk {
    arena_chunk *next;
    size_t size, used;
    max_align_t data[];
};

#define CHUNK_MIN (64u * 1024u)

void arena_init(arena *a, size_t cap)
{
    memset(a, 0, sizeof *a);
    a->cap = cap;
}

void arena_reset(arena *a)
{
    if (!a->head)
        return;
    /* keep the oldest (last) chunk: the common case then never mallocs */
    arena_chunk *c = a->head;
    while (c->next) {
        arena_chunk *n = c->next;
        free(c);
        c = n;
    }
    c->used = 0;
    a->head = c;
    a->used_total = 0;
    a->exhausted = false;
}

void arena_free(arena *a)
{
    arena_chunk *c = a->head;
    while (c) {
        arena_chunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
    a->used_total = 0;
}

void *ar_alloc(arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    if (a->exhausted || (a->cap && a->used_total + n > a->cap)) {
        a->exhausted = true;
        return NULL;
    }
    arena_chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t sz = n > CHUNK_MIN ? n : CHUNK_MIN;
        arena_chunk *nc = xmalloc(sizeof *nc + sz);
        nc->size = sz;
        nc->used = 0;
        nc->next = a->head;
        a->head = c = nc;
    }
    void *r = (char *)c->data + c->used;
    c->used += n;
    a->used_total += n;
    return r;
}

char *ar_strndup(arena *a, const char *s, size_t n)
{
    char *r = ar_alloc(a, n + 1);
    if (!r)
        return NULL;
    if (n)
        memcpy(r, s, n);
    r[n] = 0;
    return r;
}

char *ar_strdup(arena *a, const char *s) { return ar_strndup(a, s, strlen(s)); }

void *ar_grow_copy(arena *a, const void *old, size_t n, size_t elem, size_t *alloc, size_t initial)
{
    size_t na = *alloc ? *alloc * 2 : initial;
    void *nv = ar_alloc(a, na * elem);
    if (!nv)
        return NULL;
    if (n)
        memcpy(nv, old, n * elem);
    *alloc = na;
    return nv;
}

static void strlist_put(strlist *l, char *s, unsigned char flags)
{
    /* room for 4, then doubled whenever n reaches a power of two (lists are
     * only ever built here and freed whole) */
    if (l->n == 0 || (l->n >= 4 && !(l->n & (l->n - 1)))) {
        size_t cap = l->n ? 2 * l->n : 4;
        l->v = xrealloc(l->v, cap * sizeof *l->v);
        l->glob = xrealloc(l->glob, cap);
    }
    bool glob = strpbrk(s, "*?[") != NULL;
    l->glob[l->n] = (unsigned char)(flags | (glob ? STRLIST_GLOB : 0));
    l->any_glob |= glob;
    l->v[l->n++] = s;
}

void strlist_add(strlist *l, const char *s) { strlist_put(l, xstrdup(s), 0); }

void strlist_add_borrowed(strlist *l, const char *s) { strlist_put(l, (char *)s, STRLIST_BORROWED); }

void strlist_free(strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        if (!(l->glob[i] & STRLIST_BORROWED))
            free(l->v[i]);
    free(l->v);
    free(l->glob);
    l->v = NULL;
    l->glob = NULL;
    l->n = 0;
    l->any_glob = false;
}

bool strlist_has(const strlist *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], s))
            return true;
    return false;
}

bool strlist_glob(const strlist *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if ((l->glob[i] & STRLIST_GLOB) ? fnmatch(l->v[i], s, 0) == 0 : !strcmp(l->v[i], s))
            return true;
    return false;
}

const char *basename_of(const char *s)
{
    const char *b = strrchr(s, '/');
    return b ? b + 1 : s;
}
