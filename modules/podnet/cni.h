/* SPDX-License-Identifier: MIT */
#pragma once

/* The CNI protocol as pinion speaks it, shared by the plugin (pinion-cni) and the daemon:
 *
 *   plugin:  cni_request_from_env() + the network config on stdin, as it came
 *            → cni_request_body() → POST /v1/cni on the agent's socket
 *   daemon:  the request body → cni_json_parse_request() (cni-json.h: the environment's checks
 *            again and every check of the config: the daemon trusts no client) → the work → a
 *            result or a CNI error back as JSON.
 *
 * This half needs no JSON library: the plugin is one static binary (no libcjson on the node it
 * is copied to), and what it writes as JSON goes through json-text.h. The config's tree and the
 * body's parser are cni-json.h's (cJSON), the daemon's side.
 *
 * CNI spec 1.1.0: commands ADD, DEL, CHECK, STATUS, GC, VERSION; errors are
 * {"cniVersion", "code", "msg", "details"} with the spec's well-known codes below. Pure code:
 * no I/O, no logging, so both sides and the fuzz targets link it alone. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

#define CNI_SPEC_VERSION "1.1.0"
/* What VERSION reports; GC and STATUS exist from 1.1.0, CHECK from 0.4.0. */
#define CNI_SUPPORTED_VERSIONS "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"

/* The spec's error codes (CNI SPEC "Error" section); 100+ are plugin-specific. */
enum cni_error_code {
        CNI_ERR_INCOMPATIBLE_VERSION = 1,
        CNI_ERR_UNSUPPORTED_FIELD = 2,
        CNI_ERR_UNKNOWN_CONTAINER = 3,
        CNI_ERR_INVALID_ENV = 4,
        CNI_ERR_IO = 5,
        CNI_ERR_DECODE = 6,
        CNI_ERR_INVALID_CONFIG = 7,
        CNI_ERR_TRY_AGAIN_LATER = 11,
        CNI_ERR_NOT_AVAILABLE = 50,
        CNI_ERR_LIMITED_CONNECTIVITY = 51,
        CNI_ERR_POOL_EXHAUSTED = 100, /* no free address in the pod CIDR */
        CNI_ERR_DRIFT = 101,          /* CHECK: the kernel state differs from what ADD set up */
        CNI_ERR_INTERNAL = 102,       /* the agent failed (netlink, state file) */
        CNI_ERR_NAME_TAKEN = 103,     /* ADD: an interface pinion did not make has the host end's name */
        CNI_ERR_ADDRESS_UNUSABLE = 104, /* ADD: a requested address outside the pool, or not the one the attachment holds */
        CNI_ERR_ADDRESS_TAKEN = 105,  /* ADD: a requested address another attachment holds */
};

enum cni_command {
        CNI_ADD,
        CNI_DEL,
        CNI_CHECK,
        CNI_STATUS,
        CNI_GC,
        CNI_VERSION,
        _CNI_COMMAND_MAX,
        _CNI_COMMAND_INVALID = -EINVAL,
};

const char *cni_command_to_string(enum cni_command c);

/* An error to report: code, msg, details (msg/details owned). */
struct cni_error {
        int code;
        char *msg;
        char *details;
};
void cni_error_done(struct cni_error *e);
/* Sets e (freeing what it held); always returns -EINVAL so parsers can `return cni_error_set(...)`. */
int cni_error_set(struct cni_error *e, int code, const char *msg, const char *details_format, ...) _printf_(4, 5);

struct cni_attachment {
        char *container_id;
        char *ifname;
};

struct cni_request {
        enum cni_command command;
        /* From the environment. */
        char *container_id; /* CNI_CONTAINERID */
        char *netns;        /* CNI_NETNS: a path */
        char *ifname;       /* CNI_IFNAME */
        char *k8s_namespace, *k8s_name, *k8s_uid; /* from CNI_ARGS, may be NULL */
        char *ip_arg;       /* CNI_ARGS IP= as given (forwarded to the agent), may be NULL */
        /* ADD: the requested addresses, canonical, no prefix length (runtimeConfig "ips", else
         * CNI_ARGS IP=; at most one per family), may be NULL. */
        char *requested_ip4, *requested_ip6;
        /* The pod interface's MAC address the runtime asks for (CNI_ARGS MAC=, or runtimeConfig
         * "mac", which wins as with the reference plugins), "xx:xx:xx:xx:xx:xx" in lower case;
         * NULL: pinion picks one. */
        char *mac;
        /* From the network config (stdin). */
        struct cJSON *config; /* the whole config object, owned (cni-json.h; NULL in the plugin) */
        char *cni_version;
        char *network_name;
        char *socket;       /* "socket", NULL: default */
        const struct cJSON *prev_result; /* inside config, borrowed; NULL if none */
        /* GC: "cni.dev/valid-attachments" */
        struct cni_attachment *valid;
        size_t n_valid;
        bool has_valid; /* the key was present (absent: GC releases nothing) */
};

/* Frees every field but the config tree (cni_json_request_done() in cni-json.h frees that too). */
void cni_request_free_fields(struct cni_request *r);

/* Parses the CNI_* environment (getenv is passed in, for tests and fuzzing): CNI_COMMAND,
 * CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME, CNI_ARGS ("K=V;K=V", only the K8S_POD_* keys, IP and
 * MAC kept, IgnoreUnknown honoured). Errors: code 4 (CNI_ERR_INVALID_ENV). */
typedef const char *(*cni_getenv_fn)(const char *name, void *userdata);
int cni_request_from_env(struct cni_request *r, cni_getenv_fn getenv_fn, void *userdata, struct cni_error *err);

/* A unicast, non-zero MAC address, as "aa:bb:cc:dd:ee:ff" or "AA-BB-CC-DD-EE-FF": 0 with the
 * bytes, -EINVAL otherwise. */
int cni_mac_parse(const char *s, uint8_t ret[6]);

/* Compares CNI versions ("1.0.0" < "1.1.0"); unparsable sort first. */
int cni_version_compare(const char *a, const char *b);
bool cni_version_supported(const char *v);

/* The POST /v1/cni body: the request's command and environment and the network config as the
 * plugin read it (config: one JSON value, checked by json_text_object_member()). */
int cni_request_body(const struct cni_request *r, const char *config, size_t config_size, char **ret);

/* {"cniVersion", "code", "msg", "details"} and {"cniVersion", "supportedVersions": [...]} as
 * text (cni_version NULL: the newest); cni-json.h's cni_json_error() and
 * cni_json_version_result() are these, parsed. */
int cni_error_text(const struct cni_error *e, const char *cni_version, char **ret);
int cni_version_text(const char *cni_version, char **ret);

/* The network config's top-level strings, checked (NULL: absent or not a string): cniVersion
 * (supported, and new enough for the command: code 1), name and type, socket (only if present).
 * The plugin reads them with json-text, the agent with cJSON. */
int cni_request_set_version(struct cni_request *r, const char *version, struct cni_error *err);
int cni_request_set_name(struct cni_request *r, const char *name, const char *type, struct cni_error *err);
int cni_request_set_socket(struct cni_request *r, const char *socket, struct cni_error *err);

/* Shared with cni-json.c's config parsing. */
int cni_request_add_ip(struct cni_request *r, const char *item, const char **why);
int cni_request_set_mac(struct cni_request *r, const char *v, int code, const char *what, struct cni_error *err);
