/* SPDX-License-Identifier: MIT */
/* Fuzzes the /proc/PID/cgroup parser behind peer attestation (agent/peer-pod.c): whatever the
 * text, the answer is "no pod", one pod UID of sane characters, or -EBADMSG. */

#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "peer-pod.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = malloc(size + 1), *uid = NULL;
        int r;

        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;
        r = pod_uid_from_proc_cgroup(text, &uid);
        if (r == 1) {
                /* Only lowercase hex and dashes ever come out: the UID names files and is compared
                 * with the store's. */
                if (!uid || strspn(uid, "0123456789abcdef-") != strlen(uid))
                        abort();
        } else if (uid)
                abort();
        free(uid);
        free(text);
        return 0;
}
