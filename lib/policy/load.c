/* Loading a policy: the built-in document, the user's file (--policy), and
 * the workspace's own .txbox-policy.yaml.
 *
 * Trust (DESIGN.md, threat model): the built-in policy, --policy and the
 * user's configuration outside the workspace are trusted; the workspace's
 * policy file is written by the very commands it would judge. So:
 *
 *   - It is read as attacker input: relative to the workspace's fd, only
 *     as a regular file (fstatat without following, then O_NOFOLLOW |
 *     O_NONBLOCK and fstat again: a symlink, fifo, directory or device is
 *     a one-line error, never followed, never waited on), of at most
 *     TXBOX_POLICY_MAX_WS_FILE bytes.
 *   - Untrusted, it is a layer (TXBOX_WS_POLICY_TIGHTEN): a second policy
 *     made of the user's (built-in + --policy) and what the workspace adds
 *     within policy_parse_layer's limits. txbox_policy_check takes the
 *     worse of the two verdicts, so the layer can only raise a verdict,
 *     whatever it holds; its rules on effects (hold, rollback; new ids)
 *     join the user's list, where every rule that matches acts. What it
 *     was refused is kept in p->notes.
 *   - Trusted (the user's file says `workspace_policy: trusted`, or their
 *     config.yaml lists the workspace), it is read after --policy like a
 *     file of the user's own.
 *
 * Whatever it holds, a transaction that changes a workspace policy file is
 * held for review: the built-in effect rule POLICY_FILE_EFFECT, which no
 * file can replace (rules.c). */
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "effect_rules.h"
#include "pdoc.h"
#include "pol.h"

#define WS_POLICY_NAME ".txbox-policy.yaml"
#define USER_POLICY_CAP (4u << 20)
#define CONFIG_CAP (256u << 10)
#define NOTES_MAX 20 /* refusals reported, the last one saying how many more */

static const char *kind_name(mode_t m)
{
    return S_ISLNK(m)    ? "a symlink"
           : S_ISFIFO(m) ? "a fifo"
           : S_ISDIR(m)  ? "a directory"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
           : S_ISSOCK(m) ? "a socket"
                         : "not a regular file";
}

/* Reads the file name under dirfd (AT_FDCWD: a path): a regular file of
 * at most cap bytes, never blocking on it. untrusted: a symlink at name is
 * refused and a non-regular file is never opened. Returns 1 with *text
 * (NUL-terminated, caller frees), 0 when it is absent and absent_ok, <0. */
static int read_policy_text(int dirfd, const char *name, const char *shown, bool untrusted, bool absent_ok,
                            size_t cap, char **text, size_t *len, txbox_error *err)
{
    *text = NULL;
    struct stat st;
    if (untrusted) {
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT && absent_ok)
                return 0;
            return tx_errno(err, errno, "policy %s: cannot read it", shown);
        }
        if (!S_ISREG(st.st_mode))
            return tx_err(err, EINVAL,
                          "policy %s: %s, not a regular file: txbox reads a policy "
                          "only from a regular file (remove it or make it one)",
                          shown, kind_name(st.st_mode));
    }
    int fl = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | (untrusted ? O_NOFOLLOW : 0);
    _cleanup_close_ int fd = openat(dirfd, name, fl);
    if (fd < 0 && errno == ENOENT && absent_ok)
        return 0;
    if (fd < 0 && errno == ELOOP && untrusted)
        return tx_err(err, ELOOP,
                      "policy %s: a symlink, not a regular file: txbox never reads a "
                      "policy through a symlink",
                      shown);
    if (fd < 0)
        return tx_errno(err, errno, "policy %s: cannot open", shown);
    if (fstat(fd, &st) < 0)
        return tx_errno(err, errno, "policy %s: cannot stat", shown);
    if (!S_ISREG(st.st_mode))
        return tx_err(err, EINVAL,
                      "policy %s: %s, not a regular file: txbox reads a policy only "
                      "from a regular file",
                      shown, kind_name(st.st_mode));
    if ((uint64_t)st.st_size > cap)
        return tx_err(err, EFBIG, "policy %s: larger than %zu bytes", shown, cap);
    dbuf b;
    dbuf_init(&b, cap);
    char chunk[8192];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            dbuf_free(&b);
            return tx_errno(err, e, "policy %s: cannot read", shown);
        }
        if (n == 0)
            break;
        dbuf_add(&b, chunk, (size_t)n);
        if (b.dropped) {
            dbuf_free(&b);
            return tx_err(err, EFBIG, "policy %s: larger than %zu bytes", shown, cap);
        }
    }
    *len = b.len;
    *text = b.p ? b.p : xcalloc(1, 1);
    return 1;
}

/* ---- the user's configuration: which workspaces are trusted ---- */

/* $XDG_CONFIG_HOME/txbox/config.yaml, else ~/.config/txbox/config.yaml;
 * NULL when neither is known. */
static char *config_path(void)
{
    const char *x = getenv("XDG_CONFIG_HOME");
    if (x && x[0] == '/')
        return xasprintf("%s/txbox/config.yaml", x);
    const char *h = getenv("HOME");
    if (h && h[0] == '/')
        return xasprintf("%s/.config/txbox/config.yaml", h);
    return NULL;
}

/* Does the entry e of trusted_workspaces name ws (a real path)? */
static bool names_workspace(const char *e, const char *ws)
{
    _cleanup_free_ char *full = NULL;
    if (e[0] == '~' && (e[1] == '/' || !e[1])) {
        const char *h = getenv("HOME");
        if (!h || h[0] != '/')
            return false;
        full = xasprintf("%s%s", h, e + 1);
        e = full;
    }
    _cleanup_free_ char *real = realpath(e, NULL);
    return real && !strcmp(real, ws);
}

/* The configuration's text says whether ws is trusted. */
static int config_trusts(const char *text, size_t len, const char *shown, const char *ws, bool *trusted,
                         txbox_error *err)
{
    yaml_parser_t yp;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&yp))
        return tx_err(err, ENOMEM, "config %s: cannot start the YAML parser", shown);
    yaml_parser_set_input_string(&yp, (const unsigned char *)text, len);
    if (!yaml_parser_load(&yp, &doc)) {
        int rc = tx_err(err, EINVAL, "config %s:%zu: %s", shown, (size_t)yp.problem_mark.line + 1,
                        yp.problem ? yp.problem : "invalid YAML");
        yaml_parser_delete(&yp);
        return rc;
    }
    yaml_parser_delete(&yp);
    int rc = 0;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (root && root->type != YAML_MAPPING_NODE)
        rc = tx_err(err, EINVAL, "config %s: must be a mapping (version, trusted_workspaces)", shown);
    for (yaml_node_pair_t *pr = root && !rc ? root->data.mapping.pairs.start : NULL;
         pr && pr < root->data.mapping.pairs.top && !rc; pr++) {
        yaml_node_t *k = yaml_document_get_node(&doc, pr->key);
        yaml_node_t *v = yaml_document_get_node(&doc, pr->value);
        const char *key = k && k->type == YAML_SCALAR_NODE ? (const char *)k->data.scalar.value : "";
        size_t line = k ? k->start_mark.line + 1 : 0;
        if (!strcmp(key, "version")) {
            if (!v || v->type != YAML_SCALAR_NODE || strcmp((const char *)v->data.scalar.value, "1"))
                rc = tx_err(err, EINVAL, "config %s:%zu: unsupported version (this txbox reads 1)", shown,
                            line);
        } else if (!strcmp(key, "trusted_workspaces")) {
            if (!v || v->type != YAML_SEQUENCE_NODE) {
                rc = tx_err(err, EINVAL,
                            "config %s:%zu: trusted_workspaces must be a list of "
                            "directories",
                            shown, line);
                break;
            }
            for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top && !rc;
                 it++) {
                yaml_node_t *e = yaml_document_get_node(&doc, *it);
                const char *s = e && e->type == YAML_SCALAR_NODE ? (const char *)e->data.scalar.value : NULL;
                if (!s || (s[0] != '/' && s[0] != '~'))
                    rc = tx_err(err, EINVAL,
                                "config %s:%zu: every trusted workspace is an absolute "
                                "path (or ~/...)",
                                shown, e ? e->start_mark.line + 1 : line);
                else if (names_workspace(s, ws))
                    *trusted = true;
            }
        } else {
            rc = tx_err(err, EINVAL, "config %s:%zu: unknown key '%s' (version, trusted_workspaces)", shown,
                        line, key);
        }
    }
    yaml_document_delete(&doc);
    return rc;
}

/* Does the user's configuration trust the workspace ws? A configuration
 * inside the workspace is the workspace's, not the user's: ignored (noted). */
static int user_trusts(txbox_policy *p, const char *ws, bool *trusted, txbox_error *err)
{
    *trusted = false;
    _cleanup_free_ char *path = config_path();
    if (!path)
        return 0;
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int rc = read_policy_text(AT_FDCWD, path, path, false, true, CONFIG_CAP, &text, &len, err);
    if (rc <= 0) {
        if (rc < 0 && err->code == ENOTDIR)
            return 0; /* ~/.config is not a directory: no configuration */
        return rc;
    }
    _cleanup_free_ char *real = realpath(path, NULL);
    if (!real || path_under(real, ws)) {
        _cleanup_free_ char *n = xasprintf("config %s: inside the workspace, where commands can "
                                           "write it: ignored (it trusts nothing)",
                                           path);
        strlist_add(&p->notes, n);
        return 0;
    }
    return config_trusts(text, len, path, ws, trusted, err);
}

/* ---- loading ---- */

/* Is path the workspace's policy file (the same inode)? */
static bool same_file(const char *path, int wsfd)
{
    struct stat a, b;
    return stat(path, &a) == 0 && fstatat(wsfd, WS_POLICY_NAME, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static txbox_policy *policy_new(void)
{
    txbox_policy *p = xcalloc(1, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    arena_init(&p->ar, POLICY_ARENA_CAP);
    return p;
}

/* $HOME as the commands see it (bash's ~ and $HOME): the environment's,
 * else the user database's; and the workspace as spelled through it, when
 * $HOME is a symlink. */
static void find_home(txbox_policy *p)
{
    const char *h = getenv("HOME");
    struct passwd *pw = NULL;
    if (!h || h[0] != '/')
        h = (pw = getpwuid(getuid())) && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
    if (!h || strlen(h) + 2 >= PATH_MAX)
        return;
    char norm[PATH_MAX];
    norm_abs(h, norm);
    p->home = xstrdup(norm);
    char *real = realpath(norm, NULL);
    if (real && strcmp(real, norm)) {
        p->home_real = real;
        size_t rl = strlen(real);
        if (p->workspace && !strncmp(p->workspace, real, rl) &&
            (p->workspace[rl] == '/' || !p->workspace[rl]))
            p->ws_alias = xasprintf("%s%s", norm, p->workspace + rl);
    } else {
        free(real);
    }
}

/* After the last file: the rules' index, $PATH, $HOME, the secrets. */
static void policy_finish(txbox_policy *p)
{
    policy_build_index(p);
    policy_index_programs(p);
    p->path_in_workspace = path_reaches_workspace(getenv("PATH"), p->workspace);
    find_home(p);
    policy_finish_secrets(p);
}

/* The built-in policy, then the user's file (text, when non-NULL). */
static int load_trusted(txbox_policy *p, const char *utext, size_t ulen, const char *ufile, txbox_error *err)
{
    pdoc doc; /* policy/default.yaml, loaded at build time */
    txbox_default_policy_pdoc(&doc);
    if (policy_parse_doc(p, &doc, "policy/default.yaml", err) < 0)
        return -1;
    return utext ? policy_parse_yaml(p, utext, ulen, ufile, err) : 0;
}

/* The workspace's untrusted file as p->layer (or nothing, when it adds
 * nothing a verdict could see); its rules on effects join p's. */
static int load_layer(txbox_policy *p, const char *utext, size_t ulen, const char *ufile, const char *wtext,
                      size_t wlen, const char *wfile, txbox_error *err)
{
    txbox_policy *l = policy_new();
    l->workspace = xstrdup(p->workspace);
    int rc = load_trusted(l, utext, ulen, ufile, err);
    size_t nr = l->nrules, ne = l->neffects, np = l->nprogs, nh = l->hide.n;
    size_t nl = l->fetchers.n + l->secrets.n + l->secret_programs.n;
    if (rc == 0)
        rc = policy_parse_layer(l, wtext, wlen, wfile, &p->notes, err);
    if (p->notes.n > NOTES_MAX) {
        /* every command prints them: a file of refusals is not a flood */
        size_t more = p->notes.n - (NOTES_MAX - 1);
        while (p->notes.n > NOTES_MAX - 1)
            free(p->notes.v[--p->notes.n]);
        _cleanup_free_ char *n = xasprintf("policy %s: %zu more refusals not shown", wfile, more);
        strlist_add(&p->notes, n);
    }
    if (rc == 0 && l->neffects > ne) {
        /* their examples alone (checking every rule's would compile the
         * built-in content patterns, milliseconds) */
        txbox_policy added = {.effects = l->effects + ne, .neffects = l->neffects - ne};
        rc = effects_check_examples(&added, err);
    }
    if (rc == 0 && l->neffects > ne) {
        /* every effect rule that matches acts: added ones only hold more */
        size_t add = l->neffects - ne;
        p->effects = xrealloc(p->effects, (p->neffects + add) * sizeof *p->effects);
        memcpy(p->effects + p->neffects, l->effects + ne, add * sizeof *p->effects);
        p->neffects += add;
        l->neffects = ne;
    }
    if (rc == 0) {
        /* the paths it hides join the user's (hiding more only tightens) */
        for (size_t i = nh; i < l->hide.n; i++)
            strlist_add(&p->hide, l->hide.v[i]);
        policy_finish(l);
        rc = policy_check_examples_from(l, nr, err);
    }
    bool adds = l->nrules > nr || l->nprogs > np || l->fetchers.n + l->secrets.n + l->secret_programs.n > nl;
    if (rc == 0 && adds && !(l->parser = shell_parser_new()))
        rc = tx_err(err, EINVAL, "tree-sitter-bash: language version mismatch");
    if (rc < 0 || !adds) {
        txbox_policy_free(l);
        return rc;
    }
    p->layer = l;
    return 0;
}

/* --policy names a file inside the workspace: commands can write it, so
 * a transaction that changes it is held like one that changes the
 * workspace's own policy file (the path escaped for effect_glob, anchored
 * at the workspace root). */
static void hold_user_file(txbox_policy *p, const char *user_file)
{
    _cleanup_free_ char *real = realpath(user_file, NULL);
    if (!real || !p->workspace || !path_under(real, p->workspace) || !strcmp(real, p->workspace))
        return;
    const char *rel = real + strlen(p->workspace) + (strlen(p->workspace) > 1);
    dbuf g;
    dbuf_init(&g, 0);
    dbuf_addstr(&g, "/");
    for (const char *c = rel; *c; c++) {
        if (strchr("*?[\\", *c))
            dbuf_add(&g, "\\", 1);
        dbuf_add(&g, c, 1);
    }
    effect_rule r = {.action = EFF_HOLD, .line = 0};
    r.max_files_deleted = r.max_bytes_written = r.max_binary_added = r.max_made_executable = -1;
    r.id = xstrdup(POLICY_FILE_EFFECT "-user");
    r.file = xstrdup(user_file);
    r.reason =
        xasprintf("changes %s, the policy file txbox was started with, which judges later commands", rel);
    r.suggestion =
        xstrdup("do not edit the policy file; ask the user to change it (or to approve this change)");
    strlist_add(&r.paths_any, dbuf_str(&g));
    dbuf_free(&g);
    p->effects = xrealloc(p->effects, (p->neffects + 1) * sizeof *p->effects);
    p->effects[p->neffects++] = r;
}

int txbox_policy_load(const char *user_file, const char *workspace_dir, txbox_policy **out, txbox_error *err)
{
    return policy_load(user_file, workspace_dir, POLICY_EXAMPLES_IF_FILES, out, err);
}

int policy_load(const char *user_file, const char *workspace_dir, enum policy_examples examples,
                txbox_policy **out, txbox_error *err)
{
    if (!out)
        return tx_err(err, EINVAL, "txbox_policy_load: no output pointer");
    *out = NULL;
    txbox_policy *p = policy_new();
    _cleanup_free_ char *utext = NULL, *wtext = NULL, *wfile = NULL;
    size_t ulen = 0, wlen = 0;
    int rc = 0;
    if (user_file)
        rc = read_policy_text(AT_FDCWD, user_file, user_file, false, false, USER_POLICY_CAP, &utext, &ulen,
                              err);
    if (rc >= 0)
        rc = load_trusted(p, utext, ulen, user_file, err);
    bool files = user_file != NULL; /* a policy file beyond the built-in one was read */
    if (rc == 0 && workspace_dir) {
        char *real = realpath(workspace_dir, NULL);
        _cleanup_close_ int wsfd = real ? open(real, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
        if (wsfd < 0) {
            rc = tx_errno(err, errno, "workspace %s", workspace_dir);
        } else {
            size_t l = strlen(real);
            while (l > 1 && real[l - 1] == '/')
                real[--l] = 0;
            p->workspace = real;
            wfile = xasprintf("%s%s" WS_POLICY_NAME, real, l > 1 ? "/" : "");
            rc = read_policy_text(wsfd, WS_POLICY_NAME, wfile, true, true, TXBOX_POLICY_MAX_WS_FILE, &wtext,
                                  &wlen, err);
        }
        if (wsfd < 0)
            free(real);
        bool trusted = p->ws_trusted;
        if (rc == 1 && user_file && same_file(user_file, wsfd)) {
            /* --policy named the workspace's file itself: read once, as
             * the user's (its changes are held all the same) */
            p->ws_mode = TXBOX_WS_POLICY_TRUSTED;
            rc = 0;
        }
        if (rc == 1 && !trusted)
            rc = user_trusts(p, p->workspace, &trusted, err) < 0 ? -1 : 1;
        if (rc == 1 && trusted) {
            p->ws_mode = TXBOX_WS_POLICY_TRUSTED;
            files = true;
            rc = policy_parse_yaml(p, wtext, wlen, wfile, err);
        } else if (rc == 1) {
            p->ws_mode = TXBOX_WS_POLICY_TIGHTEN;
            rc = load_layer(p, utext, ulen, user_file, wtext, wlen, wfile, err);
        }
        rc = rc < 0 ? rc : 0;
        if (rc == 0 && user_file)
            hold_user_file(p, user_file);
    }
    if (rc == 0)
        policy_finish(p);
    /* The built-in policy's examples are checked by the test suite (its
     * text is fixed in the binary); a file's lists and overrides can change
     * what the built-in rules match, so with a file every example is
     * checked, the built-in ones too. A layer's own rules and effect
     * rules were checked in the layer. */
    if (rc == 0 && (examples == POLICY_EXAMPLES_ALWAYS || (examples == POLICY_EXAMPLES_IF_FILES && files)))
        rc = policy_check_examples(p, err);
    if (rc == 0) {
        p->parser = shell_parser_new();
        if (!p->parser)
            rc = tx_err(err, EINVAL, "tree-sitter-bash: language version mismatch");
    }
    if (rc < 0) {
        txbox_policy_free(p);
        return -1;
    }
    *out = p;
    return 0;
}

void txbox_policy_free(txbox_policy *p)
{
    if (!p)
        return;
    txbox_policy_free(p->layer);
    strlist_free(&p->notes);
    policy_clear(p);
    shell_parser_free(p->parser);
    arena_free(&p->ar);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

int txbox_policy_workspace_mode(const txbox_policy *p) { return p ? p->ws_mode : 0; }

const char *txbox_policy_hidden(const txbox_policy *p, size_t i)
{
    if (p)
        return i < p->hide.n ? p->hide.v[i] : NULL;
    /* the built-in policy's list, read from its document in place */
    pdoc d;
    txbox_default_policy_pdoc(&d);
    const pnode *root = d.nnodes ? &d.nodes[0] : NULL;
    for (size_t k = 0; root && root->type == YAML_MAPPING_NODE && k < root->len; k++) {
        int32_t key = d.pairs[2 * ((size_t)root->off + k)], val = d.pairs[2 * ((size_t)root->off + k) + 1];
        const pnode *kn = &d.nodes[key - 1], *vn = &d.nodes[val - 1];
        if (kn->type != YAML_SCALAR_NODE || strcmp(d.pool + kn->off, "hide") ||
            vn->type != YAML_SEQUENCE_NODE)
            continue;
        if (i >= vn->len)
            return NULL;
        const pnode *e = &d.nodes[d.items[vn->off + i] - 1];
        return e->type == YAML_SCALAR_NODE ? d.pool + e->off : NULL;
    }
    return NULL;
}

const char *txbox_policy_note(const txbox_policy *p, size_t i)
{
    return p && i < p->notes.n ? p->notes.v[i] : NULL;
}
