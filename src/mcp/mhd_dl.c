/* See mhd_dl.h: libmicrohttpd through dlopen. */
#include "mhd_dl.h"

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

struct mhd_dl mhd_dl;

int mhd_dl_load(txbox_error *err)
{
    static void *lib;
    if (lib)
        return 0;
    void *h = dlopen("libmicrohttpd.so.12", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return tx_err(err, ENOENT, "libmicrohttpd is not installed (libmicrohttpd.so.12: %s)", dlerror());
    static const struct {
        const char *name;
        size_t off;
    } syms[] = {
#define SYM(field, name) {name, offsetof(struct mhd_dl, field)}
        SYM(start_daemon, "MHD_start_daemon"),
        SYM(stop_daemon, "MHD_stop_daemon"),
        SYM(quiesce_daemon, "MHD_quiesce_daemon"),
        SYM(run, "MHD_run"),
        SYM(get_timeout, "MHD_get_timeout"),
        SYM(get_daemon_info, "MHD_get_daemon_info"),
        SYM(get_connection_info, "MHD_get_connection_info"),
        SYM(get_connection_values_n, "MHD_get_connection_values_n"),
        SYM(create_response_from_buffer, "MHD_create_response_from_buffer"),
        SYM(create_response_from_callback, "MHD_create_response_from_callback"),
        SYM(add_response_header, "MHD_add_response_header"),
        SYM(queue_response, "MHD_queue_response"),
        SYM(destroy_response, "MHD_destroy_response"),
        SYM(suspend_connection, "MHD_suspend_connection"),
        SYM(resume_connection, "MHD_resume_connection"),
        SYM(is_feature_supported, "MHD_is_feature_supported"),
        SYM(get_version, "MHD_get_version"),
#undef SYM
    };
    struct mhd_dl t;
    for (size_t i = 0; i < ARRAY_SIZE(syms); i++) {
        void *p = dlsym(h, syms[i].name);
        if (!p) {
            dlclose(h);
            return tx_err(err, ENOENT, "libmicrohttpd lacks %s", syms[i].name);
        }
        memcpy((char *)&t + syms[i].off, &p, sizeof p);
    }
    mhd_dl = t;
    lib = h;
    return 0;
}
