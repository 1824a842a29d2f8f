/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "json.h"
#include "log.h"
#include "reflector.h"
#include "timer.h"
#include "string-table.h"

#define MODULE "apiserver"
#define LIST_TIMEOUT_MS 60000L
/* A watch runs until the server ends it at timeoutSeconds; this only catches a dead peer. */
#define WATCH_GRACE_MS 30000L
#define MIN_HEALTHY_WATCH USEC_PER_SEC
#define ERROR_BODY_MAX 65536

enum reflector_action {
        ACTION_LIST,
        ACTION_WATCH,
};

struct reflector {
        sd_event *event;
        struct http_client *http;
        const struct reflector_sink *sink;
        struct kube_endpoint *endpoint;
        struct reflector_config config;
        struct reflector_metrics metrics;
        reflector_changed_fn changed;
        void *userdata;

        enum reflector_state state;
        char *last_error;
        char *resource_version;   /* of the last list or event; where a watch resumes */
        bool synced;              /* a list has completed */
        bool first_attempt_done;
        bool relist;              /* next request is a list (start, or after 410) */
        bool consistent_relist;   /* after 410: resourceVersion="" instead of "0" */
        bool probing;             /* the list in flight is the fresh watch's one-object list */
        sd_event_source *relist_timer; /* the fresh watch's deferred full relist */
        enum reflector_action next_action;

        struct backoff backoff;
        struct token_bucket *bucket; /* the module's, shared by its reflectors */
        sd_event_source *timer;
        struct http_transfer *transfer;

        /* the list in progress (its items are in the sink until commit or abort) */
        size_t n_list_items;
        char *continue_token;

        /* the watch in progress */
        struct watch_stream stream;
        usec_t watch_started;
        unsigned watch_events;
        long watch_status;        /* HTTP status seen at the first body byte */
        char *watch_error_body;   /* non-200 body, bounded */
        size_t watch_error_size;
        int watch_abort;          /* why we cut the stream: -EBADMSG, -ESTALE (410), ... */

        /* figures */
        uint64_t n_requests, n_lists, n_relists, n_watches, n_watch_restarts, n_failures, n_events;
        usec_t last_sync;         /* CLOCK_REALTIME of the last list or event */
        usec_t next_attempt;      /* CLOCK_MONOTONIC, while WAITING/BACKOFF */
        usec_t last_backoff;
};

static const char *const reflector_state_table[_REFLECTOR_STATE_MAX] = {
        [REFLECTOR_IDLE] = "idle",           [REFLECTOR_WAITING] = "waiting",
        [REFLECTOR_LISTING] = "listing",     [REFLECTOR_WATCHING] = "watching",
        [REFLECTOR_BACKOFF] = "backoff",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(reflector_state, enum reflector_state);

static void reflector_notify(struct reflector *r) {
        if (r->changed)
                r->changed(r, r->userdata);
}

static void reflector_set_state(struct reflector *r, enum reflector_state s) {
        if (r->state == s)
                return;
        log_module_debug(MODULE, "reflector %s → %s", reflector_state_table[r->state], reflector_state_table[s]);
        r->state = s;
        reflector_notify(r);
}

static void reflector_set_error(struct reflector *r, const char *error) {
        if (streq_ptr(r->last_error, error))
                return;
        free(r->last_error);
        r->last_error = error ? strdup(error) : NULL;
}

static void count_request(struct reflector *r, const char *verb, const struct http_response *resp) {
        char code[16];

        if (resp->error < 0 && resp->status == 0)
                snprintf(code, sizeof(code), "error");
        else
                snprintf(code, sizeof(code), "%ld", resp->status);
        (void) metric_inc(r->metrics.requests, r->sink->resource, verb, code);
}

static void count_error(struct reflector *r, const char *kind) {
        (void) metric_inc(r->metrics.errors, r->sink->resource, kind);
}

/* Drops a list in progress (the sink forgets what it took). */
static void list_reset(struct reflector *r) {
        r->sink->list_abort(r->sink->userdata); /* (nothing to forget after a commit) */
        r->n_list_items = 0;
        r->continue_token = mfree(r->continue_token);
}

static void watch_reset(struct reflector *r) {
        watch_stream_done(&r->stream);
        r->watch_events = 0;
        r->watch_status = 0;
        r->watch_error_body = mfree(r->watch_error_body);
        r->watch_error_size = 0;
        r->watch_abort = 0;
}

/* ---- scheduling: every request passes the token bucket; failures back off ---- */

static void reflector_perform(struct reflector *r);

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct reflector *r = userdata;
        reflector_perform(r);
        return 0;
}

static usec_t usec_add(usec_t a, usec_t b) {
        return a > USEC_INFINITY - b ? USEC_INFINITY : a + b;
}

static void reflector_arm(struct reflector *r, usec_t delay) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        int k;

        r->next_attempt = usec_add(now, delay);
        k = timer_arm(r->event, &r->timer, CLOCK_MONOTONIC, r->next_attempt, USEC_PER_MSEC, false, on_timer, r);
        if (k < 0)
                log_module_error_errno(MODULE, k, "Cannot arm the retry timer, the watch of %s stops: %m",
                                       r->sink->description);
}

/* Next request after `delay` (backoff or 0), then after the token bucket allows it. */
static void reflector_schedule(struct reflector *r, enum reflector_action action, usec_t delay) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        usec_t wait = token_bucket_reserve(r->bucket, usec_add(now, delay));

        r->next_action = action;
        if (delay == 0 && wait == 0) {
                reflector_perform(r);
                return;
        }
        reflector_set_state(r, delay > 0 ? REFLECTOR_BACKOFF : REFLECTOR_WAITING);
        reflector_arm(r, usec_add(delay, wait));
}

static void reflector_failed(struct reflector *r, const char *kind, usec_t retry_after, const char *format, ...)
        _printf_(4, 5);

static void reflector_failed(struct reflector *r, const char *kind, usec_t retry_after, const char *format, ...) {
        _cleanup_free_ char *reason = NULL;
        va_list ap;

        va_start(ap, format);
        if (vasprintf(&reason, format, ap) < 0)
                reason = NULL;
        va_end(ap);

        usec_t delay = backoff_next(&r->backoff, now_usec(CLOCK_MONOTONIC), retry_after);
        r->probing = false; /* (a fresh watch's list: the next 410 asks again) */
        r->n_failures++;
        r->last_backoff = delay;
        count_error(r, kind);
        (void) metric_add(r->metrics.backoff, (double) delay / USEC_PER_SEC, r->sink->resource);
        log_module_warning(MODULE, "%s; retrying in %.1fs", strempty(reason), (double) delay / USEC_PER_SEC);
        reflector_set_error(r, reason);
        r->first_attempt_done = true;
        reflector_schedule(r, r->relist || !r->synced ? ACTION_LIST : ACTION_WATCH, delay);
        reflector_notify(r);
}

/* ---- list ---- */

int reflector_query_param(const char *name, const char *value, char **ret) {
        CURL *c = curl_easy_init();
        if (!c)
                return -ENOMEM;
        char *esc = curl_easy_escape(c, value, 0);
        int k = esc ? asprintf(ret, "%s=%s", name, esc) : -1;
        curl_free(esc);
        curl_easy_cleanup(c);
        return k < 0 ? -ENOMEM : 0;
}

/* The sink's selector and, if any, "&". */
static const char *selector_prefix(const struct reflector *r, const char **ret_amp) {
        *ret_amp = r->sink->selector ? "&" : "";
        return strempty(r->sink->selector);
}

static int list_path(struct reflector *r, char **ret) {
        _cleanup_free_ char *cont = NULL;
        const char *amp, *selector = selector_prefix(r, &amp);
        int k;

        if (r->continue_token && reflector_query_param("continue", r->continue_token, &cont) < 0)
                return -ENOMEM;
        /* resourceVersion=0 lets the apiserver answer from its watch cache (cheap, any
         * freshness); after a 410 we ask for "" (a consistent read) so we do not go back in time.
         * A continuation carries its own version and must not name one. */
        if (r->probing)
                /* No resourceVersion: the newest, one object (the items are not looked at). */
                k = asprintf(ret, "/api/v1/%s?%s%slimit=1", r->sink->resource, selector, amp);
        else if (cont)
                k = asprintf(ret, "/api/v1/%s?%s%slimit=%u&%s", r->sink->resource, selector, amp,
                             r->config.page_limit, cont);
        else
                k = asprintf(ret, "/api/v1/%s?%s%slimit=%u&resourceVersion=%s", r->sink->resource, selector, amp,
                             r->config.page_limit, r->consistent_relist ? "" : "0");
        return k < 0 ? -ENOMEM : 0;
}

static void on_list_done(struct http_client *c, const struct http_response *resp, void *userdata);
static void fresh_watch_start(struct reflector *r, const char *resource_version);

static void reflector_list(struct reflector *r) {
        _cleanup_free_ char *path = NULL;
        CURL *easy = NULL;
        int k;

        k = list_path(r, &path);
        if (k >= 0)
                k = kube_endpoint_request(r->endpoint, path, LIST_TIMEOUT_MS, &easy);
        if (k < 0)
                return reflector_failed(r, "request", 0, "Cannot build the %s list request: %s", r->sink->resource,
                                        kube_endpoint_strerror(r->endpoint, k));
        reflector_set_state(r, REFLECTOR_LISTING);
        r->n_requests++;
        k = http_client_submit(r->http, easy, r->config.max_list_size, on_list_done, r, &r->transfer);
        if (k < 0)
                reflector_failed(r, "request", 0, "Cannot start the %s list request: %s", r->sink->resource,
                                 strerror(-k));
}

/* Hands the page's items to the sink; counts those it skipped. */
static int list_take_items(struct reflector *r, const cJSON *items) {
        const cJSON *item;

        cJSON_ArrayForEach(item, items) {
                const char *kind = NULL;
                int k = r->sink->list_item(r->sink->userdata, item, &kind);
                r->n_list_items++; /* (also when it failed: the sink may hold part of the list) */
                if (k < 0)
                        return k;
                if (kind)
                        count_error(r, kind);
        }
        return 0;
}

static void list_finish(struct reflector *r, const char *resource_version) {
        size_t n = r->n_list_items;
        int k = r->sink->list_commit(r->sink->userdata);
        r->n_list_items = 0; /* committed: nothing to abort */
        if (k < 0) {
                list_reset(r);
                return reflector_failed(r, "store", 0, "Cannot apply the %s list: %s", r->sink->resource, strerror(-k));
        }
        log_module_full_errno(MODULE, r->synced ? LOG_DEBUG : LOG_INFO, 0,
                              "Listed %s (%zu objects) at resourceVersion %s (%d changes)", r->sink->description, n,
                              resource_version, k);
        free(r->resource_version);
        r->resource_version = strdup(resource_version);
        if (r->synced)
                (void) metric_inc(r->metrics.relists, r->sink->resource);
        r->n_lists++;
        r->synced = true;
        r->first_attempt_done = true;
        r->relist = false;
        r->consistent_relist = false;
        r->relist_timer = sd_event_source_disable_unref(r->relist_timer);
        r->last_sync = now_usec(CLOCK_REALTIME);
        list_reset(r);
        reflector_set_error(r, NULL);
        reflector_schedule(r, ACTION_WATCH, 0);
        reflector_notify(r);
}

static void on_list_done(struct http_client *c, const struct http_response *resp, void *userdata) {
        struct reflector *r = userdata;
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;

        r->transfer = NULL;
        count_request(r, "list", resp);
        if (resp->error < 0) {
                list_reset(r);
                return reflector_failed(r, "connect", 0, "List of %s failed: %s", r->sink->description,
                                        strempty(resp->error_message));
        }
        if (resp->status == 410 && !r->consistent_relist) {
                /* Our version, or a continue token, is older than the server keeps: start over
                 * once with a consistent read. */
                list_reset(r);
                r->consistent_relist = true;
                return reflector_schedule(r, ACTION_LIST, 0);
        }
        if (resp->status == 410) {
                list_reset(r);
                return reflector_failed(r, "status", http_response_retry_after(resp),
                                        "List of %s answered 410 Gone even to a consistent read", r->sink->resource);
        }
        if (resp->status != 200) {
                list_reset(r);
                return reflector_failed(r, "status", http_response_retry_after(resp), "List of %s answered HTTP %ld",
                                        r->sink->description, resp->status);
        }

        root = cJSON_ParseWithLength(resp->body, resp->body_size);
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(root, "items");
        const char *rv = watch_stream_resource_version(root);
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
        const cJSON *cont = cJSON_GetObjectItemCaseSensitive(meta, "continue");
        if (!root || !rv || (!cJSON_IsArray(items) && !cJSON_IsNull(items) && items)) {
                list_reset(r);
                return reflector_failed(r, "decode", 0, "List of %s is not a list with a resourceVersion",
                                        r->sink->resource);
        }
        if (r->probing)
                return fresh_watch_start(r, rv);
        int k = list_take_items(r, items);
        if (k < 0) {
                list_reset(r);
                return reflector_failed(r, "store", 0, "Cannot hold the %s list: %s", r->sink->resource, strerror(-k));
        }

        if (cJSON_IsString(cont) && cont->valuestring[0]) {
                free(r->continue_token);
                r->continue_token = strdup(cont->valuestring);
                return reflector_schedule(r, ACTION_LIST, 0);
        }
        list_finish(r, rv);
}

/* ---- watch ---- */

static int apply_event(const struct watch_event *ev, void *userdata) {
        struct reflector *r = userdata;

        r->watch_events++;
        r->n_events++;
        (void) metric_inc(r->metrics.events, r->sink->resource, watch_stream_event_type_to_string(ev->type));

        switch (ev->type) {
        case WATCH_ERROR:
                if (watch_stream_status_code(ev->object) == 410)
                        return -ESTALE;
                return -EPROTO;
        case WATCH_ADDED:
        case WATCH_MODIFIED:
        case WATCH_DELETED: {
                const char *kind = NULL;
                int k = r->sink->event(r->sink->userdata, ev->type, ev->object, &kind);
                if (k < 0)
                        return k;
                if (kind)
                        count_error(r, kind);
                break;
        }
        case WATCH_BOOKMARK:
        case _WATCH_EVENT_TYPE_MAX:
        case _WATCH_EVENT_TYPE_INVALID:
                break;
        }
        if (ev->resource_version) {
                free(r->resource_version);
                r->resource_version = strdup(ev->resource_version);
        }
        r->last_sync = now_usec(CLOCK_REALTIME);
        return 0;
}

/* The watch is established when its 200 headers are complete, not when the first event comes
 * (on a quiet node that can be minutes): that is when the module stops saying "degraded". */
static void watch_answered(struct reflector *r) {
        if (r->watch_status != 0 || !r->transfer)
                return;
        (void) curl_easy_getinfo(http_transfer_easy(r->transfer), CURLINFO_RESPONSE_CODE, &r->watch_status);
        if (r->watch_status != 200)
                return;
        reflector_set_error(r, NULL);
        reflector_set_state(r, REFLECTOR_WATCHING);
        reflector_notify(r);
}

static size_t on_watch_header(char *data, size_t size, size_t nmemb, void *userdata) {
        size_t n = size * nmemb;
        if ((n == 2 && data[0] == '\r' && data[1] == '\n') || (n == 1 && data[0] == '\n'))
                watch_answered(userdata); /* the blank line that ends the headers */
        return n;
}

static size_t on_watch_data(char *data, size_t size, size_t nmemb, void *userdata) {
        struct reflector *r = userdata;
        size_t n = size * nmemb;

        watch_answered(r); /* in case the headers did not reach on_watch_header */
        if (r->watch_status != 200) {
                /* A non-200 body is a Status object, not events. */
                size_t room = ERROR_BODY_MAX - r->watch_error_size;
                size_t take = MIN(room, n);
                char *grown = realloc(r->watch_error_body, r->watch_error_size + take + 1);
                if (grown) {
                        memcpy(grown + r->watch_error_size, data, take);
                        r->watch_error_size += take;
                        grown[r->watch_error_size] = 0;
                        r->watch_error_body = grown;
                }
                return n;
        }

        unsigned oversized = r->stream.n_oversized;
        int k = watch_stream_feed(&r->stream, data, n, apply_event, r);
        if (r->stream.n_oversized > oversized) {
                log_module_warning(MODULE, "Skipped a watch event over %zu bytes (%s); the object it carried keeps its last known state",
                                   r->config.max_event_size, r->sink->resource);
                count_error(r, "oversized-event");
        }
        if (k < 0) {
                r->watch_abort = k;
                return 0; /* short write: curl aborts the transfer */
        }
        return n;
}

static void on_watch_done(struct http_client *c, const struct http_response *resp, void *userdata);

static void reflector_watch(struct reflector *r) {
        _cleanup_free_ char *path = NULL;
        const char *amp, *selector = selector_prefix(r, &amp);
        CURL *easy = NULL;
        usec_t timeout;
        int k;

        timeout = backoff_random_between(&r->backoff, r->config.watch_timeout_min, 2 * r->config.watch_timeout_min);
        if (asprintf(&path, "/api/v1/%s?watch=1&allowWatchBookmarks=true&%s%sresourceVersion=%s&timeoutSeconds=%llu",
                     r->sink->resource, selector, amp, r->resource_version,
                     (unsigned long long) (timeout / USEC_PER_SEC)) < 0)
                return reflector_failed(r, "request", 0, "Cannot build the watch request: out of memory");
        k = kube_endpoint_request(r->endpoint, path, (long) (timeout / USEC_PER_MSEC) + WATCH_GRACE_MS, &easy);
        if (k < 0)
                return reflector_failed(r, "request", 0, "Cannot build the watch request: %s",
                                        kube_endpoint_strerror(r->endpoint, k));
        if (curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, on_watch_data) != CURLE_OK ||
            curl_easy_setopt(easy, CURLOPT_WRITEDATA, r) != CURLE_OK ||
            curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, on_watch_header) != CURLE_OK ||
            curl_easy_setopt(easy, CURLOPT_HEADERDATA, r) != CURLE_OK) {
                curl_easy_cleanup(easy);
                return reflector_failed(r, "request", 0, "Cannot set up the watch request");
        }
        watch_reset(r);
        watch_stream_init(&r->stream, r->config.max_event_size);
        r->watch_started = now_usec(CLOCK_MONOTONIC);
        r->n_requests++;
        r->n_watches++;
        k = http_client_submit(r->http, easy, 0, on_watch_done, r, &r->transfer);
        if (k < 0)
                return reflector_failed(r, "request", 0, "Cannot start the watch: %s", strerror(-k));
        log_module_debug(MODULE, "Watching %s from resourceVersion %s for %llus", r->sink->resource,
                         r->resource_version, (unsigned long long) (timeout / USEC_PER_SEC));
}

/* ---- the fresh watch: a watch from the newest version at once, the full relist later ---- */

static int on_relist_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct reflector *r = userdata;

        r->relist_timer = sd_event_source_disable_unref(r->relist_timer);
        log_module_info(MODULE, "Relisting %s, deferred since the watch went too old", r->sink->description);
        /* From the watch cache: the watch has kept us current, so any freshness will do. */
        r->relist = true;
        r->consistent_relist = false;
        r->probing = false;
        http_transfer_cancel(r->transfer);
        r->transfer = NULL;
        watch_reset(r);
        reflector_schedule(r, ACTION_LIST, 0);
        return 0;
}

/* When the deferred relist runs: after the fixed delay, at a point uniform in the spread, so
 * that a fleet that heard 410 together lists at a pace the apiserver can serve. */
static usec_t fresh_watch_relist_delay(struct reflector *r) {
        double n = (double) r->sink->count(r->sink->userdata);
        usec_t step = backoff_current_step(&r->backoff, now_usec(CLOCK_MONOTONIC));
        double fleet = n * n / 500.0 * USEC_PER_SEC;
        usec_t spread = MAX(step, fleet > (double) (USEC_INFINITY / 2) ? USEC_INFINITY / 2 : (usec_t) fleet);
        return usec_add(r->config.fresh_watch_relist_after, backoff_random_between(&r->backoff, 0, spread));
}

static void fresh_watch_start(struct reflector *r, const char *resource_version) {
        r->probing = false;
        free(r->resource_version);
        r->resource_version = strdup(resource_version);
        if (!r->resource_version)
                return reflector_failed(r, "store", 0, "Cannot hold the resourceVersion: out of memory");
        if (!r->relist_timer) {
                /* A 410 while a relist is pending keeps the time already drawn. */
                usec_t delay = fresh_watch_relist_delay(r);
                int k = sd_event_add_time_relative(r->event, &r->relist_timer, CLOCK_MONOTONIC, delay, USEC_PER_SEC,
                                                   on_relist_timer, r);
                if (k < 0) {
                        r->relist = true;
                        return reflector_schedule(r, ACTION_LIST, 0);
                }
                log_module_info(MODULE, "Watching %s from resourceVersion %s; full relist in %.0fs", r->sink->resource,
                                resource_version, (double) delay / USEC_PER_SEC);
        }
        reflector_set_error(r, NULL);
        reflector_schedule(r, ACTION_WATCH, 0);
}

static void watch_gone(struct reflector *r) {
        /* 410: the server no longer has our version; relist. After an apiserver restart every
         * agent of the fleet hears this, each when its own (jittered) retry reaches the server,
         * and a list costs the server ~pods-per-node times a watch: a pause uniform in [0, the
         * current backoff step] spreads the relists at least as wide as the retries were
         * (tests/sim/: 2,500 agents recover within 90 s and the apiserver survives; relisting at
         * once brings it down in 2 seeds of 10, the full next step takes 115 s). After a healthy
         * spell the step is backoff-initial, so a lone 410 costs under a second. */
        usec_t step = backoff_current_step(&r->backoff, now_usec(CLOCK_MONOTONIC));
        usec_t delay = backoff_random_between(&r->backoff, 0, step);

        if (r->config.fresh_watch_relist_after > 0 && r->synced) {
                log_module_info(MODULE, "resourceVersion %s of %s is too old for the apiserver: watching from the "
                                "newest one, relisting later", r->resource_version, r->sink->resource);
                r->probing = true;
                return reflector_schedule(r, ACTION_LIST, 0);
        }
        log_module_info(MODULE, "resourceVersion %s of %s is too old for the apiserver, relisting in %.1fs",
                        r->resource_version, r->sink->resource, (double) delay / USEC_PER_SEC);
        r->relist = true;
        r->consistent_relist = true;
        reflector_schedule(r, ACTION_LIST, delay);
}

static void on_watch_done(struct http_client *c, const struct http_response *resp, void *userdata) {
        struct reflector *r = userdata;
        usec_t lasted = now_usec(CLOCK_MONOTONIC) - r->watch_started;
        long status = resp->status ? resp->status : r->watch_status;

        r->transfer = NULL;
        count_request(r, "watch", resp);

        if (r->watch_abort == -ESTALE || status == 410)
                return watch_gone(r);
        if (r->watch_abort == -EBADMSG)
                return reflector_failed(r, "decode", 0, "Watch stream is corrupt after %u events", r->watch_events);
        if (r->watch_abort == -EPROTO)
                return reflector_failed(r, "status", 0, "Watch stream reported an error after %u events", r->watch_events);
        if (r->watch_abort < 0)
                return reflector_failed(r, "store", 0, "Cannot apply a watch event: %s", strerror(-r->watch_abort));
        if (resp->error < 0 && status == 0)
                return reflector_failed(r, "connect", 0, "Watch failed: %s", strempty(resp->error_message));
        if (status != 200)
                return reflector_failed(r, "status", http_response_retry_after(resp), "Watch answered HTTP %ld", status);
        if (resp->error < 0 || watch_stream_partial(&r->stream))
                return reflector_failed(r, "connect", 0, "Watch stream cut short after %u events: %s", r->watch_events,
                                        strempty(resp->error_message));
        if (lasted < MIN_HEALTHY_WATCH && r->watch_events == 0)
                return reflector_failed(r, "short-watch", 0, "Watch ended after %llums with no events",
                                        (unsigned long long) (lasted / USEC_PER_MSEC));

        /* The server ended a healthy watch (timeoutSeconds): resume where we are. */
        r->n_watch_restarts++;
        (void) metric_inc(r->metrics.watch_restarts, r->sink->resource);
        reflector_set_error(r, NULL);
        reflector_notify(r);
        reflector_schedule(r, ACTION_WATCH, 0);
}

static void reflector_perform(struct reflector *r) {
        switch (r->next_action) {
        case ACTION_LIST:
                reflector_list(r);
                break;
        case ACTION_WATCH:
                reflector_watch(r);
                break;
        }
}

/* ---- object ---- */

int reflector_new(sd_event *e, struct http_client *http, const struct reflector_sink *sink,
                  struct kube_endpoint *endpoint, struct token_bucket *bucket, const struct reflector_config *config,
                  const struct reflector_metrics *metrics, reflector_changed_fn changed, void *userdata,
                  struct reflector **ret) {
        struct reflector *r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->event = sd_event_ref(e);
        r->http = http;
        r->sink = sink;
        r->endpoint = endpoint;
        r->bucket = bucket;
        r->metrics = *metrics;
        r->changed = changed;
        r->userdata = userdata;
        r->relist = true;
        backoff_init(&r->backoff, &config->backoff, 0);
        r->config = *config;
        watch_stream_init(&r->stream, config->max_event_size);
        *ret = r;
        return 0;
}

struct reflector *reflector_free(struct reflector *r) {
        if (!r)
                return NULL;
        http_transfer_cancel(r->transfer);
        sd_event_source_disable_unref(r->timer);
        sd_event_source_disable_unref(r->relist_timer);
        list_reset(r);
        watch_reset(r);
        free(r->resource_version);
        free(r->last_error);
        sd_event_unref(r->event);
        free(r);
        return NULL;
}

int reflector_start(struct reflector *r) {
        /* The resource's counters at zero from the start (a rate or an alert has a zero to
         * begin from); requests and errors carry values known only when they happen. */
        (void) metric_touch(r->metrics.relists, r->sink->resource);
        (void) metric_touch(r->metrics.watch_restarts, r->sink->resource);
        (void) metric_touch(r->metrics.backoff, r->sink->resource);
        for (enum watch_event_type t = 0; t < _WATCH_EVENT_TYPE_MAX; t++)
                (void) metric_touch(r->metrics.events, r->sink->resource, watch_stream_event_type_to_string(t));
        log_module_info(MODULE, "Listing and watching %s at %s", r->sink->description, r->endpoint->url);
        reflector_schedule(r, ACTION_LIST, 0);
        return 0;
}

void reflector_set_config(struct reflector *r, const struct reflector_config *config) {
        r->config = *config;
        r->backoff.config = config->backoff;
}

enum reflector_state reflector_get_state(const struct reflector *r) {
        return r->state;
}

void reflector_count_request(struct reflector *r) {
        r->n_requests++;
}

bool reflector_synced(const struct reflector *r) {
        return r->synced;
}

bool reflector_first_attempt_done(const struct reflector *r) {
        return r->first_attempt_done;
}

const char *reflector_last_error(const struct reflector *r) {
        return r->last_error;
}

const char *reflector_resource_version(const struct reflector *r) {
        return r->resource_version;
}

usec_t reflector_last_sync(const struct reflector *r) {
        return r->last_sync;
}

int reflector_status(const struct reflector *r, cJSON *o) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        bool ok = cJSON_AddStringToObject(o, "url", r->endpoint->url) &&
                  cJSON_AddNumberToObject(o, r->sink->resource, (double) r->sink->count(r->sink->userdata)) &&
                  cJSON_AddStringToObject(o, "reflector", reflector_state_table[r->state]) &&
                  json_add_string_or_null(o, "resourceVersion", r->resource_version) &&
                  cJSON_AddBoolToObject(o, "synced", r->synced) && json_add_time(o, "lastSync", r->last_sync) &&
                  json_add_string_or_null(o, "lastError", r->last_error) &&
                  cJSON_AddNumberToObject(o, "requests", (double) r->n_requests) &&
                  cJSON_AddNumberToObject(o, "lists", (double) r->n_lists) &&
                  cJSON_AddNumberToObject(o, "watchRestarts", (double) r->n_watch_restarts) &&
                  cJSON_AddNumberToObject(o, "failures", (double) r->n_failures) &&
                  cJSON_AddNumberToObject(o, "events", (double) r->n_events) &&
                  cJSON_AddNumberToObject(o, "backoffSeconds", (double) r->last_backoff / USEC_PER_SEC) &&
                  cJSON_AddNumberToObject(o, "nextAttemptInSeconds",
                                          (r->state == REFLECTOR_BACKOFF || r->state == REFLECTOR_WAITING) &&
                                                          r->next_attempt > now
                                                  ? (double) (r->next_attempt - now) / USEC_PER_SEC
                                                  : 0);
        return ok ? 0 : -ENOMEM;
}
