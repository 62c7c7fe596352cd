/* Unit tests of the agent's parsers and helpers: SSE, the text protocol,
 * chat completion replies (whole and streamed), the endpoint URL, command
 * normalization and result summaries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "chat.h"
#include "client.h"
#include "sse.h"
#include "textproto.h"
#include "tools.h"
#include "../../src/words.h"

/* ---- SSE ---- */

typedef struct events {
    dbuf log; /* "event|data\n" per event */
    int n;
    int fail_at; /* make the callback fail at this event (1-based), 0 never */
} events;

static int record(void *ctx, const char *event, const char *data, size_t len, txbox_error *err)
{
    events *e = ctx;
    e->n++;
    if (e->fail_at && e->n == e->fail_at)
        return tx_err(err, EINVAL, "callback says no");
    dbuf_addstr(&e->log, event);
    dbuf_addstr(&e->log, "|");
    dbuf_add(&e->log, data, len);
    dbuf_addstr(&e->log, "\n");
    return 0;
}

/* Parse s fed in pieces of `step` bytes; returns the log (caller frees) or NULL on error. */
static char *sse_run(const char *s, size_t len, size_t step, size_t max_line, size_t max_data)
{
    events e = {0};
    dbuf_init(&e.log, 0);
    sse_parser p;
    sse_init(&p, max_line, max_data, record, &e);
    txbox_error err = {0};
    int rc = 0;
    for (size_t off = 0; off < len && rc == 0; off += step)
        rc = sse_feed(&p, s + off, len - off < step ? len - off : step, &err);
    sse_free(&p);
    if (rc < 0) {
        dbuf_free(&e.log);
        return NULL;
    }
    char *out = xstrdup(dbuf_str(&e.log));
    dbuf_free(&e.log);
    return out;
}

static void test_sse_every_split(void **state)
{
    (void)state;
    static const char in[] = "\xef\xbb\xbf"
                             "data: a\r\n\r\n"
                             "event: ev\ndata: x\ndata:y\n\n"
                             ": comment\n\n"
                             "data\n\n"
                             "id: 3\nretry: 10\nfoo: bar\ndata:  two spaces\r\r"
                             "data: last\n";
    const char *want = "message|a\nev|x\ny\nmessage|\nmessage| two spaces\n";
    for (size_t step = 1; step <= sizeof in; step++) {
        char *got = sse_run(in, sizeof in - 1, step, 1024, 1024);
        assert_non_null(got);
        assert_string_equal(got, want); /* "last" has no blank line: discarded */
        free(got);
    }
}

static void test_sse_cr_lf_across_chunks(void **state)
{
    (void)state;
    /* CR ends one chunk, LF starts the next: one line end, not two. */
    events e = {0};
    dbuf_init(&e.log, 0);
    sse_parser p;
    sse_init(&p, 64, 64, record, &e);
    txbox_error err = {0};
    assert_int_equal(sse_feed(&p, "data: a\r", 8, &err), 0);
    assert_int_equal(sse_feed(&p, "\ndata: b\r", 9, &err), 0);
    assert_int_equal(sse_feed(&p, "\n\r\n", 3, &err), 0);
    assert_string_equal(dbuf_str(&e.log), "message|a\nb\n");
    sse_free(&p);
    dbuf_free(&e.log);
}

static void test_sse_caps(void **state)
{
    (void)state;
    char line[40];
    memset(line, 'x', sizeof line);
    memcpy(line, "data: ", 6);
    /* a line of exactly max_line bytes passes; one more byte fails */
    char buf[64];
    memcpy(buf, line, 32);
    memcpy(buf + 32, "\n\n", 2);
    char *ok = sse_run(buf, 34, 5, 32, 1024);
    assert_non_null(ok);
    free(ok);
    memcpy(buf, line, 33);
    memcpy(buf + 33, "\n\n", 2);
    assert_null(sse_run(buf, 35, 5, 32, 1024));
    /* data cap: three lines of 10 bytes exceed 25 */
    static const char d[] = "data: 0123456789\ndata: 0123456789\ndata: 0123456789\n\n";
    assert_null(sse_run(d, sizeof d - 1, 3, 100, 25));
    char *big = sse_run(d, sizeof d - 1, 3, 100, 32);
    assert_non_null(big);
    free(big);
    /* an endless line without a line end fails at the cap too */
    char flood[5000];
    memset(flood, 'a', sizeof flood);
    assert_null(sse_run(flood, sizeof flood, 100, 4096, 4096));
}

static void test_sse_callback_error(void **state)
{
    (void)state;
    events e = {.fail_at = 2};
    dbuf_init(&e.log, 0);
    sse_parser p;
    sse_init(&p, 64, 64, record, &e);
    txbox_error err = {0};
    assert_int_equal(sse_feed(&p, "data: 1\n\ndata: 2\n\ndata: 3\n\n", 27, &err), -1);
    assert_string_equal(err.msg, "callback says no");
    assert_int_equal(e.n, 2);
    assert_int_equal(sse_feed(&p, "data: 4\n\n", 9, &err), -1); /* stays failed */
    sse_free(&p);
    dbuf_free(&e.log);
}

/* ---- text protocol ---- */

static tp_kind tp(const char *s, const char **body_or_err, tp_action *a)
{
    int r = textproto_parse(s, strlen(s), a);
    *body_or_err = r == 0 ? a->body : a->err;
    return r == 0 ? a->kind : TP_NONE;
}

static void test_textproto(void **state)
{
    (void)state;
    tp_action a;
    const char *b;
    assert_int_equal(tp("Listing.\n\n```run\nls -la\n```\n", &b, &a), TP_RUN);
    assert_string_equal(b, "ls -la");
    tp_action_clear(&a);
    assert_int_equal(tp("```run\ncat > f <<'E'\nx\nE\n```", &b, &a), TP_RUN);
    assert_string_equal(b, "cat > f <<'E'\nx\nE");
    tp_action_clear(&a);
    assert_int_equal(tp("```run\r\necho hi\r\n```\r\n", &b, &a), TP_RUN);
    assert_string_equal(b, "echo hi");
    tp_action_clear(&a);
    assert_int_equal(tp("   ```run  \nls\n   ```  ", &b, &a), TP_RUN);
    assert_string_equal(b, "ls");
    tp_action_clear(&a);
    /* other fences are prose, even when an action word hides inside */
    assert_int_equal(tp("```bash\n```run\nrm -rf /\n```\n```finish\nok\n```", &b, &a), TP_FINISH);
    assert_string_equal(b, "ok");
    tp_action_clear(&a);
    assert_int_equal(tp("```undo\n```", &b, &a), TP_UNDO);
    assert_string_equal(b, "");
    tp_action_clear(&a);
    assert_int_equal(tp("```undo\n 17 \n```", &b, &a), TP_UNDO);
    assert_string_equal(b, "17");
    tp_action_clear(&a);
    assert_int_equal(tp("```finish\n```", &b, &a), TP_FINISH);
    assert_string_equal(b, "");
    tp_action_clear(&a);
    /* the task's transaction: savepoint NAME, rollback [NAME] */
    assert_int_equal(tp("```savepoint\n before-edit.1 \n```", &b, &a), TP_SAVEPOINT);
    assert_string_equal(b, "before-edit.1");
    tp_action_clear(&a);
    assert_int_equal(tp("```rollback\n```", &b, &a), TP_ROLLBACK);
    assert_string_equal(b, "");
    tp_action_clear(&a);
    assert_int_equal(tp("```rollback\nbefore-edit.1\n```", &b, &a), TP_ROLLBACK);
    assert_string_equal(b, "before-edit.1");
    tp_action_clear(&a);
    assert_int_equal(tp("```savepoint\n```", &b, &a), TP_NONE); /* a savepoint needs a name */
    assert_non_null(strstr(b, "one name"));
    assert_int_equal(tp("```savepoint\n.hidden\n```", &b, &a), TP_NONE);
    assert_int_equal(tp("```rollback\na b\n```", &b, &a), TP_NONE);
    assert_non_null(strstr(b, "savepoint name"));
    /* errors, each with words for the model */
    assert_int_equal(tp("```run\nls\n```\n```run\npwd\n```", &b, &a), TP_NONE);
    assert_non_null(strstr(b, "2 action blocks"));
    assert_int_equal(tp("nothing to do", &b, &a), TP_NONE);
    assert_non_null(strstr(b, "no action block"));
    assert_int_equal(tp("```run\nls\n", &b, &a), TP_NONE);
    assert_non_null(strstr(b, "not closed"));
    assert_int_equal(tp("```run\n  \n```", &b, &a), TP_NONE);
    assert_non_null(strstr(b, "empty"));
    assert_int_equal(tp("```undo\nrm -rf /\n```", &b, &a), TP_NONE);
    assert_non_null(strstr(b, "transaction id"));
    assert_int_equal(tp("    ```run\nls\n    ```", &b, &a), TP_NONE); /* 4 spaces: not a fence */
    assert_int_equal(tp("```Run\nls\n```", &b, &a), TP_NONE);         /* strict spelling */
    assert_int_equal(tp("```run ls\nls\n```", &b, &a), TP_NONE);
    assert_int_equal(textproto_parse("```run\nl\0s\n```", 14, &a), -1);
    assert_non_null(strstr(a.err, "NUL"));
    /* the cap */
    static char big[TP_MAX_BODY + 64];
    size_t n = TP_MAX_BODY + 20;
    memcpy(big, "```run\n", 7);
    memset(big + 7, 'a', n - 7);
    memcpy(big + n, "\n```", 5);
    assert_int_equal(textproto_parse(big, strlen(big), &a), -1);
    assert_non_null(strstr(a.err, "longer than"));
}

/* ---- chat replies ---- */

static void test_chat_whole(void **state)
{
    (void)state;
    chat_reply r;
    txbox_error err = {0};
    static const char ok[] =
        "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"hi\","
        "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"run_command\","
        "\"arguments\":\"{\\\"command\\\":\\\"ls\\\"}\"}},{\"type\":\"function\",\"function\":"
        "{\"name\":\"finish\",\"arguments\":{\"summary\":\"x\"}}}]},\"finish_reason\":\"tool_calls\"}],"
        "\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}";
    chat_reply_init(&r, 1024, 1024);
    assert_int_equal(chat_parse_response(ok, sizeof ok - 1, &r, &err), 0);
    assert_string_equal(dbuf_str(&r.content), "hi");
    assert_int_equal(r.ncalls, 2);
    assert_string_equal(dbuf_str(&r.calls[0].name), "run_command");
    assert_string_equal(dbuf_str(&r.calls[0].args), "{\"command\":\"ls\"}");
    assert_string_equal(dbuf_str(&r.calls[1].args), "{\"summary\":\"x\"}");
    char idb[32];
    assert_string_equal(chat_call_id(&r, 0, idb), "c1");
    assert_string_equal(chat_call_id(&r, 1, idb), "call_1");
    assert_true(r.have_usage);
    assert_int_equal(r.total_tokens, 7);
    assert_string_equal(r.finish_reason, "tool_calls");
    json_t *m = chat_reply_message(&r);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(m, "tool_calls"), 1), "id")),
        "call_1");
    json_decref(m);
    chat_reply_free(&r);

    static const struct {
        const char *body, *msg;
    } bad[] = {
        {"{\"choices\":[{\"message\":", "malformed JSON"},
        {"[1,2]", "not a JSON object"},
        {"{\"object\":\"list\",\"data\":[]}", "no choices"},
        {"{\"choices\":[]}", "empty choices"},
        {"{\"choices\":[{\"index\":0,\"text\":\"hi\"}]}", "text completion"},
        {"{\"error\":{\"message\":\"model not loaded\"}}", "model not loaded"},
        {"{\"object\":\"error\",\"message\":\"bad\\nthing\"}", "bad thing"},
        {"{\"choices\":[{\"message\":{\"content\":5}}]}", "neither a string"},
        {"{\"choices\":[{\"message\":{\"tool_calls\":[{\"function\":{}}]}}]}", "no function name"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        chat_reply_init(&r, 1024, 1024);
        assert_int_equal(chat_parse_response(bad[i].body, strlen(bad[i].body), &r, &err), -1);
        if (!strstr(err.msg, bad[i].msg))
            fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, bad[i].msg);
        chat_reply_free(&r);
    }
    /* content cap */
    chat_reply_init(&r, 3, 1024);
    static const char four[] = "{\"choices\":[{\"message\":{\"content\":\"abcd\"}}]}";
    assert_int_equal(chat_parse_response(four, sizeof four - 1, &r, &err), -1);
    assert_non_null(strstr(err.msg, "exceeds 3 bytes"));
    chat_reply_free(&r);
}

static int feed_chunk(chat_reply *r, const char *data, txbox_error *err)
{
    return chat_stream_event(r, "message", data, strlen(data), err);
}

static void test_chat_stream(void **state)
{
    (void)state;
    chat_reply r;
    txbox_error err = {0};
    chat_reply_init(&r, 1024, 1024);
    assert_int_equal(
        feed_chunk(&r, "{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}",
                   &err),
        0);
    assert_int_equal(
        feed_chunk(
            &r,
            "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\",\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"type\":\"function\",\"function\":{\"name\":\"run_\",\"arguments\":\"\"}}]}}]}",
            &err),
        0);
    assert_int_equal(
        feed_chunk(
            &r,
            "{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"command\",\"arguments\":\"{\\\"command\\\":\"}}]}}]}",
            &err),
        0);
    assert_int_equal(
        feed_chunk(
            &r,
            "{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"ls\\\"}\"}}]}}]}",
            &err),
        0);
    /* Ollama: a new id at index 0 is a second call */
    assert_int_equal(
        feed_chunk(
            &r,
            "{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"b\",\"function\":{\"name\":\"finish\",\"arguments\":\"{}\"}}]}}]}",
            &err),
        0);
    assert_int_equal(
        feed_chunk(&r, "{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}", &err),
        0);
    assert_int_equal(
        feed_chunk(
            &r, "{\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,\"total_tokens\":7}}",
            &err),
        0);
    assert_int_equal(feed_chunk(&r, "[DONE]", &err), 0);
    assert_int_equal(feed_chunk(&r, "{not even json", &err), 0); /* after [DONE]: ignored */
    assert_int_equal(chat_stream_end(&r, &err), 0);
    assert_string_equal(dbuf_str(&r.content), "Hello");
    assert_int_equal(r.ncalls, 2);
    assert_string_equal(dbuf_str(&r.calls[0].name), "run_command");
    assert_string_equal(dbuf_str(&r.calls[0].args), "{\"command\":\"ls\"}");
    assert_string_equal(r.calls[1].id, "b");
    assert_string_equal(dbuf_str(&r.calls[1].name), "finish");
    assert_int_equal(r.total_tokens, 7);
    chat_reply_free(&r);

    /* incomplete and broken streams */
    chat_reply_init(&r, 1024, 1024);
    assert_int_equal(feed_chunk(&r, "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}", &err), 0);
    assert_int_equal(chat_stream_end(&r, &err), -1);
    assert_non_null(strstr(err.msg, "ended early"));
    chat_reply_free(&r);
    chat_reply_init(&r, 1024, 1024);
    assert_int_equal(chat_stream_end(&r, &err), -1);
    assert_non_null(strstr(err.msg, "without any event"));
    chat_reply_free(&r);
    chat_reply_init(&r, 1024, 1024);
    assert_int_equal(feed_chunk(&r, "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":16}]}}]}", &err),
                     -1);
    assert_non_null(strstr(err.msg, "out of range"));
    chat_reply_free(&r);
    chat_reply_init(&r, 1024, 1024);
    assert_int_equal(feed_chunk(&r, "{\"id\":\"x\"}", &err), -1);
    assert_non_null(strstr(err.msg, "no choices"));
    chat_reply_free(&r);
    chat_reply_init(&r, 1024, 1024);
    assert_int_equal(chat_stream_event(&r, "error", "{\"error\":{\"message\":\"boom\"}}", 28, &err), -1);
    assert_non_null(strstr(err.msg, "boom"));
    chat_reply_free(&r);
    chat_reply_init(&r, 1024, 8);
    assert_int_equal(
        feed_chunk(
            &r,
            "{\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"f\",\"arguments\":\"123456789\"}}]}}]}",
            &err),
        -1);
    assert_non_null(strstr(err.msg, "tool arguments exceeds 8 bytes"));
    chat_reply_free(&r);
}

static void test_error_text(void **state)
{
    (void)state;
    char m[64];
    chat_error_text("{\"error\":{\"message\":\"no\\tway\"}}", 31, m, sizeof m);
    assert_string_equal(m, "no way");
    chat_error_text("{\"detail\":\"Not Found\"}", 22, m, sizeof m);
    assert_string_equal(m, "Not Found");
    chat_error_text("<html>\n<b>bad\x01</b>", 18, m, sizeof m);
    assert_string_equal(m, "<html> <b>bad?</b>");
    chat_error_text("", 0, m, sizeof m);
    assert_string_equal(m, "(empty body)");
}

/* ---- client and tools helpers ---- */

static void test_endpoint_url(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } t[] = {
        {"http://127.0.0.1:8000", "http://127.0.0.1:8000/v1/chat/completions"},
        {"http://127.0.0.1:8000/", "http://127.0.0.1:8000/v1/chat/completions"},
        {"http://h:8080/v1", "http://h:8080/v1/chat/completions"},
        {"https://api.example.com/v1/", "https://api.example.com/v1/chat/completions"},
        {"http://h/openai/v1/chat/completions", "http://h/openai/v1/chat/completions"},
        {"http://h:11434/api", "http://h:11434/api/v1/chat/completions"},
    };
    txbox_error err = {0};
    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        char *u = llm_endpoint_url(t[i].in, &err);
        assert_non_null(u);
        assert_string_equal(u, t[i].out);
        free(u);
    }
    assert_null(llm_endpoint_url("ftp://h/v1", &err));
    assert_null(llm_endpoint_url("127.0.0.1:8000", &err));
    assert_null(llm_endpoint_url("http://user:secret@h/v1", &err));
    assert_non_null(strstr(err.msg, "credentials"));
    assert_null(strstr(err.msg, "secret"));
    assert_null(llm_endpoint_url("http://h/v1?key=1", &err));
}

static void test_normalize(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } t[] = {
        {"ls", "ls"}, {"  ls   -la ;", "ls -la"}, {"make\ttest;;", "make test"}, {"a\n&&\nb", "a && b"},
        {"", ""},
    };
    for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
        char *n = normalize_command(t[i].in);
        assert_string_equal(n, t[i].out);
        free(n);
    }
}

static void test_compact(void **state)
{
    (void)state;
    json_t *run = json_loads(
        "{\"tx\":\"9\",\"outcome\":\"committed\",\"exit_code\":0,\"changes\":{\"added\":[\"a\",\"b\",\"c\"],"
        "\"modified\":[],\"deleted\":[\"d\"]},\"stdout\":\"0123456789abcdefghij\",\"stderr\":\"\","
        "\"stdout_truncated\":false,\"protections\":{\"x\":1}}",
        0, NULL);
    assert_non_null(run);
    json_t *c = compact_run_result(run, 2000, 2, NULL);
    assert_string_equal(json_string_value(json_object_get(c, "outcome")), "committed");
    assert_string_equal(json_string_value(json_object_get(c, "tx")), "9");
    json_t *ch = json_object_get(c, "changed");
    assert_int_equal(json_array_size(json_object_get(ch, "added")), 2);
    assert_int_equal(json_integer_value(json_object_get(ch, "more")), 1);
    assert_null(json_object_get(ch, "modified"));
    assert_null(json_object_get(c, "stderr"));
    assert_null(json_object_get(c, "protections"));
    assert_string_equal(json_string_value(json_object_get(c, "stdout")), "0123456789abcdefghij");
    json_decref(c);
    /* a small budget keeps the tail of the output */
    json_object_set_new(
        run, "stdout",
        json_string(
            "........................................................................................"
            "........................................................................................"
            "..........................................................................................."
            "......................................................................................END"));
    c = compact_run_result(run, 256, 2, NULL);
    const char *so = json_string_value(json_object_get(c, "stdout"));
    assert_non_null(so);
    assert_true(strlen(so) < 200);
    assert_string_equal(so + strlen(so) - 3, "END");
    assert_non_null(json_object_get(c, "stdout_cut"));
    json_decref(c);
    json_decref(run);
    run = json_loads("{\"outcome\":\"blocked\",\"rule\":\"rm-root\",\"reason\":\"deletes /\","
                     "\"suggestion\":\"delete only what you mean\",\"tx\":\"3\",\"stdout\":\"\"}",
                     0, NULL);
    c = compact_run_result(run, 2000, 20, NULL);
    assert_string_equal(json_string_value(json_object_get(c, "rule")), "rm-root");
    assert_string_equal(json_string_value(json_object_get(c, "suggestion")), "delete only what you mean");
    assert_null(json_object_get(c, "tx"));
    json_decref(c);
    json_decref(run);
    bool cut;
    const char *t = utf8_tail("a\xc3\xa9\xc3\xa9", 5, 3, &cut);
    assert_true(cut);
    assert_string_equal(t, "\xc3\xa9"); /* never starts inside a character */
}

/* The line a model reads first: losses and discarded writes (the result's
 * `losses` and `discarded`, as lib/ reports them), and the way back in
 * each front's words. */
static void test_words(void **state)
{
    (void)state;
    json_t *run = json_loads(
        "{\"tx\":\"12\",\"outcome\":\"committed\",\"exit_code\":0,\"changes\":{\"added\":[],\"modified\":"
        "[\"a.py\"],\"deleted\":[\"b.py\",\"c.py\",\"d.py\",\"e.py\"]},"
        "\"losses\":{\"count\":5,\"bytes\":4300,\"truncated\":false,\"items\":["
        "{\"kind\":\"uncommitted\",\"path\":\"a.py\",\"bytes\":2000},"
        "{\"kind\":\"uncommitted\",\"path\":\"b.py\",\"bytes\":1000},"
        "{\"kind\":\"uncommitted\",\"path\":\"c.py\",\"bytes\":1000},"
        "{\"kind\":\"uncommitted\",\"path\":\"d.py\",\"bytes\":200},"
        "{\"kind\":\"untracked\",\"path\":\"e.py\",\"bytes\":100}]},"
        "\"discarded\":{\"count\":1,\"paths\":[\"/tmp/x/outside.txt\"],\"truncated\":false},"
        "\"protections\":{\"x\":1},\"overhead_ms\":3.5}",
        0, NULL);
    assert_non_null(run);
    words_ctx mcp = {.front = WORDS_MCP};
    char *l = words_run_line(run, &mcp);
    assert_string_equal(l,
                        "committed tx 12 (exit 0); modified a.py; deleted b.py, c.py, d.py (+1 more); LOST "
                        "uncommitted changes to 4 files (4.1 KiB): a.py, b.py, c.py (+1 more), 1 untracked "
                        "file (100 B): e.py; discarded 1 file written outside the workspace (it does not "
                        "persist): /tmp/x/outside.txt; to bring it back call the `undo` tool with tx \"12\"");
    free(l);
    words_ctx agent = {.front = WORDS_AGENT};
    l = words_run_line(run, &agent);
    assert_non_null(strstr(l, "; to bring it back call `undo` with {\"tx\": \"12\"}"));
    free(l);
    words_ctx in_tx = {.front = WORDS_MCP, .mtx = "7"};
    json_object_set_new(run, "outcome", json_string("staged"));
    l = words_run_line(run, &in_tx);
    assert_non_null(strstr(l, "staged in transaction 7 (exit 0)"));
    assert_non_null(strstr(l, "`abort` with tx \"7\" keeps it"));
    assert_null(strstr(l, "12"));
    free(l);
    json_t *c = words_run_compact(run, &in_tx);
    assert_string_equal(json_string_value(json_object_get(c, "transaction")), "7");
    assert_null(json_object_get(c, "tx"));
    assert_null(json_object_get(c, "protections"));
    assert_null(json_object_get(c, "overhead_ms"));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(c, "losses"), "count")), 5);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(c, "discarded"), "count")), 1);
    json_decref(c);
    /* nothing lost or discarded: nothing said of it */
    json_object_set_new(run, "outcome", json_string("committed"));
    json_object_set_new(run, "losses", json_loads("{\"count\":0,\"bytes\":0,\"items\":[]}", 0, NULL));
    json_object_del(run, "discarded");
    l = words_run_line(run, &mcp);
    assert_null(strstr(l, "LOST"));
    assert_null(strstr(l, "undo"));
    free(l);
    c = words_run_compact(run, &mcp);
    assert_null(json_object_get(c, "losses"));
    json_decref(c);
    json_decref(run);
    char b[32];
    assert_string_equal(words_bytes(512, b, sizeof b), "512 B");
    assert_string_equal(words_bytes(3 << 20, b, sizeof b), "3.0 MiB");
    /* the agent's text: the line first, then the rest as JSON */
    json_t *r = json_pack("{s:s,s:s}", "line", "staged in transaction 1 (exit 0)", "outcome", "staged");
    char *t = result_text(r);
    assert_string_equal(t, "staged in transaction 1 (exit 0)\n{\"outcome\":\"staged\"}");
    free(t);
    json_decref(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_words),
        cmocka_unit_test(test_sse_every_split),
        cmocka_unit_test(test_sse_cr_lf_across_chunks),
        cmocka_unit_test(test_sse_caps),
        cmocka_unit_test(test_sse_callback_error),
        cmocka_unit_test(test_textproto),
        cmocka_unit_test(test_chat_whole),
        cmocka_unit_test(test_chat_stream),
        cmocka_unit_test(test_error_text),
        cmocka_unit_test(test_endpoint_url),
        cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_compact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
