/* SPDX-License-Identifier: MIT */
#pragma once

/* systemd services as workloads (on VMs and bare hosts, where no kubelet runs them): the
 * [service.NAME] sections that map a unit to a SPIFFE ID. Which unit a process runs in is
 * peer-service.h's. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "peer-service.h"

#define SERVICE_SECTION_PREFIX "service."

/* [service.NAME]; the first member is the name (config_parse_instances()). */
struct service_settings {
        char *name;
        char *unit;       /* "nginx.service"; default "<NAME>.service" */
        char *spiffe_id;  /* NULL: spiffe://<trust-domain>/service/<unit without .service> */
        char *user;       /* owner of the files written for it; NULL: root */
        char *tls_dir;    /* where its cert.pem, key.pem and bundle.pem go; NULL: none */
        char **dns_names; /* DNS SANs of its certificate */
};

/* Parses every [service.NAME] (units unique, users that exist, SPIFFE IDs that parse). */
int service_parse_all(struct config *c, struct service_settings ***ret, size_t *ret_n, char **ret_error);
void service_free_all(struct service_settings **s, size_t n);
/* Refuses a tls-dir in (or below) the directory of the agent's socket, the sockets-only
 * directory pods may mount. */
int service_check_tls_dirs(struct config *c, struct service_settings *const *s, size_t n, const char *socket_path,
                            char **ret_error);

/* The configured service of unit, or NULL. */
const struct service_settings *service_find_unit(struct service_settings *const *s, size_t n, const char *unit);
