/* SPDX-License-Identifier: MIT */
#pragma once

/* podnet's internal declarations, shared by the files of the module (not for other modules):
 *   podnet.c       the module: config, lifecycle, the pod CIDR, status, metrics
 *   podnet-api.c   POST /v1/cni: the CNI operations pinion-cni forwards (ADD, DEL, CHECK, GC,
 *                  STATUS, VERSION) and their replies
 *   attachment.c   one attachment's pod store IP and release, and the host veths the reaper is
 *                  deleting
 *   cni.c          the protocol (request parsing shared with the plugin, errors)
 *   ipam.c         the address pools (IPv4, IPv6): allocation, quarantine
 *   ipam-index.c   address parsing and the allocations' hash tables
 *   ipam-state.c   the crash-safe state: snapshot + journal
 *   wire.c         the kernel state over rtnetlink
 *   reaper.c       host veth deletion off the loop */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <systemd/sd-event.h>

#include "api.h"
#include "ipam.h"
#include "log.h"
#include "metrics.h"
#include "module.h"
#include "reaper.h"

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
        struct metric_family *m_pool6; /* pinion_podnet_ipv6_pool_addresses{state} */
};

/* Logs about one attachment carry its pod (uid, namespace/name) as structured fields. */
#define log_attachment_full_errno(a, level, error, ...)                                                            \
        ({                                                                                              \
                char _pod[512];                                                                         \
                snprintf(_pod, sizeof(_pod), "%s/%s", strempty((a)->pod_namespace), strempty((a)->pod_name)); \
                const struct log_ctx _ctx = { .module = MODULE, .pod_uid = (a)->pod_uid,                \
                                              .pod = (a)->pod_name ? _pod : NULL };                     \
                log_ctx_full_errno(&_ctx, level, error, __VA_ARGS__);                                   \
        })

/* ---- attachment.c ---- */

/* set: the attachment's address becomes the pod's IP in the store; else the store forgets it. */
void podnet_store_set_ip(struct module_instance *mi, const struct ipam_allocation *a, bool set);
/* Tears one attachment down: the veth (the pod end goes with it) and then the address. */
int podnet_attachment_remove(struct module_instance *mi, const char *container_id, const char *ifname, char **ret_error);
/* The reaper's callback: a host veth it deleted (on the loop). */
void podnet_on_reaped(struct reaper *r, const char *name, int error, void *userdata);
/* Logs a state write that is in place but not durable (see ipam.h). */
void podnet_warn_not_durable(struct podnet *p);
void podnet_pending_clear(struct podnet *p);
void podnet_pending_remove(struct podnet *p, const char *host_ifname);
const char *podnet_pending_blocking(const struct podnet *p, const char *host_ifname, const char *netns,
                                    const char *ifname);

/* ---- podnet-api.c ---- */

/* Adds POST /v1/cni, unless added already (p->routes). */
int podnet_api_register(struct module_instance *mi);
