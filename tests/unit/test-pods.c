/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pods.h"
#include "strv.h"

/* What `kubectl get pod -o json` prints for a Deployment's pod: several containers, named and
 * unnamed ports, dual-stack podIPs, the usual conditions and all the fields the agent ignores. */
static const char FULL_POD[] =
        "{\n"
        "    \"apiVersion\": \"v1\",\n"
        "    \"kind\": \"Pod\",\n"
        "    \"metadata\": {\n"
        "        \"annotations\": {\n"
        "            \"pinion.io/serverset\": \"/discovery/web/prod\",\n"
        "            \"pinion.io/port\": \"http\",\n"
        "            \"pinion.io/configs\": \"web,tls\",\n"
        "            \"kubectl.kubernetes.io/restartedAt\": \"2026-11-20T09:12:44Z\"\n"
        "        },\n"
        "        \"creationTimestamp\": \"2026-11-21T08:01:02Z\",\n"
        "        \"generateName\": \"web-7c9f6d5b8-\",\n"
        "        \"labels\": {\n"
        "            \"tier\": \"frontend\",\n"
        "            \"app\": \"web\",\n"
        "            \"pod-template-hash\": \"7c9f6d5b8\"\n"
        "        },\n"
        "        \"name\": \"web-7c9f6d5b8-x2lqz\",\n"
        "        \"namespace\": \"prod\",\n"
        "        \"ownerReferences\": [\n"
        "            {\n"
        "                \"apiVersion\": \"apps/v1\",\n"
        "                \"blockOwnerDeletion\": true,\n"
        "                \"controller\": true,\n"
        "                \"kind\": \"ReplicaSet\",\n"
        "                \"name\": \"web-7c9f6d5b8\",\n"
        "                \"uid\": \"0b9d4c1e-2f3a-4e5b-8c7d-6a5b4c3d2e1f\"\n"
        "            }\n"
        "        ],\n"
        "        \"resourceVersion\": \"48213377\",\n"
        "        \"uid\": \"5f0c3a2e-8d1b-4b7e-9a55-0d7f3c2b1a90\"\n"
        "    },\n"
        "    \"spec\": {\n"
        "        \"containers\": [\n"
        "            {\n"
        "                \"image\": \"registry.example.com/web:1.42.0\",\n"
        "                \"imagePullPolicy\": \"IfNotPresent\",\n"
        "                \"name\": \"web\",\n"
        "                \"ports\": [\n"
        "                    { \"containerPort\": 8080, \"name\": \"http\", \"protocol\": \"TCP\" },\n"
        "                    { \"containerPort\": 9090, \"name\": \"metrics\", \"protocol\": \"TCP\" }\n"
        "                ],\n"
        "                \"readinessProbe\": {\n"
        "                    \"failureThreshold\": 3,\n"
        "                    \"httpGet\": { \"path\": \"/healthz\", \"port\": \"http\", \"scheme\": \"HTTP\" },\n"
        "                    \"periodSeconds\": 10\n"
        "                },\n"
        "                \"resources\": {\n"
        "                    \"limits\": { \"memory\": \"512Mi\" },\n"
        "                    \"requests\": { \"cpu\": \"250m\", \"memory\": \"256Mi\" }\n"
        "                },\n"
        "                \"terminationMessagePath\": \"/dev/termination-log\",\n"
        "                \"volumeMounts\": [\n"
        "                    { \"mountPath\": \"/var/run/secrets/kubernetes.io/serviceaccount\",\n"
        "                      \"name\": \"kube-api-access-9xk2p\", \"readOnly\": true }\n"
        "                ]\n"
        "            },\n"
        "            {\n"
        "                \"image\": \"envoyproxy/envoy:v1.30.1\",\n"
        "                \"name\": \"envoy\",\n"
        "                \"ports\": [\n"
        "                    { \"containerPort\": 15001, \"name\": \"proxy\" },\n"
        "                    { \"containerPort\": 15090, \"protocol\": \"UDP\" }\n"
        "                ]\n"
        "            },\n"
        "            {\n"
        "                \"env\": [ { \"name\": \"LOG_LEVEL\", \"value\": \"info\" } ],\n"
        "                \"image\": \"fluent/fluent-bit:3.0\",\n"
        "                \"name\": \"logship\"\n"
        "            }\n"
        "        ],\n"
        "        \"dnsPolicy\": \"ClusterFirst\",\n"
        "        \"enableServiceLinks\": true,\n"
        "        \"nodeName\": \"node-17.dc1\",\n"
        "        \"preemptionPolicy\": \"PreemptLowerPriority\",\n"
        "        \"priority\": 0,\n"
        "        \"restartPolicy\": \"Always\",\n"
        "        \"schedulerName\": \"default-scheduler\",\n"
        "        \"securityContext\": {},\n"
        "        \"serviceAccount\": \"web\",\n"
        "        \"serviceAccountName\": \"web\",\n"
        "        \"terminationGracePeriodSeconds\": 30,\n"
        "        \"tolerations\": [\n"
        "            { \"effect\": \"NoExecute\", \"key\": \"node.kubernetes.io/not-ready\",\n"
        "              \"operator\": \"Exists\", \"tolerationSeconds\": 300 }\n"
        "        ],\n"
        "        \"volumes\": [ { \"name\": \"kube-api-access-9xk2p\", \"projected\": { \"defaultMode\": 420 } } ]\n"
        "    },\n"
        "    \"status\": {\n"
        "        \"conditions\": [\n"
        "            { \"lastProbeTime\": null, \"lastTransitionTime\": \"2026-11-21T08:01:04Z\",\n"
        "              \"status\": \"True\", \"type\": \"PodReadyToStartContainers\" },\n"
        "            { \"lastProbeTime\": null, \"lastTransitionTime\": \"2026-11-21T08:01:02Z\",\n"
        "              \"status\": \"True\", \"type\": \"Initialized\" },\n"
        "            { \"lastProbeTime\": null, \"lastTransitionTime\": \"2026-11-21T08:01:15Z\",\n"
        "              \"status\": \"True\", \"type\": \"Ready\" },\n"
        "            { \"lastProbeTime\": null, \"lastTransitionTime\": \"2026-11-21T08:01:15Z\",\n"
        "              \"status\": \"False\", \"type\": \"ContainersReady\" },\n"
        "            { \"lastProbeTime\": null, \"lastTransitionTime\": \"2026-11-21T08:01:02Z\",\n"
        "              \"status\": \"True\", \"type\": \"PodScheduled\" }\n"
        "        ],\n"
        "        \"containerStatuses\": [\n"
        "            { \"containerID\": \"containerd://4f1c9e6bd2a04d4c8ba1f0e3c9a7d6b5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9\",\n"
        "              \"image\": \"registry.example.com/web:1.42.0\",\n"
        "              \"name\": \"web\", \"ready\": true, \"restartCount\": 0, \"started\": true,\n"
        "              \"state\": { \"running\": { \"startedAt\": \"2026-11-21T08:01:05Z\" } } },\n"
        "            { \"containerID\": \"cri-o://0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\",\n"
        "              \"name\": \"proxy\", \"ready\": true, \"restartCount\": 1, \"started\": true }\n"
        "        ],\n"
        "        \"initContainerStatuses\": [\n"
        "            { \"containerID\": \"docker://aaaabbbbccccddddeeeeffff00001111222233334444555566667777888899990\",\n"
        "              \"name\": \"init\", \"ready\": false, \"restartCount\": 0,\n"
        "              \"state\": { \"terminated\": { \"exitCode\": 0 } } }\n"
        "        ],\n"
        "        \"ephemeralContainerStatuses\": [\n"
        "            { \"name\": \"debugger\", \"ready\": false, \"restartCount\": 0,\n"
        "              \"state\": { \"waiting\": { \"reason\": \"ContainerCreating\" } } }\n"
        "        ],\n"
        "        \"hostIP\": \"10.20.30.17\",\n"
        "        \"hostIPs\": [ { \"ip\": \"10.20.30.17\" } ],\n"
        "        \"phase\": \"Running\",\n"
        "        \"podIP\": \"10.244.17.23\",\n"
        "        \"podIPs\": [ { \"ip\": \"10.244.17.23\" }, { \"ip\": \"fd00:10:244:17::17\" } ],\n"
        "        \"qosClass\": \"Burstable\",\n"
        "        \"startTime\": \"2026-11-21T08:01:02Z\"\n"
        "    }\n"
        "}\n";

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

static struct pod *parse_ok(const char *text) {
        struct pod *p = NULL;
        _cleanup_free_ char *error = NULL;
        int r = pod_parse_json_text(text, strlen(text), NULL, &p, &error);
        if (r < 0)
                fail_msg("parse failed: %d %s", r, strempty(error));
        return p;
}

/* The full pod with one change: path is dot-separated (numbers index arrays); value is JSON, or
 * NULL to delete the field. */
static cJSON *full_with(const char *path, const char *value) {
        cJSON *root = cJSON_Parse(FULL_POD), *parent = NULL, *node = root;
        _cleanup_strv_free_ char **parts = NULL;
        const char *last = NULL;

        assert_non_null(root);
        assert_int_equal(strv_split(path, ".", &parts), 0);
        STRV_FOREACH(part, parts) {
                parent = node;
                last = *part;
                if (!node)
                        fail_msg("%s: no such path", path);
                node = cJSON_IsArray(node) ? cJSON_GetArrayItem(node, atoi(*part))
                                           : cJSON_GetObjectItemCaseSensitive(node, *part);
        }

        if (!value) {
                if (cJSON_IsArray(parent))
                        cJSON_DeleteItemFromArray(parent, atoi(last));
                else
                        cJSON_DeleteItemFromObjectCaseSensitive(parent, last);
                return root;
        }

        cJSON *v = cJSON_Parse(value);
        assert_non_null(v);
        if (cJSON_IsArray(parent)) {
                assert_non_null(node);
                cJSON_ReplaceItemInArray(parent, atoi(last), v);
        } else if (node)
                cJSON_ReplaceItemInObjectCaseSensitive(parent, last, v);
        else
                cJSON_AddItemToObject(parent, last, v);
        return root;
}

static struct pod *parse_full_with(const char *path, const char *value) {
        _cleanup_(cJSON_Deletep) cJSON *obj = full_with(path, value);
        _cleanup_free_ char *error = NULL;
        struct pod *p = NULL;
        int r = pod_parse_json(obj, NULL, &p, &error);
        if (r < 0)
                fail_msg("%s=%s: parse failed: %d %s", path, strempty(value), r, strempty(error));
        return p;
}

/* ---- parsing ---- */

static void test_parse_full(void **state) {
        _cleanup_(pod_unrefp) struct pod *p = parse_ok(FULL_POD);

        assert_string_equal(p->uid, "5f0c3a2e-8d1b-4b7e-9a55-0d7f3c2b1a90");
        assert_string_equal(p->namespace, "prod");
        assert_string_equal(p->name, "web-7c9f6d5b8-x2lqz");
        assert_string_equal(p->node_name, "node-17.dc1");
        assert_string_equal(p->service_account, "web");
        assert_string_equal(p->phase, "Running");
        assert_string_equal(p->resource_version, "48213377");
        assert_false(p->host_network);
        assert_null(p->source);

        assert_int_equal(strv_length(p->ips), 2);
        assert_string_equal(p->ips[0], "10.244.17.23");
        assert_string_equal(p->ips[1], "fd00:10:244:17::17");
        assert_string_equal(pod_primary_ip(p), "10.244.17.23");

        /* Every started container of every list, without its runtime, lowercase; the ephemeral
         * container not started yet has no ID. */
        assert_int_equal(strv_length(p->container_ids), 3);
        assert_string_equal(p->container_ids[0], "4f1c9e6bd2a04d4c8ba1f0e3c9a7d6b5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9");
        assert_string_equal(p->container_ids[1], "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
        assert_string_equal(p->container_ids[2], "aaaabbbbccccddddeeeeffff00001111222233334444555566667777888899990");
        assert_true(pod_has_container(p, "4f1c9e6bd2a04d4c8ba1f0e3c9a7d6b5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9"));
        assert_true(pod_has_container(p, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
        assert_false(pod_has_container(p, "4f1c9e6bd2a04d4c8ba1f0e3c9a7d6b5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b8"));
        assert_false(pod_has_container(p, NULL));

        assert_int_equal(p->n_conditions, 5);
        assert_string_equal(p->conditions[0].type, "PodReadyToStartContainers");
        assert_true(pod_is_ready(p));
        assert_true(pod_condition(p, "PodScheduled"));
        assert_false(pod_condition(p, "ContainersReady"));
        assert_false(pod_condition(p, "NoSuchCondition"));

        assert_int_equal(p->n_annotations, 4);
        assert_string_equal(p->annotations[0].key, "kubectl.kubernetes.io/restartedAt");
        assert_string_equal(p->annotations[1].key, "pinion.io/configs");
        assert_string_equal(p->annotations[2].key, "pinion.io/port");
        assert_string_equal(p->annotations[3].key, "pinion.io/serverset");
        assert_string_equal(pod_annotation(p, "pinion.io/serverset"), "/discovery/web/prod");
        assert_string_equal(pod_annotation(p, "pinion.io/port"), "http");
        assert_null(pod_annotation(p, "pinion.io/shard"));

        assert_int_equal(p->n_labels, 3);
        assert_string_equal(p->labels[0].key, "app");
        assert_string_equal(p->labels[0].value, "web");
        assert_string_equal(p->labels[1].key, "pod-template-hash");
        assert_string_equal(p->labels[2].key, "tier");

        assert_int_equal(p->n_ports, 4);
        assert_string_equal(p->ports[0].name, "http");
        assert_int_equal(p->ports[0].port, 8080);
        assert_string_equal(p->ports[0].protocol, "TCP");
        assert_string_equal(p->ports[1].name, "metrics");
        assert_int_equal(p->ports[1].port, 9090);
        assert_string_equal(p->ports[2].name, "proxy");
        assert_int_equal(p->ports[2].port, 15001);
        assert_string_equal(p->ports[2].protocol, "TCP"); /* defaulted */
        assert_null(p->ports[3].name);
        assert_int_equal(p->ports[3].port, 15090);
        assert_string_equal(p->ports[3].protocol, "UDP");
}

static void test_parse_defaults(void **state) {
        static const char text[] = "{\"metadata\":{\"name\":\"solo\",\"uid\":\"u-1\"}}";
        _cleanup_(pod_unrefp) struct pod *p = parse_ok(text);

        assert_string_equal(p->namespace, "default");
        assert_string_equal(p->phase, "Pending");
        assert_string_equal(p->service_account, "default");
        assert_null(p->node_name);
        assert_null(p->resource_version);
        assert_false(p->host_network);
        assert_non_null(p->ips);
        assert_null(p->ips[0]);
        assert_int_equal(strv_length(p->container_ids), 0);
        assert_true(pod_has_container(p, NULL)); /* a static pod lists none: anywhere in it */
        assert_null(pod_primary_ip(p));
        assert_int_equal(p->n_conditions, 0);
        assert_false(pod_is_ready(p));
        assert_int_equal(p->n_annotations, 0);
        assert_null(pod_annotation(p, "pinion.io/port"));
        assert_int_equal(p->n_labels, 0);
        assert_int_equal(p->n_ports, 0);
}

static void test_parse_fallbacks(void **state) {
        struct pod *p;

        /* serviceAccount (deprecated) when serviceAccountName is absent. */
        p = parse_full_with("spec.serviceAccountName", NULL);
        assert_string_equal(p->service_account, "web");
        pod_unref(p);
        p = parse_full_with("spec.serviceAccountName", "\"\"");
        assert_string_equal(p->service_account, "web");
        pod_unref(p);

        /* podIP when there is no podIPs. */
        p = parse_full_with("status.podIPs", NULL);
        assert_int_equal(strv_length(p->ips), 1);
        assert_string_equal(p->ips[0], "10.244.17.23");
        pod_unref(p);

        /* hostNetwork true */
        p = parse_full_with("spec.hostNetwork", "true");
        assert_true(p->host_network);
        pod_unref(p);

        /* JSON null is what Go writes for unset fields: same as absent. */
        p = parse_full_with("metadata.annotations", "null");
        assert_int_equal(p->n_annotations, 0);
        pod_unref(p);
        p = parse_full_with("spec.nodeName", "null");
        assert_null(p->node_name);
        pod_unref(p);
        p = parse_full_with("status", "null");
        assert_string_equal(p->phase, "Pending");
        assert_int_equal(p->n_conditions, 0);
        pod_unref(p);

        /* Items of a PodList carry no kind/apiVersion. */
        p = parse_full_with("kind", NULL);
        pod_unref(p);
        p = parse_full_with("apiVersion", NULL);
        pod_unref(p);

        /* An empty ports list and a container without ports are fine. */
        p = parse_full_with("spec.containers.0.ports", "[]");
        assert_int_equal(p->n_ports, 2);
        assert_int_equal(p->ports[0].port, 15001);
        pod_unref(p);
}

static void test_parse_uid(void **state) {
        static const char text[] = "{\"metadata\":{\"name\":\"solo\"}}";
        _cleanup_free_ char *error = NULL;
        struct pod *p = NULL;

        assert_int_equal(pod_parse_json_text(text, strlen(text), NULL, &p, &error), -EINVAL);
        assert_null(p);
        assert_string_equal(error, "metadata.uid: missing");

        assert_int_equal(pod_parse_json_text(text, strlen(text), "derived-uid", &p, NULL), 0);
        assert_string_equal(p->uid, "derived-uid");
        p = pod_unref(p);

        /* An explicit uid wins over the fallback. */
        assert_int_equal(pod_parse_json_text(FULL_POD, strlen(FULL_POD), "derived-uid", &p, NULL), 0);
        assert_string_equal(p->uid, "5f0c3a2e-8d1b-4b7e-9a55-0d7f3c2b1a90");
        pod_unref(p);
}

struct bad_case {
        const char *path;
        const char *value; /* NULL: delete */
        const char *error; /* exact, or a prefix when it ends in '*' */
};

static const struct bad_case bad_cases[] = {
        { "metadata", "\"web\"", "metadata: not an object" },
        { "metadata", NULL, "metadata: missing" },
        { "metadata.name", "5", "metadata.name: not a string" },
        { "metadata.name", NULL, "metadata.name: missing" },
        { "metadata.name", "\"\"", "metadata.name: \"\" is not a valid name*" },
        { "metadata.name", "\"../../etc\"", "metadata.name: \"../../etc\" is not a valid name*" },
        { "metadata.name", "\"Web\"", "metadata.name: \"Web\" is not a valid name*" },
        { "metadata.namespace", "[]", "metadata.namespace: not a string" },
        { "metadata.namespace", "\"a.b\"", "metadata.namespace: \"a.b\" is not a valid namespace*" },
        { "metadata.uid", "true", "metadata.uid: not a string" },
        { "metadata.uid", "\"../x\"", "metadata.uid: \"../x\" is not a valid uid" },
        { "metadata.uid", "\"a/b\"", "metadata.uid: \"a/b\" is not a valid uid" },
        { "metadata.resourceVersion", "48213377", "metadata.resourceVersion: not a string" },
        { "metadata.annotations", "\"pinion.io/port=http\"", "metadata.annotations: not an object" },
        { "metadata.annotations", "[]", "metadata.annotations: not an object" },
        { "metadata.labels", "\"app=web\"", "metadata.labels: not an object" },
        { "metadata.labels.app", "1", "metadata.labels.app: not a string" },
        { "metadata.labels.app", "{}", "metadata.labels.app: not a string" },
        { "spec", "[]", "spec: not an object" },
        { "spec.nodeName", "{}", "spec.nodeName: not a string" },
        { "spec.serviceAccountName", "1", "spec.serviceAccountName: not a string" },
        { "spec.hostNetwork", "\"true\"", "spec.hostNetwork: not a boolean" },
        { "spec.hostNetwork", "1", "spec.hostNetwork: not a boolean" },
        { "spec.containers", "{}", "spec.containers: not an array" },
        { "spec.containers.1", "\"envoy\"", "spec.containers[1]: not an object" },
        { "spec.containers.0.ports", "{}", "spec.containers[0].ports: not an array" },
        { "spec.containers.0.ports.1", "9090", "spec.containers[0].ports[1]: not an object" },
        { "spec.containers.1.ports.1.containerPort", "\"15090\"",
          "spec.containers[1].ports[1].containerPort: not a number" },
        { "spec.containers.1.ports.1.containerPort", NULL, "spec.containers[1].ports[1].containerPort: missing" },
        { "spec.containers.0.ports.0.containerPort", "0",
          "spec.containers[0].ports[0].containerPort: 0 is not a port (1..65535)" },
        { "spec.containers.0.ports.0.containerPort", "65536",
          "spec.containers[0].ports[0].containerPort: 65536 is not a port (1..65535)" },
        { "spec.containers.0.ports.0.containerPort", "-80",
          "spec.containers[0].ports[0].containerPort: -80 is not a port (1..65535)" },
        { "spec.containers.0.ports.0.containerPort", "80.5",
          "spec.containers[0].ports[0].containerPort: 80.5 is not a port (1..65535)" },
        { "spec.containers.0.ports.0.containerPort", "1e10",
          "spec.containers[0].ports[0].containerPort: 1e+10 is not a port (1..65535)" },
        { "spec.containers.0.ports.0.name", "80", "spec.containers[0].ports[0].name: not a string" },
        { "spec.containers.0.ports.0.protocol", "6", "spec.containers[0].ports[0].protocol: not a string" },
        { "spec.containers.0.ports.0.protocol", "\"HTTP\"",
          "spec.containers[0].ports[0].protocol: \"HTTP\" is not TCP, UDP or SCTP" },
        { "status", "1", "status: not an object" },
        { "status.phase", "1", "status.phase: not a string" },
        { "status.podIP", "167772161", "status.podIP: not a string" },
        { "status.podIP", "\"10.244.17.999\"", "status.podIP: \"10.244.17.999\" is not an IP address" },
        { "status.podIPs", "\"10.244.17.23\"", "status.podIPs: not an array" },
        { "status.podIPs.1", "\"fd00::1\"", "status.podIPs[1]: not an object" },
        { "status.podIPs.1.ip", "6", "status.podIPs[1].ip: not a string" },
        { "status.podIPs.1.ip", NULL, "status.podIPs[1].ip: missing" },
        { "status.podIPs.1.ip", "\"fd00::zz\"", "status.podIPs[1].ip: \"fd00::zz\" is not an IP address" },
        { "status.containerStatuses", "{}", "status.containerStatuses: not an array" },
        { "status.containerStatuses.1", "\"x\"", "status.containerStatuses[1]: not an object" },
        { "status.containerStatuses.1.containerID", "1", "status.containerStatuses[1].containerID: not a string" },
        { "status.containerStatuses.1.containerID", "\"4f1c\"",
          "status.containerStatuses[1].containerID: \"4f1c\" is not <runtime>://<id>" },
        { "status.containerStatuses.1.containerID", "\"://4f1c\"",
          "status.containerStatuses[1].containerID: \"://4f1c\" is not <runtime>://<id>" },
        { "status.containerStatuses.1.containerID", "\"containerd://../x\"",
          "status.containerStatuses[1].containerID: \"containerd://../x\" is not <runtime>://<hex id>" },
        { "status.containerStatuses.1.containerID", "\"containerd://\"",
          "status.containerStatuses[1].containerID: \"containerd://\" is not <runtime>://<hex id>" },
        { "status.initContainerStatuses.0.containerID", "\"Docker://ab\"",
          "status.initContainerStatuses[0].containerID: \"Docker://ab\" is not <runtime>://<id>" },
        { "status.ephemeralContainerStatuses", "1", "status.ephemeralContainerStatuses: not an array" },
        { "status.conditions", "{}", "status.conditions: not an array" },
        { "status.conditions.2", "true", "status.conditions[2]: not an object" },
        { "status.conditions.2.type", "1", "status.conditions[2].type: not a string" },
        { "status.conditions.2.type", NULL, "status.conditions[2].type: missing" },
        { "status.conditions.2.status", "true", "status.conditions[2].status: not a string" },
        { "status.conditions.2.status", NULL, "status.conditions[2].status: missing" },
        { "kind", "\"Deployment\"", "kind: \"Deployment\" is not \"Pod\"" },
        { "kind", "1", "kind: not a string" },
        { "apiVersion", "\"apps/v1\"", "apiVersion: \"apps/v1\" is not \"v1\"" },
};

static void test_parse_wrong_types(void **state) {
        unsigned failures = 0;

        for (size_t i = 0; i < ELEMENTSOF(bad_cases); i++) {
                const struct bad_case *c = &bad_cases[i];
                _cleanup_(cJSON_Deletep) cJSON *obj = full_with(c->path, c->value);
                _cleanup_free_ char *error = NULL;
                struct pod *p = NULL;
                size_t n = strlen(c->error);
                bool prefix = c->error[n - 1] == '*';
                int r;

                r = pod_parse_json(obj, NULL, &p, &error);
                if (r != -EINVAL || p || !error ||
                    (prefix ? strncmp(error, c->error, n - 1) != 0 : !streq(error, c->error))) {
                        print_error("%s=%s: r=%d error=\"%s\", expected \"%s\"\n", c->path,
                                    strempty(c->value), r, strempty(error), c->error);
                        failures++;
                }
                pod_unref(p);
        }
        assert_int_equal(failures, 0);
}

static void test_parse_bad_documents(void **state) {
        static const struct {
                const char *text;
                const char *error;
        } cases[] = {
                { "", "invalid JSON at offset 0" },
                { "{\"metadata\": {\"name\": \"x\",}}", "invalid JSON at offset *" },
                { "{\"metadata\":{\"name\":\"x\",\"uid\":\"u\"}} {}", "invalid JSON at offset 36 (data after the object)" },
                { "[]", "top level: not an object" },
                { "\"pod\"", "top level: not an object" },
                { "{\"metadata\":{\"name\":\"x\",\"uid\":\"u\",\"labels\":{\"a\":\"1\",\"a\":\"2\"}}}",
                  "metadata.labels: duplicate key \"a\"" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *error = NULL;
                struct pod *p = NULL;

                assert_int_equal(pod_parse_json_text(cases[i].text, strlen(cases[i].text), NULL, &p, &error), -EINVAL);
                assert_null(p);
                assert_non_null(error);
                size_t n = strlen(cases[i].error);
                if (cases[i].error[n - 1] == '*') /* the exact offset is cJSON's business */
                        assert_int_equal(strncmp(error, cases[i].error, n - 1), 0);
                else
                        assert_string_equal(error, cases[i].error);
        }

        /* Trailing whitespace is not data; the size bounds the text (no NUL needed). */
        static const char ok[] = "{\"metadata\":{\"name\":\"x\",\"uid\":\"u\"}}\n\n  GARBAGE";
        struct pod *p = NULL;
        assert_int_equal(pod_parse_json_text(ok, strlen(ok) - strlen("GARBAGE"), NULL, &p, NULL), 0);
        pod_unref(p);

        /* No error text wanted: still -EINVAL. */
        assert_int_equal(pod_parse_json_text("{", 1, NULL, &p, NULL), -EINVAL);
}

/* ---- the API representation ---- */

static void test_to_json(void **state) {
        _cleanup_(pod_unrefp) struct pod *p = parse_ok(FULL_POD);
        _cleanup_(cJSON_Deletep) cJSON *o = NULL;
        const cJSON *v;

        p->source = strdup("apiserver");
        assert_non_null(p->source);
        o = pod_to_json(p);
        assert_non_null(o);

        assert_string_equal(cJSON_GetObjectItem(o, "uid")->valuestring, p->uid);
        assert_string_equal(cJSON_GetObjectItem(o, "namespace")->valuestring, "prod");
        assert_string_equal(cJSON_GetObjectItem(o, "name")->valuestring, "web-7c9f6d5b8-x2lqz");
        assert_string_equal(cJSON_GetObjectItem(o, "node")->valuestring, "node-17.dc1");
        assert_string_equal(cJSON_GetObjectItem(o, "phase")->valuestring, "Running");
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(o, "ready")));
        assert_string_equal(cJSON_GetObjectItem(o, "serviceAccount")->valuestring, "web");
        assert_true(cJSON_IsFalse(cJSON_GetObjectItem(o, "hostNetwork")));
        assert_string_equal(cJSON_GetObjectItem(o, "source")->valuestring, "apiserver");
        assert_string_equal(cJSON_GetObjectItem(o, "resourceVersion")->valuestring, "48213377");

        v = cJSON_GetObjectItem(o, "ips");
        assert_int_equal(cJSON_GetArraySize(v), 2);
        assert_string_equal(cJSON_GetArrayItem(v, 1)->valuestring, "fd00:10:244:17::17");

        v = cJSON_GetObjectItem(o, "conditions");
        assert_int_equal(cJSON_GetArraySize(v), 5);
        assert_true(cJSON_IsTrue(cJSON_GetObjectItem(v, "Ready")));
        assert_true(cJSON_IsFalse(cJSON_GetObjectItem(v, "ContainersReady")));

        v = cJSON_GetObjectItem(o, "annotations");
        assert_int_equal(cJSON_GetArraySize(v), 4);
        assert_string_equal(cJSON_GetObjectItem(v, "pinion.io/serverset")->valuestring, "/discovery/web/prod");
        v = cJSON_GetObjectItem(o, "labels");
        assert_string_equal(cJSON_GetObjectItem(v, "tier")->valuestring, "frontend");

        v = cJSON_GetObjectItem(o, "ports");
        assert_int_equal(cJSON_GetArraySize(v), 4);
        assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(v, 0), "name")->valuestring, "http");
        assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(v, 0), "port")->valueint, 8080);
        assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(v, 0), "protocol")->valuestring, "TCP");
        /* An unnamed port has no "name" rather than a null one. */
        assert_null(cJSON_GetObjectItem(cJSON_GetArrayItem(v, 3), "name"));
        assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(v, 3), "port")->valueint, 15090);
        assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(v, 3), "protocol")->valuestring, "UDP");
}

static void test_to_json_omits_null(void **state) {
        static const char text[] = "{\"metadata\":{\"name\":\"solo\",\"uid\":\"u-1\"}}";
        _cleanup_(pod_unrefp) struct pod *p = parse_ok(text);
        _cleanup_(cJSON_Deletep) cJSON *o = pod_to_json(p);

        assert_non_null(o);
        assert_null(cJSON_GetObjectItem(o, "node"));
        assert_null(cJSON_GetObjectItem(o, "source"));
        assert_null(cJSON_GetObjectItem(o, "resourceVersion"));
        assert_true(cJSON_IsFalse(cJSON_GetObjectItem(o, "ready")));
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "ips")), 0);
        assert_true(cJSON_IsObject(cJSON_GetObjectItem(o, "annotations")));
        assert_true(cJSON_IsObject(cJSON_GetObjectItem(o, "conditions")));
        assert_true(cJSON_IsArray(cJSON_GetObjectItem(o, "ports")));
}

/* ---- equality ---- */

static void test_equal(void **state) {
        static const struct {
                const char *path;
                const char *value;
        } differs[] = {
                { "metadata.uid", "\"5f0c3a2e-0000-4b7e-9a55-0d7f3c2b1a90\"" },
                { "metadata.namespace", "\"staging\"" },
                { "metadata.name", "\"web-7c9f6d5b8-aaaaa\"" },
                { "metadata.annotations.pinion.io/port", NULL }, /* see below */
                { "metadata.labels.tier", "\"backend\"" },
                { "metadata.labels.extra", "\"1\"" },
                { "metadata.labels", NULL },
                { "spec.nodeName", "\"node-18.dc1\"" },
                { "spec.serviceAccountName", "\"other\"" },
                { "spec.hostNetwork", "true" },
                { "spec.containers.0.ports.0.containerPort", "8081" },
                { "spec.containers.0.ports.0.name", "\"web\"" },
                { "spec.containers.0.ports.0.protocol", "\"SCTP\"" },
                { "spec.containers.1.ports.1", NULL },
                { "status.phase", "\"Succeeded\"" },
                { "status.podIPs.1", NULL },
                { "status.podIPs.0.ip", "\"10.244.17.24\"" },
                { "status.conditions.2.status", "\"False\"" },
                { "status.conditions.2.type", "\"Readyish\"" },
                { "status.conditions.4", NULL },
                { "status.containerStatuses.1", NULL },
                { "status.containerStatuses.0.containerID", "\"containerd://abcd\"" },
                { "status.initContainerStatuses", NULL },
        };
        _cleanup_(pod_unrefp) struct pod *base = parse_ok(FULL_POD);
        _cleanup_(pod_unrefp) struct pod *same = parse_ok(FULL_POD);

        assert_true(pod_equal(base, same));
        assert_true(pod_equal(base, base));
        assert_false(pod_equal(base, NULL));
        assert_true(pod_equal(NULL, NULL));

        for (size_t i = 0; i < ELEMENTSOF(differs); i++) {
                struct pod *p;
                if (strstr(differs[i].path, "pinion.io")) {
                        /* Annotation keys hold dots: change one through the struct instead. */
                        p = parse_ok(FULL_POD);
                        free(p->annotations[2].value);
                        p->annotations[2].value = strdup("metrics");
                        assert_non_null(p->annotations[2].value);
                } else
                        p = parse_full_with(differs[i].path, differs[i].value);
                if (pod_equal(base, p) || pod_equal(p, base))
                        fail_msg("%s=%s: compares equal", differs[i].path, strempty(differs[i].value));
                pod_unref(p);
        }

        /* source is a field of the model too. */
        same->source = strdup("pods-dir:/a.json");
        assert_false(pod_equal(base, same));
        base->source = strdup("pods-dir:/a.json");
        assert_true(pod_equal(base, same));

        /* resourceVersion and the fields the agent does not model are ignored. */
        struct pod *p = parse_full_with("metadata.resourceVersion", "\"48213999\"");
        p->source = strdup("pods-dir:/a.json");
        assert_true(pod_equal(base, p));
        pod_unref(p);
        p = parse_full_with("status.conditions.2.lastTransitionTime", "\"2026-11-21T09:00:00Z\"");
        p->source = strdup("pods-dir:/a.json");
        assert_true(pod_equal(base, p));
        pod_unref(p);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_full),
                cmocka_unit_test(test_parse_defaults),
                cmocka_unit_test(test_parse_fallbacks),
                cmocka_unit_test(test_parse_uid),
                cmocka_unit_test(test_parse_wrong_types),
                cmocka_unit_test(test_parse_bad_documents),
                cmocka_unit_test(test_to_json),
                cmocka_unit_test(test_to_json_omits_null),
                cmocka_unit_test(test_equal),
        };
        return cmocka_run_group_tests_name("pods", tests, NULL, NULL);
}
