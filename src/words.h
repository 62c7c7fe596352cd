/* What the fronts that answer a model (the MCP server, the headless agent)
 * tell it about one command: a short line first, saying what happened, what
 * changed, what was lost or discarded and what to do next, then a compact
 * object with what a model uses (no protections unless asked for, no
 * timings, no empty fields). Both are made from the `txbox run --json`
 * object, whether a child printed it or the run was in the front's own
 * process. The words for a way back (undo, rollback) are the front's:
 * words_front says which. */
#ifndef TXBOX_WORDS_H
#define TXBOX_WORDS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "util.h"

typedef enum {
    WORDS_MCP,   /* tools named as the MCP server names them: the `undo` tool with tx "12" */
    WORDS_AGENT, /* txbox agent's actions: undo {"tx": "12"}, rollback */
} words_front;

typedef struct words_ctx {
    words_front front;
    const char *mtx;  /* the multi-command transaction the command ran in, or NULL */
    bool protections; /* the compact object carries `protections` */
    size_t out_max;   /* bytes of stdout (stderr: half) kept in the compact object; 0: 16 KiB */
} words_ctx;

/* The line for a run's answer (no newline; malloc'd). */
char *words_run_line(json_t *run, const words_ctx *c);
/* The compact object for a run's answer (a new reference): in a
 * transaction `transaction` comes first and the command's own id is left
 * out, so the only id in sight is the one to pass on. */
json_t *words_run_compact(json_t *run, const words_ctx *c);
/* line, a newline and obj as compact JSON (malloc'd): the text the model
 * reads. */
char *words_text(const char *line, json_t *obj);
/* The losses and discarded writes of a result, in words ("lost uncommitted
 * changes to 3 files (4.2 KiB): a.py, b.py, c.py"), appended to b with
 * "; " before each; returns whether anything was lost. */
bool words_losses(dbuf *b, json_t *result);
/* n bytes as people read them: "512 B", "4.2 KiB", "3.0 MiB". */
const char *words_bytes(unsigned long long n, char *buf, size_t cap);

#endif
