/* SPDX-License-Identifier: MIT */
/* metrics.c: exact exposition text, name rules, re-registration, collectors, registrations
 * released and made again. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "metrics.h"

static char *render(struct metrics *m) {
        char *text = NULL;
        size_t size = 0;

        assert_int_equal(metrics_render(m, &text, &size), 0);
        assert_non_null(text);
        assert_int_equal(strlen(text), size);
        return text;
}

static void assert_render(struct metrics *m, const char *expected) {
        _cleanup_free_ char *text = render(m);
        assert_string_equal(text, expected);
}

static void test_counter_labels(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = NULL;
        struct metric_family *f = NULL;
        const char *labels[] = { "route", "code", NULL };

        assert_int_equal(metrics_new(&m), 0);
        assert_int_equal(metrics_family(m, METRIC_COUNTER, "pinion_requests_total", "Requests served.",
                                        labels, NULL, 0, &f),
                         0);
        assert_int_equal(metric_inc(f, "/v1/pods", "200"), 0);
        assert_int_equal(metric_inc(f, "/v1/health", "503"), 0);
        assert_int_equal(metric_add(f, 2, "/v1/pods", "200"), 0);
        /* Counters never go down. */
        assert_int_equal(metric_add(f, -1, "/v1/pods", "200"), -EINVAL);
        assert_int_equal(metric_set(f, 5, "/v1/pods", "200"), -EINVAL);
        assert_int_equal(metric_observe(f, 5, "/v1/pods", "200"), -EINVAL);

        assert_render(m,
                      "# HELP pinion_requests_total Requests served.\n"
                      "# TYPE pinion_requests_total counter\n"
                      "pinion_requests_total{route=\"/v1/pods\",code=\"200\"} 3\n"
                      "pinion_requests_total{route=\"/v1/health\",code=\"503\"} 1\n");
}

static void test_gauge_values(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = NULL;
        struct metric_family *f = NULL, *g = NULL;
        const char *labels[] = { "v", NULL };

        assert_int_equal(metrics_new(&m), 0);
        assert_int_equal(metrics_family(m, METRIC_GAUGE, "pinion_values", "Odd values.", labels, NULL, 0, &f), 0);
        assert_int_equal(metric_set(f, 0.1, "a"), 0);
        assert_int_equal(metric_set(f, -2, "b"), 0);
        assert_int_equal(metric_set(f, 1e300, "c"), 0);
        assert_int_equal(metric_set(f, INFINITY, "d"), 0);
        assert_int_equal(metric_set(f, -INFINITY, "e"), 0);
        assert_int_equal(metric_set(f, NAN, "f"), 0);
        assert_int_equal(metric_set(f, 1.0 / 3.0, "g"), 0);
        assert_int_equal(metric_set(f, 1234567890123.0, "h"), 0);
        assert_int_equal(metric_set(f, -0.0, "i"), 0);
        assert_int_equal(metric_set(f, 3, "b"), 0); /* overwrite keeps creation order */
        assert_int_equal(metric_add(f, -0.5, "b"), 0); /* gauges may go down */

        /* No labels: exported at 0 from the start. */
        assert_int_equal(metrics_family(m, METRIC_GAUGE, "pinion_a_gauge", NULL, NULL, NULL, 0, &g), 0);

        assert_render(m,
                      "# TYPE pinion_a_gauge gauge\n"
                      "pinion_a_gauge 0\n"
                      "# HELP pinion_values Odd values.\n"
                      "# TYPE pinion_values gauge\n"
                      "pinion_values{v=\"a\"} 0.1\n"
                      "pinion_values{v=\"b\"} 2.5\n"
                      "pinion_values{v=\"c\"} 1e+300\n"
                      "pinion_values{v=\"d\"} +Inf\n"
                      "pinion_values{v=\"e\"} -Inf\n"
                      "pinion_values{v=\"f\"} NaN\n"
                      "pinion_values{v=\"g\"} 0.3333333333333333\n"
                      "pinion_values{v=\"h\"} 1234567890123\n"
                      "pinion_values{v=\"i\"} 0\n");

        metric_family_reset(f);
        assert_int_equal(metric_set(f, 7, "z"), 0);
        assert_int_equal(metric_set(g, 42), 0);
        assert_render(m,
                      "# TYPE pinion_a_gauge gauge\n"
                      "pinion_a_gauge 42\n"
                      "# HELP pinion_values Odd values.\n"
                      "# TYPE pinion_values gauge\n"
                      "pinion_values{v=\"z\"} 7\n");
}

static void test_escaping(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = NULL;
        struct metric_family *f = NULL;
        const char *labels[] = { "path", "note", NULL };

        assert_int_equal(metrics_new(&m), 0);
        assert_int_equal(metrics_family(m, METRIC_COUNTER, "pinion_escaped_total",
                                        "Help with a \\ backslash,\na newline and \"quotes\".", labels,
                                        NULL, 0, &f),
                         0);
        assert_int_equal(metric_inc(f, "C:\\dir", "say \"hi\"\nbye"), 0);
        assert_render(m,
                      "# HELP pinion_escaped_total Help with a \\\\ backslash,\\na newline and \"quotes\".\n"
                      "# TYPE pinion_escaped_total counter\n"
                      "pinion_escaped_total{path=\"C:\\\\dir\",note=\"say \\\"hi\\\"\\nbye\"} 1\n");
}

static void test_histogram(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = NULL;
        struct metric_family *f = NULL, *d = NULL;
        const char *labels[] = { "route", NULL };
        const double buckets[] = { 0.005, 0.1, 1 };

        assert_int_equal(metrics_new(&m), 0);
        assert_int_equal(metrics_family(m, METRIC_HISTOGRAM, "pinion_latency_seconds", "Latency.", labels,
                                        buckets, ELEMENTSOF(buckets), &f),
                         0);
        assert_int_equal(metric_observe(f, 0.001, "/a"), 0);
        assert_int_equal(metric_observe(f, 0.005, "/a"), 0); /* le is inclusive */
        assert_int_equal(metric_observe(f, 0.5, "/a"), 0);
        assert_int_equal(metric_observe(f, 3, "/a"), 0);
        assert_int_equal(metric_observe(f, 0.25, "/b"), 0);
        assert_int_equal(metric_add(f, 1, "/a"), -EINVAL);

        assert_render(m,
                      "# HELP pinion_latency_seconds Latency.\n"
                      "# TYPE pinion_latency_seconds histogram\n"
                      "pinion_latency_seconds_bucket{route=\"/a\",le=\"0.005\"} 2\n"
                      "pinion_latency_seconds_bucket{route=\"/a\",le=\"0.1\"} 2\n"
                      "pinion_latency_seconds_bucket{route=\"/a\",le=\"1\"} 3\n"
                      "pinion_latency_seconds_bucket{route=\"/a\",le=\"+Inf\"} 4\n"
                      "pinion_latency_seconds_sum{route=\"/a\"} 3.5060000000000002\n" /* round-trips */
                      "pinion_latency_seconds_count{route=\"/a\"} 4\n"
                      "pinion_latency_seconds_bucket{route=\"/b\",le=\"0.005\"} 0\n"
                      "pinion_latency_seconds_bucket{route=\"/b\",le=\"0.1\"} 0\n"
                      "pinion_latency_seconds_bucket{route=\"/b\",le=\"1\"} 1\n"
                      "pinion_latency_seconds_bucket{route=\"/b\",le=\"+Inf\"} 1\n"
                      "pinion_latency_seconds_sum{route=\"/b\"} 0.25\n"
                      "pinion_latency_seconds_count{route=\"/b\"} 1\n");

        /* Default buckets, no labels. */
        assert_int_equal(metrics_family(m, METRIC_HISTOGRAM, "pinion_d_seconds", NULL, NULL, NULL, 0, &d), 0);
        assert_int_equal(metric_observe(d, 0.3), 0);
        _cleanup_free_ char *text = render(m);
        assert_non_null(strstr(text,
                               "# TYPE pinion_d_seconds histogram\n"
                               "pinion_d_seconds_bucket{le=\"0.001\"} 0\n"
                               "pinion_d_seconds_bucket{le=\"0.0025\"} 0\n"
                               "pinion_d_seconds_bucket{le=\"0.005\"} 0\n"
                               "pinion_d_seconds_bucket{le=\"0.01\"} 0\n"
                               "pinion_d_seconds_bucket{le=\"0.025\"} 0\n"
                               "pinion_d_seconds_bucket{le=\"0.05\"} 0\n"
                               "pinion_d_seconds_bucket{le=\"0.1\"} 0\n"
                               "pinion_d_seconds_bucket{le=\"0.25\"} 0\n"
                               "pinion_d_seconds_bucket{le=\"0.5\"} 1\n"
                               "pinion_d_seconds_bucket{le=\"1\"} 1\n"
                               "pinion_d_seconds_bucket{le=\"2.5\"} 1\n"
                               "pinion_d_seconds_bucket{le=\"5\"} 1\n"
                               "pinion_d_seconds_bucket{le=\"10\"} 1\n"
                               "pinion_d_seconds_bucket{le=\"+Inf\"} 1\n"
                               "pinion_d_seconds_sum 0.3\n"
                               "pinion_d_seconds_count 1\n"));
        /* Families sorted by name: pinion_d_ before pinion_latency_. */
        assert_true(strstr(text, "pinion_d_seconds") < strstr(text, "pinion_latency_seconds"));
}

/* A touched series is there at zero, of any type; touching one that exists changes nothing. */
static void test_touch(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = NULL;
        struct metric_family *c = NULL, *h = NULL;
        const char *labels[] = { "kind", NULL };
        const double buckets[] = { 0.1, 1 };

        assert_int_equal(metrics_new(&m), 0);
        assert_int_equal(metrics_family(m, METRIC_COUNTER, "pinion_a_total", NULL, labels, NULL, 0, &c), 0);
        assert_int_equal(metrics_family(m, METRIC_HISTOGRAM, "pinion_b_seconds", NULL, labels, buckets,
                                        ELEMENTSOF(buckets), &h),
                         0);
        assert_int_equal(metric_add(c, 2, "x"), 0);
        assert_int_equal(metric_touch(c, "x"), 0);
        assert_int_equal(metric_touch(c, "y"), 0);
        assert_int_equal(metric_touch(h, "x"), 0);
        assert_int_equal(metric_touch(NULL, "x"), -EINVAL);
        assert_render(m,
                      "# TYPE pinion_a_total counter\n"
                      "pinion_a_total{kind=\"x\"} 2\n"
                      "pinion_a_total{kind=\"y\"} 0\n"
                      "# TYPE pinion_b_seconds histogram\n"
                      "pinion_b_seconds_bucket{kind=\"x\",le=\"0.1\"} 0\n"
                      "pinion_b_seconds_bucket{kind=\"x\",le=\"1\"} 0\n"
                      "pinion_b_seconds_bucket{kind=\"x\",le=\"+Inf\"} 0\n"
                      "pinion_b_seconds_sum{kind=\"x\"} 0\n"
                      "pinion_b_seconds_count{kind=\"x\"} 0\n");
}

static void test_sorted_families(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = NULL;
        struct metric_family *f;
        const char *names[] = { "pinion_zeta", "pinion_alpha", "pinion_mid", "pinion_beta" };

        assert_int_equal(metrics_new(&m), 0);
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                assert_int_equal(metrics_family(m, METRIC_GAUGE, names[i], NULL, NULL, NULL, 0, &f), 0);
                assert_int_equal(metric_set(f, (double) i), 0);
        }
        assert_render(m,
                      "# TYPE pinion_alpha gauge\npinion_alpha 1\n"
                      "# TYPE pinion_beta gauge\npinion_beta 3\n"
                      "# TYPE pinion_mid gauge\npinion_mid 2\n"
                      "# TYPE pinion_zeta gauge\npinion_zeta 0\n");
}

static void test_bad_names(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = NULL;
        struct metric_family *f = (struct metric_family *) 0x1;
        const char *bad_label[] = { "1abc", NULL };
        const char *colon_label[] = { "a:b", NULL };
        const char *reserved_label[] = { "__name", NULL };
        const char *dup_label[] = { "a", "a", NULL };
        const char *le_label[] = { "le", NULL };
        const double unsorted[] = { 1, 0.5 };
        const double with_inf[] = { 1, INFINITY };

        assert_int_equal(metrics_new(&m), 0);
        assert_int_equal(metrics_family(m, METRIC_COUNTER, "requests_total", NULL, NULL, NULL, 0, &f), -EINVAL);
        assert_int_equal(metrics_family(m, METRIC_COUNTER, "pinion-requests", NULL, NULL, NULL, 0, &f), -EINVAL);
        assert_int_equal(metrics_family(m, METRIC_COUNTER, "pinion_", NULL, NULL, NULL, 0, &f), 0);
        assert_int_equal(metrics_family(m, METRIC_COUNTER, "pinion_a b", NULL, NULL, NULL, 0, &f), -EINVAL);
        assert_int_equal(metrics_family(m, METRIC_COUNTER, "", NULL, NULL, NULL, 0, &f), -EINVAL);
        assert_int_equal(metrics_family(m, METRIC_COUNTER, NULL, NULL, NULL, NULL, 0, &f), -EINVAL);
        assert_int_equal(metrics_family(m, METRIC_COUNTER, "pinion_x", NULL, bad_label, NULL, 0, &f), -EINVAL);
        assert_int_equal(metrics_family(m, METRIC_COUNTER, "pinion_x", NULL, colon_label, NULL, 0, &f), -EINVAL);
        assert_int_equal(metrics_family(m, METRIC_COUNTER, "pinion_x", NULL, reserved_label, NULL, 0, &f), -EINVAL);
        assert_int_equal(metrics_family(m, METRIC_COUNTER, "pinion_x", NULL, dup_label, NULL, 0, &f), -EINVAL);
        /* "le" is reserved in histograms only. */
        assert_int_equal(metrics_family(m, METRIC_HISTOGRAM, "pinion_h", NULL, le_label, NULL, 0, &f), -EINVAL);
        assert_int_equal(metrics_family(m, METRIC_HISTOGRAM, "pinion_h", NULL, NULL, unsorted, 2, &f), -EINVAL);
        assert_int_equal(metrics_family(m, METRIC_HISTOGRAM, "pinion_h", NULL, NULL, with_inf, 2, &f), -EINVAL);
        f = NULL;
        assert_int_equal(metrics_family(m, METRIC_GAUGE, "pinion_le:ok", NULL, le_label, NULL, 0, &f), 0);
        assert_non_null(f);
}

static void test_reregister(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = NULL;
        struct metric_family *a = NULL, *b = NULL, *c = (struct metric_family *) 0x1;
        const char *labels[] = { "x", NULL };
        const char *other[] = { "y", NULL };

        assert_int_equal(metrics_new(&m), 0);
        assert_int_equal(metrics_family(m, METRIC_COUNTER, "pinion_things_total", "Things.", labels, NULL, 0, &a), 0);
        assert_int_equal(metrics_family(m, METRIC_COUNTER, "pinion_things_total", "Things.", labels, NULL, 0, &b), 0);
        assert_ptr_equal(a, b);
        /* Type clash; ret untouched. */
        assert_int_equal(metrics_family(m, METRIC_GAUGE, "pinion_things_total", NULL, labels, NULL, 0, &c), -EEXIST);
        assert_int_equal(metrics_family(m, METRIC_HISTOGRAM, "pinion_things_total", NULL, labels, NULL, 0, &c), -EEXIST);
        /* Same type, other labels: the later samples could not be read right. */
        assert_int_equal(metrics_family(m, METRIC_COUNTER, "pinion_things_total", NULL, other, NULL, 0, &c), -EEXIST);
        assert_ptr_equal(c, (struct metric_family *) 0x1);

        assert_int_equal(metric_inc(a, "1"), 0);
        assert_int_equal(metric_inc(b, "1"), 0);
        assert_int_equal(metric_inc(a, NULL), -EINVAL);
        assert_render(m,
                      "# HELP pinion_things_total Things.\n"
                      "# TYPE pinion_things_total counter\n"
                      "pinion_things_total{x=\"1\"} 2\n");
}

static void test_many_series(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = NULL;
        struct metric_family *f = NULL;
        const char *labels[] = { "pod", "ns", NULL };
        char pod[32], ns[32];

        assert_int_equal(metrics_new(&m), 0);
        assert_int_equal(metrics_family(m, METRIC_COUNTER, "pinion_pod_events_total", NULL, labels, NULL, 0, &f), 0);
        for (int round = 0; round < 3; round++)
                for (int i = 0; i < 2000; i++) {
                        snprintf(pod, sizeof(pod), "pod-%d", i);
                        snprintf(ns, sizeof(ns), "ns-%d", i % 7);
                        assert_int_equal(metric_inc(f, pod, ns), 0);
                }
        /* "ab"+"c" and "a"+"bc" are different series. */
        assert_int_equal(metric_inc(f, "ab", "c"), 0);
        assert_int_equal(metric_inc(f, "a", "bc"), 0);

        _cleanup_free_ char *text = render(m);
        assert_non_null(strstr(text, "\npinion_pod_events_total{pod=\"pod-0\",ns=\"ns-0\"} 3\n"));
        assert_non_null(strstr(text, "\npinion_pod_events_total{pod=\"pod-1999\",ns=\"ns-4\"} 3\n"));
        assert_non_null(strstr(text, "\npinion_pod_events_total{pod=\"ab\",ns=\"c\"} 1\n"));
        assert_non_null(strstr(text, "\npinion_pod_events_total{pod=\"a\",ns=\"bc\"} 1\n"));
        /* Creation order. */
        assert_true(strstr(text, "pod=\"pod-9\",") < strstr(text, "pod=\"pod-10\","));
        size_t lines = 0;
        for (const char *p = text; *p; p++)
                lines += *p == '\n';
        assert_int_equal(lines, 1 + 2000 + 2);
}

struct collect_state {
        struct metric_family *f;
        unsigned runs;
};

static void collect_uptime(struct metrics *m, void *userdata) {
        struct collect_state *s = userdata;

        s->runs++;
        metric_family_reset(s->f);
        (void) metric_set(s->f, (double) s->runs * 10, "agent");
}

static void collect_once(struct metrics *m, void *userdata) {
        unsigned *runs = userdata;

        (*runs)++;
        metrics_remove_collector(m, collect_once, userdata);
}

static void test_collectors(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = NULL;
        struct collect_state s = {};
        const char *labels[] = { "who", NULL };
        unsigned once = 0;

        assert_int_equal(metrics_new(&m), 0);
        assert_int_equal(metrics_family(m, METRIC_GAUGE, "pinion_uptime_seconds", "Uptime.", labels, NULL, 0, &s.f), 0);
        /* A collector that removes itself must not make the next one skip. */
        assert_int_equal(metrics_add_collector(m, collect_once, &once), 0);
        assert_int_equal(metrics_add_collector(m, collect_uptime, &s), 0);

        assert_render(m,
                      "# HELP pinion_uptime_seconds Uptime.\n"
                      "# TYPE pinion_uptime_seconds gauge\n"
                      "pinion_uptime_seconds{who=\"agent\"} 10\n");
        assert_int_equal(once, 1);
        assert_int_equal(s.runs, 1);
        assert_render(m,
                      "# HELP pinion_uptime_seconds Uptime.\n"
                      "# TYPE pinion_uptime_seconds gauge\n"
                      "pinion_uptime_seconds{who=\"agent\"} 20\n");
        assert_int_equal(once, 1);
        assert_int_equal(s.runs, 2);

        metrics_remove_collector(m, collect_uptime, &s);
        _cleanup_free_ char *text = render(m);
        assert_int_equal(s.runs, 2);
}

static void test_empty(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = NULL;
        struct metric_family *f = NULL;
        const char *labels[] = { "x", NULL };

        assert_int_equal(metrics_new(&m), 0);
        assert_render(m, "");
        /* A labelled family with no series yet still announces itself. */
        assert_int_equal(metrics_family(m, METRIC_COUNTER, "pinion_none_total", "None yet.", labels, NULL, 0, &f), 0);
        assert_render(m, "# HELP pinion_none_total None yet.\n# TYPE pinion_none_total counter\n");
        assert_null(metrics_free(NULL));
        metric_family_reset(NULL);
        metrics_remove_collector(NULL, NULL, NULL);
        assert_int_equal(metric_inc(NULL), -EINVAL);
}

static unsigned collect_calls;
static void collect_count(struct metrics *m, void *userdata) {
        collect_calls++;
}

static void test_registration(void **state) {
        _cleanup_(metrics_freep) struct metrics *m = NULL;
        struct metrics_registration *reg = NULL, *other = NULL;
        struct metric_family *a = NULL, *b = NULL, *a2 = NULL, *pinned = NULL;
        static const char *const kind[] = { "kind", NULL };
        const struct metric_def defs[] = {
                { METRIC_COUNTER, "pinion_a_total", "A.", kind, NULL, 0, &a },
                { METRIC_GAUGE, "pinion_b", "B.", NULL, NULL, 0, &b },
        };
        const struct metric_def shared[] = { { METRIC_COUNTER, "pinion_a_total", "A.", kind, NULL, 0, &a2 } };

        assert_int_equal(metrics_new(&m), 0);
        assert_int_equal(metrics_family(m, METRIC_GAUGE, "pinion_core", "Core.", NULL, NULL, 0, &pinned), 0);
        assert_int_equal(metrics_register(m, defs, ELEMENTSOF(defs), collect_count, &collect_calls, &reg), 0);
        assert_int_equal(metrics_family_count(m), 3);
        assert_int_equal(metrics_collector_count(m), 1);
        assert_int_equal(metric_inc(a, "x"), 0);
        assert_int_equal(metric_set(b, 2), 0);
        collect_calls = 0;
        assert_render(m, "# HELP pinion_a_total A.\n# TYPE pinion_a_total counter\npinion_a_total{kind=\"x\"} 1\n"
                         "# HELP pinion_b B.\n# TYPE pinion_b gauge\npinion_b 2\n"
                         "# HELP pinion_core Core.\n# TYPE pinion_core gauge\npinion_core 0\n");
        assert_int_equal(collect_calls, 1);

        /* Released: gone from the output with its collector; a late sample is dropped. */
        reg = metrics_registration_free(reg);
        assert_null(reg);
        assert_int_equal(metrics_family_count(m), 1);
        assert_int_equal(metrics_collector_count(m), 0);
        assert_int_equal(metric_inc(a, "y"), 0);
        assert_int_equal(metric_set(b, 3), 0);
        collect_calls = 0;
        assert_render(m, "# HELP pinion_core Core.\n# TYPE pinion_core gauge\npinion_core 0\n");
        assert_int_equal(collect_calls, 0);

        /* Registered again: the same families, empty, once each; one collector. */
        assert_int_equal(metrics_register(m, defs, ELEMENTSOF(defs), collect_count, &collect_calls, &reg), 0);
        assert_int_equal(metrics_family_count(m), 3);
        assert_int_equal(metrics_collector_count(m), 1);
        assert_render(m, "# HELP pinion_a_total A.\n# TYPE pinion_a_total counter\n"
                         "# HELP pinion_b B.\n# TYPE pinion_b gauge\npinion_b 0\n"
                         "# HELP pinion_core Core.\n# TYPE pinion_core gauge\npinion_core 0\n");

        /* A family two registrations hold stays while either does. */
        assert_int_equal(metrics_register(m, shared, ELEMENTSOF(shared), NULL, NULL, &other), 0);
        assert_ptr_equal(a, a2);
        assert_int_equal(metric_inc(a, "z"), 0);
        reg = metrics_registration_free(reg);
        assert_int_equal(metrics_family_count(m), 2);
        assert_render(m, "# HELP pinion_a_total A.\n# TYPE pinion_a_total counter\npinion_a_total{kind=\"z\"} 1\n"
                         "# HELP pinion_core Core.\n# TYPE pinion_core gauge\npinion_core 0\n");
        other = metrics_registration_free(other);
        assert_int_equal(metrics_family_count(m), 1);

        /* A registration may not redefine a family, nor leave anything behind trying. */
        const struct metric_def clash[] = {
                { METRIC_GAUGE, "pinion_c", "C.", NULL, NULL, 0, &b },
                { METRIC_COUNTER, "pinion_core", "Core.", NULL, NULL, 0, &a },
        };
        assert_int_equal(metrics_register(m, clash, ELEMENTSOF(clash), collect_count, NULL, &reg), -EEXIST);
        assert_null(reg);
        assert_int_equal(metrics_family_count(m), 1);
        assert_int_equal(metrics_collector_count(m), 0);
        assert_null(metrics_registration_free(NULL));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_counter_labels),
                cmocka_unit_test(test_gauge_values),
                cmocka_unit_test(test_escaping),
                cmocka_unit_test(test_histogram),
                cmocka_unit_test(test_touch),
                cmocka_unit_test(test_sorted_families),
                cmocka_unit_test(test_bad_names),
                cmocka_unit_test(test_reregister),
                cmocka_unit_test(test_many_series),
                cmocka_unit_test(test_collectors),
                cmocka_unit_test(test_empty),
                cmocka_unit_test(test_registration),
        };

        return cmocka_run_group_tests_name("metrics", tests, NULL, NULL);
}
