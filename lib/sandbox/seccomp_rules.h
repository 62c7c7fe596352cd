/* The syscall filter's rules, as libseccomp calls. Only the build-time
 * generator (gen_seccomp.c) and the unit test use them: txbox itself loads
 * the BPF program the generator wrote (txbox_seccomp_bpf, confine.h) and
 * does not link libseccomp. */
#ifndef TXBOX_SECCOMP_RULES_H
#define TXBOX_SECCOMP_RULES_H

#include <seccomp.h>

/* A filter with the default attributes (seccomp_init's: NNP, kill on a
 * foreign architecture) and txbox's rules: a new filter context, or NULL
 * (errno set). Release it with seccomp_release(). */
scmp_filter_ctx confine_seccomp_new(void);
/* Adds txbox's rules to ctx: 0, or a negative errno. */
int confine_seccomp_build(scmp_filter_ctx ctx);

#endif
