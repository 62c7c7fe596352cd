/* txbox log: the audit log, newest first, one line per transaction; with
 * --follow, oldest first and then each row as it is written. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "cmds.h"

void cli_time(char out[32], double t)
{
    time_t s = (time_t)t;
    struct tm tm;
    if (t <= 0 || !localtime_r(&s, &tm) || !strftime(out, 32, "%Y-%m-%d %H:%M:%S", &tm))
        snprintf(out, 32, "-");
}

void cli_print_clean(FILE *f, const char *s, size_t max)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (max && n >= max) {
            fputs("...", f);
            return;
        }
        if (*p == '\n')
            fputs("\\n", f), n += 2;
        else if (*p == '\t')
            fputs("\\t", f), n += 2;
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p), n += 4;
        else
            fputc(*p, f), n++;
    }
}

int cli_open_ws(const char *dir, unsigned flags, bool json, txbox_ws **ws)
{
    txbox_error err = {0};
    if (txbox_ws_open(dir, flags, ws, &err) < 0)
        return json ? cli_fail_json(&err) : cli_fail(&err);
    return 0;
}

int cli_ws_call(const char *dir, bool json, cli_ws_fn fn, const void *opts, json_t **out, int *api_rc)
{
    *out = NULL;
    txbox_ws *ws;
    int rc = cli_open_ws(dir, 0, json, &ws);
    if (rc)
        return rc;
    txbox_error err = {0};
    char *s = NULL;
    *api_rc = fn(ws, opts, &s, &err);
    txbox_ws_close(ws);
    if (*api_rc < 0)
        return json ? cli_fail_json(&err) : cli_fail(&err);
    if (json)
        printf("%s\n", s);
    *out = json_loads(s, 0, NULL);
    free(s);
    return 0;
}

static long long jint(json_t *o, const char *k)
{
    return (long long)json_integer_value(json_object_get(o, k));
}

/* "S" or "S.F", plain decimal seconds since the epoch. */
static bool parse_epoch(const char *s, double *out)
{
    size_t digits = strspn(s, "0123456789");
    if (!digits || digits > 12)
        return false;
    if (s[digits] == '.' && (!s[digits + 1] || s[digits + 1 + strspn(s + digits + 1, "0123456789")]))
        return false;
    if (s[digits] && s[digits] != '.')
        return false;
    *out = strtod(s, NULL);
    return true;
}

/* Drops from the array the transactions that neither started nor ended at
 * or after t. */
static void keep_since(json_t *a, double t)
{
    for (size_t i = json_array_size(a); i-- > 0;) {
        json_t *o = json_array_get(a, i);
        if (json_number_value(json_object_get(o, "started")) < t &&
            json_number_value(json_object_get(o, "finished")) < t)
            json_array_remove(a, i);
    }
}

/* One transaction as a line of text. */
static void print_row(json_t *o)
{
    char t[32];
    cli_time(t, json_number_value(json_object_get(o, "started")) > 0
                    ? json_number_value(json_object_get(o, "started"))
                    : json_number_value(json_object_get(o, "finished")));
    long long files = jint(o, "n_added") + jint(o, "n_modified") + jint(o, "n_deleted");
    printf("%-6s %s  %-11s %5lld  ", json_string_value(json_object_get(o, "tx")), t,
           json_string_value(json_object_get(o, "outcome")), files);
    const char *cmd = json_string_value(json_object_get(o, "command"));
    cli_print_clean(stdout, cmd ? cmd : "(unknown)", 72);
    const char *uo = json_string_value(json_object_get(o, "undo_of"));
    const char *ub = json_string_value(json_object_get(o, "undone_by"));
    if (uo)
        printf("  [undo of %s]", uo);
    if (ub)
        printf("  [undone by %s]", ub);
    putchar('\n');
}

/* ---- --follow ----
 *
 * Rows reach the log when their transaction ends, so ids do not arrive in
 * order: a command that runs long keeps the id it got at its start. What
 * has been printed is kept as `next` (every id below it is printed or
 * given up on) and the ids at or above it printed already (`seen`, those
 * ended out of order: a few). Each look reads the newest rows back to
 * `next`: a bounded window, FOLLOW_WINDOW at the most (an id missing for
 * longer than that many later transactions is given up on). */
#define FOLLOW_EVERY_MS 500
#define FOLLOW_FIRST 256
#define FOLLOW_WINDOW 50000

static volatile sig_atomic_t follow_stop;
static void on_follow_stop(int sig)
{
    (void)sig;
    follow_stop = 1;
}

static uint64_t row_id(json_t *o)
{
    uint64_t v = 0;
    const char *s = json_string_value(json_object_get(o, "tx"));
    return s && parse_u64(s, &v) ? v : 0;
}

/* The first look: all rows, or the newest limit; NULL when there is no
 * log to read yet. */
static json_t *rows_first(const char *dir, long limit)
{
    txbox_ws *ws;
    txbox_error err = {0};
    if (txbox_ws_open(dir, TXBOX_WS_NO_RECOVER, &ws, &err) < 0)
        return NULL;
    char *s = NULL;
    int rc = txbox_log_json(ws, limit, &s, &err);
    txbox_ws_close(ws);
    json_t *a = rc == 0 ? json_loads(s, 0, NULL) : NULL;
    free(s);
    if (!json_is_array(a)) {
        json_decref(a);
        return NULL;
    }
    return a;
}

/* The newest rows back to id from (at least FOLLOW_FIRST), newest first;
 * NULL when the log cannot be read now (no .txbox/ yet, busy). */
static json_t *rows_back_to(const char *dir, uint64_t from)
{
    long limit = FOLLOW_FIRST;
    for (;;) {
        json_t *a = rows_first(dir, limit);
        if (!a)
            return NULL;
        size_t n = json_array_size(a);
        uint64_t newest = n ? row_id(json_array_get(a, 0)) : 0,
                 oldest = n ? row_id(json_array_get(a, n - 1)) : 0;
        if ((long)n < limit || oldest <= from || limit >= FOLLOW_WINDOW)
            return a;
        json_decref(a);
        limit = newest - from + 1 > FOLLOW_WINDOW ? FOLLOW_WINDOW : (long)(newest - from + 1);
    }
}

/* The ids at or above next printed already, ascending. */
typedef struct idset {
    uint64_t *v;
    size_t n, cap;
} idset;

static size_t idset_pos(const idset *s, uint64_t id)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->v[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool idset_has(const idset *s, uint64_t id)
{
    size_t i = idset_pos(s, id);
    return i < s->n && s->v[i] == id;
}

static void idset_add(idset *s, uint64_t id)
{
    size_t i = idset_pos(s, id);
    if (i < s->n && s->v[i] == id)
        return;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->v = xrealloc(s->v, s->cap * sizeof *s->v);
    }
    memmove(s->v + i + 1, s->v + i, (s->n - i) * sizeof *s->v);
    s->v[i] = id;
    s->n++;
}

/* next moves past the ids printed without a hole up to them; a hole older
 * than the window (newest: the newest id seen) is given up on. */
static void idset_advance(idset *s, uint64_t *next, uint64_t newest)
{
    if (newest > FOLLOW_WINDOW && *next < newest - FOLLOW_WINDOW)
        *next = newest - FOLLOW_WINDOW;
    size_t k = 0;
    while (k < s->n && s->v[k] < *next)
        k++;
    while (k < s->n && s->v[k] == *next) {
        k++;
        (*next)++;
    }
    if (k) {
        memmove(s->v, s->v + k, (s->n - k) * sizeof *s->v);
        s->n -= k;
    }
}

/* Prints the rows of a (newest first) at or above *next not printed yet,
 * oldest first. -1 when the reader is gone. */
static int print_new(json_t *a, uint64_t *next, idset *seen, bool json)
{
    for (size_t i = json_array_size(a); i-- > 0;) {
        json_t *o = json_array_get(a, i);
        uint64_t id = row_id(o);
        if (id < *next || idset_has(seen, id))
            continue;
        if (json) {
            char *line = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
            if (line)
                printf("%s\n", line);
            free(line);
        } else {
            print_row(o);
        }
        idset_add(seen, id);
    }
    idset_advance(seen, next, json_array_size(a) ? row_id(json_array_get(a, 0)) : 0);
    return fflush(stdout) == EOF || ferror(stdout) ? -1 : 0;
}

/* Prints shown (rows of all, the first look, newest first), then each new
 * row as it comes, until a signal or the reader is gone. */
static int follow(const char *dir, json_t *all, json_t *shown, bool json)
{
    idset seen = {0};
    size_t n = json_array_size(all);
    uint64_t next = n ? row_id(json_array_get(all, n - 1)) : 1;
    if (!next)
        next = 1;
    /* what the first look had but does not show (-n, --since) is behind us too */
    for (size_t i = 0; i < n; i++)
        idset_add(&seen, row_id(json_array_get(all, i)));
    for (size_t i = 0; i < json_array_size(shown); i++) {
        uint64_t id = row_id(json_array_get(shown, i));
        size_t at = idset_pos(&seen, id);
        if (at < seen.n && seen.v[at] == id) {
            memmove(seen.v + at, seen.v + at + 1, (seen.n - at - 1) * sizeof *seen.v);
            seen.n--;
        }
    }
    int rc = print_new(shown, &next, &seen, json);
    while (rc == 0 && !follow_stop) {
        struct timespec ts = {0, FOLLOW_EVERY_MS * 1000000L};
        nanosleep(&ts, NULL);
        if (follow_stop)
            break;
        json_t *a = rows_back_to(dir, next);
        if (a)
            rc = print_new(a, &next, &seen, json);
        json_decref(a);
    }
    free(seen.v);
    return 0;
}

static const char usage[] = "usage: txbox log [-C DIR] [--json] [-n N] [--since T] [--follow]\n\n"
                            "The audit log, newest first: one line per transaction with its id, time,\n"
                            "outcome, number of files changed and command. --json prints an array of\n"
                            "objects. --since T keeps the transactions that started or ended at or\n"
                            "after T, in seconds since the epoch (with -n: of the newest N): to\n"
                            "gather a log piecewise, ask again from the last time seen and keep each\n"
                            "tx's newest row. --follow prints oldest first, then each transaction as\n"
                            "it ends, until interrupted; with --json one object a line (for a log\n"
                            "collector); it waits for a workspace that has no log yet.\n"
                            "See 'txbox show TX' for everything recorded about one.";

int cmd_log(int argc, char **argv)
{
    enum { O_SINCE = 256, O_FOLLOW };
    static const struct option opts[] = {
        CLI_LONG_JSON,
        {"since", required_argument, NULL, O_SINCE},
        {"follow", no_argument, NULL, O_FOLLOW},
        CLI_LONG_HELP,
        {0},
    };
    long limit = 0;
    double since = -1;
    bool follow_on = false;
    cli_opts cli = {
        .name = "log", .usage = usage, .shorts = "C:n:h", .longs = opts, .argc = argc, .argv = argv};
    int c;
    while ((c = cli_opt_next(&cli)) >= 0) {
        switch (c) {
        case 'n': {
            char *end;
            errno = 0;
            limit = strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || limit <= 0)
                return cli_failf("log: -n wants a positive number, not '%s'", optarg);
            break;
        }
        case O_FOLLOW:
            follow_on = true;
            break;
        case O_SINCE:
            if (!parse_epoch(optarg, &since))
                return cli_failf(
                    "log: --since wants seconds since the epoch (as 'date +%%s' prints), not '%s'", optarg);
            break;
        }
    }
    if (c == CLI_OPT_STOP)
        return cli.status;
    if (optind < argc)
        return cli_failf("log: unexpected argument '%s'", argv[optind]);
    if (follow_on) {
        struct sigaction sa = {.sa_handler = on_follow_stop};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);
        /* the first rows: all (or -n, --since), once there is a log */
        json_t *all = NULL;
        while (!follow_stop && !(all = rows_first(cli.dir, limit)))
            sleep(1);
        if (!all)
            return 0;
        json_t *shown = json_copy(all);
        if (since >= 0)
            keep_since(shown, since);
        int frc = follow(cli.dir, all, shown, cli.json);
        json_decref(shown);
        json_decref(all);
        return frc;
    }
    txbox_ws *ws;
    int rc = cli_open_ws(cli.dir, TXBOX_WS_NO_RECOVER, cli.json, &ws);
    if (rc)
        return rc;
    txbox_error err = {0};
    char *s = NULL;
    rc = txbox_log_json(ws, limit, &s, &err);
    txbox_ws_close(ws);
    if (rc < 0)
        return cli.json ? cli_fail_json(&err) : cli_fail(&err);
    if (cli.json && since < 0) {
        printf("%s\n", s);
        free(s);
        return 0;
    }
    json_t *a = json_loads(s, 0, NULL);
    free(s);
    if (since >= 0)
        keep_since(a, since);
    if (cli.json) {
        char *out = json_dumps(a, JSON_COMPACT);
        json_decref(a);
        if (!out)
            return cli_failf("log: out of memory");
        printf("%s\n", out);
        free(out);
        return 0;
    }
    for (size_t i = 0; i < json_array_size(a); i++)
        print_row(json_array_get(a, i));
    json_decref(a);
    return 0;
}
