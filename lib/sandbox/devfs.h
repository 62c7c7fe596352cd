/* The minimal /dev a command sees (devfs.c): made by each command's init,
 * or once by a session's keeper for all of its commands. */
#ifndef TXBOX_DEVFS_H
#define TXBOX_DEVFS_H

#include <stdbool.h>

/* The host's device nodes a command gets: null, zero, full, random,
 * urandom, tty. */
#define DEVFS_NODES 6

/* Opens the host's nodes (O_PATH), before /dev is covered: fds[i] is -1
 * for one that is missing. fds[0] is /dev/null. */
void devfs_open_nodes(int fds[DEVFS_NODES]);
void devfs_close_nodes(int fds[DEVFS_NODES]);
/* A new filesystem of type, as a detached mount (fsopen, fsmount) with the
 * mount attributes attr (MOUNT_ATTR_*); opts: key, value pairs of its
 * options, NULL-terminated (NULL: none). Its fd, or -1 with errno set.
 * (The /dev below, and a session's /tmp and /proc: keeper.c.) */
int devfs_detached(const char *type, const char *const *opts, unsigned attr);
/* A /dev, as a detached mount (its fd; to move_mount or clone with its
 * mounts, AT_RECURSIVE): a small tmpfs holding the nodes of fds (clones of
 * the host's), a devpts instance of its own (/dev/ptmx, /dev/pts; none
 * where the kernel refuses one), /dev/shm (a clone of shm, a detached
 * mount, when shm >= 0; else an empty directory to mount on) and the
 * /dev/fd, stdin, stdout and stderr links. ro: the tmpfs itself read-only
 * once made (a session's, which every command of it shares: no command
 * replaces /dev/stdout or adds a name for the next; the nodes, /dev/pts
 * and /dev/shm stay writable). -1 with errno set and *what saying which
 * step failed. */
int devfs_make(const int fds[DEVFS_NODES], int shm, bool ro, const char **what);

#endif
