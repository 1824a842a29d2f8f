/* SPDX-License-Identifier: MIT */
/* podnet: wires each pod's network namespace for pinion-cni (veth, routed /32, no overlay) and
 * owns the pod addresses. The plugin forwards every CNI operation to POST /v1/cni (root only);
 * this file is the module (config, lifecycle, status, metrics) and that route. The pieces:
 *   cni.c    the protocol (request parsing shared with the plugin, errors)
 *   ipam.c   the address pool and its crash-safe state file
 *   wire.c   the kernel state over rtnetlink
 * Requests run on the loop one at a time, so concurrent ADDs are serialised by construction; a
 * wiring takes a few milliseconds of netlink round trips (bounded: no waiting on anything). */

#include <arpa/inet.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "caps.h"
#include "cni.h"
#include "config.h"
#include "facts.h"
#include "fsutil.h"
#include "ipam.h"
#include "json.h"
#include "kube-endpoint.h"
#include "log.h"
#include "manager.h"
#include "module.h"
#include "reaper.h"
#include "strv.h"
#include "wire.h"

#define MODULE "podnet"

struct podnet_settings {
        char *pod_cidr;
        unsigned mtu;
        char *host_gateway;
        usec_t address_quarantine;
        usec_t gc_grace;
};

/* A host veth handed to the reaper, and where its pod end was: an ADD into that namespace with
 * that interface name fails with EEXIST until the deletion is done. */
struct pending_deletion {
        char *host_ifname;
        char *netns;  /* CNI_NETNS of the released attachment, may be NULL */
        char *ifname;
};

struct podnet {
        struct podnet_settings *settings;
        struct ipam *ipam;
        char *state_file;
        int host_netns_fd;
        uint32_t gateway;
        char *cidr;                    /* in use: pod-cidr, or the Node's spec.podCIDR */
        struct reaper *reaper;         /* deletes host veths off the loop; NULL: inline */
        sd_event_source *node_timer;   /* waiting for FACT_NODE_POD_CIDR */
        struct pending_deletion *pending; /* what the reaper is deleting for this run */
        size_t n_pending;
        struct api_routes *routes;
        struct metrics_registration *metrics_reg; /* the families below and the collector */
        bool stopped;
        bool failed; /* the request being answered failed (for the metric) */

        struct metric_family *m_ops;   /* pinion_podnet_operations_total{verb,result} */
        struct metric_family *m_setup; /* pinion_podnet_setup_seconds */
        struct metric_family *m_pool;  /* pinion_podnet_pool_addresses{state} */
};

/* "10.1.2.0/24": an IPv4 network with a prefix of /8 to /30 (a /31 or /32 leaves no pods). */
static int parse_cidr(const char *v, void *ret, const char **reason) {
        uint32_t network;
        unsigned prefix;

        if (isempty(v))
                return config_parse_string(v, ret, reason);
        if (ipam_parse_cidr(v, &network, &prefix) < 0) {
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
        { "address-quarantine", config_parse_duration, FIELD(address_quarantine), "30s" },
        { "gc-grace", config_parse_duration, FIELD(gc_grace), "60s" },
        {}
};
#undef FIELD

/* The pods route everything via host-gateway: inside their own CIDR it would be a pod's address. */
static bool gateway_in_cidr(const char *gateway, const char *cidr) {
        uint32_t net, gw;
        unsigned prefix;
        struct in_addr in;

        if (ipam_parse_cidr(cidr, &net, &prefix) < 0 || inet_pton(AF_INET, gateway, &in) != 1)
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
        if (s->pod_cidr && gateway_in_cidr(s->host_gateway, s->pod_cidr)) {
                config_object_free(podnet_keys, s);
                return config_section_error(c, "network", ret_error,
                                            "host-gateway must lie outside pod-cidr (use a link-local address)");
        }
        *ret = s;
        return 0;
}

/* ---- logging ---- */

#define log_attachment(level, error, a, ...)                                                              \
        ({                                                                                              \
                char _pod[512];                                                                         \
                snprintf(_pod, sizeof(_pod), "%s/%s", strempty((a)->pod_namespace), strempty((a)->pod_name)); \
                const struct log_ctx _ctx = { .module = MODULE, .pod_uid = (a)->pod_uid,                \
                                              .pod = (a)->pod_name ? _pod : NULL };                     \
                log_ctx_full_errno(&_ctx, level, error, __VA_ARGS__);                                   \
        })

/* ---- pod store integration ---- */

static bool names_pod(const struct ipam_allocation *a) {
        return a->pod_uid || (a->pod_namespace && a->pod_name);
}

/* Whether two allocations belong to the same pod, as the store keys its overlay (uid, else
 * namespace/name). */
static bool same_pod(const struct ipam_allocation *a, const struct ipam_allocation *b) {
        if (a->pod_uid || b->pod_uid)
                return streq_ptr(a->pod_uid, b->pod_uid);
        return a->pod_namespace && a->pod_name && streq_ptr(a->pod_namespace, b->pod_namespace) &&
               streq_ptr(a->pod_name, b->pod_name);
}

/* The pod's address becomes the store's IP for it (so registration and identity see it). */
static void store_set_ip(struct module_instance *mi, const struct ipam_allocation *a, bool set) {
        char ip[16];
        char *ips[] = { ip, NULL };
        int r;

        if (!names_pod(a))
                return; /* CNI_ARGS named no pod: nothing to record */
        ipam_format_addr(a->addr, ip);
        r = pod_store_set_ips(mi->manager->pods, a->pod_uid, a->pod_namespace, a->pod_name, set ? ips : NULL);
        if (r < 0)
                (void) log_attachment(LOG_WARNING, r, a, "Failed to record the pod's IP in the pod store, ignoring: %m");
}

/* a is about to be released: the store forgets the pod's IP only if a is the pod's newest
 * attachment. An older sandbox of the same pod (a restart made a new one, B, and the runtime
 * now deletes or GCs the old one, A) must not take B's address out of the store. */
static bool store_forget_ip(struct module_instance *mi, const struct ipam_allocation *a) {
        struct podnet *p = mi->data;

        if (!names_pod(a))
                return false;
        for (size_t i = 0; i < ipam_count(p->ipam); i++) {
                const struct ipam_allocation *o = ipam_get(p->ipam, i);
                if (o != a && same_pod(o, a) && o->since >= a->since) {
                        (void) log_attachment(LOG_DEBUG, 0, a, "The pod has a newer attachment (%s/%s); keeping its IP",
                                              o->container_id, o->ifname);
                        return false;
                }
        }
        store_set_ip(mi, a, false);
        return true;
}

/* ---- replies ---- */

/* Every CNI failure goes through here: p->failed decides the metric's result label. */
static int reply_cni_error(struct podnet *p, struct api_request *req, unsigned status, const struct cni_request *cr,
                           const struct cni_error *e) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        cJSON *cni = cni_error_to_json(e, cr ? cr->cni_version : NULL);

        p->failed = true;
        if (!o || !cni || !cJSON_AddItemToObject(o, "cni", cni))
                return cJSON_Delete(cni), api_reply_error(req, 500, "out of memory");
        if (!cJSON_AddStringToObject(o, "error", e->msg ? e->msg : "error") ||
            !cJSON_AddNumberToObject(o, "code", status))
                return api_reply_error(req, 500, "out of memory");
        return api_reply_json(req, status, TAKE_PTR(o));
}

_printf_(7, 8) static int reply_error(struct podnet *p, struct api_request *req, unsigned status,
                                      const struct cni_request *cr, int code, const char *msg,
                                      const char *details_format, ...) {
        struct cni_error e = { .code = code };
        va_list ap;
        int r;

        e.msg = strdup(msg);
        va_start(ap, details_format);
        if (vasprintf(&e.details, details_format, ap) < 0)
                e.details = NULL;
        va_end(ap);
        r = reply_cni_error(p, req, status, cr, &e);
        cni_error_done(&e);
        return r;
}

static int reply_ok(struct api_request *req, cJSON *result) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        if (!o || (result && !cJSON_AddItemToObject(o, "result", result)))
                return cJSON_Delete(result), api_reply_error(req, 500, "out of memory");
        return api_reply_json(req, 200, TAKE_PTR(o));
}

/* The ADD result: prevResult (when chained after another plugin) plus our two interfaces, the
 * address and the default route. */
static cJSON *build_result(const struct podnet *p, const struct cni_request *cr, const struct ipam_allocation *a,
                           const struct wire_result *w) {
        _cleanup_(cJSON_Deletep) cJSON *o = cr->prev_result ? cJSON_Duplicate(cr->prev_result, true) : cJSON_CreateObject();
        cJSON *ifs, *ips, *routes, *x;
        char addr[32], ip[16], gw[16];
        bool old_format = cni_version_compare(cr->cni_version, "1.0.0") < 0;

        if (!o)
                return NULL;
        cJSON_DeleteItemFromObjectCaseSensitive(o, "cniVersion");
        if (!cJSON_AddStringToObject(o, "cniVersion", cr->cni_version))
                return NULL;
        ifs = cJSON_GetObjectItemCaseSensitive(o, "interfaces");
        if (!ifs && !(ifs = cJSON_AddArrayToObject(o, "interfaces")))
                return NULL;
        ips = cJSON_GetObjectItemCaseSensitive(o, "ips");
        if (!ips && !(ips = cJSON_AddArrayToObject(o, "ips")))
                return NULL;
        routes = cJSON_GetObjectItemCaseSensitive(o, "routes");
        if (!routes && !(routes = cJSON_AddArrayToObject(o, "routes")))
                return NULL;
        if (!cJSON_IsArray(ifs) || !cJSON_IsArray(ips) || !cJSON_IsArray(routes))
                return NULL;
        if (!cJSON_GetObjectItemCaseSensitive(o, "dns") && !cJSON_AddObjectToObject(o, "dns"))
                return NULL;

        ipam_format_addr(a->addr, ip);
        ipam_format_addr(p->gateway, gw);
        snprintf(addr, sizeof(addr), "%s/32", ip);

        if (!(x = cJSON_CreateObject()) || !cJSON_AddItemToArray(ifs, x) ||
            !cJSON_AddStringToObject(x, "name", a->host_ifname) || !cJSON_AddStringToObject(x, "mac", w->host_mac))
                return NULL;
        int pod_if = cJSON_GetArraySize(ifs);
        if (!(x = cJSON_CreateObject()) || !cJSON_AddItemToArray(ifs, x) ||
            !cJSON_AddStringToObject(x, "name", a->ifname) || !cJSON_AddStringToObject(x, "mac", w->pod_mac) ||
            !cJSON_AddStringToObject(x, "sandbox", cr->netns))
                return NULL;
        if (!(x = cJSON_CreateObject()) || !cJSON_AddItemToArray(ips, x) ||
            (old_format && !cJSON_AddStringToObject(x, "version", "4")) ||
            !cJSON_AddStringToObject(x, "address", addr) || !cJSON_AddStringToObject(x, "gateway", gw) ||
            !cJSON_AddNumberToObject(x, "interface", pod_if))
                return NULL;
        if (!(x = cJSON_CreateObject()) || !cJSON_AddItemToArray(routes, x) ||
            !cJSON_AddStringToObject(x, "dst", "0.0.0.0/0") || !cJSON_AddStringToObject(x, "gw", gw))
                return NULL;
        return TAKE_PTR(o);
}

/* A state write that is in place but whose directory fsync failed: kept (see ipam.h), told. */
static void warn_not_durable(struct podnet *p) {
        int r = ipam_take_not_durable(p->ipam);
        if (r < 0)
                log_module_warning(MODULE, "%s was updated but syncing its directory failed (%s): a power loss could "
                                   "lose the last change", p->state_file, strerror(-r));
}

/* ---- deletions in flight ---- */

static void pending_done(struct pending_deletion *d) {
        free(d->host_ifname);
        free(d->netns);
        free(d->ifname);
}

static void pending_clear(struct podnet *p) {
        for (size_t i = 0; i < p->n_pending; i++)
                pending_done(&p->pending[i]);
        p->pending = mfree(p->pending);
        p->n_pending = 0;
}

/* Best effort: without the record, an ADD that hits the old pod end answers "try again later"
 * instead of waiting for it. */
static void pending_add(struct podnet *p, const char *host_ifname, const char *netns, const char *ifname) {
        struct pending_deletion d = {};
        struct pending_deletion *grown = realloc(p->pending, (p->n_pending + 1) * sizeof(struct pending_deletion));

        if (!grown)
                return;
        p->pending = grown;
        d.host_ifname = strdup(host_ifname);
        d.netns = netns ? strdup(netns) : NULL;
        d.ifname = strdup(ifname);
        if (!d.host_ifname || !d.ifname || (netns && !d.netns)) {
                pending_done(&d);
                return;
        }
        p->pending[p->n_pending++] = d;
}

static void pending_remove(struct podnet *p, const char *host_ifname) {
        for (size_t i = 0; i < p->n_pending; i++)
                if (streq(p->pending[i].host_ifname, host_ifname)) {
                        pending_done(&p->pending[i]);
                        memmove(&p->pending[i], &p->pending[i + 1], (p->n_pending - i - 1) * sizeof(struct pending_deletion));
                        p->n_pending--;
                        return;
                }
}

/* The deletion that explains an EEXIST for this ADD: its own host end, or an earlier pod end by
 * the same name in the same namespace (the runtime reused the namespace right after a DEL). */
static const char *pending_blocking(const struct podnet *p, const char *host_ifname, const char *netns,
                                    const char *ifname) {
        for (size_t i = 0; i < p->n_pending; i++) {
                const struct pending_deletion *d = &p->pending[i];
                if (streq(d->host_ifname, host_ifname) || (streq_ptr(d->netns, netns) && streq(d->ifname, ifname)))
                        return d->host_ifname;
        }
        return NULL;
}

/* ---- the operations ---- */

static struct wire_params wire_params_of(const struct podnet *p, const struct ipam_allocation *a, const char *netns,
                                         int netns_fd) {
        return (struct wire_params) {
                .host_ifname = a->host_ifname,
                .ifname = a->ifname,
                .netns_path = netns ? netns : a->netns,
                .netns_fd = netns_fd,
                .addr = a->addr,
                .gateway = p->gateway,
                .mtu = p->settings->mtu,
        };
}


/* CNI_NETNS that wire_netns_open() refused. Not a namespace (or the host's own) is the spec's
 * code 4, "invalid necessary environment variable", which names the variable; a path that does
 * not exist is 3 (the container is unknown, as before). */
static int reply_netns_error(struct podnet *p, struct api_request *req, const struct cni_request *cr, int error) {
        if (error == -ENOENT)
                return reply_error(p, req, 404, cr, CNI_ERR_UNKNOWN_CONTAINER, "the network namespace does not exist",
                                   "CNI_NETNS %s does not exist", cr->netns);
        log_module_warning(MODULE, "Refusing CNI_NETNS %s for %s/%s: %s", cr->netns, cr->container_id, cr->ifname,
                           error == -EMEDIUMTYPE ? "not a network namespace"
                           : error == -EBUSY     ? "the host's own network namespace"
                                                 : strerror(-error));
        return reply_error(p, req, 400, cr, CNI_ERR_INVALID_ENV, "invalid CNI_NETNS", "CNI_NETNS %s %s", cr->netns,
                           error == -EMEDIUMTYPE ? "is not a network namespace"
                           : error == -EBUSY     ? "is the host's own network namespace"
                                                 : strerror(-error));
}

static int attachment_remove(struct module_instance *mi, const char *container_id, const char *ifname, char **ret_error);

static int cni_add(struct module_instance *mi, struct api_request *req, const struct cni_request *cr) {
        struct podnet *p = mi->data;
        const struct ipam_allocation *a;
        struct wire_result w = {};
        _cleanup_close_ int netns_fd = -EBADF;
        char host_ifname[16], ip[16];
        usec_t start = now_usec(CLOCK_MONOTONIC);
        bool fresh;
        int r;

        /* Opened once, checked, and that descriptor is what gets wired (no reopening). */
        r = wire_netns_open(cr->netns, p->host_netns_fd, &netns_fd);
        if (r < 0)
                return reply_netns_error(p, req, cr, r);
        r = ipam_host_ifname(p->ipam, cr->container_id, cr->ifname, host_ifname);
        if (r < 0)
                return reply_error(p, req, 500, cr, CNI_ERR_INTERNAL, "no free host interface name", "%s", strerror(-r));
        struct ipam_owner owner = {
                .netns = cr->netns,
                .host_ifname = host_ifname,
                .pod_namespace = cr->k8s_namespace,
                .pod_name = cr->k8s_name,
                .pod_uid = cr->k8s_uid,
                .network = cr->network_name,
                .mtu = p->settings->mtu,
        };
        r = ipam_allocate(p->ipam, cr->container_id, cr->ifname, &owner, now_usec(CLOCK_REALTIME), &a);
        if (r == -ENOSPC) {
                log_module_warning(MODULE, "No free address in %s for %s/%s", ipam_cidr(p->ipam), strempty(cr->k8s_namespace),
                                   strempty(cr->k8s_name));
                return reply_error(p, req, 503, cr, CNI_ERR_POOL_EXHAUSTED, "no free address in the pod CIDR", "%s is full",
                                   ipam_cidr(p->ipam));
        }
        if (r < 0) {
                log_module_error_errno(MODULE, r, "Failed to persist an allocation in %s: %m", p->state_file);
                return reply_error(p, req, 500, cr, CNI_ERR_INTERNAL, "cannot record the allocation", "%s: %s",
                                   p->state_file, strerror(-r));
        }
        fresh = r > 0; /* a repeated ADD (r == 0) must leave the allocation it found as it was */

        struct wire_params wp = wire_params_of(p, a, cr->netns, netns_fd);
        r = wire_add(p->host_netns_fd, &wp, &w);
        if (r == -EEXIST && p->reaper) {
                const char *blocking = pending_blocking(p, a->host_ifname, cr->netns, cr->ifname);
                if (blocking) {
                        /* The namespace is being reused and its old interface is still being
                         * deleted (a DEL just before): wait for that deletion alone, once more. */
                        _cleanup_free_ char *name = strdup(blocking);
                        if (!name)
                                r = -ENOMEM;
                        else {
                                (void) reaper_wait(p->reaper, name);
                                pending_remove(p, name); /* done, whatever on_reaped() saw */
                                a = ipam_find(p->ipam, cr->container_id, cr->ifname);
                                if (!a)
                                        return reply_error(p, req, 500, cr, CNI_ERR_INTERNAL, "the allocation vanished", "%s",
                                                           cr->container_id);
                                wp = wire_params_of(p, a, cr->netns, netns_fd);
                                r = wire_add(p->host_netns_fd, &wp, &w);
                        }
                } else if (reaper_pending(p->reaper) > 0) {
                        /* Deletions whose pod ends we cannot place (from before a restart) may be
                         * what is in the way: rather than block on the whole backlog, ask again. */
                        if (fresh && ipam_release(p->ipam, cr->container_id, cr->ifname, now_usec(CLOCK_REALTIME), false) < 0)
                                log_module_warning(MODULE, "Failed to release the address again; GC or DEL will");
                        return reply_error(p, req, 503, cr, CNI_ERR_TRY_AGAIN_LATER, "an interface is still being deleted",
                                           "%s exists in %s; %u deletion(s) in progress", cr->ifname, cr->netns,
                                           reaper_pending(p->reaper));
                }
        }
        if (r < 0) {
                (void) log_attachment(LOG_WARNING, r, a, "Failed to wire %s in %s: %m", cr->ifname, cr->netns);
                if (fresh) {
                        _cleanup_free_ char *cid = strdup(cr->container_id), *ifn = strdup(cr->ifname);
                        if (cid && ifn && ipam_release(p->ipam, cid, ifn, now_usec(CLOCK_REALTIME), false) < 0)
                                log_module_warning(MODULE, "Failed to release the address again; GC or DEL will");
                }
                return reply_error(p, req, 500, cr, CNI_ERR_INTERNAL, "failed to wire the pod", "%s %s: %s", cr->netns,
                                   cr->ifname, r == -EEXIST ? "interface exists already" : strerror(-r));
        }
        if (!fresh) {
                /* Rewired, maybe into another namespace or for another pod: record it. */
                r = ipam_update_owner(p->ipam, cr->container_id, cr->ifname, &owner);
                if (r < 0)
                        (void) log_attachment(LOG_WARNING, r, a, "Failed to record the repeated ADD's owner, keeping the old: %m");
                a = ipam_find(p->ipam, cr->container_id, cr->ifname);
        }

        store_set_ip(mi, a, true);
        ipam_format_addr(a->addr, ip);
        (void) metric_observe(p->m_setup, (double) (now_usec(CLOCK_MONOTONIC) - start) / USEC_PER_SEC);
        (void) log_attachment(LOG_INFO, 0, a, "Wired %s in %s: %s/32 via %s", a->ifname, cr->netns, ip, a->host_ifname);
        cJSON *result = build_result(p, cr, a, &w);
        if (!result) {
                /* Out of memory: the runtime sees a failure, so nothing may stay wired for it. */
                if (fresh) {
                        _cleanup_free_ char *error = NULL;
                        if (attachment_remove(mi, cr->container_id, cr->ifname, &error) < 0)
                                log_module_warning(MODULE, "Failed to undo %s/%s (%s); GC or DEL will", cr->container_id,
                                                   cr->ifname, strempty(error));
                }
                return reply_error(p, req, 500, cr, CNI_ERR_INTERNAL, "cannot build the result", "%s", "out of memory");
        }
        return reply_ok(req, result);
}

/* Tears one attachment down: the veth (the pod end goes with it) and then the address. */
static int attachment_remove(struct module_instance *mi, const char *container_id, const char *ifname, char **ret_error) {
        struct podnet *p = mi->data;
        const struct ipam_allocation *a = ipam_find(p->ipam, container_id, ifname);
        char ip[16];
        int r;

        if (!a)
                return 0;
        /* Copies: the release frees the allocation's strings. */
        _cleanup_free_ char *cid = strdup(container_id), *ifn = strdup(ifname), *host = strdup(a->host_ifname),
                            *netns = a->netns ? strdup(a->netns) : NULL;
        if (!cid || !ifn || !host)
                return -ENOMEM;
        if (!p->reaper) {
                r = wire_del(host);
                if (r < 0) {
                        if (asprintf(ret_error, "deleting %s: %s", host, strerror(-r)) < 0)
                                *ret_error = NULL;
                        return r;
                }
        }
        /* The store forgets the IP while a (freed by the release) still names the pod. */
        bool forgot = store_forget_ip(mi, a);
        ipam_format_addr(a->addr, ip);
        (void) log_attachment(LOG_INFO, 0, a, "Releasing %s (%s/%s)", ip, a->container_id, a->ifname);
        /* With the reaper, the name is recorded as being deleted in the same write. */
        r = ipam_release(p->ipam, cid, ifn, now_usec(CLOCK_REALTIME), p->reaper);
        if (r < 0) {
                if (forgot)
                        store_set_ip(mi, a, true); /* still allocated: a is unchanged */
                if (asprintf(ret_error, "%s: %s", p->state_file, strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        if (p->reaper && reaper_queue(p->reaper, host) >= 0)
                pending_add(p, host, netns, ifn);
        else if (p->reaper) {
                /* Cannot queue (out of memory): do it here. */
                r = wire_del(host);
                if (r >= 0)
                        (void) ipam_link_deleted(p->ipam, host);
        }
        return 0;
}

/* A host veth the reaper deleted (on the loop). */
static void on_reaped(struct reaper *r, const char *name, int error, void *userdata) {
        struct module_instance *mi = userdata;
        struct podnet *p = mi->data;
        int k;

        pending_remove(p, name);
        if (error < 0) {
                log_module_warning(MODULE, "Failed to delete host interface %s (%s); retrying at the next start", name,
                                   strerror(-error));
                return;
        }
        log_module_debug(MODULE, "Deleted host interface %s", name);
        k = p->ipam ? ipam_link_deleted(p->ipam, name) : 0;
        if (k < 0)
                log_module_warning(MODULE, "Failed to record that %s is deleted (%s), ignoring", name, strerror(-k));
        warn_not_durable(p);
}

static int cni_del(struct module_instance *mi, struct api_request *req, const struct cni_request *cr) {
        struct podnet *p = mi->data;
        _cleanup_free_ char *error = NULL;
        int r = attachment_remove(mi, cr->container_id, cr->ifname, &error);
        if (r < 0) {
                log_module_error_errno(MODULE, r, "Failed to delete %s/%s: %s", cr->container_id, cr->ifname, strempty(error));
                return reply_error(p, req, 500, cr, CNI_ERR_INTERNAL, "failed to delete the attachment", "%s", strempty(error));
        }
        return reply_ok(req, NULL);
}

/* prevResult must still name our address on our interface. */
static bool prev_result_has(const cJSON *prev, const char *addr) {
        const cJSON *ip;
        cJSON_ArrayForEach(ip, cJSON_GetObjectItemCaseSensitive(prev, "ips")) {
                const cJSON *a = cJSON_GetObjectItemCaseSensitive(ip, "address");
                if (cJSON_IsString(a) && streq(a->valuestring, addr))
                        return true;
        }
        return false;
}

static int cni_check(struct module_instance *mi, struct api_request *req, const struct cni_request *cr) {
        struct podnet *p = mi->data;
        const struct ipam_allocation *a = ipam_find(p->ipam, cr->container_id, cr->ifname);
        _cleanup_free_ char *drift = NULL;
        char ip[16], addr[32];
        int r;

        if (!a)
                return reply_error(p, req, 404, cr, CNI_ERR_UNKNOWN_CONTAINER, "unknown attachment",
                                   "no address for %s/%s", cr->container_id, cr->ifname);
        ipam_format_addr(a->addr, ip);
        snprintf(addr, sizeof(addr), "%s/32", ip);
        if (cr->prev_result && !prev_result_has(cr->prev_result, addr))
                return reply_error(p, req, 409, cr, CNI_ERR_DRIFT, "prevResult does not match",
                                   "the agent gave %s to %s/%s; prevResult does not list it", addr, cr->container_id,
                                   cr->ifname);
        _cleanup_close_ int netns_fd = -EBADF;
        r = wire_netns_open(cr->netns, p->host_netns_fd, &netns_fd);
        if (r == -ENOENT) {
                (void) log_attachment(LOG_WARNING, 0, a, "CHECK found drift: network namespace %s is gone", cr->netns);
                return reply_error(p, req, 409, cr, CNI_ERR_DRIFT, "the pod network drifted", "network namespace %s is gone",
                                   cr->netns);
        }
        if (r < 0)
                return reply_netns_error(p, req, cr, r);
        struct wire_params wp = wire_params_of(p, a, cr->netns, netns_fd);
        if (a->mtu > 0)
                wp.mtu = a->mtu; /* what ADD set up, not what the config says now */
        r = wire_check(p->host_netns_fd, &wp, &drift);
        if (r == -EUCLEAN) {
                (void) log_attachment(LOG_WARNING, 0, a, "CHECK found drift: %s", strempty(drift));
                return reply_error(p, req, 409, cr, CNI_ERR_DRIFT, "the pod network drifted", "%s", strempty(drift));
        }
        if (r < 0)
                return reply_error(p, req, 500, cr, CNI_ERR_INTERNAL, "cannot check the pod network", "%s", strerror(-r));
        return reply_ok(req, NULL);
}

static bool attachment_valid(const struct cni_request *cr, const struct ipam_allocation *a) {
        for (size_t i = 0; i < cr->n_valid; i++)
                if (streq(cr->valid[i].container_id, a->container_id) && streq(cr->valid[i].ifname, a->ifname))
                        return true;
        return false;
}

/* GC: every attachment the runtime does not list as valid is a leak (a DEL that never came).
 * Except a young one: the runtime computes the list before it sends GC, and an ADD answered in
 * between is not on it yet. gc-grace (default 60s) is far longer than that window; a real leak
 * is released by the next GC after it. */
static int cni_gc(struct module_instance *mi, struct api_request *req, const struct cni_request *cr) {
        struct podnet *p = mi->data;
        _cleanup_free_ char *first_error = NULL;
        unsigned released = 0, failed = 0, young = 0;
        usec_t now = now_usec(CLOCK_REALTIME);

        if (!cr->has_valid)
                return reply_ok(req, NULL);
        for (size_t i = 0; i < ipam_count(p->ipam);) {
                const struct ipam_allocation *a = ipam_get(p->ipam, i);
                _cleanup_free_ char *error = NULL;
                /* CNI names an attachment by network, container and interface: another
                 * network's GC does not know ours. (No network recorded: from before it was.) */
                if (attachment_valid(cr, a) || (a->network && !streq_ptr(a->network, cr->network_name))) {
                        i++;
                        continue;
                }
                /* (Within gc-grace either way: a clock stepped back must not make a pod wired a
                 * moment ago look old.) */
                if (a->since + p->settings->gc_grace > now && a->since < now + p->settings->gc_grace) {
                        young++;
                        i++;
                        continue;
                }
                _cleanup_free_ char *cid = strdup(a->container_id), *ifn = strdup(a->ifname);
                if (!cid || !ifn)
                        return api_reply_error(req, 500, "out of memory");
                int r = attachment_remove(mi, cid, ifn, &error);
                if (r < 0) {
                        failed++;
                        if (!first_error)
                                first_error = TAKE_PTR(error);
                        i++;
                        continue;
                }
                released++;
        }
        if (released > 0 || failed > 0)
                log_module_info(MODULE, "GC released %u leaked attachment(s)%s", released, failed ? ", some failed" : "");
        if (young > 0)
                log_module_info(MODULE, "GC kept %u attachment(s) not listed as valid but younger than gc-grace", young);
        if (failed > 0)
                return reply_error(p, req, 500, cr, CNI_ERR_INTERNAL, "GC could not release every leak", "%u failed; first: %s",
                                   failed, strempty(first_error));
        return reply_ok(req, NULL);
}

static int cni_status(struct module_instance *mi, struct api_request *req, const struct cni_request *cr) {
        struct podnet *p = mi->data;
        struct ipam_usage u;

        if (mi->state == MODULE_DEGRADED)
                return reply_error(p, req, 503, cr, CNI_ERR_LIMITED_CONNECTIVITY, "the pod network is degraded", "%s",
                                   strempty(mi->reason));
        if (mi->state != MODULE_RUNNING || !p->ipam)
                return reply_error(p, req, 503, cr, CNI_ERR_NOT_AVAILABLE, "the pod network is not available", "podnet is %s%s%s",
                                   module_state_to_string(mi->state), mi->reason ? ": " : "", strempty(mi->reason));
        ipam_usage(p->ipam, now_usec(CLOCK_REALTIME), &u);
        if (u.free == 0)
                return reply_error(p, req, 503, cr, CNI_ERR_NOT_AVAILABLE, "the pod network is not available",
                                   "no free address in %s", ipam_cidr(p->ipam));
        return reply_ok(req, NULL);
}

/* POST /v1/cni (root only): one CNI operation from pinion-cni. */
static int handle_cni(struct api_request *req, void *userdata) {
        struct module_instance *mi = userdata;
        struct podnet *p = mi->data;
        struct cni_request cr = { .command = _CNI_COMMAND_INVALID };
        struct cni_error e = {};
        size_t size = 0;
        const char *body = api_request_body(req, &size);
        int r;

        p->failed = false;
        /* Wiring namespaces is root's business (DESIGN.md): socket-group reads status, no more. */
        const struct api_peer *peer = api_request_peer(req);
        if (!peer || peer->uid != 0) {
                (void) metric_inc(p->m_ops, "invalid", "error");
                return api_reply_error(req, 403, "POST /v1/cni is for root only (pinion-cni run by the container runtime)");
        }
        r = cni_request_from_json(&cr, body, size, &e);
        if (r < 0) {
                if (r == -ENOMEM)
                        r = api_reply_error(req, 500, "out of memory");
                else
                        r = reply_cni_error(p, req, 400, &cr, &e);
                (void) metric_inc(p->m_ops, "invalid", "error");
                goto out;
        }

        if (cr.command == CNI_VERSION)
                r = reply_ok(req, cni_version_result(cr.cni_version));
        else if (cr.command == CNI_STATUS)
                r = cni_status(mi, req, &cr);
        else if (p->stopped || !p->ipam)
                r = reply_error(p, req, 503, &cr, CNI_ERR_TRY_AGAIN_LATER, "the pod network is not available",
                                "podnet is %s%s%s", module_state_to_string(mi->state), mi->reason ? ": " : "",
                                strempty(mi->reason));
        else
                switch (cr.command) {
                case CNI_ADD:
                        r = cni_add(mi, req, &cr);
                        break;
                case CNI_DEL:
                        r = cni_del(mi, req, &cr);
                        break;
                case CNI_CHECK:
                        r = cni_check(mi, req, &cr);
                        break;
                case CNI_GC:
                        r = cni_gc(mi, req, &cr);
                        break;
                case CNI_STATUS:
                case CNI_VERSION:
                case _CNI_COMMAND_MAX:
                case _CNI_COMMAND_INVALID:
                        r = api_reply_error(req, 500, "unreachable");
                        break;
                }
        (void) metric_inc(p->m_ops, cni_command_to_string(cr.command), r >= 0 && !p->failed ? "ok" : "error");
        warn_not_durable(p);
out:
        cni_error_done(&e);
        cni_request_done(&cr);
        return r;
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
}

static int podnet_register(struct module_instance *mi) {
        static const char *const verb_result[] = { "verb", "result", NULL };
        static const char *const state[] = { "state", NULL };
        static const double buckets[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5 };
        static const struct api_route routes[] = {
                /* Privileged lets socket-group in too: handle_cni() lets only root through. */
        { "POST", "/v1/cni", handle_cni, .privileged = true },
        };
        struct podnet *p = mi->data;
        struct manager *m = mi->manager;
        int r;

        const struct metric_def families[] = {
                { METRIC_COUNTER, "pinion_podnet_operations_total", "CNI operations by verb (ADD, DEL, CHECK, STATUS, GC, VERSION; invalid: unparsable) and result (ok, error).", verb_result, NULL, 0, &p->m_ops },
                { METRIC_HISTOGRAM, "pinion_podnet_setup_seconds", "Time to wire a pod (a successful ADD: allocation, veth, addresses, routes).", NULL, buckets, ELEMENTSOF(buckets), &p->m_setup },
                { METRIC_GAUGE, "pinion_podnet_pool_addresses", "Pod CIDR addresses by state: allocated, quarantined (recently released), free, size (usable in all).", state, NULL, 0, &p->m_pool },
        };
        if (!p->metrics_reg) {
                r = metrics_register(m->metrics, families, ELEMENTSOF(families), collect_podnet, mi, &p->metrics_reg);
                if (r < 0)
                        return r;
        }
        if (!p->routes) {
                r = api_add_routes(m->api, routes, ELEMENTSOF(routes), mi, &p->routes);
                if (r < 0)
                        return r;
        }
        return 0;
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
 * The fact is a pointer on the manager, so looking once a second costs nothing. */
static int on_node_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct module_instance *mi = userdata;

        const struct node_pod_cidr *fact = manager_lookup(mi->manager, FACT_NODE_POD_CIDR);
        if (!fact || !fact->cidr) {
                /* (The apiserver module may have been restarted by a reload: ask again.) */
                if (fact)
                        fact->request(fact->userdata);
                (void) sd_event_source_set_time_relative(s, USEC_PER_SEC);
                return 0;
        }
        int r = podnet_open(mi);
        if (r < 0)
                module_set_state(mi, MODULE_FAILED, "cannot open the pod network: %s", strerror(-r));
        return 0;
}

static int podnet_wait_for_node(struct module_instance *mi) {
        struct podnet *p = mi->data;
        if (p->node_timer)
                return sd_event_source_set_enabled(p->node_timer, SD_EVENT_ON);
        int r = sd_event_add_time_relative(mi->manager->event, &p->node_timer, CLOCK_MONOTONIC, USEC_PER_SEC,
                                           USEC_PER_SEC / 10, on_node_timer, mi);
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
        dir = path_join(state_dir, "podnet");
        free(p->state_file);
        p->state_file = path_join(dir, "allocations.json");
        if (!dir || !p->state_file)
                return -ENOMEM;
        r = mkdir_p(dir, 0700);
        if (r < 0) {
                module_set_state(mi, MODULE_FAILED, "cannot create %s: %s", dir, strerror(-r));
                return 0;
        }
        (void) fsutil_cleanup_temp(dir);
        r = ipam_new(p->cidr, p->settings->address_quarantine, p->state_file, &p->ipam, &error);
        if (r == -EBADMSG) {
                module_set_state(mi, MODULE_FAILED, "%s is damaged (%s); move it away to start with an empty pool",
                                 p->state_file, strempty(error));
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
                store_set_ip(mi, ipam_get(p->ipam, i), true);

        /* Routing between pods and the host needs forwarding. */
        r = wire_sysctl_write("net/ipv4/ip_forward", "1");
        if (r < 0) {
                module_set_state(mi, MODULE_DEGRADED, "cannot enable net.ipv4.ip_forward: %s", strerror(-r));
                return 0;
        }
        log_module_info(MODULE, "Pod network %s%s: %zu allocation(s) restored from %s", p->cidr,
                        p->settings->pod_cidr ? "" : " (the Node's spec.podCIDR)",
                        ipam_count(p->ipam), p->state_file);
        module_set_state(mi, MODULE_RUNNING, NULL);
        return 0;
}

static int podnet_start(struct module_instance *mi) {
        struct podnet *p = mi->data;
        int r;

        r = podnet_register(mi);
        if (r < 0)
                return r;
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
        r = reaper_new(mi->manager->event, on_reaped, mi, &p->reaper);
        if (r < 0)
                log_module_warning(MODULE, "Cannot start the veth deletion thread (%s); deleting inline", strerror(-r));
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
        podnet_settings_free(p->settings);
        p->settings = s;
        if (!reopen) {
                podnet_apply_settings(p);
                return 0;
        }
        p->ipam = ipam_free(p->ipam);
        return podnet_open(mi);
}

static int podnet_stop(struct module_instance *mi) {
        struct podnet *p = mi->data;
        /* Nothing to drain: requests are answered on the loop as they come. Pods stay wired. */
        p->stopped = true;
        p->routes = api_routes_free(p->routes);
        p->metrics_reg = metrics_registration_free(p->metrics_reg);
        p->node_timer = sd_event_source_disable_unref(p->node_timer);
        /* The deletion in progress finishes; queued ones stay recorded for the next start. */
        p->reaper = reaper_free(p->reaper);
        pending_clear(p);
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
        if (!p->ipam)
                return 0;
        pool = ipam_to_json(p->ipam, now_usec(CLOCK_REALTIME));
        if (!pool || !cJSON_AddItemToObject(obj, "pool", pool))
                return cJSON_Delete(pool), -ENOMEM;
        return 0;
}

static void podnet_free(struct module_instance *mi) {
        struct podnet *p = mi->data;

        if (!p)
                return;
        api_routes_free(p->routes);
        metrics_registration_free(p->metrics_reg);
        p->reaper = reaper_free(p->reaper);
        pending_clear(p);
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

const struct module podnet_module = {
        .name = "podnet",
        .deps = (const char *const[]) { "apiserver", NULL },
        .init = podnet_init,
        .start = podnet_start,
        .reload = podnet_reload,
        .stop = podnet_stop,
        .status = podnet_status,
        .free = podnet_free,
        .capabilities = podnet_capabilities,
};
