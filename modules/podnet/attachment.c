/* SPDX-License-Identifier: MIT */
/* One attachment's life outside the wiring: its address as the pod's IP in the pod store (so
 * registration and identity see it), its release, and the host veths the reaper is deleting,
 * which an ADD reusing a namespace may have to wait for. */

#include <arpa/inet.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>

#include "manager.h"
#include "podnet.h"
#include "wire.h"

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

/* The pod's addresses become the store's IPs for it (so registration and identity see them):
 * the IPv4 one first, as Kubernetes lists podIPs. */
void podnet_store_set_ip(struct module_instance *mi, const struct ipam_allocation *a, bool set) {
        char ip[16], ip6[INET6_ADDRSTRLEN];
        char *ips[3] = {}, **next = ips;
        int r;

        if (!names_pod(a))
                return; /* CNI_ARGS named no pod: nothing to record */
        ipam_format_addr(a->addr, ip);
        ipam_format_addr6(&a->addr6, ip6);
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
        podnet_store_set_ip(mi, a, false);
        return true;
}

/* A state write that is in place but whose directory fsync failed: kept (see ipam.h), told. */
void podnet_warn_not_durable(struct podnet *p) {
        int r = ipam_take_not_durable(p->ipam);
        if (r < 0)
                log_module_warning(MODULE, "%s was updated but syncing its directory failed (%s): a power loss could "
                                   "lose the last change", p->state_file, strerror(-r));
}

/* ---- deletions in flight ---- */

static void pending_done(struct pending_deletion *d) {
        free(d->host_ifname);
        free(d->netns);
        free(d->container_id);
        free(d->ifname);
        free(d->waiters);
}

/* The held DELs of d learn how its deletion ended. */
static void pending_answer(struct podnet *p, struct pending_deletion *d, int error) {
        for (size_t i = 0; i < d->n_waiters; i++)
                podnet_del_finish(p, d->waiters[i], error);
        d->waiters = mfree(d->waiters);
        d->n_waiters = 0;
}

/* Stopping: a held DEL is answered only once its interface is gone, so the deletions it waits
 * for are done here (the reaper is stopped by now); the others stay recorded for the next
 * start. */
void podnet_pending_clear(struct podnet *p) {
        for (size_t i = 0; i < p->n_pending; i++) {
                struct pending_deletion *d = &p->pending[i];
                if (d->n_waiters > 0) {
                        int r = wire_del(d->host_ifname);
                        if ((r >= 0 || r == -ENOTUNIQ) && p->ipam)
                                (void) ipam_link_deleted(p->ipam, d->host_ifname);
                        pending_answer(p, d, r == -ENOTUNIQ ? 0 : r);
                }
                pending_done(d);
        }
        p->pending = mfree(p->pending);
        p->n_pending = 0;
}

/* Best effort: without the record, an ADD that hits the old pod end answers "try again later"
 * instead of waiting for it, and a DEL answers before the veth is gone. */
static void pending_add(struct podnet *p, const char *host_ifname, const char *netns, const char *container_id,
                        const char *ifname) {
        struct pending_deletion d = {};
        struct pending_deletion *grown = realloc(p->pending, (p->n_pending + 1) * sizeof(struct pending_deletion));

        if (!grown)
                return;
        p->pending = grown;
        d.host_ifname = strdup(host_ifname);
        d.netns = netns ? strdup(netns) : NULL;
        d.container_id = strdup(container_id);
        d.ifname = strdup(ifname);
        if (!d.host_ifname || !d.ifname || !d.container_id || (netns && !d.netns)) {
                pending_done(&d);
                return;
        }
        p->pending[p->n_pending++] = d;
}

/* The deletion of host_ifname is over (error: how it ended); its held DELs are answered. */
static void pending_finish(struct podnet *p, const char *host_ifname, int error) {
        for (size_t i = 0; i < p->n_pending; i++)
                if (streq(p->pending[i].host_ifname, host_ifname)) {
                        struct pending_deletion d = p->pending[i];
                        memmove(&p->pending[i], &p->pending[i + 1], (p->n_pending - i - 1) * sizeof(struct pending_deletion));
                        p->n_pending--;
                        pending_answer(p, &d, error);
                        pending_done(&d);
                        return;
                }
}

void podnet_pending_remove(struct podnet *p, const char *host_ifname) {
        pending_finish(p, host_ifname, 0);
}

/* The deletion that explains an EEXIST for this ADD: its own host end, or an earlier pod end by
 * the same name in the same namespace (the runtime reused the namespace right after a DEL). */
const char *podnet_pending_blocking(const struct podnet *p, const char *host_ifname, const char *netns,
                                    const char *ifname) {
        for (size_t i = 0; i < p->n_pending; i++) {
                const struct pending_deletion *d = &p->pending[i];
                if (streq(d->host_ifname, host_ifname) || (streq_ptr(d->netns, netns) && streq(d->ifname, ifname)))
                        return d->host_ifname;
        }
        return NULL;
}

void podnet_on_link_removed(int ifindex, const char *name, void *userdata) {
        struct module_instance *mi = userdata;
        struct podnet *p = mi->data;

        for (size_t i = 0; i < p->n_pending; i++) {
                struct pending_deletion *d = &p->pending[i];
                /* The index too: an announcement about an earlier interface by that name does not count. */
                if (d->n_waiters > 0 && d->ifindex == ifindex && streq(d->host_ifname, name)) {
                        pending_answer(p, d, 0);
                        return;
                }
        }
}

/* The runtime gave up on a held DEL: forget it (the deletion goes on). */
static void on_del_abort(struct api_request *req, void *userdata) {
        struct podnet *p = userdata;

        for (size_t i = 0; i < p->n_pending; i++) {
                struct pending_deletion *d = &p->pending[i];
                for (size_t j = 0; j < d->n_waiters; j++)
                        if (d->waiters[j] == req) {
                                memmove(&d->waiters[j], &d->waiters[j + 1], (d->n_waiters - j - 1) * sizeof(*d->waiters));
                                d->n_waiters--;
                                return;
                        }
        }
}

int podnet_pending_hold(struct module_instance *mi, struct api_request *req, const char *container_id,
                        const char *ifname) {
        struct podnet *p = mi->data;

        for (size_t i = 0; i < p->n_pending; i++) {
                struct pending_deletion *d = &p->pending[i];
                if (!streq(d->container_id, container_id) || !streq(d->ifname, ifname))
                        continue;
                /* Gone already (the reaper was quick, or the namespace went): nothing to wait for. */
                int index = (int) if_nametoindex(d->host_ifname);
                if (index <= 0)
                        return 0;
                d->ifindex = index;
                struct api_request **grown = realloc(d->waiters, (d->n_waiters + 1) * sizeof(*d->waiters));
                if (!grown)
                        return -ENOMEM;
                d->waiters = grown;
                d->waiters[d->n_waiters++] = req;
                api_reply_suspend(req, on_del_abort, p);
                log_module_debug(MODULE, "DEL of %s/%s answers once %s is deleted", container_id, ifname, d->host_ifname);
                /* Next in line: a DEL waits for its own veth, not for the backlog. */
                if (p->reaper)
                        (void) reaper_expedite(p->reaper, d->host_ifname);
                return 1;
        }
        return 0;
}

/* Tears one attachment down: the veth (the pod end goes with it) and then the address. */
int podnet_attachment_remove(struct module_instance *mi, const char *container_id, const char *ifname, const char *why,
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
        ipam_format_addr(a->addr, ip);
        (void) log_attachment_full_errno(a, LOG_INFO, 0, "Releasing %s (%s/%s, %s in %s): %s", ip, a->container_id, a->ifname,
                                         a->host_ifname, a->netns ? a->netns : "an unrecorded namespace", why);
        /* With the reaper, the name is recorded as being deleted in the same write. */
        r = ipam_release(p->ipam, cid, ifn, now_usec(CLOCK_REALTIME), p->reaper);
        if (r < 0) {
                if (forgot)
                        podnet_store_set_ip(mi, a, true); /* still allocated: a is unchanged */
                if (asprintf(ret_error, "%s: %s", p->state_file, strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        if (p->reaper && reaper_queue(p->reaper, host) >= 0)
                pending_add(p, host, netns, cid, ifn);
        else if (p->reaper) {
                /* Cannot queue (out of memory): do it here. */
                r = wire_del(host);
                if (r >= 0 || r == -ENOTUNIQ)
                        (void) ipam_link_deleted(p->ipam, host);
        }
        return 0;
}

/* A host veth the reaper deleted (on the loop). */
void podnet_on_reaped(struct reaper *r, const char *name, int error, void *userdata) {
        struct module_instance *mi = userdata;
        struct podnet *p = mi->data;
        int k;

        pending_finish(p, name, error == -ENOTUNIQ ? 0 : error);
        if (error == -ENOTUNIQ)
                /* Ours went (or never was): whatever has the name now is someone else's. */
                log_module_warning(MODULE, "Host interface %s is not pinion's (no \"" WIRE_MARK_PREFIX "\" mark, or not "
                                   "a veth): left as it is", name);
        else if (error < 0) {
                log_module_warning(MODULE, "Failed to delete host interface %s (%s); retrying at the next start", name,
                                   strerror(-error));
                return;
        } else
                log_module_debug(MODULE, "Deleted host interface %s", name);
        k = p->ipam ? ipam_link_deleted(p->ipam, name) : 0;
        if (k < 0)
                log_module_warning(MODULE, "Failed to record that %s is deleted (%s), ignoring", name, strerror(-k));
        podnet_warn_not_durable(p);
}
