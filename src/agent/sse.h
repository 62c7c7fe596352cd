/* An incremental Server-Sent Events parser (the WHATWG "event stream"
 * interpretation), fed whatever byte chunks the network delivers.
 *
 * Lines end in CRLF, LF or CR (a CR at the end of one chunk and an LF at
 * the start of the next are one line end). A blank line dispatches the
 * event collected so far: its `data:` lines joined with "\n". Lines that
 * start with ':' are comments; `id:` and `retry:` are read and ignored; an
 * event still being collected when the stream ends is discarded, as the
 * specification says. Every buffer has a cap: a line longer than max_line
 * or an event whose data exceeds max_data fails the stream (the caller
 * reports it), it is never silently cut. */
#ifndef TXBOX_AGENT_SSE_H
#define TXBOX_AGENT_SSE_H

#include "util.h"

/* Called once per dispatched event; event is "message" when the stream gave
 * no `event:` field. data is NUL-terminated (len excludes the NUL). Return
 * <0 (and fill err) to stop the stream. */
typedef int (*sse_event_fn)(void *ctx, const char *event, const char *data, size_t len, txbox_error *err);

typedef struct sse_parser {
    dbuf line; /* the line being collected (cap: max_line) */
    dbuf data; /* the event's data (cap: max_data) */
    char event[64];
    bool cr;      /* the last byte seen was a CR */
    bool started; /* past the optional leading BOM */
    unsigned bom; /* BOM bytes matched so far */
    bool failed;
    size_t max_line, max_data;
    uint64_t events; /* events dispatched */
    sse_event_fn fn;
    void *ctx;
} sse_parser;

void sse_init(sse_parser *p, size_t max_line, size_t max_data, sse_event_fn fn, void *ctx);
/* Feed n bytes. Returns 0, or <0 with err filled (cap exceeded, or the
 * callback's own error); after a failure the parser refuses more input. */
MUST_CHECK int sse_feed(sse_parser *p, const char *buf, size_t n, txbox_error *err);
void sse_free(sse_parser *p);

/* For the fuzzer and its corpus replay: parse a whole buffer with small
 * caps, feeding it in uneven pieces; returns the number of events or -1. */
int agent_fuzz_sse(const uint8_t *data, size_t size);

#endif
