/* SPDX-License-Identifier: MIT */
#pragma once

/* Handing a file to a workload without giving it away: the file stays its creator's (root's),
 * and one named user and/or one named group get access with POSIX ACL entries. Ownership
 * changes would need CAP_CHOWN, and rewriting files then owned by others CAP_FOWNER; entries
 * on a file the agent owns need neither.
 *
 * mode reads as it does for chmod(), except that its group bits are what the named user and
 * group get (the file's owning group gets nothing then), and they are the ACL mask, so `ls -l`
 * shows mode and a "+". With neither named, the file gets exactly mode and loses any extended
 * entries (also on a file system without ACLs, where naming someone fails with -EOPNOTSUPP).
 * Root's group (gid 0) is never named: it is the group of what root creates, so it reads as
 * naming no group, the mode's group bits going to the file's own group.
 *
 * fd may be an O_PATH descriptor (a socket file, which cannot be opened). */

#include <sys/types.h>

int fs_acl_grant_fd(int fd, mode_t mode, uid_t uid, gid_t gid);

/* 1 if fd's access is what fs_acl_grant_fd(fd, mode, uid, gid) sets, 0 if not, negative errno. */
int fs_acl_matches_fd(int fd, mode_t mode, uid_t uid, gid_t gid);
