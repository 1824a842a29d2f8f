/* SPDX-License-Identifier: MIT */
#pragma once

/* The apiserver module's writes (a pod's pinion.io/ready condition, Events), one at a time, each
 * through the module's one token bucket (shared with the pod and Node watches, so every request
 * counts against one qps), in the order they were wanted.
 *
 * A client queues a key, not a request: the request is built when its turn comes, from the
 * client's state at that moment. So a pod whose condition changes three times while the
 * apiserver is away costs one write of its latest state, and the queue holds at most one entry
 * per key. A write that fails for the server's sake (no connection, a timeout, 5xx, 429) stays at
 * the head of the queue and the whole queue backs off with jitter (the reflector's policy,
 * Retry-After a floor), so a fleet whose apiserver comes back resumes spread out rather than
 * together. Any other answer (2xx, 404, 409, 403, 422) is final and goes to the client. */

#include <stdbool.h>
#include <stddef.h>

#include <systemd/sd-event.h>

#include "backoff.h"
#include "http.h"
#include "kube-endpoint.h"
#include "metrics.h"
#include "token-bucket.h"

struct kube_writer;

struct kube_write_request {
        const char *method;       /* "PATCH", "POST" (static strings) */
        const char *verb;         /* for metrics: "patch", "create" */
        const char *content_type; /* static */
        char *path;               /* taken by the writer */
        char *body;               /* taken by the writer */
};

struct kube_write_client {
        const char *resource; /* "pods/status", "events": metrics and logs */
        /* Builds the request for key now: 0 and *ret filled, or -ENOENT when nothing needs writing
         * any more (the key is dropped), or another -errno (the key is dropped, logged). */
        int (*build)(void *userdata, const char *key, struct kube_write_request *ret);
        /* A final answer for key: resp is the apiserver's (status 2xx, 4xx but 429). Not called for
         * a key dropped by build or forgotten. */
        void (*done)(void *userdata, const char *key, const struct http_response *resp);
        void *userdata;
};

/* Called when kube_writer_error() changes. */
typedef void (*kube_writer_changed_fn)(struct kube_writer *w, void *userdata);

int kube_writer_new(sd_event *event, struct http_client *http, struct kube_endpoint *endpoint,
                    struct token_bucket *bucket, const struct backoff_config *backoff,
                    struct metric_family *requests, kube_writer_changed_fn changed, void *userdata,
                    struct kube_writer **ret);
/* Cancels the write in flight; no callback runs. */
struct kube_writer *kube_writer_free(struct kube_writer *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct kube_writer *, kube_writer_free);

/* Queues key for client unless it is queued already (then nothing changes: the write, when it
 * goes, carries the newest state). A key in flight is queued again behind the others. */
int kube_writer_want(struct kube_writer *w, const struct kube_write_client *client, const char *key);
/* Drops a queued key (nothing to write any more, or a pod that is gone); one in flight still
 * gets its done callback (the client looks the key up and may find nothing). */
void kube_writer_forget(struct kube_writer *w, const struct kube_write_client *client, const char *key);
/* Drops every key of client (it is going): one in flight finishes without its callback. */
void kube_writer_forget_client(struct kube_writer *w, const struct kube_write_client *client);
void kube_writer_set_backoff(struct kube_writer *w, const struct backoff_config *backoff);

/* An answer for a log line or a status: "HTTP 403: <the Status object's message>" (the body's
 * first 200 bytes when it is no Status). NULL on ENOMEM. */
char *kube_writer_describe_answer(const struct http_response *resp);

size_t kube_writer_queued(const struct kube_writer *w); /* keys waiting, the one in flight included */
/* Why writes do not go through: the server's failure while the queue backs off, else the last
 * refusal (403: RBAC or an admission policy; 422) until a write of that resource succeeds; NULL
 * when they do. */
const char *kube_writer_error(const struct kube_writer *w);
uint64_t kube_writer_sent(const struct kube_writer *w);
