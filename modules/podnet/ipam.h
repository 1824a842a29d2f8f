/* SPDX-License-Identifier: MIT */
#pragma once

/* IP address management for the pod network: one IPv4 pool (the pod CIDR), one address per
 * attachment (container ID + interface name), persisted crash-safely.
 *
 * The state file (JSON) holds every allocation and the quarantine: an address released less than
 * `quarantine` ago is not handed out again, so a pod that just went away cannot have its packets
 * (or its peers' stale connections) land on a new pod. Every change is written with
 * write_file_atomic() before it is reported: a kill -9 leaves the old or the new table, and an
 * address that was handed out is always on disk first. Allocation is next-fit from a cursor (like
 * host-local), skipping the network and broadcast addresses.
 *
 * Times are CLOCK_REALTIME microseconds passed in by the caller, so the quarantine survives
 * restarts and tests control the clock. No logging: callers log. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "macro.h"

struct ipam_allocation {
        uint32_t addr; /* host byte order */
        char *container_id;
        char *ifname;
        char *netns;        /* CNI_NETNS at ADD (for CHECK and the operator) */
        uint64_t netns_ino; /* that namespace's inode at ADD (0: unknown): a recycled path differs */
        char *host_ifname;  /* the host end of the veth */
        char *pod_namespace, *pod_name, *pod_uid; /* from CNI_ARGS, may be NULL */
        char *network;      /* the network config's name (NULL: from before it was recorded) */
        unsigned mtu;       /* the MTU it was wired with (0: unknown, from before it was recorded) */
        usec_t since;
};

struct ipam_owner {
        const char *netns, *host_ifname;
        uint64_t netns_ino;
        const char *pod_namespace, *pod_name, *pod_uid;
        const char *network;
        unsigned mtu;
};

struct ipam;

/* cidr "10.1.2.0/24" (prefix 8..30). state_file NULL: nothing persisted (tests). Loads the state
 * file if it exists; a file that does not parse is -EBADMSG (nothing is overwritten: the
 * operator decides), with *ret_error saying why. Allocations outside cidr (the pod CIDR
 * changed) are kept until released but never handed out again. */
int ipam_new(const char *cidr, usec_t quarantine, const char *state_file, struct ipam **ret, char **ret_error);
struct ipam *ipam_free(struct ipam *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct ipam *, ipam_free);

int ipam_parse_cidr(const char *cidr, uint32_t *ret_network, unsigned *ret_prefix);
void ipam_set_quarantine(struct ipam *p, usec_t quarantine);

/* The allocation of an attachment, or NULL. */
const struct ipam_allocation *ipam_find(const struct ipam *p, const char *container_id, const char *ifname);
const struct ipam_allocation *ipam_find_addr(const struct ipam *p, uint32_t addr);
/* A host interface name no other allocation uses, derived from the attachment (stable). */
int ipam_host_ifname(const struct ipam *p, const char *container_id, const char *ifname, char ret[16]);

/* Allocates (and persists) an address for the attachment. If it already has one, that one is
 * returned with 0, unchanged (a repeated ADD that fails must not alter it; see
 * ipam_update_owner()); a new one gives 1. -ENOSPC when the pool is exhausted, or the write
 * error (nothing changed then). */
int ipam_allocate(struct ipam *p, const char *container_id, const char *ifname, const struct ipam_owner *owner,
                  usec_t now, const struct ipam_allocation **ret);
/* Replaces the owner fields of an existing allocation (a repeated ADD that worked) and persists;
 * on a write error nothing changed. -ENOENT if the attachment has no allocation. */
int ipam_update_owner(struct ipam *p, const char *container_id, const char *ifname, const struct ipam_owner *owner);
/* Releases the attachment's address into quarantine and persists. With link_pending, its host
 * interface name is recorded as still being deleted (in the same write), until
 * ipam_link_deleted(): a deletion a crash interrupted is found again at the next start, and the
 * name is not handed out meanwhile. 1 if released, 0 if it had none, negative errno on a write
 * error (nothing changed then). */
int ipam_release(struct ipam *p, const char *container_id, const char *ifname, usec_t now, bool link_pending);
/* The host interface name is gone; persists. 1 if it was recorded, 0 if not. */
int ipam_link_deleted(struct ipam *p, const char *host_ifname);
/* Host interfaces released but not known to be deleted yet. */
size_t ipam_n_deleting(const struct ipam *p);
const char *ipam_deleting(const struct ipam *p, size_t i);

/* A write whose rename succeeded but whose directory fsync failed counts as done (the file is
 * what every reader sees; rolling back in memory would disagree with it). This returns that
 * fsync's error since the last call (0: none), for the caller to warn about. */
int ipam_take_not_durable(struct ipam *p);

/* Iteration over the allocations (index order is stable until the next change). */
size_t ipam_count(const struct ipam *p);
const struct ipam_allocation *ipam_get(const struct ipam *p, size_t i);

struct ipam_usage {
        uint64_t size;        /* usable addresses in the pool */
        uint64_t allocated;   /* in the pool */
        uint64_t quarantined; /* released less than quarantine ago */
        uint64_t free;
        uint64_t foreign;     /* allocations outside the pool (after a pod-cidr change) */
};
void ipam_usage(const struct ipam *p, usec_t now, struct ipam_usage *ret);
const char *ipam_cidr(const struct ipam *p);

/* For /v1/status. */
cJSON *ipam_to_json(const struct ipam *p, usec_t now);

/* "10.1.2.3" */
void ipam_format_addr(uint32_t addr, char buf[16]);
