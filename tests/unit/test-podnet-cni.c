/* SPDX-License-Identifier: MIT */
/* The CNI protocol parser (modules/podnet/cni.c, cni-json.c): environment, network config, request body. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "cni-json.h"
#include "json.h"

struct env {
        const char *kv[16]; /* "NAME=value" */
};

static const char *env_get(const char *name, void *userdata) {
        const struct env *e = userdata;
        size_t n = strlen(name);
        for (size_t i = 0; i < ELEMENTSOF(e->kv) && e->kv[i]; i++)
                if (strncmp(e->kv[i], name, n) == 0 && e->kv[i][n] == '=')
                        return e->kv[i] + n + 1;
        return NULL;
}

static int parse_env(struct env *e, struct cni_request *r, struct cni_error *err) {
        *r = (struct cni_request) { .command = _CNI_COMMAND_INVALID };
        return cni_request_from_env(r, env_get, e, err);
}

static void test_env_ok(void **state) {
        struct env e = { { "CNI_COMMAND=ADD", "CNI_CONTAINERID=abc-1.2_3", "CNI_NETNS=/var/run/netns/x",
                           "CNI_IFNAME=eth0",
                           "CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web;K8S_POD_UID=u-1;K8S_POD_INFRA_CONTAINER_ID=abc" } };
        struct cni_request r;
        struct cni_error err = {};

        assert_int_equal(parse_env(&e, &r, &err), 0);
        assert_int_equal(r.command, CNI_ADD);
        assert_string_equal(r.container_id, "abc-1.2_3");
        assert_string_equal(r.netns, "/var/run/netns/x");
        assert_string_equal(r.ifname, "eth0");
        assert_string_equal(r.k8s_namespace, "ns");
        assert_string_equal(r.k8s_name, "web");
        assert_string_equal(r.k8s_uid, "u-1");
        cni_json_request_done(&r);

        /* DEL without a namespace is fine; GC and STATUS need nothing. */
        struct env d = { { "CNI_COMMAND=DEL", "CNI_CONTAINERID=abc", "CNI_IFNAME=eth0" } };
        assert_int_equal(parse_env(&d, &r, &err), 0);
        assert_null(r.netns);
        cni_json_request_done(&r);
        struct env g = { { "CNI_COMMAND=GC" } };
        assert_int_equal(parse_env(&g, &r, &err), 0);
        cni_json_request_done(&r);
}

static void expect_env_error(struct env e, const char *why) {
        struct cni_request r;
        struct cni_error err = {};
        assert_int_equal(parse_env(&e, &r, &err), -EINVAL);
        if (err.code != CNI_ERR_INVALID_ENV)
                fail_msg("%s: code %d", why, err.code);
        assert_non_null(err.msg);
        cni_error_done(&err);
        cni_json_request_done(&r);
}

static void test_env_errors(void **state) {
        expect_env_error((struct env) { { NULL } }, "no command");
        expect_env_error((struct env) { { "CNI_COMMAND=ATTACH" } }, "unknown command");
        expect_env_error((struct env) { { "CNI_COMMAND=ADD", "CNI_NETNS=/n", "CNI_IFNAME=eth0" } }, "no id");
        expect_env_error((struct env) { { "CNI_COMMAND=ADD", "CNI_CONTAINERID=-x", "CNI_NETNS=/n", "CNI_IFNAME=eth0" } }, "bad id");
        expect_env_error((struct env) { { "CNI_COMMAND=ADD", "CNI_CONTAINERID=x", "CNI_IFNAME=eth0" } }, "no netns");
        expect_env_error((struct env) { { "CNI_COMMAND=ADD", "CNI_CONTAINERID=x", "CNI_NETNS=rel", "CNI_IFNAME=eth0" } }, "relative netns");
        expect_env_error((struct env) { { "CNI_COMMAND=ADD", "CNI_CONTAINERID=x", "CNI_NETNS=/n", "CNI_IFNAME=eth0123456789abcdef" } }, "long ifname");
        expect_env_error((struct env) { { "CNI_COMMAND=ADD", "CNI_CONTAINERID=x", "CNI_NETNS=/n", "CNI_IFNAME=a/b" } }, "slash ifname");
        expect_env_error((struct env) { { "CNI_COMMAND=ADD", "CNI_CONTAINERID=x", "CNI_NETNS=/n", "CNI_IFNAME=eth0", "CNI_ARGS=FOO=1" } }, "unknown arg");
        expect_env_error((struct env) { { "CNI_COMMAND=ADD", "CNI_CONTAINERID=x", "CNI_NETNS=/n", "CNI_IFNAME=eth0", "CNI_ARGS=novalue" } }, "no =");
}

static int parse_conf(enum cni_command c, const char *text, struct cni_request *r, struct cni_error *err) {
        *r = (struct cni_request) { .command = c };
        return cni_json_parse_config(r, text, strlen(text), err);
}

static void expect_conf(enum cni_command c, const char *text, int code) {
        struct cni_request r;
        struct cni_error err = {};
        int k = parse_conf(c, text, &r, &err);
        if (code == 0 && k != 0)
                fail_msg("%s: %d %s", text, err.code, strempty(err.details));
        if (code != 0 && (k != -EINVAL || err.code != code))
                fail_msg("%s: expected code %d, got %d (%d)", text, code, err.code, k);
        cni_error_done(&err);
        cni_json_request_done(&r);
}

static void test_config(void **state) {
        expect_conf(CNI_ADD, "{\"cniVersion\":\"1.1.0\",\"name\":\"pinion\",\"type\":\"pinion-cni\"}", 0);
        expect_conf(CNI_ADD, "{\"cniVersion\":\"0.4.0\",\"name\":\"n\",\"type\":\"t\",\"socket\":\"/run/x.sock\"}", 0);
        expect_conf(CNI_ADD, "", CNI_ERR_DECODE);
        expect_conf(CNI_ADD, "{nope", CNI_ERR_DECODE);
        expect_conf(CNI_ADD, "[1]", CNI_ERR_INVALID_CONFIG);
        expect_conf(CNI_ADD, "{\"name\":\"n\",\"type\":\"t\"}", CNI_ERR_INVALID_CONFIG);
        expect_conf(CNI_ADD, "{\"cniVersion\":\"9.9.9\",\"name\":\"n\",\"type\":\"t\"}", CNI_ERR_INCOMPATIBLE_VERSION);
        expect_conf(CNI_ADD, "{\"cniVersion\":\"1.1.0\",\"type\":\"t\"}", CNI_ERR_INVALID_CONFIG);
        expect_conf(CNI_ADD, "{\"cniVersion\":\"1.1.0\",\"name\":\"n\"}", CNI_ERR_INVALID_CONFIG);
        expect_conf(CNI_ADD, "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"socket\":\"rel\"}", CNI_ERR_INVALID_CONFIG);
        expect_conf(CNI_ADD, "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"prevResult\":[]}", CNI_ERR_INVALID_CONFIG);
        /* routes and dns are extended by ADD: their shape is checked before anything is wired. */
        expect_conf(CNI_ADD, "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"prevResult\":{\"routes\":\"x\"}}",
                    CNI_ERR_INVALID_CONFIG);
        expect_conf(CNI_ADD, "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"prevResult\":{\"routes\":{}}}",
                    CNI_ERR_INVALID_CONFIG);
        expect_conf(CNI_ADD, "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"prevResult\":{\"dns\":[]}}",
                    CNI_ERR_INVALID_CONFIG);
        expect_conf(CNI_ADD, "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"prevResult\":{\"dns\":\"x\"}}",
                    CNI_ERR_INVALID_CONFIG);
        expect_conf(CNI_ADD, "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"prevResult\":{\"routes\":[],\"dns\":{}}}", 0);
        expect_conf(CNI_CHECK, "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\"}", CNI_ERR_INVALID_CONFIG);
        expect_conf(CNI_CHECK, "{\"cniVersion\":\"0.3.1\",\"name\":\"n\",\"type\":\"t\"}", CNI_ERR_INCOMPATIBLE_VERSION);
        expect_conf(CNI_GC, "{\"cniVersion\":\"1.0.0\",\"name\":\"n\",\"type\":\"t\"}", CNI_ERR_INCOMPATIBLE_VERSION);
        expect_conf(CNI_GC, "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"cni.dev/valid-attachments\":{}}", CNI_ERR_INVALID_CONFIG);
        expect_conf(CNI_GC, "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"cni.dev/valid-attachments\":[{\"containerID\":1}]}", CNI_ERR_INVALID_CONFIG);
        expect_conf(CNI_VERSION, "{\"cniVersion\":\"1.0.0\"}", 0);
}

static void test_gc_and_prev_result(void **state) {
        struct cni_request r;
        struct cni_error err = {};
        assert_int_equal(parse_conf(CNI_GC,
                                    "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"cni.dev/valid-attachments\":"
                                    "[{\"containerID\":\"a\",\"ifname\":\"eth0\"},{\"containerID\":\"b\",\"ifname\":\"net1\"}]}",
                                    &r, &err), 0);
        assert_true(r.has_valid);
        assert_int_equal(r.n_valid, 2);
        assert_string_equal(r.valid[1].container_id, "b");
        assert_string_equal(r.valid[1].ifname, "net1");
        cni_json_request_done(&r);

        assert_int_equal(parse_conf(CNI_CHECK,
                                    "{\"cniVersion\":\"1.1.0\",\"name\":\"n\",\"type\":\"t\",\"prevResult\":{\"ips\":[{\"address\":\"10.0.0.1/32\"}]}}",
                                    &r, &err), 0);
        assert_non_null(r.prev_result);
        cni_json_request_done(&r);
}

/* What the plugin sends is what the agent parses, with the same checks. */
static void test_request_roundtrip(void **state) {
        struct env e = { { "CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/var/run/netns/x", "CNI_IFNAME=eth0",
                           "CNI_ARGS=K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web;K8S_POD_UID=u1" } };
        const char *conf = "{\"cniVersion\":\"1.1.0\",\"name\":\"pinion\",\"type\":\"pinion-cni\"}";
        struct cni_request r, back = { .command = _CNI_COMMAND_INVALID };
        struct cni_error err = {};

        assert_int_equal(parse_env(&e, &r, &err), 0);
        assert_int_equal(cni_json_parse_config(&r, conf, strlen(conf), &err), 0);
        _cleanup_free_ char *text = NULL;
        assert_int_equal(cni_request_body(&r, conf, strlen(conf), &text), 0);
        assert_int_equal(cni_json_parse_request(&back, text, strlen(text), &err), 0);
        assert_int_equal(back.command, CNI_ADD);
        assert_string_equal(back.container_id, "c1");
        assert_string_equal(back.netns, "/var/run/netns/x");
        assert_string_equal(back.k8s_uid, "u1");
        assert_string_equal(back.network_name, "pinion");
        cni_json_request_done(&back);
        cni_json_request_done(&r);

        /* Unknown fields and wrong types in the body are refused. */
        const char *bad[] = {
                "{\"command\":\"ADD\",\"extra\":1}",
                "{\"command\":5}",
                "{\"command\":\"DEL\",\"containerID\":\"c\",\"ifname\":\"eth0\"}", /* no config */
                "null",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                back = (struct cni_request) { .command = _CNI_COMMAND_INVALID };
                assert_int_equal(cni_json_parse_request(&back, bad[i], strlen(bad[i]), &err), -EINVAL);
                assert_true(err.code > 0);
                cni_json_request_done(&back);
        }
        cni_error_done(&err);
}

/* Requested addresses: CNI_ARGS IP= (one per family, an optional prefix length), runtimeConfig
 * ips in its place when both come, forwarded to the agent; only an ADD parses them. */
static void test_requested_ips(void **state) {
        struct env e = { { "CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/n", "CNI_IFNAME=eth0",
                           "CNI_ARGS=IgnoreUnknown=1;IP=10.1.2.3/24,FD00:0::3" } };
        const char *conf = "{\"cniVersion\":\"1.0.0\",\"name\":\"pinion\",\"type\":\"pinion-cni\"}";
        const char *rc = "{\"cniVersion\":\"1.0.0\",\"name\":\"pinion\",\"type\":\"pinion-cni\","
                         "\"runtimeConfig\":{\"ips\":[\"10.1.2.9/24\"]}}";
        struct cni_request r, back = { .command = _CNI_COMMAND_INVALID };
        struct cni_error err = {};

        assert_int_equal(parse_env(&e, &r, &err), 0);
        assert_int_equal(cni_json_parse_config(&r, conf, strlen(conf), &err), 0);
        assert_string_equal(r.requested_ip4, "10.1.2.3");
        assert_string_equal(r.requested_ip6, "fd00::3");
        _cleanup_free_ char *text = NULL;
        assert_int_equal(cni_request_body(&r, conf, strlen(conf), &text), 0);
        assert_int_equal(cni_json_parse_request(&back, text, strlen(text), &err), 0);
        assert_string_equal(back.requested_ip4, "10.1.2.3");
        assert_string_equal(back.requested_ip6, "fd00::3");
        cni_json_request_done(&back);
        cni_json_request_done(&r);

        assert_int_equal(parse_env(&e, &r, &err), 0);
        assert_int_equal(cni_json_parse_config(&r, rc, strlen(rc), &err), 0);
        assert_string_equal(r.requested_ip4, "10.1.2.9");
        assert_null(r.requested_ip6);
        cni_json_request_done(&r);

        const char *bad_args[] = { "IP=10.1.2", "IP=10.1.2.3,10.1.2.4", "IP=10.1.2.3/33", "IP=fd00::1/x", "IP=" "/24" };
        for (size_t i = 0; i < ELEMENTSOF(bad_args); i++) {
                char args[64];
                snprintf(args, sizeof(args), "CNI_ARGS=%s", bad_args[i]);
                struct env b = { { "CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/n", "CNI_IFNAME=eth0", args } };
                assert_int_equal(parse_env(&b, &r, &err), -EINVAL);
                assert_int_equal(err.code, CNI_ERR_INVALID_ENV);
                cni_json_request_done(&r);
                /* A DEL is not refused over them. */
                b.kv[0] = "CNI_COMMAND=DEL";
                assert_int_equal(parse_env(&b, &r, &err), 0);
                cni_json_request_done(&r);
        }
        const char *bad_conf[] = {
                "{\"cniVersion\":\"1.0.0\",\"name\":\"p\",\"type\":\"t\",\"runtimeConfig\":{\"ips\":\"10.1.2.3\"}}",
                "{\"cniVersion\":\"1.0.0\",\"name\":\"p\",\"type\":\"t\",\"runtimeConfig\":{\"ips\":[7]}}",
                "{\"cniVersion\":\"1.0.0\",\"name\":\"p\",\"type\":\"t\",\"runtimeConfig\":{\"ips\":[\"fd00::1\",\"fd00::2\"]}}",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad_conf); i++) {
                assert_int_equal(parse_env(&e, &r, &err), 0);
                assert_int_equal(cni_json_parse_config(&r, bad_conf[i], strlen(bad_conf[i]), &err), -EINVAL);
                assert_int_equal(err.code, CNI_ERR_INVALID_CONFIG);
                cni_json_request_done(&r);
        }
        cni_error_done(&err);
}

static void test_versions(void **state) {
        assert_true(cni_version_compare("1.0.0", "1.1.0") < 0);
        assert_true(cni_version_compare("0.4.0", "0.3.1") > 0);
        assert_int_equal(cni_version_compare("1.1.0", "1.1.0"), 0);
        assert_true(cni_version_supported("1.1.0"));
        assert_false(cni_version_supported("1.2.0"));
        _cleanup_(cJSON_Deletep) cJSON *v = cni_json_version_result("1.0.0");
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(v, "supportedVersions")), 5);
        struct cni_error e = { .code = 7, .msg = (char *) "m" };
        _cleanup_(cJSON_Deletep) cJSON *ej = cni_json_error(&e, NULL);
        assert_int_equal(cJSON_GetObjectItem(ej, "code")->valueint, 7);
        assert_string_equal(cJSON_GetObjectItem(ej, "cniVersion")->valuestring, "1.1.0");
}

static void test_mac(void **state) {
        static const char *const good[] = { "0a:58:0a:f4:01:07", "0A-58-0A-F4-01-07", "02:00:00:00:00:00" };
        static const char *const bad[] = { "01:00:5e:00:00:01", "ff:ff:ff:ff:ff:ff", "00:00:00:00:00:00",
                                           "0a:58:0a:f4:01", "0a:58:0a:f4:01:07:", "0a-58:0a:f4:01:07",
                                           "0g:58:0a:f4:01:07", " a:58:0a:f4:01:07", "" };
        uint8_t m[6];

        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                assert_int_equal(cni_mac_parse(good[i], m), 0);
        assert_int_equal(m[0], 0x02);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(cni_mac_parse(bad[i], m), -EINVAL);
        assert_int_equal(cni_mac_parse(NULL, m), -EINVAL);

        /* CNI_ARGS MAC= and runtimeConfig.mac (which wins), canonical, and through the agent's body. */
        struct env e = { { "CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/var/run/netns/x", "CNI_IFNAME=eth0",
                           "CNI_ARGS=MAC=0A:58:0A:F4:01:07" } };
        struct cni_request r, back = { .command = _CNI_COMMAND_INVALID };
        struct cni_error err = {};
        assert_int_equal(parse_env(&e, &r, &err), 0);
        assert_string_equal(r.mac, "0a:58:0a:f4:01:07");
        const char *conf = "{\"cniVersion\":\"1.0.0\",\"name\":\"p\",\"type\":\"pinion-cni\","
                           "\"runtimeConfig\":{\"mac\":\"02:00:00:00:BE:EF\"}}";
        assert_int_equal(cni_json_parse_config(&r, conf, strlen(conf), &err), 0);
        assert_string_equal(r.mac, "02:00:00:00:be:ef");
        _cleanup_free_ char *text = NULL;
        assert_int_equal(cni_request_body(&r, conf, strlen(conf), &text), 0);
        assert_int_equal(cni_json_parse_request(&back, text, strlen(text), &err), 0);
        assert_string_equal(back.mac, "02:00:00:00:be:ef");
        cni_json_request_done(&back);
        cni_json_request_done(&r);

        struct env b = { { "CNI_COMMAND=ADD", "CNI_CONTAINERID=c1", "CNI_NETNS=/var/run/netns/x", "CNI_IFNAME=eth0",
                           "CNI_ARGS=MAC=01:00:5e:00:00:01" } };
        assert_int_equal(parse_env(&b, &r, &err), -EINVAL);
        assert_int_equal(err.code, CNI_ERR_INVALID_ENV);
        cni_json_request_done(&r);
        assert_int_equal(parse_env(&e, &r, &err), 0);
        const char *badconf = "{\"cniVersion\":\"1.0.0\",\"name\":\"p\",\"type\":\"pinion-cni\","
                              "\"runtimeConfig\":{\"mac\":7}}";
        assert_int_equal(cni_json_parse_config(&r, badconf, strlen(badconf), &err), -EINVAL);
        assert_int_equal(err.code, CNI_ERR_INVALID_CONFIG);
        cni_json_request_done(&r);
        cni_error_done(&err);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_env_ok),
                cmocka_unit_test(test_env_errors),
                cmocka_unit_test(test_config),
                cmocka_unit_test(test_gc_and_prev_result),
                cmocka_unit_test(test_request_roundtrip),
                cmocka_unit_test(test_requested_ips),
                cmocka_unit_test(test_versions),
                cmocka_unit_test(test_mac),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
