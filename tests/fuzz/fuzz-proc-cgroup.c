/* SPDX-License-Identifier: MIT */
/* Fuzzes the /proc/PID/cgroup parser behind peer attestation (agent/peer-pod.c): whatever the
 * text, the answer is "no pod", one pod UID and container ID of sane characters, or -EBADMSG. */

#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "peer-pod.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static char *const roots[] = { (char *) "/kubepods", (char *) "/kubepods.slice", NULL };
        struct peer_pod pod = {};
        char *text = malloc(size + 1);
        int r;

        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;
        r = pod_from_proc_cgroup(text, roots, &pod);
        if (r == 1) {
                /* Only lowercase hex and dashes ever come out: the UID names files and is compared
                 * with the store's, the container ID with the pod's status. */
                if (!pod.uid || strspn(pod.uid, "0123456789abcdef-") != strlen(pod.uid))
                        abort();
                if (pod.container_id && (strlen(pod.container_id) != CONTAINER_ID_LEN ||
                                         strspn(pod.container_id, "0123456789abcdef") != CONTAINER_ID_LEN))
                        abort();
        } else if (pod.uid || pod.container_id)
                abort();
        peer_pod_done(&pod);
        free(text);
        return 0;
}
