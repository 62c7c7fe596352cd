/* Reading OpenAI-compatible chat completion replies; see chat.h. */
#include "chat.h"

#include "sse.h"

#define NAME_CAP 128

void chat_reply_init(chat_reply *r, size_t content_cap, size_t args_cap)
{
    memset(r, 0, sizeof *r);
    r->content_cap = content_cap;
    r->args_cap = args_cap;
    dbuf_init(&r->content, content_cap + 1);
    for (size_t i = 0; i < CHAT_MAX_CALLS; i++)
        r->slot_map[i] = SIZE_MAX;
}

void chat_reply_free(chat_reply *r)
{
    dbuf_free(&r->content);
    for (size_t i = 0; i < r->ncalls; i++) {
        free(r->calls[i].id);
        dbuf_free(&r->calls[i].name);
        dbuf_free(&r->calls[i].args);
    }
    memset(r, 0, sizeof *r);
}

static int add_capped(dbuf *b, size_t cap, const char *s, size_t n, const char *what, txbox_error *err)
{
    dbuf_add(b, s, n);
    if (b->dropped || b->len > cap)
        return tx_err(err, EMSGSIZE, "the reply's %s exceeds %zu bytes", what, cap);
    return 0;
}

static chat_call *new_call(chat_reply *r, txbox_error *err)
{
    if (r->ncalls >= CHAT_MAX_CALLS) {
        tx_err(err, EMSGSIZE, "the reply has more than %d tool calls", CHAT_MAX_CALLS);
        return NULL;
    }
    chat_call *c = &r->calls[r->ncalls++];
    dbuf_init(&c->name, NAME_CAP + 1);
    dbuf_init(&c->args, r->args_cap + 1);
    return c;
}

static int add_content(chat_reply *r, json_t *content, txbox_error *err)
{
    if (!content || json_is_null(content))
        return 0;
    if (json_is_string(content))
        return add_capped(&r->content, r->content_cap, json_string_value(content),
                          json_string_length(content), "content", err);
    if (json_is_array(content)) {
        /* Content parts: [{"type":"text","text":"..."}]. */
        size_t i;
        json_t *part;
        json_array_foreach(content, i, part)
        {
            json_t *t = json_object_get(part, "text");
            if (json_is_string(t) && add_capped(&r->content, r->content_cap, json_string_value(t),
                                                json_string_length(t), "content", err) < 0)
                return -1;
        }
        return 0;
    }
    return tx_err(err, EPROTO, "the reply's content is neither a string nor null");
}

static void set_finish(chat_reply *r, json_t *fr)
{
    if (json_is_string(fr))
        snprintf(r->finish_reason, sizeof r->finish_reason, "%s", json_string_value(fr));
}

static void read_usage(chat_reply *r, json_t *u)
{
    if (!json_is_object(u))
        return;
    json_t *p = json_object_get(u, "prompt_tokens"), *c = json_object_get(u, "completion_tokens"),
           *t = json_object_get(u, "total_tokens");
    if (!json_is_integer(p) && !json_is_integer(c) && !json_is_integer(t))
        return;
    r->prompt_tokens = json_is_integer(p) ? json_integer_value(p) : 0;
    r->completion_tokens = json_is_integer(c) ? json_integer_value(c) : 0;
    r->total_tokens = json_is_integer(t) ? json_integer_value(t) : r->prompt_tokens + r->completion_tokens;
    if (r->prompt_tokens < 0 || r->completion_tokens < 0 || r->total_tokens < 0)
        return;
    r->have_usage = true;
}

/* The message of an error object ({"error":{"message":..}}, {"error":".."},
 * {"object":"error","message":..}, {"detail":..}) or NULL. */
static const char *error_message(json_t *root)
{
    json_t *e = json_object_get(root, "error");
    if (json_is_object(e)) {
        json_t *m = json_object_get(e, "message");
        return json_is_string(m) ? json_string_value(m) : "(no message)";
    }
    if (json_is_string(e))
        return json_string_value(e);
    json_t *o = json_object_get(root, "object");
    if (json_is_string(o) && !strcmp(json_string_value(o), "error")) {
        json_t *m = json_object_get(root, "message");
        return json_is_string(m) ? json_string_value(m) : "(no message)";
    }
    json_t *d = json_object_get(root, "detail");
    if (json_is_string(d))
        return json_string_value(d);
    return NULL;
}

static void printable(const char *s, size_t len, char *out, size_t outsz)
{
    size_t o = 0;
    bool space = false;
    for (size_t i = 0; i < len && o + 1 < outsz; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
            if (o && !space)
                out[o++] = ' ';
            space = true;
            continue;
        }
        space = false;
        out[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    while (o && out[o - 1] == ' ')
        o--;
    if (outsz)
        out[o] = 0;
}

void chat_error_text(const char *body, size_t len, char *out, size_t outsz)
{
    json_t *root = json_loadb(body, len, 0, NULL);
    const char *m = root ? error_message(root) : NULL;
    if (m)
        printable(m, strlen(m), out, outsz);
    else
        printable(body, len, out, outsz);
    if (outsz && !out[0])
        snprintf(out, outsz, "(empty body)");
    json_decref(root);
}

static int read_call(chat_reply *r, json_t *tc, txbox_error *err)
{
    if (!json_is_object(tc))
        return tx_err(err, EPROTO, "a tool call is not an object");
    json_t *fn = json_object_get(tc, "function");
    if (!json_is_object(fn))
        return tx_err(err, EPROTO, "a tool call has no function object");
    json_t *name = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments");
    if (!json_is_string(name))
        return tx_err(err, EPROTO, "a tool call has no function name");
    chat_call *c = new_call(r, err);
    if (!c)
        return -1;
    json_t *id = json_object_get(tc, "id");
    if (json_is_string(id) && json_string_length(id) && json_string_length(id) < 128)
        c->id = xstrdup(json_string_value(id));
    if (add_capped(&c->name, NAME_CAP, json_string_value(name), json_string_length(name), "tool name", err) <
        0)
        return -1;
    if (json_is_string(args))
        return add_capped(&c->args, r->args_cap, json_string_value(args), json_string_length(args),
                          "tool arguments", err);
    if (json_is_object(args)) {
        /* Some servers send the arguments as an object, not a JSON text. */
        char *s = json_dumps(args, JSON_COMPACT);
        int rc = add_capped(&c->args, r->args_cap, s ? s : "{}", s ? strlen(s) : 2, "tool arguments", err);
        free(s);
        return rc;
    }
    if (args && !json_is_null(args))
        return tx_err(err, EPROTO, "a tool call's arguments are neither a JSON text nor an object");
    return 0;
}

static json_t *first_choice(json_t *root, txbox_error *err, bool allow_empty)
{
    json_t *choices = json_object_get(root, "choices");
    if (!choices || json_is_null(choices)) {
        if (allow_empty)
            return NULL;
        tx_err(err, EPROTO, "the response has no choices: not an OpenAI-compatible chat completion");
        return NULL;
    }
    if (!json_is_array(choices)) {
        tx_err(err, EPROTO, "the response's choices is not an array");
        return NULL;
    }
    if (json_array_size(choices) == 0) {
        if (!allow_empty)
            tx_err(err, EPROTO, "the response has an empty choices array");
        return NULL;
    }
    /* We ask for one choice; take the one with index 0 (or the first). */
    size_t i;
    json_t *c = NULL;
    json_array_foreach(choices, i, c)
    {
        json_t *idx = json_object_get(c, "index");
        if (!idx || (json_is_integer(idx) && json_integer_value(idx) == 0))
            break;
    }
    if (i == json_array_size(choices)) {
        if (allow_empty)
            return NULL;
        c = json_array_get(choices, 0);
    }
    if (!json_is_object(c)) {
        tx_err(err, EPROTO, "a choice is not an object");
        return NULL;
    }
    return c;
}

int chat_parse_response(const char *body, size_t len, chat_reply *r, txbox_error *err)
{
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return tx_err(err, EPROTO, "malformed JSON from the endpoint: %s (at byte %d)", je.text, je.position);
    int rc = -1;
    const char *em;
    if (!json_is_object(root)) {
        tx_err(err, EPROTO, "the response is not a JSON object: not an OpenAI-compatible chat completion");
        goto out;
    }
    if ((em = error_message(root))) {
        char m[200];
        printable(em, strlen(em), m, sizeof m);
        tx_err(err, EPROTO, "the endpoint returned an error: %s", m);
        goto out;
    }
    json_t *c = first_choice(root, err, false);
    if (!c)
        goto out;
    json_t *msg = json_object_get(c, "message");
    if (!json_is_object(msg)) {
        if (json_object_get(c, "text"))
            tx_err(err, EPROTO,
                   "the response is a text completion, not a chat completion "
                   "(is the endpoint /v1/completions?)");
        else
            tx_err(err, EPROTO, "the response's choice has no message object");
        goto out;
    }
    r->choice = true;
    if (add_content(r, json_object_get(msg, "content"), err) < 0)
        goto out;
    json_t *tcs = json_object_get(msg, "tool_calls");
    if (tcs && !json_is_null(tcs)) {
        if (!json_is_array(tcs)) {
            tx_err(err, EPROTO, "the message's tool_calls is not an array");
            goto out;
        }
        size_t i;
        json_t *tc;
        json_array_foreach(tcs, i, tc)
        {
            if (read_call(r, tc, err) < 0)
                goto out;
        }
    }
    set_finish(r, json_object_get(c, "finish_reason"));
    read_usage(r, json_object_get(root, "usage"));
    rc = 0;
out:
    json_decref(root);
    return rc;
}

/* The slot a streamed tool-call delta belongs to. Deltas name their call by
 * index; Ollama reuses index 0 for parallel calls and tells them apart only
 * by a new id, so a different id at a used index opens a new slot. */
static chat_call *delta_slot(chat_reply *r, json_t *tc, size_t *map, txbox_error *err)
{
    json_t *idx = json_object_get(tc, "index"), *id = json_object_get(tc, "id");
    const char *ids = json_is_string(id) && json_string_length(id) ? json_string_value(id) : NULL;
    json_int_t k;
    if (json_is_integer(idx))
        k = json_integer_value(idx);
    else if (!idx || json_is_null(idx))
        k = 0;
    else {
        tx_err(err, EPROTO, "a tool call delta's index is not an integer");
        return NULL;
    }
    if (k < 0 || k >= CHAT_MAX_CALLS) {
        tx_err(err, EPROTO, "a tool call delta's index %lld is out of range (0..%d)", (long long)k,
               CHAT_MAX_CALLS - 1);
        return NULL;
    }
    size_t slot = map[k];
    if (slot == SIZE_MAX || (ids && r->calls[slot].id && strcmp(ids, r->calls[slot].id))) {
        chat_call *c = new_call(r, err);
        if (!c)
            return NULL;
        map[k] = r->ncalls - 1;
        slot = map[k];
    }
    chat_call *c = &r->calls[slot];
    if (ids && !c->id) {
        if (strlen(ids) >= 128) {
            tx_err(err, EPROTO, "a tool call id is longer than 127 bytes");
            return NULL;
        }
        c->id = xstrdup(ids);
    }
    return c;
}

int chat_stream_event(chat_reply *r, const char *event, const char *data, size_t len, txbox_error *err)
{
    r->chunks++;
    if (!strcmp(event, "error")) {
        char m[200];
        chat_error_text(data, len, m, sizeof m);
        return tx_err(err, EPROTO, "the endpoint reported an error in the stream: %s", m);
    }
    if (len == 6 && !memcmp(data, "[DONE]", 6)) {
        r->done = true;
        return 0;
    }
    if (r->done)
        return 0; /* nothing after [DONE] counts */
    json_error_t je;
    json_t *root = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return tx_err(err, EPROTO, "malformed JSON in stream chunk %llu: %s", (unsigned long long)r->chunks,
                      je.text);
    int rc = -1;
    const char *em;
    if (!json_is_object(root)) {
        tx_err(err, EPROTO, "stream chunk %llu is not a JSON object", (unsigned long long)r->chunks);
        goto out;
    }
    if ((em = error_message(root))) {
        char m[200];
        printable(em, strlen(em), m, sizeof m);
        tx_err(err, EPROTO, "the endpoint reported an error in the stream: %s", m);
        goto out;
    }
    if (!json_object_get(root, "choices") && !json_object_get(root, "usage")) {
        tx_err(err, EPROTO,
               "stream chunk %llu has no choices: not an OpenAI-compatible chat "
               "completion chunk",
               (unsigned long long)r->chunks);
        goto out;
    }
    read_usage(r, json_object_get(root, "usage"));
    json_t *c = first_choice(root, err, true);
    if (!c) {
        rc = json_is_array(json_object_get(root, "choices")) || !json_object_get(root, "choices") ? 0 : -1;
        goto out;
    }
    r->choice = true;
    json_t *delta = json_object_get(c, "delta");
    if (delta && !json_is_null(delta)) {
        if (!json_is_object(delta)) {
            tx_err(err, EPROTO, "stream chunk %llu: delta is not an object", (unsigned long long)r->chunks);
            goto out;
        }
        if (add_content(r, json_object_get(delta, "content"), err) < 0)
            goto out;
        json_t *tcs = json_object_get(delta, "tool_calls");
        if (tcs && !json_is_null(tcs)) {
            if (!json_is_array(tcs)) {
                tx_err(err, EPROTO, "stream chunk %llu: tool_calls is not an array",
                       (unsigned long long)r->chunks);
                goto out;
            }
            size_t i;
            json_t *tc;
            json_array_foreach(tcs, i, tc)
            {
                if (!json_is_object(tc)) {
                    tx_err(err, EPROTO, "a tool call delta is not an object");
                    goto out;
                }
                chat_call *call = delta_slot(r, tc, r->slot_map, err);
                if (!call)
                    goto out;
                json_t *fn = json_object_get(tc, "function");
                if (fn && !json_is_null(fn) && !json_is_object(fn)) {
                    tx_err(err, EPROTO, "a tool call delta's function is not an object");
                    goto out;
                }
                json_t *n = json_object_get(fn, "name"), *a = json_object_get(fn, "arguments");
                if (json_is_string(n) && add_capped(&call->name, NAME_CAP, json_string_value(n),
                                                    json_string_length(n), "tool name", err) < 0)
                    goto out;
                if (json_is_string(a) && add_capped(&call->args, r->args_cap, json_string_value(a),
                                                    json_string_length(a), "tool arguments", err) < 0)
                    goto out;
            }
        }
    } else if (!json_object_get(c, "finish_reason")) {
        tx_err(err, EPROTO, "stream chunk %llu has a choice without delta", (unsigned long long)r->chunks);
        goto out;
    }
    set_finish(r, json_object_get(c, "finish_reason"));
    rc = 0;
out:
    json_decref(root);
    return rc;
}

int chat_stream_end(chat_reply *r, txbox_error *err)
{
    if (!r->chunks)
        return tx_err(err, EPROTO,
                      "the event stream ended without any event: not an "
                      "OpenAI-compatible chat completion stream");
    if (!r->choice)
        return tx_err(err, EPROTO, "the event stream ended without a choice");
    /* Servers end with [DONE]; one that closes after a finish_reason has
     * still said everything. */
    if (!r->done && !r->finish_reason[0])
        return tx_err(err, EPROTO, "the event stream ended early (no finish_reason, no [DONE])");
    return 0;
}

const char *chat_call_id(const chat_reply *r, size_t i, char buf[32])
{
    if (r->calls[i].id)
        return r->calls[i].id;
    snprintf(buf, 32, "call_%zu", i);
    return buf;
}

json_t *chat_reply_message(const chat_reply *r)
{
    json_t *m = json_object();
    json_object_set_new(m, "role", json_string("assistant"));
    /* null content only beside tool calls: some servers' chat templates
     * refuse an assistant message with neither. */
    json_t *content = r->content.len ? json_stringn(r->content.p, r->content.len) : NULL;
    json_object_set_new(m, "content", content ? content : r->ncalls ? json_null() : json_string(""));
    if (r->ncalls) {
        json_t *a = json_array();
        for (size_t i = 0; i < r->ncalls; i++) {
            char idb[32];
            const chat_call *c = &r->calls[i];
            json_t *name = json_stringn(c->name.p ? c->name.p : "", c->name.len);
            json_t *args = json_stringn(c->args.p ? c->args.p : "", c->args.len);
            json_array_append_new(a, json_pack("{s:s,s:s,s:{s:o,s:o}}", "id", chat_call_id(r, i, idb), "type",
                                               "function", "function", "name", name ? name : json_string(""),
                                               "arguments", args ? args : json_string("{}")));
        }
        json_object_set_new(m, "tool_calls", a);
    }
    return m;
}

static int fuzz_chunk(void *ctx, const char *event, const char *data, size_t len, txbox_error *err)
{
    return chat_stream_event(ctx, event, data, len, err);
}

int agent_fuzz_chat_stream(const uint8_t *data, size_t size)
{
    chat_reply r;
    chat_reply_init(&r, 4096, 4096);
    sse_parser p;
    sse_init(&p, 8192, 8192, fuzz_chunk, &r);
    txbox_error err = {0};
    int rc = sse_feed(&p, (const char *)data, size, &err);
    if (rc == 0)
        rc = chat_stream_end(&r, &err);
    if (rc == 0) {
        json_t *m = chat_reply_message(&r);
        if (!m)
            abort();
        json_decref(m);
    }
    if (r.content.len > 4096)
        abort();
    int n = rc < 0 ? -1 : (int)r.ncalls;
    sse_free(&p);
    chat_reply_free(&r);
    return n;
}
