/* libFuzzer target for txbox mcp's JSON-RPC layer (src/mcp/jsonrpc.c): the
 * newline framer with its cap and the message classifier, with the replies
 * built for what they find. Replayed over tests/fuzz/corpus/jsonrpc by the
 * meson test fuzz-jsonrpc-replay (tests/mcp/meson.build).
 *
 * Input: byte 0 picks the chunk size the stream is fed in (so lines are
 * split at every possible place); the rest is the stream. Invariants,
 * checked with abort():
 *   - a line handed out holds no newline and is at most the cap;
 *   - an over-long line is reported as such, without its bytes;
 *   - every line gets a type; INVALID ones carry a JSON-RPC error code;
 *   - every reply built is one line of JSON with "jsonrpc":"2.0" and the
 *     request's id (or null), and a result xor an error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jsonrpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CAP 512

static void check_reply(char *line, const json_t *id, bool is_error)
{
    if (strchr(line, '\n'))
        abort();
    json_error_t je;
    json_t *o = json_loads(line, 0, &je);
    if (!json_is_object(o))
        abort();
    if (!json_is_string(json_object_get(o, "jsonrpc")) ||
        strcmp(json_string_value(json_object_get(o, "jsonrpc")), "2.0"))
        abort();
    json_t *rid = json_object_get(o, "id");
    if (!rid || (id ? !json_equal(rid, (json_t *)id) : !json_is_null(rid)))
        abort();
    json_t *err = json_object_get(o, "error");
    if (is_error != (err != NULL) || is_error == (json_object_get(o, "result") != NULL))
        abort();
    if (err &&
        (!json_is_integer(json_object_get(err, "code")) || !json_is_string(json_object_get(err, "message"))))
        abort();
    json_decref(o);
    free(line);
}

static void classify(const char *line, size_t len);

static void on_line(void *ctx, jrpc_frame_kind kind, const char *line, size_t len)
{
    (void)ctx;
    if (kind == JRPC_FRAME_OVERLONG) {
        if (line || len)
            abort();
        check_reply(jrpc_error(NULL, JRPC_INVALID_REQUEST, "too long", NULL), NULL, true);
        return;
    }
    if (len > FUZZ_CAP || memchr(line, '\n', len))
        abort();
    classify(line, len);
}

/* One message: its type, and the reply built for it. */
static void classify(const char *line, size_t len)
{
    jrpc_msg m;
    switch (jrpc_parse(line, len, &m)) {
    case JRPC_MSG_INVALID:
        if (m.code != JRPC_PARSE_ERROR && m.code != JRPC_INVALID_REQUEST)
            abort();
        if (m.id && !jrpc_valid_id(m.id))
            abort();
        check_reply(jrpc_error(m.id, m.code, m.message, NULL), m.id, true);
        break;
    case JRPC_MSG_REQUEST:
        if (!m.method || !jrpc_valid_id(m.id))
            abort();
        check_reply(jrpc_result(m.id, json_pack("{s:s}", "echo", m.method)), m.id, false);
        break;
    case JRPC_MSG_NOTIFICATION:
        if (!m.method || m.id)
            abort();
        break;
    case JRPC_MSG_RESPONSE:
        if (!jrpc_valid_id(m.id))
            abort();
        break;
    case JRPC_MSG_BLANK:
        break;
    default:
        abort();
    }
    jrpc_msg_free(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t chunk = (size_t)data[0] % 64 + 1;
    const char *p = (const char *)data + 1;
    size_t n = size - 1;
    jrpc_framer f;
    jrpc_framer_init(&f, FUZZ_CAP);
    for (size_t off = 0; off < n; off += chunk)
        jrpc_framer_feed(&f, p + off, n - off < chunk ? n - off : chunk, on_line, NULL);
    jrpc_framer_eof(&f, on_line, NULL);
    jrpc_framer_free(&f);
    /* The whole input as one message, as the server's classifier sees a line. */
    classify(p, n);
    return 0;
}
