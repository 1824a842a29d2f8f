/* SPDX-License-Identifier: MIT */
/* The CSI plugin's target path rule (modules/csi/csi-mount.c) on any bytes the kubelet, or
 * whoever reached the CSI socket, could send as target_path: whatever the input, a target that
 * passes is clean (no ".", "..", "//", trailing "/") and lies at least two levels below the
 * root, so it can never name the root, a pod's own directory, or anything outside.
 * Input: "ROOT\nTARGET" (bytes after a NUL are cut, as C strings cut them). */
#include <stdlib.h>
#include <string.h>

#include "csi-mount.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text = malloc(size + 1), *target;
        char why[CSI_WHY_MAX];

        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;
        target = strchr(text, '\n');
        if (target)
                *target++ = 0;
        else
                target = text + strlen(text);
        if (csi_mount_target_check(text, target, why, sizeof(why)) == 0) {
                size_t n = strlen(text);
                const char *rest = target + n + 1;

                if (!csi_mount_path_clean(text) || !csi_mount_path_clean(target) || strncmp(target, text, n) != 0 ||
                    target[n] != '/' || !strchr(rest, '/') || strstr(target, "/../") || strstr(target, "//"))
                        abort();
        }
        free(text);
        return 0;
}
