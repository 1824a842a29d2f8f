/* SPDX-License-Identifier: MIT */
/* podnet: wires each pod's network namespace for pinion-cni (veth, routed /32, no overlay) and
 * owns the pod addresses. The plugin forwards every CNI operation to POST /v1/cni (root only,
 * podnet-api.c). This file is the module: config, lifecycle, the pod CIDR (configured, or the
 * Node's spec.podCIDR), status and metrics. podnet.h lists the other files. */

#include <arpa/inet.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "caps.h"
#include "config.h"
#include "facts.h"
#include "fs.h"
#include "ipam.h"
#include "json.h"
#include "kube-endpoint.h"
#include "log.h"
#include "manager.h"
#include "module.h"
#include "podnet.h"
#include "reaper.h"
#include "state-version.h"
#include "strv.h"
#include "wire.h"

/* "10.1.2.0/24" (an IPv4 network, /8 to /30: a /31 or /32 leaves no pods), "fd00:1::/64" (IPv6,
 * /48 to /126), or one of each separated by a comma or blanks (dual-stack). */
static int parse_cidr(const char *v, void *ret, const char **reason) {
        _cleanup_free_ char *v4 = NULL, *v6 = NULL;

        if (isempty(v))
                return config_parse_string(v, ret, reason);
        int r = ipam_addr_parse_pod_cidrs(v, &v4, &v6, reason);
        if (r < 0)
                return r;
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

/* v is one of routing_mode_name_at's (the key's choices). */
static int parse_routing(const char *v, void *ret, const char **reason) {
        enum routing_mode m = routing_mode_from_string(v);
        if ((int) m < 0)
                return -EINVAL;
        *(enum routing_mode *) ret = m;
        return 0;
}

#define FIELD(f) offsetof(struct podnet_settings, f)
static const struct config_key podnet_keys[] = {
        { "pod-cidr", parse_cidr, FIELD(pod_cidr), NULL, config_free_string },
        { "mtu", config_parse_uint, FIELD(mtu), "1500" },
        { "host-gateway", parse_ipv4, FIELD(host_gateway), "169.254.1.1", config_free_string },
        { "address-quarantine", config_parse_duration, FIELD(address_quarantine), "30s" },
        { "gc-grace", config_parse_duration, FIELD(gc_grace), "60s" },
        { "reconcile-interval", config_parse_duration, FIELD(reconcile_interval), "60s" },
        { "routing", parse_routing, FIELD(routing), "none", NULL, routing_mode_name_at },
        {}
};
#undef FIELD

/* The pods route everything via host-gateway: inside their own CIDR it would be a pod's address. */
static bool gateway_in_cidr(const char *gateway, const char *cidrs) {
        _cleanup_free_ char *cidr = NULL, *v6 = NULL;
        const char *reason = NULL;
        uint32_t net, gw;
        unsigned prefix;
        struct in_addr in;

        if (ipam_addr_parse_pod_cidrs(cidrs, &cidr, &v6, &reason) < 0 || !cidr || ipam_addr_parse_cidr(cidr, &net, &prefix) < 0 ||
            inet_pton(AF_INET, gateway, &in) != 1)
                return false;
        gw = ntohl(in.s_addr);
        return (gw & (UINT32_MAX << (32 - prefix))) == net;
}

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
        if (s->address_quarantine > 24 * USEC_PER_HOUR) {
                config_object_free(podnet_keys, s);
                return config_section_error(c, "network", ret_error, "address-quarantine must be at most 24h");
        }
        if (s->gc_grace > 24 * USEC_PER_HOUR) {
                config_object_free(podnet_keys, s);
                return config_section_error(c, "network", ret_error, "gc-grace must be at most 24h");
        }
        if (s->reconcile_interval > 24 * USEC_PER_HOUR ||
            (s->reconcile_interval > 0 && s->reconcile_interval < USEC_PER_SEC)) {
                config_object_free(podnet_keys, s);
                return config_section_error(c, "network", ret_error,
                                            "reconcile-interval must be 0 (only at start) or from 1s to 24h");
        }
        if (s->pod_cidr && gateway_in_cidr(s->host_gateway, s->pod_cidr)) {
                config_object_free(podnet_keys, s);
                return config_section_error(c, "network", ret_error,
                                            "host-gateway must lie outside pod-cidr (use a link-local address)");
        }
        *ret = s;
        return 0;
}

/* ---- module ---- */

static void collect_podnet(struct metrics *metrics, void *userdata) {
        struct module_instance *mi = userdata;
        struct podnet *p = mi->data;
        struct ipam_usage u;

        if (!p || !p->ipam)
                return;
        ipam_usage(p->ipam, now_usec(CLOCK_REALTIME), &u);
        (void) metric_set(p->m_pool, (double) u.allocated, "allocated");
        (void) metric_set(p->m_pool, (double) u.quarantined, "quarantined");
        (void) metric_set(p->m_pool, (double) u.free, "free");
        (void) metric_set(p->m_pool, (double) u.size, "size");
        if (ipam_usage6(p->ipam, now_usec(CLOCK_REALTIME), &u)) {
                (void) metric_set(p->m_pool6, (double) u.allocated, "allocated");
                (void) metric_set(p->m_pool6, (double) u.quarantined, "quarantined");
                (void) metric_set(p->m_pool6, (double) u.free, "free");
                (void) metric_set(p->m_pool6, (double) u.size, "size");
        }
}

static int podnet_register(struct module_instance *mi) {
        static const char *const verb_result[] = { "verb", "result", NULL };
        static const char *const state[] = { "state", NULL };
        static const char *const reason[] = { "reason", NULL };
        static const double buckets[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5 };
        struct podnet *p = mi->data;
        struct manager *m = mi->manager;
        int r;

        const struct metric_def families[] = {
                { METRIC_COUNTER, "pinion_podnet_operations_total", "CNI operations by verb (ADD, DEL, CHECK, STATUS, GC, VERSION; invalid: unparsable) and result (ok, error).", verb_result, NULL, 0, &p->m_ops },
                { METRIC_HISTOGRAM, "pinion_podnet_setup_seconds", "Time to wire a pod (a successful ADD: allocation, veth, addresses, routes).", NULL, buckets, ELEMENTSOF(buckets), &p->m_setup },
                { METRIC_GAUGE, "pinion_podnet_pool_addresses", "IPv4 pod CIDR addresses by state: allocated, quarantined (recently released), free, size (usable in all).", state, NULL, 0, &p->m_pool },
                { METRIC_GAUGE, "pinion_podnet_ipv6_pool_addresses", "IPv6 pod CIDR addresses by state (with an IPv6 pod-cidr): allocated, quarantined, free, size.", state, NULL, 0, &p->m_pool6 },
                { METRIC_COUNTER, "pinion_podnet_state_errors_total", "Failed writes of the pool's state (state-dir/podnet), by reason: enospc (the disk is full: ADDs are refused, DELs write into space reserved for them), io (any other error).", reason, NULL, 0, &p->m_state_errors },
                { METRIC_COUNTER, "pinion_podnet_reconciled_total", "Allocations released without a DEL, by reason: gc (the runtime's GC), netns-gone, netns-replaced (reconciliation found the attachment gone).", reason, NULL, 0, &p->m_reconciled },
        };
        if (!p->metrics_reg) {
                r = metrics_register(m->metrics, families, ELEMENTSOF(families), collect_podnet, mi, &p->metrics_reg);
                if (r < 0)
                        return r;
                /* Counters with known labels at zero from the start: a rate or an alert has a
                 * zero to begin from. */
                for (enum cni_command c = 0; c < _CNI_COMMAND_MAX; c++) {
                        (void) metric_touch(p->m_ops, cni_command_to_string(c), "ok");
                        (void) metric_touch(p->m_ops, cni_command_to_string(c), "error");
                }
                (void) metric_touch(p->m_state_errors, "enospc");
                (void) metric_touch(p->m_state_errors, "io");
                reconcile_touch_metrics(p);
        }
        return podnet_api_register(mi);
}

static int podnet_init(struct module_instance *mi, struct config *c, char **ret_error) {
        struct podnet *p = calloc(1, sizeof(*p));
        int r;

        if (!p)
                return -ENOMEM;
        p->host_netns_fd = -EBADF;
        r = podnet_parse(c, &p->settings, ret_error);
        if (r < 0) {
                free(p);
                return r;
        }
        mi->data = p;
        return 0;
}

static void podnet_apply_settings(struct podnet *p) {
        struct in_addr in;
        (void) inet_pton(AF_INET, p->settings->host_gateway, &in);
        p->gateway = ntohl(in.s_addr);
        if (p->ipam)
                ipam_set_quarantine(p->ipam, p->settings->address_quarantine);
}

static int podnet_open(struct module_instance *mi);

/* No pod-cidr configured: the apiserver module reads the Node's once asked (FACT_NODE_POD_CIDR).
 * The fact is a pointer on the manager, so looking costs nothing: every 100 ms for the first 2 s
 * (the Node usually comes within a second of the agent's start, and a joining node's pods wait
 * for this: bench-cluster), then once a second (the apiserver may be away for long). */
#define NODE_POLL_FAST (100 * USEC_PER_MSEC)
#define NODE_POLL_FAST_COUNT 20

static int on_node_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct module_instance *mi = userdata;
        struct podnet *p = mi->data;

        const struct node_pod_cidr *fact = manager_lookup(mi->manager, FACT_NODE_POD_CIDR);
        if (!fact || !fact->cidr) {
                /* (The apiserver module may have been restarted by a reload: ask again.) */
                if (fact)
                        fact->request(fact->userdata);
                p->node_polls++;
                (void) sd_event_source_set_time_relative(s, p->node_polls < NODE_POLL_FAST_COUNT ? NODE_POLL_FAST
                                                                                                 : USEC_PER_SEC);
                return 0;
        }
        int r = podnet_open(mi);
        if (r < 0)
                module_set_state(mi, MODULE_FAILED, "cannot open the pod network: %s", strerror(-r));
        return 0;
}

static int podnet_wait_for_node(struct module_instance *mi) {
        struct podnet *p = mi->data;
        p->node_polls = 0;
        if (p->node_timer) {
                int r = sd_event_source_set_time_relative(p->node_timer, NODE_POLL_FAST);
                return r < 0 ? r : sd_event_source_set_enabled(p->node_timer, SD_EVENT_ON);
        }
        int r = sd_event_add_time_relative(mi->manager->event, &p->node_timer, CLOCK_MONOTONIC, NODE_POLL_FAST,
                                           10 * USEC_PER_MSEC, on_node_timer, mi);
        if (r >= 0)
                r = sd_event_source_set_enabled(p->node_timer, SD_EVENT_ON);
        return r;
}

/* Opens the pool and its state; the module's state says how that went. */
static int podnet_open(struct module_instance *mi) {
        struct podnet *p = mi->data;
        const char *state_dir = mi->manager->settings.state_dir;
        _cleanup_free_ char *dir = NULL, *error = NULL;
        int r;

        podnet_apply_settings(p);
        free(p->cidr);
        p->cidr = NULL;
        if (p->settings->pod_cidr)
                p->cidr = strdup(p->settings->pod_cidr);
        else {
                const struct node_pod_cidr *fact = manager_lookup(mi->manager, FACT_NODE_POD_CIDR);
                if (fact && fact->cidr)
                        p->cidr = strdup(fact->cidr);
                else if (fact) {
                        fact->request(fact->userdata);
                        module_set_state(mi, MODULE_STARTING, "waiting for the Node's spec.podCIDR from the apiserver");
                        return podnet_wait_for_node(mi);
                } else {
                        module_set_state(mi, MODULE_DISABLED, "no [network] pod-cidr and no apiserver to read the Node's spec.podCIDR from");
                        return 0;
                }
        }
        if (!p->cidr)
                return -ENOMEM;
        p->node_timer = sd_event_source_disable_unref(p->node_timer);
        /* The config parser checks a configured pod-cidr; the Node's is checked here. */
        if (gateway_in_cidr(p->settings->host_gateway, p->cidr)) {
                module_set_state(mi, MODULE_FAILED,
                                 "host-gateway %s lies inside the Node's spec.podCIDR %s; set [network] host-gateway "
                                 "outside it (a link-local address)",
                                 p->settings->host_gateway, p->cidr);
                return 0;
        }
        dir = fs_path_join(state_dir, "podnet");
        free(p->state_file);
        p->state_file = fs_path_join(dir, "allocations.json");
        if (!dir || !p->state_file)
                return -ENOMEM;
        r = fs_mkdir_p(dir, 0700);
        if (r < 0) {
                module_set_state(mi, MODULE_FAILED, "cannot create %s: %s", dir, strerror(-r));
                return 0;
        }
        (void) fs_cleanup_temp(dir);
        r = ipam_new(p->cidr, p->settings->address_quarantine, p->state_file, &p->ipam, &error);
        if (r == STATE_VERSION_ERR_NEWER) {
                /* Left as it is; at start this stops the agent (exit 78). */
                log_module_error(MODULE, "%s", strempty(error));
                module_set_state(mi, MODULE_FAILED, "%s", strempty(error));
                return r;
        }
        if (r == -EBADMSG) {
                module_set_state(mi, MODULE_FAILED, "the pod address state is damaged (%s); move %s and its journal "
                                 "away to start with an empty pool", strempty(error), p->state_file);
                return 0;
        }
        if (r < 0) {
                module_set_state(mi, MODULE_FAILED, "cannot load %s: %s", p->state_file, strerror(-r));
                return 0;
        }

        /* Deletions a stop or a crash interrupted. */
        for (size_t i = 0; i < ipam_n_deleting(p->ipam); i++) {
                const char *name = ipam_deleting(p->ipam, i);
                if (!p->reaper || reaper_queue(p->reaper, name) < 0)
                        (void) wire_del(name); /* recorded as deleted when the reaper exists next time */
        }

        /* Pods wired before a restart keep their addresses in the store. */
        for (size_t i = 0; i < ipam_count(p->ipam); i++)
                attachment_store_set_ip(mi, ipam_get(p->ipam, i), true);

        /* Routing between pods and the host needs forwarding, for each family the pods have. */
        r = ipam_has_family(p->ipam, AF_INET) ? wire_sysctl_write("net/ipv4/ip_forward", "1") : 0;
        if (r < 0) {
                module_set_state(mi, MODULE_DEGRADED, "cannot enable net.ipv4.ip_forward: %s", strerror(-r));
                return 0;
        }
        r = ipam_has_family(p->ipam, AF_INET6) ? wire_sysctl_write("net/ipv6/conf/all/forwarding", "1") : 0;
        if (r < 0) {
                module_set_state(mi, MODULE_DEGRADED, "cannot enable net.ipv6.conf.all.forwarding: %s", strerror(-r));
                return 0;
        }
        log_module_info(MODULE, "Pod network %s%s: %zu allocation(s) restored from %s", p->cidr,
                        p->settings->pod_cidr ? "" : " (the Node's spec.podCIDR)",
                        ipam_count(p->ipam), p->state_file);
        module_set_state(mi, MODULE_RUNNING, NULL);
        /* DELs that never came while the agent was down (reconcile.c). */
        r = reconcile_start(mi);
        if (r < 0)
                log_module_warning(MODULE, "Cannot start the periodic reconciliation (%s); it runs at start only",
                                   strerror(-r));
        r = routing_start(mi);
        if (r < 0)
                log_module_warning(MODULE, "Cannot start the routes between nodes: %s", strerror(-r));
        return 0;
}

static int podnet_start(struct module_instance *mi) {
        struct podnet *p = mi->data;
        int r;

        r = podnet_register(mi);
        if (r < 0)
                return r;
        r = network_gate_add(mi);
        if (r < 0)
                return log_module_error_errno(MODULE, r, "Cannot add the pod gate: %m");
        /* Started again after a stop: the pool is read back from its state file. */
        p->stopped = false;
        p->ipam = ipam_free(p->ipam);
        p->host_netns_fd = safe_close(p->host_netns_fd);
        p->host_netns_fd = wire_open_host_netns();
        if (p->host_netns_fd < 0) {
                module_set_state(mi, MODULE_FAILED, "cannot open the host network namespace: %s", strerror(-p->host_netns_fd));
                module_set_synced(mi);
                return 0;
        }
        /* DEL would otherwise wait 20-30 ms per veth in the kernel (see reaper.h). */
        r = reaper_new(mi->manager->event, deletion_on_reaped, mi, &p->reaper);
        if (r < 0)
                log_module_warning(MODULE, "Cannot start the veth deletion thread (%s); deleting inline", strerror(-r));
        /* A held DEL answers when the kernel announces its veth gone, before the deletion's own
         * reply (link-monitor.h). */
        p->link_monitor = link_monitor_free(p->link_monitor);
        r = link_monitor_new(mi->manager->event, deletion_on_link_removed, mi, &p->link_monitor);
        if (r < 0)
                log_module_warning(MODULE, "Cannot watch link removals (%s); a DEL answers when its deletion is done",
                                   strerror(-r));
        r = podnet_open(mi);
        module_set_synced(mi);
        return r;
}

static int podnet_reload(struct module_instance *mi, struct config *c, char **ret_error) {
        struct podnet *p = mi->data;
        struct podnet_settings *s = NULL;
        int r;

        r = podnet_parse(c, &s, ret_error);
        if (r < 0)
                return r;
        if (!streq_ptr(s->pod_cidr, p->settings->pod_cidr) && ipam_count(p->ipam) > 0) {
                podnet_settings_free(s);
                if (asprintf(ret_error, "[network] pod-cidr cannot change while %zu pod(s) hold addresses from %s",
                             ipam_count(p->ipam), p->settings->pod_cidr) < 0)
                        *ret_error = NULL;
                return -EBUSY;
        }
        if (!s->pod_cidr && p->cidr && !streq_ptr(s->host_gateway, p->settings->host_gateway) &&
            gateway_in_cidr(s->host_gateway, p->cidr)) {
                if (asprintf(ret_error, "[network] host-gateway %s lies inside the Node's spec.podCIDR %s", s->host_gateway,
                             p->cidr) < 0)
                        *ret_error = NULL;
                podnet_settings_free(s);
                return -EINVAL;
        }
        bool reopen = !streq_ptr(s->pod_cidr, p->settings->pod_cidr) || !p->cidr || mi->state == MODULE_FAILED;
        bool retime = s->reconcile_interval != p->settings->reconcile_interval;
        bool reroute = retime || s->routing != p->settings->routing;
        podnet_settings_free(p->settings);
        p->settings = s;
        if (!reopen) {
                podnet_apply_settings(p);
                if (retime && p->ipam && (r = reconcile_start(mi)) < 0)
                        log_module_warning(MODULE, "Cannot restart the periodic reconciliation: %s", strerror(-r));
                /* A new mode applies at once: `none` removes pinion's node routes and aggregates. */
                if (reroute && p->ipam && (r = routing_start(mi)) < 0)
                        log_module_warning(MODULE, "Cannot apply the new routing mode: %s", strerror(-r));
                return 0;
        }
        p->ipam = ipam_free(p->ipam);
        return podnet_open(mi);
}

static int podnet_stop(struct module_instance *mi) {
        struct podnet *p = mi->data;
        /* Nothing to drain: requests are answered on the loop as they come. Pods stay wired. */
        p->stopped = true;
        network_gate_remove(mi);
        p->routes = api_routes_free(p->routes);
        p->metrics_reg = metrics_registration_free(p->metrics_reg);
        p->node_timer = sd_event_source_disable_unref(p->node_timer);
        reconcile_stop(p);
        routing_stop(mi);
        /* The deletion in progress finishes; queued ones stay recorded for the next start (those
         * a DEL waits for are done now: deletion_clear()). */
        p->reaper = reaper_free(p->reaper);
        p->link_monitor = link_monitor_free(p->link_monitor);
        deletion_clear(p);
        return 0;
}

static int podnet_status(struct module_instance *mi, cJSON *obj) {
        struct podnet *p = mi->data;
        cJSON *pool;

        if (p->cidr && (!cJSON_AddStringToObject(obj, "podCIDR", p->cidr) ||
                        !cJSON_AddStringToObject(obj, "podCIDRFrom", p->settings->pod_cidr ? "config" : "node")))
                return -ENOMEM;
        if (!cJSON_AddStringToObject(obj, "hostGateway", p->settings->host_gateway) ||
            !cJSON_AddNumberToObject(obj, "mtu", p->settings->mtu))
                return -ENOMEM;
        if (p->state_file && !cJSON_AddStringToObject(obj, "stateFile", p->state_file))
                return -ENOMEM;
        int r = routing_status(p, obj);
        if (r < 0)
                return r;
        if (!p->ipam)
                return 0;
        pool = ipam_to_json(p->ipam, now_usec(CLOCK_REALTIME));
        if (!pool || !cJSON_AddItemToObject(obj, "pool", pool))
                return cJSON_Delete(pool), -ENOMEM;
        return reconcile_status(p, obj);
}

/* ---- for the CNI operations ---- */

/* A state write that is in place but whose directory fsync failed: kept (see ipam.h), told. */
void podnet_warn_not_durable(struct podnet *p) {
        int r = ipam_take_not_durable(p->ipam);
        if (r < 0)
                log_module_warning(MODULE, "%s was updated but syncing its directory failed (%s): a power loss could "
                                   "lose the last change", p->state_file, strerror(-r));
}

void podnet_count_state_error(struct podnet *p, int error) {
        (void) metric_inc(p->m_state_errors, error == -ENOSPC || error == -EDQUOT ? "enospc" : "io");
}

/* Ends a deferral (or lazy release): whatever an ADD changed is durable before the request
 * returns. */
void podnet_sync_state(struct podnet *p) {
        if (p->ipam) {
                int k = ipam_sync(p->ipam);
                if (k < 0) {
                        podnet_count_state_error(p, k);
                        log_module_warning(MODULE, "Failed to persist %s (%s): a power loss could undo the last change",
                                           p->state_file, strerror(-k));
                }
        }
        podnet_warn_not_durable(p);
}

int podnet_cni_ready(struct module_instance *mi, struct cni_error *e) {
        struct podnet *p = mi->data;

        if (!p->stopped && p->ipam)
                return 0;
        (void) cni_error_set(e, CNI_ERR_TRY_AGAIN_LATER, "the pod network is not available", "podnet is %s%s%s",
                             module_state_to_string(mi->state), mi->reason ? ": " : "", strempty(mi->reason));
        return -EAGAIN;
}

int podnet_cni_status(struct module_instance *mi, struct cni_error *e) {
        struct podnet *p = mi->data;
        struct ipam_usage u;

        if (mi->state == MODULE_DEGRADED) {
                (void) cni_error_set(e, CNI_ERR_LIMITED_CONNECTIVITY, "the pod network is degraded", "%s",
                                     strempty(mi->reason));
                return -ENETDOWN;
        }
        if (mi->state != MODULE_RUNNING || !p->ipam) {
                (void) cni_error_set(e, CNI_ERR_NOT_AVAILABLE, "the pod network is not available", "podnet is %s%s%s",
                                     module_state_to_string(mi->state), mi->reason ? ": " : "", strempty(mi->reason));
                return -ENETDOWN;
        }
        /* An ADD needs an address of every family the pods get. */
        ipam_usage(p->ipam, now_usec(CLOCK_REALTIME), &u);
        const char *full = ipam_has_family(p->ipam, AF_INET) && u.free == 0 ? ipam_cidr4(p->ipam) : NULL;
        if (ipam_usage6(p->ipam, now_usec(CLOCK_REALTIME), &u) && u.free == 0)
                full = ipam_cidr6(p->ipam);
        if (full) {
                (void) cni_error_set(e, CNI_ERR_NOT_AVAILABLE, "the pod network is not available", "no free address in %s",
                                     full);
                return -ENOSPC;
        }
        return 0;
}

static void podnet_free(struct module_instance *mi) {
        struct podnet *p = mi->data;

        if (!p)
                return;
        network_gate_remove(mi);
        api_routes_free(p->routes);
        metrics_registration_free(p->metrics_reg);
        p->reaper = reaper_free(p->reaper);
        p->link_monitor = link_monitor_free(p->link_monitor);
        deletion_clear(p);
        reconcile_stop(p);
        p->routing = routing_free(p->routing);
        p->ipam = ipam_free(p->ipam);
        p->node_timer = sd_event_source_disable_unref(p->node_timer);
        free(p->cidr);
        safe_close(p->host_netns_fd);
        podnet_settings_free(p->settings);
        free(p->state_file);
        free(p);
        mi->data = NULL;
}

/* Links, addresses, routes and sysctls in pod network namespaces, and setns() into them. The
 * module works once it has a pod CIDR: configured, or the Node's from an apiserver. */
static uint64_t podnet_capabilities(struct module_instance *mi, const struct config *c) {
        const struct podnet *p = mi->data;
        bool may_work = p->settings->pod_cidr || kube_endpoint_configured(c);
        return may_work ? CAP_TO_MASK64(CAP_NET_ADMIN) | CAP_TO_MASK64(CAP_SYS_ADMIN) : 0;
}

/* The routes podnet-api.c registers, for the core to answer while they are not served. */
static const struct module_route podnet_routes[] = {
        { "POST", "/v1/cni", MODULE_ROUTE_HOST },
        {},
};

/* Without a pod-cidr the apiserver's Node gives one. */
static bool podnet_configured(const struct module_instance *mi, const struct config *c) {
        const struct podnet *p = mi->data;
        return p->settings->pod_cidr || kube_endpoint_configured(c);
}

const struct module podnet_module = {
        .name = "podnet",
        .routes = podnet_routes,
        .deps = (const char *const[]) { "apiserver", NULL },
        .init = podnet_init,
        .configured = podnet_configured,
        .start = podnet_start,
        .reload = podnet_reload,
        .stop = podnet_stop,
        .status = podnet_status,
        .free = podnet_free,
        .capabilities = podnet_capabilities,
};
