/* SPDX-License-Identifier: MIT */
#pragma once

/* The kernel side of a pod's network, over rtnetlink (libmnl); no `ip` command.
 *
 *   host netns                                    pod netns (CNI_NETNS)
 *   pinXXXXXXXX (veth, proxy_arp, no address) ──  CNI_IFNAME (veth) 10.x.y.z/32
 *   route 10.x.y.z/32 dev pinXXXXXXXX             default via 169.254.1.1 dev CNI_IFNAME onlink
 *                                                 neigh 169.254.1.1 lladdr <host end's MAC>
 *
 * With an IPv6 address too (dual-stack, or IPv6 only), routed the same way (wire6.c):
 *   pinXXXXXXXX fe80::1/64 (nodad)            ──  CNI_IFNAME fd00::z/128 (nodad)
 *   route fd00::z/128 dev pinXXXXXXXX             default via fe80::1 dev CNI_IFNAME
 *                                                 neigh fe80::1 lladdr <host end's MAC>
 * (every host end carries the same link-local gateway address: it is only ever used on its link).
 *
 * The pod end is created directly inside the namespace under its final name (IFLA_NET_NS_FD on
 * the veth peer), so there is no move or rename step to fail half-way. Work inside the pod's
 * namespace uses a netlink socket opened there: setns() into it, socket(), setns() back — the
 * thread spends two syscalls in the pod's namespace and never runs other code there.
 *
 * Pinion's mark: the host end's IFLA_IFALIAS is WIRE_MARK_PREFIX + the container ID (cut to
 * the kernel's 255 bytes). Only a veth with that mark is ever deleted, and one with no alias at
 * all where pinion's state names it from before the request (made by an older pinion, or a
 * crash came between creating it and marking it); anything else by that name is left alone and
 * the operation fails with -ENOTUNIQ.
 *
 * Library-like: no logging; errors are negative errno and, for CHECK, a description of the drift. */

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>

#include "macro.h"

#define WIRE_MARK_PREFIX "pinion:"
#define WIRE6_GATEWAY "fe80::1"

struct wire_params {
        const char *host_ifname; /* "pin%08x" */
        const char *container_id; /* for the mark */
        bool adopt_unmarked;      /* the allocation predates this ADD: an unmarked veth by that name is ours */
        const char *ifname;      /* CNI_IFNAME inside the pod */
        const char *netns_path;  /* CNI_NETNS (for messages) */
        int netns_fd;            /* CNI_NETNS opened by wire_netns_open() */
        uint32_t addr;           /* host byte order; 0: no IPv4 */
        bool has_addr6;
        struct in6_addr addr6;
        uint32_t gateway;        /* host-gateway, host byte order */
        unsigned mtu;
        const uint8_t *pod_mac;  /* the pod end's MAC address (6 bytes); NULL: a random one */
};

struct wire_result {
        char host_mac[18];
        char pod_mac[18];
};

/* The calling thread's network namespace, to come back to. */
int wire_open_host_netns(void);

/* Opens CNI_NETNS once; everything after uses the descriptor (no check-then-reopen). It must be
 * a network namespace (nsfs, NS_GET_NSTYPE CLONE_NEWNET) other than host_netns_fd's. A FIFO, a
 * device, a regular file or any other path is never opened for reading (O_PATH first), so it
 * cannot block. -ENOENT: no such path; -EMEDIUMTYPE: not a network namespace; -EBUSY: the
 * host's own network namespace. */
int wire_netns_open(const char *path, int host_netns_fd, int *ret_fd);

/* Creates everything above, the host end marked. On failure what was created is removed again.
 * -EEXIST if ifname already exists in the namespace; -ENOTUNIQ if an interface pinion did not
 * make has host_ifname (it is left as it is). */
int wire_add(int host_netns_fd, const struct wire_params *p, struct wire_result *ret);
/* Deletes the host end (and with it the pod end) if it is pinion's (marked, or unmarked: callers
 * name only interfaces pinion's state records). Missing is fine: 0. -ENOTUNIQ, nothing
 * deleted, if an interface pinion did not make has that name. */
int wire_del(const char *host_ifname);
/* 0 if everything ADD set up is there (and the pod end has pod_mac, if set), -EUCLEAN with *ret_drift describing the first
 * difference found (free()), or another negative errno if it could not be checked. */
int wire_check(int host_netns_fd, const struct wire_params *p, char **ret_drift);
/* True if a link by that name exists in the host namespace. */
bool wire_link_exists(const char *name);

/* Writes a /proc/sys file ("net/ipv4/ip_forward", "1"). */
int wire_sysctl_write(const char *key, const char *value);
