/* SPDX-License-Identifier: MIT */
/* zkreg's pure parts: the ServerSet member format (build from a pod, parse back), ServerSet
 * path validation and the health-check annotations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "health.h"
#include "pods.h"
#include "serverset.h"

static struct pod *pod_from(const char *annotations, const char *ports, const char *ip) {
        char text[4096];
        struct pod *p = NULL;
        char *error = NULL;

        snprintf(text, sizeof(text),
                 "{\"metadata\":{\"name\":\"web\",\"namespace\":\"prod\",\"uid\":\"u1\",\"annotations\":{%s}},"
                 "\"spec\":{\"containers\":[{\"name\":\"main\",\"ports\":[%s]}]},"
                 "\"status\":{%s%s%s}}",
                 annotations, ports, ip ? "\"podIP\":\"" : "", ip ? ip : "", ip ? "\"" : "");
        assert_int_equal(pod_parse_json_text(text, strlen(text), NULL, &p, &error), 0);
        free(error);
        return p;
}

#define PORTS3 "{\"name\":\"http\",\"containerPort\":8080},{\"name\":\"admin\",\"containerPort\":9090},{\"containerPort\":7000}"

static void test_build_named_port_and_shard(void **state) {
        struct pod *p = pod_from("\"pinion.io/port\":\"http\",\"pinion.io/shard\":\"3\"", PORTS3, "10.1.2.3");
        struct serverset_entry e = {};
        char *error = NULL;
        (void) state;
        assert_int_equal(serverset_build(p, &e, &error), 0);
        assert_string_equal(e.alive, "{\"serviceEndpoint\":{\"host\":\"10.1.2.3\",\"port\":8080},"
                                     "\"additionalEndpoints\":{\"admin\":{\"host\":\"10.1.2.3\",\"port\":9090}},"
                                     "\"status\":\"ALIVE\",\"shard\":3}");
        /* the drain's data: the same, status STOPPING in its place */
        assert_string_equal(e.stopping, "{\"serviceEndpoint\":{\"host\":\"10.1.2.3\",\"port\":8080},"
                                        "\"additionalEndpoints\":{\"admin\":{\"host\":\"10.1.2.3\",\"port\":9090}},"
                                        "\"status\":\"STOPPING\",\"shard\":3}");
        assert_string_equal(e.endpoint, "10.1.2.3:8080");
        assert_string_equal(e.host, "10.1.2.3");
        assert_int_equal(e.port, 8080);
        serverset_entry_done(&e);
        pod_unref(p);
}

static void test_build_numeric_port_names_it_no_shard(void **state) {
        /* a number that is a named port: that name is the service, not an additional endpoint */
        struct pod *p = pod_from("\"pinion.io/port\":\"9090\"", PORTS3, "10.1.2.3");
        struct serverset_entry e = {};
        (void) state;
        assert_int_equal(serverset_build(p, &e, NULL), 0);
        assert_string_equal(e.stopping, "{\"serviceEndpoint\":{\"host\":\"10.1.2.3\",\"port\":9090},"
                                  "\"additionalEndpoints\":{\"http\":{\"host\":\"10.1.2.3\",\"port\":8080}},"
                                  "\"status\":\"STOPPING\"}");
        serverset_entry_done(&e);
        pod_unref(p);
}

static void test_build_default_port_and_ipv6(void **state) {
        struct pod *p = pod_from("", PORTS3, "fd00::5");
        struct serverset_entry e = {};
        (void) state;
        assert_int_equal(serverset_build(p, &e, NULL), 0);
        assert_non_null(strstr(e.alive, "\"serviceEndpoint\":{\"host\":\"fd00::5\",\"port\":8080}"));
        assert_string_equal(e.endpoint, "[fd00::5]:8080");
        assert_string_equal(e.host, "fd00::5");
        serverset_entry_done(&e);
        pod_unref(p);
}

static void test_build_errors(void **state) {
        static const struct {
                const char *annotations, *ports, *ip;
                int r;
                const char *error;
        } cases[] = {
                { "", PORTS3, NULL, -EADDRNOTAVAIL, "status.podIP" },
                { "\"pinion.io/port\":\"grpc\"", PORTS3, "10.0.0.1", -EINVAL, "pinion.io/port=grpc" },
                { "\"pinion.io/port\":\"0\"", PORTS3, "10.0.0.1", -EINVAL, "pinion.io/port=0" },
                { "\"pinion.io/port\":\"70000\"", PORTS3, "10.0.0.1", -EINVAL, "pinion.io/port=70000" },
                { "\"pinion.io/shard\":\"-1\"", PORTS3, "10.0.0.1", -EINVAL, "pinion.io/shard=-1" },
                { "\"pinion.io/shard\":\"1x\"", PORTS3, "10.0.0.1", -EINVAL, "pinion.io/shard=1x" },
                { "", "", "10.0.0.1", -EINVAL, "no container port" },
        };
        (void) state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct pod *p = pod_from(cases[i].annotations, cases[i].ports, cases[i].ip);
                struct serverset_entry e = {};
                char *error = NULL;
                assert_int_equal(serverset_build(p, &e, &error), cases[i].r);
                assert_null(e.alive);
                assert_null(e.endpoint);
                assert_non_null(error);
                if (!strstr(error, cases[i].error))
                        fail_msg("case %zu: '%s' does not mention '%s'", i, error, cases[i].error);
                free(error);
                pod_unref(p);
        }
}

static void test_parse_roundtrip_and_rejects(void **state) {
        struct serverset_member m;
        static const char ok[] = "{\"serviceEndpoint\":{\"host\":\"10.1.2.3\",\"port\":8080},\"status\":\"ALIVE\",\"shard\":2}";
        (void) state;
        assert_int_equal(serverset_parse(ok, strlen(ok), &m), 0);
        assert_string_equal(m.host, "10.1.2.3");
        assert_int_equal(m.port, 8080);
        assert_string_equal(m.status, "ALIVE");
        assert_int_equal(m.shard, 2);
        static const char *const bad[] = {
                "", "null", "[]", "{}", "{\"serviceEndpoint\":1}",
                "{\"serviceEndpoint\":{\"host\":\"h\"}}",
                "{\"serviceEndpoint\":{\"host\":\"h\",\"port\":0}}",
                "{\"serviceEndpoint\":{\"host\":\"h\",\"port\":65536}}",
                "{\"serviceEndpoint\":{\"host\":\"h\",\"port\":80.5}}",
                "{\"serviceEndpoint\":{\"host\":\"\",\"port\":80}}",
                "{\"serviceEndpoint\":{\"host\":5,\"port\":80}}",
                "{\"serviceEndpoint\":{\"host\":\"h\",\"port\":80}",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (serverset_parse(bad[i], strlen(bad[i]), &m) != -EINVAL)
                        fail_msg("accepted '%s'", bad[i]);
        /* not NUL-terminated: only size bytes count */
        char buf[sizeof(ok) + 8];
        memcpy(buf, ok, sizeof(ok) - 1);
        memcpy(buf + sizeof(ok) - 1, "garbage!", 8);
        assert_int_equal(serverset_parse(buf, sizeof(ok) - 1, &m), 0);
        /* what build writes, parse reads */
        struct pod *p = pod_from("\"pinion.io/shard\":\"7\"", PORTS3, "10.9.8.7");
        struct serverset_entry e = {};
        assert_int_equal(serverset_build(p, &e, NULL), 0);
        assert_int_equal(serverset_parse(e.alive, strlen(e.alive), &m), 0);
        assert_string_equal(m.host, "10.9.8.7");
        assert_int_equal(m.port, 8080);
        assert_int_equal(m.shard, 7);
        assert_string_equal(m.status, "ALIVE");
        assert_int_equal(serverset_parse(e.stopping, strlen(e.stopping), &m), 0);
        assert_string_equal(m.status, "STOPPING");
        assert_string_equal(m.host, e.host);
        assert_int_equal(m.port, e.port);
        serverset_entry_done(&e);
        pod_unref(p);
}

static void test_path_valid(void **state) {
        (void) state;
        assert_true(serverset_path_valid("/discovery/web/prod"));
        assert_true(serverset_path_valid("/a"));
        assert_false(serverset_path_valid(NULL));
        assert_false(serverset_path_valid(""));
        assert_false(serverset_path_valid("/"));
        assert_false(serverset_path_valid("relative/path"));
        assert_false(serverset_path_valid("/a/"));
        assert_false(serverset_path_valid("/a//b"));
        assert_false(serverset_path_valid("/a/./b"));
        assert_false(serverset_path_valid("/a/../b"));
        assert_false(serverset_path_valid("/a/\nb"));
        assert_false(serverset_path_valid("/zookeeper/quota"));
}

static void check_allowed(const char *path, char *const *prefixes, const char *ns, int want, const char *want_floor) {
        char *floor = (char *) 1, *error = (char *) 1;
        int r = serverset_path_allowed(path, prefixes, ns, &floor, &error);
        if (r != want)
                fail_msg("%s in namespace %s: %d, wanted %d (%s)", path, ns, r, want, error ? error : "");
        if (want == 0) {
                assert_null(error);
                if (want_floor)
                        assert_string_equal(floor, want_floor);
                else
                        assert_null(floor);
        } else {
                assert_null(floor);
                assert_non_null(error);
                assert_non_null(strstr(error, path));
        }
        free(floor);
        free(error);
}

static void test_path_allowed(void **state) {
        char *const none[] = { NULL };
        char *const list[] = { "/services/${namespace}", "/shared/web", NULL };
        char *const root[] = { "/", NULL };
        (void) state;

        /* no list: any path, but never deeper than the cap */
        check_allowed("/anything/at/all", NULL, "ns", 0, NULL);
        check_allowed("/anything/at/all", none, "ns", 0, NULL);
        check_allowed("/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16", NULL, "ns", 0, NULL);
        check_allowed("/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17", NULL, "ns", -E2BIG, NULL);
        check_allowed("/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17", root, "ns", -E2BIG, NULL);
        /* ${namespace} is the pod's namespace */
        check_allowed("/services/team-a/web", list, "team-a", 0, "/services/team-a");
        check_allowed("/services/team-a", list, "team-a", 0, "/services/team-a");
        check_allowed("/services/team-b/web", list, "team-a", -EPERM, NULL);
        /* segment-wise: /services/team-ab is not below /services/team-a */
        check_allowed("/services/team-ab/web", list, "team-a", -EPERM, NULL);
        check_allowed("/shared/webx/a", list, "team-a", -EPERM, NULL);
        check_allowed("/shared/web/a/b", list, "x", 0, "/shared/web");
        check_allowed("/shared", list, "x", -EPERM, NULL);
        /* a namespace that is not one segment matches no template */
        check_allowed("/services/a/b/web", list, "a/b", -EPERM, NULL);
        check_allowed("/services/web", list, "", -EPERM, NULL);
        check_allowed("/x/y", root, "ns", 0, "/");

        assert_true(serverset_prefix_valid("/"));
        assert_true(serverset_prefix_valid("/services/${namespace}"));
        assert_true(serverset_prefix_valid("/a"));
        assert_false(serverset_prefix_valid("services"));
        assert_false(serverset_prefix_valid("/a/"));
        assert_false(serverset_prefix_valid("/a/../b"));
        assert_false(serverset_prefix_valid(""));
        assert_false(serverset_prefix_valid(NULL));
        assert_false(serverset_prefix_valid("/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17"));
}

static void test_health_spec(void **state) {
        struct health_spec s;
        char *error = NULL;
        struct pod *p;
        (void) state;

        p = pod_from("", PORTS3, "10.0.0.1");
        assert_int_equal(health_spec_from_pod(p, &s, &error), 0);
        assert_int_equal(s.kind, HEALTH_NONE);
        assert_int_equal(s.interval, 2 * USEC_PER_SEC);
        assert_int_equal(s.timeout, USEC_PER_SEC);
        assert_int_equal(s.rise, 2);
        assert_int_equal(s.fall, 2);
        pod_unref(p);

        p = pod_from("\"pinion.io/health\":\"http:/healthz?x=1\",\"pinion.io/health-interval\":\"500ms\","
                     "\"pinion.io/health-timeout\":\"2s\",\"pinion.io/health-rise\":\"3\",\"pinion.io/health-fall\":\"1\"",
                     PORTS3, "10.0.0.1");
        assert_int_equal(health_spec_from_pod(p, &s, &error), 0);
        assert_int_equal(s.kind, HEALTH_HTTP);
        assert_string_equal(s.path, "/healthz?x=1");
        assert_int_equal(s.interval, 500 * USEC_PER_MSEC);
        assert_int_equal(s.timeout, 500 * USEC_PER_MSEC); /* clamped to the interval */
        assert_int_equal(s.rise, 3);
        assert_int_equal(s.fall, 1);
        pod_unref(p);

        p = pod_from("\"pinion.io/health\":\"tcp\"", PORTS3, "10.0.0.1");
        assert_int_equal(health_spec_from_pod(p, &s, &error), 0);
        assert_int_equal(s.kind, HEALTH_TCP);
        pod_unref(p);

        static const char *const bad[] = {
                "\"pinion.io/health\":\"udp\"",
                "\"pinion.io/health\":\"http:healthz\"",
                "\"pinion.io/health\":\"http:/a b\"",
                "\"pinion.io/health\":\"tcp\",\"pinion.io/health-interval\":\"1us\"",
                "\"pinion.io/health\":\"tcp\",\"pinion.io/health-rise\":\"0\"",
                "\"pinion.io/health\":\"tcp\",\"pinion.io/health-fall\":\"many\"",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                p = pod_from(bad[i], PORTS3, "10.0.0.1");
                error = NULL;
                if (health_spec_from_pod(p, &s, &error) != -EINVAL || !error || !strstr(error, "pinion.io/health"))
                        fail_msg("case %zu accepted or unclear: %s", i, error ? error : "(no error)");
                free(error);
                pod_unref(p);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_build_named_port_and_shard),
                cmocka_unit_test(test_build_numeric_port_names_it_no_shard),
                cmocka_unit_test(test_build_default_port_and_ipv6),
                cmocka_unit_test(test_build_errors),
                cmocka_unit_test(test_parse_roundtrip_and_rejects),
                cmocka_unit_test(test_path_valid),
                cmocka_unit_test(test_path_allowed),
                cmocka_unit_test(test_health_spec),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
