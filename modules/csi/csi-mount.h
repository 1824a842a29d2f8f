/* SPDX-License-Identifier: MIT */
#pragma once

/* The node plugin's one volume: the agent's sockets directory, bind-mounted read-only at a
 * target path the kubelet names. Plain syscalls, no logging: each function returns 0 or a
 * negative errno and says why in `why` (for the gRPC status message), which csi-api.c maps to
 * the CSI spec's codes:
 *
 *   -EINVAL     the path is not a clean absolute path
 *   -EPERM      the path is not below the pods root, or leads out of it (a symlink)
 *   -ENOENT     publish: the target's parent does not exist;
 *               unpublish: a mount at the target that is not the sockets directory
 *   -EEXIST     publish: something other than our bind is at the target
 *   -ENOTEMPTY  unpublish: a directory left at the target that is not empty
 *   other       the syscall's own error
 *
 * Only a target strictly below the pods root is ever mounted on or removed: the CSI socket is
 * the kubelet's, but a caller that could name any path could cover /etc with the sockets. */

#include <stdbool.h>
#include <stddef.h>

#define CSI_WHY_MAX 512

/* An absolute path whose every segment is non-empty and neither "." nor ".." (no "//",
 * no trailing "/"), shorter than PATH_MAX. */
bool csi_mount_path_clean(const char *p);

/* Whether target is a clean absolute path (no "." or ".." segment, no "//", no trailing
 * "/") strictly below root (itself clean). Text only: csi_mount_publish() and csi_mount_unpublish() also
 * resolve the target's parent on disk. */
int csi_mount_target_check(const char *root, const char *target, char *why, size_t why_size);

/* Bind-mounts source read-only (nosuid, nodev, noexec) at target, creating target (one
 * directory, 0755) if missing. Already published there: 0. */
int csi_mount_publish(const char *source, const char *root, const char *target, char *why, size_t why_size);

/* Unmounts the sockets directory (source) from target and removes the directory. Nothing
 * there (or the directory alone): 0. */
int csi_mount_unpublish(const char *source, const char *root, const char *target, char *why, size_t why_size);

/* An error above that refuses the request as the caller made it (-EINVAL, -EPERM, -ENOENT,
 * -EEXIST, -ENOTEMPTY, and -ENOTDIR, -EBUSY at the target), not a failure on our side. */
bool csi_mount_refusal(int error);
