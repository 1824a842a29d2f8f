/* SPDX-License-Identifier: MIT */
#pragma once

/* Reading back the ACL entries fs-acl.h sets, for the tests' assertions. */
#include <acl/libacl.h>
#include <sys/acl.h>
#include <sys/types.h>

/* The rwx bits (0-7) path's access ACL gives the named user (tag ACL_USER) or group (ACL_GROUP)
 * id, or the entry without qualifier of tag (ACL_MASK, ACL_GROUP_OBJ, ...); -1 if it has none. */
static inline int acl_check_entry(const char *path, acl_tag_t tag, unsigned id) {
        acl_t acl = acl_get_file(path, ACL_TYPE_ACCESS);
        acl_entry_t e;
        int found = -1;

        if (!acl)
                return -1;
        for (int w = ACL_FIRST_ENTRY; found < 0 && acl_get_entry(acl, w, &e) == 1; w = ACL_NEXT_ENTRY) {
                acl_tag_t t;
                acl_permset_t ps;
                if (acl_get_tag_type(e, &t) < 0 || t != tag || acl_get_permset(e, &ps) < 0)
                        continue;
                if (tag == ACL_USER || tag == ACL_GROUP) {
                        void *q = acl_get_qualifier(e);
                        unsigned named = q ? (tag == ACL_USER ? *(uid_t *) q : *(gid_t *) q) : ~0U;
                        acl_free(q);
                        if (named != id)
                                continue;
                }
                found = (acl_get_perm(ps, ACL_READ) ? 4 : 0) | (acl_get_perm(ps, ACL_WRITE) ? 2 : 0) |
                        (acl_get_perm(ps, ACL_EXECUTE) ? 1 : 0);
        }
        acl_free(acl);
        return found;
}
