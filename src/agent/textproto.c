/* The text protocol parser; see textproto.h. */
#include "textproto.h"

static const char *const kind_names[] = {
    [TP_NONE] = "none",           [TP_RUN] = "run",          [TP_UNDO] = "undo", [TP_FINISH] = "finish",
    [TP_SAVEPOINT] = "savepoint", [TP_ROLLBACK] = "rollback"};

const char *tp_kind_name(tp_kind k) { return (unsigned)k < ARRAY_SIZE(kind_names) ? kind_names[k] : "?"; }

void tp_action_clear(tp_action *a)
{
    free(a->body);
    memset(a, 0, sizeof *a);
}

/* A line [s, s+n) without its line end. If it is a fence (at most three
 * spaces, then ```), returns true and sets *info and *ilen to the word after the
 * backticks with trailing blanks removed. */
static bool fence(const char *s, size_t n, const char **info, size_t *ilen)
{
    size_t i = 0;
    while (i < n && i < 3 && s[i] == ' ')
        i++;
    if (n - i < 3 || memcmp(s + i, "```", 3))
        return false;
    i += 3;
    size_t e = n;
    while (e > i && (s[e - 1] == ' ' || s[e - 1] == '\t'))
        e--;
    *info = s + i;
    *ilen = e - i;
    return true;
}

static tp_kind action_word(const char *w, size_t n)
{
    if (n == 3 && !memcmp(w, "run", 3))
        return TP_RUN;
    if (n == 4 && !memcmp(w, "undo", 4))
        return TP_UNDO;
    if (n == 6 && !memcmp(w, "finish", 6))
        return TP_FINISH;
    if (n == 9 && !memcmp(w, "savepoint", 9))
        return TP_SAVEPOINT;
    if (n == 8 && !memcmp(w, "rollback", 8))
        return TP_ROLLBACK;
    return TP_NONE;
}

static int bad(tp_action *out, const char *msg)
{
    snprintf(out->err, sizeof out->err, "%s", msg);
    return -1;
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
            return false;
    return true;
}

int textproto_parse(const char *text, size_t len, tp_action *out)
{
    memset(out, 0, sizeof *out);
    if (memchr(text, 0, len))
        return bad(out, "the reply contains a NUL byte");
    tp_kind found = TP_NONE, open_kind = TP_NONE;
    bool in_block = false;
    int actions = 0;
    size_t body_start = 0, body_end = 0, cur_start = 0;
    for (size_t pos = 0; pos < len;) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        size_t next = nl ? end + 1 : len;
        size_t n = end - pos;
        if (n && text[pos + n - 1] == '\r')
            n--;
        const char *info;
        size_t ilen;
        bool f = fence(text + pos, n, &info, &ilen);
        if (!in_block) {
            if (f) {
                in_block = true;
                open_kind = action_word(info, ilen);
                cur_start = next;
            }
        } else if (f && ilen == 0) {
            in_block = false;
            if (open_kind != TP_NONE) {
                actions++;
                found = open_kind;
                body_start = cur_start;
                body_end = pos;
            }
            open_kind = TP_NONE;
        }
        pos = next;
    }
    if (in_block && open_kind != TP_NONE) {
        snprintf(out->err, sizeof out->err,
                 "the ```%s block is not closed: end it with a line holding only ```",
                 tp_kind_name(open_kind));
        return -1;
    }
    if (actions == 0)
        return bad(out, "no action block found: end your reply with one ```run block holding "
                        "a shell command, or ```undo, or ```finish with a summary");
    if (actions > 1) {
        snprintf(out->err, sizeof out->err,
                 "%d action blocks found: send exactly one ```run, ```undo or ```finish block "
                 "per reply, then wait for its result",
                 actions);
        return -1;
    }
    /* The body runs up to the line end before the closing fence. */
    size_t bl = body_end > body_start ? body_end - body_start : 0;
    if (bl && text[body_start + bl - 1] == '\n')
        bl--;
    if (bl && text[body_start + bl - 1] == '\r')
        bl--;
    if (bl > TP_MAX_BODY) {
        snprintf(out->err, sizeof out->err, "the ```%s block is longer than %d bytes", tp_kind_name(found),
                 TP_MAX_BODY);
        return -1;
    }
    const char *b = text + body_start;
    if (found == TP_RUN && blank(b, bl))
        return bad(out, "the ```run block is empty: put the shell command inside it");
    if (found == TP_UNDO) {
        /* Empty, or one transaction id: letters, digits, '-', '_'. */
        size_t s = 0, e = bl;
        while (s < e && (b[s] == ' ' || b[s] == '\t' || b[s] == '\n' || b[s] == '\r'))
            s++;
        while (e > s && (b[e - 1] == ' ' || b[e - 1] == '\t' || b[e - 1] == '\n' || b[e - 1] == '\r'))
            e--;
        for (size_t i = s; i < e; i++) {
            char c = b[i];
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
                  c == '_'))
                return bad(out, "the ```undo block holds either nothing (undo the last "
                                "transaction) or one transaction id");
        }
        b += s;
        bl = e - s;
    }
    if (found == TP_SAVEPOINT || found == TP_ROLLBACK) {
        /* One savepoint name (rollback: or nothing, for the task's start). */
        size_t s = 0, e = bl;
        while (s < e && (b[s] == ' ' || b[s] == '\t' || b[s] == '\n' || b[s] == '\r'))
            s++;
        while (e > s && (b[e - 1] == ' ' || b[e - 1] == '\t' || b[e - 1] == '\n' || b[e - 1] == '\r'))
            e--;
        bool ok = e - s <= 64 && (e > s || found == TP_ROLLBACK) && (e == s || b[s] != '.');
        for (size_t i = s; ok && i < e; i++) {
            char c = b[i];
            ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
                 c == '_' || c == '.';
        }
        if (!ok)
            return bad(out, found == TP_SAVEPOINT
                                ? "the ```savepoint block holds one name: letters, digits, '.', '_', '-'"
                                : "the ```rollback block holds either nothing (back to the start of the "
                                  "task) or one savepoint name");
        b += s;
        bl = e - s;
    }
    out->kind = found;
    out->body = xmalloc(bl + 1);
    memcpy(out->body, b, bl);
    out->body[bl] = 0;
    return 0;
}

int agent_fuzz_textproto(const uint8_t *data, size_t size)
{
    tp_action a;
    int r = textproto_parse((const char *)data, size, &a);
    if (r == 0) {
        if (a.kind == TP_NONE || !a.body || strlen(a.body) > TP_MAX_BODY)
            abort();
        if (a.kind == TP_RUN && !*a.body)
            abort();
    } else if (!a.err[0] || a.body) {
        abort();
    }
    int k = r == 0 ? (int)a.kind : -1;
    tp_action_clear(&a);
    return k;
}
