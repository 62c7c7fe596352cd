/* What the model is told: the system prompt and the tool definitions. Kept
 * short: small local models have small context windows. */
#include "agent.h"

static const char outcomes[] =
    "Every command runs as a transaction in a sandbox (txbox), starting in the workspace "
    "directory. Each result is a compact JSON object; its outcome means:\n"
    "- committed: it exited 0 and its file changes are now in the workspace.\n"
    "- rolled_back: it failed (non-zero exit_code), so ALL its changes were discarded and the "
    "workspace is exactly as before: a failed command leaves no trace, nothing to clean up. "
    "Read stderr, fix the cause, then run a corrected command.\n"
    "- blocked: the policy refused it and it never ran; rule, reason and suggestion say why. "
    "Do not retry it or a disguised variant: follow the suggestion or take another way.\n"
    "- conflict: it succeeded, but the same files changed meanwhile; its changes were set "
    "aside. Re-read the files and redo the change.\n"
    "- timed_out: killed at the time limit and rolled back.\n"
    "- read_only: a read-only command (it ran without a transaction); nothing changed.\n"
    "Results show the changed paths and the tail of stdout/stderr. There is no network and no "
    "terminal: do not start editors or interactive programs; write files with shell "
    "redirections or heredocs. Repeating a blocked command, or a failed one without changing "
    "anything first, gives the same result.\n";

static const char tools_intro[] =
    "You are a coding agent working in a workspace. Act only by calling tools, one step at a "
    "time: run_command to run a shell command, undo to revert a committed transaction (by its "
    "tx id; default the last one), finish with a short summary when the task is done or cannot "
    "be done.\n";

static const char text_intro[] =
    "You are a coding agent working in a workspace. Act one step at a time: end every reply "
    "with exactly one action block, then wait for its result, which comes back as a message "
    "starting with \"Result:\". The action blocks are:\n"
    "```run\n"
    "a shell command (it may span lines)\n"
    "```\n"
    "```undo\n"
    "```\n"
    "(reverts the last committed transaction; put a tx id inside to pick another)\n"
    "```finish\n"
    "a short summary of what was done\n"
    "```\n"
    "The opening line is three backticks and the word run, undo or finish; the block ends at a "
    "line holding only three backticks. Other code blocks are not run.\n";

/* The task as one transaction (the default): what changes for the model. */
static const char tx_outcomes[] =
    "The whole task is one transaction (txbox): every command runs in a sandbox, starting in the "
    "workspace directory, and sees the changes of the earlier ones, but nothing reaches the "
    "workspace until you finish; if the run ends any other way, all of it is discarded. Each "
    "result is a compact JSON object; its outcome means:\n"
    "- staged: it exited 0 and its file changes are kept in the task's transaction; later "
    "commands see them, and they are applied when you finish.\n"
    "- rolled_back: it failed (non-zero exit_code), so ALL its own changes were discarded; what "
    "earlier commands staged is kept. Read stderr, fix the cause, then run a corrected command.\n"
    "- blocked: the policy refused it and it never ran; rule, reason and suggestion say why. "
    "Do not retry it or a disguised variant: follow the suggestion or take another way.\n"
    "- timed_out: killed at the time limit and rolled back.\n"
    "Results show the changed paths and the tail of stdout/stderr. There is no network and no "
    "terminal: do not start editors or interactive programs; write files with shell "
    "redirections or heredocs. Repeating a blocked command, or a failed one without changing "
    "anything first, gives the same result.\n";

static const char tx_tools_intro[] =
    "You are a coding agent working in a workspace. Act only by calling tools, one step at a "
    "time: run_command to run a shell command; savepoint to mark the current state under a "
    "name; rollback to discard the changes staged since a savepoint (or, without a name, all "
    "of them); finish with a short summary when the task is done, which applies your changes "
    "to the workspace, or when it cannot be done.\n";

static const char tx_text_intro[] =
    "You are a coding agent working in a workspace. Act one step at a time: end every reply "
    "with exactly one action block, then wait for its result, which comes back as a message "
    "starting with \"Result:\". The action blocks are:\n"
    "```run\n"
    "a shell command (it may span lines)\n"
    "```\n"
    "```savepoint\n"
    "a name\n"
    "```\n"
    "(marks the current state under that name)\n"
    "```rollback\n"
    "```\n"
    "(discards every change staged so far; put a savepoint name inside to go back to it instead)\n"
    "```finish\n"
    "a short summary of what was done\n"
    "```\n"
    "(applies your changes to the workspace and ends the task)\n"
    "The opening line is three backticks and the action word; the block ends at a line holding "
    "only three backticks. Other code blocks are not run.\n";

char *agent_system_prompt(agent_protocol p, bool tx, const char *verify)
{
    if (!tx)
        return xasprintf("%s%s", p == PROTO_TEXT ? text_intro : tools_intro, outcomes);
    if (verify)
        return xasprintf("%s%sWhen you finish, the check `%s` runs first on the result: your changes are "
                         "applied only if it passes; if it fails you get its output, the changes stay "
                         "staged, and you can fix them and finish again.\n",
                         p == PROTO_TEXT ? tx_text_intro : tx_tools_intro, tx_outcomes, verify);
    return xasprintf("%s%s", p == PROTO_TEXT ? tx_text_intro : tx_tools_intro, tx_outcomes);
}

/* One function tool with at most one string parameter. */
static json_t *tool(const char *name, const char *desc, const char *param, const char *pdesc, bool required)
{
    json_t *params = json_pack("{s:s,s:{}}", "type", "object", "properties");
    if (param) {
        json_object_set_new(json_object_get(params, "properties"), param,
                            json_pack("{s:s,s:s}", "type", "string", "description", pdesc));
        if (required)
            json_object_set_new(params, "required", json_pack("[s]", param));
    }
    return json_pack("{s:s,s:{s:s,s:s,s:o}}", "type", "function", "function", "name", name, "description",
                     desc, "parameters", params);
}

json_t *agent_tool_defs(bool tx)
{
    if (tx)
        return json_pack(
            "[o,o,o,o]",
            tool("run_command",
                 "Run one shell command (sh -c) in the task's transaction: if it exits 0 its changes are "
                 "staged (applied at finish), otherwise only its own changes are discarded.",
                 "command", "the shell command", true),
            tool("savepoint", "Mark the task's current state under a name, to roll back to later.", "name",
                 "letters, digits, '.', '_', '-'", true),
            tool("rollback",
                 "Discard the changes staged since a savepoint (kept), or without a name all of them.",
                 "name", "a savepoint name; default: the start of the task", false),
            tool("finish",
                 "End the task with a short summary: applies the staged changes to the workspace (or "
                 "say why the task cannot be done).",
                 "summary", "what was done", true));
    return json_pack(
        "[o,o,o]",
        tool("run_command",
             "Run one shell command (sh -c) in the workspace as a transaction: committed if it exits "
             "0, rolled back otherwise.",
             "command", "the shell command", true),
        tool("undo", "Revert a committed transaction.", "tx", "its tx id; default: the last committed one",
             false),
        tool("finish", "End the task with a short summary of what was done (or why it cannot be done).",
             "summary", "what was done", true));
}
