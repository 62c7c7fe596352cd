/* See curl_dl.h: libcurl through dlopen. */
#include "curl_dl.h"

#include <dlfcn.h>
#include <errno.h>

struct curl_dl curl_dl;

int curl_dl_load(txbox_error *err)
{
    static void *lib;
    if (lib)
        return 0;
    void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return tx_err(err, ENOENT, "libcurl is not installed (libcurl.so.4: %s)", dlerror());
    static const struct {
        const char *name;
        size_t off;
    } syms[] = {
#define SYM(field, name) {name, offsetof(struct curl_dl, field)}
        SYM(global_init, "curl_global_init"),
        SYM(easy_init, "curl_easy_init"),
        SYM(easy_setopt, "curl_easy_setopt"),
        SYM(easy_perform, "curl_easy_perform"),
        SYM(easy_getinfo, "curl_easy_getinfo"),
        SYM(easy_reset, "curl_easy_reset"),
        SYM(easy_cleanup, "curl_easy_cleanup"),
        SYM(easy_strerror, "curl_easy_strerror"),
        SYM(slist_append, "curl_slist_append"),
        SYM(slist_free_all, "curl_slist_free_all"),
        SYM(url, "curl_url"),
        SYM(url_set, "curl_url_set"),
        SYM(url_get, "curl_url_get"),
        SYM(url_cleanup, "curl_url_cleanup"),
        SYM(free, "curl_free"),
#undef SYM
    };
    struct curl_dl t;
    for (size_t i = 0; i < ARRAY_SIZE(syms); i++) {
        void *p = dlsym(h, syms[i].name);
        if (!p) {
            dlclose(h);
            return tx_err(err, ENOENT, "libcurl lacks %s", syms[i].name);
        }
        memcpy((char *)&t + syms[i].off, &p, sizeof p);
    }
    curl_dl = t;
    lib = h;
    return 0;
}
