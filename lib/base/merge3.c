/* A three-way merge of texts: libgit2's git_merge_file (its copy of git's
 * xdiff), loaded with dlopen when a merge first needs one, as the agent
 * loads libcurl (src/agent/curl_dl.h): linked, libgit2 and the seventeen
 * libraries it needs (TLS, SSH, Kerberos, OpenSSL's libcrypto) would be
 * loaded and relocated by every txbox process, every `txbox run`, for the
 * rare undo that merges; and its static archive cannot be linked alone (its
 * SSH transport wants OpenSSL and GSSAPI). The loss check loads it too
 * (lib/tx/losses_git.c), in a child process. git_merge_file works on buffers
 * only: no repository is opened and no configuration file is read, so no
 * workspace content steers it. */
#include "merge3.h"

#include <dlfcn.h>
#include <errno.h>
#include <git2.h>

/* the soname of the libgit2 whose headers txbox was built with */
#define TXBOX_LIBGIT2_SONAME "libgit2.so." LIBGIT2_SOVERSION

static struct {
    int (*init)(void);
    int (*input_init)(git_merge_file_input *, unsigned int);
    int (*options_init)(git_merge_file_options *, unsigned int);
    int (*merge)(git_merge_file_result *, const git_merge_file_input *, const git_merge_file_input *,
                 const git_merge_file_input *, const git_merge_file_options *);
    void (*result_free)(git_merge_file_result *);
    const git_error *(*last_error)(void);
} git;

static int load(txbox_error *err)
{
    static void *lib;
    if (lib)
        return 0;
    void *h = dlopen(TXBOX_LIBGIT2_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return tx_err(err, ENOENT, "the text merge needs libgit2, which cannot be loaded (%s)", dlerror());
    static const struct {
        const char *name;
        void **at;
    } syms[] = {
        {"git_libgit2_init", (void **)&git.init},
        {"git_merge_file_input_init", (void **)&git.input_init},
        {"git_merge_file_options_init", (void **)&git.options_init},
        {"git_merge_file", (void **)&git.merge},
        {"git_merge_file_result_free", (void **)&git.result_free},
        {"git_error_last", (void **)&git.last_error},
    };
    for (size_t i = 0; i < ARRAY_SIZE(syms); i++) {
        void *f = dlsym(h, syms[i].name);
        if (!f) {
            dlclose(h);
            return tx_err(err, ENOENT, "%s lacks %s", TXBOX_LIBGIT2_SONAME, syms[i].name);
        }
        *syms[i].at = f;
    }
    if (git.init() < 0) {
        dlclose(h);
        return tx_err(err, EIO, "libgit2 failed to start");
    }
    lib = h;
    return 0;
}

static int input(git_merge_file_input *in, const char *p, size_t n)
{
    if (git.input_init(in, GIT_MERGE_FILE_INPUT_VERSION) < 0)
        return -1;
    in->ptr = p;
    in->size = n;
    return 0;
}

int merge3_text(const char *base, size_t blen, const char *ours, size_t olen, const char *theirs, size_t tlen,
                char **out, size_t *outlen, txbox_error *err)
{
    *out = NULL;
    *outlen = 0;
    if (load(err) < 0)
        return -1;
    git_merge_file_input b, o, t;
    git_merge_file_options opts;
    git_merge_file_result res;
    memset(&res, 0, sizeof res);
    if (input(&b, base, blen) < 0 || input(&o, ours, olen) < 0 || input(&t, theirs, tlen) < 0 ||
        git.options_init(&opts, GIT_MERGE_FILE_OPTIONS_VERSION) < 0)
        return tx_err(err, EINVAL, "cannot set up the text merge");
    if (git.merge(&res, &b, &o, &t, &opts) < 0) {
        const git_error *e = git.last_error();
        return tx_err(err, EIO, "the text merge failed: %s", e && e->message ? e->message : "libgit2");
    }
    int rc = res.automergeable ? 1 : 0;
    if (rc) {
        *out = xmalloc(res.len + 1);
        memcpy(*out, res.ptr, res.len);
        *outlen = res.len;
    }
    git.result_free(&res);
    return rc;
}
