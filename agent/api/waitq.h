/* SPDX-License-Identifier: MIT */
#pragma once

/* Requests of the local API held open until something changes, for the modules that answer
 * them: long-polls (?wait=30s: answered when their owner wakes their key, or at their deadline)
 * and streams (NDJSON watches: written to as things change, until the client leaves).
 *
 * Each waiter is kept under a key (a pod's uid, a config's name; "" where there is one thing to
 * wait for). The queue is bounded: a cap on the waiters under one key and on the waiters in all,
 * beyond which a request is refused with 429 and a message naming the cap, so clients that wait
 * can neither grow the agent's memory nor take every connection. A waiter whose client goes
 * away is dropped without a reply; every other waiter is answered exactly once. */

#include <stdint.h>

#include <systemd/sd-event.h>

#include "api.h"
#include "macro.h"

struct waitq;
struct waiter;

struct waitq_limits {
        unsigned per_key; /* waiters under one key */
        unsigned total;   /* waiters in the queue */
};

/* A long-poll's key was woken: reply to req and return 1, or return 0 to keep it waiting (its
 * cookie, given when it was held, says what the client has already seen). It may look at the
 * queue but must not end other waiters. */
typedef int (*waitq_wake_fn)(struct api_request *req, const char *key, uint64_t cookie, void *userdata);
/* A long-poll's deadline passed: reply to req. timeout is the wait it was held for. */
typedef void (*waitq_expire_fn)(struct api_request *req, const char *key, usec_t timeout, void *userdata);

struct waitq_ops {
        const char *what; /* what a key names, for the 429 message: "pod", "config" */
        waitq_wake_fn wake;
        waitq_expire_fn expire;
};

int waitq_new(sd_event *e, const struct waitq_ops *ops, const struct waitq_limits *limits, void *userdata,
              struct waitq **ret);
/* Long-polls still waiting get 503, streams end cleanly. */
struct waitq *waitq_free(struct waitq *q);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct waitq *, waitq_free);

/* Keeps req until waitq_wake() answers it through ops->wake, or until timeout passes
 * (ops->expire; 0: no deadline). Replies 429 itself over a cap (and 500 when out of memory):
 * either way the request is answered or held, and a handler returns what this returns. */
int waitq_hold(struct waitq *q, struct api_request *req, const char *key, uint64_t cookie, usec_t timeout);
/* Offers every long-poll under key to ops->wake. */
void waitq_wake(struct waitq *q, const char *key);
/* Answers every long-poll under key (NULL: every key) with an error; streams under it end. */
void waitq_fail(struct waitq *q, const char *key, unsigned status, const char *format, ...) _printf_(4, 5);

/* Answers req with a stream (200, content_type) kept under key: its lines are written with
 * waitq_stream_write() or waitq_broadcast(). Over a cap the request gets 429 instead and this
 * returns -EBUSY; on other errors too the request is finished. */
int waitq_stream(struct waitq *q, struct api_request *req, const char *key, const char *content_type,
                 struct waiter **ret);
/* Queues data on one stream. A stream that cannot take it (its reader does not keep up, or
 * memory ran out) is ended and freed: the error is returned and w is gone. */
int waitq_stream_write(struct waiter *w, const char *data, size_t size);
/* Ends one stream cleanly (the response finishes); w is gone. */
void waitq_stream_end(struct waiter *w);
/* Writes data to every stream under key (NULL: every key), ending those that cannot take it. */
void waitq_broadcast(struct waitq *q, const char *key, const char *data, size_t size);

/* Waiters (long-polls and streams) under key, or in all with key NULL. */
unsigned waitq_count(const struct waitq *q, const char *key);
