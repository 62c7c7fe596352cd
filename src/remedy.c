/* The words for a remedy; see remedy.h. */
#include "remedy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The CLI's words: before, then (when after is set) the remedy's arg and
 * after. */
static const struct {
    const char *before, *after;
} cli_words[] = {
    [TXBOX_REMEDY_NONE] = {"", NULL},
    [TXBOX_REMEDY_RECOVER] = {" (run 'txbox recover')", NULL},
    [TXBOX_REMEDY_REVIEW] = {" (see 'txbox review')", NULL},
    /* "ID" as the status line has always said it (arg holds the id) */
    [TXBOX_REMEDY_APPROVE] = {"see 'txbox review', then 'txbox approve ID' or 'txbox reject ID'", NULL},
    [TXBOX_REMEDY_STATUS] = {" (see 'txbox status')", NULL},
    [TXBOX_REMEDY_ABORT] = {" (run 'txbox abort ", "' to finish)"},
    [TXBOX_REMEDY_ALLOW_DEGRADED] = {" (--allow-degraded accepts ", ")"},
    [TXBOX_REMEDY_GC] = {" by 'txbox gc'", NULL},
    [TXBOX_REMEDY_LOG] = {", as 'txbox log' shows", NULL},
    [TXBOX_REMEDY_UNDO] = {" — 'txbox undo ", "' brings it back"},
};

const char *remedy_words(const txbox_remedy *r, char *buf, size_t n)
{
    size_t k = (size_t)r->kind < sizeof cli_words / sizeof cli_words[0] ? (size_t)r->kind : 0;
    const char *arg = r->arg[0] ? r->arg : r->kind == TXBOX_REMEDY_ALLOW_DEGRADED ? "it" : "";
    if (cli_words[k].after)
        snprintf(buf, n, "%s%s%s", cli_words[k].before, arg, cli_words[k].after);
    else
        snprintf(buf, n, "%s", cli_words[k].before ? cli_words[k].before : "");
    return buf;
}

char *remedy_apply(const char *text, const txbox_remedy *r)
{
    char w[128];
    remedy_words(r, w, sizeof w);
    size_t len = strlen(text), at = r->at < len ? r->at : len, wl = strlen(w);
    char *s = malloc(len + wl + 1);
    if (!s)
        abort();
    memcpy(s, text, at);
    memcpy(s + at, w, wl);
    memcpy(s + at + wl, text + at, len - at + 1);
    return s;
}

const char *remedy_error_text(const txbox_error *err, char *buf, size_t n)
{
    char *s = remedy_apply(err->msg, &err->remedy);
    snprintf(buf, n, "%s", s);
    free(s);
    return buf;
}
