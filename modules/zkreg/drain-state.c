/* SPDX-License-Identifier: MIT */
/* The drain file (see drain-state.h). */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "drain-state.h"
#include "fs.h"
#include "json.h"
#include "state-version.h"

/* Large enough for any version of the file we would write; a bigger one is not ours. */
#define DRAIN_STATE_MAX 4096

static int drain_error(char **ret_error, int error, const char *fmt, ...) {
        va_list ap;

        if (ret_error) {
                va_start(ap, fmt);
                if (vasprintf(ret_error, fmt, ap) < 0)
                        *ret_error = NULL;
                va_end(ap);
        }
        return error;
}

static int parse_rfc3339(const char *s, usec_t *ret) {
        struct tm tm = {};
        const char *end;
        time_t t;

        end = s ? strptime(s, "%Y-%m-%dT%H:%M:%SZ", &tm) : NULL;
        if (!end || *end)
                return -EINVAL;
        t = timegm(&tm);
        if (t <= 0)
                return -EINVAL;
        *ret = (usec_t) t * USEC_PER_SEC;
        return 0;
}

int drain_state_parse(const char *path, const char *text, struct drain_state *ret, char **ret_error) {
        _cleanup_(cJSON_Deletep) cJSON *root = cJSON_Parse(text);
        const cJSON *d, *since;
        struct drain_state s = {};
        unsigned version;
        int r;

        if (!cJSON_IsObject(root))
                return drain_error(ret_error, -EINVAL, "not a JSON object");
        r = state_version_json(root, DRAIN_STATE_VERSION, &version);
        if (r == STATE_VERSION_ERR_NEWER) {
                if (ret_error)
                        *ret_error = state_version_describe(path, version, DRAIN_STATE_VERSION);
                return r;
        }
        if (r < 0)
                return drain_error(ret_error, -EINVAL, "no valid \"version\"");
        d = cJSON_GetObjectItemCaseSensitive(root, "drained");
        if (!cJSON_IsBool(d))
                return drain_error(ret_error, -EINVAL, "\"drained\" is not true or false");
        s.drained = cJSON_IsTrue(d);
        since = cJSON_GetObjectItemCaseSensitive(root, "since");
        if (since && !cJSON_IsNull(since) &&
            (!cJSON_IsString(since) || parse_rfc3339(since->valuestring, &s.since) < 0))
                return drain_error(ret_error, -EINVAL, "\"since\" is not an RFC 3339 UTC time");
        *ret = s;
        return 0;
}

int drain_state_load(const char *path, struct drain_state *ret, char **ret_error) {
        _cleanup_free_ char *text = NULL;
        int r;

        r = fs_read_file_full(path, DRAIN_STATE_MAX, &text, NULL);
        if (r == -ENOENT) {
                *ret = (struct drain_state) {};
                return 0;
        }
        if (r < 0)
                return drain_error(ret_error, r, "cannot read it: %s", strerror(-r));
        return drain_state_parse(path, text, ret, ret_error);
}

char *drain_state_format(const struct drain_state *s) {
        _cleanup_(cJSON_Deletep) cJSON *root = cJSON_CreateObject();
        char *text, *line;

        if (!root || state_version_json_add(root, DRAIN_STATE_VERSION) < 0 ||
            !cJSON_AddBoolToObject(root, "drained", s->drained) || !json_add_time(root, "since", s->since))
                return NULL;
        text = cJSON_PrintUnformatted(root);
        if (!text)
                return NULL;
        if (asprintf(&line, "%s\n", text) < 0)
                line = NULL;
        cJSON_free(text);
        return line;
}

int drain_state_save(const char *path, const struct drain_state *s) {
        _cleanup_free_ char *text = drain_state_format(s), *dir = NULL;
        int r;

        if (!text)
                return -ENOMEM;
        r = fs_path_split(path, &dir, NULL);
        if (r < 0)
                return r;
        r = fs_mkdir_p(dir, 0700);
        if (r < 0)
                return r;
        return fs_write_file_atomic(path, text, strlen(text), 0600, (uid_t) -1, (gid_t) -1);
}
