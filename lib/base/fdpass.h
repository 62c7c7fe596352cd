/* Descriptors over a unix socket (SCM_RIGHTS), and a process keeping only
 * its own: without allocating (the sandbox's init calls them). */
#ifndef TXBOX_FDPASS_H
#define TXBOX_FDPASS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define FDPASS_MAX 16

/* Sends len bytes of buf with nfds descriptors (at most FDPASS_MAX): 0, or
 * -1 with errno (a short send is EIO). No SIGPIPE. */
int fd_send(int sock, const void *buf, size_t len, const int *fds, int nfds);
/* Receives one message into buf (flags: recvmsg's, MSG_CMSG_CLOEXEC is
 * added); its descriptors go into fds (at most max, the rest closed),
 * *nfds how many; *trunc: the message or its descriptors did not fit.
 * Returns recvmsg's. */
ssize_t fd_recv(int sock, void *buf, size_t len, int flags, int *fds, int max, int *nfds, bool *trunc);
/* A process of its own: stdin, stdout and stderr on /dev/null, every
 * other descriptor closed but the n in keep, which become 3, 4, ... in
 * their order (keep is updated). -1 when they could not be moved. */
int fd_keep_only(int *keep, int n);

#endif
