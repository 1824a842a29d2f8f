/* SPDX-License-Identifier: MIT */
/* podnet: wires each pod's network namespace (veth, routed /32, no overlay) for pinion-cni and
 * owns IP allocation. This file holds its config and its place in the module contract; the
 * wiring lands with its issue. */

#include <arpa/inet.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "module.h"

struct podnet_settings {
        char *pod_cidr;
        unsigned mtu;
        char *host_gateway;
};

/* "10.1.2.0/24": an IPv4 network with a prefix of /8 to /30 (a /31 or /32 leaves no pods). */
static int parse_cidr(const char *v, void *ret, const char **reason) {
        char addr[INET_ADDRSTRLEN + 1];
        unsigned prefix;
        struct in_addr in;
        char extra;

        if (isempty(v))
                return config_parse_string(v, ret, reason);
        if (sscanf(v, "%16[0-9.]/%u%c", addr, &prefix, &extra) != 2 || inet_pton(AF_INET, addr, &in) != 1 ||
            prefix < 8 || prefix > 30) {
                *reason = "expected an IPv4 CIDR such as 10.1.2.0/24 (prefix /8 to /30)";
                return -EINVAL;
        }
        return config_parse_string(v, ret, reason);
}

static int parse_ipv4(const char *v, void *ret, const char **reason) {
        struct in_addr in;
        if (inet_pton(AF_INET, v, &in) != 1) {
                *reason = "expected an IPv4 address";
                return -EINVAL;
        }
        return config_parse_string(v, ret, reason);
}

#define FIELD(f) offsetof(struct podnet_settings, f)
static const struct config_key podnet_keys[] = {
        { "pod-cidr", parse_cidr, FIELD(pod_cidr), NULL, config_free_string },
        { "mtu", config_parse_uint, FIELD(mtu), "1500" },
        { "host-gateway", parse_ipv4, FIELD(host_gateway), "169.254.1.1", config_free_string },
        {}
};
#undef FIELD

static struct podnet_settings *podnet_settings_free(struct podnet_settings *s) {
        return config_object_free(podnet_keys, s);
}

static int podnet_parse(struct config *c, struct podnet_settings **ret, char **ret_error) {
        struct podnet_settings *s = NULL;
        int r;

        r = config_parse_section_new(c, "network", podnet_keys, sizeof(*s), (void **) &s, ret_error);
        if (r < 0)
                return r;
        if (s->mtu < 576 || s->mtu > 65535) {
                config_object_free(podnet_keys, s);
                return config_section_error(c, "network", ret_error, "mtu must be between 576 and 65535");
        }
        *ret = s;
        return 0;
}

static void podnet_apply(struct module_instance *mi) {
        struct podnet_settings *s = mi->data;

        if (!s->pod_cidr)
                module_set_state(mi, MODULE_DISABLED, "no [network] pod-cidr and no Node podCIDR from the apiserver");
        else
                module_set_state(mi, MODULE_DISABLED, "pod network wiring is not part of this build yet");
        module_set_synced(mi);
}

static int podnet_status(struct module_instance *mi, cJSON *obj) {
        struct podnet_settings *s = mi->data;
        if (s->pod_cidr && !cJSON_AddStringToObject(obj, "podCIDR", s->pod_cidr))
                return -ENOMEM;
        return 0;
}

DEFINE_SETTINGS_MODULE(podnet, struct podnet_settings, ((const char *const[]) { "apiserver", NULL }));
