/* libFuzzer target: the network proxy's request-head parser
 * (np_parse_request), which reads bytes the sandboxed command sends.
 * Corpus: tests/fuzz/corpus/proxy_request; replayed by the
 * proxy-request-fuzz-replay meson test. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netproxy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct np_req rq;
    const char *why = NULL;
    char *buf = malloc(size ? size : 1); /* exact size: ASan sees any read past it */
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    int h = np_parse_request(buf, size, &rq, &why);
    if (h > 0) {
        if ((size_t)h > size || rq.head_len != (size_t)h || !rq.host[0] || !rq.port || rq.port > 65535)
            abort();
        /* the host is normalised: what the allowlist compares */
        for (const char *c = rq.host; *c; c++)
            if (*c >= 'A' && *c <= 'Z')
                abort();
        if (!rq.connect && rq.path[0] != '/')
            abort();
    } else if (h < 0 && !why) {
        abort();
    }
    free(buf);
    return 0;
}
