/* An agent's session (include/txbox.h, "sessions"): the commands run in it
 * share a /tmp, a loopback network and their background processes. */
#include "txbox.h"
#include "util.h"

struct txbox_session {
    char *id;
};

int txbox_session_open(txbox_ws *ws, const txbox_session_opts *o, txbox_session **out, txbox_error *err)
{
    (void)ws;
    (void)o;
    *out = NULL;
    return tx_err(err, ENOSYS, "sessions are not available in this build");
}

const char *txbox_session_id(const txbox_session *s) { return s ? s->id : NULL; }

int txbox_session_end(txbox_session *s, char **report, txbox_error *err)
{
    (void)s;
    if (report)
        *report = NULL;
    return tx_err(err, ENOSYS, "sessions are not available in this build");
}

void txbox_session_close(txbox_session *s)
{
    if (!s)
        return;
    free(s->id);
    free(s);
}

int txbox_session_status(txbox_session *s, char **json, txbox_error *err)
{
    (void)s;
    *json = NULL;
    return tx_err(err, ENOSYS, "sessions are not available in this build");
}

int txbox_session_list(txbox_ws *ws, char **json, txbox_error *err)
{
    (void)ws;
    *json = xstrdup("{\"sessions\":[]}");
    (void)err;
    return 0;
}
