/* What the fronts tell a model about one command; see words.h. */
#include "words.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define LINE_PATHS 3     /* paths named in the line, per kind */
#define COMPACT_PATHS 20 /* paths listed in the compact object, per kind */

const char *words_bytes(unsigned long long n, char *buf, size_t cap)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (n < 1024) {
        snprintf(buf, cap, "%llu B", n);
        return buf;
    }
    double v = (double)n / 1024;
    size_t u = 0;
    while (v >= 1024 && u + 1 < ARRAY_SIZE(units))
        v /= 1024, u++;
    snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}

static const char *s(json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "";
}

static void addf(dbuf *b, const char *fmt, ...) PRINTF(2, 3);
static void addf(dbuf *b, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    dbuf_addstr(b, buf);
}

/* At most max bytes of t, not splitting a UTF-8 sequence, "..." when cut. */
static void add_cut(dbuf *b, const char *t, size_t max)
{
    size_t n = strlen(t);
    if (n <= max) {
        dbuf_addstr(b, t);
        return;
    }
    while (max > 0 && ((unsigned char)t[max] & 0xC0) == 0x80)
        max--;
    dbuf_add(b, t, max);
    dbuf_addstr(b, "...");
}

/* " a, b, c (+N more)" of a string array. */
static void add_names(dbuf *b, json_t *arr, size_t more_known)
{
    size_t n = json_array_size(arr), i;
    json_t *p;
    json_array_foreach(arr, i, p)
    {
        if (i >= LINE_PATHS)
            break;
        dbuf_addstr(b, i ? ", " : " ");
        add_cut(b, json_is_string(p) ? json_string_value(p) : "?", 160);
    }
    size_t more = (n > LINE_PATHS ? n - LINE_PATHS : 0) + more_known;
    if (more)
        addf(b, " (+%zu more)", more);
}

/* The phrase for n losses of one kind (contract: lib's loss kinds):
 * before, n, then the unit. */
static void add_kind(dbuf *b, const char *kind, size_t n)
{
    static const struct {
        const char *kind, *before, *one, *many;
    } kinds[] = {
        {"uncommitted", "uncommitted changes to ", " file", " files"},
        {"untracked", "", " untracked file", " untracked files"},
        {"staged", "staged changes to ", " file", " files"},
        {"stash", "", " stash entry", " stash entries"},
        {"history", "", " commit no branch or tag reaches", " commits no branch or tag reaches"},
        {"branch", "", " branch with commits no other ref has", " branches with commits no other ref has"},
        {"repository", "", " git repository (.git)", " git repositories (.git)"},
        {"database", "the content of ", " database file", " database files"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
        if (!strcmp(kind, kinds[i].kind)) {
            addf(b, "%s%zu%s", kinds[i].before, n, n == 1 ? kinds[i].one : kinds[i].many);
            return;
        }
    addf(b, "%zu item(s) of kind %.40s", n, kind);
}

bool words_losses(dbuf *b, json_t *result)
{
    json_t *l = json_object_get(result, "losses");
    json_int_t count = json_integer_value(json_object_get(l, "count"));
    bool lost = count > 0;
    if (lost) {
        json_t *items = json_object_get(l, "items");
        char bytes[32];
        dbuf_addstr(b, "; LOST");
        /* one phrase per kind, in the order the kinds first come */
        const char *seen[16];
        size_t nseen = 0, listed = 0, i, j;
        json_t *it, *jt;
        json_array_foreach(items, i, it)
        {
            const char *k = s(it, "kind");
            bool dup = false;
            for (size_t x = 0; x < nseen && !dup; x++)
                dup = !strcmp(seen[x], k);
            if (dup || nseen == ARRAY_SIZE(seen))
                continue;
            seen[nseen++] = k;
            size_t n = 0;
            unsigned long long by = 0;
            json_t *paths = json_array();
            json_array_foreach(items, j, jt) if (!strcmp(s(jt, "kind"), k))
            {
                n++;
                by += (unsigned long long)json_integer_value(json_object_get(jt, "bytes"));
                json_array_append(paths, json_object_get(jt, "path"));
            }
            listed += n;
            dbuf_addstr(b, nseen > 1 ? ", " : " ");
            add_kind(b, k, n);
            if (by)
                addf(b, " (%s)", words_bytes(by, bytes, sizeof bytes));
            dbuf_addstr(b, ":");
            add_names(b, paths, 0);
            json_decref(paths);
        }
        if ((size_t)count > listed)
            addf(b, "%s%lld more (%s in all)", listed ? ", and " : " ", (long long)count - (long long)listed,
                 words_bytes((unsigned long long)json_integer_value(json_object_get(l, "bytes")), bytes,
                             sizeof bytes));
    }
    json_t *d = json_object_get(result, "discarded");
    json_int_t nd = json_integer_value(json_object_get(d, "count"));
    if (nd > 0) {
        json_t *paths = json_object_get(d, "paths");
        addf(b, "; discarded %lld file%s written outside the workspace (%s persist):", (long long)nd,
             nd == 1 ? "" : "s", nd == 1 ? "it does not" : "they do not");
        add_names(b, paths, (size_t)nd > json_array_size(paths) ? (size_t)nd - json_array_size(paths) : 0);
    }
    return lost;
}

/* The way back from a loss, in the front's words. */
static void add_way_back(dbuf *b, json_t *run, const words_ctx *c)
{
    const char *tx = s(run, "tx");
    if (c->mtx && c->front == WORDS_MCP)
        addf(b,
             "; nothing is applied before commit: `rollback` (to a savepoint, or to the start) or "
             "`abort` with tx \"%s\" keeps it",
             c->mtx);
    else if (c->mtx)
        dbuf_addstr(b, "; nothing is applied before finish: `rollback` (to a savepoint, or with no name to "
                       "the start) keeps it");
    else if (c->front == WORDS_MCP)
        addf(b, "; to bring it back call the `undo` tool with tx \"%s\"", tx);
    else
        addf(b, "; to bring it back call `undo` with {\"tx\": \"%s\"}", tx);
}

/* "; added a, b; modified c (+2 more)" */
static void add_changes(dbuf *b, json_t *run)
{
    static const char *const kinds[] = {"added", "modified", "deleted"};
    json_t *ch = json_object_get(run, "changes");
    bool any = false;
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
        json_t *l = json_object_get(ch, kinds[i]);
        if (!json_array_size(l))
            continue;
        addf(b, "; %s", kinds[i]);
        add_names(b, l, 0);
        any = true;
    }
    if (!any)
        dbuf_addstr(b, "; no file changed");
}

static long long exit_code(json_t *run)
{
    return (long long)json_integer_value(json_object_get(run, "exit_code"));
}

static void head_in_tx(dbuf *b, json_t *run, const words_ctx *c, const char *outcome)
{
    const char *next = c->front == WORDS_MCP ? "commit" : "finish";
    if (!strcmp(outcome, "staged")) {
        addf(b, "staged in transaction %s (exit 0)", c->mtx);
        add_changes(b, run);
        if (c->front == WORDS_MCP)
            addf(b, "; nothing reaches the workspace until `commit` with tx \"%s\"", c->mtx);
        else
            addf(b, "; applied to the workspace at `%s`", next);
    } else if (!strcmp(outcome, "rolled_back") || !strcmp(outcome, "timed_out")) {
        addf(b,
             "%s (exit %lld): only this command's changes were discarded; transaction %s stays open with "
             "what was staged before: fix the cause and run again",
             !strcmp(outcome, "timed_out") ? "timed out" : "rolled back", exit_code(run), c->mtx);
    } else {
        addf(b, "%s in transaction %s (exit %lld)", outcome, c->mtx, exit_code(run));
    }
}

/* "; background processes of tx 5 (started earlier): tx 8 committed: added
 * late.txt", one clause per late transaction reported with this result
 * (the writes of processes an earlier command of the session left
 * running, once they all exited). */
static void add_late(dbuf *b, json_t *run)
{
    size_t i;
    json_t *l;
    json_array_foreach(json_object_get(run, "late_transactions"), i, l)
    {
        addf(b, "; background processes of tx %s (an earlier command): ", s(l, "from_tx"));
        if (*s(l, "tx"))
            addf(b, "tx %s ", s(l, "tx"));
        else
            dbuf_addstr(b, "their writes ");
        const char *oc = *s(l, "outcome") ? s(l, "outcome") : "ended";
        dbuf_addstr(b, !strcmp(oc, "rolled_back") ? "rolled back" : oc);
        if (*s(l, "reason"))
            addf(b, " (%s)", s(l, "reason"));
        static const char *const kinds[] = {"added", "modified", "deleted"};
        json_t *ch = json_object_get(l, "changes");
        for (size_t k = 0; k < ARRAY_SIZE(kinds); k++)
            if (json_array_size(json_object_get(ch, kinds[k]))) {
                addf(b, ", %s", kinds[k]);
                add_names(b, json_object_get(ch, kinds[k]), 0);
            }
    }
}

char *words_run_line(json_t *run, const words_ctx *c)
{
    dbuf b;
    dbuf_init(&b, 0);
    const char *outcome = s(run, "outcome"), *tx = s(run, "tx");
    if (!strcmp(outcome, "blocked")) {
        addf(&b, "blocked by rule %s: %s. It never ran", s(run, "rule"), s(run, "reason"));
        if (*s(run, "suggestion"))
            addf(&b, ". Instead: %s", s(run, "suggestion"));
        add_late(&b, run);
        return steal_pointer(&b.p) ?: xstrdup("");
    }
    if (c->mtx &&
        (!strcmp(outcome, "staged") || !strcmp(outcome, "rolled_back") || !strcmp(outcome, "timed_out"))) {
        head_in_tx(&b, run, c, outcome);
    } else if (!strcmp(outcome, "committed")) {
        addf(&b, "committed tx %s (exit 0)", tx);
        add_changes(&b, run);
    } else if (!strcmp(outcome, "read_only")) {
        addf(&b, "read-only (exit %lld): ran without a transaction; nothing changed", exit_code(run));
    } else if (!strcmp(outcome, "rolled_back")) {
        addf(&b,
             "rolled back tx %s (exit %lld): the command failed, so its changes were discarded and the "
             "workspace is as before",
             tx, exit_code(run));
        if (*s(run, "stopped_by"))
            addf(&b, " (stopped by the %s)", s(run, "stopped_by"));
    } else if (!strcmp(outcome, "timed_out")) {
        addf(&b,
             "timed out: tx %s was killed at the time limit and rolled back; raise `timeout` or split the "
             "work",
             tx);
    } else if (!strcmp(outcome, "conflict")) {
        if (*s(run, "held_by"))
            addf(&b,
                 "conflict: tx %s succeeded, but %s is held by tx %s, which txbox could neither finish "
                 "nor roll back; nothing applied. A person must fix what `txbox recover` reports",
                 tx, s(run, "conflict_path"), s(run, "held_by"));
        else
            addf(&b,
                 "conflict: tx %s succeeded, but %s changed meanwhile; nothing applied (kept aside): "
                 "re-read the files and run it again",
                 tx, *s(run, "conflict_path") ? s(run, "conflict_path") : "a file it changed");
    } else if (!strcmp(outcome, "held")) {
        addf(&b,
             "held for review: tx %s, effect rule %s: %s; nothing applied until a person runs `txbox "
             "approve %s` (or `txbox reject %s`)",
             tx, s(run, "effect_rule"), s(run, "reason"), tx, tx);
    } else if (!strcmp(outcome, "rejected")) {
        addf(&b, "rejected: tx %s, effect rule %s: %s; nothing applied", tx, s(run, "effect_rule"),
             s(run, "reason"));
        if (*s(run, "suggestion"))
            addf(&b, ". Instead: %s", s(run, "suggestion"));
    } else {
        addf(&b, "%s: tx %s (exit %lld)", outcome, tx, exit_code(run));
    }
    if (words_losses(&b, run))
        add_way_back(&b, run, c);
    add_late(&b, run);
    return steal_pointer(&b.p) ?: xstrdup("");
}

/* At most max bytes from the end of a string field, cut on a character
 * boundary, with NAME_cut when cut (the end of the output is what matters
 * after a failure). */
static void tail_field(json_t *out, json_t *run, const char *name, size_t max)
{
    json_t *v = json_object_get(run, name);
    if (!json_is_string(v) || !json_string_length(v))
        return;
    const char *t = json_string_value(v);
    size_t len = json_string_length(v);
    bool cut = len > max;
    if (cut) {
        t += len - max;
        while (*t && ((unsigned char)*t & 0xC0) == 0x80)
            t++;
    }
    json_object_set_new(out, name, json_string(t));
    char key[40], tr[40];
    snprintf(tr, sizeof tr, "%s_truncated", name);
    if (cut || json_is_true(json_object_get(run, tr))) {
        snprintf(key, sizeof key, "%s_cut", name);
        json_object_set_new(out, key, json_string("the start is cut; this is the tail"));
    }
}

static json_t *capped(json_t *list, size_t max)
{
    json_t *a = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (i >= max)
            break;
        json_array_append(a, v);
    }
    return a;
}

json_t *words_run_compact(json_t *run, const words_ctx *c)
{
    json_t *o = json_object();
    const char *outcome = s(run, "outcome");
    if (c->mtx)
        json_object_set_new(o, "transaction", json_string(c->mtx));
    json_object_set_new(o, "outcome", json_string(outcome));
    if (!c->mtx && json_is_string(json_object_get(run, "tx")) && strcmp(outcome, "blocked"))
        json_object_set(o, "tx", json_object_get(run, "tx"));
    static const char *const keys[] = {"rule",        "reason",        "suggestion",
                                       "effect_rule", "conflict_path", "held_by",
                                       "stopped_by",  "fallback",      "needs_attention"};
    bool blocked = !strcmp(outcome, "blocked");
    if (!blocked && json_is_integer(json_object_get(run, "exit_code")))
        json_object_set(o, "exit_code", json_object_get(run, "exit_code"));
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        json_t *v = json_object_get(run, keys[i]);
        /* the policy's rule, when it decided; its reason and suggestion
         * are in the line already */
        bool policy = i < 2, said = i == 1 || i == 2;
        if ((json_is_string(v) && json_string_length(v)) || json_is_integer(v))
            if ((!policy || blocked) &&
                !(said && (blocked || !strcmp(outcome, "held") || !strcmp(outcome, "rejected"))))
                json_object_set(o, keys[i], v);
    }
    if (json_is_array(json_object_get(run, "paths")) && json_array_size(json_object_get(run, "paths")))
        json_object_set_new(o, "paths", capped(json_object_get(run, "paths"), COMPACT_PATHS));
    json_t *ch = json_object_get(run, "changes"), *cc = json_object();
    static const char *const kinds[] = {"added", "modified", "deleted"};
    size_t more = 0;
    for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
        json_t *l = json_object_get(ch, kinds[i]);
        if (!json_array_size(l))
            continue;
        json_object_set_new(cc, kinds[i], capped(l, COMPACT_PATHS));
        more += json_array_size(l) > COMPACT_PATHS ? json_array_size(l) - COMPACT_PATHS : 0;
    }
    if (more || json_is_true(json_object_get(ch, "truncated")))
        json_object_set_new(cc, "more", json_integer((json_int_t)more));
    if (json_object_size(cc))
        json_object_set_new(o, "changes", cc);
    else
        json_decref(cc);
    json_t *l = json_object_get(run, "losses");
    if (json_integer_value(json_object_get(l, "count")) > 0)
        json_object_set(o, "losses", l);
    json_t *d = json_object_get(run, "discarded");
    if (json_integer_value(json_object_get(d, "count")) > 0)
        json_object_set(o, "discarded", d);
    json_t *late = json_object_get(run, "late_transactions");
    if (json_array_size(late))
        json_object_set_new(o, "late_transactions", capped(late, COMPACT_PATHS));
    size_t max = c->out_max ? c->out_max : 16384;
    tail_field(o, run, "stdout", max);
    tail_field(o, run, "stderr", max / 2);
    if (c->protections && json_object_get(run, "protections"))
        json_object_set(o, "protections", json_object_get(run, "protections"));
    return o;
}

char *words_text(const char *line, json_t *obj)
{
    char *js = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    char *t = xasprintf("%s\n%s", line, js ? js : "{}");
    free(js);
    return t;
}
