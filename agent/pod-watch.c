/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "json.h"
#include "pod-watch.h"

struct pod_stream {
        struct pod_watch_hub *hub;
        struct api_request *req;
        struct pod_stream *prev, *next;
};

struct pod_watch_hub {
        struct pod_store *store;
        struct pod_stream *streams;
        unsigned n_streams;
};

static void stream_unlink(struct pod_stream *s) {
        struct pod_watch_hub *h = s->hub;
        if (s->prev)
                s->prev->next = s->next;
        else
                h->streams = s->next;
        if (s->next)
                s->next->prev = s->prev;
        h->n_streams--;
        free(s);
}

/* One NDJSON line. A client too slow to take its lines (the API caps what it queues) loses
 * its stream rather than our memory; it reconnects and gets the full state again. */
static int stream_send(struct pod_stream *s, const char *type, const struct pod *p) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        _cleanup_free_ char *text = NULL;

        if (!o || !cJSON_AddStringToObject(o, "type", type) ||
            !cJSON_AddNumberToObject(o, "generation", (double) pod_store_generation(s->hub->store)))
                return -ENOMEM;
        if (p && !cJSON_AddItemToObject(o, "pod", pod_to_json(p)))
                return -ENOMEM;
        text = cJSON_PrintUnformatted(o);
        if (!text)
                return -ENOMEM;
        size_t n = strlen(text);
        text[n] = '\n'; /* replaces the NUL: the line ends here */
        return api_stream_write(s->req, text, n + 1);
}

static void stream_close(struct pod_stream *s) {
        (void) api_stream_end(s->req);
        stream_unlink(s);
}

static void on_pod_changed(struct pod_store *store, const struct pod *old, const struct pod *new, void *userdata) {
        struct pod_watch_hub *h = userdata;
        const char *type = !old ? "ADDED" : !new ? "DELETED" : "MODIFIED";

        for (struct pod_stream *s = h->streams, *next; s; s = next) {
                next = s->next;
                if (stream_send(s, type, new ? new : old) < 0)
                        stream_close(s);
        }
}

static void on_stream_abort(struct api_request *req, void *userdata) {
        stream_unlink(userdata);
}

int pod_watch_hub_new(struct pod_store *store, struct pod_watch_hub **ret) {
        struct pod_watch_hub *h = calloc(1, sizeof(*h));
        int r;

        if (!h)
                return -ENOMEM;
        h->store = store;
        r = pod_store_add_observer(store, on_pod_changed, h);
        if (r < 0) {
                free(h);
                return r;
        }
        *ret = h;
        return 0;
}

struct pod_watch_hub *pod_watch_hub_free(struct pod_watch_hub *h) {
        if (!h)
                return NULL;
        while (h->streams)
                stream_close(h->streams);
        pod_store_remove_observer(h->store, on_pod_changed, h);
        free(h);
        return NULL;
}

static int stream_replay(struct pod_stream *s) {
        _cleanup_free_ struct pod **pods = NULL;
        size_t n = 0;
        int r = pod_store_list(s->hub->store, &pods, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                r = stream_send(s, "ADDED", pods[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int pod_watch_hub_serve(struct pod_watch_hub *h, struct api_request *req) {
        const char *since = api_request_query(req, "resourceVersion");
        struct pod_stream *s;
        char current[32];
        int r;

        snprintf(current, sizeof(current), "%" PRIu64, pod_store_generation(h->store));
        s = calloc(1, sizeof(*s));
        if (!s)
                return api_reply_error(req, 500, "out of memory");
        *s = (struct pod_stream) { .hub = h, .req = req, .next = h->streams };
        r = api_reply_stream(req, 200, "application/x-ndjson", on_stream_abort, s);
        if (r < 0) {
                free(s);
                return r;
        }
        if (h->streams)
                h->streams->prev = s;
        h->streams = s;
        h->n_streams++;

        r = 0;
        if (!since || !streq(since, current))
                r = stream_replay(s);
        if (r >= 0)
                r = stream_send(s, "SYNCED", NULL);
        if (r < 0)
                stream_close(s);
        return 0;
}

unsigned pod_watch_hub_streams(const struct pod_watch_hub *h) {
        return h->n_streams;
}
