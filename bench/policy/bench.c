/* Policy classification throughput on one core.
 *
 *   policy-bench EVERYDAY.tsv [ROUNDS]
 *
 * Classifies every command of the everyday corpus ROUNDS times (after one
 * warm-up round) with txbox_policy_check and reports commands per second
 * and latency percentiles. As a baseline in the same run it times parsing
 * alone (tree-sitter-bash on the same strings, no classification), so the
 * engine's own cost shows as a ratio. Prints one JSON object last. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tree_sitter/api.h>

#include "policy/pol.h"

const TSLanguage *tree_sitter_bash(void);

static uint64_t ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: policy-bench EVERYDAY.tsv [ROUNDS]\n");
        return 125;
    }
    uint64_t rounds = 20;
    if (argc > 2 && (!parse_u64(argv[2], &rounds) || rounds == 0 || rounds > 100000)) {
        fprintf(stderr, "policy-bench: bad ROUNDS\n");
        return 125;
    }
    FILE *f = fopen(argv[1], "re");
    if (!f) {
        perror(argv[1]);
        return 125;
    }
    char **cmds = NULL;
    size_t n = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t r;
    while ((r = getline(&line, &cap, f)) > 0) {
        if (line[r - 1] == '\n')
            line[--r] = 0;
        char *tab = strchr(line, '\t');
        if (line[0] == '#' || !tab)
            continue;
        /* {NL} stands for a newline */
        char *c = xstrdup(tab + 1), *o = c;
        for (const char *s = tab + 1; *s;) {
            if (!strncmp(s, "{NL}", 4)) {
                *o++ = '\n';
                s += 4;
            } else {
                *o++ = *s++;
            }
        }
        *o = 0;
        cmds = xrealloc(cmds, (n + 1) * sizeof *cmds);
        cmds[n++] = c;
    }
    free(line);
    fclose(f);
    if (!n) {
        fprintf(stderr, "policy-bench: no commands\n");
        return 125;
    }

    txbox_policy *p;
    txbox_error err = {0};
    if (txbox_policy_load(NULL, NULL, &p, &err) < 0) {
        fprintf(stderr, "policy-bench: %s\n", err.msg);
        return 125;
    }
    size_t total = n * (size_t)rounds;
    uint64_t *lat = xmalloc(total * sizeof *lat);
    txbox_verdict v;
    unsigned sink = 0;
    for (size_t i = 0; i < n; i++) /* warm-up */
        if (txbox_policy_check(p, cmds[i], strlen(cmds[i]), &v, &err) == 0)
            sink += v.verdict;
    uint64_t t0 = ns();
    size_t k = 0;
    for (uint64_t rd = 0; rd < rounds; rd++)
        for (size_t i = 0; i < n; i++) {
            uint64_t a = ns();
            if (txbox_policy_check(p, cmds[i], strlen(cmds[i]), &v, &err) < 0) {
                fprintf(stderr, "policy-bench: %s\n", err.msg);
                return 125;
            }
            lat[k++] = ns() - a;
            sink += v.verdict;
        }
    uint64_t t_check = ns() - t0;

    /* baseline: tree-sitter parse alone */
    TSParser *ps = ts_parser_new();
    ts_parser_set_language(ps, tree_sitter_bash());
    t0 = ns();
    for (uint64_t rd = 0; rd < rounds; rd++)
        for (size_t i = 0; i < n; i++) {
            TSTree *t = ts_parser_parse_string(ps, NULL, cmds[i], (uint32_t)strlen(cmds[i]));
            sink += ts_node_child_count(ts_tree_root_node(t)) & 1;
            ts_tree_delete(t);
        }
    uint64_t t_parse = ns() - t0;
    ts_parser_delete(ps);

    qsort(lat, total, sizeof *lat, cmp_u64);
    double per_s = (double)total / ((double)t_check / 1e9);
    double p50 = (double)lat[total / 2] / 1e3, p99 = (double)lat[total * 99 / 100] / 1e3,
           pmax = (double)lat[total - 1] / 1e3;
    double mean = (double)t_check / (double)total / 1e3;
    double parse_mean = (double)t_parse / (double)total / 1e3;
    printf("commands: %zu x %llu rounds = %zu checks\n", n, (unsigned long long)rounds, total);
    printf("throughput: %.0f commands/s on one core\n", per_s);
    printf("latency: mean %.1f us, p50 %.1f us, p99 %.1f us, max %.1f us\n", mean, p50, p99, pmax);
    printf("baseline (tree-sitter parse only): mean %.1f us; full check / parse = %.2fx\n", parse_mean,
           mean / parse_mean);
    printf("target 20000 commands/s: %s\n", per_s >= 20000 ? "met" : "NOT met");
    printf("{\"commands\":%zu,\"rounds\":%llu,\"per_second\":%.0f,\"mean_us\":%.2f,\"p50_us\":%.2f,"
           "\"p99_us\":%.2f,\"max_us\":%.2f,\"parse_mean_us\":%.2f,\"ratio_vs_parse\":%.3f,"
           "\"sink\":%u}\n",
           n, (unsigned long long)rounds, per_s, mean, p50, p99, pmax, parse_mean, mean / parse_mean, sink);
    free(lat);
    for (size_t i = 0; i < n; i++)
        free(cmds[i]);
    free(cmds);
    txbox_policy_free(p);
    return 0;
}
