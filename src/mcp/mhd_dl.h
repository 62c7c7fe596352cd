/* libmicrohttpd, loaded when `txbox mcp --listen` first needs it (dlopen),
 * not linked.
 *
 * libmicrohttpd brings GnuTLS and its eleven shared libraries (p11-kit,
 * nettle, hogweed, gmp, idn2, unistring, tasn1...). Linked into txbox,
 * their loading and relocation would cost every invocation (every `txbox
 * run`, every hook call), although only the HTTP server needs them: the
 * same reason libcurl is loaded this way (src/agent/curl_dl.h).
 *
 * Include this instead of <microhttpd.h>: it maps the MHD_* functions used
 * by http.c onto the table; the types and constants are the header's. */
#ifndef TXBOX_MHD_DL_H
#define TXBOX_MHD_DL_H
#include <stdarg.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <microhttpd.h>

#include "util.h"

struct mhd_dl {
    struct MHD_Daemon *(*start_daemon)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
                                       MHD_AccessHandlerCallback, void *, ...);
    void (*stop_daemon)(struct MHD_Daemon *);
    MHD_socket (*quiesce_daemon)(struct MHD_Daemon *);
    enum MHD_Result (*run)(struct MHD_Daemon *);
    enum MHD_Result (*get_timeout)(struct MHD_Daemon *, MHD_UNSIGNED_LONG_LONG *);
    const union MHD_DaemonInfo *(*get_daemon_info)(struct MHD_Daemon *, enum MHD_DaemonInfoType, ...);
    const union MHD_ConnectionInfo *(*get_connection_info)(struct MHD_Connection *,
                                                           enum MHD_ConnectionInfoType, ...);
    int (*get_connection_values_n)(struct MHD_Connection *, enum MHD_ValueKind, MHD_KeyValueIteratorN,
                                   void *);
    struct MHD_Response *(*create_response_from_buffer)(size_t, void *, enum MHD_ResponseMemoryMode);
    struct MHD_Response *(*create_response_from_callback)(uint64_t, size_t, MHD_ContentReaderCallback, void *,
                                                          MHD_ContentReaderFreeCallback);
    enum MHD_Result (*add_response_header)(struct MHD_Response *, const char *, const char *);
    enum MHD_Result (*queue_response)(struct MHD_Connection *, unsigned int, struct MHD_Response *);
    void (*destroy_response)(struct MHD_Response *);
    void (*suspend_connection)(struct MHD_Connection *);
    void (*resume_connection)(struct MHD_Connection *);
    enum MHD_Result (*is_feature_supported)(enum MHD_FEATURE);
    const char *(*get_version)(void);
};
extern struct mhd_dl mhd_dl;

/* Loads libmicrohttpd (once). <0 with err set when it is not installed. */
MUST_CHECK int mhd_dl_load(txbox_error *err);

#define MHD_start_daemon mhd_dl.start_daemon
#define MHD_stop_daemon mhd_dl.stop_daemon
#define MHD_quiesce_daemon mhd_dl.quiesce_daemon
#define MHD_run mhd_dl.run
#define MHD_get_timeout mhd_dl.get_timeout
#define MHD_get_daemon_info mhd_dl.get_daemon_info
#define MHD_get_connection_info mhd_dl.get_connection_info
#define MHD_get_connection_values_n mhd_dl.get_connection_values_n
#define MHD_create_response_from_buffer mhd_dl.create_response_from_buffer
#define MHD_create_response_from_callback mhd_dl.create_response_from_callback
#define MHD_add_response_header mhd_dl.add_response_header
#define MHD_queue_response mhd_dl.queue_response
#define MHD_destroy_response mhd_dl.destroy_response
#define MHD_suspend_connection mhd_dl.suspend_connection
#define MHD_resume_connection mhd_dl.resume_connection
#define MHD_is_feature_supported mhd_dl.is_feature_supported
#define MHD_get_version mhd_dl.get_version
#endif
