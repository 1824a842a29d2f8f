/* SPDX-License-Identifier: MIT */
/* The one rule for the format versions of the files under state-dir (state-version.h). */

#include <stdio.h>
#include <stdlib.h>

#include "state-version.h"

static int classify(unsigned long long v, unsigned current, unsigned *ret_version) {
        if (v < 1 || v > 1000000)
                return -EBADMSG;
        *ret_version = (unsigned) v;
        return v > current ? STATE_VERSION_ERR_NEWER : 0;
}

int state_version_json(const cJSON *root, unsigned current, unsigned *ret_version) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "version");

        if (!v) {
                *ret_version = STATE_VERSION_UNVERSIONED;
                return 0;
        }
        if (!cJSON_IsNumber(v) || v->valuedouble != (double) (unsigned long long) v->valuedouble)
                return -EBADMSG;
        return classify((unsigned long long) v->valuedouble, current, ret_version);
}

int state_version_json_add(cJSON *o, unsigned version) {
        return cJSON_AddNumberToObject(o, "version", version) ? 0 : -ENOMEM;
}

int state_version_text(const char *text, unsigned current, unsigned *ret_version, const char **ret_body) {
        unsigned long long v = 0;
        const char *p = text;

        if (p[0] != 'v' || p[1] < '0' || p[1] > '9') {
                *ret_version = STATE_VERSION_UNVERSIONED;
                if (ret_body)
                        *ret_body = text;
                return 0;
        }
        for (p++; *p >= '0' && *p <= '9'; p++) {
                v = v * 10 + (unsigned) (*p - '0');
                if (v > 1000000)
                        return -EBADMSG;
        }
        if (*p != ' ' && *p != '\n')
                return -EBADMSG;
        int r = classify(v, current, ret_version);
        if (r >= 0 && ret_body)
                *ret_body = p + 1;
        return r;
}

int state_version_text_prefix(char *buf, size_t size, unsigned version) {
        return snprintf(buf, size, "v%u ", version);
}

char *state_version_describe(const char *path, unsigned found, unsigned current) {
        char *s = NULL;

        if (asprintf(&s, "%s is in state format version %u, newer than this piniond reads (up to %u): "
                     "refusing to start, the file is left as it is (run the release that wrote it, or move "
                     "the file away to start without it)", path, found, current) < 0)
                return NULL;
        return s;
}
