/* SPDX-License-Identifier: MIT */
#pragma once

/* IP address management for the pod network: an IPv4 pool, an IPv6 pool or both (the pod CIDRs),
 * one address of each per attachment (container ID + interface name), persisted crash-safely.
 * An IPv6 pool hands out the first IPAM_MAX_POOL6 addresses after its network address (the
 * subnet-router anycast address, never given); a /64 has room for far more pods than that.
 *
 * The state (ipam-state.c) is a snapshot plus a journal of changes: every change appends one
 * checksummed record and fdatasyncs it (or has it flushed meanwhile: ipam_defer_sync()) before
 * it is acknowledged, so a change costs O(1) in the number of allocations (the journal is
 * folded into the snapshot now and then: amortised O(1)).
 * A kill -9 leaves the old or the new state, and an address that was handed out is always on
 * disk first. Lookups are hash tables (by attachment, address, host interface name); allocation
 * is next-fit from a cursor (like host-local) over a bitmap of the taken addresses, skipping the
 * network and broadcast addresses.
 *
 * The quarantine: an address released less than `quarantine` ago is not handed out again, so a
 * pod that just went away cannot have its packets (or its peers' stale connections) land on a
 * new pod.
 *
 * Times are CLOCK_REALTIME microseconds passed in by the caller, so the quarantine survives
 * restarts and tests control the clock. No logging: callers log. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#include <cjson/cJSON.h>

#include "macro.h"

#define IPAM_MAX_POOL6 65535u

struct ipam_allocation {
        uint32_t addr; /* host byte order; 0: none (an IPv6-only pool) */
        bool has_addr6;
        struct in6_addr addr6;
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

/* cidr "10.1.2.0/24" (prefix 8..30), "fd00:1::/64" (prefix 48..126), or one of each separated by a
 * comma or blanks. state_file NULL: nothing persisted (tests). Loads the state
 * file (and its journal, "<state_file minus .json>.journal") if it exists; a state that does not
 * parse is -EBADMSG (nothing is overwritten: the
 * operator decides), with *ret_error saying why; one a newer release wrote is
 * STATE_VERSION_ERR_NEWER, *ret_error naming the file and its version. Allocations outside cidr (the pod CIDR
 * changed) are kept until released but never handed out again. */
int ipam_new(const char *cidr, usec_t quarantine, const char *state_file, struct ipam **ret, char **ret_error);
struct ipam *ipam_free(struct ipam *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct ipam *, ipam_free);

int ipam_addr_parse_cidr(const char *cidr, uint32_t *ret_network, unsigned *ret_prefix);
int ipam_addr_parse_cidr6(const char *cidr, struct in6_addr *ret_network, unsigned *ret_prefix);
/* Splits a pod-cidr value into its IPv4 and IPv6 CIDR (either NULL if absent; free()); -EINVAL
 * with *reason if it is not one or two valid CIDRs of different families. */
int ipam_addr_parse_pod_cidrs(const char *s, char **ret_v4, char **ret_v6, const char **reason);
void ipam_set_quarantine(struct ipam *p, usec_t quarantine);
/* The journal is folded into the snapshot once it holds more than this many records (default,
 * or negative: twice the state's entries, at least 1,024; 0: after every change). For tests. */
void ipam_set_journal_limit(struct ipam *p, long records);

/* The allocation of an attachment, or NULL. */
const struct ipam_allocation *ipam_find(const struct ipam *p, const char *container_id, const char *ifname);
const struct ipam_allocation *ipam_find_addr(const struct ipam *p, uint32_t addr);
const struct ipam_allocation *ipam_find_addr6(const struct ipam *p, const struct in6_addr *addr);
/* Whether the pool hands out addresses of that family (AF_INET, AF_INET6). */
bool ipam_has_family(const struct ipam *p, int family);
/* A host interface name no other allocation uses, derived from the attachment (stable). */
int ipam_host_ifname(const struct ipam *p, const char *container_id, const char *ifname, char ret[16]);

/* Allocates (and persists) an address for the attachment. If it already has one, that one is
 * returned with 0, unchanged (a repeated ADD that fails must not alter it; see
 * ipam_update_owner()); a new one gives 1. -EADDRNOTAVAIL when the pool is exhausted, or the
 * write error (nothing changed then): -ENOSPC is the disk, full (the allocation reserves the
 * space its release will need, ipam-reserve.c, and is refused if it cannot). */
int ipam_allocate(struct ipam *p, const char *container_id, const char *ifname, const struct ipam_owner *owner,
                  usec_t now, const struct ipam_allocation **ret);
/* The same for a requested address (CNI_ARGS IP=, runtimeConfig ips): 1 reserved, 0 the
 * attachment holds that address already (a repeated ADD); nothing allocated on an error:
 * -ERANGE outside the pool (the network and broadcast addresses included), -EADDRINUSE another
 * attachment's, -EBUSY in quarantine, -EEXIST the attachment holds another address. The cursor
 * of the dynamic allocations does not move. */
int ipam_allocate_addr(struct ipam *p, const char *container_id, const char *ifname, const struct ipam_owner *owner,
                       uint32_t addr, usec_t now, const struct ipam_allocation **ret);
/* Either request may be NULL (that family is allocated dynamically if the pool has it). Besides
 * the errors above, -EAFNOSUPPORT: a request of a family the pool does not have. */
int ipam_allocate_request(struct ipam *p, const char *container_id, const char *ifname, const struct ipam_owner *owner,
                          const uint32_t *addr, const struct in6_addr *addr6, usec_t now,
                          const struct ipam_allocation **ret);
/* Replaces the owner fields of an existing allocation (a repeated ADD that worked) and persists;
 * on a write error nothing changed. -ENOENT if the attachment has no allocation. */
int ipam_update_owner(struct ipam *p, const char *container_id, const char *ifname, const struct ipam_owner *owner);
/* Releases the attachment's address into quarantine and persists (into space its allocation
 * reserved: a full disk does not fail it). With link_pending, its host
 * interface name is recorded as still being deleted (in the same write), until
 * ipam_link_deleted(): a deletion a crash interrupted is found again at the next start, and the
 * name is not handed out meanwhile. 1 if released, 0 if it had none, negative errno on a write
 * error (nothing changed then). */
int ipam_release(struct ipam *p, const char *container_id, const char *ifname, usec_t now, bool link_pending);
/* Deferred durability, for a caller with other work to do before it answers (wiring a pod):
 * from ipam_defer_sync() on, a change is written to the journal at once and flushed by a worker
 * thread meanwhile; ipam_sync() waits for that flush (if it failed, it writes the whole state as
 * a new snapshot instead) and ends the deferral. A deferred change must not be acknowledged
 * before ipam_sync() returned 0. A written change survives a kill -9 either way. */
void ipam_defer_sync(struct ipam *p);
/* Lazy durability, for releases: from ipam_lazy_sync() on, a change is only written; the next
 * flush (a later change's, or at stop) takes it along. A power loss may take such a release back:
 * the allocation is then held again and reconciliation releases it; never an address handed out
 * twice, since its next allocation is flushed with every release before it. Until ipam_sync(). */
void ipam_lazy_sync(struct ipam *p);
int ipam_sync(struct ipam *p);
/* The host interface name is gone; persists (left to the next flush: a lost record only repeats
 * the deletion at the next start). 1 if it was recorded, 0 if not. */
int ipam_link_deleted(struct ipam *p, const char *host_ifname);
/* Host interfaces released but not known to be deleted yet. */
size_t ipam_n_deleting(const struct ipam *p);
const char *ipam_deleting(const struct ipam *p, size_t i);

/* A write that every reader sees already but that may not survive a power loss (a snapshot
 * renamed into place, or a new journal file, whose directory's fsync failed) counts as done
 * (rolling back in memory would disagree with the file). This returns that
 * fsync's error since the last call (0: none), for the caller to warn about. */
int ipam_take_not_durable(struct ipam *p);

/* Iteration over the allocations (index order is stable until the next change; a release moves
 * the last allocation into the released one's index, so a loop that releases at i looks at i
 * again). A pointer to an allocation stays valid until that allocation is released or updated. */
size_t ipam_count(const struct ipam *p);
const struct ipam_allocation *ipam_get(const struct ipam *p, size_t i);

struct ipam_usage {
        uint64_t size;        /* usable addresses in the pool */
        uint64_t allocated;   /* in the pool */
        uint64_t quarantined; /* released less than quarantine ago */
        uint64_t free;
        uint64_t foreign;     /* allocations outside the pool (after a pod-cidr change) */
};
/* The IPv4 pool's (all zero without one). */
void ipam_usage(const struct ipam *p, usec_t now, struct ipam_usage *ret);
/* The IPv6 pool's; false (and zeros) without one. */
bool ipam_usage6(const struct ipam *p, usec_t now, struct ipam_usage *ret);
/* The pod CIDR(s) as given; and each family's alone (NULL without that pool). */
const char *ipam_cidr(const struct ipam *p);
const char *ipam_cidr4(const struct ipam *p);
const char *ipam_cidr6(const struct ipam *p);

/* For /v1/status. */
cJSON *ipam_to_json(const struct ipam *p, usec_t now);

/* "10.1.2.3" */
void ipam_addr_format(uint32_t addr, char buf[16]);
/* "fd00::3" */
void ipam_addr_format6(const struct in6_addr *addr, char buf[INET6_ADDRSTRLEN]);
