/* Secrets as the policy reads them: the paths the sandbox hides (the
 * policy's `hide:` list, which lib/tx/run.c hides from every command) and
 * the text patterns of `secrets:` (names anywhere, variables; an entry
 * starting with '!' is an exception). One list serves both: what a command
 * running in the sandbox cannot read, a command the policy calls safe,
 * which may run on the host (a hook's --trust-safe), does not read either.
 *
 * A `hide:` entry ~/X is hidden under every home the command sees, /X where
 * it is; to the policy either is a secret wherever its components appear
 * in a path (~/.ssh: /root/.ssh/github, @~/.ssh/x, a workspace that is the
 * home). Matching is by components, from an index of the entries' first
 * components: a few comparisons per path, whatever the list's length. */
#include <fnmatch.h>

#include "pol.h"

#define MAX_COMPONENTS 64

static int ent_cmp(const void *a, const void *b)
{
    const hidden_ent *x = a, *y = b;
    if (x->glob[0] != y->glob[0])
        return x->glob[0] ? 1 : -1; /* globs last */
    size_t n = x->len[0] < y->len[0] ? x->len[0] : y->len[0];
    int c = memcmp(x->comp[0], y->comp[0], n);
    return c ? c : (x->len[0] > y->len[0]) - (x->len[0] < y->len[0]);
}

void hidden_free(hidden_set *h)
{
    free(h->v);
    memset(h, 0, sizeof *h);
}

/* The index of hide's entries; it points into their text, which outlives it. */
void hidden_build(hidden_set *h, const strlist *hide)
{
    hidden_free(h);
    h->v = xcalloc(hide->n ? hide->n : 1, sizeof *h->v);
    for (size_t i = 0; i < hide->n; i++) {
        const char *e = hide->v[i] + (hide->v[i][0] == '~');
        hidden_ent *x = &h->v[h->n];
        for (const char *c = e; *c && x->n < HIDDEN_MAX_DEPTH;) {
            while (*c == '/')
                c++;
            size_t l = strcspn(c, "/");
            if (!l || l > UINT16_MAX)
                break;
            x->comp[x->n] = c;
            x->len[x->n] = (uint16_t)l;
            x->glob[x->n++] = memchr(c, '*', l) || memchr(c, '?', l) || memchr(c, '[', l);
            c += l;
        }
        if (x->n)
            h->n++;
    }
    qsort(h->v, h->n, sizeof *h->v, ent_cmp);
    h->nlit = 0;
    while (h->nlit < h->n && !h->v[h->nlit].glob[0])
        h->nlit++;
}

/* Does component s (n bytes) match entry x's component k? */
static bool comp_eq(const hidden_ent *x, size_t k, const char *s, size_t n)
{
    if (!x->glob[k])
        return x->len[k] == n && !memcmp(x->comp[k], s, n);
    char pat[256], buf[256];
    if (n >= sizeof buf || x->len[k] >= sizeof pat)
        return false;
    memcpy(pat, x->comp[k], x->len[k]);
    pat[x->len[k]] = 0;
    memcpy(buf, s, n);
    buf[n] = 0;
    return fnmatch(pat, buf, FNM_PERIOD) == 0;
}

/* Do the components c[i..] start with entry x's? */
static bool ent_at(const hidden_ent *x, const char *const *c, const size_t *cl, size_t i, size_t nc)
{
    if (x->n > nc - i)
        return false;
    for (size_t k = 0; k < x->n; k++)
        if (!comp_eq(x, k, c[i + k], cl[i + k]))
            return false;
    return true;
}

bool hidden_text(const hidden_set *h, const char *s)
{
    if (!h->n || !s || !*s)
        return false;
    const char *c[MAX_COMPONENTS];
    size_t cl[MAX_COMPONENTS], nc = 0;
    for (const char *p = s; *p && nc < MAX_COMPONENTS;) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        size_t l = strcspn(p, "/");
        c[nc] = p;
        cl[nc++] = l;
        p += l;
    }
    for (size_t i = 0; i < nc; i++) {
        /* the literal first components: binary search */
        size_t lo = 0, hi = h->nlit;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            const hidden_ent *x = &h->v[mid];
            int d = memcmp(x->comp[0], c[i], x->len[0] < cl[i] ? x->len[0] : cl[i]);
            if (!d)
                d = x->len[0] < cl[i] ? -1 : x->len[0] > cl[i];
            if (d < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (size_t k = lo; k < h->nlit && h->v[k].len[0] == cl[i] && !memcmp(h->v[k].comp[0], c[i], cl[i]);
             k++)
            if (ent_at(&h->v[k], c, cl, i, nc))
                return true;
        for (size_t k = h->nlit; k < h->n; k++)
            if (ent_at(&h->v[k], c, cl, i, nc))
                return true;
    }
    return false;
}

bool policy_secret_text(const txbox_policy *p, const char *s)
{
    if (strlist_glob(&p->secrets, s) && !strlist_glob(&p->not_secrets, s))
        return true;
    return hidden_text(&p->hidden, s);
}

/* `secrets:` entries starting with '!' are exceptions: moved to
 * not_secrets (the others stay, in place). */
static void split_exceptions(txbox_policy *p)
{
    strlist *l = &p->secrets;
    size_t k = 0;
    for (size_t i = 0; i < l->n; i++) {
        char *e = l->v[i];
        if (e[0] != '!' || !e[1]) {
            l->v[k] = e;
            l->glob[k++] = l->glob[i];
            continue;
        }
        strlist_add(&p->not_secrets, e + 1);
        if (!(l->glob[i] & STRLIST_BORROWED))
            free(e);
    }
    l->n = k;
    l->any_glob = false;
    for (size_t i = 0; i < k; i++)
        l->any_glob |= (l->glob[i] & STRLIST_GLOB) != 0;
}

/* Is path (absolute, normalized) in a home that is not the caller's, which
 * the sandbox hides whole: /root, /home/NAME, unless it is $HOME's (or
 * holds the workspace, whose secrets are hidden instead)? */
bool in_other_home(const txbox_policy *p, const char *path)
{
    char top[PATH_MAX];
    if (!strncmp(path, "/root", 5) && (path[5] == '/' || !path[5])) {
        strcpy(top, "/root");
    } else if (!strncmp(path, "/home/", 6) && path[6]) {
        size_t l = 6 + strcspn(path + 6, "/");
        if (l >= sizeof top)
            return true;
        memcpy(top, path, l);
        top[l] = 0;
    } else {
        return false;
    }
    const char *mine[] = {p->home, p->home_real, p->workspace, p->ws_alias};
    size_t tl = strlen(top);
    for (size_t i = 0; i < ARRAY_SIZE(mine); i++)
        if (mine[i] && !strncmp(mine[i], top, tl) && (mine[i][tl] == '/' || !mine[i][tl]))
            return false;
    return true;
}

void policy_finish_secrets(txbox_policy *p)
{
    split_exceptions(p);
    hidden_build(&p->hidden, &p->hide);
}
