/* SPDX-License-Identifier: MIT */
#pragma once

/* [agent] metrics-listen: /metrics over plain HTTP on a TCP port, for a Prometheus that scrapes
 * over the network (the Unix socket's /metrics is for the node's own root). The port serves that
 * one route and nothing else: any other path is 404, any other method 405. It is a public port,
 * so it is an anonymous local API (api.h): no peer credentials, every peer unprivileged, a small
 * cap on connections at once, and the local API's deadline for a request head. */

#include <stdbool.h>
#include <sys/socket.h>

#include <systemd/sd-event.h>

#include "api.h"
#include "macro.h"
#include "metrics.h"

/* Connections at once: a few scrapers, not a crowd. */
#define METRICS_LISTEN_MAX_CONNECTIONS 32U
/* From one source address (an IPv6 one's /64): one host cannot take every place. */
#define METRICS_LISTEN_MAX_CONNECTIONS_PER_SOURCE 8U

/* "ADDR:PORT" with a numeric IPv4 address, or "[ADDR]:PORT" with a numeric IPv6 one; port
 * 1-65535. 0, or -EINVAL with *ret_reason saying what is wrong. ret may be NULL (validation). */
int metrics_listen_parse(const char *text, struct sockaddr_storage *ret, socklen_t *ret_len, const char **ret_reason);

/* Whether address names a port below 1024 (binding it needs CAP_NET_BIND_SERVICE). */
bool metrics_listen_privileged_port(const char *address);

struct metrics_listener;

/* Binds address (SO_REUSEADDR: a restart finds its port again at once) and serves handler at
 * GET /metrics with userdata. */
int metrics_listen_new(sd_event *e, struct metrics *metrics, const char *address, api_handler_fn handler,
                         void *userdata, struct metrics_listener **ret);
struct metrics_listener *metrics_listen_free(struct metrics_listener *l);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct metrics_listener *, metrics_listen_free);
const char *metrics_listen_address(const struct metrics_listener *l);
