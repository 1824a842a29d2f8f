/* SPDX-License-Identifier: MIT */
/* Fuzzes the Pod JSON parser (agent/pods/pod-parse.c: static pod files and apiserver objects) and,
 * when a pod comes out, its API representation (pod_to_json) and the model's accessors. */

#include <stdlib.h>

#include "fuzz.h"
#include "pods.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct pod *p = NULL;
        char *error = NULL;

        /* Odd sizes parse as a static pod (a uid fallback), even ones as an apiserver object. */
        if (pod_parse_json_text((const char *) data, size, (size & 1) ? "fuzz-uid" : NULL, &p, &error) < 0) {
                free(error);
                return 0;
        }
        free(error);

        cJSON *j = pod_to_json(p);
        if (j) {
                char *text = cJSON_PrintUnformatted(j);
                free(text);
                cJSON_Delete(j);
        }
        (void) pod_equal(p, p);
        (void) pod_is_ready(p);
        (void) pod_primary_ip(p);
        (void) pod_annotation(p, "pinion.io/serverset");
        pod_unref(p);
        return 0;
}
