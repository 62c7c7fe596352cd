/* JSON-RPC 2.0 framing, classification and replies (see jsonrpc.h).
 *
 * What each malformed input gets (JSON-RPC 2.0 section 5.1, MCP base
 * protocol):
 *   not JSON, or not UTF-8            -32700 Parse error, id null
 *   a batch (JSON array)              -32600 Invalid Request, id null
 *                                     (MCP removed batching in 2025-06-18)
 *   not an object; "jsonrpc" not "2.0"; method not a string; id null or
 *   not a string/number; params neither object nor array; result/error
 *   with a method                    -32600 Invalid Request (id echoed
 *                                     when it is a valid id, else null)
 *   a line over JRPC_MAX_LINE         -32600 Invalid Request, id null
 *                                     (answered by the server) */
#include "jsonrpc.h"

#include <stdio.h>
#include <string.h>

/* ---- framing ---- */

void jrpc_framer_init(jrpc_framer *f, size_t cap)
{
    memset(f, 0, sizeof *f);
    f->cap = cap ? cap : JRPC_MAX_LINE;
    dbuf_init(&f->line, f->cap);
}

static void emit_line(jrpc_framer *f, jrpc_line_fn fn, void *ctx)
{
    size_t n = f->line.len;
    const char *p = dbuf_str(&f->line);
    if (n && p[n - 1] == '\r')
        n--;
    fn(ctx, JRPC_FRAME_LINE, p, n);
    f->line.len = 0;
    f->line.dropped = 0;
}

void jrpc_framer_feed(jrpc_framer *f, const char *buf, size_t n, jrpc_line_fn fn, void *ctx)
{
    while (n) {
        const char *nl = memchr(buf, '\n', n);
        size_t take = nl ? (size_t)(nl - buf) : n;
        if (f->draining) {
            if (nl)
                f->draining = false;
        } else if (f->line.len + take > f->cap) {
            /* Over the cap: say so once, now, and drop the rest of the line. */
            f->line.len = 0;
            f->line.dropped = 0;
            fn(ctx, JRPC_FRAME_OVERLONG, NULL, 0);
            f->draining = nl == NULL;
        } else {
            dbuf_add(&f->line, buf, take);
            if (nl)
                emit_line(f, fn, ctx);
        }
        if (!nl)
            break;
        buf = nl + 1;
        n -= take + 1;
    }
}

void jrpc_framer_eof(jrpc_framer *f, jrpc_line_fn fn, void *ctx)
{
    if (!f->draining && f->line.len)
        emit_line(f, fn, ctx);
    f->draining = false;
    f->line.len = 0;
}

void jrpc_framer_free(jrpc_framer *f) { dbuf_free(&f->line); }

/* ---- classification ---- */

bool jrpc_valid_id(const json_t *id) { return id && (json_is_string(id) || json_is_number(id)); }

/* An INVALID message: "Parse error: DETAIL" or "Invalid Request: DETAIL". */
static jrpc_msg_type invalid(jrpc_msg *m, int code, json_t *id, const char *detail)
{
    m->type = JRPC_MSG_INVALID;
    m->code = code;
    m->id = jrpc_valid_id(id) ? id : NULL;
    snprintf(m->message, sizeof m->message, "%s: %s",
             code == JRPC_PARSE_ERROR ? "Parse error" : "Invalid Request", detail);
    /* jansson quotes the offending input: keep the message printable ASCII. */
    for (char *c = m->message; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
            *c = '?';
    return m->type;
}

static bool blank(const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (buf[i] != ' ' && buf[i] != '\t' && buf[i] != '\r' && buf[i] != '\n')
            return false;
    return true;
}

jrpc_msg_type jrpc_parse(const char *buf, size_t len, jrpc_msg *m)
{
    memset(m, 0, sizeof *m);
    if (blank(buf, len))
        return m->type = JRPC_MSG_BLANK;

    json_error_t je;
    m->root = json_loadb(buf, len, JSON_DECODE_ANY, &je);
    if (!m->root)
        return invalid(m, JRPC_PARSE_ERROR, NULL, je.text);
    if (json_is_array(m->root))
        return invalid(m, JRPC_INVALID_REQUEST, NULL,
                       "batches are not supported (MCP removed JSON-RPC batching in 2025-06-18)");
    if (!json_is_object(m->root))
        return invalid(m, JRPC_INVALID_REQUEST, NULL, "a message must be a JSON object");

    json_t *id = json_object_get(m->root, "id");
    json_t *ver = json_object_get(m->root, "jsonrpc");
    json_t *method = json_object_get(m->root, "method");
    json_t *params = json_object_get(m->root, "params");
    bool has_result = json_object_get(m->root, "result") != NULL;
    bool has_error = json_object_get(m->root, "error") != NULL;

    if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0"))
        return invalid(m, JRPC_INVALID_REQUEST, id, "\"jsonrpc\" must be \"2.0\"");
    if (id && !jrpc_valid_id(id))
        return invalid(m, JRPC_INVALID_REQUEST, NULL,
                       json_is_null(id) ? "the id must not be null (MCP)"
                                        : "the id must be a string or a number");

    if (!method) {
        if (has_result || has_error) {
            if (!id)
                return invalid(m, JRPC_INVALID_REQUEST, NULL, "a response needs an id");
            if (has_result && has_error)
                return invalid(m, JRPC_INVALID_REQUEST, id, "a response has either a result or an error");
            m->id = id;
            return m->type = JRPC_MSG_RESPONSE;
        }
        return invalid(m, JRPC_INVALID_REQUEST, id, "\"method\" is missing");
    }
    if (!json_is_string(method))
        return invalid(m, JRPC_INVALID_REQUEST, id, "\"method\" must be a string");
    if (has_result || has_error)
        return invalid(m, JRPC_INVALID_REQUEST, id, "a request cannot carry a result or an error");
    if (params && !json_is_object(params) && !json_is_array(params))
        return invalid(m, JRPC_INVALID_REQUEST, id, "\"params\" must be an object or an array");

    m->method = json_string_value(method);
    m->params = params;
    m->id = id;
    return m->type = id ? JRPC_MSG_REQUEST : JRPC_MSG_NOTIFICATION;
}

void jrpc_msg_free(jrpc_msg *m)
{
    json_decref(m->root);
    memset(m, 0, sizeof *m);
}

/* ---- replies ---- */

static char *dump(json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(o);
    if (!s)
        abort(); /* only on out of memory: nothing sane to answer */
    return s;
}

char *jrpc_result(const json_t *id, json_t *result)
{
    json_t *o = json_object();
    json_object_set_new(o, "jsonrpc", json_string("2.0"));
    json_object_set_new(o, "id", id ? json_deep_copy(id) : json_null());
    json_object_set_new(o, "result", result ? result : json_object());
    return dump(o);
}

char *jrpc_error(const json_t *id, int code, const char *message, json_t *data)
{
    json_t *e = json_object();
    json_object_set_new(e, "code", json_integer(code));
    /* The message may quote invalid bytes from the input: keep it UTF-8. */
    json_t *msg = json_string(message);
    json_object_set_new(e, "message", msg ? msg : json_string("error"));
    if (data)
        json_object_set_new(e, "data", data);
    json_t *o = json_object();
    json_object_set_new(o, "jsonrpc", json_string("2.0"));
    json_object_set_new(o, "id", jrpc_valid_id(id) ? json_deep_copy(id) : json_null());
    json_object_set_new(o, "error", e);
    return dump(o);
}
