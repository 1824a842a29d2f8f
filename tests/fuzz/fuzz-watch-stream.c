/* SPDX-License-Identifier: MIT */
/* Fuzzes the watch event decoder (modules/apiserver/watch-stream.c) with the bytes of a watch
 * response, delivered in two pieces split where the first input byte says, and on every
 * ADDED/MODIFIED/DELETED object both sinks a reflector feeds: the pod parser
 * (agent/pods/pod-parse.c) and the Node table (modules/apiserver/node-table.c), whose sorted
 * order is checked after every event.
 *
 * Input: byte 0 = split position (scaled to the rest), byte 1 = max_line choice, then the stream. */

#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "node-table.h"
#include "pods.h"
#include "watch-stream.h"

struct fuzz_state {
        unsigned n;
        struct node_table nodes;
};

static void node_table_check_sorted(const struct node_table *t) {
        for (size_t i = 1; i < t->n_nodes; i++)
                if (strcmp(t->nodes[i - 1].name, t->nodes[i].name) >= 0)
                        abort();
}

static int on_event(const struct watch_event *ev, void *userdata) {
        struct fuzz_state *st = userdata;
        unsigned *n = &st->n;

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
        if (ev->type == WATCH_ADDED || ev->type == WATCH_MODIFIED || ev->type == WATCH_DELETED) {
                const char *kind = NULL;
                (void) st->nodes.sink.event(&st->nodes, ev->type, ev->object, &kind);
                node_table_check_sorted(&st->nodes);
        }
        /* Stop now and then, as a callback that fails would. */
        return *n >= 64 ? -ECANCELED : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const size_t max_lines[] = { 16, 256, 4096, 1 << 20 };
        struct watch_stream ws;
        struct fuzz_state st = {};
        int r;

        if (size < 2)
                return 0;
        size_t split = (size_t) data[0] * (size - 2) / 255;
        size_t max_line = max_lines[data[1] % ELEMENTSOF(max_lines)];
        const char *stream = (const char *) data + 2;
        size -= 2;

        if (node_table_init(&st.nodes, NULL, NULL) < 0)
                return 0;
        watch_stream_init(&ws, max_line);
        r = watch_stream_feed(&ws, stream, split, on_event, &st);
        if (r >= 0)
                (void) watch_stream_feed(&ws, stream + split, size - split, on_event, &st);
        (void) watch_stream_partial(&ws);
        watch_stream_done(&ws);
        node_table_done(&st.nodes);
        return 0;
}
