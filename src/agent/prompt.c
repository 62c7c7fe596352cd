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

char *agent_system_prompt(agent_protocol p)
{
    return xasprintf("%s%s", p == PROTO_TEXT ? text_intro : tools_intro, outcomes);
}

json_t *agent_tool_defs(void)
{
    return json_pack(
        "[{s:s,s:{s:s,s:s,s:{s:s,s:{s:{s:s,s:s}},s:[s]}}},"
        " {s:s,s:{s:s,s:s,s:{s:s,s:{s:{s:s,s:s}}}}},"
        " {s:s,s:{s:s,s:s,s:{s:s,s:{s:{s:s,s:s}},s:[s]}}}]",
        "type", "function", "function", "name", "run_command", "description",
        "Run one shell command (sh -c) in the workspace as a transaction: committed if it exits "
        "0, rolled back otherwise.",
        "parameters", "type", "object", "properties", "command", "type", "string", "description",
        "the shell command", "required", "command",
        "type", "function", "function", "name", "undo", "description",
        "Revert a committed transaction.", "parameters", "type", "object", "properties", "tx",
        "type", "string", "description", "its tx id; default: the last committed one",
        "type", "function", "function", "name", "finish", "description",
        "End the task with a short summary of what was done (or why it cannot be done).",
        "parameters", "type", "object", "properties", "summary", "type", "string", "description",
        "what was done", "required", "summary");
}
