/* The agent loop: ask the model, carry out what it asks as transactions,
 * tell it the results, until it finishes or a budget or breaker ends the
 * run. Everything is recorded in WS/.txbox/agent/RUN-ID.json. */
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "../answer.h"
#include "../cmds.h"
#include "../resident.h"
#include "agent.h"
#include "textproto.h"
#include "tools.h"
#include "txbox_policy.h"

#define MAX_MISSES 3 /* consecutive replies without a valid action */
#define STUCK_WARN 2 /* the repeat that earns a warning */
#define STUCK_STOP 3 /* the repeat that ends the run */
#define MAX_CALLS_PER_REPLY 8
#define MAX_COMMAND (16 * 1024)
#define MAX_PATHS 20

static volatile sig_atomic_t cancelled;

static void on_signal(int sig)
{
    (void)sig;
    cancelled = 1;
}

typedef struct repeat {
    char *norm;
    char outcome[16];
    unsigned gen;
    int count;
    struct repeat *next;
} repeat;

typedef struct agent {
    const agent_cfg *cfg;
    llm_client *llm;
    agent_protocol proto;
    char *fallback; /* why the text protocol replaced tool calling */
    json_t *messages, *steps, *txs, *files, *undone, *by_outcome, *by_verdict;
    json_t *step_rec; /* the transcript record of the current step */
    int step, misses, commands, errors, http_requests, http_retries;
    long long prompt_tokens, completion_tokens, total_tokens;
    bool estimated, stream_seen;
    unsigned gen; /* bumped by every commit and undo */
    repeat *repeats;
    char run_id[48], started[32];
    int dirfd;       /* WS/.txbox/agent */
    char **env;      /* the children's environment: ours without the key */
    resident *res;   /* the workspace and policy kept open for run_command */
    char *sid;       /* the run's txbox session (docs/sessions.md), or NULL */
    char *mtx;       /* the task's transaction (NULL with --no-transaction) */
    json_t *tx_info; /* summary.transaction: how it ended */
    /* how it ended */
    const char *status;
    int exit_code;
    char *reason, *final_message;
} agent;

static void stop(agent *a, const char *status, int code, char *reason)
{
    if (a->status) {
        free(reason);
        return;
    }
    a->status = status;
    a->exit_code = code;
    a->reason = reason;
}

static void progress(agent *a, const char *fmt, ...) PRINTF(2, 3);
static void progress(agent *a, const char *fmt, ...)
{
    if (a->cfg->json || a->cfg->quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "txbox: step %d: ", a->step);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* s for a progress or summary line: control characters escaped (the model
 * wrote it; it must not drive the terminal), at most about 72 characters. */
static char *oneline(const char *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        abort();
    cli_print_clean(f, s, 72);
    fclose(f);
    return buf;
}

static void count(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    json_object_set_new(obj, key, json_integer(json_is_integer(v) ? json_integer_value(v) + 1 : 1));
}

/* Fold a committed transaction's changes into the run's net file list. */
static void merge_changes(agent *a, json_t *changes)
{
    static const char *const kinds[] = {"added", "modified", "deleted"};
    for (size_t k = 0; k < ARRAY_SIZE(kinds); k++) {
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(changes, kinds[k]), i, p)
        {
            const char *path = json_string_value(p);
            if (!path)
                continue;
            const char *prev = json_string_value(json_object_get(a->files, path));
            const char *now = kinds[k];
            if (prev && !strcmp(prev, "added") && !strcmp(now, "deleted")) {
                json_object_del(a->files, path);
                continue;
            }
            if (prev && !strcmp(prev, "added"))
                now = "added";
            else if (prev && !strcmp(prev, "deleted") && !strcmp(now, "added"))
                now = "modified";
            json_object_set_new(a->files, path, json_string(now));
        }
    }
}

static json_t *files_changed(agent *a)
{
    json_t *o = json_pack("{s:[],s:[],s:[]}", "added", "modified", "deleted");
    const char *path;
    json_t *kind;
    json_object_foreach(a->files, path, kind)
    {
        json_array_append_new(json_object_get(o, json_string_value(kind)), json_string(path));
    }
    return o;
}

/* ---- the summary and the transcript ---- */

static json_t *summary(agent *a)
{
    const agent_cfg *c = a->cfg;
    json_t *s = json_object();
    json_object_set_new(s, "run_id", json_string(a->run_id));
    json_object_set_new(s, "status", json_string(a->status ? a->status : "running"));
    json_object_set_new(s, "exit_code", json_integer(a->exit_code));
    json_object_set_new(s, "reason", a->reason ? json_string(a->reason) : json_null());
    json_object_set_new(s, "final_message", a->final_message ? json_string(a->final_message) : json_null());
    json_object_set_new(s, "steps", json_integer(a->step));
    json_object_set_new(s, "max_steps", json_integer(c->max_steps));
    json_object_set_new(s, "protocol", json_string(a->proto == PROTO_TEXT ? "text" : "tools"));
    if (a->fallback)
        json_object_set_new(s, "protocol_fallback", json_string(a->fallback));
    json_object_set_new(s, "stream", json_boolean(a->stream_seen));
    json_object_set_new(s, "model", json_string(c->model));
    json_object_set_new(s, "endpoint", json_string(c->endpoint));
    json_object_set_new(s, "tokens",
                        json_pack("{s:I,s:I,s:I,s:I,s:b}", "prompt", (json_int_t)a->prompt_tokens,
                                  "completion", (json_int_t)a->completion_tokens, "total",
                                  (json_int_t)a->total_tokens, "budget", (json_int_t)c->token_budget,
                                  "estimated", a->estimated));
    json_object_set_new(s, "commands",
                        json_pack("{s:i,s:O,s:O}", "total", a->commands, "by_outcome", a->by_outcome,
                                  "by_verdict", a->by_verdict));
    json_object_set_new(s, "files_changed", files_changed(a));
    json_object_set(s, "transaction", a->tx_info ? a->tx_info : json_null());
    json_object_set(s, "txs", a->txs);
    json_object_set(s, "undone", a->undone);
    json_object_set_new(s, "http",
                        json_pack("{s:i,s:i}", "requests", a->http_requests, "retries", a->http_retries));
    json_object_set_new(s, "transcript", json_sprintf(".txbox/agent/%s.json", a->run_id));
    return s;
}

static int write_transcript(agent *a, bool complete)
{
    if (a->dirfd < 0)
        return -1;
    const agent_cfg *c = a->cfg;
    json_t *t = json_object();
    json_object_set_new(t, "run_id", json_string(a->run_id));
    json_object_set_new(t, "complete", json_boolean(complete));
    json_object_set_new(t, "started", json_string(a->started));
    json_object_set_new(t, "workspace", json_string(c->ws));
    json_object_set_new(t, "endpoint", json_string(c->endpoint));
    json_object_set_new(t, "model", json_string(c->model));
    json_object_set_new(t, "task", json_string(c->task));
    json_object_set(t, "messages", a->messages);
    json_object_set(t, "steps", a->steps);
    json_object_set_new(t, "summary", summary(a));
    char *s = json_dumps(t, JSON_INDENT(1) | JSON_REAL_PRECISION(12));
    json_decref(t);
    if (!s)
        return -1;
    char tmp[80], fin[64];
    snprintf(tmp, sizeof tmp, "%s.json.tmp", a->run_id);
    snprintf(fin, sizeof fin, "%s.json", a->run_id);
    int fd = openat(a->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    int rc = -1;
    if (fd >= 0) {
        rc = write_all(fd, s, strlen(s));
        if (rc == 0)
            rc = write_all(fd, "\n", 1);
        if (close(fd) < 0)
            rc = -1;
        if (rc == 0)
            rc = renameat(a->dirfd, tmp, a->dirfd, fin);
    }
    free(s);
    if (rc < 0)
        fprintf(stderr, "txbox: warning: cannot write the transcript .txbox/agent/%s: %s\n", fin,
                strerror(errno));
    return rc;
}

/* ---- tools ---- */

static json_t *tool_error(const char *fmt, ...) PRINTF(1, 2);
static json_t *tool_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *m = NULL;
    if (vasprintf(&m, fmt, ap) < 0)
        abort();
    va_end(ap);
    json_t *o = json_pack("{s:s,s:s}", "outcome", "error", "error", m);
    free(m);
    return o;
}

/* A one-line reason from a failed child: its JSON error, else its stderr. */
static char *child_failure(child_result *cr, json_t *out)
{
    char line[301];
    const char *why = answer_why(out, dbuf_str(&cr->err), line, sizeof line);
    return *why ? xstrdup(why) : xasprintf("exit status %d, no message", cr->status);
}

static void stubborn_check(agent *a, const char *cmd, json_t *run, json_t *result)
{
    const char *outcome = json_string_value(json_object_get(run, "outcome"));
    bool blocked = outcome && !strcmp(outcome, "blocked");
    json_t *ec = json_object_get(run, "exit_code");
    bool failed_ro =
        outcome && !strcmp(outcome, "read_only") && json_is_integer(ec) && json_integer_value(ec) != 0;
    bool bad = blocked || failed_ro ||
               (outcome && (!strcmp(outcome, "rolled_back") || !strcmp(outcome, "timed_out")));
    char *norm = normalize_command(cmd);
    repeat **pp = &a->repeats, *r;
    for (r = *pp; r && strcmp(r->norm, norm); pp = &r->next, r = *pp)
        ;
    if (!bad) {
        if (r) {
            *pp = r->next;
            free(r->norm);
            free(r);
        }
        free(norm);
        return;
    }
    if (!r) {
        r = xcalloc(1, sizeof *r);
        r->norm = steal_pointer(&norm);
        r->next = a->repeats;
        a->repeats = r;
    }
    free(norm);
    /* A blocked command is blocked whatever the workspace holds; a failed
     * one only repeats itself if nothing was committed or undone since. */
    bool same = r->count && !strcmp(r->outcome, outcome) && (blocked || r->gen == a->gen);
    r->count = same ? r->count + 1 : 1;
    r->gen = a->gen;
    snprintf(r->outcome, sizeof r->outcome, "%s", outcome);
    if (r->count == STUCK_WARN) {
        char *w;
        if (blocked) {
            const char *rule = json_string_value(json_object_get(run, "rule"));
            const char *sug = json_string_value(json_object_get(run, "suggestion"));
            w = xasprintf("You sent this exact command before and it was blocked by rule %s. It "
                          "will be blocked every time: it never runs. Do not send it again, not "
                          "even reworded. %s%s",
                          rule ? rule : "(unnamed)", sug ? "Instead: " : "",
                          sug ? sug
                              : "Reach the goal another way, or call finish and say what you "
                                "could not do.");
        } else {
            w = xasprintf("You ran this exact command before and it failed the same way, and "
                          "nothing was committed since, so it will fail again. Read its error "
                          "output, change something first (fix the file it complains about, use "
                          "other arguments or another command), or call finish and explain what "
                          "is in the way. Sending it unchanged once more ends the run.");
        }
        json_object_set_new(result, "warning", json_string(w));
        free(w);
    } else if (r->count >= STUCK_STOP) {
        char *c1 = oneline(cmd);
        stop(a, "stuck", AGENT_EXIT_STUCK,
             xasprintf("the model sent the same %s command %d times, after a warning: %s",
                       blocked ? "blocked" : "failing", r->count, c1));
        free(c1);
    }
}

/* The run's txbox session, started before anything else runs (its start
 * forks), owned by this process: what one command leaves in /tmp, on the
 * loopback or (outside the task's transaction) in the background is there
 * for the next. Without it (it cannot start) each command is on its own. */
static void session_start(agent *a)
{
    txbox_ws *ws = NULL;
    txbox_policy *pol = NULL;
    txbox_session *ts = NULL;
    txbox_error err = {0};
    txbox_session_opts o = {.flags = TXBOX_SESSION_CREATE, .owner = getpid()};
    if (txbox_ws_open(a->cfg->ws, TXBOX_WS_CREATE, &ws, &err) == 0 &&
        txbox_policy_load(a->cfg->policy, txbox_ws_path(ws), &pol, &err) == 0) {
        o.policy = pol;
        if (txbox_session_open(ws, &o, &ts, &err) == 0)
            a->sid = xstrdup(txbox_session_id(ts));
    }
    if (!a->sid && !a->cfg->json)
        fprintf(stderr, "txbox: agent: warning: no session, each command runs on its own: %s\n", err.msg);
    txbox_session_close(ts);
    txbox_policy_free(pol);
    if (ws)
        txbox_ws_close(ws);
}

/* Ends the run's session: what still runs is killed, its /tmp dropped;
 * its report (NULL: none). */
static json_t *session_end(agent *a)
{
    if (!a->sid)
        return NULL;
    txbox_ws *ws = NULL;
    txbox_session *ts = NULL;
    txbox_error err = {0};
    txbox_session_opts o = {.id = a->sid};
    _cleanup_free_ char *rep = NULL;
    json_t *r = NULL;
    if (txbox_ws_open(a->cfg->ws, TXBOX_WS_CREATE | TXBOX_WS_NO_RECOVER, &ws, &err) == 0 &&
        txbox_session_open(ws, &o, &ts, &err) == 0 && txbox_session_end(ts, &rep, &err) == 0)
        r = rep ? json_loads(rep, 0, NULL) : NULL;
    else if (!a->cfg->json)
        fprintf(stderr, "txbox: agent: warning: session %s: %s\n", a->sid, err.msg);
    txbox_session_close(ts);
    if (ws)
        txbox_ws_close(ws);
    return r;
}

/* run_self for a `txbox run` command line (argv[1] "run"), run in this
 * process through rs (resident.h) when it can be, with the same result:
 * what the CLI would print and its exit status. The command gets envp as
 * its environment and an empty signal mask, as a child would; its
 * --timeout bounds it (deadline_s bounds a child only); *cancel rolls it
 * back. */
static int run_txbox(resident *rs, char *const argv[], char *const envp[], const char *dir, double deadline_s,
                     volatile sig_atomic_t *cancel, const char *session, child_result *res, txbox_error *err)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    struct run_args a = {0};
    /* run_parse may write to its arguments (domain names to lower case) */
    char **copy = xcalloc((size_t)argc + 1, sizeof *copy);
    for (int i = 0; i < argc; i++)
        copy[i] = xstrdup(argv[i]);
    bool here = rs && argc > 1 && !strcmp(argv[1], "run") && run_parse(argc - 1, copy + 1, &a) == -1 &&
                a.json && resident_can_run(rs, &a);
    int rc = 0;
    if (!here) {
        rc = run_self(argv, envp, dir, deadline_s, cancel, res, err);
    } else {
        /* in the task's transaction too (which the CLI's --session does
         * not take with --tx): its /tmp and loopback carry over, and what
         * a command starts ends with it */
        if (session && !a.session)
            a.session = session;
        child_result_init(res);
        /* what a child would have: envp as the environment (txbox_run
         * reads environ), no signal blocked */
        char **saved = environ;
        sigset_t none, old;
        sigemptyset(&none);
        pthread_sigmask(SIG_SETMASK, &none, &old);
        environ = (char **)envp;
        char *out = NULL, *errtext = NULL;
        res->status = resident_run(rs, &a, dir, 0, (volatile int *)cancel, &out, &errtext);
        environ = saved;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        res->killed = cancel && *cancel;
        dbuf_addstr(&res->out, out);
        dbuf_addstr(&res->err, errtext);
        free(out);
        free(errtext);
    }
    for (int i = 0; i < argc; i++)
        free(copy[i]);
    free(copy);
    return rc;
}

static json_t *do_run(agent *a, const char *cmd, json_t *action)
{
    const agent_cfg *c = a->cfg;
    if (!*cmd || strspn(cmd, " \t\r\n") == strlen(cmd))
        return tool_error("the command is empty");
    if (strlen(cmd) > MAX_COMMAND)
        return tool_error("the command is longer than %d bytes; write long files in several steps",
                          MAX_COMMAND);
    char tbuf[32];
    snprintf(tbuf, sizeof tbuf, "%g", c->command_timeout_s);
    const char *argv[16];
    size_t n = 0;
    argv[n++] = "txbox";
    argv[n++] = "run";
    argv[n++] = "--json";
    argv[n++] = "-C";
    argv[n++] = c->ws;
    argv[n++] = "--timeout";
    argv[n++] = tbuf;
    if (c->policy) {
        argv[n++] = "--policy";
        argv[n++] = c->policy;
    }
    if (a->mtx) {
        argv[n++] = "--tx";
        argv[n++] = a->mtx;
    } else if (a->sid) {
        argv[n++] = "--session";
        argv[n++] = a->sid;
    }
    argv[n++] = "-c";
    argv[n++] = cmd;
    argv[n] = NULL;
    a->commands++;
    child_result cr;
    txbox_error err = {0};
    char *c1 = oneline(cmd);
    if (run_txbox(a->res, (char *const *)argv, a->env, c->ws, c->command_timeout_s + 60, &cancelled, a->sid,
                  &cr, &err) < 0) {
        child_result_free(&cr);
        count(a->by_outcome, "error");
        a->errors++;
        progress(a, "run_command: %s -> error: %s", c1, err.msg);
        free(c1);
        return tool_error("txbox could not run the command: %s", err.msg);
    }
    json_t *run = answer_parse(cr.out.p ? cr.out.p : "", cr.out.len);
    json_t *result;
    if (!answer_is_run(run)) {
        char *why = child_failure(&cr, run);
        count(a->by_outcome, "error");
        a->errors++;
        json_object_set_new(action, "error", json_string(why));
        char *w = oneline(why);
        progress(a, "run_command: %s -> error: %s", c1, w);
        free(w);
        result = tool_error("txbox could not run the command: %s", why);
        free(why);
    } else {
        const char *outcome = json_string_value(json_object_get(run, "outcome"));
        const char *verdict = json_string_value(json_object_get(run, "verdict"));
        json_t *tx = json_object_get(run, "tx");
        count(a->by_outcome, outcome);
        count(a->by_verdict, verdict ? verdict : "unknown");
        json_t *rec = json_pack("{s:O?,s:s,s:s,s:s?,s:O?,s:O?}", "tx", tx, "command", cmd, "outcome", outcome,
                                "verdict", verdict, "rule", json_object_get(run, "rule"), "exit_code",
                                json_object_get(run, "exit_code"));
        json_array_append_new(a->txs, rec);
        if (!strcmp(outcome, "committed")) {
            merge_changes(a, json_object_get(run, "changes"));
            a->gen++;
        } else if (!strcmp(outcome, "staged")) {
            a->gen++; /* the transaction's view changed: a failed command may now pass */
        }
        static const char *const keep[] = {
            "tx",        "verdict", "rule",          "reason",           "suggestion",       "outcome",
            "exit_code", "changes", "conflict_path", "stdout_truncated", "stderr_truncated", "overhead_ms"};
        json_t *brief = json_object();
        for (size_t i = 0; i < ARRAY_SIZE(keep); i++) {
            json_t *v = json_object_get(run, keep[i]);
            if (v)
                json_object_set(brief, keep[i], v);
        }
        json_object_set_new(action, "run", brief);
        result = compact_run_result(run, c->result_bytes, MAX_PATHS, a->mtx);
        stubborn_check(a, cmd, run, result);
        progress(a, "run_command: %s -> %s%s%s%s", c1, outcome, json_is_string(tx) ? " (tx " : "",
                 json_is_string(tx) ? json_string_value(tx) : "", json_is_string(tx) ? ")" : "");
    }
    free(c1);
    json_decref(run);
    child_result_free(&cr);
    return result;
}

static json_t *do_undo(agent *a, const char *tx, json_t *action)
{
    const agent_cfg *c = a->cfg;
    const char *argv[8];
    size_t n = 0;
    argv[n++] = "txbox";
    argv[n++] = "undo";
    argv[n++] = "--json";
    argv[n++] = "-C";
    argv[n++] = c->ws;
    if (tx && *tx)
        argv[n++] = tx;
    argv[n] = NULL;
    child_result cr;
    txbox_error err = {0};
    if (run_self((char *const *)argv, a->env, c->ws, c->command_timeout_s + 60, &cancelled, &cr, &err) < 0) {
        child_result_free(&cr);
        progress(a, "undo -> error: %s", err.msg);
        return tool_error("undo failed: %s", err.msg);
    }
    json_t *out = answer_parse(cr.out.p ? cr.out.p : "", cr.out.len);
    json_t *result;
    const char *of = json_string_value(json_object_get(out, "undo_of"));
    if (json_is_object(out) && !json_object_get(out, "error") && cr.status == 0) {
        /* `txbox undo --json`: the undo is a transaction of its own. */
        result = compact_run_result(out, c->result_bytes, MAX_PATHS, NULL);
        json_object_set_new(result, "outcome", json_string("undone"));
        if (of)
            json_object_set_new(result, "undo_of", json_string(of));
        json_object_set_new(result, "line",
                            json_sprintf("undone: tx %s reverted, as tx %s", of ? of : "(the last)",
                                         json_string_value(json_object_get(out, "tx")) ?: "?"));
        merge_changes(a, json_object_get(out, "changes"));
        a->gen++;
        json_array_append_new(a->undone,
                              json_pack("{s:O?,s:s?}", "tx", json_object_get(out, "tx"), "undo_of", of));
        progress(a, "undo %s -> undone", of ? of : "(last)");
    } else if (json_is_object(out) && cr.status == TXBOX_EXIT_CONFLICT) {
        /* Refused: later transactions changed the same paths. */
        json_t *paths = json_array();
        size_t i;
        json_t *v;
        json_array_foreach(json_object_get(out, "conflicts"), i, v)
        {
            if (i < MAX_PATHS)
                json_array_append(paths, json_object_get(v, "path"));
        }
        result = json_pack("{s:s,s:s,s:s?,s:o}", "line",
                           "undo refused: later transactions changed the same paths, so nothing was "
                           "undone; undo those first, or change the files directly",
                           "outcome", "conflict", "undo_of", of, "paths", paths);
        progress(a, "undo %s -> refused (conflict)", of ? of : "(last)");
    } else {
        char *why = child_failure(&cr, out);
        char *w = oneline(why);
        progress(a, "undo -> error: %s", w);
        free(w);
        json_object_set_new(action, "error", json_string(why));
        result = tool_error("undo failed: %s", why);
        free(why);
    }
    if (json_is_object(out)) {
        static const char *const keep[] = {"tx", "undo_of", "outcome", "changes", "conflicts", "skipped"};
        json_t *brief = json_object();
        for (size_t i = 0; i < ARRAY_SIZE(keep); i++)
            if (json_object_get(out, keep[i]))
                json_object_set(brief, keep[i], json_object_get(out, keep[i]));
        json_object_set_new(action, "undo", brief);
    }
    json_decref(out);
    child_result_free(&cr);
    return result;
}

/* ---- the task's transaction ---- */

/* Runs `txbox SUB --json -C WS [extra...] -- ID [arg]` on the task's
 * transaction; *out: its JSON (NULL if none). Returns the exit status, or
 * -1 when it could not run (err set). */
static int tx_child(agent *a, const char *sub, const char *const *extra, const char *arg, bool cancellable,
                    json_t **out, child_result *cr, txbox_error *err)
{
    const agent_cfg *c = a->cfg;
    const char *argv[24];
    size_t n = 0;
    argv[n++] = "txbox";
    argv[n++] = sub;
    argv[n++] = "--json";
    argv[n++] = "-C";
    argv[n++] = c->ws;
    for (size_t i = 0; extra && extra[i] && n < 18; i++)
        argv[n++] = extra[i];
    if (a->mtx) {
        argv[n++] = "--";
        argv[n++] = a->mtx;
        if (arg)
            argv[n++] = arg;
    }
    argv[n] = NULL;
    *out = NULL;
    if (run_self((char *const *)argv, a->env, c->ws, c->command_timeout_s + 60,
                 cancellable ? &cancelled : NULL, cr, err) < 0)
        return -1;
    *out = answer_parse(cr->out.p ? cr->out.p : "", cr->out.len);
    return cr->status;
}

/* Opens the task's transaction (txbox begin). */
static int tx_begin(agent *a, txbox_error *err)
{
    char name[80];
    snprintf(name, sizeof name, "agent-%s", a->run_id);
    const char *extra[] = {"--name", name, NULL};
    child_result cr;
    json_t *out = NULL;
    int st = tx_child(a, "begin", extra, NULL, false, &out, &cr, err);
    int rc = 0;
    if (st < 0) {
        rc = -1;
    } else if (st != 0 || !json_is_string(json_object_get(out, "tx"))) {
        char *why = child_failure(&cr, out);
        rc = tx_err(err, EIO,
                    "cannot begin the task's transaction: %s (--no-transaction runs each "
                    "command as a transaction of its own)",
                    why);
        free(why);
    } else {
        a->mtx = xstrdup(json_string_value(json_object_get(out, "tx")));
        a->tx_info = json_pack("{s:s,s:s,s:s?}", "tx", a->mtx, "outcome", "open", "verify", a->cfg->verify);
    }
    json_decref(out);
    child_result_free(&cr);
    return rc;
}

static json_t *do_savepoint(agent *a, const char *sub, const char *name, json_t *action)
{
    if (!a->mtx)
        return tool_error("there is no %s here: each command is committed on its own (use undo)", sub);
    for (const char *p = name; p && *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '-' ||
              *p == '_' || *p == '.') ||
            strlen(name) > 64 || name[0] == '.')
            return tool_error("%s: '%s' is not a savepoint name (letters, digits, '.', '_', '-')", sub, name);
    if (!strcmp(sub, "savepoint") && (!name || !*name))
        return tool_error("savepoint needs {\"name\": \"...\"}");
    child_result cr;
    json_t *out = NULL;
    txbox_error err = {0};
    int st = tx_child(a, sub, NULL, name && *name ? name : NULL, true, &out, &cr, &err);
    json_t *result;
    if (st == 0 && json_is_object(out) && !json_object_get(out, "error")) {
        if (!strcmp(sub, "savepoint")) {
            result = json_pack("{s:s,s:s,s:s}", "outcome", "savepoint", "name", name, "line",
                               "savepoint marked; rollback with this name returns to it");
        } else {
            a->gen++;
            result = json_pack(
                "{s:s,s:s?,s:s}", "outcome", "rolled_back", "savepoint", name && *name ? name : NULL, "line",
                name && *name ? "rolled back: the changes staged since the savepoint were discarded"
                              : "rolled back: every change staged in the task was discarded");
        }
        progress(a, "%s %s -> ok", sub, name && *name ? name : "(start)");
    } else {
        char *why = st < 0 ? xstrdup(err.msg) : child_failure(&cr, out);
        char *w = oneline(why);
        progress(a, "%s -> error: %s", sub, w);
        free(w);
        json_object_set_new(action, "error", json_string(why));
        result = tool_error("%s failed: %s", sub, why);
        free(why);
    }
    json_decref(out);
    child_result_free(&cr);
    return result;
}

/* finish in a transaction: commit it (with the verify gate). Returns NULL
 * when the run ends (committed, conflict, error), else the result for the
 * model (the verify command failed: the transaction stays open). */
static json_t *tx_commit(agent *a, json_t *action)
{
    const agent_cfg *c = a->cfg;
    char tbuf[32];
    const char *extra[8];
    size_t n = 0;
    if (c->verify) {
        if (c->policy) {
            extra[n++] = "--policy";
            extra[n++] = c->policy;
        }
        extra[n++] = "--verify";
        extra[n++] = c->verify;
        snprintf(tbuf, sizeof tbuf, "%g", c->command_timeout_s);
        extra[n++] = "--timeout";
        extra[n++] = tbuf;
    }
    extra[n] = NULL;
    child_result cr;
    json_t *out = NULL;
    txbox_error err = {0};
    int st = tx_child(a, "commit", extra, NULL, true, &out, &cr, &err);
    const char *outcome = json_string_value(json_object_get(out, "outcome"));
    json_t *result = NULL;
    if (st >= 0 && outcome) {
        json_t *brief =
            json_pack("{s:s,s:O?,s:O?,s:O?}", "outcome", outcome, "changes", json_object_get(out, "changes"),
                      "conflict_paths", json_object_get(out, "conflict_paths"), "commit_ms",
                      json_object_get(out, "commit_ms"));
        json_t *v = json_object_get(out, "verify");
        if (v)
            json_object_set_new(brief, "verify",
                                json_pack("{s:O?,s:O?,s:O?}", "tx", json_object_get(v, "tx"), "outcome",
                                          json_object_get(v, "outcome"), "exit_code",
                                          json_object_get(v, "exit_code")));
        json_object_set_new(action, "commit", brief);
    }
    if (st < 0 || !outcome) {
        char *why = st < 0 ? xstrdup(err.msg) : child_failure(&cr, out);
        json_object_set_new(action, "error", json_string(why));
        json_object_set_new(a->tx_info, "error", json_string(why));
        stop(a, "txbox_error", TXBOX_EXIT_ERROR,
             xasprintf("the commit of the task's transaction failed: %s", why));
        free(why);
    } else if (!strcmp(outcome, "committed")) {
        merge_changes(a, json_object_get(out, "changes"));
        json_object_set_new(a->tx_info, "outcome", json_string("committed"));
        json_object_set(a->tx_info, "commands", json_object_get(out, "commands"));
        json_object_set(a->tx_info, "commit_ms", json_object_get(out, "commit_ms"));
        stop(a, "finished", AGENT_EXIT_FINISHED, xstrdup("the model called finish"));
        progress(a, "finish -> committed (tx %s)", a->mtx);
    } else if (!strcmp(outcome, "conflict")) {
        json_object_set_new(a->tx_info, "outcome", json_string("conflict"));
        json_object_set(a->tx_info, "conflict_paths", json_object_get(out, "conflict_paths"));
        json_t *paths = json_object_get(out, "conflict_paths");
        const char *p0 = json_string_value(json_array_get(paths, 0));
        char *pp = oneline(p0 ? p0 : "?");
        size_t more = json_array_size(paths) > 1 ? json_array_size(paths) - 1 : 0;
        char *and = more ? xasprintf(" (and %zu more paths)", more) : xstrdup("");
        stop(a, "conflict", AGENT_EXIT_CONFLICT,
             xasprintf("finish: another transaction changed %s%s since the task began; nothing was "
                       "applied, the changes are kept in .txbox/tx/%s/upper",
                       pp, and, a->mtx));
        free(and);
        free(pp);
        progress(a, "finish -> conflict (tx %s)", a->mtx);
    } else if (!strcmp(outcome, "held") || !strcmp(outcome, "rejected")) {
        /* A rule on effects judged the task's write set: the transaction
         * ended, nothing applied (held: pending txbox approve/reject). */
        bool held = !strcmp(outcome, "held");
        static const char *const k[] = {"effect_rule", "reason", "suggestion", "paths"};
        json_object_set_new(a->tx_info, "outcome", json_string(outcome));
        for (size_t i = 0; i < ARRAY_SIZE(k); i++)
            if (json_object_get(out, k[i]))
                json_object_set(a->tx_info, k[i], json_object_get(out, k[i]));
        char *rule = oneline(json_string_value(json_object_get(out, "effect_rule")) ?: "?");
        char *why = oneline(json_string_value(json_object_get(out, "reason")) ?: "");
        stop(a, held ? "held" : "rejected", held ? AGENT_EXIT_HELD : AGENT_EXIT_REJECTED,
             held ? xasprintf("finish: effect rule %s holds the task's changes for review (%s); nothing "
                              "is applied until 'txbox approve %s' ('txbox reject %s' drops them)",
                              rule, why, a->mtx, a->mtx)
                  : xasprintf("finish: effect rule %s refused the task's changes (%s); nothing was applied",
                              rule, why));
        free(rule);
        free(why);
        progress(a, "finish -> %s by effect rule (tx %s)", outcome, a->mtx);
    } else { /* verify_failed: the model may fix it */
        json_t *v = json_object_get(out, "verify");
        json_t *vr = compact_run_result(v, c->result_bytes, MAX_PATHS, NULL);
        result = json_pack(
            "{s:s,s:O?,s:s,s:O?}", "outcome", "not_committed", "verify_outcome",
            json_object_get(v, "outcome"), "line",
            "not committed: the check run at finish failed, so nothing was applied; your changes stay "
            "staged: fix the cause with run_command, then call finish again",
            "exit_code", json_object_get(v, "exit_code"));
        static const char *const k[] = {"stdout", "stdout_cut", "stderr", "stderr_cut", "rule", "reason"};
        for (size_t i = 0; i < ARRAY_SIZE(k); i++)
            if (json_object_get(vr, k[i]))
                json_object_set(result, k[i], json_object_get(vr, k[i]));
        json_decref(vr);
        count(a->tx_info, "verify_failures");
        free(a->final_message);
        a->final_message = NULL;
        progress(a, "finish -> not committed: the verify command failed (exit %lld)",
                 (long long)json_integer_value(json_object_get(v, "exit_code")));
    }
    json_decref(out);
    child_result_free(&cr);
    return result;
}

/* The run ended without a commit: drop the task's transaction. */
static void tx_abort_open(agent *a)
{
    if (!a->mtx || strcmp(json_string_value(json_object_get(a->tx_info, "outcome")) ?: "", "open"))
        return;
    child_result cr;
    json_t *out = NULL;
    txbox_error err = {0};
    int st = tx_child(a, "abort", NULL, NULL, false, &out, &cr, &err);
    if (st == 0 && json_is_object(out) && !json_object_get(out, "error")) {
        json_object_set_new(a->tx_info, "outcome", json_string("aborted"));
        if (!a->cfg->json && !a->cfg->quiet)
            fprintf(stderr,
                    "txbox: the task's transaction %s was aborted: nothing of it reached the workspace\n",
                    a->mtx);
    } else {
        char *why = st < 0 ? xstrdup(err.msg) : child_failure(&cr, out);
        json_object_set_new(a->tx_info, "error", json_string(why));
        fprintf(stderr,
                "txbox: warning: cannot abort the task's transaction %s: %s (nothing of it was "
                "applied; 'txbox abort %s' drops it)\n",
                a->mtx, why, a->mtx);
        free(why);
    }
    json_decref(out);
    child_result_free(&cr);
}

/* Carry out one action; returns the result for the model (NULL after finish). */
static json_t *act(agent *a, const char *name, json_t *args, json_t *action)
{
    if (!strcmp(name, "run_command")) {
        json_t *cmd = json_object_get(args, "command");
        if (!json_is_string(cmd))
            return tool_error("run_command needs {\"command\": \"...\"}");
        if (strlen(json_string_value(cmd)) != json_string_length(cmd))
            return tool_error("the command contains a NUL byte");
        return do_run(a, json_string_value(cmd), action);
    }
    if (!strcmp(name, "savepoint") || !strcmp(name, "rollback")) {
        json_t *nm = json_object_get(args, "name");
        if (nm && !json_is_null(nm) && !json_is_string(nm))
            return tool_error("%s takes {\"name\": \"...\"}", name);
        if (nm && json_is_string(nm) && strlen(json_string_value(nm)) != json_string_length(nm))
            return tool_error("the name contains a NUL byte");
        return do_savepoint(a, name, json_string_value(nm), action);
    }
    if (!strcmp(name, "undo") && a->mtx)
        return tool_error("nothing of this task is committed yet, so there is nothing to undo: use "
                          "rollback to discard staged changes");
    if (!strcmp(name, "undo")) {
        json_t *tx = json_object_get(args, "tx");
        if (tx && !json_is_null(tx) && !json_is_string(tx))
            return tool_error("undo takes {\"tx\": \"ID\"} or no arguments");
        const char *t = json_string_value(tx);
        for (const char *p = t; p && *p; p++)
            if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                  *p == '-' || *p == '_'))
                return tool_error("undo: '%s' is not a transaction id", t);
        return do_undo(a, t, action);
    }
    if (!strcmp(name, "finish")) {
        json_t *s = json_object_get(args, "summary");
        free(a->final_message);
        a->final_message = xstrdup(json_is_string(s) ? json_string_value(s) : "");
        if (a->mtx)
            return tx_commit(a, action);
        stop(a, "finished", AGENT_EXIT_FINISHED, xstrdup("the model called finish"));
        progress(a, "finish");
        return NULL;
    }
    if (a->mtx)
        return tool_error("there is no tool '%s'; the tools are run_command, savepoint, rollback and finish",
                          name);
    return tool_error("there is no tool '%s'; the tools are run_command, undo and finish", name);
}

static json_t *new_action(json_t *step_rec, const char *tool)
{
    json_t *act_rec = json_pack("{s:s}", "tool", tool);
    json_array_append_new(json_object_get(step_rec, "actions"), act_rec);
    return act_rec;
}

static void add_msg(agent *a, json_t *m) { json_array_append_new(a->messages, m); }

static void miss(agent *a, const char *why)
{
    a->misses++;
    progress(a, "no valid action: %s", why);
    if (a->misses >= MAX_MISSES)
        stop(a, "protocol", AGENT_EXIT_PROTOCOL,
             xasprintf("%d replies in a row without a valid action (last: %s)", a->misses, why));
}

static void handle_tools(agent *a, chat_reply *r)
{
    if (r->ncalls == 0) {
        miss(a, "no tool call");
        add_msg(a, json_pack("{s:s,s:s}", "role", "user", "content",
                             "You did not call a tool. To act, call run_command; when the task is "
                             "done, call finish with a short summary."));
        return;
    }
    bool valid = false;
    for (size_t i = 0; i < r->ncalls; i++) {
        char idb[32];
        const char *id = chat_call_id(r, i, idb);
        const char *name = dbuf_str(&r->calls[i].name);
        json_t *action = new_action(a->step_rec, name);
        json_object_set_new(action, "id", json_string(id));
        json_t *result;
        if (a->status) {
            result = tool_error("not run: the run had already ended");
        } else if (i >= MAX_CALLS_PER_REPLY) {
            result = tool_error("not run: at most %d tool calls per reply", MAX_CALLS_PER_REPLY);
        } else {
            json_error_t je;
            const char *txt = dbuf_str(&r->calls[i].args);
            json_t *args = r->calls[i].args.len ? json_loads(txt, 0, &je) : json_object();
            json_object_set_new(action, "arguments", json_string(txt));
            if (!json_is_object(args)) {
                result = tool_error(
                    "the arguments are not a JSON object%s%s%s", args ? "" : ": ", args ? "" : je.text,
                    !strcmp(r->finish_reason, "length") ? " (your reply was cut off at the length limit)"
                                                        : "");
            } else {
                valid = valid || !strcmp(name, "run_command") || !strcmp(name, "finish") ||
                        (a->mtx ? !strcmp(name, "savepoint") || !strcmp(name, "rollback")
                                : !strcmp(name, "undo"));
                result = act(a, name, args, action);
            }
            json_decref(args);
        }
        if (!result)
            continue; /* finish */
        json_object_set(action, "result", result);
        char *s = result_text(result);
        add_msg(a, json_pack("{s:s,s:s,s:s}", "role", "tool", "tool_call_id", id, "content", s ? s : "{}"));
        free(s);
        json_decref(result);
    }
    if (valid || a->status)
        a->misses = 0;
    else
        miss(a, "no valid tool call");
}

static void handle_text(agent *a, chat_reply *r)
{
    tp_action t;
    if (textproto_parse(r->content.p ? r->content.p : "", r->content.len, &t) < 0) {
        json_t *action = new_action(a->step_rec, "none");
        json_object_set_new(action, "error", json_string(t.err));
        miss(a, t.err);
        char *m = xasprintf("Your reply did not follow the protocol: %s.", t.err);
        add_msg(a, json_pack("{s:s,s:s}", "role", "user", "content", m));
        free(m);
        return;
    }
    a->misses = 0;
    json_t *action = new_action(a->step_rec, t.kind == TP_RUN ? "run_command" : tp_kind_name(t.kind));
    json_t *args = t.kind == TP_RUN    ? json_pack("{s:s}", "command", t.body)
                   : t.kind == TP_UNDO ? (*t.body ? json_pack("{s:s}", "tx", t.body) : json_object())
                   : t.kind == TP_SAVEPOINT || t.kind == TP_ROLLBACK
                       ? (*t.body ? json_pack("{s:s}", "name", t.body) : json_object())
                       : json_pack("{s:s}", "summary", t.body);
    json_object_set(action, "arguments", args);
    json_t *result = act(a, t.kind == TP_RUN ? "run_command" : tp_kind_name(t.kind), args, action);
    json_decref(args);
    tp_action_clear(&t);
    if (!result)
        return;
    json_object_set(action, "result", result);
    char *s = result_text(result);
    char *m = xasprintf("Result: %s", s ? s : "{}");
    add_msg(a, json_pack("{s:s,s:s}", "role", "user", "content", m));
    free(m);
    free(s);
    json_decref(result);
}

/* ---- one model turn ---- */

static char *request_body(agent *a)
{
    const agent_cfg *c = a->cfg;
    json_t *req = json_pack("{s:s,s:O,s:b}", "model", c->model, "messages", a->messages, "stream", c->stream);
    if (c->stream)
        json_object_set_new(req, "stream_options", json_pack("{s:b}", "include_usage", 1));
    if (a->proto == PROTO_TOOLS)
        json_object_set_new(req, "tools", agent_tool_defs(!c->per_command));
    if (c->temperature >= 0)
        json_object_set_new(req, "temperature", json_real(c->temperature));
    if (c->max_completion_tokens > 0)
        json_object_set_new(req, "max_tokens", json_integer(c->max_completion_tokens));
    char *s = json_dumps(req, JSON_COMPACT | JSON_REAL_PRECISION(6));
    json_decref(req);
    return s;
}

static bool mentions_tools(const char *msg)
{
    for (const char *p = msg; *p; p++)
        if (!strncasecmp(p, "tool", 4) || !strncasecmp(p, "function", 8))
            return true;
    return false;
}

static void set_system_prompt(agent *a)
{
    char *p = agent_system_prompt(a->proto, !a->cfg->per_command, a->cfg->verify);
    json_array_set_new(a->messages, 0, json_pack("{s:s,s:s}", "role", "system", "content", p));
    free(p);
}

static void turn(agent *a)
{
    a->step++;
    a->step_rec = json_pack("{s:i,s:[]}", "step", a->step, "actions");
    json_array_append_new(a->steps, a->step_rec);
    char *body = request_body(a);
    chat_reply r;
    llm_call call;
    txbox_error err = {0};
    int rc = llm_complete(a->llm, body, &r, &call, &err);
    a->http_requests += call.attempts;
    a->http_retries += call.attempts > 0 ? call.attempts - 1 : 0;
    a->stream_seen = a->stream_seen || call.streamed;
    json_object_set_new(a->step_rec, "http", call.log);
    if (rc < 0) {
        json_object_set_new(a->step_rec, "error", json_string(err.msg));
        if (call.fail == LLM_REJECTED && a->cfg->protocol == PROTO_AUTO && a->proto == PROTO_TOOLS &&
            !a->fallback && call.status >= 400 && call.status < 500 && mentions_tools(err.msg)) {
            /* The server does not do tool calling: switch to the text
             * protocol and ask again (this turn does not count). */
            a->fallback = xasprintf("the endpoint refused tool calling: %s", err.msg);
            a->proto = PROTO_TEXT;
            set_system_prompt(a);
            json_object_set_new(a->step_rec, "protocol_fallback", json_string("text"));
            if (!a->cfg->json && !a->cfg->quiet)
                fprintf(stderr, "txbox: the endpoint refused tool calling; using the text protocol\n");
            a->step--;
        } else if (call.fail == LLM_CANCELLED) {
            stop(a, "interrupted", AGENT_EXIT_INTERRUPTED, xstrdup("interrupted by a signal"));
        } else {
            stop(a, "endpoint_error", AGENT_EXIT_ENDPOINT, xstrdup(err.msg));
        }
        chat_reply_free(&r);
        free(body);
        return;
    }
    if (r.have_usage) {
        a->prompt_tokens += r.prompt_tokens;
        a->completion_tokens += r.completion_tokens;
        a->total_tokens += r.total_tokens;
        json_object_set_new(a->step_rec, "usage",
                            json_pack("{s:I,s:I,s:I}", "prompt", r.prompt_tokens, "completion",
                                      r.completion_tokens, "total", r.total_tokens));
    } else {
        /* No usage from the server: about four bytes per token. */
        size_t bytes = strlen(body) + r.content.len;
        for (size_t i = 0; i < r.ncalls; i++)
            bytes += r.calls[i].args.len + r.calls[i].name.len;
        long long est = (long long)(bytes + 3) / 4;
        a->prompt_tokens += (long long)strlen(body) / 4;
        a->completion_tokens += est - (long long)strlen(body) / 4;
        a->total_tokens += est;
        a->estimated = true;
    }
    free(body);
    json_object_set_new(a->step_rec, "finish_reason", json_string(r.finish_reason));
    add_msg(a, a->proto == PROTO_TOOLS ? chat_reply_message(&r)
                                       : json_pack("{s:s,s:s%}", "role", "assistant", "content",
                                                   r.content.p ? r.content.p : "", r.content.len));
    if (a->proto == PROTO_TOOLS)
        handle_tools(a, &r);
    else
        handle_text(a, &r);
    chat_reply_free(&r);
}

/* ---- setup ---- */

static int open_agent_dir(const char *ws, txbox_error *err)
{
    /* txbox_ws_open creates .txbox/ the way every txbox command does. */
    txbox_ws *w = NULL;
    if (txbox_ws_open(ws, TXBOX_WS_CREATE | TXBOX_WS_NO_RECOVER, &w, err) < 0)
        return -1;
    txbox_ws_close(w);
    _cleanup_close_ int wfd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (wfd < 0)
        return tx_errno(err, errno, "workspace %s", ws);
    _cleanup_close_ int sfd = openat(wfd, ".txbox", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0)
        return tx_errno(err, errno, "%s/.txbox", ws);
    if (mkdirat(sfd, "agent", 0700) < 0 && errno != EEXIST)
        return tx_errno(err, errno, "cannot create %s/.txbox/agent", ws);
    int fd = openat(sfd, "agent", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return tx_errno(err, errno, "%s/.txbox/agent", ws);
    return fd;
}

static void make_run_id(agent *a)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char ts[24];
    strftime(ts, sizeof ts, "%Y%m%dT%H%M%SZ", &tm);
    strftime(a->started, sizeof a->started, "%Y-%m-%dT%H:%M:%SZ", &tm);
    unsigned char rnd[3] = {0};
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        uint64_t t = now_ns();
        memcpy(rnd, &t, sizeof rnd);
    }
    snprintf(a->run_id, sizeof a->run_id, "%s-%02x%02x%02x", ts, rnd[0], rnd[1], rnd[2]);
}

static void print_human(agent *a, json_t *s)
{
    json_t *bo = a->by_outcome;
    printf("txbox agent: %s after %d step%s: ", a->status, a->step, a->step == 1 ? "" : "s");
    cli_print_clean(stdout, a->reason, 0);
    putchar('\n');
    printf("  commands: %d", a->commands);
    const char *k;
    json_t *v;
    bool first = true;
    json_object_foreach(bo, k, v)
    {
        if (json_integer_value(v)) {
            printf("%s%lld %s", first ? " (" : ", ", (long long)json_integer_value(v), k);
            first = false;
        }
    }
    printf("%s\n", first ? "" : ")");
    json_t *fc = json_object_get(s, "files_changed");
    static const char *const kinds[] = {"added", "modified", "deleted"};
    static const char marks[] = "+~-";
    size_t total = 0;
    for (size_t i = 0; i < 3; i++)
        total += json_array_size(json_object_get(fc, kinds[i]));
    printf("  files changed: %zu", total);
    size_t shown = 0;
    for (size_t i = 0; i < 3; i++) {
        size_t j;
        json_array_foreach(json_object_get(fc, kinds[i]), j, v)
        {
            if (shown++ < 12) {
                printf(" %c", marks[i]);
                cli_print_clean(stdout, json_string_value(v), 0);
            }
        }
    }
    printf("%s\n", shown > 12 ? " ..." : "");
    if (a->mtx) {
        const char *o = json_string_value(json_object_get(a->tx_info, "outcome"));
        printf("  transaction %s: %s%s\n", a->mtx, o ? o : "?",
               o && !strcmp(o, "committed")  ? " (the task's changes are in the workspace)"
               : o && !strcmp(o, "aborted")  ? " (nothing of the task reached the workspace)"
               : o && !strcmp(o, "conflict") ? " (nothing applied; changes kept aside)"
                                             : "");
    }
    if (a->final_message) {
        fputs("  summary: ", stdout);
        cli_print_clean(stdout, a->final_message, 0);
        putchar('\n');
    }
    printf("  tokens: %lld%s; transcript: %s/.txbox/agent/%s.json\n", a->total_tokens,
           a->estimated ? " (estimated)" : "", a->cfg->ws, a->run_id);
}

int agent_run(const agent_cfg *cfg)
{
    agent a = {.cfg = cfg, .dirfd = -1, .exit_code = 0};
    txbox_error err = {0};
    a.dirfd = open_agent_dir(cfg->ws, &err);
    if (a.dirfd < 0) {
        return cfg->json ? cli_fail_json(&err) : cli_fail(&err);
    }
    llm_cfg lc = cfg->llm;
    lc.cancel = &cancelled;
    if (llm_client_new(&lc, &a.llm, &err) < 0) {
        close(a.dirfd);
        return cfg->json ? cli_fail_json(&err) : cli_fail(&err);
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    make_run_id(&a);
    a.env = env_without(cfg->api_key_env);
    a.res = resident_new(cfg->ws, cfg->policy);
    session_start(&a);
    a.proto = cfg->protocol == PROTO_TEXT ? PROTO_TEXT : PROTO_TOOLS;
    a.messages = json_array();
    a.steps = json_array();
    a.txs = json_array();
    a.files = json_object();
    a.undone = json_array();
    a.by_outcome = json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "committed", 0, "rolled_back", 0, "blocked", 0,
                             "read_only", 0, "conflict", 0, "timed_out", 0, "error", 0);
    if (!cfg->per_command)
        json_object_set_new(a.by_outcome, "staged", json_integer(0));
    a.by_verdict = json_pack("{s:i,s:i,s:i}", "safe", 0, "unsafe", 0, "uncertain", 0);
    json_array_append_new(a.messages, json_null());
    set_system_prompt(&a);
    add_msg(&a, json_pack("{s:s,s:s}", "role", "user", "content", cfg->task));
    if (!cfg->per_command && tx_begin(&a, &err) < 0) {
        stop(&a, "txbox_error", TXBOX_EXIT_ERROR, xstrdup(err.msg));
        if (!cfg->json)
            fprintf(stderr, "txbox: agent: %s\n", err.msg);
    }
    write_transcript(&a, false);

    while (!a.status) {
        if (cancelled) {
            stop(&a, "interrupted", AGENT_EXIT_INTERRUPTED, xstrdup("interrupted by a signal"));
            break;
        }
        if (a.step >= cfg->max_steps) {
            stop(&a, "max_steps", AGENT_EXIT_MAX_STEPS,
                 xasprintf("the step budget (%d model turns) ran out", cfg->max_steps));
            break;
        }
        if (a.total_tokens >= cfg->token_budget) {
            stop(&a, "token_budget", AGENT_EXIT_TOKENS,
                 xasprintf("the token budget (%lld) ran out: %lld used", cfg->token_budget, a.total_tokens));
            break;
        }
        turn(&a);
        if (!a.status && cancelled)
            stop(&a, "interrupted", AGENT_EXIT_INTERRUPTED, xstrdup("interrupted by a signal"));
        write_transcript(&a, false);
    }
    tx_abort_open(&a); /* ended without a commit: nothing of the task is applied */
    json_t *sess_report = session_end(&a);
    write_transcript(&a, true);
    json_t *s = summary(&a);
    if (sess_report)
        json_object_set_new(s, "session", sess_report);
    if (cfg->json) {
        char *out = json_dumps(s, JSON_COMPACT | JSON_REAL_PRECISION(12));
        printf("%s\n", out ? out : "{}");
        free(out);
    } else {
        print_human(&a, s);
    }
    fflush(stdout);
    json_decref(s);
    int code = a.exit_code;
    llm_client_free(a.llm);
    close(a.dirfd);
    json_decref(a.messages);
    json_decref(a.steps);
    json_decref(a.txs);
    json_decref(a.files);
    json_decref(a.undone);
    json_decref(a.by_outcome);
    json_decref(a.by_verdict);
    free(a.env);
    resident_free(a.res);
    free(a.sid);
    free(a.mtx);
    json_decref(a.tx_info);
    free(a.fallback);
    free(a.reason);
    free(a.final_message);
    while (a.repeats) {
        repeat *r = a.repeats;
        a.repeats = r->next;
        free(r->norm);
        free(r);
    }
    return code;
}
