#include "result.h"

#include <math.h>

static const char *const outcome_names[] = {
    [TXBOX_OUTCOME_COMMITTED] = "committed", [TXBOX_OUTCOME_ROLLED_BACK] = "rolled_back",
    [TXBOX_OUTCOME_BLOCKED] = "blocked",     [TXBOX_OUTCOME_READ_ONLY] = "read_only",
    [TXBOX_OUTCOME_CONFLICT] = "conflict",   [TXBOX_OUTCOME_TIMED_OUT] = "timed_out",
    [TXBOX_OUTCOME_STAGED] = "staged",       [TXBOX_OUTCOME_REJECTED] = "rejected",
    [TXBOX_OUTCOME_HELD] = "held",           [TXBOX_OUTCOME_NO_SPACE] = "no_space",
};

const char *txbox_outcome_name(txbox_outcome o)
{
    return (unsigned)o < ARRAY_SIZE(outcome_names) ? outcome_names[o] : "unknown";
}

txbox_result *result_new(void)
{
    txbox_result *r = xcalloc(1, sizeof *r);
    dbuf_init(&r->out, 0);
    dbuf_init(&r->err, 0);
    return r;
}

void result_free(txbox_result *r)
{
    if (!r)
        return;
    json_decref(r->changes);
    json_decref(r->protections);
    dbuf_free(&r->out);
    dbuf_free(&r->err);
    free(r->fallback);
    free(r->conflict_path);
    json_decref(r->effects);
    json_decref(r->effect_verdict);
    json_decref(r->network);
    json_decref(r->attention);
    json_decref(r->losses);
    free(r->session);
    json_decref(r->discarded);
    free(r->cwd_after);
    json_decref(r->late);
    json_decref(r->background);
    free(r->log_error);
    free(r->verdict);
    free(r->rule);
    free(r->reason);
    free(r->suggestion);
    free(r->hint);
    free(r->shell);
    free(r);
}

void txbox_result_free(txbox_result *r) { result_free(r); }
txbox_outcome txbox_result_outcome(const txbox_result *r) { return r->outcome; }
int txbox_result_exit_code(const txbox_result *r) { return r->exit_code; }
const char *txbox_result_tx(const txbox_result *r) { return r->txs; }
const char *txbox_result_cwd_after(const txbox_result *r) { return r->cwd_after; }

static double round3(double v) { return round(v * 1000.0) / 1000.0; }

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || len > n || (len == 2 && c < 0xc2))
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    unsigned cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (size_t i = 1; i < len; i++)
        cp = (cp << 6) | (s[i] & 0x3f);
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

json_t *json_text(const char *s, size_t n, bool hex)
{
    dbuf o;
    dbuf_init(&o, 0);
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t l = u[i] ? utf8_seq(u + i, n - i) : 0;
        if (hex && u[i] == '\\')
            l = 0; /* a backslash is escaped too, so that \\xNN is never ambiguous */
        if (l) {
            dbuf_add(&o, s + i, l);
            i += l;
            continue;
        }
        if (hex) {
            char x[5];
            snprintf(x, sizeof x, "\\x%02x", u[i]);
            dbuf_addstr(&o, x);
        } else {
            dbuf_addstr(&o, "\xef\xbf\xbd");
        }
        i++;
    }
    json_t *j = json_stringn(dbuf_str(&o), o.len);
    dbuf_free(&o);
    return j ? j : json_string("");
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

char *json_text_bytes(const char *s, size_t n)
{
    char *o = xmalloc(n + 1), *w = o;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\') {
            int hi = i + 3 < n && s[i + 1] == 'x' ? hexval(s[i + 2]) : -1;
            int lo = hi >= 0 ? hexval(s[i + 3]) : -1;
            if (lo < 0 || (hi == 0 && lo == 0)) {
                free(o);
                return NULL;
            }
            *w++ = (char)(hi << 4 | lo);
            i += 3;
        } else if (!s[i]) {
            free(o);
            return NULL;
        } else {
            *w++ = s[i];
        }
    }
    *w = 0;
    return o;
}

static json_t *text(dbuf *b) { return json_text(dbuf_str(b), b->len, false); }

static json_t *str_or_null(const char *s) { return s ? json_string(s) : json_null(); }

json_t *result_obj(const txbox_result *rc)
{
    txbox_result *r = (txbox_result *)rc;
    json_t *o = json_object();
    json_object_set_new(o, "tx", json_string(r->txs));
    json_object_set_new(o, "verdict", r->verdict ? json_string(r->verdict) : json_string("uncertain"));
    json_object_set_new(o, "rule", str_or_null(r->rule));
    json_object_set_new(o, "reason", str_or_null(r->reason));
    if (r->suggestion)
        json_object_set_new(o, "suggestion", json_string(r->suggestion));
    if (r->hint)
        json_object_set_new(o, "hint", json_string(r->hint));
    json_object_set_new(o, "outcome", json_string(txbox_outcome_name(r->outcome)));
    if (r->effect_verdict) { /* effects.c: effect_rule, reason, suggestion, paths */
        json_object_update(o, r->effect_verdict);
        json_object_set(o, "effect_action", json_object_get(r->effect_verdict, "action"));
        json_object_del(o, "action");
        json_object_set(o, "effect_violations", json_object_get(r->effect_verdict, "violations"));
        json_object_del(o, "violations");
    }
    if (r->attention)
        json_object_set(o, "attention", r->attention);
    json_object_set_new(o, "exit_code", json_integer(r->exit_code));
    json_object_set_new(o, "signal", r->signal ? json_integer(r->signal) : json_null());
    json_object_set_new(o, "changes", r->changes ? json_incref(r->changes) : json_object());
    json_object_set_new(
        o, "losses",
        r->losses ? json_incref(r->losses)
                  : json_pack("{s:i,s:i,s:b,s:[]}", "count", 0, "bytes", 0, "truncated", 0, "items"));
    if (r->write_limit)
        json_object_set_new(o, "stopped_by", json_string("write limit"));
    else if (r->oom)
        json_object_set_new(o, "stopped_by", json_string("memory limit"));
    else if (r->pids_limit)
        json_object_set_new(o, "stopped_by", json_string("process limit"));
    if (r->conflict_path)
        json_object_set_new(o, "conflict_path", json_string(r->conflict_path));
    if (r->held_by)
        json_object_set_new(o, "held_by", json_sprintf("%llu", (unsigned long long)r->held_by));
    if (r->outcome == TXBOX_OUTCOME_NO_SPACE)
        json_object_set_new(o, "space",
                            json_pack("{s:I,s:I}", "free_bytes", (json_int_t)r->space_free, "floor_bytes",
                                      (json_int_t)r->space_floor));
    json_object_set_new(o, "stdout", text(&r->out));
    json_object_set_new(o, "stdout_truncated", json_boolean(r->out.dropped > 0));
    json_object_set_new(o, "stdout_dropped_bytes", json_integer((json_int_t)r->out.dropped));
    json_object_set_new(o, "stderr", text(&r->err));
    json_object_set_new(o, "stderr_truncated", json_boolean(r->err.dropped > 0));
    json_object_set_new(o, "stderr_dropped_bytes", json_integer((json_int_t)r->err.dropped));
    json_object_set_new(o, "protections", r->protections ? json_incref(r->protections) : json_object());
    if (r->network)
        json_object_set(o, "network", r->network);
    json_object_set_new(o, "backend", json_string(r->backend ? r->backend : "overlay"));
    if (r->shell)
        json_object_set_new(o, "shell", json_string(r->shell));
    if (r->fallback)
        json_object_set_new(o, "fallback", json_string(r->fallback));
    if (r->log_error)
        json_object_set_new(o, "log_error", json_string(r->log_error));
    if (r->effects) { /* saga.c */
        json_t *l = json_object_get(r->effects, "effects"), *e;
        size_t i;
        bool irr = false;
        json_array_foreach(l, i, e) irr = irr || json_is_true(json_object_get(e, "irreversible"));
        json_object_set(o, "effects", l);
        json_object_set(o, "needs_attention", json_object_get(r->effects, "needs_attention"));
        json_object_set_new(o, "irreversible", json_boolean(irr));
    }
    if (r->session)
        json_object_set_new(o, "session", json_string(r->session));
    if (r->session && r->session_started)
        json_object_set_new(o, "session_started", json_string(r->session_started > 1 ? "again" : "new"));
    json_object_set_new(o, "discarded",
                        r->discarded ? json_incref(r->discarded)
                                     : json_pack("{s:i,s:[],s:b}", "count", 0, "paths", "truncated", 0));
    if (r->cwd_after)
        json_object_set_new(o, "cwd_after", json_text(r->cwd_after, strlen(r->cwd_after), true));
    if (json_array_size(r->late))
        json_object_set(o, "late_transactions", r->late);
    if (r->background)
        json_object_set(o, "background", r->background);
    json_object_set_new(o, "duration_ms", json_real(round3(r->duration_ms)));
    json_object_set_new(o, "command_ms", json_real(round3(r->cmd_ms)));
    json_object_set_new(o, "overhead_ms", json_real(round3(r->overhead_ms)));
    return o;
}

char *txbox_result_json(const txbox_result *r)
{
    json_t *o = result_obj(r);
    char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(12));
    json_decref(o);
    return s;
}

static char *summary_base(const txbox_result *r, txbox_remedy *remedy);

/* n bytes for people: "12 bytes", "4.2 KiB" */
static void human_bytes(char *b, size_t n, uint64_t v)
{
    if (v < 1024)
        snprintf(b, n, "%llu byte%s", (unsigned long long)v, v == 1 ? "" : "s");
    else if (v < 1024 * 1024)
        snprintf(b, n, "%.1f KiB", (double)v / 1024);
    else if (v < 1024ull * 1024 * 1024)
        snprintf(b, n, "%.1f MiB", (double)v / (1024 * 1024));
    else
        snprintf(b, n, "%.1f GiB", (double)v / (1024.0 * 1024 * 1024));
}

/* What a commit destroyed, by kind, in one phrase each (the facts; the
 * front words the way back, TXBOX_REMEDY_UNDO): "destroyed uncommitted
 * changes to 3 files (4.2 KiB): a.py, b.py, c.py". */
void result_losses_phrase(const json_t *losses, dbuf *o)
{
    static const struct {
        const char *kind, *verb, *one, *many;
    } k[] = {
        {"uncommitted", "destroyed uncommitted changes to", "file", "files"},
        {"untracked", "destroyed", "untracked file", "untracked files"},
        {"staged", "dropped staged changes to", "file", "files"},
        {"stash", "dropped", "stash entry", "stash entries"},
        {"history", "made", "commit unreachable", "commits unreachable"},
        {"branch", "dropped commits no other branch or tag has from", "branch or tag", "branches or tags"},
        {"repository", "removed", "repository", "repositories"},
        {"database", "destroyed", "database", "databases"},
    };
    json_t *items = json_object_get(losses, "items"), *it;
    size_t unverified = 0, i;
    json_array_foreach(items, i, it) unverified += json_is_true(json_object_get(it, "unverified"));
    for (size_t j = 0; j < ARRAY_SIZE(k); j++) {
        size_t n = 0, shown = 0;
        uint64_t bytes = 0;
        bool history = !strcmp(k[j].kind, "history");
        json_array_foreach(items, i,
                           it) if (!strcmp(json_string_value(json_object_get(it, "kind")) ?: "", k[j].kind))
        {
            json_int_t cm = json_integer_value(json_object_get(it, "commits"));
            n += history && cm > 0 ? (size_t)cm : 1; /* history: its commits */
            bytes += (uint64_t)json_integer_value(json_object_get(it, "bytes"));
        }
        if (!n)
            continue;
        char head[128], sz[32];
        snprintf(head, sizeof head, "%s %zu %s", k[j].verb, n, n == 1 ? k[j].one : k[j].many);
        human_bytes(sz, sizeof sz, bytes);
        dbuf_addstr(o, "; ");
        dbuf_addstr(o, head);
        if (bytes) {
            dbuf_addstr(o, " (");
            dbuf_addstr(o, sz);
            dbuf_addstr(o, ")");
        }
        dbuf_addstr(o, ": ");
        json_array_foreach(items, i, it)
        {
            if (strcmp(json_string_value(json_object_get(it, "kind")) ?: "", k[j].kind))
                continue;
            if (shown == 3) {
                dbuf_addstr(o, ", ...");
                break;
            }
            dbuf_addstr(o, shown++ ? ", " : "");
            const char *p = json_string_value(json_object_get(it, "path"));
            dbuf_addstr(o, p ? p : "?");
            if (!strcmp(k[j].kind, "branch")) {
                json_t *cm = json_object_get(it, "commits");
                if (json_is_integer(cm)) {
                    char c[48];
                    snprintf(c, sizeof c, " (%lld commit%s)", (long long)json_integer_value(cm),
                             json_integer_value(cm) == 1 ? "" : "s");
                    dbuf_addstr(o, c);
                }
            }
        }
    }
    json_int_t total = json_integer_value(json_object_get(losses, "count"));
    if ((size_t)total > json_array_size(items)) {
        char more[64];
        snprintf(more, sizeof more, "; %lld more lost", (long long)total - (long long)json_array_size(items));
        dbuf_addstr(o, more);
    }
    if (unverified) {
        char uv[96];
        snprintf(uv, sizeof uv, " (%zu of them not verified: counted as lost)", unverified);
        dbuf_addstr(o, uv);
    }
}

static char *summary_effects(const txbox_result *r, char *s, txbox_remedy *remedy);

/* "; discarded: N files written outside the workspace: A, B, C, and N
 * more", when the command wrote where nothing persists and the outcome
 * reads as done. */
static char *summary_discarded(const txbox_result *r, char *s)
{
    json_int_t n = json_integer_value(json_object_get(r->discarded, "count"));
    bool done = r->outcome == TXBOX_OUTCOME_COMMITTED || r->outcome == TXBOX_OUTCOME_READ_ONLY ||
                r->outcome == TXBOX_OUTCOME_STAGED;
    if (n <= 0 || !done)
        return s;
    json_t *paths = json_object_get(r->discarded, "paths");
    dbuf b;
    dbuf_init(&b, 0);
    dbuf_addstr(&b, s);
    char head[96];
    snprintf(head, sizeof head, "; discarded: %lld %s written outside the workspace: ", (long long)n,
             n == 1 ? "file" : "files");
    dbuf_addstr(&b, head);
    size_t shown = 0;
    for (; shown < json_array_size(paths) && shown < 3; shown++) {
        if (shown)
            dbuf_addstr(&b, ", ");
        dbuf_addstr(&b, json_string_value(json_array_get(paths, shown)) ?: "?");
    }
    if ((json_int_t)shown < n) {
        char more[48];
        snprintf(more, sizeof more, "%s%lld more", shown ? ", and " : "", (long long)(n - (json_int_t)shown));
        dbuf_addstr(&b, more);
    }
    free(s);
    char *t = xstrdup(dbuf_str(&b));
    dbuf_free(&b);
    return t;
}

/* A session the command started (txbox run --session ID of none that
 * runs): said, so that a mistyped id, or a session that ended while the
 * agent was away, is not taken for the one whose /tmp and background
 * processes the command expected. */
static char *summary_session(const txbox_result *r, char *s)
{
    if (!r->session || !r->session_started)
        return s;
    char *t = r->session_started > 1
                  ? xasprintf("%s; session %s started again: the one of that id had ended, and its /tmp and "
                              "background processes are gone",
                              s, r->session)
                  : xasprintf("%s; session %s started: no session of that id was running", s, r->session);
    free(s);
    return t;
}

/* "; background processes of tx 5: tx 8 committed (...)", one clause per
 * late transaction reported with this result. */
static char *summary_late(const txbox_result *r, char *s)
{
    size_t i;
    json_t *l;
    json_array_foreach(r->late, i, l)
    {
        const char *oc = json_string_value(json_object_get(l, "outcome")) ?: "?";
        const char *why = json_string_value(json_object_get(l, "reason"));
        json_t *ch = json_object_get(l, "changes");
        char *t = xasprintf(
            "%s; background processes of tx %s: %s%s %s (%zu added, %zu modified, %zu deleted)%s%s", s,
            json_string_value(json_object_get(l, "from_tx")) ?: "?",
            json_is_string(json_object_get(l, "tx")) ? "tx " : "",
            json_string_value(json_object_get(l, "tx")) ?: "their writes", oc,
            json_array_size(json_object_get(ch, "added")), json_array_size(json_object_get(ch, "modified")),
            json_array_size(json_object_get(ch, "deleted")), why ? ": " : "", why ? why : "");
        free(s);
        s = t;
    }
    return s;
}

char *txbox_result_summary(const txbox_result *r, txbox_remedy *remedy)
{
    txbox_remedy none;
    if (!remedy)
        remedy = &none;
    *remedy = (txbox_remedy){0};
    char *s = summary_base(r, remedy);
    if (r->outcome == TXBOX_OUTCOME_COMMITTED &&
        json_integer_value(json_object_get(r->losses, "count")) > 0) {
        dbuf o;
        dbuf_init(&o, 0);
        dbuf_addstr(&o, s);
        result_losses_phrase(r->losses, &o);
        free(s);
        s = xstrdup(dbuf_str(&o));
        dbuf_free(&o);
        remedy_set(remedy, TXBOX_REMEDY_UNDO, r->txs, strlen(s));
    }
    s = summary_effects(r, s, remedy);
    s = summary_discarded(r, s);
    return summary_session(r, summary_late(r, s));
}

static char *summary_effects(const txbox_result *r, char *s, txbox_remedy *remedy)
{
    json_t *l = r->effects ? json_object_get(r->effects, "effects") : NULL, *e;
    if (!json_array_size(l))
        return s;
    size_t i, irr = 0, comp = 0;
    json_array_foreach(l, i, e)
    {
        irr += json_is_true(json_object_get(e, "irreversible"));
        comp += !strcmp(json_string_value(json_object_get(e, "state")) ?: "", "compensated");
    }
    json_int_t att = json_integer_value(json_object_get(r->effects, "needs_attention"));
    char *t = att || comp ? xasprintf("%s; %zu external effect(s): %zu compensated, %lld NEED ATTENTION", s,
                                      json_array_size(l), comp, (long long)att)
                          : xasprintf("%s; %zu external effect(s) recorded, %zu irreversible", s,
                                      json_array_size(l), irr);
    if (att) /* after a failed command, whose line names no other remedy */
        remedy_set(remedy, TXBOX_REMEDY_STATUS, NULL, strlen(t));
    free(s);
    return t;
}

static char *summary_base(const txbox_result *r, txbox_remedy *remedy)
{
    size_t a = 0, m = 0, d = 0;
    if (r->changes)
        changes_counts(r->changes, &a, &m, &d);
    const char *what = txbox_outcome_name(r->outcome);
    switch (r->outcome) {
    case TXBOX_OUTCOME_COMMITTED: {
        json_t *sp = r->changes ? json_object_get(r->changes, "hard_links_split") : NULL;
        if (json_array_size(sp))
            return xasprintf(
                "txbox: tx %s committed (%zu added, %zu modified, %zu deleted; %.1f ms overhead); "
                "%s has a hard link outside the workspace, which keeps the old content",
                r->txs, a, m, d, r->overhead_ms, json_string_value(json_array_get(sp, 0)));
        return xasprintf("txbox: tx %s committed (%zu added, %zu modified, %zu deleted; %.1f ms overhead)",
                         r->txs, a, m, d, r->overhead_ms);
    }
    case TXBOX_OUTCOME_ROLLED_BACK:
        if (r->write_limit || r->oom || r->pids_limit)
            return xasprintf("txbox: tx %s stopped by the %s limit and rolled back (exit status "
                             "%d): the workspace is unchanged",
                             r->txs,
                             r->write_limit ? "write"
                             : r->oom       ? "memory"
                                            : "process",
                             r->exit_code);
        return xasprintf("txbox: tx %s rolled back (exit status %d): the workspace is unchanged", r->txs,
                         r->exit_code);
    case TXBOX_OUTCOME_TIMED_OUT:
        if (r->backend && !strcmp(r->backend, "none"))
            return xasprintf("txbox: read-only command timed out and was killed with its processes");
        return xasprintf("txbox: tx %s timed out and was rolled back: the workspace is unchanged", r->txs);
    case TXBOX_OUTCOME_CONFLICT:
        if (r->held_by) {
            _cleanup_free_ char *h = xasprintf("txbox: tx %s conflict: %s is held by transaction %llu, which "
                                               "could not be finished",
                                               r->txs, r->conflict_path ? r->conflict_path : "a path",
                                               (unsigned long long)r->held_by);
            remedy_set(remedy, TXBOX_REMEDY_RECOVER, NULL, strlen(h));
            return xasprintf("%s; its changes are kept in .txbox/tx/%s/upper, not applied", h, r->txs);
        }
        return xasprintf("txbox: tx %s conflict: %s was changed by another transaction meanwhile; "
                         "its changes are kept in .txbox/tx/%s/upper, not applied",
                         r->txs, r->conflict_path ? r->conflict_path : "a path", r->txs);
    case TXBOX_OUTCOME_BLOCKED:
        return xasprintf("txbox: blocked by rule %s: %s%s%s", r->rule ? r->rule : "?",
                         r->reason ? r->reason : "", r->suggestion ? " — " : "",
                         r->suggestion ? r->suggestion : "");
    case TXBOX_OUTCOME_READ_ONLY:
        return xasprintf("txbox: read-only command (exit status %d)", r->exit_code);
    case TXBOX_OUTCOME_REJECTED:
    case TXBOX_OUTCOME_HELD: {
        bool held = r->outcome == TXBOX_OUTCOME_HELD;
        char *s =
            xasprintf("txbox: tx %s %s by effect rule %s: %s (%s%s) — %s", r->txs,
                      held ? "held for review" : "rejected, nothing applied,",
                      json_string_value(json_object_get(r->effect_verdict, "effect_rule")),
                      json_string_value(json_object_get(r->effect_verdict, "reason")),
                      json_string_value(json_array_get(json_object_get(r->effect_verdict, "paths"), 0)) ?: "",
                      json_array_size(json_object_get(r->effect_verdict, "paths")) > 1 ? ", ..." : "",
                      held ? "" : json_string_value(json_object_get(r->effect_verdict, "suggestion")) ?: "");
        if (held)
            remedy_set(remedy, TXBOX_REMEDY_APPROVE, r->txs, strlen(s));
        return s;
    }
    case TXBOX_OUTCOME_NO_SPACE:
        return xasprintf("txbox: tx %s not committed: the workspace's filesystem would keep %llu MiB "
                         "free, below its floor of %llu MiB; nothing was changed",
                         r->txs, (unsigned long long)(r->space_free >> 20),
                         (unsigned long long)(r->space_floor >> 20));
    case TXBOX_OUTCOME_STAGED:
        return xasprintf("txbox: command %s staged in its transaction (%zu added, %zu modified, "
                         "%zu deleted; applied at commit)",
                         r->txs, a, m, d);
    }
    return xasprintf("txbox: tx %s %s", r->txs, what);
}

void changes_counts(const json_t *changes, size_t *added, size_t *modified, size_t *deleted)
{
    static const char *const k[] = {"added", "modified", "deleted"};
    size_t *out[] = {added, modified, deleted};
    json_t *counts = json_object_get(changes, "counts");
    for (int i = 0; i < 3; i++) {
        json_t *n = json_object_get(counts, k[i]);
        *out[i] = json_is_integer(n) && json_integer_value(n) >= 0
                      ? (size_t)json_integer_value(n)
                      : json_array_size(json_object_get(changes, k[i]));
    }
}
