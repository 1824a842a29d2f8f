/* SPDX-License-Identifier: MIT */
#include <acl/libacl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/acl.h>
#include <sys/stat.h>

#include "fs-acl.h"
#include "macro.h"

static void acl_freep(acl_t *acl) {
        if (*acl)
                acl_free(*acl);
}

/* One entry with rwx bits (0-7) for tag, naming qualifier (a uid_t or gid_t) or nobody. */
static int add_entry(acl_t *acl, acl_tag_t tag, const void *qualifier, mode_t bits) {
        acl_entry_t e;
        acl_permset_t ps;

        if (acl_create_entry(acl, &e) < 0 || acl_set_tag_type(e, tag) < 0 ||
            (qualifier && acl_set_qualifier(e, qualifier) < 0) || acl_get_permset(e, &ps) < 0 ||
            acl_clear_perms(ps) < 0)
                return negative_errno();
        if (((bits & 4) && acl_add_perm(ps, ACL_READ) < 0) || ((bits & 2) && acl_add_perm(ps, ACL_WRITE) < 0) ||
            ((bits & 1) && acl_add_perm(ps, ACL_EXECUTE) < 0) || acl_set_permset(e, ps) < 0)
                return negative_errno();
        return 0;
}

/* The ACL fs_acl_grant_fd() sets. */
static int build_acl(mode_t mode, uid_t uid, gid_t gid, acl_t *ret) {
        if (gid == 0)
                gid = (gid_t) -1; /* root's own group: fs-acl.h */
        bool named = uid != (uid_t) -1 || gid != (gid_t) -1;
        mode_t granted = (mode >> 3) & 7;
        acl_t acl = NULL;
        int r;

        acl = acl_init(5);
        if (!acl)
                return negative_errno();
        r = add_entry(&acl, ACL_USER_OBJ, NULL, (mode >> 6) & 7);
        if (r >= 0)
                r = add_entry(&acl, ACL_GROUP_OBJ, NULL, named ? 0 : granted);
        if (r >= 0 && uid != (uid_t) -1)
                r = add_entry(&acl, ACL_USER, &uid, granted);
        if (r >= 0 && gid != (gid_t) -1)
                r = add_entry(&acl, ACL_GROUP, &gid, granted);
        if (r >= 0 && named)
                r = add_entry(&acl, ACL_MASK, NULL, granted);
        if (r >= 0)
                r = add_entry(&acl, ACL_OTHER, NULL, mode & 7);
        if (r >= 0 && acl_valid(acl) < 0)
                r = negative_errno();
        if (r < 0) {
                acl_free(acl);
                return r;
        }
        *ret = acl;
        return 0;
}

/* An O_PATH descriptor takes no f*xattr() calls: its /proc/self/fd link does, naming the very
 * inode it holds (no path lookup an attacker could redirect). */
static bool is_path_fd(int fd, char proc_path[static 32]) {
        int flags = fcntl(fd, F_GETFL);
        if (flags < 0 || !(flags & O_PATH))
                return false;
        snprintf(proc_path, 32, "/proc/self/fd/%d", fd);
        return true;
}

/* The bits an ACL does not carry (setuid, setgid, sticky), or all of them where the file system
 * has no ACLs. With an ACL set, chmod()'s group bits land in the mask: the same as granted. */
static int set_mode_bits(int fd, const char *proc_path, mode_t mode) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        if ((st.st_mode & 07777) == (mode & 07777))
                return 0;
        int r = proc_path ? chmod(proc_path, mode & 07777) : fchmod(fd, mode & 07777);
        return r < 0 ? negative_errno() : 0;
}

int fs_acl_grant_fd(int fd, mode_t mode, uid_t uid, gid_t gid) {
        _cleanup_(acl_freep) acl_t acl = NULL;
        char proc_path[32];
        const char *path = is_path_fd(fd, proc_path) ? proc_path : NULL;
        int r;

        r = build_acl(mode, uid, gid, &acl);
        if (r < 0)
                return r;
        /* The ACL first: were the mode set first, its group bits would reach the file's group (or
         * an older ACL's entries) for a moment. Setting it sets the permission bits too. */
        if ((path ? acl_set_file(path, ACL_TYPE_ACCESS, acl) : acl_set_fd(fd, acl)) < 0) {
                r = negative_errno();
                /* Without ACL support nobody can be named; the mode alone is the rest. */
                if (r != -EOPNOTSUPP || uid != (uid_t) -1 || (gid != (gid_t) -1 && gid != 0))
                        return r;
        }
        return set_mode_bits(fd, path, mode);
}

int fs_acl_matches_fd(int fd, mode_t mode, uid_t uid, gid_t gid) {
        _cleanup_(acl_freep) acl_t want = NULL, have = NULL;
        char proc_path[32];
        const char *path = is_path_fd(fd, proc_path) ? proc_path : NULL;
        struct stat st;
        int r;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        if ((st.st_mode & 07000) != (mode & 07000))
                return 0;
        r = build_acl(mode, uid, gid, &want);
        if (r < 0)
                return r;
        /* A file with no entries reads as the ACL its mode makes; on a file system without ACL
         * support libacl fails instead, and the mode is all there is. */
        have = path ? acl_get_file(path, ACL_TYPE_ACCESS) : acl_get_fd(fd);
        if (!have && errno == EOPNOTSUPP)
                have = acl_from_mode(st.st_mode);
        if (!have)
                return negative_errno();
        r = acl_cmp(want, have);
        return r < 0 ? negative_errno() : r == 0;
}
