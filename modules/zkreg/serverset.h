/* SPDX-License-Identifier: MIT */
#pragma once

/* The ServerSet member format (DESIGN.md), as Finagle, Aurora, Synapse and Prometheus'
 * serverset_sd read it:
 *   {"serviceEndpoint":{"host":IP,"port":N},
 *    "additionalEndpoints":{"name":{"host":IP,"port":N},...},
 *    "status":"ALIVE","shard":N}
 * serverset_build() derives it from a pod; serverset_parse() reads member data of any origin
 * (the agent reads the members it finds under a path to recognise its own after a connection
 * loss). Pure code: no logging. */

#include <stdbool.h>
#include <stdint.h>

#include "pods.h"

#define ANNOTATION_SERVERSET "pinion.io/serverset"
#define ANNOTATION_PORT "pinion.io/port"
#define ANNOTATION_SHARD "pinion.io/shard"

struct serverset_member {
        char host[64];
        uint16_t port;
        char status[16]; /* "ALIVE", "STOPPING", ... (truncated if longer) */
        int64_t shard;   /* -1 if absent */
};

/* What zkreg writes for a pod: the member data in both statuses it uses, and the endpoint they
 * name (kept beside the text, so nothing built here is ever parsed back). */
struct serverset_entry {
        char *alive;    /* the member data with "status":"ALIVE" */
        char *stopping; /* the same with "status":"STOPPING" (drain) */
        char *endpoint; /* "host:port", "[host]:port" for IPv6 */
        char *host;     /* serviceEndpoint.host */
        unsigned port;  /* serviceEndpoint.port */
};

void serverset_entry_done(struct serverset_entry *e);

/* Builds the member data for pod p (one JSON tree, written out once per status). On success
 * *ret (which the caller owns and releases with serverset_entry_done) is filled. -EADDRNOTAVAIL
 * (no IP yet), -EINVAL (bad annotation, unknown port name, no port) with *ret_error saying why
 * (if ret_error is given), -ENOMEM. *ret is untouched on failure. */
int serverset_build(const struct pod *p, struct serverset_entry *ret, char **ret_error);

/* Parses member data of any origin (size bytes, not NUL-terminated). -EINVAL if it is not a
 * ServerSet member with a serviceEndpoint of a host string and a port in 1..65535. */
int serverset_parse(const char *data, size_t size, struct serverset_member *ret);

/* Checks a pinion.io/serverset value: an absolute ZooKeeper path, no trailing '/', no empty,
 * "." or ".." segment, no control characters. */
bool serverset_path_valid(const char *path);

/* The deepest ServerSet path accepted, in segments, whatever allowed-prefixes says. */
#define SERVERSET_MAX_DEPTH 16

/* Checks a valid path against the deployment's rules: at most SERVERSET_MAX_DEPTH segments
 * (-E2BIG), and, when prefixes is a non-empty list, at or below one of them, segment-wise
 * (-EPERM). A prefix may hold "${namespace}", which stands for namespace (the pod's). On
 * success *ret_floor (if given) is the expanded prefix that matched (NULL with no list): the
 * deepest node that zkreg must not create. On failure *ret_error says why. */
int serverset_path_allowed(const char *path, char *const *prefixes, const char *namespace, char **ret_floor,
                           char **ret_error);

/* Checks an allowed-prefixes entry: "/" or a valid path once "${namespace}" is replaced. */
bool serverset_prefix_valid(const char *prefix);
