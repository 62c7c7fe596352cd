/* txbox setup AGENT: writes txbox's hook and MCP server entries into an
 * agent CLI's own settings, or takes them out again (--remove).
 *
 *   claude-code  .claude/settings.json (PreToolUse hook on Bash, SessionEnd,
 *                enabledMcpjsonServers), .claude/settings.local.json
 *                (permissions.allow "mcp__txbox"), .mcp.json
 *                (mcpServers.txbox); --user: ~/.claude/settings.json (hook
 *                and the grant) and ~/.claude.json
 *   gemini-cli   .gemini/settings.json (BeforeTool and SessionEnd hooks, mcpServers.txbox
 *                with trust)
 *   qwen-code    .qwen/settings.json (PreToolUse hook on run_shell_command,
 *                mcpServers.txbox with trust)
 *   opencode     opencode.json (mcp.txbox, a local server, and
 *                permission.bash "deny": opencode has no hook that can
 *                reroute its shell tool, so its commands go through
 *                txbox's run tool); --user: $XDG_CONFIG_HOME/opencode/
 *                opencode.json (default ~/.config)
 * The grants (permissions.allow, trust, Codex's approval mode) let each
 * CLI's headless mode call txbox's tools: no one is there to answer a
 * prompt.
 *   codex        ~/.codex/config.toml ([mcp_servers.txbox]); --project:
 *                DIR/.codex/config.toml
 *
 * JSON files are merged with jansson: only our entries change (a hook whose
 * command is "<...>/txbox hook ...", the server named txbox); everything
 * else is kept, in its order. config.toml is edited by setup_toml.c. Both
 * ways are idempotent. A file that changes is first copied to FILE.txbox-bak
 * and then replaced atomically (temporary file, fsync, rename), keeping its
 * mode. The project's files are workspace content, which an agent's
 * commands may have written: they are opened beneath the project directory
 * without following a symlink, must be regular files, and are read up to a
 * cap. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cmds.h"
#include "fsops.h"
#include "safepath.h"
#include "setup.h"

#define SETTINGS_CAP (16u << 20) /* ~/.claude.json keeps history: generous */
#define HOOK_TIMEOUT_S 30
#define MCP_TIMEOUT_S 600

typedef enum { A_CLAUDE, A_GEMINI, A_QWEN, A_CODEX, A_OPENCODE } agent_id;

static const struct agent {
    const char *name;
    const char *dir;       /* the settings directory, in the project or in $HOME */
    const char *event;     /* hook event; NULL: no hook */
    const char *matcher;   /* every tool: the hook denies an unknown one carrying a command */
    const char *end_event; /* the CLI's session ended (the hook ends txbox's); NULL: none */
    int hook_timeout;      /* in the CLI's unit */
    bool hook_named;       /* the hook carries "name" */
    int mcp_timeout;       /* mcpServers.txbox.timeout (ms); 0: none */
    bool mcp_trust;        /* mcpServers.txbox.trust: its tools run without a confirmation */
} agents[] = {
    [A_CLAUDE] = {"claude-code", ".claude", "PreToolUse", "*", "SessionEnd", HOOK_TIMEOUT_S, false, 0, false},
    [A_GEMINI] = {"gemini-cli", ".gemini", "BeforeTool", ".*", "SessionEnd", HOOK_TIMEOUT_S * 1000, true,
                  MCP_TIMEOUT_S * 1000, true},
    [A_QWEN] = {"qwen-code", ".qwen", "PreToolUse", "*", NULL, HOOK_TIMEOUT_S * 1000, false,
                MCP_TIMEOUT_S * 1000, true},
    [A_CODEX] = {"codex", ".codex", NULL, NULL, NULL, 0, false, 0, false},
    [A_OPENCODE] = {"opencode", "", NULL, NULL, NULL, 0, false, 0, false},
};

/* Claude Code's permission rule for every tool of the txbox MCP server:
 * without it `claude -p` refuses each call ("you haven't granted it yet"),
 * since no one is there to answer the prompt. */
#define CLAUDE_GRANT "mcp__txbox"

struct setup {
    const struct agent *a;
    agent_id id;
    bool user, dry, remove;
    char *self;    /* the txbox binary the entries name */
    char *policy;  /* --policy, absolute; NULL */
    char *project; /* absolute; NULL with --user */
    int changed;
};

static void usage(FILE *f, const char *name)
{
    fprintf(f, "usage: txbox setup claude-code|gemini-cli|qwen-code|codex|opencode [--project DIR | --user]\n"
               "                   [--dry-run] [--remove] [--policy FILE] [--txbox PATH]\n"
               "\n"
               "Writes txbox's hook and MCP server entries into the agent CLI's settings,\n"
               "merged with what is there (each changed file is first copied to\n"
               "FILE.txbox-bak); --remove takes them out again. Running it twice changes\n"
               "nothing.\n"
               "\n"
               "Files:\n"
               "  claude-code  .claude/settings.json (PreToolUse and SessionEnd hooks,\n"
               "               enabledMcpjsonServers),\n"
               "               .claude/settings.local.json (permissions.allow \"mcp__txbox\")\n"
               "               and .mcp.json; --user: ~/.claude/settings.json, ~/.claude.json\n"
               "  gemini-cli   .gemini/settings.json (BeforeTool and SessionEnd hooks,\n"
               "               mcpServers, trusted)\n"
               "  qwen-code    .qwen/settings.json (PreToolUse hook, mcpServers, trusted)\n"
               "  codex        ~/.codex/config.toml (or $CODEX_HOME/config.toml):\n"
               "               [mcp_servers.txbox] with tool_timeout_sec = 600,\n"
               "               default_tools_approval_mode = \"approve\" and required = true\n"
               "  opencode     opencode.json (mcp.txbox, and permission.bash \"deny\": its\n"
               "               commands go through txbox's run tool); --user:\n"
               "               ~/.config/opencode/opencode.json\n"
               "\n"
               "Options:\n"
               "  --project DIR  that project's settings (default: the current directory;\n"
               "                 for codex --user is the default, since Codex reads a\n"
               "                 project's .codex/config.toml only once it is trusted);\n"
               "                 the MCP server gets -C DIR\n"
               "  --user         the user's settings; the MCP server works on the directory\n"
               "                 the agent CLI runs in\n"
               "  --dry-run      print the change as a unified diff; write nothing\n"
               "  --remove       take txbox's entries out (a file left empty is removed)\n"
               "  --policy FILE  hook and server use this policy file\n"
               "  --txbox PATH   the binary the entries name (default: this one)\n"
               "\n"
               "Each hook command denies the tool call (exit status 2) when txbox is missing\n"
               "or fails.\n"
               "\n"
               "Exit status: 0 done (or nothing to do), 125 error (the file in error is\n"
               "not written). See docs/agents-setup.md.\n");
}

/* PATH for sh: as it is when it needs no quoting, else quoted. */
static void sh_word(dbuf *b, const char *s)
{
    if (*s &&
        strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/._+-,:@") == strlen(s))
        dbuf_addstr(b, s);
    else
        cli_sh_quote(b, s);
}

/* ---- reading and writing one settings file ---- */

struct file {
    int dirfd;
    const char *name; /* in dirfd */
    char label[PATH_MAX + 64];
    bool exists;
    mode_t mode;
    char *old;
    size_t oldlen;
};

/* Opens (creating it when create) the directory rel beneath base, without
 * following a symlink; -ENOENT when absent and !create. */
static int open_dir(int base, const char *rel, bool create, txbox_error *err)
{
    if (!*rel)
        return fcntl(base, F_DUPFD_CLOEXEC, 3);
    int fd = safe_openat(base, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd < 0 && errno == ENOENT && create) {
        if (mkdirat(base, rel, 0755) < 0 && errno != EEXIST)
            return tx_errno(err, errno, "cannot create %s", rel);
        fd = safe_openat(base, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    }
    if (fd < 0 && errno == ENOENT)
        return -ENOENT;
    if (fd < 0)
        return tx_errno(err, errno, "cannot open the directory %s (a symlink is not followed)", rel);
    return fd;
}

static int file_read(struct file *f, txbox_error *err)
{
    _cleanup_close_ int fd = openat(f->dirfd, f->name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0)
        return tx_errno(err, errno, "cannot open %s%s", f->label,
                        errno == ELOOP ? " (a symlink is not followed)" : "");
    struct stat st;
    if (fstat(fd, &st) < 0)
        return tx_errno(err, errno, "cannot stat %s", f->label);
    if (!S_ISREG(st.st_mode))
        return tx_err(err, EINVAL, "%s is not a regular file", f->label);
    if ((uint64_t)st.st_size > SETTINGS_CAP)
        return tx_err(err, EFBIG, "%s is larger than %u bytes", f->label, SETTINGS_CAP);
    dbuf b;
    dbuf_init(&b, SETTINGS_CAP + 1);
    char tmp[65536];
    for (;;) {
        ssize_t n = read(fd, tmp, sizeof tmp);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            dbuf_free(&b);
            return tx_errno(err, e, "cannot read %s", f->label);
        }
        if (n == 0)
            break;
        dbuf_add(&b, tmp, (size_t)n);
        if (b.dropped || b.len > SETTINGS_CAP) {
            dbuf_free(&b);
            return tx_err(err, EFBIG, "%s is larger than %u bytes", f->label, SETTINGS_CAP);
        }
    }
    dbuf_str(&b);
    f->exists = true;
    f->mode = st.st_mode & 07777;
    f->oldlen = b.len;
    f->old = b.p ? b.p : xcalloc(1, 1);
    return 0;
}

/* Writes data to name in dirfd atomically: a temporary file beside it,
 * fsync, rename, fsync of the directory. */
static int write_atomic(int dirfd, const char *name, const char *label, const char *data, size_t len,
                        mode_t mode, txbox_error *err)
{
    char tmp[NAME_MAX + 1];
    int fd = -1;
    for (int i = 0; i < 100 && fd < 0; i++) {
        snprintf(tmp, sizeof tmp, ".%.200s.txbox-%d-%d", name, (int)getpid(), i);
        fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0)
        return tx_errno(err, errno, "cannot create a temporary file beside %s", label);
    int rc = 0;
    if (write_all(fd, data, len) < 0 || fchmod(fd, mode) < 0 || fs_fsync(fd) < 0)
        rc = tx_errno(err, errno, "cannot write %s", label);
    close(fd);
    if (!rc && fs_renameat(dirfd, tmp, dirfd, name, 0) < 0)
        rc = tx_errno(err, errno, "cannot replace %s", label);
    if (rc) {
        unlinkat(dirfd, tmp, 0);
        return rc;
    }
    if (fs_fsync(dirfd) < 0)
        return tx_errno(err, errno, "cannot make %s durable", label);
    return 0;
}

/* Shows or applies the change from f->old to new (NULL: delete the file). */
static int file_commit(struct setup *s, struct file *f, const char *new, size_t newlen, txbox_error *err)
{
    if (f->exists ? (new &&newlen == f->oldlen && !memcmp(new, f->old, newlen)) : !new) {
        printf("txbox setup: %s: %s\n", f->label, s->remove ? "nothing of txbox's in it" : "already set up");
        return 0;
    }
    s->changed++;
    if (s->dry) {
        fflush(stdout);
        return txbox_diff_text(stdout, f->exists ? f->old : NULL, f->oldlen, new, newlen, f->label, f->label,
                               err);
    }
    char bak[NAME_MAX + 1];
    snprintf(bak, sizeof bak, "%.200s.txbox-bak", f->name);
    if (f->exists && write_atomic(f->dirfd, bak, f->label, f->old, f->oldlen, f->mode, err) < 0)
        return tx_err_ctx(err, "backup");
    if (!new) {
        if (unlinkat(f->dirfd, f->name, 0) < 0)
            return tx_errno(err, errno, "cannot remove %s", f->label);
        printf("txbox setup: removed %s (empty now; it was kept as %s.txbox-bak)\n", f->label, f->label);
        return 0;
    }
    if (write_atomic(f->dirfd, f->name, f->label, new, newlen, f->exists ? f->mode : 0644, err) < 0)
        return -1;
    if (f->exists)
        printf("txbox setup: updated %s (the old one is %s.txbox-bak)\n", f->label, f->label);
    else
        printf("txbox setup: created %s\n", f->label);
    return 0;
}

typedef int (*edit_fn)(struct setup *s, struct file *f, char **out, size_t *outlen, txbox_error *err);

/* Edits base/rel (label: how it is shown) with fn. */
static int edit(struct setup *s, int base, const char *base_label, const char *rel, edit_fn fn,
                txbox_error *err)
{
    struct file f = {.name = rel};
    const char *slash = strrchr(rel, '/');
    _cleanup_free_ char *dir = slash ? strndup(rel, (size_t)(slash - rel)) : xstrdup("");
    if (slash)
        f.name = slash + 1;
    snprintf(f.label, sizeof f.label, "%s/%s", base_label, rel);
    f.dirfd = open_dir(base, dir, !s->remove && !s->dry, err);
    if (f.dirfd == -ENOENT) {
        if (s->remove) {
            printf("txbox setup: %s: nothing of txbox's in it\n", f.label);
            return 0;
        }
        f.dirfd = -1; /* dry run: the directory would be created */
    } else if (f.dirfd < 0) {
        return -1;
    }
    int rc = f.dirfd >= 0 ? file_read(&f, err) : 0;
    char *out = NULL;
    size_t outlen = 0;
    if (!rc && (f.exists || !s->remove))
        rc = fn(s, &f, &out, &outlen, err);
    else if (!rc)
        out = NULL; /* removing from a file that is not there: nothing to do */
    if (!rc && (f.exists || out))
        rc = file_commit(s, &f, out, outlen, err);
    else if (!rc)
        printf("txbox setup: %s: nothing of txbox's in it\n", f.label);
    if (rc < 0)
        tx_err_ctx(err, "%s", f.label);
    free(out);
    free(f.old);
    if (f.dirfd >= 0)
        close(f.dirfd);
    return rc;
}

/* ---- JSON settings ---- */

/* Is this hook object one of ours: its command's first word is a path to
 * a program named txbox, its second "hook"? */
static bool our_hook(json_t *h)
{
    const char *cmd = json_string_value(json_object_get(h, "command"));
    if (!cmd)
        return false;
    cmd += strspn(cmd, " \t");
    const char *end;
    char first[PATH_MAX];
    if (*cmd == '\'' || *cmd == '"') {
        end = strchr(cmd + 1, *cmd);
        if (!end || (size_t)(end - cmd - 1) >= sizeof first)
            return false;
        memcpy(first, cmd + 1, (size_t)(end - cmd - 1));
        first[end - cmd - 1] = '\0';
        end++;
    } else {
        size_t n = strcspn(cmd, " \t");
        if (n >= sizeof first)
            return false;
        memcpy(first, cmd, n);
        first[n] = '\0';
        end = cmd + n;
    }
    const char *base = strrchr(first, '/');
    base = base ? base + 1 : first;
    end += strspn(end, " \t");
    return !strcmp(base, "txbox") && !strncmp(end, "hook", 4) && (!end[4] || end[4] == ' ');
}

/* obj[key] as a container of the given type, created when create; NULL
 * (and *bad) when it is there with another type. */
static json_t *member(json_t *obj, const char *key, json_type type, bool create, bool *bad)
{
    json_t *v = json_object_get(obj, key);
    if (v && json_typeof(v) != type) {
        *bad = true;
        return NULL;
    }
    if (!v && create) {
        v = type == JSON_ARRAY ? json_array() : json_object();
        json_object_set_new(obj, key, v);
    }
    return v;
}

/* Takes our hooks out of root.hooks[event]; groups left empty by that go
 * too, and with prune the containers (else they keep their place for the
 * entry that replaces ours). */
static int remove_hooks(json_t *root, const char *event, bool prune, txbox_error *err)
{
    bool bad = false;
    json_t *hooks = member(root, "hooks", JSON_OBJECT, false, &bad);
    json_t *list = hooks ? member(hooks, event, JSON_ARRAY, false, &bad) : NULL;
    if (bad)
        return tx_err(err, EINVAL, "\"hooks\" or \"hooks.%s\" has an unexpected type: edit it by hand",
                      event);
    if (!list)
        return 0;
    int removed = 0;
    for (size_t i = json_array_size(list); i-- > 0;) {
        json_t *group = json_array_get(list, i);
        json_t *inner = json_object_get(group, "hooks");
        if (!json_is_array(inner))
            continue;
        bool had = false;
        for (size_t j = json_array_size(inner); j-- > 0;)
            if (our_hook(json_array_get(inner, j))) {
                json_array_remove(inner, j);
                had = true;
                removed++;
            }
        if (had && !json_array_size(inner))
            json_array_remove(list, i);
    }
    if (prune && removed && !json_array_size(list))
        json_object_del(hooks, event);
    if (prune && removed && !json_object_size(hooks))
        json_object_del(root, "hooks");
    return removed;
}

static json_t *mcp_entry(const struct setup *s)
{
    json_t *args = json_pack("[s]", "mcp");
    if (s->project) {
        json_array_append_new(args, json_string("-C"));
        json_array_append_new(args, json_string(s->project));
    }
    if (s->policy) {
        json_array_append_new(args, json_string("--policy"));
        json_array_append_new(args, json_string(s->policy));
    }
    json_t *e = json_pack("{s:s,s:o}", "command", s->self, "args", args);
    if (s->a->mcp_timeout)
        json_object_set_new(e, "timeout", json_integer(s->a->mcp_timeout));
    if (s->a->mcp_trust)
        json_object_set_new(e, "trust", json_true());
    return e;
}

/* The hook's command line, failing closed: the CLIs run it with sh -c
 * (Claude Code; Gemini CLI and qwen-code with bash -c) and block the tool
 * call only on exit status 2 (Gemini CLI: on 2 or more with a message);
 * 127 for a txbox that is not there, 126, a signal or any other failure
 * would let the command run unjudged. So any status but 0 becomes 2, with
 * a line for the model (txbox's own exit 2 has said why already). POSIX
 * sh only: the same line runs under sh, dash, bash and zsh. */
static char *hook_command(const struct setup *s)
{
    dbuf b;
    dbuf_init(&b, 0);
    sh_word(&b, s->self);
    dbuf_addstr(&b, " hook ");
    dbuf_addstr(&b, s->a->name);
    if (s->policy) {
        dbuf_addstr(&b, " --policy ");
        sh_word(&b, s->policy);
    }
    dbuf_addstr(&b,
                " || { s=$?; [ \"$s\" -eq 2 ] || echo \"txbox hook: txbox could not run (exit status $s), so "
                "this tool call is denied; is txbox still installed?\" >&2; exit 2; }");
    dbuf_str(&b);
    return b.p;
}

/* What each JSON file gets. */
enum { W_HOOK = 1, W_MCP = 2, W_ENABLE_MCPJSON = 4, W_GRANT = 8, W_OPENCODE = 16 };

/* opencode's entry: a local server, its command one array. */
static json_t *opencode_entry(const struct setup *s)
{
    json_t *cmd = json_pack("[s,s]", s->self, "mcp");
    if (s->project) {
        json_array_append_new(cmd, json_string("-C"));
        json_array_append_new(cmd, json_string(s->project));
    }
    if (s->policy) {
        json_array_append_new(cmd, json_string("--policy"));
        json_array_append_new(cmd, json_string(s->policy));
    }
    return json_pack("{s:s,s:o,s:b}", "type", "local", "command", cmd, "enabled", 1);
}

/* opencode: mcp.txbox, and its own shell tool denied (permission.bash),
 * since no hook of opencode's can send a command through txbox run.
 * --remove takes out the denial only when it is ours ("deny"). */
static void edit_opencode_json(struct setup *s, json_t *root, bool *bad)
{
    json_t *mcp = member(root, "mcp", JSON_OBJECT, !s->remove, bad);
    if (mcp && s->remove) {
        if (!json_object_del(mcp, "txbox") && !json_object_size(mcp))
            json_object_del(root, "mcp");
    } else if (mcp) {
        json_object_set_new(mcp, "txbox", opencode_entry(s));
    }
    json_t *perm = json_object_get(root, "permission");
    if (perm && !json_is_object(perm)) { /* "permission": "allow" and the like */
        *bad = true;
        return;
    }
    if (s->remove) {
        const char *v = json_string_value(json_object_get(perm, "bash"));
        if (v && !strcmp(v, "deny")) {
            json_object_del(perm, "bash");
            if (!json_object_size(perm))
                json_object_del(root, "permission");
        }
        return;
    }
    perm = member(root, "permission", JSON_OBJECT, true, bad);
    if (perm)
        json_object_set_new(perm, "bash", json_string("deny"));
    if (!json_object_get(root, "$schema"))
        json_object_set_new(root, "$schema", json_string("https://opencode.ai/config.json"));
}

/* Puts s into (or with remove takes it out of) the string list at
 * root[key] (root[outer][key] when outer); containers left empty by a
 * removal go. */
static void string_in_list(json_t *root, const char *outer, const char *key, const char *s, bool remove,
                           bool *bad)
{
    json_t *obj = outer ? member(root, outer, JSON_OBJECT, !remove, bad) : root;
    json_t *list = obj ? member(obj, key, JSON_ARRAY, !remove, bad) : NULL;
    bool had = false;
    for (size_t i = json_array_size(list); i-- > 0;)
        if (json_is_string(json_array_get(list, i)) &&
            !strcmp(json_string_value(json_array_get(list, i)), s)) {
            had = true;
            if (remove)
                json_array_remove(list, i);
        }
    if (list && !remove && !had)
        json_array_append_new(list, json_string(s));
    if (list && remove && had && !json_array_size(list))
        json_object_del(obj, key);
    if (outer && obj && remove && had && !json_object_size(obj))
        json_object_del(root, outer);
}

static int edit_json(struct setup *s, struct file *f, unsigned what, char **out, size_t *outlen,
                     txbox_error *err)
{
    json_t *root;
    if (f->exists && f->oldlen && f->old[strspn(f->old, " \t\r\n")]) {
        json_error_t je;
        root = json_loadb(f->old, f->oldlen, JSON_REJECT_DUPLICATES, &je);
        if (!root)
            return tx_err(err, EINVAL,
                          "not plain JSON (line %d: %s); txbox setup does not rewrite files with "
                          "comments: add the entries by hand (docs/agents-setup.md)",
                          je.line, je.text);
        if (!json_is_object(root)) {
            json_decref(root);
            return tx_err(err, EINVAL, "not a JSON object");
        }
    } else {
        root = json_object();
    }
    int rc = 0;
    bool bad = false;
    if (what & W_HOOK) {
        rc = remove_hooks(root, s->a->event, s->remove, err);
        if (rc >= 0 && s->a->end_event)
            rc = remove_hooks(root, s->a->end_event, s->remove, err);
        if (rc >= 0 && !s->remove) {
            /* before each tool call; and, where the CLI says so, at the end
             * of its session (every session: no matcher), which ends the
             * txbox session the hook opened for it */
            json_t *hooks = member(root, "hooks", JSON_OBJECT, true, &bad);
            _cleanup_free_ char *cmd = hook_command(s);
            for (int end = 0; end < 2 && hooks && !bad; end++) {
                const char *event = end ? s->a->end_event : s->a->event;
                json_t *list = event ? member(hooks, event, JSON_ARRAY, true, &bad) : NULL;
                if (!list)
                    continue;
                json_t *h = json_pack("{s:s,s:s,s:i}", "type", "command", "command", cmd, "timeout",
                                      s->a->hook_timeout);
                if (s->a->hook_named)
                    json_object_set_new(h, "name", json_string("txbox"));
                json_array_append_new(list,
                                      end ? json_pack("{s:[o]}", "hooks", h)
                                          : json_pack("{s:s,s:[o]}", "matcher", s->a->matcher, "hooks", h));
            }
        }
    }
    if (rc >= 0 && (what & W_MCP)) {
        json_t *servers = member(root, "mcpServers", JSON_OBJECT, !s->remove, &bad);
        if (servers && s->remove) {
            if (!json_object_del(servers, "txbox") && !json_object_size(servers))
                json_object_del(root, "mcpServers");
        } else if (servers) {
            json_object_set_new(servers, "txbox", mcp_entry(s));
        }
    }
    if (rc >= 0 && (what & W_ENABLE_MCPJSON))
        string_in_list(root, NULL, "enabledMcpjsonServers", "txbox", s->remove, &bad);
    if (rc >= 0 && (what & W_GRANT))
        string_in_list(root, "permissions", "allow", CLAUDE_GRANT, s->remove, &bad);
    if (rc >= 0 && (what & W_OPENCODE))
        edit_opencode_json(s, root, &bad);
    if (rc >= 0 && bad)
        rc = tx_err(err, EINVAL, "an entry txbox sets has an unexpected type: edit it by hand");
    if (rc >= 0) {
        if (s->remove && !json_object_size(root)) {
            *out = NULL; /* nothing left: the file goes */
            rc = 0;
        } else {
            char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
            if (!text) {
                rc = tx_err(err, ENOMEM, "cannot encode the settings as JSON");
            } else {
                *out = xasprintf("%s\n", text);
                *outlen = strlen(*out);
                free(text);
                rc = 0;
            }
        }
    }
    json_decref(root);
    return rc < 0 ? -1 : 0;
}

static int edit_settings(struct setup *s, struct file *f, char **out, size_t *outlen, txbox_error *err)
{
    unsigned what = W_HOOK;
    if (s->id != A_CLAUDE)
        what |= W_MCP;
    else
        what |= s->user ? W_GRANT : W_ENABLE_MCPJSON;
    return edit_json(s, f, what, out, outlen, err);
}

/* Claude Code reads no permission rule from a project's shared
 * .claude/settings.json (it comes with the repository; seen with 2.1.332),
 * only from the user's own .claude/settings.local.json. */
static int edit_grant_only(struct setup *s, struct file *f, char **out, size_t *outlen, txbox_error *err)
{
    return edit_json(s, f, W_GRANT, out, outlen, err);
}

static int edit_mcp_only(struct setup *s, struct file *f, char **out, size_t *outlen, txbox_error *err)
{
    return edit_json(s, f, W_MCP, out, outlen, err);
}

static int edit_opencode(struct setup *s, struct file *f, char **out, size_t *outlen, txbox_error *err)
{
    int rc = edit_json(s, f, W_OPENCODE, out, outlen, err);
    /* only "$schema" left after a removal: the file was ours */
    if (!rc && s->remove && *out &&
        !strcmp(*out, "{\n  \"$schema\": \"https://opencode.ai/config.json\"\n}\n")) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

static int edit_codex(struct setup *s, struct file *f, char **out, size_t *outlen, txbox_error *err)
{
    _cleanup_free_ char *block = NULL;
    if (!s->remove) {
        dbuf b;
        dbuf_init(&b, 0);
        dbuf_addstr(&b, SETUP_TOML_MARKER "\n[mcp_servers.txbox]\ncommand = ");
        setup_toml_string(&b, s->self);
        dbuf_addstr(&b, "\nargs = [\"mcp\"");
        if (s->project) {
            dbuf_addstr(&b, ", \"-C\", ");
            setup_toml_string(&b, s->project);
        }
        if (s->policy) {
            dbuf_addstr(&b, ", \"--policy\", ");
            setup_toml_string(&b, s->policy);
        }
        char tail[256];
        snprintf(tail, sizeof tail,
                 "]\n"
                 "# a command can take long: Codex's own default is 60 s\n"
                 "tool_timeout_sec = %d\n"
                 "# no approval prompt for txbox's tools (headless codex exec cancels them)\n"
                 "default_tools_approval_mode = \"approve\"\n",
                 MCP_TIMEOUT_S);
        dbuf_addstr(&b, tail);
        dbuf_addstr(&b, "# fail closed: Codex does not start when txbox cannot\nrequired = true\n");
        block = (char *)dbuf_str(&b);
    }
    if (setup_toml_edit(f->exists ? f->old : "", f->oldlen, block, out, outlen, err) < 0)
        return -1;
    if (s->remove && *outlen == 0) {
        free(*out);
        *out = NULL;
    }
    return 0;
}

/* ---- the command ---- */

/* A directory the user named by an absolute path ($CODEX_HOME,
 * $CLAUDE_CONFIG_DIR: trusted configuration), created when create;
 * -ENOENT when absent and !create. */
static int open_user_dir(const char *path, bool create, txbox_error *err)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
            return tx_errno(err, errno, "cannot create %s", path);
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    if (fd < 0 && errno == ENOENT)
        return -ENOENT;
    if (fd < 0)
        return tx_errno(err, errno, "cannot open the directory %s", path);
    return fd;
}

static int open_base(const char *path, txbox_error *err)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return tx_errno(err, errno, "cannot open %s", path);
    return fd;
}

static const char *home_dir(void)
{
    const char *h = getenv("HOME");
    if (h && *h == '/')
        return h;
    struct passwd *pw = getpwuid(getuid());
    return pw && pw->pw_dir && *pw->pw_dir == '/' ? pw->pw_dir : NULL;
}

static int run_setup(struct setup *s, txbox_error *err)
{
    const char *home = home_dir();
    if (s->user && !home)
        return tx_err(err, EINVAL, "--user: cannot find the home directory ($HOME)");
    _cleanup_close_ int proj = s->project ? open_base(s->project, err) : -1;
    if (s->project && proj < 0)
        return -1;
    _cleanup_close_ int homefd = -1;
    if (s->user) {
        homefd = open_base(home, err);
        if (homefd < 0)
            return -1;
    }
    int base = s->user ? homefd : proj;
    const char *label = s->user ? home : s->project;
    char rel[64];
    switch (s->id) {
    case A_CLAUDE: {
        /* Claude Code: $CLAUDE_CONFIG_DIR moves ~/.claude (and .claude.json) */
        const char *cfg = getenv("CLAUDE_CONFIG_DIR");
        if (s->user && cfg && *cfg == '/') {
            _cleanup_close_ int cfd = open_user_dir(cfg, !s->dry && !s->remove, err);
            if (cfd < 0 && cfd != -ENOENT)
                return -1;
            if (cfd == -ENOENT) {
                /* --remove: nothing there; --dry-run: it would be created */
                s->changed += !s->remove;
                printf("txbox setup: %s does not exist%s\n", cfg,
                       s->remove ? ": nothing of txbox's in it" : "; it would be created with the entries");
                return 0;
            }
            if (edit(s, cfd, cfg, "settings.json", edit_settings, err) < 0 ||
                edit(s, cfd, cfg, ".claude.json", edit_mcp_only, err) < 0)
                return -1;
            return 0;
        }
        snprintf(rel, sizeof rel, "%s/settings.json", s->a->dir);
        if (edit(s, base, label, rel, edit_settings, err) < 0)
            return -1;
        snprintf(rel, sizeof rel, "%s/settings.local.json", s->a->dir);
        if (!s->user && edit(s, base, label, rel, edit_grant_only, err) < 0)
            return -1;
        return edit(s, base, label, s->user ? ".claude.json" : ".mcp.json", edit_mcp_only, err);
    }
    case A_GEMINI:
    case A_QWEN:
        snprintf(rel, sizeof rel, "%s/settings.json", s->a->dir);
        return edit(s, base, label, rel, edit_settings, err);
    case A_OPENCODE: {
        if (!s->user)
            return edit(s, base, label, "opencode.json", edit_opencode, err);
        /* $XDG_CONFIG_HOME/opencode/opencode.json, else ~/.config/... */
        const char *xdg = getenv("XDG_CONFIG_HOME");
        _cleanup_free_ char *cfg = xdg && *xdg == '/' ? xstrdup(xdg) : xasprintf("%s/.config", home);
        _cleanup_free_ char *dir = xasprintf("%s/opencode", cfg);
        if (!s->dry && !s->remove && mkdir(cfg, 0700) < 0 && errno != EEXIST)
            return tx_errno(err, errno, "cannot create %s", cfg);
        _cleanup_close_ int cfd = open_user_dir(dir, !s->dry && !s->remove, err);
        if (cfd == -ENOENT) {
            s->changed += !s->remove;
            printf("txbox setup: %s does not exist%s\n", dir,
                   s->remove ? ": nothing of txbox's in it" : "; it would be created with the entries");
            return 0;
        }
        if (cfd < 0)
            return -1;
        return edit(s, cfd, dir, "opencode.json", edit_opencode, err);
    }
    case A_CODEX: {
        const char *ch = getenv("CODEX_HOME");
        if (s->user && ch && *ch == '/') {
            _cleanup_close_ int cfd = open_user_dir(ch, !s->dry && !s->remove, err);
            if (cfd == -ENOENT) {
                /* --remove: nothing there; --dry-run: it would be created */
                s->changed += !s->remove;
                printf("txbox setup: %s does not exist%s\n", ch,
                       s->remove ? ": nothing of txbox's in it" : "; it would be created with the entries");
                return 0;
            }
            if (cfd < 0)
                return -1;
            return edit(s, cfd, ch, "config.toml", edit_codex, err);
        }
        return edit(s, base, label, ".codex/config.toml", edit_codex, err);
    }
    }
    return 0;
}

int cmd_setup(int argc, char **argv)
{
    enum { O_PROJECT = 256, O_USER, O_DRY, O_REMOVE, O_POLICY, O_TXBOX };
    static const struct option opts[] = {
        {"project", required_argument, NULL, O_PROJECT},
        {"user", no_argument, NULL, O_USER},
        {"dry-run", no_argument, NULL, O_DRY},
        {"remove", no_argument, NULL, O_REMOVE},
        {"policy", required_argument, NULL, O_POLICY},
        {"txbox", required_argument, NULL, O_TXBOX},
        CLI_LONG_HELP,
        {0},
    };
    struct setup s = {0};
    const char *project = NULL, *policy = NULL, *self = NULL;
    cli_opts cli = {.name = "setup", .help = usage, .shorts = "h", .longs = opts, .argc = argc, .argv = argv};
    int c;
    while ((c = cli_opt_next(&cli)) >= 0) {
        switch (c) {
        case O_PROJECT:
            project = optarg;
            break;
        case O_USER:
            s.user = true;
            break;
        case O_DRY:
            s.dry = true;
            break;
        case O_REMOVE:
            s.remove = true;
            break;
        case O_POLICY:
            policy = optarg;
            break;
        case O_TXBOX:
            self = optarg;
            break;
        }
    }
    if (c == CLI_OPT_STOP)
        return cli.status;
    if (optind != argc - 1)
        return cli_failf("setup: name one agent CLI: claude-code, gemini-cli, qwen-code, codex or opencode");
    for (size_t i = 0; i < ARRAY_SIZE(agents); i++)
        if (!strcmp(argv[optind], agents[i].name)) {
            s.a = &agents[i];
            s.id = (agent_id)i;
        }
    if (!s.a)
        return cli_failf(
            "setup: unknown agent CLI '%s' (claude-code, gemini-cli, qwen-code, codex, opencode)",
            argv[optind]);
    if (project && s.user)
        return cli_failf("setup: give --project DIR or --user, not both");
    if (!project && !s.user && s.id == A_CODEX)
        s.user = true;
    int rc = TXBOX_EXIT_ERROR;
    if (!s.user && !(s.project = realpath(project ? project : ".", NULL))) {
        cli_failf("setup: project directory %s: %s", project ? project : ".", strerror(errno));
        goto out;
    }
    /* --txbox as given when absolute (a symlink the user installed stays
     * one), else resolved */
    if (self && *self == '/')
        s.self = access(self, X_OK) == 0 ? xstrdup(self) : NULL;
    else
        s.self = realpath(self ? self : "/proc/self/exe", NULL);
    if (!s.self) {
        cli_failf("setup: cannot find the txbox binary%s%s: %s", self ? " " : "", self ? self : "",
                  strerror(errno));
        goto out;
    }
    if (policy && !(s.policy = realpath(policy, NULL))) {
        cli_failf("setup: policy %s: %s", policy, strerror(errno));
        goto out;
    }
    txbox_error err = {0};
    if (run_setup(&s, &err) < 0) {
        fflush(stdout);
        cli_failf("setup: %s%s", err.msg, s.changed && !s.dry ? " (the files named above were written)" : "");
        goto out;
    }
    if (s.dry)
        printf("txbox setup: dry run: %d file%s would change; nothing was written\n", s.changed,
               s.changed == 1 ? "" : "s");
    rc = 0;
out:
    free(s.self);
    free(s.policy);
    free(s.project);
    return rc;
}
