/* SPDX-License-Identifier: MIT */
/* Fuzzes the watch event decoder (modules/apiserver/watch-stream.c) with the bytes of a watch
 * response, delivered in two pieces split where the first input byte says, and the pod parser
 * (agent/pods/pod-parse.c) on every ADDED/MODIFIED object, as the reflector would.
 *
 * Input: byte 0 = split position (scaled to the rest), byte 1 = max_line choice, then the stream. */

#include <stdlib.h>

#include "fuzz.h"
#include "pods.h"
#include "watch-stream.h"

static int on_event(const struct watch_event *ev, void *userdata) {
        unsigned *n = userdata;

        (*n)++;
        (void) watch_stream_event_type_to_string(ev->type);
        if (ev->type == WATCH_ERROR) {
                (void) watch_stream_status_code(ev->object);
                return 0;
        }
        if (ev->type == WATCH_ADDED || ev->type == WATCH_MODIFIED) {
                struct pod *p = NULL;
                char *error = NULL;

                if (pod_parse_json(ev->object, (*n & 1) ? "fuzz-uid" : NULL, &p, &error) >= 0)
                        pod_unref(p);
                free(error);
        }
        /* Stop now and then, as a callback that fails would. */
        return *n >= 64 ? -ECANCELED : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const size_t max_lines[] = { 16, 256, 4096, 1 << 20 };
        struct watch_stream ws;
        unsigned n = 0;
        int r;

        if (size < 2)
                return 0;
        size_t split = (size_t) data[0] * (size - 2) / 255;
        size_t max_line = max_lines[data[1] % ELEMENTSOF(max_lines)];
        const char *stream = (const char *) data + 2;
        size -= 2;

        watch_stream_init(&ws, max_line);
        r = watch_stream_feed(&ws, stream, split, on_event, &n);
        if (r >= 0)
                (void) watch_stream_feed(&ws, stream + split, size - split, on_event, &n);
        (void) watch_stream_partial(&ws);
        watch_stream_done(&ws);
        return 0;
}
