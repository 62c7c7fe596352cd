/* Incremental Server-Sent Events parser; see sse.h. */
#include "sse.h"

void sse_init(sse_parser *p, size_t max_line, size_t max_data, sse_event_fn fn, void *ctx)
{
    memset(p, 0, sizeof *p);
    p->max_line = max_line;
    p->max_data = max_data;
    /* dbuf caps one byte above the limit so that "exactly at the limit" is
     * accepted and anything beyond is seen as dropped. */
    dbuf_init(&p->line, max_line + 1);
    dbuf_init(&p->data, max_data + 2);
    p->fn = fn;
    p->ctx = ctx;
}

void sse_free(sse_parser *p)
{
    dbuf_free(&p->line);
    dbuf_free(&p->data);
}

static int fail(sse_parser *p, txbox_error *err, const char *what, size_t cap)
{
    p->failed = true;
    return tx_err(err, EMSGSIZE, "event stream %s exceeds %zu bytes", what, cap);
}

static int dispatch(sse_parser *p, txbox_error *err)
{
    if (p->data.len == 0) {
        p->event[0] = 0;
        return 0;
    }
    /* Drop the final LF that every data line added. */
    p->data.len--;
    p->data.p[p->data.len] = 0;
    p->events++;
    int r = 0;
    if (p->fn)
        r = p->fn(p->ctx, p->event[0] ? p->event : "message", p->data.p, p->data.len, err);
    p->data.len = 0;
    p->data.p[0] = 0;
    p->event[0] = 0;
    if (r < 0)
        p->failed = true;
    return r < 0 ? -1 : 0;
}

static int process_line(sse_parser *p, const char *s, size_t n, txbox_error *err)
{
    if (n == 0)
        return dispatch(p, err);
    if (s[0] == ':')
        return 0;
    const char *colon = memchr(s, ':', n);
    size_t flen = colon ? (size_t)(colon - s) : n;
    const char *v = colon ? colon + 1 : s + n;
    size_t vlen = (size_t)(s + n - v);
    if (vlen && *v == ' ') {
        v++;
        vlen--;
    }
    if (flen == 4 && !memcmp(s, "data", 4)) {
        dbuf_add(&p->data, v, vlen);
        dbuf_add(&p->data, "\n", 1);
        if (p->data.dropped || p->data.len > p->max_data + 1)
            return fail(p, err, "event data", p->max_data);
    } else if (flen == 5 && !memcmp(s, "event", 5)) {
        size_t k = vlen < sizeof p->event - 1 ? vlen : sizeof p->event - 1;
        memcpy(p->event, v, k);
        p->event[k] = 0;
        /* An event name with a NUL in it is cut there; harmless. */
    }
    /* id, retry and unknown fields: ignored. */
    return 0;
}

int sse_feed(sse_parser *p, const char *buf, size_t n, txbox_error *err)
{
    if (p->failed)
        return tx_err(err, EINVAL, "event stream already failed");
    size_t i = 0;
    static const unsigned char bom[3] = {0xef, 0xbb, 0xbf};
    /* A UTF-8 BOM may only open the stream, and it can arrive split. */
    while (!p->started && i < n) {
        if ((unsigned char)buf[i] == bom[p->bom]) {
            i++;
            if (++p->bom == 3)
                p->started = true;
            continue;
        }
        dbuf_add(&p->line, bom, p->bom); /* not a BOM after all: line bytes */
        p->started = true;
    }
    while (i < n) {
        char c = buf[i];
        if (p->cr && c == '\n') {
            p->cr = false;
            i++;
            continue;
        }
        p->cr = false;
        /* Find the end of this line within the chunk. */
        size_t j = i;
        while (j < n && buf[j] != '\n' && buf[j] != '\r')
            j++;
        dbuf_add(&p->line, buf + i, j - i);
        if (p->line.dropped || p->line.len > p->max_line)
            return fail(p, err, "line", p->max_line);
        if (j == n)
            break; /* the line continues in the next chunk */
        p->cr = buf[j] == '\r';
        int r = process_line(p, dbuf_str(&p->line), p->line.len, err);
        p->line.len = 0;
        if (r < 0)
            return -1;
        i = j + 1;
    }
    return 0;
}

static int fuzz_event(void *ctx, const char *event, const char *data, size_t len, txbox_error *err)
{
    size_t *total = ctx;
    *total += len + strlen(event);
    /* Exercise the invariants the caller relies on. */
    if (data[len] != 0)
        abort();
    return 0;
}

int agent_fuzz_sse(const uint8_t *data, size_t size)
{
    sse_parser p;
    size_t total = 0;
    txbox_error err = {0};
    sse_init(&p, 4096, 8192, fuzz_event, &total);
    /* Uneven pieces: the first byte picks the piece size. */
    size_t step = size ? (data[0] % 7) + 1 : 1;
    int r = 0;
    for (size_t off = 0; off < size && r == 0; off += step) {
        size_t k = size - off < step ? size - off : step;
        r = sse_feed(&p, (const char *)data + off, k, &err);
    }
    int events = r < 0 ? -1 : (int)p.events;
    sse_free(&p);
    return events;
}
