/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "watch-stream.h"
#include "string-table.h"

static const char *const watch_stream_event_type_table[_WATCH_EVENT_TYPE_MAX] = {
        [WATCH_ADDED] = "ADDED",       [WATCH_MODIFIED] = "MODIFIED", [WATCH_DELETED] = "DELETED",
        [WATCH_BOOKMARK] = "BOOKMARK", [WATCH_ERROR] = "ERROR",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(watch_stream_event_type, enum watch_event_type);

DEFINE_STRING_TABLE_LOOKUP_FROM_STRING(watch_stream_event_type, enum watch_event_type);

const char *watch_stream_resource_version(const cJSON *object) {
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(object, "metadata");
        const cJSON *rv = cJSON_GetObjectItemCaseSensitive(meta, "resourceVersion");
        return cJSON_IsString(rv) && rv->valuestring[0] ? rv->valuestring : NULL;
}

int watch_stream_status_code(const cJSON *status) {
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(status, "code");
        return cJSON_IsNumber(code) ? code->valueint : 0;
}

void watch_stream_init(struct watch_stream *ws, size_t max_line) {
        *ws = (struct watch_stream) { .max_line = max_line };
}

void watch_stream_done(struct watch_stream *ws) {
        free(ws->line);
        *ws = (struct watch_stream) { .max_line = ws->max_line };
}

bool watch_stream_partial(const struct watch_stream *ws) {
        return ws->len > 0 || ws->skipping;
}

static int decode_line(struct watch_stream *ws, const char *line, size_t len, watch_event_fn fn, void *userdata) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        const cJSON *type, *object;

        /* Blank lines (keep-alive newlines some proxies add) carry nothing. */
        if (strspn(line, " \t\r") == len)
                return 0;
        const char *end = NULL;
        root = cJSON_ParseWithLengthOpts(line, len, &end, false);
        if (!root || !cJSON_IsObject(root))
                return -EBADMSG;
        /* One event per line: anything after the object means the framing is lost. */
        if (strspn(end, " \t\r") != len - (size_t) (end - line))
                return -EBADMSG;
        type = cJSON_GetObjectItemCaseSensitive(root, "type");
        object = cJSON_GetObjectItemCaseSensitive(root, "object");
        if (!cJSON_IsString(type) || !cJSON_IsObject(object))
                return -EBADMSG;
        struct watch_event ev = {
                .type = watch_stream_event_type_from_string(type->valuestring),
                .object = object,
                .resource_version = watch_stream_resource_version(object),
        };
        if (ev.type < 0)
                return -EBADMSG;
        ws->n_events++;
        return fn(&ev, userdata);
}

static int append(struct watch_stream *ws, const char *data, size_t size) {
        if (ws->len + size + 1 > ws->cap) {
                size_t cap = MAX(ws->cap * 2, ws->len + size + 1);
                cap = MAX(cap, (size_t) 4096);
                char *grown = realloc(ws->line, cap);
                if (!grown)
                        return -ENOMEM;
                ws->line = grown;
                ws->cap = cap;
        }
        memcpy(ws->line + ws->len, data, size);
        ws->len += size;
        ws->line[ws->len] = 0;
        return 0;
}

int watch_stream_feed(struct watch_stream *ws, const char *data, size_t size, watch_event_fn fn, void *userdata) {
        while (size > 0) {
                const char *nl = memchr(data, '\n', size);
                size_t take = nl ? (size_t) (nl - data) : size;
                int r;

                if (ws->skipping) {
                        /* The rest of an oversized line: drop it. */
                } else if (ws->len + take > ws->max_line) {
                        ws->skipping = true;
                        ws->n_oversized++;
                        ws->len = 0;
                } else {
                        r = append(ws, data, take);
                        if (r < 0)
                                return r;
                }
                data += take;
                size -= take;
                if (!nl)
                        break;
                data++; /* the newline */
                size--;

                if (ws->skipping) {
                        ws->skipping = false;
                        continue;
                }
                size_t len = ws->len;
                ws->len = 0;
                r = decode_line(ws, ws->line ? ws->line : "", len, fn, userdata);
                if (r < 0)
                        return r;
        }
        return 0;
}
