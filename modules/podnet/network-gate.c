/* SPDX-License-Identifier: MIT */
/* The "network" pod gate and the pod events of the pod network.
 *
 * The gate holds back only the pinion.io/ready condition (POD_GATE_CONDITION), never
 * registration: the kubelet sets a pod Ready only once its sandbox, and so its network, exists.
 * It is open for a hostNetwork pod and for a pod that has an attachment; closed otherwise, with
 * the error of the pod's last failed ADD if there was one. Until podnet holds a pod CIDR
 * (disabled, or still waiting for its Node's spec.podCIDR) it wires nothing, so the pods' network
 * is not its job and the gate is open: a pod is not held back by a module that may not be the
 * node's CNI plugin at all (the kubelet still starts no container without a sandbox network).
 *
 * An attachment names its pod as CNI_ARGS did (K8S_POD_UID, else namespace and name); a static
 * pod's uid there is its config hash, which the pod store resolves to the pod that speaks for it
 * (its mirror pod). Events carry the resolved pod's metadata.uid. */

#include <stdlib.h>

#include "manager.h"
#include "pod-events.h"
#include "pod-gates.h"
#include "pod-store.h"
#include "podnet.h"

#define GATE "network"

/* Whether a names pod p. */
static bool attachment_is_pods(const struct ipam_allocation *a, const struct pod *p, const char *node_name) {
        if (a->pod_uid)
                return streq(a->pod_uid, p->uid) || pod_is_static_pod(p, a->pod_uid, node_name);
        return a->pod_name && streq(a->pod_name, p->name) && streq_ptr(a->pod_namespace, p->namespace);
}

static const char *last_failure(const struct podnet *p, const char *uid) {
        for (size_t i = 0; i < ELEMENTSOF(p->add_failures); i++)
                if (streq_ptr(p->add_failures[i].uid, uid))
                        return p->add_failures[i].error;
        return NULL;
}

static void forget_failure(struct podnet *p, const char *uid) {
        for (size_t i = 0; i < ELEMENTSOF(p->add_failures); i++)
                if (streq_ptr(p->add_failures[i].uid, uid)) {
                        p->add_failures[i].uid = mfree(p->add_failures[i].uid);
                        p->add_failures[i].error = mfree(p->add_failures[i].error);
                }
}

/* The newest failure of uid replaces its older one; the oldest of others makes room. */
static void remember_failure(struct podnet *p, const char *uid, const char *error) {
        forget_failure(p, uid);
        struct podnet_add_failure *f = &p->add_failures[p->next_add_failure];
        p->next_add_failure = (p->next_add_failure + 1) % ELEMENTSOF(p->add_failures);
        free(f->uid);
        free(f->error);
        f->uid = strdup(uid);
        f->error = strdup(error);
}

static int network_gate(const struct pod *pod, void *userdata, char **ret_reason) {
        struct module_instance *mi = userdata;
        struct podnet *p = mi->data;
        const char *node_name = mi->manager->settings.node_name;
        const char *why;

        if (pod->host_network || mi->state == MODULE_DISABLED || !p->ipam)
                return 1;
        for (size_t i = 0; p->ipam && i < ipam_count(p->ipam); i++)
                if (attachment_is_pods(ipam_get(p->ipam, i), pod, node_name))
                        return 1;
        why = last_failure(p, pod->uid);
        if (!ret_reason)
                return 0;
        if (why)
                return asprintf(ret_reason, "network attachment failed: %s", why) < 0 ? -ENOMEM : 0;
        *ret_reason = strdup("no network attachment yet");
        return *ret_reason ? 0 : -ENOMEM;
}

int network_gate_add(struct module_instance *mi) {
        struct podnet *p = mi->data;

        if (p->gate_added)
                return 0;
        int r = pod_gates_add_scoped(mi->manager->pod_gates, GATE, network_gate, mi, POD_GATE_CONDITION);
        if (r < 0)
                return r;
        p->gate_added = true;
        return 0;
}

void network_gate_remove(struct module_instance *mi) {
        struct podnet *p = mi->data;

        if (p->gate_added)
                pod_gates_remove(mi->manager->pod_gates, GATE);
        p->gate_added = false;
        for (size_t i = 0; i < ELEMENTSOF(p->add_failures); i++) {
                p->add_failures[i].uid = mfree(p->add_failures[i].uid);
                p->add_failures[i].error = mfree(p->add_failures[i].error);
        }
}

/* The metadata.uid of the pod in the store that CNI_ARGS (or an attachment) names (a copy: the
 * listeners told with it may change the store), or NULL if it is not there (yet). */
static char *pod_named(struct module_instance *mi, const char *uid, const char *namespace, const char *name) {
        const struct pod *pod = NULL;

        if (uid)
                pod = pod_store_get_by_cgroup(mi->manager->pods, uid, mi->manager->settings.node_name);
        else if (namespace && name)
                pod = pod_store_find(mi->manager->pods, namespace, name);
        return pod ? strdup(pod->uid) : NULL;
}

void network_gate_pod_changed(struct module_instance *mi, const char *uid, const char *namespace, const char *name) {
        /* A pod not in the store yet is asked about when it comes. */
        _cleanup_free_ char *pod_uid = pod_named(mi, uid, namespace, name);

        if (pod_uid && ((struct podnet *) mi->data)->gate_added)
                pod_gates_changed(mi->manager->pod_gates, pod_uid);
}

void network_gate_wired(struct module_instance *mi, const struct cni_request *cr, const struct ipam_allocation *a) {
        _cleanup_free_ char *pod_uid = pod_named(mi, cr->k8s_uid, cr->k8s_namespace, cr->k8s_name);
        const char *uid = pod_uid ?: cr->k8s_uid;
        char ip[16], ip6[INET6_ADDRSTRLEN];

        if (!uid)
                return;
        forget_failure(mi->data, uid);
        ipam_addr_format(a->addr, ip);
        ipam_addr_format6(&a->addr6, ip6);
        pod_event_emit(mi->manager->pod_events, uid, POD_EVENT_NORMAL, POD_EVENT_NETWORK_WIRED, "Wire",
                       "Wired %s: %s%s%s%s%s via host interface %s", a->ifname, a->addr ? ip : "", a->addr ? "/32" : "",
                       a->addr && a->has_addr6 ? " " : "", a->has_addr6 ? ip6 : "", a->has_addr6 ? "/128" : "",
                       a->host_ifname);
        network_gate_pod_changed(mi, a->pod_uid, a->pod_namespace, a->pod_name);
}

void network_gate_add_failed(struct module_instance *mi, const struct cni_request *cr, const struct cni_error *e) {
        _cleanup_free_ char *pod_uid = pod_named(mi, cr->k8s_uid, cr->k8s_namespace, cr->k8s_name), *error = NULL;
        const char *uid = pod_uid ?: cr->k8s_uid;

        if (!uid)
                return;
        if (asprintf(&error, "%s%s%s", strempty(e->msg), e->details ? ": " : "", strempty(e->details)) < 0)
                return;
        remember_failure(mi->data, uid, error);
        pod_event_emit(mi->manager->pod_events, uid, POD_EVENT_WARNING, POD_EVENT_NETWORK_FAILED, "Wire",
                       "CNI ADD of %s in %s failed: %s", strempty(cr->ifname), strempty(cr->netns), error);
        if (pod_uid && ((struct podnet *) mi->data)->gate_added)
                pod_gates_changed(mi->manager->pod_gates, pod_uid);
}
