/* What the place txbox runs in (a container, mostly) lacks that the
 * sandbox needs, found all at once: a refusal names every missing setting
 * in one message, with the option each container runtime takes, instead
 * of one per try. */
#ifndef TXBOX_PROBE_H
#define TXBOX_PROBE_H

#include <stdbool.h>
#include <sys/types.h>

#include "util.h"

enum {
    SB_MISS_SECCOMP = 1u << 0, /* a seccomp filter refuses new namespaces */
    SB_MISS_USERNS = 1u << 1,  /* user namespaces are disabled (a sysctl) */
    SB_MISS_PROC = 1u << 2,    /* /proc is masked: no fresh procfs in a user namespace */
    SB_MISS_SETFCAP = 1u << 3, /* root without CAP_SETFCAP cannot map its uid 0 */
    SB_MISS_CGROUP = 1u << 4,  /* root without a cgroup for the process limit */
};

/* Each SB_MISS_ that holds here: new namespaces and a fresh /proc are tried
 * in a child process (a few milliseconds; only after a refusal), the rest
 * is read. allow_degraded: root may run without a cgroup. */
unsigned sb_probe(bool allow_degraded);
/* err's message becomes the list of what miss names, one clause each with
 * the options of podman, docker and Kubernetes (the cgroup's last: its
 * remedy, txbox's own option, is the front's to word); its code is kept
 * (EPERM if none). Returns -1. */
int sb_probe_error(unsigned miss, txbox_error *err);
/* Does a seccomp filter confine this process? */
bool sb_under_seccomp(void);
/* Does a mount below /proc hide part of it (what container runtimes do to
 * /proc/kcore, /proc/sys...), so that the kernel refuses a fresh procfs
 * in a user namespace? A mount on an empty directory hides nothing
 * (binfmt_misc): those of its types are not counted. No allocation: init
 * calls it. */
bool sb_proc_masked(void);
/* protections.user_namespace of a sandbox in a user namespace of its own
 * (PID's, in the /proc that PROCFD opens): which ids it maps,
 * "unprivileged, uid 1000 and gid 1000 mapped to themselves". */
void sb_map_text(int procfd, pid_t pid, char *out, size_t n);

#endif
