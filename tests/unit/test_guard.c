/* The guard's lists (policy/default.yaml: agent-settings, host-autorun,
 * git-hook-runners, python-startup, home-startup, and the settings the
 * readers of editor-autorun and rust-programs count), entry by entry: the
 * list itself is this test's input. For each glob a path it names is made
 * (a '*' becomes a name, a "**" nothing or two directories, a class its
 * first member), also in upper case where the glob ignores case, and the
 * built-in policy's judge must hold it, by that rule; for home_written, in
 * the three places a home directory can have (the workspace, inside it,
 * around it). For each settings glob of a reader, a file setting it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <ctype.h>
#include <string.h>

#include "effects.h"
#include "txbox_policy.h"

static txbox_policy *builtin(void)
{
    txbox_policy *p = NULL;
    txbox_error err = {0};
    assert_int_equal(txbox_policy_load(NULL, NULL, &p, &err), 0);
    return p;
}

static const effect_rule *erule(const txbox_policy *p, const char *id)
{
    for (size_t i = 0; i < p->neffects; i++)
        if (!strcmp(p->effects[i].id, id))
            return &p->effects[i];
    fail_msg("no effect rule %s in the built-in policy", id);
    return NULL;
}

/* A path glob names (deep: "**" as two directories, else as none). */
static void name_of(const char *glob, bool deep, bool upper, char *out, size_t n)
{
    size_t w = 0;
    if (!strncmp(glob, "(?i)", 4))
        glob += 4;
    for (const char *g = glob; *g && w + 8 < n;) {
        if (g[0] == '*' && g[1] == '*') {
            if (deep) {
                memcpy(out + w, "d1/d2", 5);
                w += 5;
                g += 2;
            } else {
                g += 2;
                if (*g == '/')
                    g++;
                else if (w && out[w - 1] == '/')
                    w--; /* a final "**": the directory itself */
            }
            continue;
        }
        if (*g == '*' || *g == '?') {
            out[w++] = 'x';
            g++;
            continue;
        }
        if (*g == '[') {
            const char *e = strchr(g + 1, ']');
            assert_non_null(e);
            out[w++] = g[1] == '!' || g[1] == '^' ? 'q' : g[1];
            g = e + 1;
            continue;
        }
        out[w++] = *g++;
    }
    while (w && out[w - 1] == '/')
        w--;
    out[w] = 0;
    if (upper)
        for (char *c = out; *c; c++)
            *c = (char)toupper((unsigned char)*c);
}

/* Does the built-in policy hold path (kind) by rule id, the workspace at
 * ws and the home directory at home? */
static bool held_by(const txbox_policy *p, const char *id, const char *path, int kind, const char *content,
                    const char *ws, const char *home)
{
    struct effect_judge j;
    effect_judge_init(&j, p);
    effect_judge_places(&j, ws, home);
    size_t len = content ? strlen(content) : 0;
    struct effect_entry e = {.path = path,
                             .kind = kind,
                             .reg = kind != EFF_DELETED,
                             .bytes = len,
                             .data = content ? content : (kind != EFF_DELETED ? "" : NULL),
                             .len = len};
    effect_judge_feed(&j, &e);
    json_t *v = effect_judge_end(&j);
    bool hit = false;
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(v, "violations"), i, x)
    {
        hit = hit || !strcmp(json_string_value(json_object_get(x, "effect_rule")), id);
    }
    json_decref(v);
    json_decref(j.attention);
    return hit;
}

static void check_paths(const txbox_policy *p, const char *id, const strlist *l, bool deleted_too,
                        size_t *count)
{
    for (size_t i = 0; i < l->n; i++) {
        const char *g = l->v[i];
        bool icase = !strncmp(g, "(?i)", 4);
        for (int deep = 0; deep < 2; deep++)
            for (int up = 0; up <= (int)icase; up++) {
                char path[512];
                name_of(g, deep, up, path, sizeof path);
                if (!held_by(p, id, path, EFF_ADDED, "x\n", "/w", "/nonexistent"))
                    fail_msg("%s: %s (from %s) written is not held", id, path, g);
                if (deleted_too && !held_by(p, id, path, EFF_DELETED, NULL, "/w", "/nonexistent"))
                    fail_msg("%s: %s (from %s) deleted is not held", id, path, g);
            }
        (*count)++;
    }
}

static void agent_settings(void **state)
{
    (void)state;
    txbox_policy *p = builtin();
    size_t n = 0;
    check_paths(p, "agent-settings", &erule(p, "agent-settings")->paths_any, true, &n);
    print_message("agent-settings: %zu entries\n", n);
    assert_true(n >= 40);
    /* what is not an agent's settings */
    assert_false(
        held_by(p, "agent-settings", "node_modules/x/.claude/settings.json", EFF_ADDED, "", "/w", "/h"));
    assert_false(held_by(p, "agent-settings", "docs/claude.md", EFF_ADDED, "", "/w", "/h"));
    txbox_policy_free(p);
}

static void host_files(void **state)
{
    (void)state;
    txbox_policy *p = builtin();
    static const char *const ids[] = {"host-autorun", "git-hook-runners", "python-startup"};
    for (size_t k = 0; k < ARRAY_SIZE(ids); k++) {
        size_t n = 0;
        check_paths(p, ids[k], &erule(p, ids[k])->paths_written, false, &n);
        print_message("%s: %zu entries\n", ids[k], n);
        assert_true(n > 0);
    }
    assert_false(held_by(p, "git-hook-runners", "src/husky.c", EFF_ADDED, "", "/w", "/h"));
    txbox_policy_free(p);
}

static void home_files(void **state)
{
    (void)state;
    txbox_policy *p = builtin();
    const strlist *l = &erule(p, "home-startup")->home_written;
    for (size_t i = 0; i < l->n; i++) {
        char path[512], in[600];
        name_of(l->v[i], false, false, path, sizeof path);
        /* the workspace is the home directory */
        if (!held_by(p, "home-startup", path, EFF_ADDED, "x\n", "/home/u", "/home/u"))
            fail_msg("home-startup: %s (from %s) not held in a workspace that is the home", path, l->v[i]);
        /* ... holds it (the workspace is /) */
        snprintf(in, sizeof in, "home/u/%s", path);
        if (!held_by(p, "home-startup", in, EFF_ADDED, "x\n", "/", "/home/u"))
            fail_msg("home-startup: %s not held in a workspace around the home", in);
        /* ... lies in it: a path of two or more components, seen from its first */
        const char *slash = strchr(path, '/');
        if (slash && slash[1]) {
            char ws[600];
            snprintf(ws, sizeof ws, "/home/u/%.*s", (int)(slash - path), path);
            if (!held_by(p, "home-startup", slash + 1, EFF_ADDED, "x\n", ws, "/home/u"))
                fail_msg("home-startup: %s not held in the workspace %s", slash + 1, ws);
        }
        /* not a home file anywhere else, nor deleted */
        snprintf(in, sizeof in, "src/%s", path);
        if (held_by(p, "home-startup", in, EFF_ADDED, "x\n", "/home/u/proj", "/home/u"))
            fail_msg("home-startup: %s held in a project below the home", in);
        if (held_by(p, "home-startup", path, EFF_DELETED, NULL, "/home/u", "/home/u"))
            fail_msg("home-startup: %s deleted is held", path);
    }
    print_message("home-startup: %zu entries\n", l->n);
    assert_false(held_by(p, "home-startup", ".bashrc", EFF_ADDED, "x\n", "/srv/ws", "/home/u"));
    txbox_policy_free(p);
}

/* A setting name a key glob names: each '*' a name of its own. */
static void key_of(const char *glob, char *out, size_t n)
{
    size_t w = 0;
    for (const char *g = glob; *g && w + 4 < n; g++)
        if (*g == '*') {
            memcpy(out + w, "ab", 2);
            w += 2;
        } else {
            out[w++] = *g;
        }
    out[w] = 0;
}

static void reader_keys(void **state)
{
    (void)state;
    txbox_policy *p = builtin();
    const strlist *vk = &erule(p, "editor-autorun")->keys;
    for (size_t i = 0; i < vk->n; i++) {
        char key[300], doc[700];
        key_of(vk->v[i], key, sizeof key);
        snprintf(doc, sizeof doc, "{\n  // set by a test\n  \"%s\": \"./x\",\n}\n", key);
        if (!held_by(p, "editor-autorun", ".vscode/settings.json", EFF_ADDED, doc, "/w", "/h"))
            fail_msg("editor-autorun: the setting %s (from %s) is not held", key, vk->v[i]);
        snprintf(doc, sizeof doc, "{\"settings\": {\"[python]\": {\"%s\": 1}}}", key);
        if (!held_by(p, "editor-autorun", "a.code-workspace", EFF_ADDED, doc, "/w", "/h"))
            fail_msg("editor-autorun: the language setting %s in a workspace file is not held", key);
    }
    print_message("editor-autorun: %zu settings\n", vk->n);
    assert_false(held_by(p, "editor-autorun", ".vscode/settings.json", EFF_ADDED,
                         "{\"editor.tabSize\": 2, \"files.exclude\": {}}", "/w", "/h"));
    const strlist *tk = &erule(p, "rust-programs")->keys;
    for (size_t i = 0; i < tk->n; i++) {
        char key[300], doc[700];
        key_of(tk->v[i], key, sizeof key);
        snprintf(doc, sizeof doc, "# a test\n%s = \"./x\"\n", key);
        if (!held_by(p, "rust-programs", ".cargo/config.toml", EFF_ADDED, doc, "/w", "/h"))
            fail_msg("rust-programs: the key %s (from %s) is not held", key, tk->v[i]);
    }
    print_message("rust-programs: %zu keys\n", tk->n);
    assert_false(
        held_by(p, "rust-programs", ".cargo/config.toml", EFF_ADDED, "[build]\njobs = 4\n", "/w", "/h"));
    txbox_policy_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(agent_settings),
        cmocka_unit_test(host_files),
        cmocka_unit_test(home_files),
        cmocka_unit_test(reader_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
