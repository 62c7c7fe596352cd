/* The JSON-RPC layer of txbox mcp (src/mcp/jsonrpc.c): what each kind of
 * malformed input is answered with, and the framer's cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "jsonrpc.h"

static jrpc_msg_type parse(const char *s, jrpc_msg *m) { return jrpc_parse(s, strlen(s), m); }

static void expect_invalid(const char *line, int code, const char *id_json)
{
    jrpc_msg m;
    assert_int_equal(parse(line, &m), JRPC_MSG_INVALID);
    assert_int_equal(m.code, code);
    char *reply = jrpc_error(m.id, m.code, m.message, NULL);
    char want[64];
    snprintf(want, sizeof want, "\"id\":%s,", id_json);
    if (!strstr(reply, want))
        fail_msg("reply %s lacks %s", reply, want);
    free(reply);
    jrpc_msg_free(&m);
}

static void test_errors(void **state)
{
    (void)state;
    expect_invalid("{bad", JRPC_PARSE_ERROR, "null");
    expect_invalid("\xff\xfe", JRPC_PARSE_ERROR, "null");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":\"\xc3\x28\",\"method\":\"x\"}", JRPC_PARSE_ERROR, "null");
    expect_invalid("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", JRPC_INVALID_REQUEST, "null");
    expect_invalid("[]", JRPC_INVALID_REQUEST, "null");
    expect_invalid("42", JRPC_INVALID_REQUEST, "null");
    expect_invalid("{\"id\":1,\"method\":\"ping\"}", JRPC_INVALID_REQUEST, "1");
    expect_invalid("{\"jsonrpc\":\"1.0\",\"id\":\"a\",\"method\":\"ping\"}", JRPC_INVALID_REQUEST, "\"a\"");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", JRPC_INVALID_REQUEST, "null");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", JRPC_INVALID_REQUEST, "null");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":7}", JRPC_INVALID_REQUEST, "3");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"m\",\"params\":\"p\"}", JRPC_INVALID_REQUEST,
                   "3");
    expect_invalid("{\"jsonrpc\":\"2.0\",\"id\":3}", JRPC_INVALID_REQUEST, "3");
}

static void test_kinds(void **state)
{
    (void)state;
    jrpc_msg m;
    assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"tools/list\",\"params\":{}}", &m),
                     JRPC_MSG_REQUEST);
    assert_string_equal(m.method, "tools/list");
    assert_string_equal(json_string_value(m.id), "x");
    jrpc_msg_free(&m);
    assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &m),
                     JRPC_MSG_NOTIFICATION);
    assert_null(m.id);
    jrpc_msg_free(&m);
    assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}", &m), JRPC_MSG_RESPONSE);
    jrpc_msg_free(&m);
    assert_int_equal(parse("  \t ", &m), JRPC_MSG_BLANK);
    jrpc_msg_free(&m);
    json_t *id = json_integer(9);
    char *r = jrpc_result(id, json_object());
    assert_string_equal(r, "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}");
    free(r);
    json_decref(id);
}

typedef struct {
    int lines, overlong;
    char last[64];
} seen;

static void collect(void *ctx, jrpc_frame_kind kind, const char *line, size_t len)
{
    seen *s = ctx;
    if (kind == JRPC_FRAME_OVERLONG) {
        s->overlong++;
        return;
    }
    s->lines++;
    snprintf(s->last, sizeof s->last, "%.*s", (int)len, line);
}

static void test_framer(void **state)
{
    (void)state;
    jrpc_framer f;
    seen s = {0};
    jrpc_framer_init(&f, 8);
    jrpc_framer_feed(&f, "abc\r\nde", 7, collect, &s);
    assert_int_equal(s.lines, 1);
    assert_string_equal(s.last, "abc");
    jrpc_framer_feed(&f, "f\n", 2, collect, &s);
    assert_string_equal(s.last, "def");
    /* 20 bytes on one line, fed in pieces: one overlong report, then the
     * next line is whole again */
    jrpc_framer_feed(&f, "0123456789", 10, collect, &s);
    jrpc_framer_feed(&f, "0123456789", 10, collect, &s);
    jrpc_framer_feed(&f, "tail\nok\n", 8, collect, &s);
    assert_int_equal(s.overlong, 1);
    assert_int_equal(s.lines, 3);
    assert_string_equal(s.last, "ok");
    /* exactly the cap fits */
    jrpc_framer_feed(&f, "12345678\n", 9, collect, &s);
    assert_string_equal(s.last, "12345678");
    assert_int_equal(s.overlong, 1);
    /* a last line without newline at EOF is handed out */
    jrpc_framer_feed(&f, "end", 3, collect, &s);
    jrpc_framer_eof(&f, collect, &s);
    assert_string_equal(s.last, "end");
    assert_int_equal(s.lines, 5);
    jrpc_framer_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_kinds),
        cmocka_unit_test(test_framer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
