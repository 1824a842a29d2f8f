/* SPDX-License-Identifier: MIT */
#pragma once

/* Who may read a published bundle, and that nobody but root may write it. A manifest's
 * files[].mode is an upper bound, never a grant: group and other write are always dropped (any
 * host user could append to a live config), and read/execute for the group and for others only
 * stay when the [config.NAME] section's group= and world-readable= allow them. Directories
 * (dest, its version directories and the directories inside them) get the same rule. */

#include <stdbool.h>
#include <sys/types.h>

/* The most a file can be published with: the declared mode without group/other write. The
 * manifest parser already refuses setuid, setgid and sticky. */
#define PUBLISH_MODE_MAX 0755

struct publish_modes {
        mode_t file_mask; /* what a file keeps of its declared mode */
        mode_t dir_mode;  /* every directory from dest down */
        gid_t gid;        /* the group let in (group=), else root's */
};

/* gid (gid_t) -1: no group= (group bits cleared). Everything published is root's: group= is
 * an ACL entry giving the group the mode's group bits (fs-acl.h), so publishing takes neither
 * CAP_CHOWN nor, over an older version, CAP_FOWNER. */
void publish_modes_init(struct publish_modes *m, gid_t gid, bool world_readable);
mode_t publish_modes_file(const struct publish_modes *m, mode_t declared);
bool publish_modes_equal(const struct publish_modes *a, const struct publish_modes *b);
/* True if the manifest asked for a mode that is cut down whatever the section says. */
bool publish_mode_capped(mode_t declared);
/* Gives fd mode with gid let in (only when that differs from what it has). */
int publish_modes_set_fd(int fd, mode_t mode, gid_t gid);
/* What to add to an error of publish_modes_set_fd() so that an operator knows the fix ("" when
 * nothing). */
const char *publish_modes_error_hint(int r);
/* 1 if fd already has what publish_modes_set_fd() would give it, 0 if not, negative errno. */
int publish_modes_matches_fd(int fd, mode_t mode, gid_t gid);
/* Brings a tree published under other rules (an older agent, another group= or
 * world-readable=) within these: dest and every directory below get dir_mode, files keep only
 * file_mask of their mode, everything lets the group in. Bits are only ever taken away from files
 * (their declared mode is not known here); the next publish sets them in full. Symlinks are
 * skipped. Keeps going after an error and returns the first one; -EPERM, touching nothing, if
 * dest is group- or world-writable (refused by fetches too). */
int publish_modes_apply_tree(const char *dest, const struct publish_modes *m);
