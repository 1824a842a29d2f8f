/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs.h"
#include "macro.h"
#include "peer-pod.h"
#include "peer-service.h"
#include "strv.h"

#define UNIT_NAME_MAX 255
#define SERVICE_SUFFIX ".service"

/* systemd's unit name alphabet (unit_name_is_valid()): the prefix, an optional "@instance",
 * then ".service". */
bool peer_service_unit_valid(const char *name) {
        static const char ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:-_.\\@";
        size_t n = name ? strlen(name) : 0, suffix = strlen(SERVICE_SUFFIX);

        if (n <= suffix || n > UNIT_NAME_MAX || strcmp(name + n - suffix, SERVICE_SUFFIX) != 0)
                return false;
        if (strspn(name, ok) != n || name[0] == '.' || name[0] == '@')
                return false;
        const char *at = strchr(name, '@');
        return !at || strchr(at + 1, '@') == NULL;
}

/* The unit directly below one of the roots on one cgroup path: 1 with *ret, 0 if none. */
static int unit_from_path(const char *path, size_t len, char *const *roots, char **ret) {
        STRV_FOREACH(root, roots) {
                size_t n = strlen(*root);
                if (len <= n + 1 || memcmp(path, *root, n) != 0 || path[n] != '/')
                        continue;
                const char *seg = path + n + 1, *end = memchr(seg, '/', len - n - 1);
                size_t seg_len = end ? (size_t) (end - seg) : len - n - 1;
                _cleanup_free_ char *unit = strndup(seg, seg_len);
                if (!unit)
                        return -ENOMEM;
                if (!peer_service_unit_valid(unit))
                        continue;
                *ret = TAKE_PTR(unit);
                return 1;
        }
        return 0;
}

int peer_service_from_proc_cgroup(const char *text, char *const *roots, char **ret_unit) {
        _cleanup_free_ char *found = NULL;
        const char *path;
        size_t len;

        if (!text || !ret_unit)
                return -EINVAL;
        while (proc_cgroup_next_path(&text, &path, &len) > 0) {
                _cleanup_free_ char *here = NULL;
                int r = unit_from_path(path, len, roots, &here);

                if (r < 0)
                        return r;
                if (r > 0 && !found)
                        found = TAKE_PTR(here);
                else if (r > 0 && !streq(found, here))
                        return -EBADMSG;
        }
        if (!found)
                return 0;
        *ret_unit = TAKE_PTR(found);
        return 1;
}

int peer_service_lookup(const char *proc_root, char *const *roots, pid_t pid, int pidfd, uint64_t start_time,
                        char **ret_unit) {
        _cleanup_free_ char *text = NULL;
        int r = proc_cgroup_read(proc_root, pid, pidfd, start_time, &text);
        if (r < 0)
                return r;
        return peer_service_from_proc_cgroup(text, roots, ret_unit);
}
