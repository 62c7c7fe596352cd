/* Rules on effects (lib/effects.c): glob matching, and the judge on a
 * hand-made write set (an upper, a workspace and their operations). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "effects.h"
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

static const char policy_text[] =
    "version: 1\n"
    "effects:\n"
    "  - id: git-hooks\n"
    "    action: off\n"
    "  - id: t-bytes\n"
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

static void judge(void **state)
{
    (void)state;
    char *root = mkdtemp(tmpl);
    assert_non_null(root);
    int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(rfd >= 0);
    assert_int_equal(mkdirat(rfd, "up", 0700), 0);
    assert_int_equal(mkdirat(rfd, "ws", 0700), 0);
    int up = openat(rfd, "up", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int ws = openat(rfd, "ws", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_int_equal(mkfile(rfd, "p.yaml", policy_text, sizeof policy_text - 1, 0600), 0);
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
    assert_int_equal(effects_judge(p, up, ws, &ops, &v, &err), 0);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_object_get(v, "effect_rule")), "t-bytes");
    assert_string_equal(json_string_value(json_object_get(v, "action")), "hold");
    assert_string_equal(json_string_value(json_array_get(json_object_get(v, "paths"), 0)), "a.bin");
    json_decref(v);

    /* + run.sh made executable: the rollback rule decides, both listed */
    struct tx_op *o = op_add(&ops, OP_REPLACE, "run.sh");
    o->had_old = 1;
    o->old.mode = S_IFREG | 0644;
    assert_int_equal(effects_judge(p, up, ws, &ops, &v, &err), 0);
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
    assert_int_equal(effects_judge(p, up, ws, &ops, &v, &err), 0);
    assert_null(v);
    ops_free(&ops);

    txbox_policy_free(p);
    close(up);
    close(ws);
    close(rfd);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(WEXITSTATUS(pclose(popen(cmd, "r"))), 0);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(globs),
        cmocka_unit_test(judge),
        cmocka_unit_test(content_sets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
