/* What the shell reader (shell.c) and the classifier (classify.c) both
 * know of a command's words: a program's spec in the policy, the shell's
 * builtins, getopt_long's reading of a long option, a normalised path. */
#include <fnmatch.h>
#include <string.h>

#include "pol.h"

const progspec *policy_prog(const txbox_policy *p, const char *name)
{
    if (p->nprog_order != p->nprogs) {
        /* not indexed (a policy being read): in file order */
        const progspec *glob = NULL;
        for (size_t i = 0; i < p->nprogs; i++) {
            const progspec *s = &p->progs[i];
            if (!strcmp(s->name, name))
                return s;
            if (!glob && strpbrk(s->name, "*?[") && fnmatch(s->name, name, 0) == 0)
                glob = s;
        }
        return glob;
    }
    size_t lo = 0, hi = p->nprog_lit;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(p->progs[p->prog_order[mid]].name, name);
        if (!c)
            return &p->progs[p->prog_order[mid]];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = p->nprog_lit; i < p->nprog_order; i++)
        if (fnmatch(p->progs[p->prog_order[i]].name, name, 0) == 0)
            return &p->progs[p->prog_order[i]];
    return NULL;
}

/* The shell builtins the default rules name. */
bool shell_builtin(const char *name)
{
    static const char *const v[] = {
        "echo",    "printf",  "pwd",     "true",  "false", "test",     "[",     "cd",    "pushd",  "popd",
        "dirs",    "exit",    "return",  "shift", "set",   "unset",    "read",  "wait",  "alias",  "unalias",
        ":",       "getopts", "hash",    "jobs",  "break", "continue", "shopt", "umask", "ulimit", "type",
        "command", "help",    "builtin", "eval",  "exec",  "trap",     "kill"};
    for (size_t i = 0; i < ARRAY_SIZE(v); i++)
        if (!strcmp(name, v[i]))
            return true;
    return false;
}

const char *long_option(const char *arg, const char *const *opts)
{
    size_t n = strcspn(arg, "=");
    const char *hit = NULL;
    bool ambiguous = false;
    for (size_t i = 0; opts[i]; i++) {
        size_t l = strcspn(opts[i], "=");
        if (strncmp(opts[i], arg, n))
            continue;
        if (l == n)
            return opts[i];
        if (n > 2 && l > n) {
            ambiguous = hit != NULL;
            hit = opts[i];
        }
    }
    return ambiguous ? NULL : hit;
}

/* Lexically normalize an absolute path into out (size >= strlen(in)+2). */
void norm_abs(const char *in, char *out)
{
    size_t ol = 0;
    const char *s = in;
    while (*s) {
        while (*s == '/')
            s++;
        if (!*s)
            break;
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 1 && s[0] == '.') {
        } else if (n == 2 && s[0] == '.' && s[1] == '.') {
            while (ol && out[ol - 1] != '/')
                ol--;
            if (ol)
                ol--;
        } else {
            out[ol++] = '/';
            memcpy(out + ol, s, n);
            ol += n;
        }
        s += n;
    }
    if (!ol)
        out[ol++] = '/';
    out[ol] = 0;
}

const char *ws_rel(const txbox_policy *p, const char *path)
{
    const char *names[] = {p->workspace, p->ws_alias};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
        const char *ws = names[i];
        if (!ws)
            continue;
        size_t wl = strlen(ws);
        if (wl == 1 && ws[0] == '/')
            return path[0] == '/' ? path + 1 : NULL;
        if (!strncmp(path, ws, wl) && (path[wl] == '/' || !path[wl]))
            return path[wl] ? path + wl + 1 : path + wl;
    }
    return NULL;
}

static void value_letters(progspec *ps, const strlist *l)
{
    for (size_t i = 0; i < l->n; i++) {
        const char *o = l->v[i];
        if (o[0] == '-' && o[1] && o[1] != '-' && !o[2] && (unsigned char)o[1] < 128)
            ps->value_letters[(unsigned char)o[1] >> 6] |= 1ull << ((unsigned char)o[1] & 63);
    }
}

static int prog_cmp(const void *a, const void *b, void *arg)
{
    const progspec *v = arg;
    return strcmp(v[*(const uint32_t *)a].name, v[*(const uint32_t *)b].name);
}

void policy_index_programs(txbox_policy *p)
{
    /* the order: literal names sorted (one spec per name: a later file
     * replaces it), then the globs in file order */
    free(p->prog_order);
    p->prog_order = xcalloc(p->nprogs ? p->nprogs : 1, sizeof *p->prog_order);
    size_t n = 0;
    for (size_t i = 0; i < p->nprogs; i++)
        if (!strpbrk(p->progs[i].name, "*?["))
            p->prog_order[n++] = (uint32_t)i;
    p->nprog_lit = n;
    qsort_r(p->prog_order, n, sizeof *p->prog_order, prog_cmp, p->progs);
    for (size_t i = 0; i < p->nprogs; i++)
        if (strpbrk(p->progs[i].name, "*?["))
            p->prog_order[n++] = (uint32_t)i;
    p->nprog_order = n;
    for (size_t i = 0; i < p->nprogs; i++) {
        progspec *ps = &p->progs[i];
        ps->value_letters[0] = ps->value_letters[1] = 0;
        value_letters(ps, &ps->options_with_value);
        value_letters(ps, &ps->options_optional_value);
        value_letters(ps, &ps->options_two_values);
    }
}

bool takes_value(const progspec *ps, char ch)
{
    unsigned char c = (unsigned char)ch;
    return ps && c < 128 && (ps->value_letters[c >> 6] >> (c & 63) & 1);
}
