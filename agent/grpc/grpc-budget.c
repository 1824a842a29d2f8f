/* SPDX-License-Identifier: MIT */
/* What each caller (its count, grpc-server.c) may hold and how fast it may call.
 *
 * Bytes: request bytes its calls hold and response bytes queued for it, against its own budget
 * as well as the connection's and the server's, so that one caller over its budget is refused
 * alone.
 *
 * Calls, not bytes: each caller (its count, grpc-server.c) has a token bucket of calls. A call
 * whose request is complete takes a token before its handler runs (the handler is where the
 * work is: attestation through /proc, signing); without one it waits in its caller's queue.
 * Queued calls run from a deferred source, a few per loop iteration (at most a few ms of them)
 * and callers in turn; the source ranks below the loop's others, so that whatever is pending
 * (the local API's /v1/health, its steps through accept and libmicrohttpd) goes first and
 * waits at most one batch, whatever the callers send.
 *
 * A caller out of tokens is held: its connections are not read (what it sends waits in the
 * socket) until its queue is empty and a token is back, so a caller pipelining calls, or
 * refusals (a refused call costs a token as well), costs the loop one read per queue it
 * empties, not one per call. Privileged callers (no count) are not paced. */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "grpc-internal.h"
#include "log.h"

/* Calls run per turn of the deferred source, and the time after which the turn ends early. */
#define PACE_BATCH 16U
#define PACE_BATCH_USEC (2 * USEC_PER_MSEC)
/* Below every other source of the loop (they are at SD_EVENT_PRIORITY_NORMAL). */
#define PACE_PRIORITY (SD_EVENT_PRIORITY_NORMAL + 10)

static double pace_rate(const struct grpc_server *s) {
        return (double) s->opts.calls_per_second_per_caller;
}

static double pace_burst(const struct grpc_server *s) {
        return (double) s->opts.call_burst_per_caller;
}

static usec_t pace_now(const struct grpc_server *s) {
        usec_t now = 0;

        (void) sd_event_now(s->event, CLOCK_MONOTONIC, &now);
        return now;
}

static void bucket_refill(const struct grpc_server *s, struct grpc_count *k) {
        token_bucket_refill(&k->bucket, pace_now(s));
}

/* ---- holding a caller's connections ---- */

static void count_set_held(struct grpc_server *s, struct grpc_count *k, bool held) {
        if (k->held == held)
                return;
        k->held = held;
        if (held) {
                log_debug("gRPC %s: %s is over its rate of %u calls/s: its connections wait", s->name, k->key,
                          s->opts.calls_per_second_per_caller);
                grpc_server_count_rejected(s, "caller-rate");
        }
        for (struct grpc_conn *c = s->conns; c; c = c->next)
                if (c->count == k)
                        grpc_server_conn_update_events(c);
}

static int on_refill(sd_event_source *src, uint64_t usec, void *userdata);

static void count_arm_refill(struct grpc_server *s, struct grpc_count *k, usec_t wait) {
        if (!k->refill &&
            sd_event_add_time_relative(s->event, &k->refill, CLOCK_MONOTONIC, wait, 0, on_refill, k) < 0) {
                /* No timer: let the caller go rather than hold it for good. */
                k->bucket.tokens = MAX(k->bucket.tokens, 1.0);
                return;
        }
        (void) sd_event_source_set_time_relative(k->refill, wait);
        (void) sd_event_source_set_enabled(k->refill, SD_EVENT_ONESHOT);
}

/* ---- the turn of callers with calls to run ---- */

static void ready_push(struct grpc_server *s, struct grpc_count *k) {
        if (k->ready)
                return;
        k->ready = true;
        k->ready_next = NULL;
        if (s->ready_tail)
                s->ready_tail->ready_next = k;
        else
                s->ready_head = k;
        s->ready_tail = k;
        (void) sd_event_source_set_enabled(s->pace, SD_EVENT_ONESHOT);
}

static struct grpc_count *ready_pop(struct grpc_server *s) {
        struct grpc_count *k = s->ready_head;

        if (!k)
                return NULL;
        s->ready_head = k->ready_next;
        if (!s->ready_head)
                s->ready_tail = NULL;
        k->ready = false;
        k->ready_next = NULL;
        return k;
}

static void ready_remove(struct grpc_server *s, struct grpc_count *k) {
        struct grpc_count *prev = NULL;

        if (!k->ready)
                return;
        for (struct grpc_count *i = s->ready_head; i; prev = i, i = i->ready_next) {
                if (i != k)
                        continue;
                if (prev)
                        prev->ready_next = k->ready_next;
                else
                        s->ready_head = k->ready_next;
                if (s->ready_tail == k)
                        s->ready_tail = prev;
                break;
        }
        k->ready = false;
        k->ready_next = NULL;
}

/* Where the caller stands after a change: calls queued and a token to run one, its turn comes;
 * calls queued and no token, it is held until one is back; nothing queued, it is let go once
 * it has a token again. */
static void count_settle(struct grpc_server *s, struct grpc_count *k) {
        bucket_refill(s, k);
        if (k->n_queued > 0) {
                if (k->bucket.tokens >= 1.0)
                        ready_push(s, k);
                else {
                        count_set_held(s, k, true);
                        count_arm_refill(s, k, token_bucket_wait_for(&k->bucket, 1.0));
                }
                return;
        }
        if (!k->held)
                return;
        if (k->bucket.tokens >= 1.0)
                count_set_held(s, k, false);
        else
                count_arm_refill(s, k, token_bucket_wait_for(&k->bucket, 1.0));
}

static int on_refill(sd_event_source *src, uint64_t usec, void *userdata) {
        struct grpc_count *k = userdata;

        count_settle(k->server, k);
        grpc_server_count_put(k->server, k);
        return 0;
}

static usec_t monotonic_usec(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (usec_t) ts.tv_sec * USEC_PER_SEC + (usec_t) ts.tv_nsec / 1000;
}

static int on_pace(sd_event_source *src, void *userdata) {
        struct grpc_server *s = userdata;
        usec_t end = monotonic_usec() + PACE_BATCH_USEC;

        for (unsigned n = 0; n < PACE_BATCH && s->ready_head && (n == 0 || monotonic_usec() < end);) {
                struct grpc_count *k = ready_pop(s);
                struct grpc_call *call = k->queue_head;

                if (!call)
                        continue;
                if (!token_bucket_try_take(&k->bucket, pace_now(s), NULL)) {
                        count_settle(s, k);
                        continue;
                }
                grpc_budget_pace_withdraw(call);
                count_settle(s, k);
                grpc_call_run(call);
                n++;
        }
        if (s->ready_head)
                (void) sd_event_source_set_enabled(s->pace, SD_EVENT_ONESHOT);
        return 0;
}

/* ---- the calls ---- */

void grpc_budget_pace_submit(struct grpc_call *call) {
        struct grpc_count *k = call->conn->count;
        struct grpc_server *s = call->conn->server;

        if (!k) {
                grpc_call_run(call);
                return;
        }
        call->queue_next = NULL;
        if (k->queue_tail)
                k->queue_tail->queue_next = call;
        else
                k->queue_head = call;
        k->queue_tail = call;
        k->n_queued++;
        count_settle(s, k);
}

void grpc_budget_pace_withdraw(struct grpc_call *call) {
        struct grpc_count *k = call->conn->count;
        struct grpc_call *prev = NULL;

        if (!k)
                return;
        for (struct grpc_call *i = k->queue_head; i; prev = i, i = i->queue_next) {
                if (i != call)
                        continue;
                if (prev)
                        prev->queue_next = call->queue_next;
                else
                        k->queue_head = call->queue_next;
                if (k->queue_tail == call)
                        k->queue_tail = prev;
                k->n_queued--;
                break;
        }
        call->queue_next = NULL;
        if (k->n_queued == 0)
                ready_remove(call->conn->server, k);
}

void grpc_budget_pace_charge(struct grpc_conn *c) {
        struct grpc_count *k = c->count;
        struct grpc_server *s = c->server;

        if (!k)
                return;
        if (token_bucket_try_take(&k->bucket, pace_now(s), NULL))
                return;
        count_set_held(s, k, true);
        count_arm_refill(s, k, token_bucket_wait_for(&k->bucket, 1.0));
}

/* ---- bytes held per connection, per caller, in all ---- */

void grpc_budget_in_changed(struct grpc_conn *c, ssize_t delta) {
        c->in_bytes = (size_t) ((ssize_t) c->in_bytes + delta);
        if (c->count)
                c->count->in_bytes = (size_t) ((ssize_t) c->count->in_bytes + delta);
        c->server->in_bytes = (size_t) ((ssize_t) c->server->in_bytes + delta);
}

const char *grpc_budget_in_over(const struct grpc_conn *c, size_t len) {
        const struct grpc_server *s = c->server;

        /* Two messages per connection: one arriving while the last is answered. */
        if (c->in_bytes + len > 2 * (s->opts.max_recv_message + 5))
                return "request-bytes";
        if (c->count && c->count->in_bytes + len > s->opts.max_request_bytes_per_caller)
                return "caller-request-bytes";
        if (s->in_bytes + len > s->opts.max_request_bytes)
                return "request-bytes";
        return NULL;
}

void grpc_budget_out_changed(struct grpc_conn *c, ssize_t delta) {
        if (c->count)
                c->count->out_bytes = (size_t) ((ssize_t) c->count->out_bytes + delta);
        c->server->out_bytes = (size_t) ((ssize_t) c->server->out_bytes + delta);
}

const char *grpc_budget_out_over(const struct grpc_conn *c, size_t len) {
        const struct grpc_server *s = c->server;

        if (c->count && c->count->out_bytes + len > s->opts.max_unsent_per_caller)
                return "caller-unsent-bytes";
        if (s->out_bytes + len > s->opts.max_unsent_total)
                return "unsent-bytes";
        return NULL;
}

/* ---- counts ---- */

void grpc_budget_pace_count_new(struct grpc_server *s, struct grpc_count *k) {
        token_bucket_init(&k->bucket, pace_rate(s), pace_burst(s), pace_now(s));
        k->server = s;
}

void grpc_budget_pace_count_free(struct grpc_server *s, struct grpc_count *k) {
        ready_remove(s, k);
        k->refill = sd_event_source_disable_unref(k->refill);
}

bool grpc_budget_pace_count_idle(struct grpc_server *s, struct grpc_count *k) {
        bucket_refill(s, k);
        if ((k->bucket.tokens >= k->bucket.burst && !k->held) || !s->pace)
                return true;
        /* Come back when it is full: a caller that reconnects finds its bucket as it left it. */
        count_arm_refill(s, k, token_bucket_wait_for(&k->bucket, k->held ? 1.0 : k->bucket.burst));
        return false;
}

int grpc_budget_pace_init(struct grpc_server *s) {
        int r;

        r = sd_event_add_defer(s->event, &s->pace, on_pace, s);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(s->pace, SD_EVENT_OFF);
        (void) sd_event_source_set_priority(s->pace, PACE_PRIORITY);
        (void) sd_event_source_set_description(s->pace, "grpc-pace");
        return 0;
}

void grpc_budget_pace_done(struct grpc_server *s) {
        s->pace = sd_event_source_disable_unref(s->pace);
}
