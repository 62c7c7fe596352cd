/* scan_upper turns a hand-made overlay upper into the right operations and
 * refuses what it must not commit. Runs as root (whiteouts are 0/0 device
 * nodes; trusted.* xattrs need CAP_SYS_ADMIN). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "tx.h"

static char root[64];
static int ws = -1, up = -1;

static void mkfile(int dfd, const char *p, const char *text)
{
    int fd = openat(dfd, p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static int setup(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        if (getenv("TXBOX_MUST_WORK"))
            return -1;
        return 0;
    }
    snprintf(root, sizeof root, "/tmp/txbox-scan-XXXXXX");
    if (!mkdtemp(root))
        return -1;
    int r = open(root, O_RDONLY | O_DIRECTORY);
    mkdirat(r, "ws", 0755);
    mkdirat(r, "up", 0755);
    ws = openat(r, "ws", O_RDONLY | O_DIRECTORY);
    up = openat(r, "up", O_RDONLY | O_DIRECTORY);
    close(r);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (ws >= 0) {
        close(ws);
        close(up);
        tree_remove(AT_FDCWD, root);
    }
    return 0;
}

static const struct tx_op *find(const struct tx_ops *ops, const char *path)
{
    for (size_t i = 0; i < ops->n; i++)
        if (!strcmp(ops->v[i].path, path))
            return &ops->v[i];
    return NULL;
}

/* find(), failing the test when path has no operation (abort() tells the
 * compiler the result is never NULL). */
static const struct tx_op *must_find(const struct tx_ops *ops, const char *path)
{
    const struct tx_op *o = find(ops, path);
    if (!o) {
        print_error("no operation for %s\n", path);
        fail();
        abort();
    }
    return o;
}

static void every_kind(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    /* lower (the workspace) */
    mkfile(ws, "gone", "old");
    mkfile(ws, "mod", "old");
    mkdirat(ws, "dir", 0755);
    mkfile(ws, "dir/a", "a");
    mkdirat(ws, "m", 0755);
    mkfile(ws, "m/keep", "k");
    mkfile(ws, "m/x", "x");
    mkfile(ws, "f2d", "f");
    /* upper */
    assert_int_equal(mknodat(up, "gone", S_IFCHR | 0, makedev(0, 0)), 0);
    mkfile(up, "mod", "new");
    mkfile(up, "new", "n");
    mkdirat(up, "dir", 0755);
    char p[96];
    snprintf(p, sizeof p, "%s/up/dir", root);
    assert_int_equal(setxattr(p, "trusted.overlay.opaque", "y", 1, 0), 0);
    mkfile(up, "dir/b", "b");
    mkdirat(up, "m", 0755);
    assert_int_equal(mknodat(up, "m/x", S_IFCHR | 0, makedev(0, 0)), 0);
    mkfile(up, "m/y", "y");
    mkdirat(up, "f2d", 0755);
    mkfile(up, "f2d/in", "i");
    snprintf(p, sizeof p, "%s/up/mod", root);
    assert_int_equal(setxattr(p, "trusted.overlay.origin", "", 0, 0), 0);

    struct tx_ops ops = {0};
    txbox_error e = {0};
    assert_int_equal(scan_upper(up, ws, false, &ops, NULL, &e), 0);
    const struct tx_op *o;
    o = must_find(&ops, "gone");
    assert_int_equal(o->kind, OP_DELETE);
    o = must_find(&ops, "mod");
    assert_int_equal(o->kind, OP_REPLACE);
    assert_true(o->had_old);
    o = must_find(&ops, "new");
    assert_int_equal(o->kind, OP_REPLACE);
    assert_false(o->had_old);
    o = must_find(&ops, "dir");
    assert_int_equal(o->kind, OP_REPLACE); /* opaque: the whole subtree */
    assert_true(o->new_dir && o->old_dir);
    assert_null(find(&ops, "dir/b"));
    o = must_find(&ops, "m/x");
    assert_int_equal(o->kind, OP_DELETE);
    assert_non_null(find(&ops, "m/y"));
    assert_null(find(&ops, "m/keep"));
    o = must_find(&ops, "m");
    assert_int_equal(o->kind, OP_META);
    o = must_find(&ops, "f2d");
    assert_int_equal(o->kind, OP_REPLACE);
    assert_true(o->new_dir && !o->old_dir);
    /* META of m comes after m's children (post-order). */
    size_t im = 0, iy = 0;
    for (size_t i = 0; i < ops.n; i++) {
        if (!strcmp(ops.v[i].path, "m"))
            im = i;
        if (!strcmp(ops.v[i].path, "m/y"))
            iy = i;
    }
    assert_true(im > iy);
    /* Overlay attributes were stripped from what moves into the workspace. */
    char v[8];
    assert_true(getxattr(p, "trusted.overlay.origin", v, sizeof v) < 0);

    json_t *c = ops_changes(up, ws, &ops, 100);
    char *s = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
    assert_non_null(strstr(s, "\"gone\""));
    assert_non_null(strstr(s, "\"dir/b\""));
    free(s);
    json_decref(c);
    ops_free(&ops);
}

static void refuses_device_nodes_and_unknown_overlay_attrs(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    struct tx_ops ops = {0};
    txbox_error e = {0};
    assert_int_equal(mknodat(up, "null", S_IFCHR | 0666, makedev(1, 3)), 0);
    assert_int_equal(scan_upper(up, ws, false, &ops, NULL, &e), -1);
    assert_non_null(strstr(e.msg, "device node"));
    ops_free(&ops);
    unlinkat(up, "null", 0);
    mkfile(up, "redir", "r");
    char p[96];
    snprintf(p, sizeof p, "%s/up/redir", root);
    assert_int_equal(setxattr(p, "trusted.overlay.redirect", "/x", 2, 0), 0);
    memset(&e, 0, sizeof e);
    assert_int_equal(scan_upper(up, ws, false, &ops, NULL, &e), -1);
    assert_non_null(strstr(e.msg, "unexpected overlay attribute"));
    ops_free(&ops);
    unlinkat(up, "redir", 0);
}

static mode_t mode_at(int dfd, const char *p)
{
    struct stat st;
    assert_int_equal(fstatat(dfd, p, &st, AT_SYMLINK_NOFOLLOW), 0);
    return st.st_mode;
}

/* No setuid or setgid bit of a regular file and no file capability leaves
 * the upper; a directory's setgid bit does. Modes without owner permissions
 * are set back exactly, and recorded. */
static void strips_privileges(void **state)
{
    (void)state;
    if (geteuid() != 0)
        skip();
    assert_int_equal(mkdirat(ws, "priv", 0755), 0);
    assert_int_equal(mkdirat(up, "priv", 0755), 0);
    assert_int_equal(fchmodat(up, "priv", 02755, 0), 0);
    mkfile(up, "priv/su", "#!/bin/sh\n");
    assert_int_equal(fchmodat(up, "priv/su", 06755, 0), 0);
    struct vfs_cap_data cap = {.magic_etc = VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE};
    cap.data[0].permitted = 1u << CAP_SETUID;
    char p[96];
    snprintf(p, sizeof p, "%s/up/priv/su", root);
    assert_int_equal(setxattr(p, "security.capability", &cap, sizeof cap, 0), 0);
    assert_int_equal(mkdirat(up, "priv/nd", 0755), 0);
    mkfile(up, "priv/nd/x", "x");
    assert_int_equal(fchmodat(up, "priv/nd/x", 04711, 0), 0);
    assert_int_equal(fchmodat(up, "priv/nd", 02750, 0), 0);
    assert_int_equal(mkdirat(up, "priv/zero", 0755), 0);
    mkfile(up, "priv/zero/f", "f");
    assert_int_equal(fchmodat(up, "priv/zero", 0, 0), 0);

    struct tx_ops ops = {0};
    txbox_error e = {0};
    int r = scan_upper(up, ws, false, &ops, NULL, &e);
    if (r)
        print_error("%s\n", e.msg);
    assert_int_equal(r, 0);
    assert_int_equal(mode_at(up, "priv/su") & 07777, 0755);
    char v[64];
    assert_true(getxattr(p, "security.capability", v, sizeof v) < 0);
    assert_int_equal(errno, ENODATA);
    assert_int_equal(mode_at(up, "priv/nd") & 07777, 02750);
    assert_int_equal(mode_at(up, "priv/nd/x") & 07777, 0711);
    assert_int_equal(mode_at(up, "priv/zero") & 07777, 0);
    const struct tx_op *o;
    o = must_find(&ops, "priv/su");
    assert_int_equal(o->nw.mode, S_IFREG | 0755);
    o = must_find(&ops, "priv/zero");
    assert_int_equal(o->nw.mode, S_IFDIR | 0);
    o = must_find(&ops, "priv");
    assert_int_equal(o->kind, OP_META);
    assert_int_equal(o->nw.mode, 02755);
    ops_free(&ops);
    assert_int_equal(fchmodat(up, "priv/zero", 0700, 0), 0);
}

static bool clash(const char *a_spec, const char *b_spec)
{
    /* "R:path" content, "M:path" metadata; separated by spaces */
    struct tx_ops a = {0}, b = {0};
    struct tx_ops *sets[2] = {&a, &b};
    const char *specs[2] = {a_spec, b_spec};
    for (int k = 0; k < 2; k++) {
        char *dup = strdup(specs[k]), *save = NULL;
        for (char *t = strtok_r(dup, " ", &save); t; t = strtok_r(NULL, " ", &save))
            op_add(sets[k], t[0] == 'M' ? OP_META : OP_REPLACE, t + 2);
        free(dup);
    }
    const char *which = NULL;
    bool r = ops_overlap(&a, &b, &which);
    ops_free(&a);
    ops_free(&b);
    return r;
}

static void overlap_rules(void **state)
{
    (void)state;
    assert_true(clash("R:a/b", "R:a/b"));
    assert_true(clash("R:a", "R:a/b/c"));
    assert_true(clash("R:a/b/c", "R:a"));
    assert_false(clash("R:a/b", "R:a/c"));
    assert_false(clash("R:a/b", "R:a/b-c R:a/bc R:a.b"));
    assert_false(clash("M: M:a", "M: M:a R:b"));
    assert_true(clash("M:a/b", "R:a"));
    assert_true(clash("R:a", "M:a/b"));
    assert_false(clash("M:a", "R:a/x"));
    assert_false(clash("R:a/x", "M:a M:"));
    assert_false(clash("R:x R:y R:z", "R:w R:x0 R:yy R:y0/q"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(overlap_rules),
        cmocka_unit_test(every_kind),
        cmocka_unit_test(refuses_device_nodes_and_unknown_overlay_attrs),
        cmocka_unit_test(strips_privileges),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
