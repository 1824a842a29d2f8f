/* SPDX-License-Identifier: MIT */
/* Fuzzes the /proc/PID/cgroup parsers behind peer attestation (agent/socket/peer-pod.c,
 * agent/socket/peer-service.c): whatever the text, the answer is "no pod", one pod UID and container ID
 * of sane characters, or -EBADMSG; and "no service", one valid unit name, or -EBADMSG. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "peer-pod.h"
#include "peer-service.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static char *const roots[] = { (char *) "/kubepods", (char *) "/kubepods.slice", NULL };
        struct peer_pod pod = {};
        char *text = malloc(size + 1);
        int r;

        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;
        r = peer_pod_from_proc_cgroup(text, roots, &pod);
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

        static char *const service_roots[] = { (char *) "/system.slice", (char *) "/x/y.slice", NULL };
        char *unit = NULL;
        r = peer_service_from_proc_cgroup(text, service_roots, &unit);
        /* A unit name never holds a '/' (it becomes part of nothing but a lookup, yet must be
         * exactly one cgroup segment) and is always one systemd would accept. */
        if (r == 1 && (!unit || !peer_service_unit_valid(unit) || strchr(unit, '/')))
                abort();
        if (r != 1 && unit)
                abort();
        if (r != 1 && r != 0 && r != -EBADMSG && r != -ENOMEM)
                abort();
        free(unit);
        free(text);
        return 0;
}
