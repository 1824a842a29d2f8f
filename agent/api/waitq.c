/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "waitq.h"

/* How late a deadline may fire: clients wait seconds to minutes, and timers of many waiters
 * that fall into the same window are woken together. */
#define WAITQ_TIMER_ACCURACY (10 * USEC_PER_MSEC)

struct waiter {
        struct waitq *q;
        struct waiter *prev, *next;
        struct api_request *req;
        char *key;
        uint64_t cookie;
        usec_t timeout;
        sd_event_source *timer;
        bool stream;
};

struct waitq {
        sd_event *event;
        const struct waitq_ops *ops;
        struct waitq_limits limits;
        void *userdata;
        struct waiter *waiters;
        unsigned n_waiters;
};

static bool key_matches(const struct waiter *w, const char *key) {
        return !key || streq(w->key, key);
}

static void waiter_link(struct waiter *w) {
        struct waitq *q = w->q;

        w->prev = NULL;
        w->next = q->waiters;
        if (q->waiters)
                q->waiters->prev = w;
        q->waiters = w;
        q->n_waiters++;
}

static void waiter_unlink(struct waiter *w) {
        struct waitq *q = w->q;

        if (w->prev)
                w->prev->next = w->next;
        else
                q->waiters = w->next;
        if (w->next)
                w->next->prev = w->prev;
        w->prev = w->next = NULL;
        q->n_waiters--;
}

static void waiter_destroy(struct waiter *w) {
        sd_event_source_disable_unref(w->timer);
        free(w->key);
        free(w);
}

/* Unlinks and frees w; its request is someone else's business from here on. */
static void waiter_free(struct waiter *w) {
        waiter_unlink(w);
        waiter_destroy(w);
}

int waitq_new(sd_event *e, const struct waitq_ops *ops, const struct waitq_limits *limits, void *userdata,
              struct waitq **ret) {
        struct waitq *q;

        if (!e || !ops || !limits || limits->per_key == 0 || limits->total == 0 || !ret)
                return -EINVAL;
        q = calloc(1, sizeof(*q));
        if (!q)
                return -ENOMEM;
        q->event = sd_event_ref(e);
        q->ops = ops;
        q->limits = *limits;
        q->userdata = userdata;
        *ret = q;
        return 0;
}

struct waitq *waitq_free(struct waitq *q) {
        if (!q)
                return NULL;
        waitq_fail(q, NULL, 503, "the agent is stopping");
        sd_event_unref(q->event);
        free(q);
        return NULL;
}

unsigned waitq_count(const struct waitq *q, const char *key) {
        unsigned n = 0;

        if (!q)
                return 0;
        if (!key)
                return q->n_waiters;
        for (const struct waiter *w = q->waiters; w; w = w->next)
                n += key_matches(w, key);
        return n;
}

/* 0 if one more waiter under key fits, else the 429 is sent and -EBUSY returned. */
static int waitq_admit(struct waitq *q, struct api_request *req, const char *key) {
        if (q->n_waiters >= q->limits.total) {
                (void) api_reply_error(req, 429, "too many requests waiting (at most %u in all); retry later",
                                       q->limits.total);
                return -EBUSY;
        }
        if (waitq_count(q, key) >= q->limits.per_key) {
                (void) api_reply_error(req, 429, "%s %s: too many requests waiting for it (at most %u); retry later",
                                       q->ops->what, key, q->limits.per_key);
                return -EBUSY;
        }
        return 0;
}

static struct waiter *waiter_new(struct waitq *q, struct api_request *req, const char *key) {
        struct waiter *w = calloc(1, sizeof(*w));

        if (!w)
                return NULL;
        w->key = strdup(key);
        if (!w->key) {
                free(w);
                return NULL;
        }
        w->q = q;
        w->req = req;
        return w;
}

static void on_abort(struct api_request *req, void *userdata) {
        waiter_free(userdata);
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        struct waiter *w = userdata;
        struct waitq *q = w->q;
        struct api_request *req = w->req;
        _cleanup_free_ char *key = TAKE_PTR(w->key);
        usec_t timeout = w->timeout;

        waiter_free(w);
        q->ops->expire(req, key, timeout, q->userdata);
        return 0;
}

int waitq_hold(struct waitq *q, struct api_request *req, const char *key, uint64_t cookie, usec_t timeout) {
        struct waiter *w;
        int r;

        if (!q || !req || !key)
                return -EINVAL;
        if (waitq_admit(q, req, key) < 0)
                return 0;
        w = waiter_new(q, req, key);
        if (!w)
                return api_reply_error(req, 500, "out of memory");
        w->cookie = cookie;
        w->timeout = timeout;
        if (timeout > 0) {
                r = sd_event_add_time_relative(q->event, &w->timer, CLOCK_MONOTONIC, timeout, WAITQ_TIMER_ACCURACY,
                                               on_deadline, w);
                if (r < 0) {
                        waiter_destroy(w);
                        return api_reply_error(req, 500, "cannot arm a timer: %s", strerror(-r));
                }
        }
        waiter_link(w);
        api_reply_suspend(req, on_abort, w);
        return 0;
}

void waitq_wake(struct waitq *q, const char *key) {
        if (!q || !key)
                return;
        for (struct waiter *w = q->waiters, *next; w; w = next) {
                next = w->next;
                if (w->stream || !key_matches(w, key))
                        continue;
                /* Out of the queue while its owner decides: what the wake function does to the
                 * queue (counting, failing a key) cannot touch it. Kept: back in at the head,
                 * behind this walk. */
                waiter_unlink(w);
                if (q->ops->wake(w->req, key, w->cookie, q->userdata) > 0)
                        waiter_destroy(w);
                else
                        waiter_link(w);
        }
}

static void waiter_end(struct waiter *w, unsigned status, const char *message) {
        struct api_request *req = w->req;
        bool stream = w->stream;

        waiter_free(w);
        if (stream)
                (void) api_reply_stream_end(req);
        else
                (void) api_reply_error(req, status, "%s", message);
}

void waitq_fail(struct waitq *q, const char *key, unsigned status, const char *format, ...) {
        _cleanup_free_ char *message = NULL;
        va_list ap;

        if (!q || !q->waiters)
                return;
        va_start(ap, format);
        if (vasprintf(&message, format, ap) < 0)
                message = NULL;
        va_end(ap);
        for (struct waiter *w = q->waiters, *next; w; w = next) {
                next = w->next;
                if (key_matches(w, key))
                        waiter_end(w, status, message ? message : "out of memory");
        }
}

int waitq_stream(struct waitq *q, struct api_request *req, const char *key, const char *content_type,
                 struct waiter **ret) {
        struct waiter *w;
        int r;

        if (!q || !req || !key || !ret)
                return -EINVAL;
        if (waitq_admit(q, req, key) < 0)
                return -EBUSY;
        w = waiter_new(q, req, key);
        if (!w) {
                (void) api_reply_error(req, 500, "out of memory");
                return -ENOMEM;
        }
        w->stream = true;
        r = api_reply_stream(req, 200, content_type, on_abort, w);
        if (r < 0) {
                waiter_destroy(w);
                return r;
        }
        waiter_link(w);
        *ret = w;
        return 0;
}

int waitq_stream_write(struct waiter *w, const char *data, size_t size) {
        int r;

        if (!w || !w->stream)
                return -EINVAL;
        r = api_reply_stream_write(w->req, data, size);
        if (r < 0)
                waiter_end(w, 0, NULL);
        return r;
}

void waitq_stream_end(struct waiter *w) {
        if (w && w->stream)
                waiter_end(w, 0, NULL);
}

void waitq_broadcast(struct waitq *q, const char *key, const char *data, size_t size) {
        if (!q)
                return;
        for (struct waiter *w = q->waiters, *next; w; w = next) {
                next = w->next;
                if (w->stream && key_matches(w, key))
                        (void) waitq_stream_write(w, data, size);
        }
}
