/* SPDX-License-Identifier: MIT */
#pragma once

/* Whose socket is this? The one rule for "only the agent can have put this socket here", used by
 * the agent for the directory it binds in and by pinionctl and pinion-cni before they connect and
 * before they send anything. A socket is the agent's when nobody but root (or the configured
 * owner) can replace it: it is owned by root and every directory from / down to it is owned by
 * root and not writable by group or other (sticky directories excepted: there nobody can rename
 * or remove an entry they do not own). The socket's own mode does not matter (connecting needs
 * write permission; replacing it needs write permission on its directory). After connect() the
 * peer's SO_PEERCRED uid must be root (or the owner) too.
 *
 * Linked into piniond, pinionctl and pinion-cni: plain syscalls, no logging. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The sockets-only directory pods may mount, and the agent's API socket in it. */
#define PINION_RUNTIME_DIR RUNSTATEDIR "/pinion" /* ./configure --runstatedir; the .deb: /run */
#define PINION_SOCKETS_DIR PINION_RUNTIME_DIR "/sockets"
#define PINION_SOCKET_DEFAULT PINION_SOCKETS_DIR "/pinion.sock"
/* Where the socket was before the sockets directory: a symlink to the default now. */
#define PINION_SOCKET_LEGACY PINION_RUNTIME_DIR "/pinion.sock"
/* The name of the sockets directory below runtime-dir; the legacy symlink sits beside it. */
#define PINION_SOCKETS_SUBDIR "sockets"

/* Clients accept sockets (and peers) of this uid besides root: for agents that run unprivileged
 * (development, tests). Unset: root only. */
#define SOCKET_OWNER_ENV "PINION_SOCKET_OWNER"

#define SOCKET_TRUST_WHY_MAX 512

/* The socket a client uses when none is given: the default, or the legacy path if only that
 * exists (an agent from before the sockets directory, or one configured with the old path). */
const char *socket_trust_default_path(void);

/* The uid accepted besides root, from $PINION_SOCKET_OWNER (0 if unset). -EINVAL if it is not
 * a uid, with why set. */
int socket_trust_owner(uid_t *ret, char *why, size_t why_size);

/* Checks path before connect(): 0 if only root/owner can have put the socket there; -EPERM
 * with why set if not; -ENOENT and other -errno if it cannot be looked at (why set too).
 * Follows one symlink at the socket itself (the legacy path), checking the target's
 * directories as well. */
int socket_trust_check_path(const char *path, uid_t owner, char *why, size_t why_size);

/* Checks a connected socket's peer: 0 if it runs as root or owner, else -EPERM with why set. */
int socket_trust_check_peer(int fd, uid_t owner, char *why, size_t why_size);

/* ---- the agent's side ---- */

/* Creates the directory of socket_path if missing (0755), then requires it to be a real
 * directory (not a symlink) owned by the agent's euid and not writable by group or other. 0, or
 * -EPERM with why set when it is not, or another -errno. */
int socket_trust_dir_prepare(const char *socket_path, char *why, size_t why_size);
/* The same judgement without making anything (--check-config): -ENOENT if the directory is
 * missing (prepare would make it, as it must be), -EPERM with why set if it is not the
 * agent's alone. */
int socket_trust_dir_check(const char *socket_path, char *why, size_t why_size);

/* If socket_path is <runtime_dir>/sockets/NAME, makes <runtime_dir>/NAME a symlink to
 * sockets/NAME, replacing a socket or symlink there (never anything else). 1 if made, 0 if not
 * applicable, -EEXIST if something else is in the way, other -errno. */
int socket_trust_legacy_link(const char *runtime_dir, const char *socket_path);
