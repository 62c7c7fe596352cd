/* txbox gc: prune retained pre-images (undo history), oldest first. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cmds.h"

/* A size: bytes, or with a K/M/G/T suffix (powers of 1024). */
static bool parse_bytes(const char *s, long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-')
        return false;
    int shift = 0;
    if (*end) {
        const char *u = "KMGT", *p = strchr(u, *end & ~0x20);
        if (!p || end[1])
            return false;
        shift = 10 * (int)(p - u + 1);
    }
    if (v > (0x7fffffffffffffffULL >> shift))
        return false;
    *out = (long long)(v << shift);
    return true;
}

/* A duration: seconds, or with an s/m/h/d/w suffix. */
static bool parse_age(const char *s, long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *s == '-')
        return false;
    static const struct {
        char c;
        long long mul;
    } units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}, {'w', 7 * 86400}};
    long long mul = 1;
    if (*end) {
        size_t i = 0;
        while (i < sizeof units / sizeof units[0] && units[i].c != *end)
            i++;
        if (i == sizeof units / sizeof units[0] || end[1])
            return false;
        mul = units[i].mul;
    }
    if (v > (unsigned long long)(100LL * 365 * 86400) / (unsigned long long)mul)
        return false;
    *out = (long long)v * mul;
    return true;
}

/* age as the options take it: the largest unit that divides it. */
static void fmt_age(char out[32], long long age)
{
    static const struct {
        char c;
        long long n;
    } u[] = {{'w', 7 * 86400}, {'d', 86400}, {'h', 3600}, {'m', 60}};
    for (size_t i = 0; i < sizeof u / sizeof u[0]; i++)
        if (age >= u[i].n && age % u[i].n == 0) {
            snprintf(out, 32, "%lld%c", age / u[i].n, u[i].c);
            return;
        }
    snprintf(out, 32, "%llds", age);
}

static const char usage[] =
    "usage: txbox gc [-C DIR] [--json] [--max-age AGE] [--loss-age AGE] [--max-bytes SIZE]\n"
    "                [--keep N|all] [--save] [--dry-run]\n\n"
    "Prunes the retained pre-images that make undo and restore possible, and\n"
    "says what it freed. Kept: those of every commit younger than AGE\n"
    "(--max-age, default 7d), of a commit that destroyed work (uncommitted\n"
    "changes, untracked files, history) younger than --loss-age (default\n"
    "30d), and of a later commit that changed the same paths while that one\n"
    "is kept (its undo merges with them); then, of those, at most SIZE bytes\n"
    "(--max-bytes, default 4G) and N commits (--keep, default all), the ones\n"
    "that destroyed work first, newest first. AGE is seconds or a number with\n"
    "s, m, h, d or w; SIZE bytes or with K, M, G or T. --save makes the bounds\n"
    "this workspace's, which every commit then enforces. It also archives the\n"
    "directories of ended transactions that nothing reads any more (as every\n"
    "64th transaction does). The audit log itself is never pruned.";

static int call_gc(txbox_ws *ws, const void *o, char **s, txbox_error *e) { return txbox_gc(ws, o, s, e); }

int cmd_gc(int argc, char **argv)
{
    enum { O_KEEP = 256, O_MAX, O_DRY, O_SAVE, O_AGE, O_LOSS_AGE };
    static const struct option opts[] = {
        CLI_LONG_JSON,
        {"keep", required_argument, NULL, O_KEEP},
        {"max-bytes", required_argument, NULL, O_MAX},
        {"max-age", required_argument, NULL, O_AGE},
        {"loss-age", required_argument, NULL, O_LOSS_AGE},
        {"dry-run", no_argument, NULL, O_DRY},
        {"save", no_argument, NULL, O_SAVE},
        CLI_LONG_HELP,
        {0},
    };
    txbox_gc_opts go = {.keep = -1, .max_bytes = -1, .max_age = -1, .loss_age = -1};
    cli_opts cli = {.name = "gc", .usage = usage, .shorts = "C:h", .longs = opts, .argc = argc, .argv = argv};
    int c;
    while ((c = cli_opt_next(&cli)) >= 0) {
        switch (c) {
        case O_KEEP: {
            long long v;
            if (!strcmp(optarg, "all"))
                v = TXBOX_GC_KEEP_ALL;
            else if (!parse_bytes(optarg, &v) || strpbrk(optarg, "KMGTkmgt") || v > 1000000000)
                return cli_failf("gc: --keep wants a number of transactions or 'all', not '%s'", optarg);
            go.keep = (long)v;
            break;
        }
        case O_AGE:
        case O_LOSS_AGE:
            if (!parse_age(optarg, c == O_AGE ? &go.max_age : &go.loss_age))
                return cli_failf("gc: --%s wants a duration (seconds, or with s/m/h/d/w), not '%s'",
                                 c == O_AGE ? "max-age" : "loss-age", optarg);
            break;
        case O_MAX:
            if (!parse_bytes(optarg, &go.max_bytes))
                return cli_failf("gc: --max-bytes wants a size (bytes, or with K/M/G/T), not '%s'", optarg);
            break;
        case O_DRY:
            go.dry_run = 1;
            break;
        case O_SAVE:
            go.save = 1;
            break;
        }
    }
    if (c == CLI_OPT_STOP)
        return cli.status;
    if (optind < argc)
        return cli_failf("gc: unexpected argument '%s'", argv[optind]);
    json_t *o;
    int rc, st = cli_ws_call(cli.dir, cli.json, call_gc, &go, &o, &rc);
    if (st || cli.json) {
        json_decref(o);
        return st;
    }
    json_t *p = json_object_get(o, "pruned"), *k = json_object_get(o, "kept"), *v;
    size_t i;
    bool dry = json_is_true(json_object_get(o, "dry_run"));
    json_array_foreach(p, i, v)
        printf("%s tx %s: %s, %lld bytes (%s)\n", dry ? "would prune" : "pruned",
               json_string_value(json_object_get(v, "tx")), json_string_value(json_object_get(v, "what")),
               (long long)json_integer_value(json_object_get(v, "bytes")),
               json_string_value(json_object_get(v, "why")));
    json_t *lim = json_object_get(o, "limits");
    char keep[32] = "no bound";
    if (json_is_integer(json_object_get(lim, "keep")))
        snprintf(keep, sizeof keep, "%lld", (long long)json_integer_value(json_object_get(lim, "keep")));
    char age[32], lage[32];
    fmt_age(age, (long long)json_integer_value(json_object_get(lim, "max_age")));
    fmt_age(lage, (long long)json_integer_value(json_object_get(lim, "loss_age")));
    printf("txbox gc: %s %zu, %lld bytes; kept the pre-images of %lld transactions, %lld bytes (%lld that "
           "destroyed work, %lld kept with them); bounds: age %s, %s for destroyed work, %lld bytes, "
           "transactions: %s; archived %lld ended transactions' records\n",
           dry ? "would free" : "freed", json_array_size(p),
           (long long)json_integer_value(json_object_get(o, "freed_bytes")),
           (long long)json_integer_value(json_object_get(k, "transactions")),
           (long long)json_integer_value(json_object_get(k, "bytes")),
           (long long)json_integer_value(json_object_get(k, "destroyed_work")),
           (long long)json_integer_value(json_object_get(k, "pinned")), age, lage,
           (long long)json_integer_value(json_object_get(lim, "max_bytes")), keep,
           (long long)json_integer_value(json_object_get(o, "archived")));
    json_decref(o);
    return 0;
}
