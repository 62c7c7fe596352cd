/* txbox hook: a pre-tool-use hook for agent CLIs.
 *
 *   txbox hook claude-code [-C DIR] [--policy FILE]   (Claude Code PreToolUse)
 *   txbox hook gemini-cli  [-C DIR] [--policy FILE]   (Gemini CLI BeforeTool)
 *
 * Reads the agent's hook input (JSON) on stdin. A shell tool call is
 * classified with the policy:
 *   unsafe     denied; the reason and the suggestion are shown to the model
 *   uncertain  allowed, with the command rewritten (updatedInput /
 *              hookSpecificOutput.tool_input) to run through `txbox run`,
 *              which makes its effect a transaction
 *   safe       allowed as it is
 * Other tools pass (no decision). Everything that goes wrong (input that is
 * not JSON or lacks the fields, a policy that does not load, a bad option)
 * fails closed: a one-line "txbox hook: ..." on stderr and exit status 2,
 * which both CLIs read as "block this tool call" and show to the model. The
 * hook never exits with another non-zero status, since those read as
 * "allow". Formats and sources: docs/mcp.md, section "Hooks". */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "../cmds.h"
#include "txbox_policy.h"
#include "util.h"

#define HOOK_BLOCK 2               /* the status both CLIs read as "deny" */
#define HOOK_INPUT_CAP (64u << 20) /* a Write of a large file still fits */

typedef enum { AGENT_CLAUDE, AGENT_GEMINI } agent;

static const struct agent_info {
    const char *name;
    const char *event;       /* hook_event_name it is registered for */
    const char *shell_tool;  /* the tool whose command we classify */
    const char *project_env; /* the project directory the CLI exports */
} agents[] = {
    [AGENT_CLAUDE] = {"claude-code", "PreToolUse", "Bash", "CLAUDE_PROJECT_DIR"},
    [AGENT_GEMINI] = {"gemini-cli", "BeforeTool", "run_shell_command", "GEMINI_PROJECT_DIR"},
};

/* Fail closed: the message on stderr, status 2. */
static int block(const char *fmt, ...) PRINTF(1, 2);
static int block(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("txbox hook: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return HOOK_BLOCK;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: txbox hook claude-code|gemini-cli [-C DIR] [--policy FILE]\n"
               "\nA pre-tool-use hook: reads the agent CLI's hook input on stdin and answers\n"
               "with its decision on stdout. Shell commands the policy judges unsafe are denied,\n"
               "uncertain ones are rewritten to run through 'txbox run' (a transaction), safe\n"
               "ones are allowed; other tools pass. Any error denies (exit status 2).\n"
               "DIR: the workspace (default: $CLAUDE_PROJECT_DIR or $GEMINI_PROJECT_DIR, else\n"
               "the input's cwd). See docs/mcp.md.\n");
}

/* 'text' for sh, with ' written as '\'' (the command stays byte for byte). */
static void sh_quote(dbuf *b, const char *s)
{
    dbuf_add(b, "'", 1);
    for (const char *p = s; *p; p++) {
        if (*p == '\'')
            dbuf_addstr(b, "'\\''");
        else
            dbuf_add(b, p, 1);
    }
    dbuf_add(b, "'", 1);
}

/* Prints the decision object and returns 0, or fails closed. */
static int emit(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!s)
        return block("cannot encode the decision as JSON");
    int bad = puts(s) == EOF || fflush(stdout) == EOF;
    free(s);
    return bad ? block("cannot write the decision: %s", strerror(errno)) : 0;
}

static int decide(agent a, const char *decision, const char *reason, json_t *updated)
{
    json_t *o;
    if (a == AGENT_CLAUDE) {
        json_t *h = json_pack("{s:s,s:s,s:s}", "hookEventName", "PreToolUse", "permissionDecision", decision,
                              "permissionDecisionReason", reason);
        if (h && updated)
            json_object_set_new(h, "updatedInput", updated);
        else
            json_decref(updated);
        o = json_pack("{s:o*}", "hookSpecificOutput", h);
    } else {
        o = json_pack("{s:s,s:s}", "decision", decision, "reason", reason);
        if (o && updated)
            json_object_set_new(o, "hookSpecificOutput",
                                json_pack("{s:s,s:o}", "hookEventName", "BeforeTool", "tool_input", updated));
        else
            json_decref(updated);
    }
    if (!o)
        return block("cannot build the decision (reason not UTF-8?)");
    return emit(o);
}

static char *read_stdin(size_t *len, int *err)
{
    dbuf b;
    dbuf_init(&b, HOOK_INPUT_CAP);
    char buf[65536];
    for (;;) {
        ssize_t n = read(0, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            *err = errno;
            dbuf_free(&b);
            return NULL;
        }
        if (n == 0)
            break;
        dbuf_add(&b, buf, (size_t)n);
        if (b.dropped) {
            *err = EFBIG;
            dbuf_free(&b);
            return NULL;
        }
    }
    *len = b.len;
    if (!b.p)
        return xstrdup("");
    return b.p;
}

/* The decision for one parsed hook input. */
static int handle(agent a, json_t *in, const char *dir, const char *policy)
{
    const struct agent_info *ai = &agents[a];
    json_t *event = json_object_get(in, "hook_event_name");
    json_t *tool = json_object_get(in, "tool_name");
    json_t *tinput = json_object_get(in, "tool_input");
    if (event && (!json_is_string(event) || strcmp(json_string_value(event), ai->event)))
        return block("this hook handles %s events, not '%.64s'; register it under %s", ai->event,
                   json_is_string(event) ? json_string_value(event) : "?", ai->event);
    if (!json_is_string(tool) || !json_is_object(tinput))
        return block("the %s hook input lacks tool_name (a string) or tool_input (an object)", ai->event);
    const char *tname = json_string_value(tool);
    if (a == AGENT_CLAUDE && !strcmp(tname, "PowerShell"))
        return block("txbox cannot classify PowerShell commands; use the Bash tool");
    if (strcmp(tname, ai->shell_tool)) {
        /* not a shell command: no decision, the CLI's own rules apply */
        return a == AGENT_GEMINI ? emit(json_object()) : 0;
    }
    json_t *jcmd = json_object_get(tinput, "command");
    if (!json_is_string(jcmd))
        return block("the %s tool input has no command string", tname);
    const char *cmd = json_string_value(jcmd);
    size_t cmdlen = json_string_length(jcmd);
    if (strlen(cmd) != cmdlen)
        return block("the command contains a NUL byte; it cannot be run safely");

    /* The workspace: -C, else the project directory the CLI exports, else
     * the input's cwd. */
    const char *wsdir = dir;
    if (!wsdir)
        wsdir = getenv(ai->project_env);
    if (!wsdir || !*wsdir)
        wsdir = json_string_value(json_object_get(in, "cwd"));
    if (!wsdir || !*wsdir)
        wsdir = ".";
    _cleanup_free_ char *ws = realpath(wsdir, NULL);
    if (!ws)
        return block("workspace '%.200s': %s", wsdir, strerror(errno));
    _cleanup_free_ char *pol_path = NULL;
    if (policy && !(pol_path = realpath(policy, NULL)))
        return block("policy '%.200s': %s", policy, strerror(errno));
    txbox_policy *pol = NULL;
    txbox_error err = {0};
    if (txbox_policy_load(pol_path, ws, &pol, &err) < 0)
        return block("cannot load the policy, so every command is denied: %s", err.msg);
    cli_policy_notes(pol);
    txbox_verdict v;
    int crc = txbox_policy_check(pol, cmd, cmdlen, &v, &err);
    txbox_policy_free(pol);
    if (crc < 0)
        return block("cannot classify the command: %s", err.msg);

    char reason[1400];
    switch (v.verdict) {
    case TXBOX_VERDICT_UNSAFE:
        if (v.suggestion[0])
            snprintf(reason, sizeof reason, "txbox blocked this command (rule %s): %s. Instead: %s", v.rule,
                     v.reason, v.suggestion);
        else
            snprintf(reason, sizeof reason, "txbox blocked this command (rule %s): %s", v.rule, v.reason);
        return decide(a, "deny", reason, NULL);
    case TXBOX_VERDICT_SAFE:
        snprintf(reason, sizeof reason, "txbox: read-only command (rule %s)", v.rule);
        return decide(a, "allow", reason, NULL);
    default:
        break;
    }
    {
        _cleanup_free_ char *self = realpath("/proc/self/exe", NULL);
        if (!self)
            return block("cannot find the txbox binary: %s", strerror(errno));
        dbuf b;
        dbuf_init(&b, 0);
        sh_quote(&b, self);
        dbuf_addstr(&b, " run -C ");
        sh_quote(&b, ws);
        if (pol_path) {
            dbuf_addstr(&b, " --policy ");
            sh_quote(&b, pol_path);
        }
        dbuf_addstr(&b, " -c ");
        sh_quote(&b, cmd);
        /* Claude Code replaces the whole input (keep the other fields);
         * Gemini CLI merges what we give into it. */
        json_t *upd = a == AGENT_CLAUDE ? json_deep_copy(tinput) : json_object();
        json_object_set_new(upd, "command", json_stringn(dbuf_str(&b), b.len));
        dbuf_free(&b);
        snprintf(reason, sizeof reason, "txbox: runs as a transaction (rule %s: %s)", v.rule, v.reason);
        return decide(a, "allow", reason, upd);
    }
}

int cmd_hook(int argc, char **argv)
{
    static const struct option opts[] = {
        {"policy", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 2)
        return block("which agent CLI? use 'txbox hook claude-code' or 'txbox hook gemini-cli'");
    agent a;
    if (!strcmp(argv[1], "claude-code"))
        a = AGENT_CLAUDE;
    else if (!strcmp(argv[1], "gemini-cli"))
        a = AGENT_GEMINI;
    else
        return block("unknown agent CLI '%s' (use claude-code or gemini-cli)", argv[1]);
    const struct agent_info *ai = &agents[a];

    const char *dir = NULL, *policy = NULL;
    int c;
    optind = 1;
    opterr = 0;
    argc--, argv++;
    while ((c = getopt_long(argc, argv, "+C:h", opts, NULL)) != -1) {
        switch (c) {
        case 'C': dir = optarg; break;
        case 'p': policy = optarg; break;
        case 'h': usage(stdout); return 0;
        default: return block("unknown option or missing value '%s' (see 'txbox hook --help')", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return block("unexpected argument '%s'", argv[optind]);

    size_t len = 0;
    int rerr = 0;
    _cleanup_free_ char *input = read_stdin(&len, &rerr);
    if (!input && rerr == EFBIG)
        return block("the hook input is larger than %u bytes", HOOK_INPUT_CAP);
    if (!input)
        return block("cannot read the hook input: %s", strerror(rerr));
    json_error_t je;
    json_t *in = json_loadb(input, len, 0, &je);
    if (!json_is_object(in)) {
        json_decref(in);
        return block("cannot parse the %s hook input as a JSON object (%s); denying the tool call", ai->event,
                     in ? "not an object" : je.text);
    }
    int rc = handle(a, in, dir, policy);
    json_decref(in);
    return rc;
}
