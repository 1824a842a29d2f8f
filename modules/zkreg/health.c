/* SPDX-License-Identifier: MIT */
/* Nerve-like health checks on the loop (see health.h). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "health.h"
#include "parse.h"
#include "string-table.h"

#define ANNOTATION_HEALTH "pinion.io/health"

struct health {
        sd_event *event;
        struct http_client *http;
        struct health_spec spec;
        char *url;
        char *target;
        sd_event_source *timer;
        struct http_transfer *transfer;
        unsigned successes, failures; /* consecutive */
        bool healthy;
        char *reason;
        health_result_fn fn;
        void *userdata;
};

static const char *const health_kind_table[_HEALTH_KIND_MAX] = {
        [HEALTH_NONE] = "none",
        [HEALTH_TCP] = "tcp",
        [HEALTH_HTTP] = "http",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(health_kind, enum health_kind);

static int spec_error(char **ret_error, const char *key, const char *value, const char *why) {
        if (ret_error && asprintf(ret_error, "%s=%s: %s", key, value, why) < 0)
                *ret_error = NULL;
        return -EINVAL;
}

static int parse_count(const char *s, unsigned *ret) {
        char *end = NULL;
        unsigned long v;
        if (isempty(s) || s[0] < '0' || s[0] > '9')
                return -EINVAL;
        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno || *end || v < 1 || v > 100)
                return -EINVAL;
        *ret = (unsigned) v;
        return 0;
}

int health_spec_from_pod(const struct pod *p, struct health_spec *ret, char **ret_error) {
        struct health_spec s = {
                .kind = HEALTH_NONE,
                .interval = 2 * USEC_PER_SEC,
                .timeout = USEC_PER_SEC,
                .rise = 2,
                .fall = 2,
        };
        const char *v;

        v = pod_annotation(p, ANNOTATION_HEALTH);
        if (!v || streq(v, "none") || streq(v, ""))
                s.kind = HEALTH_NONE;
        else if (streq(v, "tcp"))
                s.kind = HEALTH_TCP;
        else if (strncmp(v, "http:", 5) == 0) {
                const char *path = v + 5;
                if (path[0] != '/' || strlen(path) >= sizeof(s.path))
                        return spec_error(ret_error, ANNOTATION_HEALTH, v, "the path must start with '/' (http:/healthz)");
                for (const char *c = path; *c; c++)
                        if ((unsigned char) *c <= 0x20 || *c == 0x7f || *c == '#')
                                return spec_error(ret_error, ANNOTATION_HEALTH, v, "the path may not contain spaces, control characters or '#'");
                s.kind = HEALTH_HTTP;
                strcpy(s.path, path);
        } else
                return spec_error(ret_error, ANNOTATION_HEALTH, v, "expected tcp, http:/path or none");

        if ((v = pod_annotation(p, ANNOTATION_HEALTH "-interval")) &&
            (parse_duration(v, &s.interval) < 0 || s.interval < 100 * USEC_PER_MSEC || s.interval > USEC_PER_HOUR))
                return spec_error(ret_error, ANNOTATION_HEALTH "-interval", v, "expected a duration between 100ms and 1h");
        if ((v = pod_annotation(p, ANNOTATION_HEALTH "-timeout")) &&
            (parse_duration(v, &s.timeout) < 0 || s.timeout < 10 * USEC_PER_MSEC || s.timeout > USEC_PER_HOUR))
                return spec_error(ret_error, ANNOTATION_HEALTH "-timeout", v, "expected a duration between 10ms and 1h");
        if ((v = pod_annotation(p, ANNOTATION_HEALTH "-rise")) && parse_count(v, &s.rise) < 0)
                return spec_error(ret_error, ANNOTATION_HEALTH "-rise", v, "expected a count between 1 and 100");
        if ((v = pod_annotation(p, ANNOTATION_HEALTH "-fall")) && parse_count(v, &s.fall) < 0)
                return spec_error(ret_error, ANNOTATION_HEALTH "-fall", v, "expected a count between 1 and 100");
        if (s.timeout > s.interval)
                s.timeout = s.interval;
        *ret = s;
        return 0;
}

bool health_spec_equal(const struct health_spec *a, const struct health_spec *b) {
        return a->kind == b->kind && streq(a->path, b->path) && a->interval == b->interval &&
               a->timeout == b->timeout && a->rise == b->rise && a->fall == b->fall;
}

static void health_set_reason(struct health *h, char *reason) {
        free(h->reason);
        h->reason = reason;
}

static void health_schedule(struct health *h, usec_t delay);

static void health_record(struct health *h, bool ok, const char *error) {
        bool was = h->healthy;
        char *reason = NULL;

        if (ok) {
                h->failures = 0;
                if (h->successes < UINT32_MAX)
                        h->successes++;
                if (h->successes >= h->spec.rise)
                        h->healthy = true;
        } else {
                h->successes = 0;
                if (h->failures < UINT32_MAX)
                        h->failures++;
                if (h->failures >= h->spec.fall)
                        h->healthy = false;
        }
        if (!h->healthy) {
                if (ok || !error) {
                        if (asprintf(&reason, "%s check: waiting for %u more successful checks",
                                     health_kind_to_string(h->spec.kind), h->spec.rise - h->successes) < 0)
                                reason = NULL;
                } else if (asprintf(&reason, "%s check of %s failed: %s", health_kind_to_string(h->spec.kind),
                                    h->target, error) < 0)
                        reason = NULL;
        }
        health_set_reason(h, reason);
        if (h->fn)
                h->fn(h, ok, error, was != h->healthy, h->userdata);
}

static void on_check_done(struct http_client *c, const struct http_response *resp, void *userdata) {
        struct health *h = userdata;
        char buf[256];

        (void) c;
        h->transfer = NULL;
        health_schedule(h, h->spec.interval);
        if (resp->error < 0) {
                snprintf(buf, sizeof(buf), "%s", resp->error_message && resp->error_message[0] ? resp->error_message : strerror(-resp->error));
                health_record(h, false, buf);
        } else if (h->spec.kind == HEALTH_HTTP && (resp->status < 200 || resp->status > 299)) {
                snprintf(buf, sizeof(buf), "HTTP status %ld", resp->status);
                health_record(h, false, buf);
        } else
                health_record(h, true, NULL);
}

static int health_run(struct health *h) {
        CURL *easy = curl_easy_init();
        long ms = (long) (h->spec.timeout / USEC_PER_MSEC);

        if (!easy)
                return -ENOMEM;
        if (ms < 1)
                ms = 1;
        if (curl_easy_setopt(easy, CURLOPT_URL, h->url) != CURLE_OK ||
            curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http") != CURLE_OK ||
            curl_easy_setopt(easy, CURLOPT_NOPROXY, "*") != CURLE_OK ||
            curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, ms) != CURLE_OK ||
            curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, ms) != CURLE_OK ||
            curl_easy_setopt(easy, CURLOPT_FORBID_REUSE, 1L) != CURLE_OK ||
            curl_easy_setopt(easy, CURLOPT_USERAGENT, "pinion-health-check") != CURLE_OK ||
            (h->spec.kind == HEALTH_TCP && curl_easy_setopt(easy, CURLOPT_CONNECT_ONLY, 1L) != CURLE_OK)) {
                curl_easy_cleanup(easy);
                return -EINVAL;
        }
        return http_client_submit(h->http, easy, 64 * 1024, on_check_done, h, &h->transfer);
}

static int on_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct health *h = userdata;
        int r;

        (void) src;
        (void) usec;
        if (h->transfer)
                return 0;
        r = health_run(h);
        if (r < 0) {
                health_schedule(h, h->spec.interval);
                health_record(h, false, strerror(-r));
        }
        return 0;
}

static void health_schedule(struct health *h, usec_t delay) {
        if (delay == 0)
                delay = 1;
        (void) sd_event_source_set_time_relative(h->timer, delay);
        (void) sd_event_source_set_enabled(h->timer, SD_EVENT_ONESHOT);
}

bool health_update_timing(struct health *h, const struct health_spec *spec) {
        if (!h || !spec || h->spec.kind != spec->kind || !streq(h->spec.path, spec->path))
                return false;
        bool resched = h->spec.interval != spec->interval && sd_event_source_get_enabled(h->timer, NULL) > 0;
        h->spec.interval = spec->interval;
        h->spec.timeout = spec->timeout;
        h->spec.rise = spec->rise;
        h->spec.fall = spec->fall;
        /* The verdict stays; the counters go on under the new rise/fall. */
        if (resched)
                health_schedule(h, h->spec.interval);
        return true;
}

int health_new(sd_event *e, struct http_client *http, const struct health_spec *spec, const char *ip,
               unsigned port, health_result_fn fn, void *userdata, struct health **ret) {
        _cleanup_(health_freep) struct health *h = NULL;
        bool v6 = strchr(ip, ':') != NULL;
        int r;

        if (!e || !http || !spec || spec->kind == HEALTH_NONE || !ip || port == 0 || port > 65535 || !ret)
                return -EINVAL;
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->event = sd_event_ref(e);
        h->http = http;
        h->spec = *spec;
        if (asprintf(&h->url, v6 ? "http://[%s]:%u%s" : "http://%s:%u%s", ip, port,
                     spec->kind == HEALTH_HTTP ? spec->path : "/") < 0) {
                h->url = NULL;
                return -ENOMEM;
        }
        if (asprintf(&h->target, v6 ? "[%s]:%u" : "%s:%u", ip, port) < 0) {
                h->target = NULL;
                return -ENOMEM;
        }
        if (asprintf(&h->reason, "%s check: not run yet", health_kind_to_string(spec->kind)) < 0) {
                h->reason = NULL;
                return -ENOMEM;
        }
        r = sd_event_add_time_relative(e, &h->timer, CLOCK_MONOTONIC, 1, 0, on_timer, h);
        if (r < 0)
                return r;
        h->fn = fn;
        h->userdata = userdata;
        *ret = TAKE_PTR(h);
        return 0;
}

struct health *health_free(struct health *h) {
        if (!h)
                return NULL;
        http_transfer_cancel(h->transfer);
        sd_event_source_disable_unref(h->timer);
        sd_event_unref(h->event);
        free(h->url);
        free(h->target);
        free(h->reason);
        free(h);
        return NULL;
}

bool health_is_healthy(const struct health *h) {
        return h && h->healthy;
}

const char *health_reason(const struct health *h) {
        return h ? h->reason : NULL;
}

const struct health_spec *health_get_spec(const struct health *h) {
        return h ? &h->spec : NULL;
}

const char *health_target(const struct health *h) {
        return h ? h->target : NULL;
}
