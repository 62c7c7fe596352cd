/* The host's home directories, as the hidden paths need them (run.c,
 * tx_hidden_paths): see homes.c. */
#ifndef TXBOX_HOMES_H
#define TXBOX_HOMES_H

#include "util.h"

/* Every home directory on the host that may be another account's, each
 * resolved (realpath) once: the directories in /home, /root, and the home
 * of each account of the user database other than the caller's that is a
 * directory owned by that account (not /, /bin, /var/www, which belong to
 * root). The caller's own are among them; the caller filters. Read from
 * the cache in statefd (a workspace's state directory; -1: none) when it
 * is still good, else looked up and cached there (see homes.c). Into sv,
 * which keeps each path once. */
void homes_all(strvec *sv, int statefd);

#endif
