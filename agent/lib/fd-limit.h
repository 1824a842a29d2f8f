/* SPDX-License-Identifier: MIT */
#pragma once

/* The agent's open-file limit and the connections it can carry at once. Every connection the
 * servers accept costs descriptors (the socket and the pidfd its peer is held by); the agent's
 * own work (ZooKeeper, the apiserver, downloads, inotify, netlink, files, child processes) needs
 * more beside them. The caps the servers enforce are sized from the soft RLIMIT_NOFILE, so that
 * callers within their caps can never take the last descriptor: the servers refuse them first. */

#include <stdbool.h>
#include <stdint.h>

/* Today's caps, kept whenever the limit carries them. */
#define CONNECTION_CAP_API 1000U      /* the local API (api_options.max_connections) */
#define CONNECTION_CAP_WORKLOAD 1000U /* the Workload API's gRPC server */
/* Each of the CSI node plugin's two gRPC servers: the kubelet opens few connections; more is
 * someone else. */
#define CONNECTION_CAP_CSI 16U
/* Descriptors one accepted connection holds: its socket and its peer's pidfd. */
#define FDS_PER_CONNECTION 2U

struct connection_caps {
        uint64_t open_files; /* the soft limit they were sized for */
        uint64_t reserve;    /* of which kept for the agent's own descriptors */
        unsigned api;
        unsigned workload;
        unsigned csi;        /* each CSI server's */
        bool scaled;         /* below the defaults: the limit could not carry them */
};

/* Raises the soft RLIMIT_NOFILE to the hard one (select() is not used anywhere: the loop is
 * epoll, so descriptors above 1,024 are fine). Returns the soft limit before and after; on
 * failure (-errno) both hold the limit in force, if it could be read. */
int fd_limit_raise(uint64_t *ret_before, uint64_t *ret_after);

/* The caps that open_files descriptors carry: today's when they fit beside the reserve,
 * else each scaled down by the same factor (never below a floor of a few connections). */
void fd_limit_connection_caps(uint64_t open_files, struct connection_caps *ret);
