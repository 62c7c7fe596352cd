/* Seccomp, Landlock, resource limits and the scrubbed environment. */
#ifndef TXBOX_CONFINE_H
#define TXBOX_CONFINE_H

#include <jansson.h>
#include <linux/filter.h>

#include "util.h"

/* Sets no_new_privs and installs the syscall filter; *listener gets the
 * descriptor on which its connect() calls wait for a supervisor
 * (connguard.h). */
MUST_CHECK int confine_seccomp(int *listener, txbox_error *err);
/* The filter's BPF program, generated at build time (lib/sandbox/gen_seccomp.c,
 * from the rules in lib/sandbox/seccomp_rules.c). */
extern const struct sock_filter txbox_seccomp_bpf[];
extern const size_t txbox_seccomp_bpf_len;
/* The Landlock ABI version the kernel offers (0: none). */
int confine_landlock_abi(void);
/* Restricts writes to the paths given (NULL-terminated) and below; from ABI
 * 6 on, also connections to abstract unix sockets made outside the domain
 * (confine_landlock_scopes_abstract). */
MUST_CHECK int confine_landlock(const char *const *writable, int abi, txbox_error *err);
static inline bool confine_landlock_scopes_abstract(int abi) { return abi >= 6; }
/* Restricts the calling process (no_new_privs set) to reading the paths
 * given (NULL-terminated) and below, writing nothing and executing nothing:
 * for a helper that reads untrusted trees (lib/tx/losses_git.c). */
MUST_CHECK int confine_landlock_readonly(const char *const *readable, int abi, txbox_error *err);
/* Only that scope, for the calling process (ABI 6 or later). */
MUST_CHECK int confine_landlock_scope_abstract(int abi, txbox_error *err);

struct confine_limits {
    uint64_t nproc;     /* processes of the command's user (0: unlimited) */
    uint64_t memory;    /* bytes of data segment + private mappings per process */
    uint64_t cpu_s;     /* CPU seconds per process */
    uint64_t file_size; /* bytes in one file */
};
MUST_CHECK int confine_rlimits(const struct confine_limits *l, txbox_error *err);

#include "envlist.h"

/* env through the allowlist (the strings are shared with env; free only the
 * array). The names removed are appended to `removed` (may be NULL). */
char **confine_env(char *const *env, const char *const *allow, json_t *removed);

#endif
