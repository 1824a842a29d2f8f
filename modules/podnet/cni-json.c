/* SPDX-License-Identifier: MIT */
/* The CNI protocol's JSON side (cJSON): the network config, the POST /v1/cni body the agent
 * reads, errors and VERSION as JSON. See cni-json.h; what needs no JSON library is in cni.c. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cni-json.h"
#include "json.h"

#define CNI_MAX_VALID_ATTACHMENTS 65536

void cni_json_request_done(struct cni_request *r) {
        if (!r)
                return;
        cJSON_Delete(r->config);
        r->config = NULL;
        cni_request_free_fields(r);
}

static const cJSON *field(const cJSON *o, const char *key) {
        return cJSON_GetObjectItemCaseSensitive(o, key);
}

static int parse_valid_attachments(struct cni_request *r, const cJSON *list, struct cni_error *err) {
        const cJSON *a;
        size_t n;

        if (!cJSON_IsArray(list))
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                     "cni.dev/valid-attachments must be an array");
        n = (size_t) cJSON_GetArraySize(list);
        if (n > CNI_MAX_VALID_ATTACHMENTS)
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                     "cni.dev/valid-attachments has more than %d entries", CNI_MAX_VALID_ATTACHMENTS);
        r->valid = calloc(MAX(n, 1u), sizeof(struct cni_attachment));
        if (!r->valid)
                return -ENOMEM;
        r->has_valid = true;
        cJSON_ArrayForEach(a, list) {
                const cJSON *cid = field(a, "containerID"), *ifn = field(a, "ifname");
                if (!cJSON_IsObject(a) || !cJSON_IsString(cid) || !cJSON_IsString(ifn))
                        return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                             "each cni.dev/valid-attachments entry needs string containerID and ifname");
                struct cni_attachment *at = &r->valid[r->n_valid++];
                at->container_id = strdup(cid->valuestring);
                at->ifname = strdup(ifn->valuestring);
                if (!at->container_id || !at->ifname)
                        return -ENOMEM;
        }
        return 0;
}

/* runtimeConfig "ips" (the capability the conflist declares): ["10.1.2.3/24", "fd00::3/64"]. It
 * takes the place of CNI_ARGS IP= (the conventions give runtimeConfig precedence). */
static int parse_runtime_config_ips(struct cni_request *r, const cJSON *ips, struct cni_error *err) {
        const cJSON *item;
        const char *why = NULL;

        if (!ips)
                return 0;
        if (!cJSON_IsArray(ips))
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config", "runtimeConfig.ips must be an array");
        if (cJSON_GetArraySize(ips) == 0)
                return 0;
        r->requested_ip4 = mfree(r->requested_ip4);
        r->requested_ip6 = mfree(r->requested_ip6);
        cJSON_ArrayForEach(item, ips) {
                int k = cJSON_IsString(item) ? cni_request_add_ip(r, item->valuestring, &why) : (why = "not a string", -EINVAL);
                if (k == -ENOMEM)
                        return k;
                if (k < 0)
                        return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                             "runtimeConfig.ips: '%.64s' is %s", cJSON_IsString(item) ? item->valuestring : "?",
                                             why);
        }
        return 0;
}

/* Takes ownership of obj. */
static int request_set_config(struct cni_request *r, cJSON *obj, struct cni_error *err) {
        const cJSON *v, *name, *type, *sock, *prev;
        int k;

        cJSON_Delete(r->config);
        r->config = obj;
        if (!cJSON_IsObject(obj))
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config", "not a JSON object");

        v = field(obj, "cniVersion");
        k = cni_request_set_version(r, cJSON_IsString(v) ? v->valuestring : NULL, err);
        if (k < 0 || r->command == CNI_VERSION)
                return k; /* VERSION reads nothing else */
        name = field(obj, "name");
        type = field(obj, "type");
        k = cni_request_set_name(r, cJSON_IsString(name) ? name->valuestring : NULL,
                                 cJSON_IsString(type) ? type->valuestring : NULL, err);
        if (k < 0)
                return k;
        sock = field(obj, "socket");
        if (sock) {
                k = cni_request_set_socket(r, cJSON_IsString(sock) ? sock->valuestring : NULL, err);
                if (k < 0)
                        return k;
        }

        prev = field(obj, "prevResult");
        if (prev && !cJSON_IsNull(prev)) {
                const cJSON *ifs = field(prev, "interfaces"), *ips = field(prev, "ips"), *routes = field(prev, "routes"),
                            *dns = field(prev, "dns");
                /* Everything an ADD extends, checked here: nothing is wired for a bad one. */
                if (!cJSON_IsObject(prev) || (ifs && !cJSON_IsArray(ifs)) || (ips && !cJSON_IsArray(ips)) ||
                    (routes && !cJSON_IsArray(routes)) || (dns && !cJSON_IsObject(dns)))
                        return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                             "prevResult must be a result object (interfaces, ips and routes arrays, "
                                             "dns an object)");
                r->prev_result = prev;
        }
        if (r->command == CNI_ADD || r->command == CNI_CHECK) {
                /* The "mac" capability (podman --mac-address): the runtime fills runtimeConfig. */
                const cJSON *rc = field(obj, "runtimeConfig"), *mac = field(rc, "mac");
                if (rc && !cJSON_IsObject(rc))
                        return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                             "runtimeConfig must be an object");
                if (mac && !cJSON_IsString(mac))
                        return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                             "runtimeConfig.mac must be a string");
                if (mac) {
                        k = cni_request_set_mac(r, mac->valuestring, CNI_ERR_INVALID_CONFIG, "runtimeConfig.mac", err);
                        if (k < 0)
                                return k;
                }
                if (r->command == CNI_ADD) {
                        k = parse_runtime_config_ips(r, field(rc, "ips"), err);
                        if (k < 0)
                                return k;
                }
        }
        if (r->command == CNI_CHECK && !r->prev_result && cni_version_compare(r->cni_version, "1.0.0") >= 0)
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config", "CHECK needs prevResult");

        if (r->command == CNI_GC) {
                const cJSON *va = field(obj, "cni.dev/valid-attachments");
                if (va) {
                        k = parse_valid_attachments(r, va, err);
                        if (k < 0)
                                return k;
                }
        }
        return 0;
}

int cni_json_parse_config(struct cni_request *r, const char *text, size_t size, struct cni_error *err) {
        cJSON *obj;

        if (!text || size == 0)
                return cni_error_set(err, CNI_ERR_DECODE, "failed to decode the network config", "stdin is empty");
        if (memchr(text, '\0', size))
                return cni_error_set(err, CNI_ERR_DECODE, "failed to decode the network config", "stdin holds a NUL byte");
        obj = cJSON_ParseWithLength(text, size);
        if (!obj)
                return cni_error_set(err, CNI_ERR_DECODE, "failed to decode the network config", "not valid JSON");
        return request_set_config(r, obj, err);
}

struct json_env {
        const cJSON *body;
};

/* Maps the CNI_* names onto the request body's fields, so that the daemon runs the very checks
 * the plugin ran on its environment. */
static const char *json_getenv(const char *name, void *userdata) {
        const struct json_env *e = userdata;
        static const struct {
                const char *env, *key;
        } map[] = {
                { "CNI_COMMAND", "command" }, { "CNI_CONTAINERID", "containerID" },
                { "CNI_NETNS", "netns" },     { "CNI_IFNAME", "ifname" },
                { "CNI_ARGS", "args" },
        };
        for (size_t i = 0; i < ELEMENTSOF(map); i++)
                if (streq(map[i].env, name)) {
                        const cJSON *v = field(e->body, map[i].key);
                        return cJSON_IsString(v) ? v->valuestring : NULL;
                }
        return NULL;
}

int cni_json_parse_request(struct cni_request *r, const char *text, size_t size, struct cni_error *err) {
        _cleanup_(cJSON_Deletep) cJSON *body = NULL;
        static const char *const keys[] = { "command", "containerID", "netns", "ifname", "args", "config" };
        const cJSON *item;
        cJSON *cfg;
        int k;

        if (!text || size == 0)
                return cni_error_set(err, CNI_ERR_DECODE, "failed to decode the request", "empty body");
        body = cJSON_ParseWithLength(text, size);
        if (!cJSON_IsObject(body))
                return cni_error_set(err, CNI_ERR_DECODE, "failed to decode the request", "not a JSON object");
        cJSON_ArrayForEach(item, body) {
                bool known = false;
                for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                        known = known || streq(item->string, keys[i]);
                if (!known)
                        return cni_error_set(err, CNI_ERR_UNSUPPORTED_FIELD, "unsupported field in the request",
                                             "'%.64s'", item->string);
                if (!streq(item->string, "config") && !cJSON_IsString(item))
                        return cni_error_set(err, CNI_ERR_DECODE, "failed to decode the request",
                                             "%s must be a string", item->string);
        }
        k = cni_request_from_env(r, json_getenv, &(struct json_env) { body }, err);
        if (k < 0)
                return k;
        cfg = cJSON_DetachItemFromObjectCaseSensitive(body, "config");
        if (!cfg)
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config", "the request has no config");
        return request_set_config(r, cfg, err);
}

/* The texts of cni.c, parsed: one writer of each format. */
static cJSON *parse_text(char *text) {
        cJSON *o = text ? cJSON_Parse(text) : NULL;
        free(text);
        return o;
}

cJSON *cni_json_error(const struct cni_error *e, const char *cni_version) {
        char *text = NULL;
        if (cni_error_text(e, cni_version, &text) < 0)
                return NULL;
        return parse_text(text);
}

cJSON *cni_json_version_result(const char *cni_version) {
        char *text = NULL;
        if (cni_version_text(cni_version, &text) < 0)
                return NULL;
        return parse_text(text);
}
