/* SPDX-License-Identifier: MIT */
/* Fuzzes pinion-cni's input: the CNI_* environment and the network config on stdin. The input
 * is split at the first NUL: before it, "NAME=value" lines for the environment; after it, stdin. */

#include <stdlib.h>
#include <string.h>

#include "cni-json.h"
#include "fuzz.h"

struct env {
        char *text;
};

static const char *env_get(const char *name, void *userdata) {
        struct env *e = userdata;
        size_t n = strlen(name);
        for (char *line = e->text; line && *line;) {
                char *nl = strchr(line, '\n');
                if (strncmp(line, name, n) == 0 && line[n] == '=') {
                        /* Values end at the line's end: copy into a static slot per name. */
                        static char value[5][4096];
                        static const char *const names[] = { "CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME", "CNI_ARGS" };
                        for (size_t i = 0; i < 5; i++)
                                if (strcmp(names[i], name) == 0) {
                                        size_t len = nl ? (size_t) (nl - line - (ptrdiff_t) n - 1) : strlen(line + n + 1);
                                        if (len >= sizeof(value[i]))
                                                len = sizeof(value[i]) - 1;
                                        memcpy(value[i], line + n + 1, len);
                                        value[i][len] = '\0';
                                        return value[i];
                                }
                        return NULL;
                }
                line = nl ? nl + 1 : NULL;
        }
        return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const uint8_t *nul = memchr(data, '\0', size);
        size_t env_len = nul ? (size_t) (nul - data) : size;
        struct env e = { .text = strndup((const char *) data, env_len) };
        struct cni_request r = { .command = _CNI_COMMAND_INVALID };
        struct cni_error err = {};

        if (!e.text)
                return 0;
        if (cni_request_from_env(&r, env_get, &e, &err) >= 0 && nul) {
                const char *in = (const char *) nul + 1;
                size_t in_size = size - env_len - 1;
                char *body = NULL;
                /* What the plugin sends (the config as it came, when json-text takes it) the agent
                 * parses, with the verdict the plugin's own checks gave. */
                if (cni_json_parse_config(&r, in, in_size, &err) >= 0 &&
                    cni_request_body(&r, in, in_size, &body) >= 0) {
                        struct cni_request back = { .command = _CNI_COMMAND_INVALID };
                        struct cni_error back_err = {};
                        if (cni_json_parse_request(&back, body, strlen(body), &back_err) < 0)
                                abort();
                        cni_error_done(&back_err);
                        cni_json_request_done(&back);
                }
                free(body);
        }
        cJSON *ej = cni_json_error(&err, r.cni_version);
        cJSON_Delete(ej);
        cni_error_done(&err);
        cni_json_request_done(&r);
        free(e.text);
        return 0;
}
