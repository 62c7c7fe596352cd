/* libcurl, loaded when the agent first needs it (dlopen), not linked.
 *
 * libcurl pulls in some thirty shared libraries (TLS, Kerberos, LDAP, SSH,
 * IDN...). Linked into txbox, their loading and relocation cost every
 * invocation about 30 ms of CPU -- every `txbox run`, `txbox check`, every
 * agent-CLI hook call -- although only `txbox agent` speaks HTTP. So the
 * agent's HTTP client calls libcurl through this table, filled once by
 * curl_dl_load().
 *
 * Include this instead of <curl/curl.h>: it maps the curl_* names used by
 * client.c onto the table. */
#ifndef TXBOX_CURL_DL_H
#define TXBOX_CURL_DL_H
#define CURL_DISABLE_TYPECHECK 1 /* its macros would wrap the names mapped below */
#include <curl/curl.h>
#include "util.h"

struct curl_dl {
    CURLcode (*global_init)(long);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    void (*easy_reset)(CURL *);
    void (*easy_cleanup)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    CURLU *(*url)(void);
    CURLUcode (*url_set)(CURLU *, CURLUPart, const char *, unsigned int);
    CURLUcode (*url_get)(const CURLU *, CURLUPart, char **, unsigned int);
    void (*url_cleanup)(CURLU *);
    void (*free)(void *);
};
extern struct curl_dl curl_dl;

/* Loads libcurl (once). <0 with err set when it is not installed. */
MUST_CHECK int curl_dl_load(txbox_error *err);

#define curl_global_init curl_dl.global_init
#define curl_easy_init curl_dl.easy_init
#undef curl_easy_setopt /* curl.h may wrap these two in macros */
#undef curl_easy_getinfo
#define curl_easy_setopt curl_dl.easy_setopt
#define curl_easy_perform curl_dl.easy_perform
#define curl_easy_getinfo curl_dl.easy_getinfo
#define curl_easy_reset curl_dl.easy_reset
#define curl_easy_cleanup curl_dl.easy_cleanup
#define curl_easy_strerror curl_dl.easy_strerror
#define curl_slist_append curl_dl.slist_append
#define curl_slist_free_all curl_dl.slist_free_all
#define curl_url curl_dl.url
#define curl_url_set curl_dl.url_set
#define curl_url_get curl_dl.url_get
#define curl_url_cleanup curl_dl.url_cleanup
#define curl_free curl_dl.free
#endif
