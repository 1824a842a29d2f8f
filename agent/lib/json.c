/* SPDX-License-Identifier: MIT */
#include <stdio.h>

#include "json.h"

cJSON *json_add_string_or_null(cJSON *o, const char *key, const char *value) {
        if (!value)
                return cJSON_AddNullToObject(o, key);
        return cJSON_AddStringToObject(o, key, value);
}

int json_format_rfc3339(usec_t t, char *buf, size_t size) {
        time_t sec = (time_t) (t / USEC_PER_SEC);
        struct tm tm;

        if (!gmtime_r(&sec, &tm))
                return -EINVAL;
        if (strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                return -ENOBUFS;
        return 0;
}

cJSON *json_add_time(cJSON *o, const char *key, usec_t realtime) {
        char buf[32];

        if (realtime == 0 || json_format_rfc3339(realtime, buf, sizeof(buf)) < 0)
                return cJSON_AddNullToObject(o, key);
        return cJSON_AddStringToObject(o, key, buf);
}
