/* lib/ states the fact and names the remedy; the front words it
 * (src/remedy.c, compiled in). The CLI's words are what users saw when
 * lib/ wrote them itself, byte for byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>

#include "remedy.h"
#include "result.h"
#include "sesslink.h"
#include "store.h"
#include "util.h"

static char root[64];
static txbox_ws *ws;

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/txbox-remedy-XXXXXX");
    assert_non_null(mkdtemp(root));
    txbox_error e = {0};
    assert_int_equal(txbox_ws_open(root, TXBOX_WS_CREATE, &ws, &e), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    txbox_ws_close(ws);
    tree_remove(AT_FDCWD, root);
    return 0;
}

/* lib's message: the fact, no command of the CLI in it; the CLI's text. */
static void assert_words(const txbox_error *e, txbox_remedy_kind kind, const char *fact, const char *cli)
{
    char t[REMEDY_TEXT_MAX];
    assert_int_equal(e->remedy.kind, kind);
    assert_string_equal(e->msg, fact);
    assert_null(strstr(e->msg, "'txbox"));
    assert_string_equal(remedy_error_text(e, t, sizeof t), cli);
}

static void lib_names_the_remedy_front_words_it(void **state)
{
    (void)state;
    txbox_error e = {0};
    uint64_t id;
    assert_int_equal(parse_txid("x1", &id, &e), -1);
    assert_words(&e, TXBOX_REMEDY_LOG, "'x1' is not a transaction id (a positive number)",
                 "'x1' is not a transaction id (a positive number, as 'txbox log' shows)");

    txbox_multi *m = NULL;
    e = (txbox_error){0};
    assert_int_equal(txbox_multi_open(ws, "9", &m, &e), -1);
    assert_words(&e, TXBOX_REMEDY_STATUS, "no multi-command transaction 9",
                 "no multi-command transaction 9 (see 'txbox status')");

    char *json = NULL;
    int status = 0;
    e = (txbox_error){0};
    assert_int_equal(txbox_approve(ws, "9", &json, &status, &e), -1);
    assert_words(&e, TXBOX_REMEDY_REVIEW, "transaction 9 is not held",
                 "transaction 9 is not held (see 'txbox review')");
    free(json);
}

static void context_goes_before_the_remedy(void **state)
{
    (void)state;
    txbox_error e = {0};
    tx_err(&e, EINVAL, "transaction 7 is being aborted");
    tx_remedy(&e, TXBOX_REMEDY_ABORT, "7");
    tx_err_ctx(&e, "cannot run");
    assert_words(&e, TXBOX_REMEDY_ABORT, "cannot run: transaction 7 is being aborted",
                 "cannot run: transaction 7 is being aborted (run 'txbox abort 7' to finish)");
    /* in the middle: text added after the remedy's place */
    tx_err(&e, ENOENT, "the pre-images of transaction 3 were pruned");
    tx_remedy(&e, TXBOX_REMEDY_GC, NULL);
    tx_err_more(&e, ": it can no longer be undone");
    assert_words(&e, TXBOX_REMEDY_GC,
                 "the pre-images of transaction 3 were pruned: it can no longer be undone",
                 "the pre-images of transaction 3 were pruned by 'txbox gc': it can no longer be undone");
    /* a new error forgets the old remedy */
    tx_err(&e, EIO, "disk full");
    assert_words(&e, TXBOX_REMEDY_NONE, "disk full", "disk full");
    tx_err(&e, ENOSYS, "Landlock is not available in this kernel; refusing to run with less isolation");
    tx_remedy(&e, TXBOX_REMEDY_ALLOW_DEGRADED, NULL);
    assert_words(
        &e, TXBOX_REMEDY_ALLOW_DEGRADED,
        "Landlock is not available in this kernel; refusing to run with less isolation",
        "Landlock is not available in this kernel; refusing to run with less isolation (--allow-degraded "
        "accepts it)");
}

/* A commit that destroyed work: the status line states what (the facts),
 * the remedy names undo of it, and the CLI words that as its command. */
static void losses_name_the_way_back(void **state)
{
    (void)state;
    txbox_result *r = result_new();
    r->outcome = TXBOX_OUTCOME_COMMITTED;
    snprintf(r->txs, sizeof r->txs, "9");
    r->changes = json_pack("{s:[],s:[s],s:[],s:b}", "added", "modified", "a.py", "deleted", "truncated", 0);
    r->losses =
        json_pack("{s:i,s:i,s:b,s:[{s:s,s:s,s:i,s:s},{s:s,s:s,s:i,s:s}]}", "count", 2, "bytes", 4300,
                  "truncated", 0, "items", "kind", "uncommitted", "path", "a.py", "bytes", 4200, "detail",
                  "reset", "kind", "stash", "path", "stash@{0}", "bytes", 100, "detail", "dropped");
    txbox_remedy rem;
    char *s = txbox_result_summary(r, &rem);
    assert_non_null(strstr(s, "; destroyed uncommitted changes to 1 file (4.1 KiB): a.py"));
    assert_non_null(strstr(s, "; dropped 1 stash entry (100 bytes): stash@{0}"));
    assert_null(strstr(s, "txbox undo"));
    assert_int_equal(rem.kind, TXBOX_REMEDY_UNDO);
    assert_string_equal(rem.arg, "9");
    char *line = remedy_apply(s, &rem);
    assert_non_null(strstr(line, "stash@{0} — 'txbox undo 9' brings it back"));
    free(line);
    free(s);
    /* nothing lost: the line as it always was, no remedy */
    json_decref(r->losses);
    r->losses = NULL;
    s = txbox_result_summary(r, &rem);
    assert_int_equal(rem.kind, TXBOX_REMEDY_NONE);
    assert_null(strstr(s, "discarded"));
    free(s);
    result_free(r);
}

/* A session a command's open started is said by the first command run with
 * that handle, in its line and its JSON; not by the next ones (a library
 * caller runs many commands with one handle). */
static void a_started_session_is_said_once(void **state)
{
    (void)state;
    char id[] = "s1";
    txbox_session s = {.id = id, .started = 2};
    txbox_result *r = result_new();
    r->outcome = TXBOX_OUTCOME_COMMITTED;
    snprintf(r->txs, sizeof r->txs, "3");
    r->session = xstrdup(s.id);
    r->session_started = sl_take_started(&s);
    assert_int_equal(r->session_started, 2);
    char *line = txbox_result_summary(r, NULL);
    assert_non_null(strstr(line,
                           "); session s1 started again: the one of that id had ended, and its /tmp and "
                           "background processes are gone"));
    free(line);
    json_t *o = result_obj(r);
    assert_string_equal(json_string_value(json_object_get(o, "session_started")), "again");
    json_decref(o);
    /* the handle's next command: nothing said; the open's fact stays */
    r->session_started = sl_take_started(&s);
    assert_int_equal(r->session_started, 0);
    assert_int_equal(txbox_session_started(&s), 2);
    line = txbox_result_summary(r, NULL);
    assert_null(strstr(line, "started"));
    free(line);
    o = result_obj(r);
    assert_null(json_object_get(o, "session_started"));
    json_decref(o);
    result_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(lib_names_the_remedy_front_words_it, setup, teardown),
        cmocka_unit_test(context_goes_before_the_remedy),
        cmocka_unit_test(losses_name_the_way_back),
        cmocka_unit_test(a_started_session_is_said_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
