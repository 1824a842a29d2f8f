/* SPDX-License-Identifier: MIT */
#pragma once

/* podnet's internal declarations, shared by the files of the module (not for other modules):
 *   podnet.c       the module: config, lifecycle, the pod CIDR, status, metrics; whether CNI
 *                  operations can run now (STATUS and the gate before the others)
 *   podnet-api.c   POST /v1/cni: parses the request, calls the operation, maps its outcome to
 *                  the reply and the metric
 *   attachment.c   the CNI operations on attachments (ADD, DEL, CHECK, GC), each one
 *                  transaction; an attachment's pod store IP and teardown
 *   deletion.c     the host veths the reaper is deleting, and the DELs held until theirs is gone
 *   cni.c          the protocol, shared with the plugin (the environment, errors, versions)
 *   cni-json.c     its JSON side, the agent's (the network config, the request body)
 *   ipam.c         the address pools (IPv4, IPv6): allocation, quarantine
 *   ipam-addr.c    address and CIDR parsing, the IPv6 pool's offsets
 *   ipam-index.c   the allocations' hash tables
 *   ipam-state.c   the crash-safe state: snapshot + journal
 *   wire.c         the kernel state over rtnetlink
 *   reaper.c       host veth deletion off the loop
 *   link-monitor.c the kernel's announcements of removed host links (a held DEL answers at the
 *                  first sign its veth is gone)
 *   reconcile.c    releasing the allocations of attachments that are gone (at start, on a
 *                  timer, and the release rule GC shares)
 *   routing.c      `[network] routing`: node routes and aggregates brought to what the mode wants
 *   routing-plan.c its decisions: the routes wanted, the changes from the kernel's
 *   routes.c       node routes in the kernel (dump, add, replace, delete; is a gateway connected)
 *   network-gate.c the "network" pod gate (pinion.io/ready waits for the pod's attachment) and
 *                  the pod events NetworkWired and NetworkFailed */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <systemd/sd-event.h>

#include "api.h"
#include "cni.h"
#include "ipam.h"
#include "log.h"
#include "metrics.h"
#include "module.h"
#include "link-monitor.h"
#include "reaper.h"
#include "routing.h"

#define MODULE "podnet"

struct podnet_settings {
        char *pod_cidr;
        unsigned mtu;
        char *host_gateway;
        usec_t address_quarantine;
        usec_t gc_grace;
        usec_t reconcile_interval; /* 0: only at start */
        enum routing_mode routing;
};

struct podnet;

/* Answers a DEL held until its veth's deletion ended with error (0: gone). */
typedef void (*deletion_answer_fn)(struct podnet *p, struct api_request *req, int error);

struct held_del {
        struct api_request *req;
        deletion_answer_fn answer;
};

/* A host veth handed to the reaper, and where its pod end was: an ADD into that namespace with
 * that interface name fails with EEXIST until the deletion is done. */
struct pending_deletion {
        char *host_ifname;
        char *netns;  /* CNI_NETNS of the released attachment, may be NULL */
        char *container_id;
        char *ifname;
        /* DELs answered once the deletion is done (the pod end must be gone when DEL returns). */
        int ifindex; /* the host end's, while DELs wait (0: none wait) */
        struct held_del *waiters;
        size_t n_waiters;
};

/* Why reconciliation or GC released an allocation (the metric's reason label). */
enum release_reason {
        RELEASE_GC,              /* the runtime's GC did not list it as valid */
        RELEASE_NETNS_GONE,      /* its namespace path no longer exists, and its host veth is gone */
        RELEASE_NETNS_REPLACED,  /* the path is no namespace any more, or another one */
        _RELEASE_REASON_MAX,
};

/* A pod's last failed ADD, what its gate says until an ADD works. */
struct podnet_add_failure {
        char *uid; /* the pod's metadata.uid; NULL: a free slot */
        char *error;
};

struct podnet {
        struct podnet_settings *settings;
        struct ipam *ipam;
        char *state_file;
        int host_netns_fd;
        uint32_t gateway;
        char *cidr;                    /* in use: pod-cidr, or the Node's spec.podCIDR */
        struct reaper *reaper;         /* deletes host veths off the loop; NULL: inline */
        struct link_monitor *link_monitor; /* NULL: held DELs answer when the reaper is done */
        sd_event_source *node_timer;   /* waiting for FACT_NODE_POD_CIDR */
        unsigned node_polls;           /* looks since the wait began */
        struct pending_deletion *pending; /* what the reaper is deleting for this run */
        size_t n_pending;
        struct api_routes *routes;
        struct metrics_registration *metrics_reg; /* the families below and the collector */
        bool stopped;

        struct metric_family *m_ops;   /* pinion_podnet_operations_total{verb,result} */
        struct metric_family *m_setup; /* pinion_podnet_setup_seconds */
        struct metric_family *m_pool;  /* pinion_podnet_pool_addresses{state} */
        struct metric_family *m_pool6; /* pinion_podnet_ipv6_pool_addresses{state} */
        struct metric_family *m_reconciled; /* pinion_podnet_reconciled_total{reason} */
        struct metric_family *m_state_errors; /* pinion_podnet_state_errors_total{reason} */

        sd_event_source *reconcile_timer;
        uint64_t reconcile_runs;
        usec_t reconcile_last;         /* CLOCK_REALTIME of the last run, 0: none yet */
        uint64_t released[_RELEASE_REASON_MAX];

        struct routing *routing;       /* NULL until the pool first opened */

        bool gate_added;               /* the "network" pod gate, while started */
        struct podnet_add_failure add_failures[32]; /* the newest replaces the oldest */
        unsigned next_add_failure;
};

/* Logs about one attachment carry its pod (uid, namespace/name, or the name alone: podman sends
 * no namespace) as structured fields. */
#define log_attachment_full_errno(a, level, error, ...)                                                            \
        ({                                                                                              \
                char _pod[512];                                                                         \
                snprintf(_pod, sizeof(_pod), "%s%s%s", strempty((a)->pod_namespace),                    \
                         (a)->pod_namespace ? "/" : "", strempty((a)->pod_name));                       \
                const struct log_ctx _ctx = { .module = MODULE, .pod_uid = (a)->pod_uid,                \
                                              .pod = (a)->pod_name ? _pod : NULL };                     \
                log_ctx_full_errno(&_ctx, level, error, __VA_ARGS__);                                   \
        })

/* ---- podnet.c ---- */

/* Logs a state write that is in place but not durable (see ipam.h). */
void podnet_warn_not_durable(struct podnet *p);
/* A write of the pool's state failed: counted by reason (enospc: the disk is full; io: any
 * other error). */
void podnet_count_state_error(struct podnet *p, int error);
/* The end of every CNI request: whatever it changed is durable before it returns (a deferred
 * or lazy write is flushed; a failure is logged). */
void podnet_sync_state(struct podnet *p);
/* Whether ADD, DEL, CHECK and GC can run now: 0, or -EAGAIN with the CNI error (try again
 * later: the module is stopped or has no pool). */
int podnet_cni_ready(struct module_instance *mi, struct cni_error *e);
/* STATUS: whether an ADD can succeed now: 0, or -ENETDOWN (degraded, not running) or -ENOSPC
 * (no free address of a family the pods get) with the CNI error. */
int podnet_cni_status(struct module_instance *mi, struct cni_error *e);

/* ---- attachment.c ----
 * Each operation returns 0 (ADD: with its result, owned) or a negative errno with e set to what
 * the runtime is told: the errno says what kind of failure (-EEXIST for an address the
 * attachment cannot have is a conflict, like the codes DRIFT, NAME_TAKEN, ADDRESS_TAKEN). */

int attachment_add(struct module_instance *mi, const struct cni_request *cr, cJSON **ret_result, struct cni_error *e);
/* 1 if req is held until the veth is gone (answer() answers it then, after the warning for a
 * failed deletion is logged), 0 if done. */
int attachment_del(struct module_instance *mi, const struct cni_request *cr, struct api_request *req,
                   deletion_answer_fn answer, struct cni_error *e);
int attachment_check(struct module_instance *mi, const struct cni_request *cr, struct cni_error *e);
/* Releases every attachment of this network the runtime does not list as valid (but the young). */
int attachment_gc(struct module_instance *mi, const struct cni_request *cr, struct cni_error *e);
/* set: the attachment's address becomes the pod's IP in the store; else the store forgets it. */
void attachment_store_set_ip(struct module_instance *mi, const struct ipam_allocation *a, bool set);
/* Tears one attachment down: the veth (the pod end goes with it) and then the address; logged at
 * info with why. */
int attachment_remove(struct module_instance *mi, const char *container_id, const char *ifname, const char *why,
                      char **ret_error);

/* ---- deletion.c ---- */

/* Records a deletion handed to the reaper (best effort). */
void deletion_add(struct podnet *p, const char *host_ifname, const char *netns, const char *container_id,
                  const char *ifname);
/* The deletion of host_ifname is done: its held DELs are answered. */
void deletion_done(struct podnet *p, const char *host_ifname);
/* Stopping: the deletions held DELs wait for are done now, and every record dropped. */
void deletion_clear(struct podnet *p);
/* The deletion that explains an EEXIST for an ADD of ifname in netns with that host end. */
const char *deletion_blocking(const struct podnet *p, const char *host_ifname, const char *netns, const char *ifname);
/* Holds a DEL until the deletion of the attachment's veth is done: 1 if held (answer() answers
 * it), 0 if nothing of it is being deleted (answer now), negative errno. */
int deletion_hold(struct module_instance *mi, struct api_request *req, const char *container_id, const char *ifname,
                  deletion_answer_fn answer);
/* The reaper's callback: a host veth it deleted (on the loop). */
void deletion_on_reaped(struct reaper *r, const char *name, int error, void *userdata);
/* The link monitor's callback: a host link is gone; the DELs waiting for it are answered. */
void deletion_on_link_removed(int ifindex, const char *name, void *userdata);

/* ---- network-gate.c ---- */

/* Adds the "network" gate (scope POD_GATE_CONDITION), unless added already. */
int network_gate_add(struct module_instance *mi);
/* Removes it and forgets the failures it remembered. */
void network_gate_remove(struct module_instance *mi);
/* An attachment of the pod CNI_ARGS named so was made or went: the gate's listeners hear of it
 * (if the store has the pod). */
void network_gate_pod_changed(struct module_instance *mi, const char *uid, const char *namespace, const char *name);
/* An ADD wired a: NetworkWired for the pod CNI_ARGS names; its last failure is forgotten. */
void network_gate_wired(struct module_instance *mi, const struct cni_request *cr, const struct ipam_allocation *a);
/* An ADD failed with e: NetworkFailed, and the gate says e until an ADD works. */
void network_gate_add_failed(struct module_instance *mi, const struct cni_request *cr, const struct cni_error *e);

/* ---- podnet-api.c ---- */

/* Adds POST /v1/cni, unless added already (p->routes). */
int podnet_api_register(struct module_instance *mi);

/* ---- reconcile.c ---- */

/* Within gc-grace of its ADD (either way: a clock stepped back must not make a pod wired a moment
 * ago look old): neither GC nor reconciliation touches it. */
bool reconcile_attachment_young(const struct podnet *p, const struct ipam_allocation *a, usec_t now);
/* The released-allocations counter at zero for every reason (once the metrics are registered). */
void reconcile_touch_metrics(struct podnet *p);
/* Tears down and releases a, logged at info with the reason and counted. */
int reconcile_release(struct module_instance *mi, const struct ipam_allocation *a, enum release_reason reason,
                      char **ret_error);
/* Runs a pass now and every reconcile-interval (0: only now): each allocation older than
 * gc-grace whose namespace and host veth are both gone is released. */
int reconcile_start(struct module_instance *mi);
void reconcile_stop(struct podnet *p);
int reconcile_status(const struct podnet *p, cJSON *obj);
