/* SPDX-License-Identifier: MIT */
#pragma once

/* pinionctl's human output: the agent's JSON documents as tables and "label: value" lines.
 * Talking to the agent, options and the command table live in pinionctl.c. */

#include <cjson/cJSON.h>

/* pinionctl's exit statuses; every printer returns one too. */
enum {
        EXIT_OK = 0,
        EXIT_AGENT = 1,       /* the agent answered with a failure */
        EXIT_USAGE = 2,       /* bad command line */
        EXIT_UNREACHABLE = 3, /* no agent behind the socket */
        EXIT_MODULE_DOWN = 4, /* the module serving the command is not running (503 naming it) */
};

/* Says "out of memory" on stderr and returns EXIT_AGENT. */
int pinionctl_print_oom(void);

/* ---- text from the agent ---- */

/* Blanks control characters (C0, DEL, C1 as UTF-8) in place: text from the agent may carry
 * pod annotations, and none of it may drive the terminal. */
void pinionctl_print_sanitize(char *s);
/* The member key of object o, or NULL (also when o is NULL). */
const cJSON *pinionctl_print_json_get(const cJSON *o, const char *key);

/* ---- printers: one document each, returning an exit status ---- */

typedef int (*printer_t)(const cJSON *root);

/* The document as indented JSON (--json). */
int pinionctl_print_json(const cJSON *root);
/* /v1/health: "ok", or "failing" and a table of the failing modules (then EXIT_AGENT). */
int pinionctl_print_health(const cJSON *root);
/* /v1/status: the agent's fields, then a table of the modules. */
int pinionctl_print_status(const cJSON *root);
/* /v1/pods: one row per pod. */
int pinionctl_print_pods(const cJSON *root);
/* /v1/pods/NS/NAME: the pod's fields, conditions, annotations and a table of its ports. */
int pinionctl_print_pod(const cJSON *pod);
/* /v1/registrations: the session, then one row per registration. */
int pinionctl_print_registrations(const cJSON *root);
/* POST /v1/registrations/drain or undrain: what the agent did. */
int pinionctl_print_drain(const cJSON *root);
/* /v1/reclaim: the module's state, then one row per watched cgroup (sizes in K/M/G). */
int pinionctl_print_reclaim(const cJSON *root);

/* /v1/identity: a pod's own identity (id, subject, SANs, expiry; not the key), or for root the
 * node certificate and a table of workload certificates. */
int pinionctl_print_identity(const cJSON *root);
/* /v1/configs: one row per config bundle, then the pods the "configs" gate concerns. */
int pinionctl_print_configs(const cJSON *root);
/* For the shell's completion, one word a line: "namespace/name" of every pod of /v1/pods, the
 * name of every config of /v1/configs (a name no shell word could hold is left out). */
int pinionctl_print_pod_names(const cJSON *root);
int pinionctl_print_config_names(const cJSON *root);
/* Documents this client does not know in detail (they belong to modules that may grow): the
 * scalar fields, then one table per array of objects. */
int pinionctl_print_generic(const cJSON *root);
