/* Rules on effects (lib/policy/effect_rules.c, lib/tx/effects.c): glob
 * matching, and the judge on a hand-made write set (an upper, a workspace
 * and their operations). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <locale.h>
#include <regex.h>
#include <sys/stat.h>

#include "effects.h"
#include "gitcfg.h"
#include "txbox_policy.h"

static void globs(void **state)
{
    (void)state;
    /* without '/': the last component, at any depth */
    assert_true(effect_glob("*.lock", "Cargo.lock"));
    assert_true(effect_glob("*.lock", "a/b/yarn.lock"));
    assert_false(effect_glob("*.lock", "a/lock/x"));
    assert_true(effect_glob(".env", "svc/.env"));
    assert_false(effect_glob(".env", ".envrc"));
    /* with '/': anchored at the root; * stays in one component */
    assert_true(effect_glob(".git/config", ".git/config"));
    assert_false(effect_glob(".git/config", "sub/.git/config"));
    assert_true(effect_glob("/.git/config", ".git/config"));
    assert_false(effect_glob("src/*.c", "src/a/b.c"));
    assert_true(effect_glob("src/*.c", "src/b.c"));
    /* ** spans any number of components, none included */
    assert_true(effect_glob(".git/hooks/**", ".git/hooks"));
    assert_true(effect_glob(".git/hooks/**", ".git/hooks/pre-commit"));
    assert_true(effect_glob(".git/hooks/**", ".git/hooks/a/b/c"));
    assert_false(effect_glob(".git/hooks/**", ".git/hooksx"));
    assert_false(effect_glob(".git/hooks/**", ".git/HEAD"));
    assert_true(effect_glob("**/secrets/*.pem", "secrets/k.pem"));
    assert_true(effect_glob("**/secrets/*.pem", "a/b/secrets/k.pem"));
    assert_false(effect_glob("**/secrets/*.pem", "a/secrets/x/k.pem"));
    assert_true(effect_glob("a/**/z", "a/z"));
    assert_true(effect_glob("a/**/z", "a/b/c/z"));
    assert_false(effect_glob("a/**/z", "a/b/c/zz"));
    /* character classes */
    assert_true(effect_glob("[Jj]enkinsfile", "ci/Jenkinsfile"));
    assert_false(effect_glob("[Jj]enkinsfile", "Makefile"));
    /* the run of plain bytes a glob requires (checked before fnmatch) is
     * never taken from a bracket expression or an escape */
    assert_true(effect_glob("a[]b]c", "abc"));
    assert_true(effect_glob("a[]b]c", "a]c"));
    assert_true(effect_glob("x[!abc]yz", "xqyz"));
    assert_false(effect_glob("x[!abc]yz", "xayz"));
    assert_true(effect_glob("\\*star", "*star"));
    assert_false(effect_glob("\\*star", "xstar"));
    assert_true(effect_glob("[abc", "[abc"));
    assert_true(effect_glob("**/node_modules/**", "web/node_modules/left-pad/index.js"));
    assert_false(effect_glob("**/node_modules/**", "web/node_module/index.js"));
    assert_true(effect_glob("*.code-workspace", "a/b.code-workspace"));
    assert_false(effect_glob("*.code-workspace", "a/b.code-workspac"));
    /* (?i): any case, the run of plain bytes compared ignoring case */
    assert_true(effect_glob("(?i)**/.vscode/settings.json", "a/.VSCode/Settings.JSON"));
    assert_true(effect_glob("(?i)**/.vscode/settings.json", ".vscode/settings.json"));
    assert_false(effect_glob("(?i)**/.vscode/settings.json", "a/.vscode/settings.jsonc"));
    assert_false(effect_glob("(?i)**/.vscode/settings.json", "tree/d5/f123"));
    assert_true(effect_glob("(?i)**/site-packages/*.pth", "v/lib/Site-Packages/X.PTH"));
    assert_false(effect_glob("(?i)**/site-packages/*.pth", "v/lib/site-packages/x.py"));
    assert_true(effect_glob("(?i)*.code-workspace", "A.CODE-WORKSPACE"));
    assert_false(effect_glob("(?i)*.code-workspace", "a.code-workspac"));
    assert_true(effect_glob("(?i)pyvenv.cfg", "x/PYVENV.CFG"));
    assert_true(effect_glob("(?i)mise.toml", "MISE.TOML"));
    assert_false(effect_glob("(?i)mise.toml", "mise.tom"));
    /* a letter some locale folds to a non-ASCII character is never
     * required as a plain byte: in C.UTF-8, fnmatch folds the Kelvin sign
     * to k and the dotted capital I to i */
    if (setlocale(LC_ALL, "C.UTF-8")) {
        assert_true(effect_glob("(?i)kit.toml", "\xe2\x84\xaaIT.toml"));
        assert_true(effect_glob("(?i)tick", "T\xc4\xb0"
                                            "CK"));
        setlocale(LC_ALL, "C");
    }
}

static char tmpl[] = "/tmp/txbox-test-effects.XXXXXX";

static int mkfile(int dfd, const char *name, const char *data, size_t n, mode_t mode)
{
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -1;
    int rc = write_all(fd, data, n);
    close(fd);
    return rc < 0 ? -1 : fchmodat(dfd, name, mode, 0);
}

/* The built-in rules with git: judged by git in a sandbox
 * (tests/integration/gitcfg.bats), off here: effects_judge gets no view. */
#define GIT_RULES_OFF           \
    "  - id: git-hooks\n"       \
    "    action: off\n"         \
    "  - id: git-config-exec\n" \
    "    action: off\n"         \
    "  - id: git-hooks-path\n"  \
    "    action: off\n"

static const char policy_text[] =
    "version: 1\n"
    "effects:\n" GIT_RULES_OFF "  - id: t-bytes\n"
    "    action: hold\n"
    "    reason: r\n"
    "    suggestion: s\n"
    "    match: {paths_any: ['*.bin'], max_bytes_written: 100}\n"
    "    examples: {match: [{written: [a.bin], bytes: 101}], no_match: [{written: [a.txt], bytes: 101}]}\n"
    "  - id: t-exec\n"
    "    action: rollback\n"
    "    reason: r\n"
    "    suggestion: s\n"
    "    match: {max_made_executable: 0}\n"
    "    examples: {match: [{executable: true}], no_match: [{written: [x]}]}\n";

/* The settings the git judge compares (gitcfg.c), as git prints them. */
static void git_keys(void **state)
{
    (void)state;
    static const char *const yes[] = {
        "core.hookspath",
        "core.fsmonitor",
        "include.path",
        "includeif.gitdir:/x/.path",
        "extensions.worktreeconfig",
        "gpg.program",
        "gpg.ssh.program",
        "commit.gpgsign",
        "diff.external",
        "diff.Mine.textconv",
        "pager.log",
        "mergetool.a.b.cmd",
        "merge.ours2.driver",
        "interactive.difffilter",
        "alias.st",
        "filter.lfs.process",
        "credential.https://x.helper",
        "core.sshcommand",
        "sequence.editor",
        "core.editor",
        "uploadpack.packobjectshook",
        "remote.o.uploadpack",
        "sendemail.smtpserver",
        "browser.x.cmd",
        "man.x.cmd",
        "tar.tgz.command",
        "CORE.HOOKSPATH",
    };
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        if (!gitcfg_exec_key(yes[i], "x"))
            fail_msg("%s is a command setting", yes[i]);
    static const char *const no[] = {"user.name",          "core.autocrlf",       "core.filemode",
                                     "branch.main.remote", "remote.origin.fetch", "diff.renames",
                                     "merge.ff",           "pull.rebase"};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++)
        if (gitcfg_exec_key(no[i], "x"))
            fail_msg("%s is no command setting", no[i]);
    assert_false(gitcfg_exec_key("remote.origin.url", "https://example.com/r.git"));
    assert_true(gitcfg_exec_key("remote.origin.url", "ext::sh -c x"));
    assert_true(gitcfg_exec_key("remote.origin.pushurl", "FD::3"));
    assert_true(gitcfg_exec_key("url.ext::sh -c x.insteadof", "https://"));
    assert_false(gitcfg_exec_key("url.https://mirror/.insteadof", "https://"));
}

/* A scratch directory root (from tmpl, edited in place) with up/ (the
 * upper), ws/ (the workspace) and p.yaml (policy, n bytes): their fds. */
struct scratch {
    char *root;
    int rfd, up, ws;
};

static void scratch_make(struct scratch *x, char *tmpl_, const char *policy, size_t n)
{
    x->root = mkdtemp(tmpl_);
    assert_non_null(x->root);
    x->rfd = open(x->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(x->rfd >= 0);
    assert_int_equal(mkdirat(x->rfd, "up", 0700), 0);
    assert_int_equal(mkdirat(x->rfd, "ws", 0700), 0);
    x->up = openat(x->rfd, "up", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    x->ws = openat(x->rfd, "ws", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_int_equal(mkfile(x->rfd, "p.yaml", policy, n, 0600), 0);
}

static void scratch_remove(struct scratch *x)
{
    close(x->up);
    close(x->ws);
    close(x->rfd);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", x->root);
    assert_int_equal(WEXITSTATUS(pclose(popen(cmd, "r"))), 0);
}

static void judge(void **state)
{
    (void)state;
    struct scratch sx;
    scratch_make(&sx, tmpl, policy_text, sizeof policy_text - 1);
    char *root = sx.root;
    int up = sx.up, ws = sx.ws;
    char big[150];
    memset(big, 'x', sizeof big);
    assert_int_equal(mkfile(up, "a.bin", big, sizeof big, 0644), 0);
    assert_int_equal(mkfile(up, "run.sh", "echo\n", 5, 0755), 0);
    assert_int_equal(mkfile(ws, "run.sh", "old\n", 4, 0644), 0);
    char pf[256];
    snprintf(pf, sizeof pf, "%s/p.yaml", root);
    txbox_policy *p = NULL;
    txbox_error err = {0};
    assert_int_equal(txbox_policy_load(pf, NULL, &p, &err), 0);

    /* a.bin added (150 bytes > 100): held by t-bytes */
    struct tx_ops ops = {0};
    op_add(&ops, OP_REPLACE, "a.bin");
    json_t *v = NULL;
    assert_int_equal(effects_judge(p, up, ws, &ops, NULL, NULL, &v, NULL, &err), 0);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_object_get(v, "effect_rule")), "t-bytes");
    assert_string_equal(json_string_value(json_object_get(v, "action")), "hold");
    assert_string_equal(json_string_value(json_array_get(json_object_get(v, "paths"), 0)), "a.bin");
    json_decref(v);

    /* + run.sh made executable: the rollback rule decides, both listed */
    struct tx_op *o = op_add(&ops, OP_REPLACE, "run.sh");
    o->had_old = 1;
    o->old.mode = S_IFREG | 0644;
    assert_int_equal(effects_judge(p, up, ws, &ops, NULL, NULL, &v, NULL, &err), 0);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_object_get(v, "effect_rule")), "t-exec");
    assert_string_equal(json_string_value(json_object_get(v, "action")), "rollback");
    assert_int_equal(json_array_size(json_object_get(v, "violations")), 2);
    json_decref(v);

    /* it was executable before: not "made" executable */
    ops_free(&ops);
    o = op_add(&ops, OP_REPLACE, "run.sh");
    o->had_old = 1;
    o->old.mode = S_IFREG | 0700;
    assert_int_equal(effects_judge(p, up, ws, &ops, NULL, NULL, &v, NULL, &err), 0);
    assert_null(v);
    ops_free(&ops);

    txbox_policy_free(p);
    scratch_remove(&sx);
}

/* A write set of 3,000 files in one new directory: the listed paths are
 * the first in walk order (readdir's, recomputed here), the content of the
 * last file walked is read and judged, and the byte limit sees every
 * file. (A reader thread that judged in a second thread was tried and
 * measured no faster: this is the check any such change must pass.) */
static const char big_policy[] =
    "version: 1\n"
    "effects:\n" GIT_RULES_OFF "  - id: t-mark\n"
    "    action: hold\n"
    "    reason: r\n"
    "    suggestion: s\n"
    "    match: {paths_written: ['*.mark']}\n"
    "    examples: {match: [{written: [a.mark]}], no_match: [{written: [a.txt]}]}\n"
    "  - id: t-secret\n"
    "    action: rollback\n"
    "    reason: r\n"
    "    suggestion: s\n"
    "    match: {content_any: ['SECRET[0-9]{4}']}\n"
    "    examples: {match: [{written: [a], content: \"x SECRET1234\"}], no_match: [{written: [a], content: \"SECRET\"}]}\n"
    "  - id: t-total\n"
    "    action: attention\n"
    "    reason: r\n"
    "    suggestion: s\n"
    "    match: {paths_any: ['big/**'], max_bytes_written: 29999}\n"
    "    examples: {match: [{written: [big/a], bytes: 30000}], no_match: [{written: [big/a], bytes: 29999}]}\n";

/* The paths under dfd/name in readdir's order, as the walk takes them. */
static void walk_order(int dfd, const char *name, const char *path, json_t *out)
{
    struct stat st;
    assert_int_equal(fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW), 0);
    json_array_append_new(out, json_string(path));
    if (!S_ISDIR(st.st_mode))
        return;
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fdopendir(fd);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char sub[512];
        snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
        walk_order(dirfd(d), de->d_name, sub, out);
    }
    closedir(d);
}

static void big_write_set(void **state)
{
    (void)state;
    char tdir[] = "/tmp/txbox-test-effects-big.XXXXXX";
    struct scratch sx;
    scratch_make(&sx, tdir, big_policy, sizeof big_policy - 1);
    char *root = sx.root;
    int up = sx.up, ws = sx.ws;
    assert_int_equal(mkdirat(up, "big", 0755), 0);
    int nfiles = 0;
    for (int k = 0; k < 30; k++) {
        char dn[32];
        snprintf(dn, sizeof dn, "big/d%d", k);
        assert_int_equal(mkdirat(up, dn, 0755), 0);
        for (int i = 0; i < 100; i++, nfiles++) {
            char fn[64];
            snprintf(fn, sizeof fn, "%s/f%d%s", dn, i, (k * 100 + i) % 37 ? "" : ".mark");
            assert_int_equal(mkfile(up, fn, "ten bytes\n", 10, 0644), 0);
        }
    }
    char pf[256];
    snprintf(pf, sizeof pf, "%s/p.yaml", root);
    txbox_policy *p = NULL;
    txbox_error err = {0};
    assert_int_equal(txbox_policy_load(pf, NULL, &p, &err), 0);
    struct tx_ops ops = {0};
    op_add(&ops, OP_REPLACE, "big");
    json_t *order = json_array();
    walk_order(up, "big", "big", order);
    assert_int_equal(json_array_size(order), 1 + 30 + nfiles);

    /* the hold rule decides; its paths are the first 50 .mark files walked;
     * 3,000 files of 10 bytes pass the byte limit of 29,999 (attention) */
    json_t *v = NULL, *att = NULL;
    assert_int_equal(effects_judge(p, up, ws, &ops, NULL, NULL, &v, &att, &err), 0);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_object_get(v, "effect_rule")), "t-mark");
    json_t *paths = json_object_get(v, "paths");
    assert_int_equal(json_array_size(paths), 50);
    size_t k = 0, i;
    json_t *x;
    json_array_foreach(order, i, x)
    {
        const char *s = json_string_value(x);
        if (k < 50 && strlen(s) > 5 && !strcmp(s + strlen(s) - 5, ".mark"))
            assert_string_equal(json_string_value(json_array_get(paths, k++)), s);
    }
    assert_int_equal(k, 50);
    assert_non_null(att);
    assert_string_equal(json_string_value(json_object_get(json_array_get(att, 0), "effect_rule")), "t-total");
    json_decref(v);
    json_decref(att);

    /* a secret in the last file walked: the rollback rule decides */
    const char *last = json_string_value(json_array_get(order, json_array_size(order) - 1));
    assert_int_equal(mkfile(up, last, "x SECRET1234\n", 13, 0644), 0);
    assert_int_equal(effects_judge(p, up, ws, &ops, NULL, NULL, &v, NULL, &err), 0);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_object_get(v, "effect_rule")), "t-secret");
    assert_string_equal(json_string_value(json_array_get(json_object_get(v, "paths"), 0)), last);
    json_decref(v);

    json_decref(order);
    ops_free(&ops);
    txbox_policy_free(p);
    scratch_remove(&sx);
}

/* content_any: one pass over the content per set of patterns (without and
 * with (?i)) decides "no pattern matches"; each pattern of a set, on its
 * own, must still be found, and a set with a back-reference is tried one
 * pattern at a time. The examples are checked at load: a prefilter that
 * missed one pattern, or matched what none does, fails the load. */
static const char sets_policy[] =
    "effects:\n"
    "  - id: t-sets\n"
    "    action: rollback\n"
    "    reason: r\n"
    "    suggestion: s\n"
    "    match: {content_any: ['^AAA[0-9]+$', 'b(c|d)e', 'q{3}', '(?i)zz[xy]', '(?i)^end$', '(k)\\1']}\n"
    "    examples:\n"
    "      match: [{written: [a], content: \"x\\nAAA12\\n\"}, {written: [a], content: \"abde\"},\n"
    "              {written: [a], content: \"qqq\"}, {written: [a], content: \"ZZY\"},\n"
    "              {written: [a], content: \"1\\nEnD\\n2\"}, {written: [a], content: \"kk\"}]\n"
    "      no_match: [{written: [a], content: \"AAA12x\\nbe bxe qq zz END!\"}, {written: [a], content: \"k-k\"}]\n";

static void content_sets(void **state)
{
    (void)state;
    char tdir[] = "/tmp/txbox-test-effects-sets.XXXXXX";
    char *root = mkdtemp(tdir);
    assert_non_null(root);
    int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(rfd >= 0);
    assert_int_equal(mkfile(rfd, "p.yaml", sets_policy, sizeof sets_policy - 1, 0600), 0);
    char pf[256];
    snprintf(pf, sizeof pf, "%s/p.yaml", root);
    txbox_policy *p = NULL;
    txbox_error err = {0};
    int rc = txbox_policy_load(pf, NULL, &p, &err);
    if (rc != 0)
        fail_msg("%s", err.msg);
    txbox_policy_free(p);
    assert_int_equal(unlinkat(rfd, "p.yaml", 0), 0);
    close(rfd);
    assert_int_equal(rmdir(root), 0);
}

/* The literal filter (effect_lit_build): the strings it derives, and on
 * random text near known matches, never "cannot match" where regexec
 * finds a match. */
static void lit_rule(effect_rule *r, const char *pat)
{
    memset(r, 0, sizeof *r);
    strlist_add(&r->content_any, pat);
    effect_lit_build(r);
}

static void lit_expect(const char *pat, const char *const *want, size_t n)
{
    effect_rule r;
    lit_rule(&r, pat);
    if (!n) {
        if (r.lit_ok)
            fail_msg("%s: a filter (%zu strings, first '%s') where none was expected", pat, r.lit_n,
                     r.lit[0]);
    } else {
        if (!r.lit_ok)
            fail_msg("%s: no filter", pat);
        bool same = r.lit_n == n;
        for (size_t i = 0; same && i < n; i++)
            same = !strcmp(r.lit[i], want[i]);
        if (!same)
            fail_msg("%s: %zu strings, first '%s', want %zu, first '%s'", pat, r.lit_n, r.lit[0], n, want[0]);
    }
    effect_rule_free(&r);
}

#define LIT(pat, ...)                                                  \
    do {                                                               \
        static const char *const w_[] = {__VA_ARGS__};                 \
        lit_expect(pat, w_, sizeof w_ / sizeof *w_ - (w_[0] == NULL)); \
    } while (0)

static const char *const lit_patterns[] = {
    /* the built-in secret rule's */
    "-----BEGIN ([A-Z]+ )?PRIVATE KEY-----",
    "(^|[^A-Za-z0-9])(AKIA|ASIA)[0-9A-Z]{16}([^A-Za-z0-9]|$)",
    "(^|[^A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{36}([^A-Za-z0-9_]|$)",
    "(^|[^A-Za-z0-9_])github_pat_[A-Za-z0-9_]{40,}",
    "(^|[^A-Za-z0-9_-])xox[abpsr]-[0-9]+-[A-Za-z0-9-]{10,}",
    "(^|[^A-Za-z0-9_-])glpat-[A-Za-z0-9_-]{20}([^A-Za-z0-9_-]|$)",
    "(^|[^A-Za-z0-9_-])sk-(proj|ant-api[0-9]+)-[A-Za-z0-9_-]{32,}",
    "(^|[^A-Za-z0-9_-])sk-[A-Za-z0-9]{48}([^A-Za-z0-9_-]|$)",
    /* git-config-exec's */
    "(?i)^[[:space:]]*(hookspath|fsmonitor|sshcommand|pager|editor|askpass|gitproxy|textconv|clean|smudge|process|command|helper)[[:space:]]*=",
    "=[[:space:]]*!",
    /* shapes the reader must get right */
    "^AAA[0-9]+$",
    "b(c|d)e",
    "q{3}",
    "(?i)zz[xy]",
    "(?i)^end$",
    "(k)\\1",
    "ab+c",
    "a(b|)c",
    "x(ab|cd)*y",
    "[]a]b",
    "[^a]bc",
    "a\\.b",
    "(?i)[A-C]x",
    "a{1}b{1,1}c{0,2}d",
    "(a|b(c|d))e",
    "[a-]z",
    "k\\wz",
};

static const char *const lit_seeds[] = {
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----\n",
    "-----BEGIN PRIVATE KEY-----",
    "AWS_KEY = 'AKIAIOSFODNN7EXAMPLE'\n",
    "ASIA0123456789ABCDEF",
    "token=ghp_0123456789abcdefghijABCDEFGHIJ012345\n",
    "gho_0123456789abcdefghijABCDEFGHIJ012345",
    "github_pat_0123456789abcdefghijABCDEFGHIJ0123456789",
    "xoxb-1234-abcdefghijkl",
    "glpat-0123456789abcdefghij ",
    "sk-proj-0123456789abcdefghijABCDEFGHIJ012345",
    "sk-ant-api03-0123456789abcdefghijABCDEFGHIJ012345",
    "sk-0123456789abcdefghijABCDEFGHIJ0123456789abcdefghij",
    "[core]\n\thooksPath = /tmp/h\n",
    "[alias]\n\tx = !sh -c id\n",
    "  PAGER=less\n",
    "x\nAAA12\n",
    "abde",
    "abce",
    "qqq",
    "ZZY",
    "1\nEnD\n2",
    "kk",
    "abbbc",
    "ac",
    "abc",
    "xy",
    "xababcdy",
    "]b",
    "ab",
    "xbc",
    "a.b",
    "cx",
    "Bx",
    "abcd",
    "bde",
    "ae",
    "-z",
    "az",
    "k_z",
    "kaz",
};

static uint64_t lit_rng = 0x9e3779b97f4a7c15ull;

static unsigned lit_rand(unsigned n)
{
    lit_rng ^= lit_rng << 13;
    lit_rng ^= lit_rng >> 7;
    lit_rng ^= lit_rng << 17;
    return (unsigned)(lit_rng % n);
}

/* A seed (or two, or a piece of a pattern) with random edits. */
static size_t lit_text(char *buf, size_t cap, const char *pat)
{
    static const char noise[] = "aAbBcCkKqQxXyYzZ0189_-.= \n\t!:]";
    size_t n = 0;
    for (int parts = 1 + (int)lit_rand(3); parts > 0; parts--) {
        const char *src;
        size_t len;
        if (lit_rand(4) == 0) { /* a piece of the pattern text itself */
            size_t pl = strlen(pat), a = lit_rand((unsigned)pl);
            src = pat + a;
            len = 1 + lit_rand((unsigned)(pl - a));
        } else {
            src = lit_seeds[lit_rand(sizeof lit_seeds / sizeof *lit_seeds)];
            len = strlen(src);
        }
        for (size_t i = 0; i < len && n < cap; i++)
            buf[n++] = src[i];
    }
    for (int edits = (int)lit_rand(4); edits > 0 && n > 0; edits--) {
        size_t at = lit_rand((unsigned)n);
        switch (lit_rand(4)) {
        case 0:
            buf[at] = noise[lit_rand(sizeof noise - 1)];
            break;
        case 1:
            memmove(buf + at, buf + at + 1, n - at - 1);
            n--;
            break;
        case 2:
            if (n < cap) {
                memmove(buf + at + 1, buf + at, n - at);
                buf[at] = noise[lit_rand(sizeof noise - 1)];
                n++;
            }
            break;
        default:
            buf[at] ^= (buf[at] >= 'A' && buf[at] <= 'z') ? 0x20 : 0;
        }
    }
    return n;
}

static void literal_filter(void **state)
{
    (void)state;
    LIT("gh[pousr]_[A-Za-z0-9]{36}", "gho_", "ghp_", "ghr_", "ghs_", "ghu_");
    LIT("(^|[^A-Za-z0-9])(AKIA|ASIA)[0-9A-Z]{16}", "AKIA", "ASIA");
    LIT("-----BEGIN ([A-Z]+ )?PRIVATE KEY-----", "PRIVATE KEY-----");
    LIT("(?i)zz[XY]", "zzx", "zzy");
    /* under (?i), i, k and s fold to non-ASCII letters in some locales */
    LIT("(?i)hookspath", "path");
    LIT("(?i)[ab]s[ab]", "a", "b");
    LIT("(?i)x[j-l]y", "x");
    LIT("hookspath", "hookspath");
    /* glibc folds the long s to s under REG_ICASE in a UTF-8 locale */
    {
        /* C.UTF-8 is built into glibc (2.35 and later) */
        assert_non_null(setlocale(LC_ALL, "C.UTF-8"));
        static const char longs[] = "hook\xc5\xbfpath = /tmp/h";
        regex_t re;
        assert_int_equal(regcomp(&re, "hookspath", REG_EXTENDED | REG_ICASE | REG_NOSUB), 0);
        assert_int_equal(regexec(&re, longs, 0, NULL, 0), 0); /* what the filter must allow for */
        regfree(&re);
        effect_rule r;
        lit_rule(&r, "(?i)hookspath");
        assert_true(effect_lit_may_match(&r, longs, sizeof longs - 1));
        effect_rule_free(&r);
        assert_non_null(setlocale(LC_ALL, "C"));
    }
    LIT("(?i)x(AB|cd)+", "ab", "cd");
    LIT("ab+c", "ab");
    LIT("q{3}", "q");
    LIT("(k)\\1", "k");
    LIT("a\\.bc", "a.bc");
    LIT("[[:alpha:]]+xyz", "xyz");
    LIT("a.b", "a");
    LIT("sk-(proj|ant-api)-", "proj", "ant-api"); /* the group's: longer than "sk-" */
    LIT("v[0-3]+", "v0", "v1", "v2", "v3");
    LIT("ab[c-e]", "ab"); /* a range of letters is left to the regex */
    LIT("x*", NULL);
    LIT("(a|)b*", NULL);
    LIT("a{", NULL);
    LIT("a{2", NULL);
    LIT("[abc", NULL);
    LIT("*a", NULL);
    LIT("a**", NULL);
    LIT("a\\", NULL);
    LIT("((((((((((a))))))))))", NULL);
    LIT("\xc3\xa9", NULL); /* a multibyte character */
    /* one pattern without a set: the whole rule goes without the filter */
    {
        effect_rule r;
        memset(&r, 0, sizeof r);
        strlist_add(&r.content_any, "abc");
        strlist_add(&r.content_any, ".*");
        effect_lit_build(&r);
        assert_false(r.lit_ok);
        assert_true(effect_lit_may_match(&r, "zzz", 3));
        effect_rule_free(&r);
    }

    char buf[512];
    size_t matched = 0, rejected = 0;
    for (size_t pi = 0; pi < sizeof lit_patterns / sizeof *lit_patterns; pi++) {
        const char *pat = lit_patterns[pi];
        bool icase = !strncmp(pat, "(?i)", 4);
        regex_t re;
        assert_int_equal(
            regcomp(&re, icase ? pat + 4 : pat, REG_EXTENDED | REG_NEWLINE | (icase ? REG_ICASE : 0)), 0);
        effect_rule r;
        lit_rule(&r, pat);
        for (int t = 0; t < 4000; t++) {
            size_t n = lit_text(buf, sizeof buf - 1, pat);
            buf[n] = 0;
            regmatch_t m = {.rm_so = 0, .rm_eo = (regoff_t)n};
            bool hit = regexec(&re, buf, 1, &m, REG_STARTEND) == 0;
            bool may = effect_lit_may_match(&r, buf, n);
            if (hit && !may)
                fail_msg("pattern '%s' matches '%.*s' but the literal filter says it cannot", pat, (int)n,
                         buf);
            matched += hit;
            rejected += !may;
        }
        regfree(&re);
        effect_rule_free(&r);
    }
    /* the random texts exercised both sides */
    assert_true(matched > 1000);
    assert_true(rejected > 1000);
}

/* The literal filter's one-pass search finds exactly what one memmem per
 * string finds: strings of several lengths, with and without case, planted
 * at every kind of place (the start, the end, across the search's steps). */
static bool naive_has(const effect_rule *r, const char *d, size_t n)
{
    for (size_t i = 0; i < r->lit_n; i++) {
        size_t m = strlen(r->lit[i]);
        for (size_t p = 0; p + m <= n; p++) {
            size_t k = 0;
            while (k < m && (r->lit_icase[i] ? tolower((unsigned char)d[p + k]) : d[p + k]) == r->lit[i][k])
                k++;
            if (k == m)
                return true;
        }
    }
    return false;
}

static void literal_one_pass(void **state)
{
    (void)state;
    effect_rule r;
    memset(&r, 0, sizeof r);
    strlist_add(&r.content_any, "-----BEGIN ([A-Z]+ )?PRIVATE KEY-----");
    strlist_add(&r.content_any, "(AKIA|ASIA)[0-9A-Z]{16}");
    strlist_add(&r.content_any, "gh[pousr]_[A-Za-z0-9]{36}");
    strlist_add(&r.content_any, "(?i)folderopen");
    strlist_add(&r.content_any, "(?i)xy.z");
    effect_lit_build(&r);
    assert_true(r.lit_ok);
    assert_non_null(r.lit_pairs);
    assert_true(r.lit_min >= 2);
    const char *plant[] = {"AKIA",      "ASIA", "ghp_", "ghr_",        "FolderOpen", "FOLDEROPEN",
                           "folderope", "xY",   "xy",   "-----BEGIN ", "AKI",        "gh_"};
    const char alpha[] = "AKISghp_r-xyFOLDERopen ";
    char buf[300];
    unsigned seed = 1;
    size_t hits = 0, misses = 0;
    for (int t = 0; t < 20000; t++) {
        size_t n = (size_t)(rand_r(&seed) % (sizeof buf));
        for (size_t i = 0; i < n; i++)
            buf[i] = alpha[rand_r(&seed) % (sizeof alpha - 1)];
        if (n && rand_r(&seed) % 2) {
            const char *w = plant[rand_r(&seed) % (sizeof plant / sizeof *plant)];
            size_t l = strlen(w);
            if (l <= n) {
                size_t at = rand_r(&seed) % 3 == 0 ? n - l : (size_t)rand_r(&seed) % (n - l + 1);
                memcpy(buf + at, w, l);
            }
        }
        bool want = naive_has(&r, buf, n), got = effect_lit_may_match(&r, buf, n);
        if (want != got)
            fail_msg("one pass says %d, memmem %d, on '%.*s'", got, want, (int)n, buf);
        hits += want;
        misses += !want;
    }
    assert_true(hits > 1000);
    assert_true(misses > 1000);
    effect_rule_free(&r);
}

/* An agent CLI's settings: the words of every command, args and key
 * helper that are workspace paths, however the project directory is
 * written; nothing else. */
static void agent_runner_paths(void **state)
{
    (void)state;
    const char *d =
        "{\n // JSONC\n \"hooks\": {\"PostToolUse\": [{\"matcher\": \"Edit|Write\", \"hooks\": [\n"
        "  {\"type\": \"command\", \"command\": \"\\\"$CLAUDE_PROJECT_DIR\\\"/scripts/a.sh --fix\"},\n"
        "  {\"type\": \"command\", \"command\": \"${CLAUDE_PROJECT_DIR}/b/c.py\"},\n"
        "  {\"type\": \"command\", \"command\": \"'$GEMINI_PROJECT_DIR'/g.sh && ./h/i x.txt\"}]}]},\n"
        " \"statusLine\": {\"type\": \"command\", \"command\": \"bash tools/status.sh\"},\n"
        " \"apiKeyHelper\": \"node key.js\",\n"
        " \"mcpServers\": {\"s\": {\"command\": \"python3\", \"args\": [\"-m\", \"srv/main.py\"]}},\n"
        " \"permissions\": {\"allow\": [\"Bash(scripts/never.sh)\"]},\n"
        " \"model\": \"not/a-path.sh\",\n}\n";
    strlist out = {0};
    effect_runner_paths(EFF_RUNNER_AGENT, d, strlen(d), &out);
    const char *want[] = {"scripts/a.sh",    "b/c.py", "g.sh",       "h/i",
                          "tools/status.sh", "key.js", "srv/main.py"};
    for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
        bool found = false;
        for (size_t k = 0; k < out.n && !found; k++)
            found = !strcmp(out.v[k], want[i]);
        if (!found)
            fail_msg("%s not among the %zu paths", want[i], out.n);
    }
    for (size_t k = 0; k < out.n; k++)
        if (strstr(out.v[k], "never") || strstr(out.v[k], "a-path") || strstr(out.v[k], "CLAUDE"))
            fail_msg("not a program's path: %s", out.v[k]);
    strlist_free(&out);
    /* not JSON: nothing */
    effect_runner_paths(EFF_RUNNER_AGENT, "{\"command\": \"a.sh\"", 18, &out);
    assert_int_equal(out.n, 0);
    strlist_free(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(globs),          cmocka_unit_test(git_keys),
        cmocka_unit_test(judge),          cmocka_unit_test(content_sets),
        cmocka_unit_test(literal_filter), cmocka_unit_test(literal_one_pass),
        cmocka_unit_test(big_write_set),  cmocka_unit_test(agent_runner_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
