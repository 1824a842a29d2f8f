/* SPDX-License-Identifier: MIT */
/* One attachment's life: the CNI operations on it (ADD, DEL, CHECK, and GC over all of them),
 * each a transaction that leaves nothing half-done behind a failure; its address as the pod's
 * IP in the pod store (so registration and identity see it); its teardown.
 *
 * An operation returns 0 (ADD: with its result) or a negative errno with the CNI error the
 * runtime is to see (code, msg, details); podnet-api.c turns either into the reply. Requests
 * run on the loop one at a time, so concurrent ADDs are serialised by construction; a wiring
 * takes a few milliseconds of netlink round trips (bounded: no waiting on anything). */

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "manager.h"
#include "podnet.h"
#include "self-memory.h"
#include "wire.h"

/* ---- failures ---- */

/* Sets e to what the runtime is told; returns error (a negative errno: its kind, which the
 * reply's status follows with e's code). */
_printf_(5, 6) static int fail(struct cni_error *e, int error, int code, const char *msg, const char *details_format, ...) {
        va_list ap;

        cni_error_done(e);
        e->code = code;
        e->msg = strdup(msg);
        va_start(ap, details_format);
        if (vasprintf(&e->details, details_format, ap) < 0)
                e->details = NULL;
        va_end(ap);
        return error < 0 ? error : -EINVAL;
}

/* A write of the pool's state that failed (nothing changed). A full disk is said as such, with
 * the directory to free space in: the runtime retries, and the next ADD after space returns
 * works (nothing to reset). */
static int fail_state_write(struct podnet *p, int error, struct cni_error *e, const char *msg) {
        _cleanup_free_ char *dir = p->state_file ? strdup(p->state_file) : NULL;
        char *slash = dir ? strrchr(dir, '/') : NULL;

        if (slash && slash != dir)
                *slash = '\0';
        podnet_count_state_error(p, error);
        if (error == -ENOSPC || error == -EDQUOT) {
                log_module_warning(MODULE, "No space left in %s (%s): %s", strempty(dir), strerror(-error), msg);
                return fail(e, error, CNI_ERR_TRY_AGAIN_LATER, "the node's disk is full",
                            "%s: %s (no address was allocated; retry once space is freed)", strempty(dir), strerror(-error));
        }
        log_module_error_errno(MODULE, error, "Failed to persist %s: %m", p->state_file);
        return fail(e, error, CNI_ERR_INTERNAL, msg, "%s: %s", p->state_file, strerror(-error));
}

/* CNI_NETNS that wire_netns_open() refused. Not a namespace (or the host's own) is the spec's
 * code 4, "invalid necessary environment variable", which names the variable; a path that does
 * not exist is 3 (the container is unknown, as before). */
static int fail_netns(const struct cni_request *cr, int error, struct cni_error *e) {
        if (error == -ENOENT)
                return fail(e, error, CNI_ERR_UNKNOWN_CONTAINER, "the network namespace does not exist",
                            "CNI_NETNS %s does not exist", cr->netns);
        log_module_warning(MODULE, "Refusing CNI_NETNS %s for %s/%s: %s", cr->netns, cr->container_id, cr->ifname,
                           error == -EMEDIUMTYPE ? "not a network namespace"
                           : error == -EBUSY     ? "the host's own network namespace"
                                                 : strerror(-error));
        return fail(e, error, CNI_ERR_INVALID_ENV, "invalid CNI_NETNS", "CNI_NETNS %s %s", cr->netns,
                    error == -EMEDIUMTYPE ? "is not a network namespace"
                    : error == -EBUSY     ? "is the host's own network namespace"
                    : strerror(-error));
}

/* ---- the pod store, the teardown ---- */

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

/* The pod's addresses become the store's IPs for it (so registration and identity see them):
 * the IPv4 one first, as Kubernetes lists podIPs. */
void attachment_store_set_ip(struct module_instance *mi, const struct ipam_allocation *a, bool set) {
        char ip[16], ip6[INET6_ADDRSTRLEN];
        char *ips[3] = {}, **next = ips;
        int r;

        if (!names_pod(a))
                return; /* CNI_ARGS named no pod: nothing to record */
        ipam_addr_format(a->addr, ip);
        ipam_addr_format6(&a->addr6, ip6);
        if (a->addr)
                *next++ = ip;
        if (a->has_addr6)
                *next++ = ip6;
        r = pod_store_set_ips(mi->manager->pods, a->pod_uid, a->pod_namespace, a->pod_name, set ? ips : NULL);
        if (r < 0)
                (void) log_attachment_full_errno(a, LOG_WARNING, r, "Failed to record the pod's IP in the pod store, ignoring: %m");
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
                        (void) log_attachment_full_errno(a, LOG_DEBUG, 0, "The pod has a newer attachment (%s/%s); keeping its IP",
                                              o->container_id, o->ifname);
                        return false;
                }
        }
        attachment_store_set_ip(mi, a, false);
        return true;
}

/* Tears one attachment down: the veth (the pod end goes with it) and then the address. */
int attachment_remove(struct module_instance *mi, const char *container_id, const char *ifname, const char *why,
                      char **ret_error) {
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
                if (r == -ENOTUNIQ) {
                        (void) log_attachment_full_errno(a, LOG_WARNING, 0, "%s is not pinion's any more: left as it is", host);
                        r = 0;
                }
                if (r < 0) {
                        if (asprintf(ret_error, "deleting %s: %s", host, strerror(-r)) < 0)
                                *ret_error = NULL;
                        return r;
                }
        }
        /* The store forgets the IP while a (freed by the release) still names the pod. */
        bool forgot = store_forget_ip(mi, a);
        /* Whose it was, for the gate once it is gone (NULL out of memory: nobody is told). */
        _cleanup_free_ char *uid = a->pod_uid ? strdup(a->pod_uid) : NULL,
                            *pod_ns = a->pod_namespace ? strdup(a->pod_namespace) : NULL,
                            *pod_name = a->pod_name ? strdup(a->pod_name) : NULL;
        ipam_addr_format(a->addr, ip);
        (void) log_attachment_full_errno(a, LOG_INFO, 0, "Releasing %s (%s/%s, %s in %s): %s", ip, a->container_id, a->ifname,
                                         a->host_ifname, a->netns ? a->netns : "an unrecorded namespace", why);
        /* With the reaper, the name is recorded as being deleted in the same write. */
        r = ipam_release(p->ipam, cid, ifn, now_usec(CLOCK_REALTIME), p->reaper);
        if (r < 0) {
                podnet_count_state_error(p, r);
                if (forgot)
                        attachment_store_set_ip(mi, a, true); /* still allocated: a is unchanged */
                if (asprintf(ret_error, "%s: %s", p->state_file, strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        if (p->reaper && reaper_queue(p->reaper, host) >= 0)
                deletion_add(p, host, netns, cid, ifn);
        else if (p->reaper) {
                /* Cannot queue (out of memory): do it here. */
                r = wire_del(host);
                if (r >= 0 || r == -ENOTUNIQ)
                        (void) ipam_link_deleted(p->ipam, host);
        }
        network_gate_pod_changed(mi, uid, pod_ns, pod_name);
        return 0;
}

/* ---- ADD ---- */

/* What ADD wires, and CHECK compares the kernel with. */
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

        ipam_addr_format(a->addr, ip);
        ipam_addr_format(p->gateway, gw);
        snprintf(addr, sizeof(addr), "%s/32", ip);
        if (a->has_addr6) {
                ipam_addr_format6(&a->addr6, ip6);
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

/* An interface pinion did not make has the name ADD computed for the host end: it stays as it
 * is, and the runtime learns which one is in the way. */
static int fail_name_taken(const struct cni_request *cr, const char *host_ifname, struct cni_error *e) {
        _cleanup_free_ char *msg = NULL;

        if (asprintf(&msg, "host interface %s exists and was not created by pinion", host_ifname) < 0)
                msg = NULL;
        log_module_warning(MODULE, "ADD %s/%s: host interface %s exists and is not pinion's (not a veth with a \""
                           WIRE_MARK_PREFIX "\" alias): left as it is, ADD refused", cr->container_id, cr->ifname, host_ifname);
        return fail(e, -ENOTUNIQ, CNI_ERR_NAME_TAKEN, msg ? msg : "the host interface name is taken",
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
static int fail_request_refused(const struct podnet *p, const struct cni_request *cr, int error, struct cni_error *e) {
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
                return fail(e, error, CNI_ERR_ADDRESS_UNUSABLE, "no pool for the requested address",
                            "%s: the pod network has no pool of that family (pod-cidr %s)", want, ipam_cidr(p->ipam));
        case -EEXIST:
                if (a && a->addr)
                        ipam_addr_format(a->addr, held);
                if (a && a->has_addr6) {
                        size_t n = strlen(held);
                        held[n] = n ? ',' : '\0';
                        ipam_addr_format6(&a->addr6, held + (n ? n + 1 : 0));
                }
                return fail(e, error, CNI_ERR_ADDRESS_UNUSABLE, "the attachment holds another address",
                            "%s/%s holds %s; a repeated ADD cannot ask for %s", cr->container_id, cr->ifname, held,
                            want);
        case -EADDRINUSE:
                if (cr->requested_ip4 && inet_pton(AF_INET, cr->requested_ip4, &addr) == 1)
                        other = ipam_find_addr(p->ipam, ntohl(addr));
                if (!other && cr->requested_ip6 && inet_pton(AF_INET6, cr->requested_ip6, &addr6) == 1)
                        other = ipam_find_addr6(p->ipam, &addr6);
                return fail(e, error, CNI_ERR_ADDRESS_TAKEN, "the requested address is in use",
                            "%s is held by attachment %s/%s (pod %s/%s)", want, other ? other->container_id : "?",
                            other ? other->ifname : "?", other ? strempty(other->pod_namespace) : "",
                            other ? strempty(other->pod_name) : "");
        case -EBUSY:
                return fail(e, error, CNI_ERR_TRY_AGAIN_LATER, "the requested address is in quarantine",
                            "%s was released less than address-quarantine ago; ask again later", want);
        default:
                return fail(e, error, CNI_ERR_ADDRESS_UNUSABLE, "the requested address is outside the pool",
                            "%s is not a pod address of %s (its network, broadcast and subnet-router addresses are not)", want,
                            ipam_cidr(p->ipam));
        }
}


/* One ADD under way. */
struct add {
        struct podnet *p;
        const struct cni_request *cr;
        int netns_fd;        /* CNI_NETNS, opened once: what gets wired */
        uint8_t mac_buf[6];
        const uint8_t *mac;  /* the pod end's MAC address the runtime asks for; NULL: pinion picks */
        char host_ifname[16];
        struct ipam_owner owner;
        const struct ipam_allocation *a;
        bool fresh;          /* a was allocated by this ADD (a repeated ADD finds it) */
        struct wire_result w;
};

static void add_done(struct add *add) {
        add->netns_fd = safe_close(add->netns_fd);
}

/* What a failed ADD undoes: only what it made itself. A repeated ADD leaves the allocation it
 * found as it was. */
enum add_undo {
        ADD_UNDO_NOTHING,
        ADD_UNDO_RELEASE, /* a fresh address, nothing wired */
        ADD_UNDO_REMOVE,  /* a fresh address, wired: the veth and the address */
};

/* The request's MAC address, its namespace, the host end's name and the owner to record. */
static int add_prepare(struct add *add, struct cni_error *e) {
        const struct cni_request *cr = add->cr;
        struct stat ns_st;
        int r;

        if (cr->mac) {
                if (cni_mac_parse(cr->mac, add->mac_buf) < 0) /* checked by the parser: cannot fail */
                        return fail(e, -EINVAL, CNI_ERR_INVALID_ENV, "invalid MAC address", "%s", cr->mac);
                add->mac = add->mac_buf;
        }
        /* Opened once, checked, and that descriptor is what gets wired (no reopening). */
        r = wire_netns_open(cr->netns, add->p->host_netns_fd, &add->netns_fd);
        if (r < 0)
                return fail_netns(cr, r, e);
        /* The namespace's inode: reconciliation tells a recycled path from this namespace. */
        if (fstat(add->netns_fd, &ns_st) < 0)
                ns_st.st_ino = 0;
        r = ipam_host_ifname(add->p->ipam, cr->container_id, cr->ifname, add->host_ifname);
        if (r < 0)
                return fail(e, r, CNI_ERR_INTERNAL, "no free host interface name", "%s", strerror(-r));
        add->owner = (struct ipam_owner) {
                .netns = cr->netns,
                .netns_ino = (uint64_t) ns_st.st_ino,
                .host_ifname = add->host_ifname,
                .pod_namespace = cr->k8s_namespace,
                .pod_name = cr->k8s_name,
                .pod_uid = cr->k8s_uid,
                .network = cr->network_name,
                .mtu = add->p->settings->mtu,
        };
        return 0;
}

/* The attachment's address: allocated now (fresh), or the one it holds (a repeated ADD). The
 * allocation's record is flushed while the pod is wired; attachment_add() waits for the flush
 * before anything is answered. */
static int add_allocate(struct add *add, struct cni_error *e) {
        struct podnet *p = add->p;
        const struct cni_request *cr = add->cr;
        int r;

        ipam_defer_sync(p->ipam);
        r = allocate(p, cr, &add->owner, &add->a);
        if (r == -ERANGE || r == -EEXIST || r == -EADDRINUSE || r == -EBUSY || r == -EAFNOSUPPORT)
                return fail_request_refused(p, cr, r, e);
        if (r == -EADDRNOTAVAIL) {
                log_module_warning(MODULE, "No free address in %s for %s/%s", ipam_cidr(p->ipam), strempty(cr->k8s_namespace),
                                   strempty(cr->k8s_name));
                return fail(e, r, CNI_ERR_POOL_EXHAUSTED, "no free address in the pod CIDR", "%s is full", ipam_cidr(p->ipam));
        }
        if (r < 0)
                return fail_state_write(p, r, e, "cannot record the allocation");
        add->fresh = r > 0; /* a repeated ADD (r == 0) must leave the allocation it found as it was */
        return 0;
}

static int add_wire_once(struct add *add) {
        struct wire_params wp = wire_params_of(add->p, add->a, add->cr->netns, add->netns_fd, add->fresh, add->mac);
        return wire_add(add->p->host_netns_fd, &wp, &add->w);
}

/* Wires the pod. When the namespace is being reused and its old interface is still being
 * deleted (a DEL just before), the ADD waits for that deletion alone and wires once more;
 * add->a is looked up again after the wait (NULL: the allocation vanished). */
static int add_wire(struct add *add, struct cni_error *e) {
        struct podnet *p = add->p;
        const struct cni_request *cr = add->cr;
        const char *blocking;
        int r;

        r = add_wire_once(add);
        if (r == -EEXIST && p->reaper && (blocking = deletion_blocking(p, add->a->host_ifname, cr->netns, cr->ifname))) {
                _cleanup_free_ char *name = strdup(blocking);
                if (!name)
                        r = -ENOMEM;
                else {
                        (void) reaper_wait(p->reaper, name);
                        deletion_done(p, name); /* done, whatever deletion_on_reaped() saw */
                        add->a = ipam_find(p->ipam, cr->container_id, cr->ifname);
                        if (!add->a)
                                return fail(e, -ENOENT, CNI_ERR_INTERNAL, "the allocation vanished", "%s", cr->container_id);
                        r = add_wire_once(add);
                }
        } else if (r == -EEXIST && p->reaper && reaper_pending(p->reaper) > 0)
                /* Deletions whose pod ends we cannot place (from before a restart) may be what is
                 * in the way: rather than block on the whole backlog, ask again. */
                return fail(e, r, CNI_ERR_TRY_AGAIN_LATER, "an interface is still being deleted",
                            "%s exists in %s; %u deletion(s) in progress", cr->ifname, cr->netns, reaper_pending(p->reaper));
        if (r >= 0)
                return 0;
        (void) log_attachment_full_errno(add->a, LOG_WARNING, r, "Failed to wire %s in %s: %m", cr->ifname, cr->netns);
        if (r == -ENOTUNIQ)
                return fail_name_taken(cr, add->host_ifname, e);
        return fail(e, r, CNI_ERR_INTERNAL, "failed to wire the pod", "%s %s: %s", cr->netns, cr->ifname,
                    r == -EEXIST ? "interface exists already" : strerror(-r));
}

/* A repeated ADD rewired the pod, maybe into another namespace or for another pod: record it. */
static void add_record_owner(struct add *add) {
        const struct cni_request *cr = add->cr;
        int r;

        r = ipam_update_owner(add->p->ipam, cr->container_id, cr->ifname, &add->owner);
        if (r < 0)
                (void) log_attachment_full_errno(add->a, LOG_WARNING, r,
                                                 "Failed to record the repeated ADD's owner, keeping the old: %m");
        add->a = ipam_find(add->p->ipam, cr->container_id, cr->ifname);
}

static void add_log_wired(const struct add *add) {
        const struct ipam_allocation *a = add->a;
        char ip[16], ip6[INET6_ADDRSTRLEN];

        ipam_addr_format(a->addr, ip);
        ipam_addr_format6(&a->addr6, ip6);
        (void) log_attachment_full_errno(a, LOG_INFO, 0, "Wired %s in %s: %s%s%s%s%s via %s", a->ifname, add->cr->netns,
                                         a->addr ? ip : "", a->addr ? "/32" : "", a->addr && a->has_addr6 ? " " : "",
                                         a->has_addr6 ? ip6 : "", a->has_addr6 ? "/128" : "", a->host_ifname);
}

static void add_undo(struct module_instance *mi, const struct cni_request *cr, enum add_undo undo, const char *why) {
        struct podnet *p = mi->data;
        _cleanup_free_ char *error = NULL;

        switch (undo) {
        case ADD_UNDO_NOTHING:
                break;
        case ADD_UNDO_RELEASE:
                if (ipam_release(p->ipam, cr->container_id, cr->ifname, now_usec(CLOCK_REALTIME), false) < 0)
                        log_module_warning(MODULE, "Failed to release the address again; GC or DEL will");
                break;
        case ADD_UNDO_REMOVE:
                if (attachment_remove(mi, cr->container_id, cr->ifname, why, &error) < 0)
                        log_module_warning(MODULE, "Failed to undo %s/%s (%s); GC or DEL will", cr->container_id, cr->ifname,
                                           strempty(error));
                break;
        }
}

/* A pod's veth pair is kernel memory charged to the agent: near its limit, a refusal the
 * runtime retries rather than the OOM killer (self-memory.h). */
static int add_admit(struct module_instance *mi, struct cni_error *e) {
        _cleanup_free_ char *why = NULL;

        if (self_memory_guard_admit(mi->manager->memory_guard, "cni-add", &why) < 0)
                return cni_error_set(e, CNI_ERR_TRY_AGAIN_LATER, "agent at its memory limit", "%s",
                                     why ? why : "try again later");
        return 0;
}

int attachment_add(struct module_instance *mi, const struct cni_request *cr, cJSON **ret_result, struct cni_error *e) {
        struct podnet *p = mi->data;
        _cleanup_(add_done) struct add add = { .p = p, .cr = cr, .netns_fd = -EBADF };
        usec_t start = now_usec(CLOCK_MONOTONIC);
        enum add_undo undo = ADD_UNDO_NOTHING;
        const char *undo_why = NULL;
        cJSON *result;
        int r;

        r = add_admit(mi, e);
        if (r < 0)
                return r;
        r = add_prepare(&add, e);
        if (r < 0)
                return r;
        r = add_allocate(&add, e);
        if (r < 0)
                return r;
        if (add.fresh)
                undo = ADD_UNDO_RELEASE;
        r = add_wire(&add, e);
        if (r < 0) {
                if (!add.a)
                        undo = ADD_UNDO_NOTHING; /* the allocation vanished while the ADD waited */
                goto fail;
        }
        if (add.fresh)
                undo = ADD_UNDO_REMOVE;
        else
                add_record_owner(&add);
        /* The address is durable before anyone learns it: the runtime, the pod store. */
        r = ipam_sync(p->ipam);
        if (r < 0) {
                undo_why = "its allocation could not be persisted";
                r = fail_state_write(p, r, e, "cannot record the allocation");
                goto fail;
        }

        attachment_store_set_ip(mi, add.a, true);
        (void) metric_observe(p->m_setup, (double) (now_usec(CLOCK_MONOTONIC) - start) / USEC_PER_SEC);
        add_log_wired(&add);
        result = build_result(p, cr, add.a, &add.w);
        if (!result) {
                /* Out of memory: the runtime sees a failure, so nothing may stay wired for it. */
                undo_why = "the ADD's result could not be built";
                r = fail(e, -ENOMEM, CNI_ERR_INTERNAL, "cannot build the result", "%s", "out of memory");
                goto fail;
        }
        network_gate_wired(mi, cr, add.a);
        *ret_result = result;
        return 0;

fail:
        add_undo(mi, cr, undo, undo_why);
        return r;
}

/* ---- DEL ---- */

/* DEL answers once the pod end is gone from the namespace: the runtime may reuse the namespace
 * right away (another ADD there, pinion's or another plugin's, with the same interface name).
 * The veth is deleted off the loop (reaper.h) and the request held until then; a repeated DEL
 * while the deletion runs waits for it too. */
int attachment_del(struct module_instance *mi, const struct cni_request *cr, struct api_request *req,
                   deletion_answer_fn answer, struct cni_error *e) {
        struct podnet *p = mi->data;
        _cleanup_free_ char *error = NULL;
        int r;

        /* The release is written before the DEL is answered (a kill -9 keeps it) but not flushed
         * on its own: a power loss that takes it back leaves the address allocated, which
         * reconciliation releases again; the next ADD's flush takes it along (ipam.h). */
        ipam_lazy_sync(p->ipam);
        r = attachment_remove(mi, cr->container_id, cr->ifname, "DEL", &error);
        if (r < 0) {
                log_module_error_errno(MODULE, r, "Failed to delete %s/%s: %s", cr->container_id, cr->ifname, strempty(error));
                return fail(e, r, CNI_ERR_INTERNAL, "failed to delete the attachment", "%s", strempty(error));
        }
        r = deletion_hold(mi, req, cr->container_id, cr->ifname, answer);
        if (r > 0)
                return 1;
        if (r < 0)
                log_module_warning(MODULE, "Cannot hold the DEL of %s/%s until its veth is gone (%s); answering now",
                                   cr->container_id, cr->ifname, strerror(-r));
        r = ipam_sync(p->ipam);
        if (r < 0)
                return fail_state_write(p, r, e, "cannot record the release");
        return 0;
}

/* ---- CHECK ---- */

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

int attachment_check(struct module_instance *mi, const struct cni_request *cr, struct cni_error *e) {
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
                        return fail(e, -EINVAL, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                    "prevResult lists MAC address '%.32s' for %s", want_mac, cr->ifname);
                mac = mac_buf;
        }

        if (!a)
                return fail(e, -ENOENT, CNI_ERR_UNKNOWN_CONTAINER, "unknown attachment",
                            "no address for %s/%s", cr->container_id, cr->ifname);
        ipam_addr_format(a->addr, ip);
        snprintf(addr, sizeof(addr), "%s/32", ip);
        ipam_addr_format6(&a->addr6, ip);
        snprintf(addr6, sizeof(addr6), "%s/128", ip);
        /* prevResult must list every address the agent gave the attachment. */
        const char *missing = !cr->prev_result                                   ? NULL
                              : a->addr && !prev_result_has(cr->prev_result, addr) ? addr
                              : a->has_addr6 && !prev_result_has(cr->prev_result, addr6) ? addr6
                                                                                          : NULL;
        if (missing)
                return fail(e, -EUCLEAN, CNI_ERR_DRIFT, "prevResult does not match",
                            "the agent gave %s to %s/%s; prevResult does not list it", missing, cr->container_id,
                            cr->ifname);
        _cleanup_close_ int netns_fd = -EBADF;
        r = wire_netns_open(cr->netns, p->host_netns_fd, &netns_fd);
        if (r == -ENOENT) {
                (void) log_attachment_full_errno(a, LOG_WARNING, 0, "CHECK found drift: network namespace %s is gone", cr->netns);
                return fail(e, r, CNI_ERR_DRIFT, "the pod network drifted", "network namespace %s is gone",
                            cr->netns);
        }
        if (r < 0)
                return fail_netns(cr, r, e);
        struct wire_params wp = wire_params_of(p, a, cr->netns, netns_fd, false, mac);
        if (a->mtu > 0)
                wp.mtu = a->mtu; /* what ADD set up, not what the config says now */
        r = wire_check(p->host_netns_fd, &wp, &drift);
        if (r == -EUCLEAN) {
                (void) log_attachment_full_errno(a, LOG_WARNING, 0, "CHECK found drift: %s", strempty(drift));
                return fail(e, r, CNI_ERR_DRIFT, "the pod network drifted", "%s", strempty(drift));
        }
        if (r < 0)
                return fail(e, r, CNI_ERR_INTERNAL, "cannot check the pod network", "%s", strerror(-r));
        return 0;
}


/* ---- GC ---- */

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
int attachment_gc(struct module_instance *mi, const struct cni_request *cr, struct cni_error *e) {
        struct podnet *p = mi->data;
        _cleanup_free_ char *first_error = NULL;
        unsigned released = 0, failed = 0, young = 0;
        int first_r = 0;
        usec_t now = now_usec(CLOCK_REALTIME);

        if (!cr->has_valid)
                return 0;
        for (size_t i = 0; i < ipam_count(p->ipam);) {
                const struct ipam_allocation *a = ipam_get(p->ipam, i);
                _cleanup_free_ char *error = NULL;
                /* CNI names an attachment by network, container and interface: another
                 * network's GC does not know ours. (No network recorded: from before it was.) */
                if (attachment_valid(cr, a) || (a->network && !streq_ptr(a->network, cr->network_name))) {
                        i++;
                        continue;
                }
                if (reconcile_attachment_young(p, a, now)) {
                        young++;
                        i++;
                        continue;
                }
                int r = reconcile_release(mi, a, RELEASE_GC, &error);
                if (r < 0) {
                        if (failed++ == 0)
                                first_r = r;
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
                return fail(e, first_r, CNI_ERR_INTERNAL, "GC could not release every leak", "%u failed; first: %s",
                            failed, strempty(first_error));
        return 0;
}

