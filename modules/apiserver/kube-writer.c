/* SPDX-License-Identifier: MIT */
/* The apiserver module's write queue (kube-writer.h): keys in order, one request in flight, each
 * through the shared token bucket; server-side failures back the whole queue off with jitter. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "kube-writer.h"
#include "log.h"
#include "timer.h"

#define MODULE "apiserver"
#define WRITE_TIMEOUT_MS 10000
#define MAX_RESPONSE (1u << 20) /* a Pod or an Event answers; more is not one */

struct queued {
        const struct kube_write_client *client;
        char *key;
};

struct kube_writer {
        sd_event *event;
        struct http_client *http;
        struct kube_endpoint *endpoint; /* the module's */
        struct token_bucket *bucket;    /* the module's */
        struct metric_family *requests; /* pinion_apiserver_requests_total{resource,verb,code} */
        struct backoff backoff;

        struct queued *queue; /* [0] is next (or in flight) */
        size_t n_queue, n_alloc;

        struct http_transfer *transfer; /* the write in flight, for queue[0] */
        struct curl_slist *headers;     /* its headers: curl reads them until it is done */
        const char *transfer_verb;
        /* The client's resource (a static string): the head's client may be gone by the answer. */
        const char *transfer_resource;
        bool head_forgotten;            /* queue[0] was forgotten while in flight */
        sd_event_source *timer;
        bool backing_off;
        char *error;   /* the server's failure, while backing off */
        char *refusal; /* the last refusal, until a write of refusal_resource succeeds */
        const char *refusal_resource;
        kube_writer_changed_fn changed;
        void *userdata;
        uint64_t n_sent;
};

static void writer_kick(struct kube_writer *w);

static void queued_done(struct queued *q) {
        free(q->key);
        q->key = NULL;
}

static void queue_remove(struct kube_writer *w, size_t i) {
        queued_done(&w->queue[i]);
        memmove(&w->queue[i], &w->queue[i + 1], (w->n_queue - i - 1) * sizeof(struct queued));
        w->n_queue--;
}

static ssize_t queue_find(const struct kube_writer *w, const struct kube_write_client *client, const char *key,
                          size_t from) {
        for (size_t i = from; i < w->n_queue; i++)
                if (w->queue[i].client == client && streq(w->queue[i].key, key))
                        return (ssize_t) i;
        return -1;
}

int kube_writer_new(sd_event *event, struct http_client *http, struct kube_endpoint *endpoint,
                    struct token_bucket *bucket, const struct backoff_config *backoff,
                    struct metric_family *requests, kube_writer_changed_fn changed, void *userdata,
                    struct kube_writer **ret) {
        struct kube_writer *w;

        if (!event || !http || !endpoint || !bucket || !backoff || !ret)
                return -EINVAL;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->event = sd_event_ref(event);
        w->http = http;
        w->endpoint = endpoint;
        w->bucket = bucket;
        w->requests = requests;
        w->changed = changed;
        w->userdata = userdata;
        backoff_init(&w->backoff, backoff, 0);
        *ret = w;
        return 0;
}

struct kube_writer *kube_writer_free(struct kube_writer *w) {
        if (!w)
                return NULL;
        http_transfer_cancel(w->transfer);
        curl_slist_free_all(w->headers);
        sd_event_source_disable_unref(w->timer);
        for (size_t i = 0; i < w->n_queue; i++)
                queued_done(&w->queue[i]);
        free(w->queue);
        free(w->error);
        free(w->refusal);
        sd_event_unref(w->event);
        free(w);
        return NULL;
}

void kube_writer_set_backoff(struct kube_writer *w, const struct backoff_config *backoff) {
        if (w)
                w->backoff.config = *backoff;
}

int kube_writer_want(struct kube_writer *w, const struct kube_write_client *client, const char *key) {
        if (!w || !client || !key)
                return -EINVAL;
        /* The head in flight carries the state it was built from: a newer one needs a new turn. */
        if (queue_find(w, client, key, w->transfer ? 1 : 0) >= 0)
                return 0;
        if (w->n_queue == w->n_alloc) {
                size_t n = MAX(w->n_alloc * 2, (size_t) 16);
                struct queued *grown = realloc(w->queue, n * sizeof(struct queued));
                if (!grown)
                        return -ENOMEM;
                w->queue = grown;
                w->n_alloc = n;
        }
        char *copy = strdup(key);
        if (!copy)
                return -ENOMEM;
        w->queue[w->n_queue++] = (struct queued) { .client = client, .key = copy };
        writer_kick(w);
        return 0;
}

void kube_writer_forget(struct kube_writer *w, const struct kube_write_client *client, const char *key) {
        ssize_t i;

        if (!w)
                return;
        while ((i = queue_find(w, client, key, w->transfer ? 1 : 0)) >= 0)
                queue_remove(w, (size_t) i);
}

void kube_writer_forget_client(struct kube_writer *w, const struct kube_write_client *client) {
        if (!w)
                return;
        if (w->transfer && w->n_queue > 0 && w->queue[0].client == client) {
                w->head_forgotten = true;
                w->queue[0].client = NULL; /* it is going: its answer goes nowhere */
        }
        for (size_t i = w->transfer ? 1 : 0; i < w->n_queue;)
                if (w->queue[i].client == client)
                        queue_remove(w, i);
                else
                        i++;
}

size_t kube_writer_queued(const struct kube_writer *w) {
        return w ? w->n_queue : 0;
}

const char *kube_writer_error(const struct kube_writer *w) {
        return w ? w->error ?: w->refusal : NULL;
}

char *kube_writer_describe_answer(const struct http_response *resp) {
        _cleanup_(cJSON_Deletep) cJSON *status = resp->body ? cJSON_Parse(resp->body) : NULL;
        const cJSON *message = cJSON_GetObjectItemCaseSensitive(status, "message");
        char *s;

        if (cJSON_IsString(message) && asprintf(&s, "HTTP %ld: %.300s", resp->status, message->valuestring) >= 0)
                return s;
        if (asprintf(&s, "HTTP %ld%s%.200s", resp->status, resp->body ? ": " : "", strempty(resp->body)) < 0)
                return NULL;
        return s;
}

static void writer_changed(struct kube_writer *w) {
        if (w->changed)
                w->changed(w, w->userdata);
}

/* A final answer other than success: 403 and 422 say the agent may not or cannot write this,
 * which only an operator fixes; 404 and 409 are about one pod or Event. */
static void note_answer(struct kube_writer *w, const char *resource, const struct http_response *resp) {
        if (resp->status >= 200 && resp->status < 300) {
                if (w->refusal && streq(w->refusal_resource, resource)) {
                        w->refusal = mfree(w->refusal);
                        writer_changed(w);
                }
                return;
        }
        if (resp->status == 404 || resp->status == 409)
                return;
        _cleanup_free_ char *answer = kube_writer_describe_answer(resp);
        free(w->refusal);
        if (asprintf(&w->refusal, "writing %s: %s", resource, strempty(answer)) < 0)
                w->refusal = NULL;
        w->refusal_resource = resource;
        writer_changed(w);
}

uint64_t kube_writer_sent(const struct kube_writer *w) {
        return w ? w->n_sent : 0;
}

/* ---- sending ---- */

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata);

static void writer_arm(struct kube_writer *w, usec_t delay) {
        int r = timer_arm(w->event, &w->timer, CLOCK_MONOTONIC, now_usec(CLOCK_MONOTONIC) + delay, USEC_PER_MSEC, false,
                          on_timer, w);
        if (r < 0)
                log_module_error_errno(MODULE, r, "Cannot arm the write timer, writes to the apiserver stop: %m");
}

static bool writer_waiting(const struct kube_writer *w) {
        int enabled = SD_EVENT_OFF;
        return w->timer && sd_event_source_get_enabled(w->timer, &enabled) >= 0 && enabled != SD_EVENT_OFF;
}

static void count_request(struct kube_writer *w, const char *resource, const char *verb,
                          const struct http_response *resp) {
        char code[16];

        if (resp->error < 0 && resp->status == 0)
                snprintf(code, sizeof(code), "error");
        else
                snprintf(code, sizeof(code), "%ld", resp->status);
        (void) metric_inc(w->requests, resource, verb, code);
}

static bool server_failure(const struct http_response *resp) {
        return resp->error < 0 || resp->status == 0 || resp->status == 429 || resp->status >= 500;
}

static void writer_failed(struct kube_writer *w, const struct queued *q, const struct http_response *resp) {
        _cleanup_free_ char *why = NULL;
        usec_t delay = backoff_next(&w->backoff, now_usec(CLOCK_MONOTONIC), http_response_retry_after(resp));
        int r;

        if (resp->status > 0)
                r = asprintf(&why, "%s write for %s: HTTP %ld", w->transfer_resource, q->key, resp->status);
        else
                r = asprintf(&why, "%s write for %s: %s", w->transfer_resource, q->key,
                             resp->error_message ?: strerror(-resp->error));
        if (r < 0)
                why = NULL;
        /* One line when the apiserver goes away, not one per retry. */
        if (!w->backing_off)
                log_module_warning(MODULE, "%s; writes wait, retrying in %.1fs", strempty(why),
                                   (double) delay / USEC_PER_SEC);
        w->backing_off = true;
        free(w->error);
        w->error = TAKE_PTR(why);
        writer_arm(w, delay);
        writer_changed(w);
}

static void on_write_done(struct http_client *c, const struct http_response *resp, void *userdata) {
        struct kube_writer *w = userdata;
        struct queued head = w->queue[0];
        bool forgotten = w->head_forgotten;

        w->transfer = NULL;
        w->head_forgotten = false;
        curl_slist_free_all(w->headers);
        w->headers = NULL;
        count_request(w, w->transfer_resource, w->transfer_verb, resp);
        if (server_failure(resp)) {
                if (!forgotten) {
                        writer_failed(w, &head, resp);
                        return;
                }
                /* Nobody wants it any more: dropped; the next write finds the server as it is. */
        } else if (w->backing_off) {
                log_module_info(MODULE, "Writes to the apiserver go through again");
                w->backing_off = false;
                w->error = mfree(w->error);
                writer_changed(w);
        }
        if (!forgotten && !server_failure(resp)) {
                note_answer(w, w->transfer_resource, resp);
                w->n_sent++;
        }
        /* Off the queue before the callback, which may want the same key again. */
        w->queue[0].key = NULL;
        queue_remove(w, 0);
        if (!forgotten)
                head.client->done(head.client->userdata, head.key, resp);
        free(head.key);
        writer_kick(w);
}

static int writer_submit(struct kube_writer *w, struct kube_write_request *req) {
        _cleanup_free_ char *path = TAKE_PTR(req->path), *body = TAKE_PTR(req->body), *header = NULL;
        struct curl_slist *headers = NULL;
        CURL *easy = NULL;
        int r;

        r = kube_endpoint_request(w->endpoint, path, WRITE_TIMEOUT_MS, &easy);
        if (r < 0)
                return r;
        if (asprintf(&header, "Content-Type: %s", req->content_type) < 0 ||
            !(headers = curl_slist_append(NULL, header)) ||
            !(headers = curl_slist_append(headers, "Accept: application/json")) ||
            curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, req->method) != CURLE_OK ||
            curl_easy_setopt(easy, CURLOPT_COPYPOSTFIELDS, body) != CURLE_OK ||
            curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers) != CURLE_OK) {
                curl_slist_free_all(headers);
                curl_easy_cleanup(easy);
                return -ENOMEM;
        }
        r = http_client_submit(w->http, easy, MAX_RESPONSE, on_write_done, w, &w->transfer);
        if (r < 0) {
                curl_slist_free_all(headers);
                return r;
        }
        w->headers = headers;
        w->transfer_verb = req->verb;
        w->transfer_resource = w->queue[0].client->resource;
        return 0;
}

/* The head's turn: a token, then its request. */
static void writer_send_head(struct kube_writer *w) {
        while (w->n_queue > 0 && !w->transfer) {
                struct queued *q = &w->queue[0];
                struct kube_write_request req = {};
                usec_t wait;
                int r;

                if (!token_bucket_try_take(w->bucket, now_usec(CLOCK_MONOTONIC), &wait)) {
                        writer_arm(w, MAX(wait, USEC_PER_MSEC));
                        return;
                }
                r = q->client->build(q->client->userdata, q->key, &req);
                if (r >= 0)
                        r = writer_submit(w, &req);
                else {
                        free(req.path);
                        free(req.body);
                }
                if (r >= 0)
                        return;
                if (r != -ENOENT)
                        log_module_warning_errno(MODULE, r, "Cannot write %s for %s, dropping it: %m",
                                                 q->client->resource, q->key);
                queue_remove(w, 0);
        }
}

static void writer_kick(struct kube_writer *w) {
        if (w->transfer || w->n_queue == 0 || writer_waiting(w))
                return;
        writer_send_head(w);
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct kube_writer *w = userdata;
        (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
        writer_kick(w);
        return 0;
}
