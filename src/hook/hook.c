/* txbox hook: a pre-tool-use hook for agent CLIs.
 *
 *   txbox hook claude-code|gemini-cli|qwen-code [-C DIR] [--policy FILE]
 *              [--trust-safe] [--pass-tool GLOB]...
 *
 * Reads the agent's hook input (JSON) on stdin. A shell tool call is
 * classified with the policy (read as bash: the shell each CLI's tool runs):
 *   unsafe     denied; the reason and the suggestion are shown to the model
 *   uncertain  allowed, with the command rewritten (updatedInput /
 *              hookSpecificOutput.tool_input) to run through `txbox run`,
 *              which makes its effect a transaction
 *   safe       the same rewrite with --read-only: it runs in the sandbox,
 *              secrets hidden, environment scrubbed; with --trust-safe it
 *              is allowed as it is (the CLI runs it on the host)
 * In plan mode (permission_mode "plan") only safe commands run. A host
 * that cannot rewrite (qwen-code ignores updatedInput) gets a denial for
 * every command it cannot run as it is, telling the model to use the
 * txbox MCP `run` tool. The command's directory (dir_path or directory of
 * the tool input, else the input's cwd) must lie in the workspace.
 * Other tools pass (no decision), except an unknown tool whose input
 * carries a command string: denied, unless --pass-tool names it (txbox's
 * own MCP tools pass by default). Everything that goes wrong (input that is
 * not JSON or lacks the fields, a policy that does not load, a bad option)
 * fails closed: a one-line "txbox hook: ..." on stderr and exit status 2,
 * which the CLIs read as "block this tool call" and show to the model. The
 * hook never exits with another non-zero status, since those read as
 * "allow". The input's session_id maps onto a txbox session (session_of)
 * the rewritten command runs in, and Claude Code's shell follows its cd.
 * Formats and sources: docs/mcp.md, section "Hooks". */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "../cmds.h"
#include "txbox_policy.h"
#include "util.h"

#define HOOK_BLOCK 2               /* the status both CLIs read as "deny" */
#define HOOK_INPUT_CAP (64u << 20) /* a Write of a large file still fits */
#define MAX_PASS 32

typedef enum { AGENT_CLAUDE, AGENT_GEMINI, AGENT_QWEN } agent;

static const struct agent_info {
    const char *name;
    const char *event;       /* hook_event_name it is registered for */
    const char *project_env; /* the project directory the CLI exports */
} agents[] = {
    [AGENT_CLAUDE] = {"claude-code", "PreToolUse", "CLAUDE_PROJECT_DIR"},
    [AGENT_GEMINI] = {"gemini-cli", "BeforeTool", "GEMINI_PROJECT_DIR"},
    [AGENT_QWEN] = {"qwen-code", "PreToolUse", "QWEN_PROJECT_DIR"},
};

/* The shell tools of every CLI txbox documents; each runs `bash -c`
 * (Claude Code's Bash tool: bash; Gemini CLI and qwen-code: `bash -c` on
 * Linux and macOS). A call is rewritten only where the host is known to
 * run the rewritten input: Claude Code's Bash (updatedInput replaces the
 * input) and Gemini CLI's run_shell_command (tool_input is the call). */
static const struct shell_tool {
    const char *tool;
    agent host; /* the CLI whose tool it is */
    bool rewrites;
} shell_tools[] = {
    {"Bash", AGENT_CLAUDE, true},
    {"run_shell_command", AGENT_GEMINI, true},
    {"run_shell_command", AGENT_QWEN, false},
};

/* txbox's own MCP tools as each CLI names them: they judge themselves */
static const char *const default_pass[] = {"mcp__txbox__*", "mcp_txbox_*", "txbox__*"};

typedef struct hook_opts {
    const char *dir, *policy;
    bool trust_safe;
    const char *pass[MAX_PASS + 1];
    size_t npass;
} hook_opts;

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
    fprintf(f, "usage: txbox hook claude-code|gemini-cli|qwen-code [-C DIR] [--policy FILE]\n"
               "                  [--trust-safe] [--pass-tool GLOB]...\n"
               "\nA pre-tool-use hook: reads the agent CLI's hook input on stdin and answers\n"
               "with its decision on stdout. Shell commands the policy judges unsafe are denied;\n"
               "every other one is rewritten to run through 'txbox run --shell bash' (a safe one\n"
               "with --read-only: in the sandbox, secrets hidden, environment scrubbed). With\n"
               "--trust-safe a safe command is allowed as it is: the CLI runs it on the host.\n"
               "In plan mode only safe commands run. Where the host cannot rewrite (qwen-code),\n"
               "a command that would need it is denied with a pointer to the txbox MCP 'run'\n"
               "tool. The command's directory (dir_path, directory, else the input's cwd) must\n"
               "lie in the workspace. Other tools pass, except an unknown tool with a command\n"
               "string (denied unless --pass-tool matches its name; txbox's own MCP tools pass).\n"
               "The input's session_id names a txbox session the commands run in (txbox session):\n"
               "/tmp, the loopback and background processes carry over from one to the next;\n"
               "Claude Code's shell follows the command's cd within the workspace. Registered\n"
               "for SessionEnd too, it ends that session with the CLI's (else: 30 minutes idle).\n"
               "Any error denies (exit status 2).\n"
               "DIR: the workspace (default: $CLAUDE_PROJECT_DIR, $GEMINI_PROJECT_DIR or\n"
               "$QWEN_PROJECT_DIR, else the input's cwd). See docs/mcp.md.\n");
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

/* The decision in the format of the event's protocol: Gemini CLI's
 * BeforeTool, else Claude Code's PreToolUse (which qwen-code speaks). */
static int decide(bool gemini, const char *decision, const char *reason, json_t *updated)
{
    json_t *o;
    if (!gemini) {
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

/* The directory the command runs in: the tool input's dir_path (Gemini
 * CLI) or directory (qwen-code, older Gemini CLI), relative to the
 * workspace, else the input's cwd (Claude Code's shell), else the
 * workspace. NULL (and a message in why) when it is not a directory in
 * the workspace outside .txbox/. */
static char *command_dir(json_t *in, json_t *tinput, const char *ws, char *why, size_t whylen)
{
    const char *keys[] = {"dir_path", "directory"}, *d = NULL, *key = "cwd";
    for (size_t i = 0; i < ARRAY_SIZE(keys) && !d; i++) {
        json_t *v = json_object_get(tinput, keys[i]);
        if (v && (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))) {
            snprintf(why, whylen, "the tool input's %s is not a string", keys[i]);
            return NULL;
        }
        if (v && *json_string_value(v))
            d = json_string_value(v), key = keys[i];
    }
    _cleanup_free_ char *joined = NULL;
    if (d)
        joined = d[0] == '/' ? xstrdup(d) : xasprintf("%s/%s", ws, d);
    else if (json_is_string(json_object_get(in, "cwd")) && *json_string_value(json_object_get(in, "cwd")))
        joined = xstrdup(json_string_value(json_object_get(in, "cwd")));
    else
        return xstrdup(ws);
    char *real = realpath(joined, NULL);
    if (!real) {
        snprintf(why, whylen, "the command's directory (%s) '%.200s': %s", key, joined, strerror(errno));
        return NULL;
    }
    const char *rest = real + (strcmp(ws, "/") ? strlen(ws) : 0);
    if (!path_under(real, ws) || (!strncmp(rest, "/.txbox", 7) && (rest[7] == 0 || rest[7] == '/'))) {
        snprintf(why, whylen, "the command's directory (%s) '%.200s' is not in the workspace %.200s", key,
                 real, ws);
        free(real);
        return NULL;
    }
    return real;
}

static bool passes(const hook_opts *o, const char *tool)
{
    for (size_t i = 0; i < ARRAY_SIZE(default_pass); i++)
        if (!fnmatch(default_pass[i], tool, 0))
            return true;
    for (size_t i = 0; i < o->npass; i++)
        if (!fnmatch(o->pass[i], tool, 0))
            return true;
    return false;
}

/* A string argument under a name that says it is a command to run. */
static const char *command_arg(json_t *tinput)
{
    static const char *const keys[] = {"command", "cmd", "commands", "script", "shell_command"};
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        json_t *v = json_object_get(tinput, keys[i]);
        if (json_is_string(v) || json_is_array(v))
            return keys[i];
    }
    return NULL;
}

/* The workspace: -C, else the project directory the CLI exports, else
 * the input's cwd; resolved, or NULL (errno set). */
static char *workspace(const struct agent_info *ai, const hook_opts *ho, json_t *in)
{
    const char *wsdir = ho->dir;
    if (!wsdir)
        wsdir = getenv(ai->project_env);
    if (!wsdir || !*wsdir)
        wsdir = json_string_value(json_object_get(in, "cwd"));
    if (!wsdir || !*wsdir)
        wsdir = ".";
    return realpath(wsdir, NULL);
}

/* A command the hook denies goes into the workspace's audit log as a
 * blocked transaction, as txbox run records one (README: "every
 * transaction, blocked ones included"). Best effort: the denial stands
 * whatever happens here; only the denial's path pays for it. */
static void audit_block(const struct agent_info *ai, const hook_opts *ho, json_t *in, json_t *tinput,
                        const char *cmd, const char *verdict, const char *rule, const char *reason)
{
    _cleanup_free_ char *ws = workspace(ai, ho, in);
    if (!ws || !cmd || !*cmd)
        return;
    char why[700];
    _cleanup_free_ char *cdir = command_dir(in, tinput, ws, why, sizeof why);
    txbox_ws *w = NULL;
    txbox_error err = {0};
    txbox_result *r = NULL;
    txbox_run_opts o = {.shell = cmd, .cwd = cdir ? cdir : ws};
    if (txbox_ws_open(ws, TXBOX_WS_CREATE | TXBOX_WS_NO_RECOVER, &w, &err) < 0 ||
        txbox_run_refused(w, &o, verdict, rule, reason, &r, &err) < 0)
        fprintf(stderr, "txbox hook: the denial is not in the audit log: %s\n", err.msg);
    txbox_result_free(r);
    if (w)
        txbox_ws_close(w);
}

/* The txbox session of the CLI's session (the input's session_id): the
 * CLI's name and its id where that is a valid session id as it is (a
 * UUID), else a hash of it; false when the input has none. */
#define SESSION_ID_MAX 64
static bool session_of(const struct agent_info *ai, json_t *in, char sid[SESSION_ID_MAX + 1])
{
    json_t *v = json_object_get(in, "session_id");
    if (!json_is_string(v) || !json_string_length(v))
        return false;
    const char *id = json_string_value(v);
    size_t len = json_string_length(v);
    int n = snprintf(sid, SESSION_ID_MAX + 1, "%s-", ai->name);
    bool plain = len == strlen(id) && len <= (size_t)(SESSION_ID_MAX - n) &&
                 strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == len;
    if (plain) {
        memcpy(sid + n, id, len + 1);
        return true;
    }
    /* two FNV-1a hashes of 64 bits, differently seeded: 32 hex digits */
    uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
    for (size_t i = 0; i < len; i++) {
        h1 = (h1 ^ (unsigned char)id[i]) * 0x100000001b3ull;
        h2 = (h2 ^ (unsigned char)id[len - 1 - i]) * 0x100000001b3ull;
    }
    snprintf(sid + n, SESSION_ID_MAX + 1 - (size_t)n, "h%016llx%016llx", (unsigned long long)h1,
             (unsigned long long)h2);
    return true;
}

/* SessionEnd (Claude Code, Gemini CLI): the CLI's session is over, and so
 * is its txbox session: what it left running is killed, its /tmp dropped.
 * Nothing to decide: exit status 0 whatever happens (a note on stderr). */
static int session_end_event(agent a, const hook_opts *ho, json_t *in)
{
    const struct agent_info *ai = &agents[a];
    char sid[SESSION_ID_MAX + 1];
    _cleanup_free_ char *ws = workspace(ai, ho, in);
    txbox_ws *w = NULL;
    txbox_session *s = NULL;
    txbox_error err = {0};
    _cleanup_free_ char *report = NULL;
    if (session_of(ai, in, sid) && ws && txbox_ws_open(ws, TXBOX_WS_NO_RECOVER, &w, &err) == 0) {
        txbox_session_opts o = {.id = sid};
        if (txbox_session_open(w, &o, &s, &err) == 0 && txbox_session_end(s, &report, &err) == 0)
            fprintf(stderr, "txbox hook: session %s ended\n", sid);
        else if (err.code != ENOENT)
            fprintf(stderr, "txbox hook: session %s: %s\n", sid, err.msg);
        txbox_session_close(s);
        txbox_ws_close(w);
    }
    return a == AGENT_GEMINI ? emit(json_object()) : 0;
}

/* The policy for the workspace ws (and --policy, resolved into *path,
 * NULL without it), into *pol: 0, or the hook's denial of every WHAT when
 * it cannot be loaded. */
static int load_policy(const hook_opts *ho, const char *ws, const char *what, txbox_policy **pol, char **path)
{
    *path = NULL;
    if (ho->policy && !(*path = realpath(ho->policy, NULL)))
        return block("policy '%.200s': %s", ho->policy, strerror(errno));
    txbox_error err = {0};
    if (txbox_policy_load(*path, ws, pol, &err) < 0)
        return block("cannot load the policy, so every %s is denied: %s", what, err.msg);
    return 0;
}

/* The CLIs' own tools that write a file on the host, outside txbox: the
 * key of its path, and of its whole new content when the tool gives it. */
static const struct {
    const char *tool, *path, *content;
} file_tools[] = {
    {"Write", "file_path", "content"},
    {"Edit", "file_path", NULL},
    {"MultiEdit", "file_path", NULL},
    {"NotebookEdit", "notebook_path", NULL},
    {"write_file", "file_path", "content"},
    {"replace", "file_path", NULL},
    {"edit", "file_path", NULL},
};

#define EDIT_FILE_CAP (1u << 20) /* bytes of a file an edit is applied to */

/* s with its first occurrence of from (every one, with all) replaced by
 * to, into a new buffer (*n: its length); NULL when from is not there. */
static char *replace_in(const char *s, size_t n, const char *from, size_t fl, const char *to, size_t tl,
                        bool all, size_t *out_n)
{
    if (!fl)
        return NULL;
    dbuf b;
    dbuf_init(&b, 0);
    size_t at = 0, hits = 0;
    for (const char *h; at <= n && (h = memmem(s + at, n - at, from, fl));) {
        dbuf_add(&b, s + at, (size_t)(h - s) - at);
        dbuf_add(&b, to, tl);
        at = (size_t)(h - s) + fl;
        hits++;
        if (!all)
            break;
    }
    if (!hits) {
        dbuf_free(&b);
        return NULL;
    }
    dbuf_add(&b, s + at, n - at);
    *out_n = b.len;
    return b.p ? b.p : xstrdup(""); /* the buffer's bytes, NUL-terminated */
}

/* The whole new content an edit tool (old_string, new_string,
 * replace_all or Gemini CLI's expected_replacements; MultiEdit: edits,
 * each of those, in order) would leave in
 * path, as it stands now; NULL when that is not known (the file cannot be
 * read whole, a string is not there), which the rules read as content
 * they cannot see. */
static char *edited_content(const char *path, json_t *tinput, size_t *len)
{
    json_t *edits = json_object_get(tinput, "edits");
    if (!json_is_array(edits)) {
        if (!json_is_string(json_object_get(tinput, "old_string")))
            return NULL;
        edits = NULL;
    }
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > EDIT_FILE_CAP) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    char *cur = xmalloc((size_t)st.st_size + 1);
    ssize_t n = read_all(fd, cur, (size_t)st.st_size);
    close(fd);
    if (n < 0) {
        free(cur);
        return NULL;
    }
    size_t cl = (size_t)n;
    size_t ne = edits ? json_array_size(edits) : 1;
    for (size_t i = 0; i < ne && cur; i++) {
        json_t *e = edits ? json_array_get(edits, i) : tinput;
        json_t *from = json_object_get(e, "old_string"), *to = json_object_get(e, "new_string");
        char *next = NULL;
        if (json_is_string(from) && json_is_string(to))
            next = replace_in(cur, cl, json_string_value(from), json_string_length(from),
                              json_string_value(to), json_string_length(to),
                              json_is_true(json_object_get(e, "replace_all")) ||
                                  json_integer_value(json_object_get(e, "expected_replacements")) > 1,
                              &cl);
        free(cur);
        cur = next;
    }
    *len = cl;
    return cur;
}

/* A file tool's write of a file that a rule on effects would hold in a
 * transaction (the agent's settings, the scripts they run...): denied,
 * and in the audit log; 0 when it may go on. Its path as the tool names
 * it (relative: to the input's cwd), and, when it is a link, its target
 * too. */
static int file_write(agent a, const hook_opts *ho, json_t *in, json_t *tinput, const char *tname)
{
    const struct agent_info *ai = &agents[a];
    size_t t = 0;
    while (t < ARRAY_SIZE(file_tools) && strcmp(file_tools[t].tool, tname))
        t++;
    if (t == ARRAY_SIZE(file_tools))
        return 0;
    const char *path = json_string_value(json_object_get(tinput, file_tools[t].path));
    if (!path || !*path)
        return 0; /* the tool itself refuses it */
    json_t *jc = file_tools[t].content ? json_object_get(tinput, file_tools[t].content) : NULL;
    _cleanup_free_ char *ws = workspace(ai, ho, in);
    if (!ws)
        return block("workspace: %s", strerror(errno));
    const char *cwd = json_string_value(json_object_get(in, "cwd"));
    _cleanup_free_ char *abs =
        *path == '/' ? xstrdup(path) : xasprintf("%s/%s", cwd && *cwd == '/' ? cwd : ws, path);
    /* its directory resolved, its own name kept (a link there is itself) */
    char *slash = strrchr(abs, '/');
    *slash = 0;
    _cleanup_free_ char *dir = realpath(*abs ? abs : "/", NULL);
    _cleanup_free_ char *named = dir ? xasprintf("%s/%s", strcmp(dir, "/") ? dir : "", slash + 1) : NULL;
    *slash = '/';
    _cleanup_free_ char *target = realpath(abs, NULL);
    txbox_policy *pol = NULL;
    _cleanup_free_ char *pol_path = NULL;
    int lr = load_policy(ho, ws, "write", &pol, &pol_path);
    if (lr)
        return lr;
    txbox_verdict v;
    size_t clen = json_string_length(jc);
    _cleanup_free_ char *edited = jc ? NULL : edited_content(target ? target : abs, tinput, &clen);
    const char *content = jc ? json_string_value(jc) : edited;
    const char *which = named ? named : abs;
    int held = txbox_policy_check_file_write(pol, ws, which, content, clen, &v);
    if (!held && target && (!named || strcmp(target, named))) {
        which = target;
        held = txbox_policy_check_file_write(pol, ws, which, content, clen, &v);
    }
    txbox_policy_free(pol);
    if (!held)
        return 0;
    char why[700];
    snprintf(why, sizeof why, "%s writes %s: %s", tname, which, v.reason);
    audit_block(ai, ho, in, tinput, path, "unsafe", v.rule, why);
    /* the rule's own suggestion speaks of a held transaction (txbox
     * approve), which a denied tool call is not */
    return block("%s would write %s, which rule %s holds: %s. Not written: ask the user to make the change, "
                 "or make it with a shell command, which txbox holds for the user to review",
                 tname, which, v.rule, v.reason);
}

/* The decision for one parsed hook input. */
static int handle(agent a, json_t *in, const hook_opts *ho)
{
    const struct agent_info *ai = &agents[a];
    json_t *event = json_object_get(in, "hook_event_name");
    if (json_is_string(event) && !strcmp(json_string_value(event), "SessionEnd"))
        return session_end_event(a, ho, in);
    json_t *tool = json_object_get(in, "tool_name");
    json_t *tinput = json_object_get(in, "tool_input");
    if (event && (!json_is_string(event) || strcmp(json_string_value(event), ai->event)))
        return block("this hook handles %s events, not '%.64s'; register it under %s", ai->event,
                     json_is_string(event) ? json_string_value(event) : "?", ai->event);
    if (!json_is_string(tool) || !json_is_object(tinput))
        return block("the %s hook input lacks tool_name (a string) or tool_input (an object)", ai->event);
    const char *tname = json_string_value(tool);
    bool gemini = a == AGENT_GEMINI;
    if (!strcmp(tname, "PowerShell")) {
        audit_block(ai, ho, in, tinput, json_string_value(json_object_get(tinput, "command")), "unsafe",
                    "hook-powershell", "txbox cannot classify PowerShell commands");
        return block("txbox cannot classify PowerShell commands; use the Bash tool");
    }
    /* a shell tool of any CLI txbox knows; it can be rewritten only when
     * it is this host's own */
    bool shell = false, rewrites = false;
    for (size_t i = 0; i < ARRAY_SIZE(shell_tools); i++)
        if (!strcmp(tname, shell_tools[i].tool)) {
            shell = true;
            rewrites = rewrites || (shell_tools[i].host == a && shell_tools[i].rewrites);
        }
    if (!shell) {
        const char *key = command_arg(tinput);
        if (key && !passes(ho, tname)) {
            char what[200];
            snprintf(what, sizeof what, "tool '%.64s' carries a command that cannot be judged", tname);
            audit_block(ai, ho, in, tinput, json_string_value(json_object_get(tinput, key)), "unsafe",
                        "hook-unknown-tool", what);
            return block("tool '%.64s' carries a command ('%s') and is not a shell tool txbox knows, so it "
                         "cannot be judged; denied (if it runs no shell command, let it pass with "
                         "'txbox hook %s --pass-tool %.64s')",
                         tname, key, ai->name, tname);
        }
        int fw = file_write(a, ho, in, tinput, tname);
        if (fw)
            return fw;
        /* not a shell command: no decision, the CLI's own rules apply */
        return gemini ? emit(json_object()) : 0;
    }
    json_t *jcmd = json_object_get(tinput, "command");
    if (!json_is_string(jcmd))
        return block("the %s tool input has no command string", tname);
    const char *cmd = json_string_value(jcmd);
    size_t cmdlen = json_string_length(jcmd);
    if (strlen(cmd) != cmdlen)
        return block("the command contains a NUL byte; it cannot be run safely");
    json_t *jmode = json_object_get(in, "permission_mode");
    bool plan = json_is_string(jmode) && !strcmp(json_string_value(jmode), "plan");

    _cleanup_free_ char *ws = workspace(ai, ho, in);
    if (!ws)
        return block("workspace: %s", strerror(errno));
    char why[700];
    _cleanup_free_ char *cdir = command_dir(in, tinput, ws, why, sizeof why);
    if (!cdir)
        return block("%s; denied", why);
    txbox_policy *pol = NULL;
    _cleanup_free_ char *pol_path = NULL;
    int lr = load_policy(ho, ws, "command", &pol, &pol_path);
    if (lr)
        return lr;
    txbox_error err = {0};
    cli_policy_notes(pol);
    txbox_verdict v;
    int crc = txbox_policy_check(pol, cmd, cmdlen, &v, &err);
    txbox_policy_free(pol);
    if (crc < 0)
        return block("cannot classify the command: %s", err.msg);

    char reason[1600];
    if (v.verdict == TXBOX_VERDICT_UNSAFE) {
        if (v.suggestion[0])
            snprintf(reason, sizeof reason, "txbox blocked this command (rule %s): %s. Instead: %s", v.rule,
                     v.reason, v.suggestion);
        else
            snprintf(reason, sizeof reason, "txbox blocked this command (rule %s): %s", v.rule, v.reason);
        audit_block(ai, ho, in, tinput, cmd, "unsafe", v.rule, v.reason);
        return rewrites ? decide(gemini, "deny", reason, NULL) : block("%s", reason);
    }
    bool safe = v.verdict == TXBOX_VERDICT_SAFE;
    if (plan && !safe) {
        snprintf(reason, sizeof reason,
                 "txbox: plan mode: only read-only commands run, and this one may change state (rule %s: %s)",
                 v.rule, v.reason);
        audit_block(ai, ho, in, tinput, cmd, txbox_verdict_name(v.verdict), "hook-plan-mode",
                    "plan mode: only read-only commands run");
        return rewrites ? decide(gemini, "deny", reason, NULL) : block("%s", reason);
    }
    if (safe && ho->trust_safe) {
        snprintf(reason, sizeof reason, "txbox: read-only command, allowed as it is (--trust-safe; rule %s)",
                 v.rule);
        return decide(gemini, "allow", reason, NULL);
    }
    if (!rewrites) {
        audit_block(ai, ho, in, tinput, cmd, txbox_verdict_name(v.verdict), "hook-no-rewrite",
                    "this CLI cannot run the command in txbox's sandbox; the MCP run tool can");
        return block("this CLI cannot run a command rewritten by a hook, so txbox cannot run it in its "
                     "sandbox: use the txbox MCP tool `run` with this command instead (it runs as a "
                     "transaction; txbox judged it %s, rule %s)",
                     txbox_verdict_name(v.verdict), v.rule);
    }
    _cleanup_free_ char *self = realpath("/proc/self/exe", NULL);
    if (!self)
        return block("cannot find the txbox binary: %s", strerror(errno));
    char sid[SESSION_ID_MAX + 1];
    bool in_session = session_of(ai, in, sid);
    /* the shell follows the command's cd where the CLI keeps its shell's
     * directory from one call to the next (Claude Code) */
    bool follow = in_session && a == AGENT_CLAUDE;
    /* cd first: the command runs where the model asked, which txbox run
     * takes as its starting directory */
    dbuf b;
    dbuf_init(&b, 0);
    dbuf_addstr(&b, "cd ");
    cli_sh_quote(&b, cdir);
    dbuf_addstr(&b, " && ");
    if (follow)
        dbuf_addstr(&b, "__txbox_cwd=$(mktemp) && { ");
    cli_sh_quote(&b, self);
    dbuf_addstr(&b, " run");
    if (in_session) {
        dbuf_addstr(&b, " --session ");
        cli_sh_quote(&b, sid);
    }
    if (follow)
        dbuf_addstr(&b, " --cwd-file \"$__txbox_cwd\"");
    dbuf_addstr(&b, " -C ");
    cli_sh_quote(&b, ws);
    if (pol_path) {
        dbuf_addstr(&b, " --policy ");
        cli_sh_quote(&b, pol_path);
    }
    dbuf_addstr(&b, safe ? " --shell bash --read-only -c " : " --shell bash -c ");
    cli_sh_quote(&b, cmd);
    if (follow) {
        /* the directory the command's shell ended in, when it is in the
         * workspace (one in the session's /tmp is not the host's); the
         * command's status stays the call's */
        dbuf_addstr(&b, "; __txbox_st=$?; __txbox_d=$(cat -- \"$__txbox_cwd\" 2>/dev/null); "
                        "rm -f -- \"$__txbox_cwd\"; case $__txbox_d in ");
        cli_sh_quote(&b, ws);
        dbuf_addstr(&b, "|");
        cli_sh_quote(&b, ws);
        dbuf_addstr(&b, "/*) cd -- \"$__txbox_d\" 2>/dev/null;; esac; (exit $__txbox_st); }");
    }
    /* both CLIs run the tool input given back as the whole call: keep the
     * other fields (description, timeout, dir_path, ...) */
    json_t *upd = json_deep_copy(tinput);
    json_object_set_new(upd, "command", json_stringn(dbuf_str(&b), b.len));
    dbuf_free(&b);
    if (safe)
        snprintf(reason, sizeof reason,
                 "txbox: read-only command, runs read-only in the txbox sandbox (rule %s)", v.rule);
    else
        snprintf(reason, sizeof reason, "txbox: runs as a transaction (rule %s: %s)", v.rule, v.reason);
    return decide(gemini, "allow", reason, upd);
}

int cmd_hook(int argc, char **argv)
{
    static const struct option opts[] = {
        {"policy", required_argument, NULL, 'p'},
        {"trust-safe", no_argument, NULL, 't'},
        {"pass-tool", required_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 2)
        return block("which agent CLI? use 'txbox hook claude-code', 'gemini-cli' or 'qwen-code'");
    agent a = AGENT_CLAUDE;
    bool known = false;
    for (size_t i = 0; i < ARRAY_SIZE(agents) && !known; i++)
        if (!strcmp(argv[1], agents[i].name))
            a = (agent)i, known = true;
    if (!known)
        return block("unknown agent CLI '%.64s' (use claude-code, gemini-cli or qwen-code)", argv[1]);
    const struct agent_info *ai = &agents[a];

    hook_opts ho = {0};
    int c;
    optind = 1;
    opterr = 0;
    argc--, argv++;
    while ((c = getopt_long(argc, argv, "+C:h", opts, NULL)) != -1) {
        switch (c) {
        case 'C':
            ho.dir = optarg;
            break;
        case 'p':
            ho.policy = optarg;
            break;
        case 't':
            ho.trust_safe = true;
            break;
        case 'P':
            if (ho.npass >= MAX_PASS || !*optarg)
                return block("--pass-tool: at most %d non-empty names", MAX_PASS);
            ho.pass[ho.npass++] = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            return block("unknown option or missing value '%s' (see 'txbox hook --help')", argv[optind - 1]);
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
    int rc = handle(a, in, &ho);
    json_decref(in);
    return rc;
}
