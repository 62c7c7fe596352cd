/* What a child txbox answered (`/proc/self/exe SUBCOMMAND --json ...`,
 * started with self_spawn): read the same way by every front that runs
 * transactions through one (the MCP server, the headless agent). */
#ifndef TXBOX_ANSWER_H
#define TXBOX_ANSWER_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* Every JSON value in the child's standard output text[0, len): the one
 * value, or an array of them when there is one a line; NULL when it is not
 * JSON. The caller owns the result. */
json_t *answer_parse(const char *text, size_t len);
/* Is v the result of a transaction (`txbox run --json`): an object with
 * a string "outcome"? */
bool answer_is_run(const json_t *v);
/* The first line of s, at most cap - 1 bytes, copied into buf; returns
 * buf. */
const char *answer_first_line(const char *s, char *buf, size_t cap);
/* Why the child failed, in one line: the message of v's JSON error object
 * ({"error": {"message": ...}}: a pointer into v), else the first line of
 * its standard error errtext (copied into buf, cap - 1 bytes at most; ""
 * when it wrote nothing). */
const char *answer_why(const json_t *v, const char *errtext, char *buf, size_t cap);

#endif
