/* The labelled corpus (tests/corpus/): every destructive command is not
 * safe, every command that reaches outside the workspace or cannot be
 * undone is unsafe, at most 0.5% of everyday commands are unsafe, and no
 * read-only everyday command is unsafe. Prints the rates.
 *
 *   corpus-test DESTRUCTIVE.tsv EVERYDAY.tsv [-v] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/pol.h"

typedef struct entry {
    char label[32];
    int obf;
    char *cmd;
    size_t len;
    int line;
} entry;

/* "{NL}" and "{TAB}" stand for a newline and a tab. */
static char *unescape(const char *s, size_t *len)
{
    char *o = xmalloc(strlen(s) + 1);
    size_t j = 0;
    while (*s) {
        if (!strncmp(s, "{NL}", 4)) {
            o[j++] = '\n';
            s += 4;
        } else if (!strncmp(s, "{TAB}", 5)) {
            o[j++] = '\t';
            s += 5;
        } else {
            o[j++] = *s++;
        }
    }
    o[j] = 0;
    *len = j;
    return o;
}

/* Reads LABEL<TAB>[OBF<TAB>]COMMAND lines; cols is 2 or 3. */
static entry *load(const char *path, int cols, size_t *n)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        perror(path);
        exit(125);
    }
    entry *v = NULL;
    size_t cnt = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t r;
    int ln = 0;
    while ((r = getline(&line, &cap, f)) > 0) {
        ln++;
        if (line[r - 1] == '\n')
            line[--r] = 0;
        if (!r || line[0] == '#')
            continue;
        char *t1 = strchr(line, '\t');
        char *t2 = t1 && cols == 3 ? strchr(t1 + 1, '\t') : NULL;
        if (!t1 || (cols == 3 && !t2)) {
            fprintf(stderr, "%s:%d: malformed line\n", path, ln);
            exit(125);
        }
        v = xrealloc(v, (cnt + 1) * sizeof *v);
        entry *e = &v[cnt++];
        memset(e, 0, sizeof *e);
        *t1 = 0;
        snprintf(e->label, sizeof e->label, "%s", line);
        e->obf = cols == 3 && t1[1] == '1';
        e->cmd = unescape(cols == 3 ? t2 + 1 : t1 + 1, &e->len);
        e->line = ln;
    }
    free(line);
    fclose(f);
    *n = cnt;
    return v;
}

static const char *vname(txbox_verdict_kind k) { return txbox_verdict_name(k); }

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: corpus-test DESTRUCTIVE.tsv EVERYDAY.tsv [-v]\n");
        return 125;
    }
    bool verbose = argc > 3 && !strcmp(argv[3], "-v");
    txbox_policy *p;
    txbox_error err = {0};
    if (txbox_policy_load(NULL, NULL, &p, &err) < 0) {
        fprintf(stderr, "corpus-test: %s\n", err.msg);
        return 125;
    }
    size_t nd, ne;
    entry *d = load(argv[1], 3, &nd);
    entry *e = load(argv[2], 2, &ne);
    size_t fails = 0, checks = 0;
    size_t d_notsafe = 0, out_n = 0, out_unsafe = 0, obf_n = 0, obf_notsafe = 0, obf_out = 0,
           obf_out_unsafe = 0;
    for (size_t i = 0; i < nd; i++) {
        txbox_verdict v;
        if (txbox_policy_check(p, d[i].cmd, d[i].len, &v, &err) < 0) {
            fprintf(stderr, "corpus-test: %s\n", err.msg);
            return 125;
        }
        bool outside = !strcmp(d[i].label, "outside");
        if (!outside && strcmp(d[i].label, "risky")) {
            fprintf(stderr, "%s:%d: unknown label '%s'\n", argv[1], d[i].line, d[i].label);
            return 125;
        }
        bool notsafe = v.verdict != TXBOX_VERDICT_SAFE;
        d_notsafe += notsafe;
        obf_n += d[i].obf;
        obf_notsafe += d[i].obf && notsafe;
        checks++;
        if (!notsafe) {
            fails++;
            printf("FAIL %s:%d destructive command is safe: %s  [%s]\n", argv[1], d[i].line, d[i].cmd,
                   v.rule);
        }
        if (outside) {
            out_n++;
            obf_out += d[i].obf;
            bool unsafe = v.verdict == TXBOX_VERDICT_UNSAFE;
            out_unsafe += unsafe;
            obf_out_unsafe += d[i].obf && unsafe;
            checks++;
            if (!unsafe) {
                fails++;
                printf("FAIL %s:%d outside/irreversible command is %s: %s  [%s] %s\n", argv[1], d[i].line,
                       vname(v.verdict), d[i].cmd, v.rule, v.reason);
            }
        }
        if (verbose)
            printf("%-9s %-8s %s  [%s]\n", vname(v.verdict), d[i].label, d[i].cmd, v.rule);
    }
    size_t e_safe = 0, e_unc = 0, e_unsafe = 0, ro_n = 0, ro_safe = 0, ro_unsafe = 0;
    for (size_t i = 0; i < ne; i++) {
        txbox_verdict v;
        if (txbox_policy_check(p, e[i].cmd, e[i].len, &v, &err) < 0) {
            fprintf(stderr, "corpus-test: %s\n", err.msg);
            return 125;
        }
        bool ro = !strcmp(e[i].label, "readonly");
        if (!ro && strcmp(e[i].label, "mutating")) {
            fprintf(stderr, "%s:%d: unknown label '%s'\n", argv[2], e[i].line, e[i].label);
            return 125;
        }
        e_safe += v.verdict == TXBOX_VERDICT_SAFE;
        e_unc += v.verdict == TXBOX_VERDICT_UNCERTAIN;
        e_unsafe += v.verdict == TXBOX_VERDICT_UNSAFE;
        if (v.verdict == TXBOX_VERDICT_UNSAFE)
            printf("note %s:%d everyday command is unsafe: %s  [%s]\n", argv[2], e[i].line, e[i].cmd, v.rule);
        if (ro) {
            ro_n++;
            ro_safe += v.verdict == TXBOX_VERDICT_SAFE;
            ro_unsafe += v.verdict == TXBOX_VERDICT_UNSAFE;
            checks++;
            if (v.verdict == TXBOX_VERDICT_UNSAFE) {
                fails++;
                printf("FAIL %s:%d read-only everyday command is unsafe: %s\n", argv[2], e[i].line, e[i].cmd);
            }
        } else if (v.verdict == TXBOX_VERDICT_SAFE) {
            /* a mutating command judged safe would run without a transaction */
            checks++;
            fails++;
            printf("FAIL %s:%d mutating everyday command is safe: %s  [%s]\n", argv[2], e[i].line, e[i].cmd,
                   v.rule);
        }
        if (verbose)
            printf("%-9s %-8s %s  [%s]\n", vname(v.verdict), e[i].label, e[i].cmd, v.rule);
    }
    checks++;
    double unsafe_rate = ne ? 100.0 * (double)e_unsafe / (double)ne : 0;
    if (unsafe_rate > 0.5) {
        fails++;
        printf("FAIL everyday unsafe rate %.2f%% > 0.5%%\n", unsafe_rate);
    }
    /* the corpus itself must be as large as the issue asks */
    checks++;
    if (nd < 400 || obf_n < 150 || ne < 600) {
        fails++;
        printf("FAIL corpus too small: %zu destructive (>= 400), %zu obfuscated (>= 150), "
               "%zu everyday (>= 600)\n",
               nd, obf_n, ne);
    }
#define PCT(a, b) ((b) ? 100.0 * (double)(a) / (double)(b) : 0.0)
    printf("destructive: %zu commands (%zu obfuscated); not safe: %zu (%.1f%%)\n", nd, obf_n, d_notsafe,
           PCT(d_notsafe, nd));
    printf("outside/irreversible: %zu; unsafe: %zu (%.1f%%); obfuscated ones: %zu, unsafe %zu "
           "(%.1f%%)\n",
           out_n, out_unsafe, PCT(out_unsafe, out_n), obf_out, obf_out_unsafe, PCT(obf_out_unsafe, obf_out));
    printf("obfuscated: not safe %zu/%zu (%.1f%%)\n", obf_notsafe, obf_n, PCT(obf_notsafe, obf_n));
    printf("everyday: %zu commands; safe %zu (%.1f%%), uncertain %zu (%.1f%%), unsafe %zu "
           "(%.2f%%)\n",
           ne, e_safe, PCT(e_safe, ne), e_unc, PCT(e_unc, ne), e_unsafe, unsafe_rate);
    printf("everyday read-only: %zu; safe %zu (%.1f%%), unsafe %zu\n", ro_n, ro_safe, PCT(ro_safe, ro_n),
           ro_unsafe);
    printf("corpus: %zu passed, %zu failed\n", checks - fails, fails);
    for (size_t i = 0; i < nd; i++)
        free(d[i].cmd);
    for (size_t i = 0; i < ne; i++)
        free(e[i].cmd);
    free(d);
    free(e);
    txbox_policy_free(p);
    return fails ? 1 : 0;
}
