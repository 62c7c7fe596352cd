/* Child txbox processes and the summaries of their results; see tools.h. */
#include "tools.h"
#include "../spawn.h"
#include "../words.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>

#define CHILD_OUT_CAP (8 * 1024 * 1024)
#define CHILD_ERR_CAP (64 * 1024)

extern char **environ;

void child_result_free(child_result *r)
{
    dbuf_free(&r->out);
    dbuf_free(&r->err);
}

char **env_without(const char *drop)
{
    size_t n = 0, dl = drop ? strlen(drop) : 0;
    while (environ[n])
        n++;
    char **e = xcalloc(n + 1, sizeof *e);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!drop || strncmp(environ[i], drop, dl) || environ[i][dl] != '=')
            e[k++] = environ[i];
    e[k] = NULL;
    return e;
}

void child_result_init(child_result *r)
{
    memset(r, 0, sizeof *r);
    dbuf_init(&r->out, CHILD_OUT_CAP);
    dbuf_init(&r->err, CHILD_ERR_CAP);
}

int run_self(char *const argv[], char *const envp[], const char *dir, double deadline_s,
             volatile sig_atomic_t *cancel, child_result *res, txbox_error *err)
{
    child_result_init(res);
    struct self_child ch;
    if (self_spawn(argv, envp, -1, dir, -1, &ch, err) < 0)
        return -1;
    pid_t pid = ch.pid;
    close(ch.pidfd); /* reaped with waitpid below */
    struct pollfd fds[2] = {{.fd = ch.out_fd, .events = POLLIN}, {.fd = ch.err_fd, .events = POLLIN}};
    dbuf *bufs[2] = {&res->out, &res->err};
    uint64_t t0 = now_ns(), term_at = 0;
    int open_fds = 2;
    char buf[65536];
    while (open_fds) {
        double el = (double)(now_ns() - t0) / 1e9;
        if (!term_at && ((deadline_s > 0 && el > deadline_s) || (cancel && *cancel))) {
            kill(pid, SIGTERM);
            res->killed = true;
            term_at = now_ns();
        } else if (term_at && now_ns() - term_at > 5000000000ull) {
            kill(pid, SIGKILL);
            term_at = UINT64_MAX / 2; /* sent; do not repeat */
        }
        int n = poll(fds, 2, 200);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t k = read(fds[i].fd, buf, sizeof buf);
            if (k > 0) {
                dbuf_add(bufs[i], buf, (size_t)k);
            } else if (k == 0 || (errno != EINTR && errno != EAGAIN)) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0)
            close(fds[i].fd);
    int st;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR)
            return tx_errno(err, errno, "waitpid");
    }
    res->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return 0;
}

char *normalize_command(const char *cmd)
{
    size_t n = strlen(cmd);
    char *o = xmalloc(n + 1);
    size_t k = 0;
    bool space = false;
    for (size_t i = 0; i < n; i++) {
        char c = cmd[i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
            space = k > 0;
            continue;
        }
        if (space)
            o[k++] = ' ';
        space = false;
        o[k++] = c;
    }
    while (k && (o[k - 1] == ';' || o[k - 1] == ' '))
        k--;
    o[k] = 0;
    return o;
}

const char *utf8_tail(const char *s, size_t len, size_t max, bool *cut)
{
    *cut = len > max;
    if (len <= max)
        return s;
    const char *p = s + len - max;
    while (*p && ((unsigned char)*p & 0xc0) == 0x80)
        p++;
    return p;
}

static json_t *paths(json_t *list, size_t max, size_t *more)
{
    json_t *a = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (i >= max) {
            *more += json_array_size(list) - max;
            break;
        }
        json_array_append(a, v);
    }
    return a;
}

static void tail_field(json_t *out, json_t *run, const char *name, size_t max)
{
    json_t *s = json_object_get(run, name);
    if (!json_is_string(s) || !json_string_length(s))
        return;
    bool cut;
    const char *t = utf8_tail(json_string_value(s), json_string_length(s), max, &cut);
    char key[40];
    json_object_set_new(out, name, json_string(t));
    json_t *trunc = json_object_get(run, strcmp(name, "stdout") ? "stderr_truncated" : "stdout_truncated");
    if (cut || json_is_true(trunc)) {
        snprintf(key, sizeof key, "%s_cut", name);
        json_object_set_new(out, key, json_string("the start is cut; this is the tail"));
    }
}

json_t *compact_run_result(json_t *run, size_t max_bytes, size_t max_paths, const char *mtx)
{
    json_t *o = json_object();
    words_ctx wc = {.front = WORDS_AGENT, .mtx = mtx};
    char *line = words_run_line(run, &wc);
    json_object_set_new(o, "line", json_string(line));
    free(line);
    const char *outcome = json_string_value(json_object_get(run, "outcome"));
    if (!outcome)
        outcome = "unknown";
    json_object_set_new(o, "outcome", json_string(outcome));
    json_t *tx = json_object_get(run, "tx");
    /* in the task's transaction the command's own id is no use to the
     * model, and could be taken for the transaction's */
    if (json_is_string(tx) && strcmp(outcome, "blocked") && !mtx)
        json_object_set(o, "tx", tx);
    if (!strcmp(outcome, "blocked")) {
        static const char *const keys[] = {"rule", "reason", "suggestion"};
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
            json_t *v = json_object_get(run, keys[i]);
            if (json_is_string(v))
                json_object_set(o, keys[i], v);
        }
        return o;
    }
    json_t *ec = json_object_get(run, "exit_code");
    if (json_is_integer(ec))
        json_object_set(o, "exit_code", ec);
    static const char *const facts[] = {"losses", "discarded"};
    for (size_t i = 0; i < ARRAY_SIZE(facts); i++) {
        json_t *v = json_object_get(run, facts[i]);
        if (json_integer_value(json_object_get(v, "count")) > 0)
            json_object_set(o, facts[i], v);
    }
    /* what processes an earlier command left running wrote, once done */
    json_t *late = json_object_get(run, "late_transactions");
    if (json_array_size(late))
        json_object_set(o, "late_transactions", late);
    json_t *ch = json_object_get(run, "changes");
    if ((!strcmp(outcome, "committed") || !strcmp(outcome, "staged")) && json_is_object(ch)) {
        json_t *c = json_object();
        size_t more = 0;
        static const char *const kinds[] = {"added", "modified", "deleted"};
        for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
            json_t *l = json_object_get(ch, kinds[i]);
            if (json_array_size(l))
                json_object_set_new(c, kinds[i], paths(l, max_paths, &more));
        }
        if (more)
            json_object_set_new(c, "more", json_integer((json_int_t)more));
        if (json_object_size(c))
            json_object_set_new(o, "changed", c);
        else
            json_decref(c);
    }
    /* What is left of the budget goes to the output tails, stdout first. */
    char *head = json_dumps(o, JSON_COMPACT);
    size_t used = head ? strlen(head) : 0;
    free(head);
    size_t room = max_bytes > used + 64 ? max_bytes - used - 64 : 64;
    size_t so = json_string_length(json_object_get(run, "stdout")),
           se = json_string_length(json_object_get(run, "stderr"));
    size_t e_max =
        se < room / 3 ? se : (room > so ? (room - so > room / 3 ? room - so : room / 3) : room / 3);
    size_t s_max = room > (se < e_max ? se : e_max) ? room - (se < e_max ? se : e_max) : 0;
    tail_field(o, run, "stdout", s_max);
    tail_field(o, run, "stderr", e_max);
    return o;
}

char *result_text(json_t *result)
{
    json_t *line = json_object_get(result, "line");
    if (!json_is_string(line)) {
        char *s = json_dumps(result, JSON_COMPACT);
        return s ? s : xstrdup("{}");
    }
    json_t *rest = json_copy(result);
    json_object_del(rest, "line");
    char *t = words_text(json_string_value(line), rest);
    json_decref(rest);
    return t;
}
