/* Descriptors over a unix socket: see fdpass.h. */
#include "fdpass.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int fd_send(int sock, const void *buf, size_t len, const int *fds, int nfds)
{
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    union {
        struct cmsghdr h;
        char room[CMSG_SPACE(sizeof(int) * FDPASS_MAX)];
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > FDPASS_MAX) {
        errno = E2BIG;
        return -1;
    }
    if (nfds > 0) {
        m.msg_control = u.room;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(h), fds, sizeof(int) * (size_t)nfds);
    }
    ssize_t r;
    while ((r = sendmsg(sock, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (r >= 0 && (size_t)r != len)
        errno = EIO;
    return r >= 0 && (size_t)r == len ? 0 : -1;
}

ssize_t fd_recv(int sock, void *buf, size_t len, int flags, int *fds, int max, int *nfds, bool *trunc)
{
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    union {
        struct cmsghdr h;
        char room[CMSG_SPACE(sizeof(int) * FDPASS_MAX)];
    } u;
    struct msghdr m = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.room, .msg_controllen = sizeof u.room};
    *nfds = 0;
    *trunc = false;
    ssize_t r;
    while ((r = recvmsg(sock, &m, flags | MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    if (r < 0)
        return r;
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
        if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
            continue;
        int k = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        for (int i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(h) + sizeof(int) * (size_t)i, sizeof fd);
            if (*nfds < max) {
                fds[(*nfds)++] = fd;
            } else {
                close(fd);
                *trunc = true;
            }
        }
    }
    if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
        *trunc = true;
    return r;
}

int fd_keep_only(int *keep, int n)
{
    enum { PARK = 1000 };
    int up[FDPASS_MAX];
    if (n > FDPASS_MAX)
        return -1;
    for (int i = 0; i < n; i++)
        if ((up[i] = keep[i] = fcntl(keep[i], F_DUPFD_CLOEXEC, PARK)) < 0)
            return -1;
    /* everything else closed: below PARK, and between and above the
     * parked ones (sorted) */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && up[j - 1] > up[j]; j--) {
            int t = up[j];
            up[j] = up[j - 1];
            up[j - 1] = t;
        }
    close_range(3, PARK - 1, 0);
    unsigned next = PARK;
    for (int i = 0; i < n; i++) {
        if ((unsigned)up[i] > next)
            close_range(next, (unsigned)up[i] - 1, 0);
        next = (unsigned)up[i] + 1;
    }
    close_range(next, ~0U, 0);
    for (int i = 0; i < n; i++) {
        int low = fcntl(keep[i], F_DUPFD_CLOEXEC, 3 + i);
        close(keep[i]);
        if (low < 0)
            return -1;
        keep[i] = low;
    }
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int k = 0; k <= 2 && nul >= 0; k++)
        dup2(nul, k);
    if (nul > 2)
        close(nul);
    return 0;
}
