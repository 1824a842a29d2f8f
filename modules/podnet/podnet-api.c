/* SPDX-License-Identifier: MIT */
/* POST /v1/cni (root only): pinion-cni forwards every CNI operation here. Requests run on the
 * loop one at a time, so concurrent ADDs are serialised by construction; a wiring takes a few
 * milliseconds of netlink round trips (bounded: no waiting on anything). A DEL's request is
 * held, not the loop, until its veth is gone (cni_del()). */

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cni.h"
#include "json.h"
#include "manager.h"
#include "podnet.h"
#include "wire.h"

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
        char addr[32], ip[16], gw[16], ip6[INET6_ADDRSTRLEN], addr6[INET6_ADDRSTRLEN + 8];
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
        if (a->has_addr6) {
                ipam_format_addr6(&a->addr6, ip6);
                snprintf(addr6, sizeof(addr6), "%s/128", ip6);
        }

        if (!(x = cJSON_CreateObject()) || !cJSON_AddItemToArray(ifs, x) ||
            !cJSON_AddStringToObject(x, "name", a->host_ifname) || !cJSON_AddStringToObject(x, "mac", w->host_mac))
                return NULL;
        int pod_if = cJSON_GetArraySize(ifs);
        if (!(x = cJSON_CreateObject()) || !cJSON_AddItemToArray(ifs, x) ||
            !cJSON_AddStringToObject(x, "name", a->ifname) || !cJSON_AddStringToObject(x, "mac", w->pod_mac) ||
            !cJSON_AddStringToObject(x, "sandbox", cr->netns))
                return NULL;
        if (a->addr && (!(x = cJSON_CreateObject()) || !cJSON_AddItemToArray(ips, x) ||
                        (old_format && !cJSON_AddStringToObject(x, "version", "4")) ||
                        !cJSON_AddStringToObject(x, "address", addr) || !cJSON_AddStringToObject(x, "gateway", gw) ||
                        !cJSON_AddNumberToObject(x, "interface", pod_if)))
                return NULL;
        if (a->addr && (!(x = cJSON_CreateObject()) || !cJSON_AddItemToArray(routes, x) ||
                        !cJSON_AddStringToObject(x, "dst", "0.0.0.0/0") || !cJSON_AddStringToObject(x, "gw", gw)))
                return NULL;
        if (a->has_addr6 && (!(x = cJSON_CreateObject()) || !cJSON_AddItemToArray(ips, x) ||
                             (old_format && !cJSON_AddStringToObject(x, "version", "6")) ||
                             !cJSON_AddStringToObject(x, "address", addr6) ||
                             !cJSON_AddStringToObject(x, "gateway", WIRE6_GATEWAY) ||
                             !cJSON_AddNumberToObject(x, "interface", pod_if)))
                return NULL;
        if (a->has_addr6 && (!(x = cJSON_CreateObject()) || !cJSON_AddItemToArray(routes, x) ||
                             !cJSON_AddStringToObject(x, "dst", "::/0") || !cJSON_AddStringToObject(x, "gw", WIRE6_GATEWAY)))
                return NULL;
        return TAKE_PTR(o);
}

/* ---- the operations ---- */

static struct wire_params wire_params_of(const struct podnet *p, const struct ipam_allocation *a, const char *netns,
                                         int netns_fd, bool fresh, const uint8_t *pod_mac) {
        return (struct wire_params) {
                .pod_mac = pod_mac,
                .host_ifname = a->host_ifname,
                .container_id = a->container_id,
                /* An allocation from before this request (a retried ADD, one made by an older
                 * pinion) vouches for an unmarked veth by its name; a fresh one does not. */
                .adopt_unmarked = !fresh,
                .ifname = a->ifname,
                .netns_path = netns ? netns : a->netns,
                .netns_fd = netns_fd,
                .addr = a->addr,
                .has_addr6 = a->has_addr6,
                .addr6 = a->addr6,
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

/* An interface pinion did not make has the name ADD computed for the host end: it stays as it
 * is, and the runtime learns which one is in the way. */
static int reply_name_taken(struct podnet *p, struct api_request *req, const struct cni_request *cr, const char *host_ifname) {
        _cleanup_free_ char *msg = NULL;

        if (asprintf(&msg, "host interface %s exists and was not created by pinion", host_ifname) < 0)
                msg = NULL;
        log_module_warning(MODULE, "ADD %s/%s: host interface %s exists and is not pinion's (not a veth with a \""
                           WIRE_MARK_PREFIX "\" alias): left as it is, ADD refused", cr->container_id, cr->ifname, host_ifname);
        return reply_error(p, req, 409, cr, CNI_ERR_NAME_TAKEN, msg ? msg : "the host interface name is taken",
                           "%s is not a veth carrying pinion's \"" WIRE_MARK_PREFIX "<container ID>\" alias; "
                           "pinion deletes only interfaces it created: remove or rename it", host_ifname);
}

/* A dynamic address, or the one the runtime asked for (CNI_ARGS IP=, runtimeConfig ips). */
static int allocate(struct podnet *p, const struct cni_request *cr, const struct ipam_owner *owner,
                    const struct ipam_allocation **ret) {
        struct in6_addr addr6 = {};
        uint32_t addr = 0;

        if ((cr->requested_ip4 && inet_pton(AF_INET, cr->requested_ip4, &addr) != 1) ||
            (cr->requested_ip6 && inet_pton(AF_INET6, cr->requested_ip6, &addr6) != 1))
                return -ERANGE;
        addr = ntohl(addr);
        return ipam_allocate_request(p->ipam, cr->container_id, cr->ifname, owner, cr->requested_ip4 ? &addr : NULL,
                                     cr->requested_ip6 ? &addr6 : NULL, now_usec(CLOCK_REALTIME), ret);
}

/* A requested address that cannot be had: nothing was allocated. */
static int reply_request_refused(struct podnet *p, struct api_request *req, const struct cni_request *cr, int error) {
        const struct ipam_allocation *a = ipam_find(p->ipam, cr->container_id, cr->ifname), *other = NULL;
        char want[2 * INET6_ADDRSTRLEN + 2], held[INET6_ADDRSTRLEN + 18] = "";
        struct in6_addr addr6;
        uint32_t addr;

        snprintf(want, sizeof(want), "%s%s%s", strempty(cr->requested_ip4), cr->requested_ip4 && cr->requested_ip6 ? "," : "",
                 strempty(cr->requested_ip6));

        log_module_info(MODULE, "ADD %s/%s: requested address %s refused: %s", cr->container_id, cr->ifname, want,
                        strerror(-error));
        switch (error) {
        case -EAFNOSUPPORT:
                return reply_error(p, req, 400, cr, CNI_ERR_ADDRESS_UNUSABLE, "no pool for the requested address",
                                   "%s: the pod network has no pool of that family (pod-cidr %s)", want, ipam_cidr(p->ipam));
        case -EEXIST:
                if (a && a->addr)
                        ipam_format_addr(a->addr, held);
                if (a && a->has_addr6) {
                        size_t n = strlen(held);
                        held[n] = n ? ',' : '\0';
                        ipam_format_addr6(&a->addr6, held + (n ? n + 1 : 0));
                }
                return reply_error(p, req, 409, cr, CNI_ERR_ADDRESS_UNUSABLE, "the attachment holds another address",
                                   "%s/%s holds %s; a repeated ADD cannot ask for %s", cr->container_id, cr->ifname, held,
                                   want);
        case -EADDRINUSE:
                if (cr->requested_ip4 && inet_pton(AF_INET, cr->requested_ip4, &addr) == 1)
                        other = ipam_find_addr(p->ipam, ntohl(addr));
                if (!other && cr->requested_ip6 && inet_pton(AF_INET6, cr->requested_ip6, &addr6) == 1)
                        other = ipam_find_addr6(p->ipam, &addr6);
                return reply_error(p, req, 409, cr, CNI_ERR_ADDRESS_TAKEN, "the requested address is in use",
                                   "%s is held by attachment %s/%s (pod %s/%s)", want, other ? other->container_id : "?",
                                   other ? other->ifname : "?", other ? strempty(other->pod_namespace) : "",
                                   other ? strempty(other->pod_name) : "");
        case -EBUSY:
                return reply_error(p, req, 503, cr, CNI_ERR_TRY_AGAIN_LATER, "the requested address is in quarantine",
                                   "%s was released less than address-quarantine ago; ask again later", want);
        default:
                return reply_error(p, req, 400, cr, CNI_ERR_ADDRESS_UNUSABLE, "the requested address is outside the pool",
                                   "%s is not a pod address of %s (its network, broadcast and subnet-router addresses are not)", want,
                                   ipam_cidr(p->ipam));
        }
}

static int cni_add(struct module_instance *mi, struct api_request *req, const struct cni_request *cr) {
        struct podnet *p = mi->data;
        const struct ipam_allocation *a;
        struct wire_result w = {};
        _cleanup_close_ int netns_fd = -EBADF;
        char host_ifname[16], ip[16], ip6[INET6_ADDRSTRLEN];
        usec_t start = now_usec(CLOCK_MONOTONIC);
        uint8_t mac_buf[6];
        const uint8_t *mac = NULL;
        bool fresh;
        int r;

        if (cr->mac) {
                if (cni_mac_parse(cr->mac, mac_buf) < 0) /* checked by the parser: cannot fail */
                        return reply_error(p, req, 400, cr, CNI_ERR_INVALID_ENV, "invalid MAC address", "%s", cr->mac);
                mac = mac_buf;
        }
        /* Opened once, checked, and that descriptor is what gets wired (no reopening). */
        r = wire_netns_open(cr->netns, p->host_netns_fd, &netns_fd);
        if (r < 0)
                return reply_netns_error(p, req, cr, r);
        /* The namespace's inode: reconciliation tells a recycled path from this namespace. */
        struct stat ns_st;
        if (fstat(netns_fd, &ns_st) < 0)
                ns_st.st_ino = 0;
        r = ipam_host_ifname(p->ipam, cr->container_id, cr->ifname, host_ifname);
        if (r < 0)
                return reply_error(p, req, 500, cr, CNI_ERR_INTERNAL, "no free host interface name", "%s", strerror(-r));
        struct ipam_owner owner = {
                .netns = cr->netns,
                .netns_ino = (uint64_t) ns_st.st_ino,
                .host_ifname = host_ifname,
                .pod_namespace = cr->k8s_namespace,
                .pod_name = cr->k8s_name,
                .pod_uid = cr->k8s_uid,
                .network = cr->network_name,
                .mtu = p->settings->mtu,
        };
        /* The allocation's record is flushed while the pod is wired; ipam_sync() below waits for
         * the flush before anything is answered. */
        ipam_defer_sync(p->ipam);
        r = allocate(p, cr, &owner, &a);
        if (r == -ERANGE || r == -EEXIST || r == -EADDRINUSE || r == -EBUSY || r == -EAFNOSUPPORT)
                return reply_request_refused(p, req, cr, r);
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

        struct wire_params wp = wire_params_of(p, a, cr->netns, netns_fd, fresh, mac);
        r = wire_add(p->host_netns_fd, &wp, &w);
        if (r == -EEXIST && p->reaper) {
                const char *blocking = podnet_pending_blocking(p, a->host_ifname, cr->netns, cr->ifname);
                if (blocking) {
                        /* The namespace is being reused and its old interface is still being
                         * deleted (a DEL just before): wait for that deletion alone, once more. */
                        _cleanup_free_ char *name = strdup(blocking);
                        if (!name)
                                r = -ENOMEM;
                        else {
                                (void) reaper_wait(p->reaper, name);
                                podnet_pending_remove(p, name); /* done, whatever podnet_on_reaped() saw */
                                a = ipam_find(p->ipam, cr->container_id, cr->ifname);
                                if (!a)
                                        return reply_error(p, req, 500, cr, CNI_ERR_INTERNAL, "the allocation vanished", "%s",
                                                           cr->container_id);
                                wp = wire_params_of(p, a, cr->netns, netns_fd, fresh, mac);
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
                (void) log_attachment_full_errno(a, LOG_WARNING, r, "Failed to wire %s in %s: %m", cr->ifname, cr->netns);
                if (fresh) {
                        _cleanup_free_ char *cid = strdup(cr->container_id), *ifn = strdup(cr->ifname);
                        if (cid && ifn && ipam_release(p->ipam, cid, ifn, now_usec(CLOCK_REALTIME), false) < 0)
                                log_module_warning(MODULE, "Failed to release the address again; GC or DEL will");
                }
                if (r == -ENOTUNIQ)
                        return reply_name_taken(p, req, cr, host_ifname); /* not a: it may be released */
                return reply_error(p, req, 500, cr, CNI_ERR_INTERNAL, "failed to wire the pod", "%s %s: %s", cr->netns,
                                   cr->ifname, r == -EEXIST ? "interface exists already" : strerror(-r));
        }
        if (!fresh) {
                /* Rewired, maybe into another namespace or for another pod: record it. */
                r = ipam_update_owner(p->ipam, cr->container_id, cr->ifname, &owner);
                if (r < 0)
                        (void) log_attachment_full_errno(a, LOG_WARNING, r, "Failed to record the repeated ADD's owner, keeping the old: %m");
                a = ipam_find(p->ipam, cr->container_id, cr->ifname);
        }
        /* The address is durable before anyone learns it: the runtime, the pod store. */
        r = ipam_sync(p->ipam);
        if (r < 0) {
                log_module_error_errno(MODULE, r, "Failed to persist an allocation in %s: %m", p->state_file);
                if (fresh) {
                        _cleanup_free_ char *error = NULL;
                        if (podnet_attachment_remove(mi, cr->container_id, cr->ifname, "its allocation could not be persisted",
                                                     &error) < 0)
                                log_module_warning(MODULE, "Failed to undo %s/%s (%s); GC or DEL will", cr->container_id,
                                                   cr->ifname, strempty(error));
                }
                return reply_error(p, req, 500, cr, CNI_ERR_INTERNAL, "cannot record the allocation", "%s: %s",
                                   p->state_file, strerror(-r));
        }

        podnet_store_set_ip(mi, a, true);
        ipam_format_addr(a->addr, ip);
        ipam_format_addr6(&a->addr6, ip6);
        (void) metric_observe(p->m_setup, (double) (now_usec(CLOCK_MONOTONIC) - start) / USEC_PER_SEC);
        (void) log_attachment_full_errno(a, LOG_INFO, 0, "Wired %s in %s: %s%s%s%s%s via %s", a->ifname, cr->netns,
                                         a->addr ? ip : "", a->addr ? "/32" : "", a->addr && a->has_addr6 ? " " : "",
                                         a->has_addr6 ? ip6 : "", a->has_addr6 ? "/128" : "", a->host_ifname);
        cJSON *result = build_result(p, cr, a, &w);
        if (!result) {
                /* Out of memory: the runtime sees a failure, so nothing may stay wired for it. */
                if (fresh) {
                        _cleanup_free_ char *error = NULL;
                        if (podnet_attachment_remove(mi, cr->container_id, cr->ifname, "the ADD's result could not be built",
                                                     &error) < 0)
                                log_module_warning(MODULE, "Failed to undo %s/%s (%s); GC or DEL will", cr->container_id,
                                                   cr->ifname, strempty(error));
                }
                return reply_error(p, req, 500, cr, CNI_ERR_INTERNAL, "cannot build the result", "%s", "out of memory");
        }
        return reply_ok(req, result);
}

/* DEL answers once the pod end is gone from the namespace: the runtime may reuse the namespace
 * right away (another ADD there, pinion's or another plugin's, with the same interface name).
 * The veth is deleted off the loop (reaper.h) and the request held until then; a repeated DEL
 * while the deletion runs waits for it too. Returns 1 if the request is held. */
static int cni_del(struct module_instance *mi, struct api_request *req, const struct cni_request *cr) {
        struct podnet *p = mi->data;
        _cleanup_free_ char *error = NULL;
        int r;

        /* The release is written before the DEL is answered (a kill -9 keeps it) but not flushed
         * on its own: a power loss that takes it back leaves the address allocated, which
         * reconciliation releases again; the next ADD's flush takes it along (ipam.h). */
        ipam_lazy_sync(p->ipam);
        r = podnet_attachment_remove(mi, cr->container_id, cr->ifname, "DEL", &error);
        if (r < 0) {
                log_module_error_errno(MODULE, r, "Failed to delete %s/%s: %s", cr->container_id, cr->ifname, strempty(error));
                return reply_error(p, req, 500, cr, CNI_ERR_INTERNAL, "failed to delete the attachment", "%s", strempty(error));
        }
        r = podnet_pending_hold(mi, req, cr->container_id, cr->ifname);
        if (r > 0)
                return 1;
        if (r < 0)
                log_module_warning(MODULE, "Cannot hold the DEL of %s/%s until its veth is gone (%s); answering now",
                                   cr->container_id, cr->ifname, strerror(-r));
        r = ipam_sync(p->ipam);
        if (r < 0)
                return reply_error(p, req, 500, cr, CNI_ERR_INTERNAL, "cannot record the release", "%s: %s",
                                   p->state_file, strerror(-r));
        return reply_ok(req, NULL);
}

void podnet_del_finish(struct podnet *p, struct api_request *req, int error) {
        /* This may run in the middle of another request (an ADD waiting for a deletion): its
         * result flag is kept for it. */
        bool other_failed = p->failed;
        int r;

        p->failed = false;
        if (error < 0) {
                log_module_warning(MODULE, "DEL: the veth could not be deleted: %s", strerror(-error));
                r = reply_error(p, req, 500, NULL, CNI_ERR_INTERNAL, "failed to delete the pod's interface", "%s",
                                strerror(-error));
        } else
                r = reply_ok(req, NULL);
        if (p->metrics_reg)
                (void) metric_inc(p->m_ops, cni_command_to_string(CNI_DEL), r >= 0 && !p->failed ? "ok" : "error");
        p->failed = other_failed;
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

/* The MAC address prevResult lists for the pod's interface, if any. */
static const char *prev_result_mac(const cJSON *prev, const char *ifname, const char *netns) {
        const cJSON *i;
        cJSON_ArrayForEach(i, cJSON_GetObjectItemCaseSensitive(prev, "interfaces")) {
                const cJSON *name = cJSON_GetObjectItemCaseSensitive(i, "name");
                const cJSON *sandbox = cJSON_GetObjectItemCaseSensitive(i, "sandbox");
                const cJSON *mac = cJSON_GetObjectItemCaseSensitive(i, "mac");
                if (cJSON_IsString(name) && streq(name->valuestring, ifname) && cJSON_IsString(sandbox) &&
                    streq_ptr(sandbox->valuestring, netns) && cJSON_IsString(mac))
                        return mac->valuestring;
        }
        return NULL;
}

static int cni_check(struct module_instance *mi, struct api_request *req, const struct cni_request *cr) {
        struct podnet *p = mi->data;
        const struct ipam_allocation *a = ipam_find(p->ipam, cr->container_id, cr->ifname);
        _cleanup_free_ char *drift = NULL;
        char ip[INET6_ADDRSTRLEN], addr[INET6_ADDRSTRLEN + 8], addr6[INET6_ADDRSTRLEN + 8];
        /* The pod end must have the MAC the runtime asks for now, else the one ADD reported. */
        const char *want_mac = cr->mac ? cr->mac : prev_result_mac(cr->prev_result, cr->ifname, cr->netns);
        uint8_t mac_buf[6];
        const uint8_t *mac = NULL;
        int r;

        if (want_mac) {
                if (cni_mac_parse(want_mac, mac_buf) < 0)
                        return reply_error(p, req, 400, cr, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                           "prevResult lists MAC address '%.32s' for %s", want_mac, cr->ifname);
                mac = mac_buf;
        }

        if (!a)
                return reply_error(p, req, 404, cr, CNI_ERR_UNKNOWN_CONTAINER, "unknown attachment",
                                   "no address for %s/%s", cr->container_id, cr->ifname);
        ipam_format_addr(a->addr, ip);
        snprintf(addr, sizeof(addr), "%s/32", ip);
        ipam_format_addr6(&a->addr6, ip);
        snprintf(addr6, sizeof(addr6), "%s/128", ip);
        /* prevResult must list every address the agent gave the attachment. */
        const char *missing = !cr->prev_result                                   ? NULL
                              : a->addr && !prev_result_has(cr->prev_result, addr) ? addr
                              : a->has_addr6 && !prev_result_has(cr->prev_result, addr6) ? addr6
                                                                                          : NULL;
        if (missing)
                return reply_error(p, req, 409, cr, CNI_ERR_DRIFT, "prevResult does not match",
                                   "the agent gave %s to %s/%s; prevResult does not list it", missing, cr->container_id,
                                   cr->ifname);
        _cleanup_close_ int netns_fd = -EBADF;
        r = wire_netns_open(cr->netns, p->host_netns_fd, &netns_fd);
        if (r == -ENOENT) {
                (void) log_attachment_full_errno(a, LOG_WARNING, 0, "CHECK found drift: network namespace %s is gone", cr->netns);
                return reply_error(p, req, 409, cr, CNI_ERR_DRIFT, "the pod network drifted", "network namespace %s is gone",
                                   cr->netns);
        }
        if (r < 0)
                return reply_netns_error(p, req, cr, r);
        struct wire_params wp = wire_params_of(p, a, cr->netns, netns_fd, false, mac);
        if (a->mtu > 0)
                wp.mtu = a->mtu; /* what ADD set up, not what the config says now */
        r = wire_check(p->host_netns_fd, &wp, &drift);
        if (r == -EUCLEAN) {
                (void) log_attachment_full_errno(a, LOG_WARNING, 0, "CHECK found drift: %s", strempty(drift));
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
 * is released by the next GC after it. The grace rule and the release (logged, counted by
 * reason) are reconciliation's (reconcile.c). */
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
                if (podnet_attachment_young(p, a, now)) {
                        young++;
                        i++;
                        continue;
                }
                int r = podnet_release(mi, a, RELEASE_GC, &error);
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
        /* An ADD needs an address of every family the pods get. */
        ipam_usage(p->ipam, now_usec(CLOCK_REALTIME), &u);
        const char *full = ipam_has_family(p->ipam, AF_INET) && u.free == 0 ? ipam_cidr4(p->ipam) : NULL;
        if (ipam_usage6(p->ipam, now_usec(CLOCK_REALTIME), &u) && u.free == 0)
                full = ipam_cidr6(p->ipam);
        if (full)
                return reply_error(p, req, 503, cr, CNI_ERR_NOT_AVAILABLE, "the pod network is not available",
                                   "no free address in %s", full);
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
        const struct peer *peer = api_request_peer(req);
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
                        if (r > 0)
                                goto held; /* counted when answered: podnet_del_finish() */
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
held:
        /* Ends a deferral (or lazy release): whatever an ADD changed is durable before the
         * request returns. */
        if (p->ipam) {
                int k = ipam_sync(p->ipam);
                if (k < 0)
                        log_module_warning(MODULE, "Failed to persist %s (%s): a power loss could undo the last change",
                                           p->state_file, strerror(-k));
        }
        podnet_warn_not_durable(p);
        r = MIN(r, 0);
out:
        cni_error_done(&e);
        cni_request_done(&cr);
        return r;
}

int podnet_api_register(struct module_instance *mi) {
        static const struct api_route routes[] = {
                /* Privileged lets socket-group in too: handle_cni() lets only root through. */
                { "POST", "/v1/cni", handle_cni, .privileged = true },
        };
        struct podnet *p = mi->data;

        if (p->routes)
                return 0;
        int r = api_add_routes(mi->manager->api, routes, ELEMENTSOF(routes), mi, &p->routes);
        return r < 0 ? r : 0;
}
