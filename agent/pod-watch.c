/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "json.h"
#include "pod-watch.h"
#include "waitq.h"

struct pod_watch_hub {
        struct pod_store *store;
        struct waitq *streams; /* one key: every stream watches every pod */
};

/* One NDJSON line; *ret is newline-terminated, not NUL-terminated. */
static int event_line(struct pod_watch_hub *h, const char *type, const struct pod *p, char **ret, size_t *ret_size) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();

        if (!o || !cJSON_AddStringToObject(o, "type", type) ||
            !cJSON_AddNumberToObject(o, "generation", (double) pod_store_generation(h->store)))
                return -ENOMEM;
        if (p && !cJSON_AddItemToObject(o, "pod", pod_to_json(p)))
                return -ENOMEM;
        char *text = cJSON_PrintUnformatted(o);
        if (!text)
                return -ENOMEM;
        size_t n = strlen(text);
        text[n] = '\n'; /* replaces the NUL: the line ends here */
        *ret = text;
        *ret_size = n + 1;
        return 0;
}

/* A client too slow to take its lines (the API caps what it queues) loses its stream rather
 * than our memory; it reconnects and gets the full state again. On any error the stream is
 * ended and s is gone. */
static int stream_send(struct pod_watch_hub *h, struct waiter *s, const char *type, const struct pod *p) {
        _cleanup_free_ char *line = NULL;
        size_t n;
        int r = event_line(h, type, p, &line, &n);
        if (r < 0) {
                waitq_stream_end(s);
                return r;
        }
        return waitq_stream_write(s, line, n);
}

static void on_pod_changed(struct pod_store *store, const struct pod *old, const struct pod *new, void *userdata) {
        struct pod_watch_hub *h = userdata;
        const char *type = !old ? "ADDED" : !new ? "DELETED" : "MODIFIED";
        _cleanup_free_ char *line = NULL;
        size_t n;

        if (waitq_count(h->streams, NULL) == 0)
                return;
        if (event_line(h, type, new ? new : old, &line, &n) < 0)
                waitq_fail(h->streams, NULL, 500, "out of memory"); /* a stream that missed an event is wrong */
        else
                waitq_broadcast(h->streams, NULL, line, n);
}

/* Streams only: nothing is ever woken or expires. */
static int on_wake(struct api_request *req, const char *key, uint64_t cookie, void *userdata) {
        return 0;
}
static void on_expire(struct api_request *req, const char *key, usec_t timeout, void *userdata) {
}

int pod_watch_hub_new(sd_event *e, struct pod_store *store, struct pod_watch_hub **ret) {
        static const struct waitq_ops ops = { .what = "pods", .wake = on_wake, .expire = on_expire };
        /* As many as the API has connections: the streams are the clients' own way to watch. */
        static const struct waitq_limits limits = { .per_key = 1000, .total = 1000 };
        struct pod_watch_hub *h = calloc(1, sizeof(*h));
        int r;

        if (!h)
                return -ENOMEM;
        h->store = store;
        r = waitq_new(e, &ops, &limits, h, &h->streams);
        if (r >= 0)
                r = pod_store_add_observer(store, on_pod_changed, h);
        if (r < 0) {
                waitq_free(h->streams);
                free(h);
                return r;
        }
        *ret = h;
        return 0;
}

struct pod_watch_hub *pod_watch_hub_free(struct pod_watch_hub *h) {
        if (!h)
                return NULL;
        waitq_free(h->streams);
        pod_store_remove_observer(h->store, on_pod_changed, h);
        free(h);
        return NULL;
}

static int stream_replay(struct pod_watch_hub *h, struct waiter *s) {
        _cleanup_free_ struct pod **pods = NULL;
        size_t n = 0;
        int r = pod_store_list(h->store, &pods, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                r = stream_send(h, s, "ADDED", pods[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int pod_watch_hub_serve(struct pod_watch_hub *h, struct api_request *req) {
        const char *since = api_request_query(req, "resourceVersion");
        struct waiter *s;
        char current[32];
        int r;

        snprintf(current, sizeof(current), "%" PRIu64, pod_store_generation(h->store));
        r = waitq_stream(h->streams, req, "", "application/x-ndjson", &s);
        if (r == -EBUSY)
                return 0; /* refused with 429 */
        if (r < 0)
                return r;
        r = 0;
        if (!since || !streq(since, current))
                r = stream_replay(h, s);
        if (r >= 0)
                (void) stream_send(h, s, "SYNCED", NULL);
        return 0;
}

unsigned pod_watch_hub_streams(const struct pod_watch_hub *h) {
        return waitq_count(h->streams, NULL);
}
