/* SPDX-License-Identifier: MIT */
#pragma once

/* Shared by wire.c (links, IPv4), wire6.c (IPv6) and routes.c (node routes): not for other files. */

#include <stdbool.h>

#include <libmnl/libmnl.h>

#include "wire.h"

#define MSG_BUF_SIZE 4096 /* one request: a few attributes */

struct nl {
        struct mnl_socket *sock;
        unsigned portid;
        unsigned seq;
};

/* ---- wire.c ---- */
/* A route netlink socket in the calling thread's namespace, replies awaited at most 5 s. */
int wire_nl_open(struct nl *nl);
void wire_nl_close(struct nl *nl);
/* Sends one request and reads until its ACK (or the end of its dump), calling cb per message. */
int wire_nl_talk(struct nl *nl, struct nlmsghdr *nlh, mnl_cb_t cb, void *data);
struct nlmsghdr *wire_msg_new(char *buf, uint16_t type, uint16_t flags);
/* Sets *ret to the description; returns -EUCLEAN (-ENOMEM if it could not be made). */
int wire_drift(char **ret, const char *format, ...) _printf_(2, 3);

/* ---- wire6.c ---- */
/* The host end takes IPv6 for the gateway address only: no autoconfigured address, no RAs. */
int wire6_host_sysctls(const char *host_ifname);
/* Host end: the gateway's link-local address (WIRE6_GATEWAY/64, no DAD) and a /128 route to the pod. */
int wire6_add_host(struct nl *host, int host_index, const struct in6_addr *pod);
/* Pod end: its address as a /128, no DAD (before the link goes up). */
int wire6_add_pod_addr(struct nl *pod, int pod_index, const struct in6_addr *addr);
/* Pod end: the gateway's permanent neighbour entry (the host end's MAC) and ::/0 via it. */
int wire6_add_pod_routes(struct nl *pod, int pod_index, const char *host_mac);
/* CHECK: 0, or -EUCLEAN with the drift described. */
int wire6_check_host(struct nl *host, int host_index, const struct wire_params *p, char **ret_drift);
int wire6_check_pod(struct nl *pod, int pod_index, const struct wire_params *p, char **ret_drift);
