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

static const char usage[] = "usage: txbox gc [-C DIR] [--json] [--keep N] [--max-bytes SIZE] [--save]\n"
                            "                [--dry-run]\n\n"
                            "Prunes the retained pre-images that make undo possible, oldest first,\n"
                            "until at most N committed transactions (default 100) and SIZE bytes\n"
                            "(default 1G) are kept, and says what it freed. --save makes N and SIZE\n"
                            "this workspace's bounds, which every commit then enforces. It also\n"
                            "archives the directories of ended transactions that nothing reads any\n"
                            "more (as every 64th transaction does). The audit log itself is never\n"
                            "pruned.";

int cmd_gc(int argc, char **argv)
{
    enum { O_KEEP = 256, O_MAX, O_DRY, O_SAVE };
    static const struct option opts[] = {
        CLI_LONG_JSON,
        {"keep", required_argument, NULL, O_KEEP},
        {"max-bytes", required_argument, NULL, O_MAX},
        {"dry-run", no_argument, NULL, O_DRY},
        {"save", no_argument, NULL, O_SAVE},
        CLI_LONG_HELP,
        {0},
    };
    txbox_gc_opts go = {.keep = -1, .max_bytes = -1};
    cli_opts cli = {.name = "gc", .usage = usage, .shorts = "C:h", .longs = opts, .argc = argc, .argv = argv};
    int c;
    while ((c = cli_opt_next(&cli)) >= 0) {
        switch (c) {
        case O_KEEP: {
            long long v;
            if (!parse_bytes(optarg, &v) || strpbrk(optarg, "KMGTkmgt") || v > 1000000000)
                return cli_failf("gc: --keep wants a number of transactions, not '%s'", optarg);
            go.keep = (long)v;
            break;
        }
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
    txbox_ws *ws;
    int rc = cli_open_ws(cli.dir, 0, cli.json, &ws);
    if (rc)
        return rc;
    txbox_error err = {0};
    char *s = NULL;
    rc = txbox_gc(ws, &go, &s, &err);
    txbox_ws_close(ws);
    if (rc < 0)
        return cli.json ? cli_fail_json(&err) : cli_fail(&err);
    if (cli.json) {
        printf("%s\n", s);
        free(s);
        return 0;
    }
    json_t *o = json_loads(s, 0, NULL);
    free(s);
    json_t *p = json_object_get(o, "pruned"), *k = json_object_get(o, "kept"), *v;
    size_t i;
    bool dry = json_is_true(json_object_get(o, "dry_run"));
    json_array_foreach(p, i, v)
        printf("%s tx %s: %s, %lld bytes\n", dry ? "would prune" : "pruned",
               json_string_value(json_object_get(v, "tx")), json_string_value(json_object_get(v, "what")),
               (long long)json_integer_value(json_object_get(v, "bytes")));
    printf("txbox gc: %s %zu, %lld bytes; kept the pre-images of %lld transactions, %lld bytes "
           "(bounds: %lld transactions, %lld bytes); archived %lld ended transactions' records\n",
           dry ? "would free" : "freed", json_array_size(p),
           (long long)json_integer_value(json_object_get(o, "freed_bytes")),
           (long long)json_integer_value(json_object_get(k, "transactions")),
           (long long)json_integer_value(json_object_get(k, "bytes")),
           (long long)json_integer_value(json_object_get(json_object_get(o, "limits"), "keep")),
           (long long)json_integer_value(json_object_get(json_object_get(o, "limits"), "max_bytes")),
           (long long)json_integer_value(json_object_get(o, "archived")));
    json_decref(o);
    return 0;
}
