/* SPDX-License-Identifier: MIT */
/* Budgets of the local API per caller (struct api_conn.caller_key: a pod, a uid, a TCP source,
 * or a privileged caller's uid) and for the server: how fast a caller's requests are taken on
 * (a token bucket, checked before any work is done for the request, the /proc reading of
 * peer_place_fn included), and how many body bytes its unfinished requests may hold.
 *
 * Figures and the reasons for them: docs/api.md ("Connections and limits"). */
#include <errno.h>
#include <string.h>

#include "api-internal.h"
#include "log.h"

/* Requests a paced caller may make: a burst of this many, refilled at this rate. A pod asks
 * for its identity, configs and tokens a few times a minute; a client looping on the API
 * gets 429 rather than the loop. */
#define API_CALLER_RATE_PER_SEC 100.0
#define API_CALLER_BURST 200.0
/* Body bytes held by one caller's unfinished requests (four of the largest a privileged
 * caller may send; an unprivileged caller's bodies are at most 4 KiB each), and by all. */
#define API_CALLER_BODY_BUDGET ((size_t) 4 * 1024 * 1024)
#define API_SERVER_BODY_BUDGET ((size_t) 64 * 1024 * 1024)

/* Forgets callers with nothing held and a full bucket: one seen again starts where it was. */
static void callers_sweep(struct api *a, usec_t now) {
        size_t kept = 0;

        for (size_t i = 0; i < a->n_callers; i++) {
                struct api_caller *k = &a->callers[i];

                token_bucket_refill(&k->bucket, now);
                if (k->body_bytes == 0 && k->bucket.tokens >= k->bucket.burst)
                        free(k->key);
                else
                        a->callers[kept++] = *k;
        }
        a->n_callers = kept;
}

static struct api_caller *caller_get(struct api *a, const char *key) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        struct api_caller *grown;

        for (size_t i = 0; i < a->n_callers; i++)
                if (streq(a->callers[i].key, key))
                        return &a->callers[i];
        callers_sweep(a, now);
        grown = realloc(a->callers, (a->n_callers + 1) * sizeof(*grown));
        if (!grown)
                return NULL;
        a->callers = grown;
        grown[a->n_callers] = (struct api_caller) { .key = strdup(key) };
        token_bucket_init(&grown[a->n_callers].bucket, API_CALLER_RATE_PER_SEC, API_CALLER_BURST, now);
        if (!grown[a->n_callers].key)
                return NULL;
        return &a->callers[a->n_callers++];
}

unsigned api_budget_take_request(struct api *a, const struct api_conn *c) {
        struct api_caller *k;
        usec_t wait;

        if (!c || !c->paced || !c->caller_key)
                return 0;
        k = caller_get(a, c->caller_key);
        if (!k)
                return 0; /* out of memory: not a reason to refuse a caller */
        if (token_bucket_try_take(&k->bucket, now_usec(CLOCK_MONOTONIC), &wait))
                return 0;
        return (unsigned) (wait / USEC_PER_SEC) + 1; /* whole seconds, rounded up */
}

unsigned api_budget_hold_body(struct api_request *r, size_t size) {
        struct api *a = r->api;
        const char *key = r->conn ? r->conn->caller_key : NULL;
        struct api_caller *k;

        if (size == 0)
                return 0;
        if (!r->budget_key) {
                r->budget_key = strdup(key ? key : "unknown");
                if (!r->budget_key)
                        return 503;
        }
        k = caller_get(a, r->budget_key);
        if (!k)
                return 503;
        if (size > API_CALLER_BODY_BUDGET - k->body_bytes)
                return 413;
        if (size > API_SERVER_BODY_BUDGET - a->body_bytes)
                return 503;
        k->body_bytes += size;
        a->body_bytes += size;
        r->budget_held += size;
        return 0;
}

void api_budget_release(struct api_request *r) {
        struct api *a = r->api;

        if (r->budget_held > 0) {
                for (size_t i = 0; i < a->n_callers; i++)
                        if (streq(a->callers[i].key, r->budget_key)) {
                                a->callers[i].body_bytes -= r->budget_held;
                                break;
                        }
                a->body_bytes -= r->budget_held;
                r->budget_held = 0;
        }
        r->budget_key = mfree(r->budget_key);
}

void api_budget_free_all(struct api *a) {
        for (size_t i = 0; i < a->n_callers; i++)
                free(a->callers[i].key);
        a->callers = mfree(a->callers);
        a->n_callers = 0;
}
