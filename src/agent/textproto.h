/* The text protocol: how a model on a server without tool calling acts.
 *
 * A reply may hold any prose, and exactly one action block: a fence line of
 * three backticks followed at once by the action word, the body, and a
 * closing line of three backticks alone:
 *
 *     ```run            the body is the shell command, verbatim (run with sh -c)
 *     ls -la
 *     ```
 *
 *     ```undo           empty body: undo the last committed transaction;
 *     ```               or one line holding a transaction id
 *
 *     ```finish         the body is the final summary (may be empty)
 *     done: added hello.txt
 *     ```
 *
 *     ```savepoint      one name: mark the task's transaction (agent.h)
 *     before-edit
 *     ```
 *
 *     ```rollback       empty: back to the start of the task's transaction;
 *     ```               or one savepoint name
 *
 * The parse is strict: fence lines may be indented by at most three spaces
 * and carry trailing blanks, nothing else; other fenced blocks (```bash,
 * plain ```) are prose and are skipped whole, so an action word inside them
 * does not count; zero or several action blocks, an unclosed block, an
 * empty command, a NUL byte or a body over the cap are errors, each with a
 * message for the model saying what to send instead. */
#ifndef TXBOX_AGENT_TEXTPROTO_H
#define TXBOX_AGENT_TEXTPROTO_H

#include "util.h"

#define TP_MAX_BODY (16 * 1024)

typedef enum tp_kind { TP_NONE = 0, TP_RUN, TP_UNDO, TP_FINISH, TP_SAVEPOINT, TP_ROLLBACK } tp_kind;

typedef struct tp_action {
    tp_kind kind;
    char *body;    /* malloc'd; the command, tx id ("" for the last) or summary */
    char err[256]; /* on failure: what was wrong, in words for the model */
} tp_action;

/* Returns 0 with out->kind set, or -1 with out->err set (out->body NULL). */
MUST_CHECK int textproto_parse(const char *text, size_t len, tp_action *out);
void tp_action_clear(tp_action *a);
const char *tp_kind_name(tp_kind k);

/* For the fuzzer and its corpus replay: parse, check the invariants;
 * returns the kind or -1. */
int agent_fuzz_textproto(const uint8_t *data, size_t size);

#endif
