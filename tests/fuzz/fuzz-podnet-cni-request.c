/* SPDX-License-Identifier: MIT */
/* Fuzzes the agent's POST /v1/cni body parser (what pinion-cni sends, or anyone root on the
 * socket): JSON, the same environment and config checks as the plugin. */

#include <stdlib.h>

#include "cni-json.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct cni_request r = { .command = _CNI_COMMAND_INVALID };
        struct cni_error err = {};

        if (cni_json_parse_request(&r, (const char *) data, size, &err) >= 0) {
                /* Written again as the plugin would, it parses again. */
                char *config = cJSON_PrintUnformatted(r.config), *body = NULL;
                if (config && cni_request_body(&r, config, strlen(config), &body) >= 0) {
                        struct cni_request back = { .command = _CNI_COMMAND_INVALID };
                        struct cni_error back_err = {};
                        if (cni_json_parse_request(&back, body, strlen(body), &back_err) < 0)
                                abort();
                        cni_error_done(&back_err);
                        cni_json_request_done(&back);
                }
                free(body);
                free(config);
        } else {
                cJSON *ej = cni_json_error(&err, r.cni_version);
                cJSON_Delete(ej);
        }
        cni_error_done(&err);
        cni_json_request_done(&r);
        return 0;
}
