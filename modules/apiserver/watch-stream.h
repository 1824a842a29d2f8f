/* SPDX-License-Identifier: MIT */
#pragma once

/* Decodes a Kubernetes watch response as it arrives: newline-delimited JSON events
 * {"type": "ADDED|MODIFIED|DELETED|BOOKMARK|ERROR", "object": {...}}. Bytes are fed in whatever
 * pieces the transport delivers; only the current line is held, never the whole response.
 * A line longer than max_line is skipped (counted), so one oversized object cannot exhaust
 * memory or stop the stream; a line that is not a well-formed event ends decoding with
 * -EBADMSG (a corrupted stream cannot be trusted past that point). */

#include <stddef.h>

#include <cjson/cJSON.h>

#include "macro.h"

enum watch_event_type {
        WATCH_ADDED,
        WATCH_MODIFIED,
        WATCH_DELETED,
        WATCH_BOOKMARK,
        WATCH_ERROR,
        _WATCH_EVENT_TYPE_MAX,
        _WATCH_EVENT_TYPE_INVALID = -EINVAL,
};

struct watch_event {
        enum watch_event_type type;
        const cJSON *object;          /* valid during the callback */
        const char *resource_version; /* object.metadata.resourceVersion, or NULL */
};

/* Returns 0 to go on, negative to stop decoding (watch_stream_feed returns it). */
typedef int (*watch_event_fn)(const struct watch_event *ev, void *userdata);

struct watch_stream {
        char *line;
        size_t len, cap;
        size_t max_line;
        bool skipping;      /* inside an oversized line: drop bytes up to the next newline */
        unsigned n_events;
        unsigned n_oversized;
};

void watch_stream_init(struct watch_stream *ws, size_t max_line);
void watch_stream_done(struct watch_stream *ws);
/* Feeds bytes; calls fn for each complete event. */
int watch_stream_feed(struct watch_stream *ws, const char *data, size_t size, watch_event_fn fn, void *userdata);
/* True if a partial line is pending (a stream that ends here was cut short). */
bool watch_stream_partial(const struct watch_stream *ws);

const char *watch_stream_event_type_to_string(enum watch_event_type t);
enum watch_event_type watch_stream_event_type_from_string(const char *s);
/* For an ERROR event's Status object: its "code" (e.g. 410), or 0. */
int watch_stream_status_code(const cJSON *status);
/* metadata.resourceVersion of any object, or NULL. */
const char *watch_stream_resource_version(const cJSON *object);
