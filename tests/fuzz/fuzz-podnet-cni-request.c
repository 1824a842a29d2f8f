/* SPDX-License-Identifier: MIT */
/* Fuzzes the agent's POST /v1/cni body parser (what pinion-cni sends, or anyone root on the
 * socket): JSON, the same environment and config checks as the plugin. */

#include <stdlib.h>

#include "cni.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct cni_request r = { .command = _CNI_COMMAND_INVALID };
        struct cni_error err = {};

        if (cni_request_from_json(&r, (const char *) data, size, &err) >= 0) {
                cJSON *j = cni_request_to_json(&r);
                char *t = j ? cJSON_PrintUnformatted(j) : NULL;
                free(t);
                cJSON_Delete(j);
        } else {
                cJSON *ej = cni_error_to_json(&err, r.cni_version);
                cJSON_Delete(ej);
        }
        cni_error_done(&err);
        cni_request_done(&r);
        return 0;
}
