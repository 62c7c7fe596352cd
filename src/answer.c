/* What a child txbox answered; see answer.h. */
#include "answer.h"

#include <string.h>

json_t *answer_parse(const char *text, size_t len)
{
    json_error_t je;
    json_t *one = json_loadb(text, len, 0, &je);
    if (one)
        return one;
    json_t *arr = json_array();
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        bool blank = true;
        for (size_t i = 0; i < n && blank; i++)
            blank = p[i] == ' ' || p[i] == '\t' || p[i] == '\r';
        if (!blank) {
            json_t *v = json_loadb(p, n, 0, &je);
            if (!v) {
                json_decref(arr);
                return NULL;
            }
            json_array_append_new(arr, v);
        }
        p += n + 1;
    }
    if (!json_array_size(arr)) {
        json_decref(arr);
        return NULL;
    }
    return arr;
}

bool answer_is_run(const json_t *v)
{
    return json_is_object(v) && json_is_string(json_object_get(v, "outcome"));
}

const char *answer_first_line(const char *s, char *buf, size_t cap)
{
    size_t n = strcspn(s, "\n");
    if (n >= cap)
        n = cap - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
    return buf;
}

const char *answer_why(const json_t *v, const char *errtext, char *buf, size_t cap)
{
    const char *msg = json_string_value(json_object_get(json_object_get(v, "error"), "message"));
    return msg ? msg : answer_first_line(errtext, buf, cap);
}
