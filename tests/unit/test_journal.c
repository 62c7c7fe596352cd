/* The journal round-trips, and a damaged one is never accepted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fsops.h"
#include "safepath.h"
#include "tx.h"

static char root[64];

static void mkfile(int dfd, const char *p, const char *text)
{
    int fd = openat(dfd, p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static void rewrite(int dfd, const char *name, const char *data, size_t n)
{
    int fd = openat(dfd, name, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    close(fd);
}

/* A workspace in root (from tmpl) whose file "old" holds 1, and a
 * transaction whose upper changes it to 2. */
static txbox_ws *ws_with_change(const char *tmpl, uint64_t *id, int *txfd, int *act, int *up)
{
    snprintf(root, sizeof root, "%s", tmpl);
    assert_non_null(mkdtemp(root));
    txbox_ws *ws;
    txbox_error e = {0};
    assert_int_equal(txbox_ws_open(root, TXBOX_WS_CREATE, &ws, &e), 0);
    mkfile(ws->fd, "old", "1");
    assert_int_equal(ws_new_tx(ws, id, txfd, act, NULL, &e), 0);
    mkdirat(*txfd, "upper", 0755);
    *up = openat(*txfd, "upper", O_RDONLY | O_DIRECTORY);
    assert_true(*up >= 0);
    mkfile(*up, "old", "2");
    return ws;
}

static void commit_and_damage(void **state)
{
    (void)state;
    txbox_error e = {0};
    uint64_t id;
    int txfd, act, up;
    txbox_ws *ws = ws_with_change("/tmp/txbox-jnl-XXXXXX", &id, &txfd, &act, &up);
    mkfile(up, "new file \xff", "3");
    struct tx_ops ops = {0};
    /* the scan's new data made durable with the journal (run.c's way) */
    _cleanup_syncset_ struct fs_syncset durable = {0};
    assert_int_equal(scan_upper(up, ws->fd, !ws->root, &ops, &durable, &e), 0);
    assert_true(durable.n > 0 || durable.all);
    uint64_t gen = 0;
    int jr = journal_commit(ws, id, txfd, 0, &ops, "{\"command\":\"x\"}", &durable, 0, &gen, &e);
    if (jr)
        print_error("%s\n", e.msg);
    assert_int_equal(jr, 0);
    assert_int_equal(gen, 1);
    /* the generation cache follows the commit (a lagging one makes every
     * later ws_read_gen count the commit records one by one) */
    assert_int_equal(ws_gen_cache(ws), 1);
    /* applied, old version kept for undo */
    char *s;
    assert_int_equal(read_file_at(ws->fd, "old", 16, &s, NULL, &e), 0);
    assert_string_equal(s, "2");
    free(s);
    char un[32] = "";
    for (size_t i = 0; i < ops.n; i++)
        if (!strcmp(ops.v[i].path, "old"))
            snprintf(un, sizeof un, "undo/%zu", i);
    assert_int_equal(read_file_at(txfd, un, 16, &s, NULL, &e), 0);
    assert_string_equal(s, "1");
    free(s);

    struct tx_journal j;
    assert_int_equal(journal_load(txfd, "journal", &j, &e), 0);
    assert_int_equal(j.ops.n, ops.n);
    assert_int_equal(j.gen, 1);
    assert_string_equal(j.info, "{\"command\":\"x\"}");
    for (size_t i = 0; i < ops.n; i++)
        assert_string_equal(j.ops.v[i].path, ops.v[i].path);
    journal_free(&j);

    size_t len;
    char *data;
    assert_int_equal(read_file_at(txfd, "journal", 1 << 20, &data, &len, &e), 0);
    /* a flipped bit */
    data[len / 2] ^= 1;
    rewrite(txfd, "journal", data, len);
    assert_int_equal(journal_load(txfd, "journal", &j, &e), -1);
    assert_int_equal(e.code, EBADMSG);
    data[len / 2] ^= 1;
    /* truncated */
    rewrite(txfd, "journal", data, len - 9);
    assert_int_equal(journal_load(txfd, "journal", &j, &e), -1);
    /* empty */
    rewrite(txfd, "journal", data, 0);
    assert_int_equal(journal_load(txfd, "journal", &j, &e), -1);
    /* intact again */
    rewrite(txfd, "journal", data, len);
    assert_int_equal(journal_load(txfd, "journal", &j, &e), 0);
    journal_free(&j);
    free(data);
    ops_free(&ops);
    close(up);
    close(txfd);
    ws_end_tx(ws, id, act);
    txbox_ws_close(ws);
    tree_remove(AT_FDCWD, root);
}

/* JOURNAL_LEAVE_OPEN: applied, recorded and logged, the journal left in
 * journal/ for recovery, which makes it durable and closes it. */
static void leave_open(void **state)
{
    (void)state;
    txbox_error e = {0};
    uint64_t id;
    int txfd, act, up;
    txbox_ws *ws = ws_with_change("/tmp/txbox-jlo-XXXXXX", &id, &txfd, &act, &up);
    struct tx_ops ops = {0};
    _cleanup_syncset_ struct fs_syncset durable = {0};
    assert_int_equal(scan_upper(up, ws->fd, !ws->root, &ops, &durable, &e), 0);
    uint64_t gen = 0;
    assert_int_equal(
        journal_commit(ws, id, txfd, 0, &ops, "{\"command\":\"x\"}", &durable, JOURNAL_LEAVE_OPEN, &gen, &e),
        1);
    assert_int_equal(gen, 1);
    char idn[32], *s;
    snprintf(idn, sizeof idn, "%llu", (unsigned long long)id);
    /* applied and counted, the journal still open */
    assert_int_equal(read_file_at(ws->fd, "old", 16, &s, NULL, &e), 0);
    assert_string_equal(s, "2");
    free(s);
    uint64_t g = 0;
    assert_int_equal(ws_read_gen(ws, &g, &e), 0);
    assert_int_equal(g, 1);
    assert_int_equal(exists_at(ws->jnld, idn), 1);
    assert_int_equal(exists_at(txfd, "journal"), 0);
    /* its record is read meanwhile (another commit's conflict check, which
     * the answer's early release of the lock lets run now): its own paths,
     * not "gone" (a conflict on every path) */
    struct tx_journal lj;
    char lidn[32];
    assert_int_equal(journal_load_gen(ws, gen, &lj, lidn, &e), 0);
    assert_string_equal(lidn, idn);
    assert_true(lj.ops.n > 0);
    journal_free(&lj);
    char *clash = NULL;
    struct tx_ops other = {0};
    assert_int_equal(tx_check_conflict(ws, 0, gen, &other, &clash, &e), 0);
    assert_null(clash);
    /* its owner gone, recovery closes it: the commit stays */
    ws_end_tx(ws, id, act);
    assert_int_equal(journal_recover_one(ws, id, &e), 0);
    assert_int_equal(exists_at(ws->jnld, idn), 0);
    assert_int_equal(exists_at(txfd, "journal"), 1);
    assert_int_equal(read_file_at(ws->fd, "old", 16, &s, NULL, &e), 0);
    assert_string_equal(s, "2");
    free(s);
    assert_int_equal(ws_read_gen(ws, &g, &e), 0);
    assert_int_equal(g, 1);
    ops_free(&ops);
    close(up);
    close(txfd);
    txbox_ws_close(ws);
    tree_remove(AT_FDCWD, root);
}

/* .txbox/seq and .txbox/gen: fast symbolic links, replaced by rename (no
 * data block freed per transaction); the regular files earlier versions
 * wrote are still read, and garbage reads as "no hint". */
static void counters(void **state)
{
    (void)state;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/txbox-cnt-XXXXXX");
    assert_non_null(mkdtemp(dir));
    txbox_ws *ws;
    txbox_error e = {0};
    assert_int_equal(txbox_ws_open(dir, TXBOX_WS_CREATE, &ws, &e), 0);
    assert_int_equal(ws_gen_cache(ws), 0);
    /* the old form: a regular file with a newline */
    mkfile(ws->sfd, "gen", "41\n");
    mkfile(ws->sfd, "seq", "7\n");
    assert_int_equal(ws_gen_cache(ws), 41);
    uint64_t id;
    int txfd, act;
    assert_int_equal(ws_new_tx(ws, &id, &txfd, &act, NULL, &e), 0);
    assert_int_equal(id, 8); /* seq was read as the hint */
    close(txfd);
    ws_end_tx(ws, id, act);
    assert_int_equal(ws_write_gen(ws, 42, &e), 0);
    char t[32];
    struct stat st;
    const char *names[] = {"gen", "seq"}, *want[] = {"42", "8"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(fstatat(ws->sfd, names[i], &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISLNK(st.st_mode));
        ssize_t l = readlinkat(ws->sfd, names[i], t, sizeof t - 1);
        assert_true(l > 0);
        t[l] = 0;
        assert_string_equal(t, want[i]);
    }
    assert_int_equal(ws_gen_cache(ws), 42);
    /* no temporary name left behind */
    char tmp[48];
    snprintf(tmp, sizeof tmp, "gen.%d", getpid());
    assert_int_equal(faccessat(ws->sfd, tmp, F_OK, AT_SYMLINK_NOFOLLOW), -1);
    /* a leftover temporary name of this pid does not stop the write */
    assert_int_equal(symlinkat("999", ws->sfd, tmp), 0);
    assert_int_equal(ws_write_gen(ws, 43, &e), 0);
    assert_int_equal(ws_gen_cache(ws), 43);
    /* garbage, in either form, is no hint */
    assert_int_equal(unlinkat(ws->sfd, "gen", 0), 0);
    assert_int_equal(symlinkat("4x", ws->sfd, "gen"), 0);
    assert_int_equal(ws_gen_cache(ws), 0);
    assert_int_equal(unlinkat(ws->sfd, "gen", 0), 0);
    mkfile(ws->sfd, "gen", "");
    assert_int_equal(ws_gen_cache(ws), 0);
    /* ws_read_gen counts the commit records past a missing hint */
    assert_int_equal(symlinkat("1", ws->cmtd, "1"), 0);
    assert_int_equal(symlinkat("2", ws->cmtd, "2"), 0);
    uint64_t g = 0;
    assert_int_equal(ws_read_gen(ws, &g, &e), 0);
    assert_int_equal(g, 2);
    txbox_ws_close(ws);
    tree_remove(AT_FDCWD, dir);
}

/* A new entry whose directory in the upper cannot be opened (here a symlink
 * where the scan saw a directory: ELOOP) is an error the commit rolls back,
 * never "moved already" (which only its absence from an opened directory
 * means): the workspace stays exactly as it was. */
static void apply_tells_moved_from_unreadable(void **state)
{
    (void)state;
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/txbox-jnl2-XXXXXX");
    assert_non_null(mkdtemp(dir));
    txbox_ws *ws;
    txbox_error e = {0};
    assert_int_equal(txbox_ws_open(dir, TXBOX_WS_CREATE, &ws, &e), 0);
    assert_int_equal(mkdirat(ws->fd, "d", 0755), 0);
    mkfile(ws->fd, "d/old", "1");
    uint64_t id;
    int txfd, act;
    assert_int_equal(ws_new_tx(ws, &id, &txfd, &act, NULL, &e), 0);
    assert_int_equal(mkdirat(txfd, "upper", 0755), 0);
    int up = openat(txfd, "upper", O_RDONLY | O_DIRECTORY);
    assert_int_equal(mkdirat(up, "d", 0755), 0);
    mkfile(up, "d/new", "2");
    struct tx_ops ops = {0};
    assert_int_equal(scan_upper(up, ws->fd, !ws->root, &ops, NULL, &e), 0);
    bool found = false;
    for (size_t i = 0; i < ops.n; i++)
        found |= ops.v[i].kind == OP_REPLACE && !strcmp(ops.v[i].path, "d/new");
    assert_true(found);
    /* the upper's d is no longer a directory that can be opened beneath it */
    assert_int_equal(renameat(up, "d", up, "d.real"), 0);
    assert_int_equal(symlinkat("d.real", up, "d"), 0);
    uint64_t gen = 0;
    assert_int_equal(journal_commit(ws, id, txfd, 0, &ops, NULL, NULL, 0, &gen, &e), -1);
    if (!strstr(e.msg, "rolled back"))
        print_error("%s\n", e.msg);
    assert_non_null(strstr(e.msg, "rolled back"));
    struct stat st;
    assert_int_equal(fstatat(ws->fd, "d/new", &st, AT_SYMLINK_NOFOLLOW), -1);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(faccessat(ws->cmtd, "1", F_OK, AT_SYMLINK_NOFOLLOW), -1);
    /* the journal is gone: nothing for recovery to finish */
    char jn[32];
    snprintf(jn, sizeof jn, "%llu", (unsigned long long)id);
    assert_int_equal(faccessat(ws->jnld, jn, F_OK, AT_SYMLINK_NOFOLLOW), -1);
    ops_free(&ops);
    close(up);
    close(txfd);
    ws_end_tx(ws, id, act);
    txbox_ws_close(ws);
    tree_remove(AT_FDCWD, dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(commit_and_damage),
        cmocka_unit_test(leave_open),
        cmocka_unit_test(apply_tells_moved_from_unreadable),
        cmocka_unit_test(counters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
