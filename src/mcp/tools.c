/* txbox mcp: the tools, their schemas and descriptions, how their arguments
 * become a txbox CLI invocation, and how the CLI's JSON becomes a
 * CallToolResult (structuredContent plus a readable text part). */
#include "mcp.h"
#include "../answer.h"
#include "../words.h"

#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

const char *const mcp_protocol_versions[] = {"2025-11-25", "2025-06-18", "2024-11-05", NULL};

const char mcp_instructions[] =
    "txbox runs every shell command as a transaction on the workspace. A command runs in an "
    "isolated copy-on-write sandbox; if it exits 0 its file changes are committed atomically, "
    "otherwise they are discarded and the workspace is exactly as before. A policy classifies "
    "each command first: dangerous ones are blocked and never run (the result says which rule "
    "and what to do instead). Use `run` for commands, `check` to ask the policy without "
    "running, `log`/`show`/`diff` to inspect past transactions and `undo` to revert one. For a task "
    "of several commands that should land together or not at all, `begin` a transaction, pass its "
    "id as `tx` to each `run` (each command sees the earlier ones' changes; a failing one rolls "
    "back only itself; `savepoint`/`rollback` step back), then `commit` it (optionally with a "
    "`verify` command such as the test suite) or `abort` it. Nothing of it reaches the workspace "
    "before `commit`; transactions begun in a session and still open when the client disconnects "
    "are aborted.";

typedef enum { K_RUN, K_CHECK, K_HISTORY, K_TX } tool_kind;

struct mcp_tool {
    const char *name;
    tool_kind kind;
    const char *subcommand; /* txbox SUBCOMMAND */
    const char *list_key;   /* K_HISTORY: key for a JSON array result, or for text */
    bool json_flag;         /* the subcommand takes --json */
    const char *json;       /* the Tool object minus name */
};

#define OUTCOMES                                                                                     \
    "\"committed\",\"staged\",\"rolled_back\",\"blocked\",\"read_only\",\"conflict\",\"timed_out\"," \
    "\"rejected\",\"held\""
#define TX_ARG(what)                                                                  \
    "\"tx\":{\"type\":\"string\",\"pattern\":\"^[0-9A-Za-z][0-9A-Za-z._:-]{0,63}$\"," \
    "\"description\":\"" what "\"}"
/* a multi-command transaction's id (from `begin`): digits */
#define MTX_ARG(what) \
    "\"tx\":{\"type\":\"string\",\"pattern\":\"^[1-9][0-9]{0,19}$\",\"description\":\"" what "\"}"
#define SP_ARG(what)                                                                     \
    "\"name\":{\"type\":\"string\",\"pattern\":\"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$\"," \
    "\"description\":\"" what "\"}"
#define LOOSE_OUTPUT "\"outputSchema\":{\"type\":\"object\",\"additionalProperties\":true}"

static const mcp_tool tools[] = {
    {"run", K_RUN, "run", NULL, true,
     "{\"title\":\"Run a shell command as a transaction\","
     "\"description\":\"Runs one shell command (given to bash -c, as a shell tool would) in the workspace as a "
     "transaction. It runs in an isolated copy-on-write sandbox: if it exits 0 its file changes "
     "are committed to the workspace atomically; otherwise they are discarded and the workspace "
     "is exactly as it was. The answer's first line says what happened and what to do next; "
     "a compact JSON object follows. `outcome`: `committed` (changes applied, listed in "
     "`changes`), `read_only` (the policy judged it read-only; it ran without a transaction), "
     "`rolled_back` (it failed or was cancelled: nothing it did remains, so fix the cause and "
     "run it again; no cleanup is needed), `blocked` (the policy refused it and it never ran: "
     "do what `suggestion` says instead; do not try to get around the policy), `conflict` (it "
     "succeeded but the files it changed were changed meanwhile: re-read them and run it "
     "again), `timed_out` (killed at the time limit and rolled back: raise `timeout` or split "
     "the work). A commit that destroyed work that exists nowhere else (uncommitted changes, "
     "untracked files, git history) says so in the first line, with the `undo` that brings it "
     "back. There is no network unless `network` is true or a policy rule grants it to the "
     "command (`check` says so in `needs_network`). With `tx` (an id from `begin`) the command "
     "runs inside that open multi-command transaction instead: it sees the changes of the "
     "transaction's earlier commands, and if it exits 0 its changes are added to the "
     "transaction (outcome `staged`) but reach the workspace only when `commit` is called with "
     "that same `tx`; if it fails only its own changes are rolled back and the transaction "
     "stays open with everything staged before.\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
     "\"command\":{\"type\":\"string\",\"minLength\":1,\"description\":\"The shell command, "
     "exactly as for bash -c.\"},"
     "\"cwd\":{\"type\":\"string\",\"description\":\"Directory to start in, relative to the "
     "workspace root (default: the root). Must stay inside the workspace.\"},"
     "\"timeout\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":604800,"
     "\"description\":\"Wall-clock limit in seconds; at the limit the command is killed and "
     "rolled back.\"},"
     "\"network\":{\"type\":\"boolean\",\"default\":false,\"description\":\"Allow network "
     "access through txbox's proxy, to the package registries and git hosts only (off by default, "
     "unless a policy rule grants it to this command).\"},"
     "\"protections\":{\"type\":\"boolean\",\"default\":false,\"description\":\"Also report "
     "the sandbox's protections in force (namespaces, hidden paths, limits).\"}," MTX_ARG(
         "Run inside this open transaction (an id from `begin`): the command's changes are "
         "staged, applied only by `commit`. Omit for a command committed on its own.") "},"
                                                                                       "\"required\":[\"command\"],\"additionalProperties\":false},"
                                                                                       "\"outputSchema\":{\"type\":\"object\",\"properties\":{"
                                                                                       "\"tx\":{\"type\":\"string\"},"
                                                                                       "\"verdict\":{\"type\":\"string\",\"enum\":[\"safe\",\"uncertain\",\"unsafe\"]},"
                                                                                       "\"rule\":{\"type\":[\"string\",\"null\"]},\"reason\":{\"type\":[\"string\",\"null\"]},"
                                                                                       "\"suggestion\":{\"type\":\"string\"},"
                                                                                       "\"outcome\":{\"type\":\"string\",\"enum\":[" OUTCOMES
                                                                                       "]},"
                                                                                       "\"exit_code\":{\"type\":\"integer\"},"
                                                                                       "\"changes\":{\"type\":\"object\"},\"losses\":{\"type\":\"object\"},"
                                                                                       "\"discarded\":{\"type\":\"object\"},"
                                                                                       "\"stdout\":{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"},"
                                                                                       "\"stdout_truncated\":{\"type\":\"boolean\"},\"stderr_truncated\":{\"type\":\"boolean\"},"
                                                                                       "\"protections\":{\"type\":\"object\"},\"overhead_ms\":{\"type\":\"number\"},"
                                                                                       "\"transaction\":{\"type\":\"string\"}},"
                                                                                       "\"required\":[\"tx\",\"verdict\",\"outcome\",\"exit_code\",\"changes\"]},"
                                                                                       "\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":true,"
                                                                                       "\"idempotentHint\":false,\"openWorldHint\":true}}"},
    {"check", K_CHECK, "check", NULL, true,
     "{\"title\":\"Classify a command without running it\","
     "\"description\":\"Asks the policy how it would treat a shell command; nothing runs. "
     "`verdict` is `safe` (read-only: `run` executes it without a transaction), `uncertain` "
     "(may change files: `run` executes it as a transaction that commits on success and rolls "
     "back on failure) or `unsafe` (`run` would block it: `reason` says why and `suggestion` "
     "what to do instead).\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{"
     "\"command\":{\"type\":\"string\",\"minLength\":1,\"description\":\"The shell command.\"}},"
     "\"required\":[\"command\"],\"additionalProperties\":false},"
     "\"outputSchema\":{\"type\":\"object\",\"properties\":{"
     "\"command\":{\"type\":\"string\"},"
     "\"verdict\":{\"type\":\"string\",\"enum\":[\"safe\",\"uncertain\",\"unsafe\"]},"
     "\"rule\":{\"type\":\"string\"},\"reason\":{\"type\":\"string\"},"
     "\"suggestion\":{\"type\":\"string\"},\"needs_network\":{\"type\":\"boolean\"}},"
     "\"required\":[\"verdict\",\"rule\",\"reason\"]},"
     "\"annotations\":{\"readOnlyHint\":true,\"idempotentHint\":true,\"openWorldHint\":false}}"},
    {"log", K_HISTORY, "log", "transactions", true,
     "{\"title\":\"List past transactions\","
     "\"description\":\"Lists the workspace's transactions, most recent first: id, command, "
     "verdict, outcome and time. Use `show` for one transaction's details, `diff` for its "
     "changes and `undo` to revert a committed one.\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"limit\":{\"type\":\"integer\","
     "\"minimum\":1,\"maximum\":10000,\"description\":\"At most this many, newest first "
     "(default: all).\"}},\"additionalProperties\":false}," LOOSE_OUTPUT ","
     "\"annotations\":{\"readOnlyHint\":true,\"idempotentHint\":true,\"openWorldHint\":false}}"},
    {"show", K_HISTORY, "show", "items", true,
     "{\"title\":\"Show one transaction\","
     "\"description\":\"Shows one transaction: its command, the policy verdict and rule, the "
     "protections in force, its outcome and exit status, and the paths it added, modified or "
     "deleted.\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{" TX_ARG(
         "Transaction id (from `run` or `log`).") "},"
                                                  "\"required\":[\"tx\"],\"additionalProperties\":false}," LOOSE_OUTPUT
                                                  ","
                                                  "\"annotations\":{\"readOnlyHint\":true,\"idempotentHint\":true,\"openWorldHint\":false}}"},
    {"diff", K_HISTORY, "diff", "diff", false,
     "{\"title\":\"Show a transaction's changes\","
     "\"description\":\"Shows what one transaction changed in the workspace as a unified diff "
     "(text files; sizes and hashes for binary ones), in `diff`.\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{" TX_ARG(
         "Transaction id (from `run` or `log`).") "},"
                                                  "\"required\":[\"tx\"],\"additionalProperties\":false}," LOOSE_OUTPUT
                                                  ","
                                                  "\"annotations\":{\"readOnlyHint\":true,\"idempotentHint\":true,\"openWorldHint\":false}}"},
    {"undo", K_HISTORY, "undo", "items", true,
     "{\"title\":\"Revert a committed transaction\","
     "\"description\":\"Reverts a committed transaction (default: the most recent one), itself as "
     "a new transaction. If files it touched have changed since, undo reports a `conflict` and "
     "changes nothing: inspect them with `diff` and fix by hand or with `run`.\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{" TX_ARG(
         "Transaction to revert (default: the last committed one).") "},"
                                                                     "\"additionalProperties\":false}," LOOSE_OUTPUT
                                                                     ","
                                                                     "\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":true,\"idempotentHint\":false,"
                                                                     "\"openWorldHint\":false}}"},
    {"restore", K_HISTORY, "restore", "items", true,
     "{\"title\":\"Bring paths back as they were before a transaction\","
     "\"description\":\"Brings chosen files or whole directories back exactly as they were before "
     "committed transaction `tx`, as a new transaction (which `undo` can revert). Only what that "
     "transaction changed at or below each path changes; what later transactions changed there is "
     "replaced and listed in `overwritten`. A path the transaction did not change is refused and "
     "nothing changes. Use it to recover files a command deleted or overwrote when `undo` of the "
     "whole transaction reports a conflict or would revert too much.\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{" TX_ARG(
         "The transaction whose before-state comes back (from `run` or `log`).") ","
                                                                                 "\"paths\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":100,\"items\":{\"type\":"
                                                                                 "\"string\",\"minLength\":1,\"maxLength\":4096},\"description\":\"Paths relative to the "
                                                                                 "workspace root (or absolute inside it): files, or directories with everything in them; "
                                                                                 "\\\".\\\" for everything the transaction changed.\"}},"
                                                                                 "\"required\":[\"tx\",\"paths\"],\"additionalProperties\":false}," LOOSE_OUTPUT
                                                                                 ","
                                                                                 "\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":true,\"idempotentHint\":false,"
                                                                                 "\"openWorldHint\":false}}"},
    {"begin", K_TX, "begin", NULL, true,
     "{\"title\":\"Begin a multi-command transaction\","
     "\"description\":\"Opens a transaction that holds several commands and returns its id in "
     "`tx`. Pass that id as `tx` to `run`: each command then sees the changes of the earlier "
     "ones, a command that succeeds is staged (outcome `staged`) and one that fails rolls back "
     "only itself. Nothing reaches the workspace until `commit`; `abort` drops everything. Use "
     "`savepoint` and `rollback` to step back within it. Use it when a change takes several "
     "commands and should land whole or not at all. A transaction begun here and neither "
     "committed nor aborted is aborted when the client disconnects.\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{" SP_ARG(
         "An optional label shown by `status`.") "},\"additionalProperties\":false},"
                                                 "\"outputSchema\":{\"type\":\"object\",\"properties\":{\"tx\":{\"type\":\"string\"},"
                                                 "\"name\":{\"type\":[\"string\",\"null\"]}},\"required\":[\"tx\"]},"
                                                 "\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":false,\"idempotentHint\":false,"
                                                 "\"openWorldHint\":false}}"},
    {"savepoint", K_TX, "savepoint", NULL, true,
     "{\"title\":\"Mark a savepoint in a transaction\","
     "\"description\":\"Marks the current state of an open transaction (from `begin`) as "
     "savepoint `name` (replacing one of the same name). `rollback` with that name returns the "
     "transaction to this state later. Nothing is applied to the workspace.\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{" MTX_ARG("The open transaction (from `begin`).") "," SP_ARG(
         "The savepoint's name: letters, digits, '.', '_', '-'.") "},"
                                                                  "\"required\":[\"tx\",\"name\"],\"additionalProperties\":false}," LOOSE_OUTPUT
                                                                  ","
                                                                  "\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":false,\"idempotentHint\":false,"
                                                                  "\"openWorldHint\":false}}"},
    {"rollback", K_TX, "rollback", NULL, true,
     "{\"title\":\"Roll a transaction back to a savepoint\","
     "\"description\":\"Returns an open transaction to savepoint `name` (it is kept; later "
     "savepoints are dropped), or without `name` to its start, discarding the changes its "
     "commands staged since. The transaction stays open; the workspace itself is untouched "
     "(nothing of the transaction was applied yet).\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{" MTX_ARG("The open transaction (from `begin`).") "," SP_ARG(
         "The savepoint to return to (default: the transaction's start).") "},"
                                                                           "\"required\":[\"tx\"],\"additionalProperties\":false}," LOOSE_OUTPUT
                                                                           ","
                                                                           "\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":true,\"idempotentHint\":true,"
                                                                           "\"openWorldHint\":false}}"},
    {"commit", K_TX, "commit", NULL, true,
     "{\"title\":\"Commit a multi-command transaction\","
     "\"description\":\"Applies every change staged in an open transaction to the workspace at "
     "once (all or nothing, crash-safe). With `verify` (a shell command such as the test "
     "suite) that command first runs on the transaction's final state, its own writes "
     "dropped, and the commit happens only if it exits 0. `outcome`: `committed` (applied; "
     "`changes` lists the paths; the transaction is closed), `verify_failed` (nothing applied, "
     "the transaction stays open: read the verify output in `verify`, fix it with `run` and "
     "this `tx`, then commit again, or `abort`), `conflict` (another transaction changed the "
     "same paths since `begin`, listed in `conflict_paths`: nothing applied and the transaction "
     "is closed; begin a new one and redo the work on the current files), `rejected` or `held` "
     "(a rule on what the transaction changed refused it, or holds it for a person's review: "
     "nothing applied, the transaction is closed; see `effect_rule`, `reason`, `paths`).\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{" MTX_ARG(
         "The open transaction (from `begin`).") ","
                                                 "\"verify\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":65536,\"description\":"
                                                 "\"A shell command (bash -c) that must exit 0 on the transaction's final state for the "
                                                 "commit to happen, e.g. the test suite.\"},"
                                                 "\"timeout\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":604800,"
                                                 "\"description\":\"Wall-clock limit for `verify`, in seconds.\"}},"
                                                 "\"required\":[\"tx\"],\"additionalProperties\":false},"
                                                 "\"outputSchema\":{\"type\":\"object\",\"properties\":{"
                                                 "\"tx\":{\"type\":\"string\"},"
                                                 "\"outcome\":{\"type\":\"string\",\"enum\":[\"committed\",\"verify_failed\",\"conflict\",\"rejected\",\"held\"]},"
                                                 "\"exit_code\":{\"type\":\"integer\"},\"commands\":{\"type\":\"integer\"},"
                                                 "\"changes\":{\"type\":\"object\"},\"conflict_paths\":{\"type\":\"array\"},"
                                                 "\"verify\":{\"type\":\"object\"}},\"required\":[\"tx\",\"outcome\",\"exit_code\"]},"
                                                 "\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":true,\"idempotentHint\":false,"
                                                 "\"openWorldHint\":true}}"},
    {"abort", K_TX, "abort", NULL, true,
     "{\"title\":\"Abort a multi-command transaction\","
     "\"description\":\"Drops an open transaction: nothing it staged is ever applied, and the "
     "workspace stays as it is. The transaction is closed.\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{" MTX_ARG(
         "The open transaction (from `begin`).") "},"
                                                 "\"required\":[\"tx\"],\"additionalProperties\":false}," LOOSE_OUTPUT
                                                 ","
                                                 "\"annotations\":{\"readOnlyHint\":false,\"destructiveHint\":true,\"idempotentHint\":false,"
                                                 "\"openWorldHint\":false}}"},
    {"status", K_TX, "status", NULL, true,
     "{\"title\":\"List open multi-command transactions\","
     "\"description\":\"Lists the workspace's open multi-command transactions: id, name, when "
     "begun, how many commands are staged, their savepoints, and whether a command is running in "
     "one now (`busy`).\","
     "\"inputSchema\":{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false},"
     "\"outputSchema\":{\"type\":\"object\",\"properties\":{\"transactions\":{\"type\":\"array\"}},"
     "\"required\":[\"transactions\"]},"
     "\"annotations\":{\"readOnlyHint\":true,\"idempotentHint\":true,\"openWorldHint\":false}}"},
};

json_t *mcp_tools_list(bool structured)
{
    json_t *list = json_array();
    for (size_t i = 0; i < ARRAY_SIZE(tools); i++) {
        json_error_t je;
        json_t *t = json_loads(tools[i].json, 0, &je);
        if (!t) {
            fprintf(stderr, "txbox mcp: bad built-in schema of %s: %s\n", tools[i].name, je.text);
            abort();
        }
        json_t *o = json_pack("{s:s}", "name", tools[i].name);
        json_object_update(o, t);
        json_decref(t);
        if (!structured)
            json_object_del(o, "outputSchema");
        json_array_append_new(list, o);
    }
    return json_pack("{s:o}", "tools", list);
}

const mcp_tool *mcp_tool_find(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(tools); i++)
        if (!strcmp(tools[i].name, name))
            return &tools[i];
    return NULL;
}

const char *mcp_tool_name(const mcp_tool *t) { return t->name; }
bool mcp_tool_begins(const mcp_tool *t) { return !strcmp(t->name, "begin"); }

/* ---- arguments ---- */

typedef struct argv_b {
    char **v;
    size_t n;
} argv_b;

static void push(argv_b *a, const char *s)
{
    a->v = xrealloc(a->v, (a->n + 2) * sizeof *a->v);
    a->v[a->n++] = xstrdup(s);
    a->v[a->n] = NULL;
}

void mcp_invocation_free(mcp_invocation *inv)
{
    for (size_t i = 0; inv->argv && inv->argv[i]; i++)
        free(inv->argv[i]);
    free(inv->argv);
    inv->argv = NULL;
    free(inv->multi_tx);
    inv->multi_tx = NULL;
    if (inv->cwd_fd >= 0)
        close(inv->cwd_fd);
    inv->cwd_fd = -1;
}

/* Only the names in `allowed` (NULL-terminated) may appear. */
static int only_known(json_t *args, const char *const *allowed, txbox_error *err)
{
    const char *k;
    json_t *v;
    json_object_foreach(args, k, v)
    {
        bool ok = false;
        for (size_t i = 0; allowed[i] && !ok; i++)
            ok = !strcmp(k, allowed[i]);
        if (!ok)
            return tx_err(err, EINVAL, "unknown argument '%.64s'", k);
    }
    return 0;
}

static int get_string(json_t *args, const char *name, bool required, const char **out, txbox_error *err)
{
    json_t *v = json_object_get(args, name);
    *out = NULL;
    if (!v)
        return required ? tx_err(err, EINVAL, "argument '%s' is required", name) : 0;
    if (!json_is_string(v))
        return tx_err(err, EINVAL, "argument '%s' must be a string", name);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return tx_err(err, EINVAL, "argument '%s' must not contain NUL characters", name);
    *out = json_string_value(v);
    return 0;
}

/* An optional or required string argument that must pass ok(); msg when
 * it does not. */
static int get_checked(json_t *args, const char *key, bool required, bool (*ok)(const char *),
                       const char *msg, const char **out, txbox_error *err)
{
    if (get_string(args, key, required, out, err) < 0)
        return -1;
    if (*out && !ok(*out))
        return tx_err(err, EINVAL, "argument '%s' must be %s", key, msg);
    return 0;
}

/* A transaction id of the history: letters, digits, . _ : - */
static bool tx_ok(const char *s)
{
    size_t n = strlen(s);
    bool ok = n >= 1 && n <= 64 && s[0] != '-' && s[0] != '.' && s[0] != ':' && s[0] != '_';
    for (size_t i = 0; ok && i < n; i++)
        ok = (s[i] >= '0' && s[i] <= '9') || ((s[i] | 0x20) >= 'a' && (s[i] | 0x20) <= 'z') ||
             strchr("._:-", s[i]) != NULL;
    return ok;
}

/* A multi-command transaction's id: 1 to 20 digits, no leading zero. */
static bool mtx_ok(const char *s)
{
    size_t n = strlen(s);
    return n >= 1 && n <= 20 && s[0] != '0' && strspn(s, "0123456789") == n;
}

/* A savepoint or transaction name: as lib/tx/multi.c accepts. */
static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    return n >= 1 && n <= 64 && s[0] != '.' &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static int get_tx(json_t *args, bool required, const char **out, txbox_error *err)
{
    return get_checked(args, "tx", required, tx_ok, "a transaction id such as 42 (letters, digits, . _ : -)",
                       out, err);
}

static int get_mtx(json_t *args, bool required, const char **out, txbox_error *err)
{
    return get_checked(args, "tx", required, mtx_ok, "a transaction id from `begin`, such as \"12\"", out,
                       err);
}

static int get_name(json_t *args, bool required, const char **out, txbox_error *err)
{
    return get_checked(args, "name", required, name_ok,
                       "1 to 64 letters, digits, '.', '_' or '-', not starting with '.'", out, err);
}

/* restore's paths: 1 to 100 strings of 1 to 4096 bytes, no NUL. */
static int get_paths(json_t *args, json_t **out, txbox_error *err)
{
    json_t *p = json_object_get(args, "paths");
    *out = NULL;
    if (!json_is_array(p) || json_array_size(p) < 1 || json_array_size(p) > 100)
        return tx_err(err, EINVAL, "argument 'paths' must be an array of 1 to 100 paths");
    size_t i;
    json_t *v;
    json_array_foreach(p, i, v)
    {
        if (!json_is_string(v) || !json_string_length(v) || json_string_length(v) > 4096 ||
            strlen(json_string_value(v)) != json_string_length(v))
            return tx_err(err, EINVAL, "argument 'paths' must hold paths of 1 to 4096 bytes, without NUL");
    }
    *out = p;
    return 0;
}

static int get_timeout(json_t *args, json_t **out, txbox_error *err)
{
    json_t *t = json_object_get(args, "timeout");
    *out = t;
    if (t && (!json_is_number(t) || !(json_number_value(t) > 0) || json_number_value(t) > 604800))
        return tx_err(err, EINVAL, "argument 'timeout' must be a number of seconds, 0 < timeout <= 604800");
    return 0;
}

#define MAX_VERIFY 65536

/* The directory to start in: cwd (relative to the workspace, or absolute)
 * resolved, and inside the workspace but not in its .txbox/. */
static int open_cwd(const mcp_config *cfg, const char *cwd, int *out, txbox_error *err)
{
    _cleanup_free_ char *joined = NULL;
    if (!cwd || !*cwd)
        cwd = ".";
    joined = cwd[0] == '/' ? xstrdup(cwd) : xasprintf("%s/%s", cfg->workspace, cwd);
    _cleanup_free_ char *real = realpath(joined, NULL);
    if (!real)
        return tx_errno(err, errno, "cwd '%.200s'", cwd);
    size_t wl = strlen(cfg->workspace);
    bool inside = !strcmp(cfg->workspace, "/") ||
                  (!strncmp(real, cfg->workspace, wl) && (real[wl] == 0 || real[wl] == '/'));
    if (!inside)
        return tx_err(err, EINVAL, "cwd '%.200s' is outside the workspace %.200s", cwd, cfg->workspace);
    const char *rest = real + (strcmp(cfg->workspace, "/") ? wl : 0);
    if (!strncmp(rest, "/.txbox", 7) && (rest[7] == 0 || rest[7] == '/'))
        return tx_err(err, EINVAL, "cwd '%.200s' is inside txbox's own state directory", cwd);
    int fd = open(real, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return tx_errno(err, errno, "cwd '%.200s'", cwd);
    *out = fd;
    return 0;
}

int mcp_tool_prepare(const mcp_tool *t, const mcp_config *cfg, json_t *args, mcp_invocation *inv,
                     txbox_error *err)
{
    static const char *const run_args[] = {"command", "cwd", "timeout", "network", "tx", "protections", NULL};
    static const char *const begin_args[] = {"name", NULL};
    static const char *const sp_args[] = {"tx", "name", NULL};
    static const char *const commit_args[] = {"tx", "verify", "timeout", NULL};
    static const char *const no_args[] = {NULL};
    static const char *const check_args[] = {"command", NULL};
    static const char *const tx_args[] = {"tx", NULL};
    static const char *const log_args[] = {"limit", NULL};
    static const char *const restore_args[] = {"tx", "paths", NULL};
    argv_b a = {0};
    const char *command = NULL, *cwd = NULL, *tx = NULL, *mtx = NULL, *name = NULL, *verify = NULL;
    json_t *timeout = NULL, *net = NULL, *limit = NULL, *prot = NULL, *paths = NULL;
    inv->argv = NULL;
    inv->cwd_fd = -1;
    inv->multi_tx = NULL;
    inv->tee = false;
    inv->structured = cfg->structured;
    inv->protections = false;

    switch (t->kind) {
    case K_RUN:
        if (only_known(args, run_args, err) < 0 || get_string(args, "command", true, &command, err) < 0 ||
            get_string(args, "cwd", false, &cwd, err) < 0 || get_mtx(args, false, &mtx, err) < 0 ||
            get_timeout(args, &timeout, err) < 0)
            return -1;
        net = json_object_get(args, "network");
        if (net && !json_is_boolean(net))
            return tx_err(err, EINVAL, "argument 'network' must be true or false");
        prot = json_object_get(args, "protections");
        if (prot && !json_is_boolean(prot))
            return tx_err(err, EINVAL, "argument 'protections' must be true or false");
        inv->protections = json_is_true(prot);
        break;
    case K_CHECK:
        if (only_known(args, check_args, err) < 0 || get_string(args, "command", true, &command, err) < 0)
            return -1;
        break;
    case K_TX:
        if (!strcmp(t->name, "begin")) {
            if (only_known(args, begin_args, err) < 0 || get_name(args, false, &name, err) < 0)
                return -1;
        } else if (!strcmp(t->name, "status")) {
            if (only_known(args, no_args, err) < 0)
                return -1;
        } else if (!strcmp(t->name, "commit")) {
            if (only_known(args, commit_args, err) < 0 || get_mtx(args, true, &mtx, err) < 0 ||
                get_string(args, "verify", false, &verify, err) < 0 || get_timeout(args, &timeout, err) < 0)
                return -1;
            if (verify && (!*verify || strlen(verify) > MAX_VERIFY))
                return tx_err(err, EINVAL, "argument 'verify' must be a command of 1 to %d bytes",
                              MAX_VERIFY);
            if (timeout && !verify)
                return tx_err(err, EINVAL,
                              "argument 'timeout' limits the 'verify' command: give 'verify' too");
        } else if (!strcmp(t->name, "savepoint") || !strcmp(t->name, "rollback")) {
            if (only_known(args, sp_args, err) < 0 || get_mtx(args, true, &mtx, err) < 0 ||
                get_name(args, !strcmp(t->name, "savepoint"), &name, err) < 0)
                return -1;
        } else if (only_known(args, tx_args, err) < 0 || get_mtx(args, true, &mtx, err) < 0) { /* abort */
            return -1;
        }
        break;
    case K_HISTORY:
        if (!strcmp(t->name, "log")) {
            if (only_known(args, log_args, err) < 0)
                return -1;
            limit = json_object_get(args, "limit");
            if (limit && (!json_is_integer(limit) || json_integer_value(limit) < 1 ||
                          json_integer_value(limit) > 10000))
                return tx_err(err, EINVAL, "argument 'limit' must be a whole number from 1 to 10000");
        } else if (!strcmp(t->name, "restore")) {
            if (only_known(args, restore_args, err) < 0 || get_tx(args, true, &tx, err) < 0 ||
                get_paths(args, &paths, err) < 0)
                return -1;
        } else if (only_known(args, tx_args, err) < 0 ||
                   get_tx(args, strcmp(t->name, "undo") != 0, &tx, err) < 0) {
            return -1;
        }
        break;
    }
    if (command && !*command)
        return tx_err(err, EINVAL, "argument 'command' must not be empty");
    if (open_cwd(cfg, cwd, &inv->cwd_fd, err) < 0)
        return -1;

    push(&a, "txbox");
    push(&a, t->subcommand);
    if (t->json_flag)
        push(&a, "--json");
    push(&a, "-C");
    push(&a, cfg->workspace);
    if (cfg->policy && (t->kind == K_RUN || t->kind == K_CHECK || (verify && t->kind == K_TX))) {
        push(&a, "--policy");
        push(&a, cfg->policy);
    }
    if (timeout) {
        char buf[64];
        snprintf(buf, sizeof buf, "%.17g", json_number_value(timeout));
        push(&a, "--timeout");
        push(&a, buf);
    }
    if (limit) {
        char buf[32];
        snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(limit));
        push(&a, "-n");
        push(&a, buf);
    }
    if (net && json_is_true(net))
        push(&a, "--net");
    if (t->kind == K_RUN && mtx) {
        push(&a, "--tx");
        push(&a, mtx);
    }
    if (t->kind == K_TX && !strcmp(t->name, "begin") && name) {
        push(&a, "--name");
        push(&a, name);
    }
    if (verify) {
        push(&a, "--verify");
        push(&a, verify);
    }
    if (t->kind == K_TX && mtx) {
        push(&a, "--");
        push(&a, mtx);
        if (name)
            push(&a, name);
    }
    if (mtx)
        inv->multi_tx = xstrdup(mtx);
    inv->tee = t->kind == K_RUN;
    if (command && t->kind == K_RUN) {
        push(&a, "--shell"); /* what a shell tool runs, and what the policy reads */
        push(&a, "bash");
    }
    if (command) {
        push(&a, "-c");
        push(&a, command);
    }
    if (tx) {
        push(&a, "--");
        push(&a, tx);
    }
    size_t pi;
    json_t *pv;
    json_array_foreach(paths, pi, pv) push(&a, json_string_value(pv));
    inv->argv = a.v;
    return 0;
}

/* ---- results ----
 *
 * What a client shows the model of a result: Claude Code and Codex hand it
 * structuredContent, serialized, whenever a result has one, and the text
 * parts otherwise; Gemini CLI, qwen-code and opencode hand it the text
 * parts. So by default a result has no structuredContent (and the tools no
 * outputSchema, which would require it) and one text part: a line saying
 * what happened and what to do next, then a compact JSON object (words.h).
 * With --structured (clients that read the fields, not a model) the CLI's
 * whole object is structuredContent too, and its JSON a second text part
 * (the specification's SHOULD for structured content). */

static json_t *text_part(const char *s)
{
    json_t *t = json_string(s);
    if (!t) /* not UTF-8 (cannot happen for our own text; be safe) */
        t = json_string("(output not shown: not UTF-8)");
    return json_pack("{s:s,s:o}", "type", "text", "text", t);
}

/* The result: line, then compact as JSON (when given); with structured,
 * full as structuredContent and a second text part. Takes full and
 * compact. */
static json_t *result_of(json_t *full, const char *line, json_t *compact, bool is_error, bool structured)
{
    json_t *r = json_object();
    _cleanup_free_ char *text = compact ? words_text(line, compact) : xstrdup(line);
    json_decref(compact);
    json_t *content = json_pack("[o]", text_part(text));
    if (structured && full) {
        char *js = json_dumps(full, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (js)
            json_array_append_new(content, text_part(js));
        free(js);
        json_object_set_new(r, "structuredContent", full);
    } else {
        json_decref(full);
    }
    json_object_set_new(r, "content", content);
    json_object_set_new(r, "isError", json_boolean(is_error));
    return r;
}

json_t *mcp_error_result(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return result_of(NULL, buf, NULL, true, false);
}

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* At most `max` bytes of s, not splitting a UTF-8 sequence. */
static void add_clipped(dbuf *b, const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n <= max) {
        dbuf_addstr(b, s);
        return;
    }
    size_t cut = max;
    while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80)
        cut--;
    dbuf_add(b, s, cut);
    char tail[96];
    snprintf(tail, sizeof tail, "\n[... %zu more bytes not shown]", n - cut);
    dbuf_addstr(b, tail);
}

static json_t *run_result(json_t *o, const mcp_invocation *inv)
{
    const char *outcome = str(o, "outcome"), *mtx = inv ? inv->multi_tx : NULL;
    bool is_error = !strcmp(outcome, "blocked") || !strcmp(outcome, "rolled_back") ||
                    !strcmp(outcome, "conflict") || !strcmp(outcome, "timed_out") ||
                    !strcmp(outcome, "rejected") || !strcmp(outcome, "held");
    words_ctx c = {.front = WORDS_MCP, .mtx = mtx, .protections = inv && inv->protections};
    _cleanup_free_ char *line = words_run_line(o, &c);
    json_t *compact = words_run_compact(o, &c);
    if (mtx)
        json_object_set_new(o, "transaction", json_string(mtx));
    return result_of(o, line, compact, is_error, inv && inv->structured);
}

/* What a commit's verify command did, compact: outcome, exit code, the
 * tails of its output. */
static json_t *verify_compact(json_t *v)
{
    words_ctx c = {.front = WORDS_MCP, .out_max = 8192};
    json_t *w = words_run_compact(v, &c);
    json_object_del(w, "tx");
    return w;
}

/* The ids and facts of a transaction tool's answer the model uses, with the
 * transaction's id first, as `transaction`. */
static json_t *tx_compact(const mcp_tool *t, json_t *o)
{
    if (!strcmp(t->name, "status"))
        return json_pack("{s:O}", "transactions", json_object_get(o, "transactions") ?: json_array());
    json_t *c = json_pack("{s:s}", "transaction", str(o, "tx"));
    static const char *const keys[] = {"name",           "savepoint", "outcome",     "commands",
                                       "conflict_paths", "held_by",   "effect_rule", "reason",
                                       "suggestion",     "paths",     "losses"};
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        json_t *v = json_object_get(o, keys[i]);
        if (v && !json_is_null(v) && !(json_is_array(v) && !json_array_size(v)) &&
            !(!strcmp(keys[i], "losses") && json_integer_value(json_object_get(v, "count")) <= 0))
            json_object_set(c, keys[i], v);
    }
    json_t *ch = json_object_get(o, "changes");
    if (ch) {
        words_ctx wc = {.front = WORDS_MCP};
        json_t *tmp = json_pack("{s:s,s:O}", "outcome", "committed", "changes", ch);
        json_t *w = words_run_compact(tmp, &wc);
        if (json_object_get(w, "changes"))
            json_object_set(c, "changes", json_object_get(w, "changes"));
        json_decref(w);
        json_decref(tmp);
    }
    if (json_is_object(json_object_get(o, "verify")))
        json_object_set_new(c, "verify", verify_compact(json_object_get(o, "verify")));
    return c;
}

/* "; added a, b; ..." of a commit's changes, as a run's line says them. */
static void add_commit_changes(dbuf *b, json_t *o)
{
    words_ctx wc = {.front = WORDS_MCP};
    json_t *tmp = json_pack("{s:s,s:s,s:O}", "outcome", "committed", "tx", "", "changes",
                            json_object_get(o, "changes") ?: json_null());
    _cleanup_free_ char *l = words_run_line(tmp, &wc);
    json_decref(tmp);
    const char *semi = strchr(l, ';'); /* after "committed tx  (exit 0)" */
    if (semi)
        dbuf_addstr(b, semi);
}

/* begin, savepoint, rollback, commit, abort, status: a line for the model
 * saying what happened and what to do next, and the compact facts. */
static json_t *tx_result(const mcp_tool *t, json_t *o, int code, bool structured)
{
    dbuf b;
    dbuf_init(&b, 0);
    char line[1024];
    bool is_error = false;
    const char *id = str(o, "tx");
    if (!strcmp(t->name, "begin")) {
        snprintf(line, sizeof line,
                 "transaction %s is open. Pass \"tx\": \"%s\" to `run` for each command of the task; "
                 "then `commit` it with \"tx\": \"%s\" (nothing reaches the workspace before) or `abort` it.",
                 id, id, id);
        dbuf_addstr(&b, line);
    } else if (!strcmp(t->name, "savepoint")) {
        snprintf(line, sizeof line,
                 "savepoint %s marked in transaction %s; `rollback` with this name returns to it.",
                 str(o, "savepoint"), id);
        dbuf_addstr(&b, line);
    } else if (!strcmp(t->name, "rollback")) {
        if (*str(o, "savepoint"))
            snprintf(line, sizeof line, "transaction %s rolled back to savepoint %s; it stays open.", id,
                     str(o, "savepoint"));
        else
            snprintf(line, sizeof line,
                     "transaction %s rolled back to its start (nothing staged); it stays open.", id);
        dbuf_addstr(&b, line);
    } else if (!strcmp(t->name, "abort")) {
        snprintf(line, sizeof line, "transaction %s aborted: nothing of it was applied; it is closed.", id);
        dbuf_addstr(&b, line);
    } else if (!strcmp(t->name, "status")) {
        size_t n = json_array_size(json_object_get(o, "transactions"));
        snprintf(line, sizeof line, n ? "%zu open transaction%s" : "no open transactions", n,
                 n == 1 ? "" : "s");
        dbuf_addstr(&b, line);
    } else { /* commit */
        const char *outcome = str(o, "outcome");
        if (!strcmp(outcome, "committed")) {
            long long n = (long long)json_integer_value(json_object_get(o, "commands"));
            snprintf(line, sizeof line,
                     "committed transaction %s (%lld command%s): its changes are now in the workspace", id, n,
                     n == 1 ? "" : "s");
            dbuf_addstr(&b, line);
            add_commit_changes(&b, o);
            if (words_losses(&b, o)) {
                snprintf(line, sizeof line, "; to bring it back call the `undo` tool with tx \"%s\"", id);
                dbuf_addstr(&b, line);
            }
        } else if (!strcmp(outcome, "verify_failed")) {
            is_error = true;
            json_t *v = json_object_get(o, "verify");
            snprintf(line, sizeof line,
                     "not committed: the verify command %s (exit status %lld). Nothing was applied and "
                     "transaction %s stays open: fix the cause with `run` and \"tx\": \"%s\", then `commit` "
                     "again, or `abort`.",
                     !strcmp(str(v, "outcome"), "blocked") ? "was blocked by the policy" : "failed",
                     (long long)json_integer_value(json_object_get(v, "exit_code")), id, id);
            dbuf_addstr(&b, line);
        } else if (!strcmp(outcome, "conflict")) {
            is_error = true;
            if (*str(o, "held_by"))
                snprintf(line, sizeof line,
                         "conflict: transaction %s, which txbox could neither finish nor roll back, "
                         "holds a path of transaction %s, so nothing of it was applied and it is "
                         "closed (its changes are kept aside in .txbox/tx/%s/upper). A person must "
                         "fix what `txbox recover` reports; until then, change other files only.",
                         str(o, "held_by"), id, id);
            else
                snprintf(line, sizeof line,
                         "conflict: another transaction changed the same paths since `begin`, so "
                         "nothing of transaction %s was applied and it is closed (its changes are "
                         "kept aside in .txbox/tx/%s/upper). Begin a new transaction and redo the "
                         "work on the current files.",
                         id, id);
            dbuf_addstr(&b, line);
        } else if (!strcmp(outcome, "held") || !strcmp(outcome, "rejected")) {
            /* a rule on effects judged the write set; the transaction ended */
            is_error = true;
            if (!strcmp(outcome, "held"))
                snprintf(line, sizeof line,
                         "held for review: effect rule %s (%s). Nothing is applied until a person runs "
                         "`txbox approve %s` (or `txbox reject %s`); the transaction is closed.",
                         str(o, "effect_rule"), str(o, "reason"), id, id);
            else
                snprintf(line, sizeof line,
                         "rejected: effect rule %s (%s). Nothing of transaction %s was applied and it is "
                         "closed.",
                         str(o, "effect_rule"), str(o, "reason"), id);
            dbuf_addstr(&b, line);
        } else {
            is_error = code != 0;
            snprintf(line, sizeof line, "commit of transaction %s: %s (exit status %d)", id, outcome, code);
            dbuf_addstr(&b, line);
        }
    }
    json_t *r = result_of(o, dbuf_str(&b), tx_compact(t, o), is_error, structured);
    dbuf_free(&b);
    return r;
}

static json_t *check_result(json_t *o, bool structured)
{
    char line[1400];
    const char *v = str(o, "verdict");
    if (!strcmp(v, "unsafe"))
        snprintf(line, sizeof line, "unsafe (rule %s): %s. `run` would block it; instead: %s", str(o, "rule"),
                 str(o, "reason"), str(o, "suggestion"));
    else
        snprintf(line, sizeof line, "%s (rule %s): %s; %s", v, str(o, "rule"), str(o, "reason"),
                 !strcmp(v, "safe") ? "`run` executes it read-only, without a transaction"
                                    : "`run` executes it as a transaction");
    json_t *c = json_deep_copy(o);
    json_object_del(c, "command");
    return result_of(o, line, c, false, structured);
}

/* One line per transaction of a `txbox log --json` array; false when the
 * value is not such an array. */
static bool log_lines(dbuf *b, json_t *arr)
{
    if (!json_is_array(arr))
        return false;
    if (!json_array_size(arr))
        dbuf_addstr(b, "no transactions yet");
    size_t i;
    json_t *t;
    json_array_foreach(arr, i, t)
    {
        if (b->len > 32768) {
            dbuf_addstr(b, "\n[... more in structuredContent]");
            break;
        }
        json_t *cmd = json_object_get(t, "command");
        char line[400];
        snprintf(line, sizeof line, "%stx %s %s exit %lld (+%lld ~%lld -%lld): ", i ? "\n" : "", str(t, "tx"),
                 str(t, "outcome"), (long long)json_integer_value(json_object_get(t, "exit_code")),
                 (long long)json_integer_value(json_object_get(t, "n_added")),
                 (long long)json_integer_value(json_object_get(t, "n_modified")),
                 (long long)json_integer_value(json_object_get(t, "n_deleted")));
        dbuf_addstr(b, line);
        add_clipped(b, json_is_string(cmd) ? json_string_value(cmd) : "(argv)", 200);
    }
    return true;
}

json_t *mcp_tool_result(const mcp_tool *t, const mcp_invocation *inv, int wstatus, const char *out,
                        size_t outlen, const char *errtext, size_t errlen)
{
    (void)errlen;
    char eline[512];
    if (WIFSIGNALED(wstatus))
        return mcp_error_result("txbox %s was killed by signal %d%s%s", t->subcommand, WTERMSIG(wstatus),
                                *errtext ? ": " : "", answer_first_line(errtext, eline, sizeof eline));
    int code = WEXITSTATUS(wstatus);
    json_t *v = answer_parse(out, outlen);
    json_t *error = json_is_object(v) ? json_object_get(v, "error") : NULL;
    if (error && code != 0) {
        json_t *r =
            mcp_error_result("txbox %s: %s", t->subcommand, answer_why(v, errtext, eline, sizeof eline));
        json_decref(v);
        return r;
    }
    switch (t->kind) {
    case K_RUN:
        if (answer_is_run(v))
            return run_result(v, inv);
        break;
    case K_TX:
        if (json_is_object(v) && (code == 0 || !strcmp(t->name, "commit")) &&
            (json_is_string(json_object_get(v, "tx")) || !strcmp(t->name, "status")))
            return tx_result(t, v, code, inv && inv->structured);
        break;
    case K_CHECK:
        if (code == 0 && json_is_object(v) && json_is_string(json_object_get(v, "verdict")))
            return check_result(v, inv && inv->structured);
        break;
    case K_HISTORY:
        if (v) {
            if (!json_is_object(v))
                v = json_pack("{s:o}", t->list_key, v);
            dbuf b;
            dbuf_init(&b, 0);
            if (!log_lines(&b, json_object_get(v, "transactions"))) {
                char *pretty = json_dumps(v, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
                add_clipped(&b, pretty ? pretty : "", 32768);
                free(pretty);
            }
            json_t *r = result_of(v, dbuf_str(&b), NULL, code != 0, inv && inv->structured);
            dbuf_free(&b);
            return r;
        }
        if (code == 0 && outlen) {
            json_t *s = json_stringn(out, outlen);
            if (s) {
                dbuf b;
                dbuf_init(&b, 0);
                add_clipped(&b, json_string_value(s), 32768);
                json_t *r = result_of(json_pack("{s:o}", t->list_key, s), dbuf_str(&b), NULL, false,
                                      inv && inv->structured);
                dbuf_free(&b);
                return r;
            }
        }
        break;
    }
    json_decref(v);
    return mcp_error_result("txbox %s failed (exit status %d)%s%s", t->subcommand, code, *errtext ? ": " : "",
                            answer_first_line(errtext, eline, sizeof eline));
}
