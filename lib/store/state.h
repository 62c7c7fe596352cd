/* txbox's own state in the command's view: every .txbox the command could
 * reach (nested workspaces, other mounts of the workspace) is hidden, and
 * the state is its owner's only. See state.c. */
#ifndef TXBOX_STATE_H
#define TXBOX_STATE_H

#include "tx.h"

/* Records this workspace in .txbox/nested of every workspace that
 * encloses it, so that the enclosing one hides this one's .txbox from its
 * commands. Best effort: an enclosing workspace that cannot be written
 * (another owner's) is left alone. */
void state_register_nested(const txbox_ws *ws);

/* The absolute paths, as the sandbox shows them, of every .txbox the
 * command must not reach besides the workspace's own: the nested
 * workspaces' (registered, or found by a one-time walk of the workspace),
 * and those reached through another mount of the same filesystem (a bind
 * mount of a parent of the workspace, of the state directory, of a
 * directory in the workspace). NULL-terminated; free each and the array. */
char **state_hidden_paths(const txbox_ws *ws);

/* .txbox and the audit log readable by their owner only: a state
 * directory or log made more open (by an older txbox, a chmod, SQLite's
 * 0644) is narrowed. */
void state_tighten_modes(const txbox_ws *ws);

/* Does the directory name in dfd hold a .txbox at any depth (or is it too
 * large to tell)? The copy backend's merge keeps such a directory rather
 * than delete or replace it. */
bool state_tree_holds_state(int dfd, const char *name);

/* Removes every .txbox below the directory name in dfd (a new directory
 * of the copy backend's, before the merge moves it in). */
void state_strip(int dfd, const char *name);

/* Does the relative path rel have a component named .txbox? */
bool state_path_is_state(const char *rel);

#endif
