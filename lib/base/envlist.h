/* The environment's allowlist (envlist.c). */
#ifndef TXBOX_ENVLIST_H
#define TXBOX_ENVLIST_H

#include "util.h"

/* Does the environment entry "NAME=value" pass into the command: on the
 * allowlist (envlist.c) with a value that embeds no credential, or kept by
 * one of the fnmatch patterns in allow? */
bool confine_env_passes(const char *entry, const char *const *allow);
/* Does a value embed a credential (a URL with user info, a password in a
 * connection string)? */
bool confine_env_value_secret(const char *value);

#endif
