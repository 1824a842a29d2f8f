/* SPDX-License-Identifier: MIT */
/* The CNI protocol: environment and network-config parsing, the agent request body, errors.
 * See cni.h. */

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cni.h"
#include "json.h"
#include "string-table.h"

#define CNI_MAX_ARGS 4096
#define CNI_MAX_VALID_ATTACHMENTS 65536

static const char *const cni_command_table[_CNI_COMMAND_MAX] = {
        [CNI_ADD] = "ADD", [CNI_DEL] = "DEL", [CNI_CHECK] = "CHECK",
        [CNI_STATUS] = "STATUS", [CNI_GC] = "GC", [CNI_VERSION] = "VERSION",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(cni_command, enum cni_command);

DEFINE_STRING_TABLE_LOOKUP_FROM_STRING(cni_command, enum cni_command);

bool cni_command_needs_container(enum cni_command c) {
        return c == CNI_ADD || c == CNI_DEL || c == CNI_CHECK;
}

bool cni_command_needs_netns(enum cni_command c) {
        /* DEL may come after the namespace is gone: CNI_NETNS is optional there. */
        return c == CNI_ADD || c == CNI_CHECK;
}

void cni_error_done(struct cni_error *e) {
        if (!e)
                return;
        e->msg = mfree(e->msg);
        e->details = mfree(e->details);
        e->code = 0;
}

int cni_error_set(struct cni_error *e, int code, const char *msg, const char *details_format, ...) {
        if (!e)
                return -EINVAL;
        cni_error_done(e);
        e->code = code;
        e->msg = strdup(msg);
        if (details_format) {
                va_list ap;
                va_start(ap, details_format);
                if (vasprintf(&e->details, details_format, ap) < 0)
                        e->details = NULL;
                va_end(ap);
        }
        return -EINVAL;
}

void cni_request_done(struct cni_request *r) {
        if (!r)
                return;
        free(r->container_id);
        free(r->netns);
        free(r->ifname);
        free(r->k8s_namespace);
        free(r->k8s_name);
        free(r->k8s_uid);
        free(r->ip_arg);
        free(r->requested_ip4);
        free(r->requested_ip6);
        free(r->mac);
        cJSON_Delete(r->config);
        free(r->cni_version);
        free(r->network_name);
        free(r->socket);
        for (size_t i = 0; i < r->n_valid; i++) {
                free(r->valid[i].container_id);
                free(r->valid[i].ifname);
        }
        free(r->valid);
        *r = (struct cni_request) { .command = _CNI_COMMAND_INVALID };
}

/* ^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$ — what libcni accepts for container IDs and network names. */
static bool id_valid(const char *s, size_t max) {
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > max || !isalnum((unsigned char) s[0]))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!isalnum((unsigned char) s[i]) && !strchr("_.-", s[i]))
                        return false;
        return true;
}

bool cni_ifname_valid(const char *s) {
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > 15 || streq(s, ".") || streq(s, ".."))
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] == '/' || s[i] == ':' || isspace((unsigned char) s[i]) || !isprint((unsigned char) s[i]))
                        return false;
        return true;
}

static bool path_valid(const char *s) {
        if (!s || s[0] != '/' || strlen(s) > 4095)
                return false;
        for (const char *p = s; *p; p++)
                if (!isprint((unsigned char) *p))
                        return false;
        return true;
}

static int parse_version(const char *s, unsigned v[3]) {
        char extra;
        if (!s || sscanf(s, "%3u.%3u.%3u%c", &v[0], &v[1], &v[2], &extra) != 3)
                return -EINVAL;
        return 0;
}

int cni_version_compare(const char *a, const char *b) {
        unsigned va[3], vb[3];
        bool oka = parse_version(a, va) >= 0, okb = parse_version(b, vb) >= 0;
        if (!oka || !okb)
                return (int) oka - (int) okb;
        for (int i = 0; i < 3; i++)
                if (va[i] != vb[i])
                        return va[i] < vb[i] ? -1 : 1;
        return 0;
}

bool cni_version_supported(const char *v) {
        static const char *const supported[] = { CNI_SUPPORTED_VERSIONS };
        for (size_t i = 0; v && i < ELEMENTSOF(supported); i++)
                if (streq(supported[i], v))
                        return true;
        return false;
}

/* One requested address: IPv4 or IPv6, optionally with a prefix length (the runtime's view of
 * the network; pods get a /32 and a /128 whatever it says). One per family. */
static int request_ip(struct cni_request *r, const char *item, const char **why) {
        char addr[INET6_ADDRSTRLEN + 1], buf[INET6_ADDRSTRLEN];
        unsigned char bin[16];
        const char *slash = strchr(item, '/');
        size_t n = slash ? (size_t) (slash - item) : strlen(item);
        int family;

        if (n == 0 || n >= sizeof(addr))
                return *why = "not an IP address", -EINVAL;
        memcpy(addr, item, n);
        addr[n] = '\0';
        family = strchr(addr, ':') ? AF_INET6 : AF_INET;
        if (inet_pton(family, addr, bin) != 1 || !inet_ntop(family, bin, buf, sizeof(buf)))
                return *why = "not an IP address", -EINVAL;
        if (slash) {
                char *end = NULL;
                unsigned long len = strtoul(slash + 1, &end, 10);
                if (!isdigit((unsigned char) slash[1]) || *end || len > (family == AF_INET ? 32u : 128u))
                        return *why = "not a prefix length after '/'", -EINVAL;
        }
        char **target = family == AF_INET ? &r->requested_ip4 : &r->requested_ip6;
        if (*target)
                return *why = "two addresses of one family", -EINVAL;
        *target = strdup(buf);
        return *target ? 0 : -ENOMEM;
}

/* CNI_ARGS IP=: "10.1.2.3" or "10.1.2.3,fd00::3" (host-local's form). */
static int request_ip_list(struct cni_request *r, const char *list, struct cni_error *err) {
        _cleanup_free_ char *copy = strdup(list);
        const char *why = NULL;
        char *save = NULL;
        int k;

        if (!copy)
                return -ENOMEM;
        for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
                k = request_ip(r, item, &why);
                if (k == -ENOMEM)
                        return k;
                if (k < 0)
                        return cni_error_set(err, CNI_ERR_INVALID_ENV, "invalid CNI_ARGS", "IP=%.128s: '%.64s' is %s", list,
                                             item, why);
        }
        return 0;
}

int cni_mac_parse(const char *s, uint8_t ret[6]) {
        uint8_t m[6];
        char sep = 0;

        if (!s || strlen(s) != 17)
                return -EINVAL;
        for (int i = 0; i < 6; i++) {
                const char *o = s + i * 3;
                if (!isxdigit((unsigned char) o[0]) || !isxdigit((unsigned char) o[1]))
                        return -EINVAL;
                if (i < 5) {
                        if ((o[2] != ':' && o[2] != '-') || (sep && o[2] != sep))
                                return -EINVAL;
                        sep = o[2];
                }
                m[i] = (uint8_t) strtoul((char[3]) { o[0], o[1], 0 }, NULL, 16);
        }
        /* The group bit makes a multicast (or broadcast) address, which no interface may have;
         * all-zero is what the kernel refuses as "no address". */
        if (m[0] & 0x01)
                return -EINVAL;
        if (!(m[0] | m[1] | m[2] | m[3] | m[4] | m[5]))
                return -EINVAL;
        memcpy(ret, m, sizeof(m));
        return 0;
}

/* Stores a requested MAC in its canonical form, or explains what is wrong with it. */
static int set_mac(struct cni_request *r, const char *v, int code, const char *what, struct cni_error *err) {
        uint8_t m[6];

        if (cni_mac_parse(v, m) < 0)
                return cni_error_set(err, code, code == CNI_ERR_INVALID_ENV ? "invalid CNI_ARGS" : "invalid network config",
                                     "%s '%.32s' is no unicast MAC address (six hex octets split by ':', not all zero, "
                                     "the group bit clear)", what, v);
        free(r->mac);
        if (asprintf(&r->mac, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]) < 0) {
                r->mac = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* CNI_ARGS: "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=n;K8S_POD_UID=u". Keys we do not
 * know are an error unless IgnoreUnknown is true, as with the reference plugins. */
static int parse_cni_args(struct cni_request *r, const char *args, struct cni_error *err) {
        _cleanup_free_ char *copy = NULL;
        bool ignore_unknown = false;
        char *unknown = NULL;
        char *save = NULL;

        if (strlen(args) > CNI_MAX_ARGS)
                return cni_error_set(err, CNI_ERR_INVALID_ENV, "invalid CNI_ARGS", "longer than %d bytes", CNI_MAX_ARGS);
        copy = strdup(args);
        if (!copy)
                return -ENOMEM;
        for (char *kv = strtok_r(copy, ";", &save); kv; kv = strtok_r(NULL, ";", &save)) {
                char *eq = strchr(kv, '=');
                char **target = NULL;
                if (!eq || eq == kv)
                        return cni_error_set(err, CNI_ERR_INVALID_ENV, "invalid CNI_ARGS",
                                             "'%.64s' is not KEY=VALUE", kv);
                *eq = '\0';
                const char *v = eq + 1;
                for (const char *p = v; *p; p++)
                        if (!isprint((unsigned char) *p))
                                return cni_error_set(err, CNI_ERR_INVALID_ENV, "invalid CNI_ARGS",
                                                     "%.64s has a non-printable value", kv);
                if (streq(kv, "IgnoreUnknown")) {
                        if (streq(v, "1") || strcasecmp(v, "true") == 0)
                                ignore_unknown = true;
                        else if (!streq(v, "0") && strcasecmp(v, "false") != 0)
                                return cni_error_set(err, CNI_ERR_INVALID_ENV, "invalid CNI_ARGS",
                                                     "IgnoreUnknown must be a boolean, not '%.64s'", v);
                        continue;
                }
                if (streq(kv, "MAC")) {
                        /* DEL must work whatever ADD refused: only ADD and CHECK read it. */
                        if (r->command != CNI_ADD && r->command != CNI_CHECK)
                                continue;
                        int k = set_mac(r, v, CNI_ERR_INVALID_ENV, "MAC", err);
                        if (k < 0)
                                return k;
                        continue;
                }
                if (streq(kv, "K8S_POD_NAMESPACE"))
                        target = &r->k8s_namespace;
                else if (streq(kv, "K8S_POD_NAME"))
                        target = &r->k8s_name;
                else if (streq(kv, "K8S_POD_UID"))
                        target = &r->k8s_uid;
                else if (streq(kv, "IP"))
                        target = &r->ip_arg;
                else {
                        if (!unknown)
                                unknown = kv; /* decided once IgnoreUnknown, wherever it is, is seen */
                        continue;
                }
                if (strlen(v) > 253)
                        return cni_error_set(err, CNI_ERR_INVALID_ENV, "invalid CNI_ARGS", "%s is too long", kv);
                free(*target);
                *target = isempty(v) ? NULL : strdup(v);
                if (!isempty(v) && !*target)
                        return -ENOMEM;
        }
        if (unknown && !ignore_unknown)
                return cni_error_set(err, CNI_ERR_INVALID_ENV, "invalid CNI_ARGS",
                                     "unknown key '%.64s' (set IgnoreUnknown=1 to ignore it)", unknown);
        /* (Only an ADD reserves addresses: a DEL is never refused over them.) */
        if (r->ip_arg && r->command == CNI_ADD)
                return request_ip_list(r, r->ip_arg, err);
        return 0;
}

static int dup_env(const char *v, char **ret) {
        free(*ret);
        *ret = v ? strdup(v) : NULL;
        return v && !*ret ? -ENOMEM : 0;
}

int cni_request_from_env(struct cni_request *r, cni_getenv_fn getenv_fn, void *userdata, struct cni_error *err) {
        const char *cmd = getenv_fn("CNI_COMMAND", userdata);
        const char *cid = getenv_fn("CNI_CONTAINERID", userdata);
        const char *netns = getenv_fn("CNI_NETNS", userdata);
        const char *ifname = getenv_fn("CNI_IFNAME", userdata);
        const char *args = getenv_fn("CNI_ARGS", userdata);
        int k;

        if (isempty(cmd))
                return cni_error_set(err, CNI_ERR_INVALID_ENV, "CNI_COMMAND is not set", NULL);
        k = cni_command_from_string(cmd);
        if (k < 0)
                return cni_error_set(err, CNI_ERR_INVALID_ENV, "unknown CNI_COMMAND",
                                     "'%.32s' is none of ADD, DEL, CHECK, STATUS, GC, VERSION", cmd);
        r->command = (enum cni_command) k;

        if (cni_command_needs_container(r->command)) {
                if (isempty(cid))
                        return cni_error_set(err, CNI_ERR_INVALID_ENV, "CNI_CONTAINERID is not set", NULL);
                if (!id_valid(cid, 1024))
                        return cni_error_set(err, CNI_ERR_INVALID_ENV, "invalid CNI_CONTAINERID",
                                             "must start with a letter or digit and hold only letters, digits, '_', '.', '-'");
                if (isempty(ifname))
                        return cni_error_set(err, CNI_ERR_INVALID_ENV, "CNI_IFNAME is not set", NULL);
                if (!cni_ifname_valid(ifname))
                        return cni_error_set(err, CNI_ERR_INVALID_ENV, "invalid CNI_IFNAME",
                                             "'%.32s' is no valid interface name (1-15 characters, no '/', ':' or spaces)", ifname);
                if (dup_env(cid, &r->container_id) < 0 || dup_env(ifname, &r->ifname) < 0)
                        return -ENOMEM;
        }
        if (cni_command_needs_netns(r->command) && isempty(netns))
                return cni_error_set(err, CNI_ERR_INVALID_ENV, "CNI_NETNS is not set", NULL);
        if (cni_command_needs_container(r->command) && !isempty(netns)) {
                if (!path_valid(netns))
                        return cni_error_set(err, CNI_ERR_INVALID_ENV, "invalid CNI_NETNS", "must be an absolute path");
                if (dup_env(netns, &r->netns) < 0)
                        return -ENOMEM;
        }
        if (cni_command_needs_container(r->command) && !isempty(args)) {
                k = parse_cni_args(r, args, err);
                if (k < 0)
                        return k;
        }
        return 0;
}

static const cJSON *field(const cJSON *o, const char *key) {
        return cJSON_GetObjectItemCaseSensitive(o, key);
}

static int parse_valid_attachments(struct cni_request *r, const cJSON *list, struct cni_error *err) {
        const cJSON *a;
        size_t n;

        if (!cJSON_IsArray(list))
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                     "cni.dev/valid-attachments must be an array");
        n = (size_t) cJSON_GetArraySize(list);
        if (n > CNI_MAX_VALID_ATTACHMENTS)
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                     "cni.dev/valid-attachments has more than %d entries", CNI_MAX_VALID_ATTACHMENTS);
        r->valid = calloc(MAX(n, 1u), sizeof(struct cni_attachment));
        if (!r->valid)
                return -ENOMEM;
        r->has_valid = true;
        cJSON_ArrayForEach(a, list) {
                const cJSON *cid = field(a, "containerID"), *ifn = field(a, "ifname");
                if (!cJSON_IsObject(a) || !cJSON_IsString(cid) || !cJSON_IsString(ifn))
                        return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                             "each cni.dev/valid-attachments entry needs string containerID and ifname");
                struct cni_attachment *at = &r->valid[r->n_valid++];
                at->container_id = strdup(cid->valuestring);
                at->ifname = strdup(ifn->valuestring);
                if (!at->container_id || !at->ifname)
                        return -ENOMEM;
        }
        return 0;
}

/* runtimeConfig "ips" (the capability the conflist declares): ["10.1.2.3/24", "fd00::3/64"]. It
 * takes the place of CNI_ARGS IP= (the conventions give runtimeConfig precedence). */
static int parse_runtime_config_ips(struct cni_request *r, const cJSON *ips, struct cni_error *err) {
        const cJSON *item;
        const char *why = NULL;

        if (!ips)
                return 0;
        if (!cJSON_IsArray(ips))
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config", "runtimeConfig.ips must be an array");
        if (cJSON_GetArraySize(ips) == 0)
                return 0;
        r->requested_ip4 = mfree(r->requested_ip4);
        r->requested_ip6 = mfree(r->requested_ip6);
        cJSON_ArrayForEach(item, ips) {
                int k = cJSON_IsString(item) ? request_ip(r, item->valuestring, &why) : (why = "not a string", -EINVAL);
                if (k == -ENOMEM)
                        return k;
                if (k < 0)
                        return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                             "runtimeConfig.ips: '%.64s' is %s", cJSON_IsString(item) ? item->valuestring : "?",
                                             why);
        }
        return 0;
}

/* Takes ownership of obj. */
static int request_set_config(struct cni_request *r, cJSON *obj, struct cni_error *err) {
        const cJSON *v, *name, *type, *sock, *prev;

        cJSON_Delete(r->config);
        r->config = obj;
        if (!cJSON_IsObject(obj))
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config", "not a JSON object");

        v = field(obj, "cniVersion");
        if (!cJSON_IsString(v) || isempty(v->valuestring))
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config", "cniVersion must be a string");
        if (!cni_version_supported(v->valuestring))
                return cni_error_set(err, CNI_ERR_INCOMPATIBLE_VERSION, "incompatible CNI version",
                                     "cniVersion %.32s is not supported (supported: 0.3.0 to 1.1.0)", v->valuestring);
        if (dup_env(v->valuestring, &r->cni_version) < 0)
                return -ENOMEM;
        if (r->command == CNI_VERSION)
                return 0; /* VERSION reads nothing else */
        if ((r->command == CNI_CHECK && cni_version_compare(r->cni_version, "0.4.0") < 0) ||
            ((r->command == CNI_GC || r->command == CNI_STATUS) && cni_version_compare(r->cni_version, "1.1.0") < 0))
                return cni_error_set(err, CNI_ERR_INCOMPATIBLE_VERSION, "incompatible CNI version",
                                     "%s needs a newer cniVersion than %s", cni_command_to_string(r->command),
                                     r->cni_version);

        name = field(obj, "name");
        if (!cJSON_IsString(name) || !id_valid(name->valuestring, 253))
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                     "name must be a string of letters, digits, '_', '.', '-'");
        if (dup_env(name->valuestring, &r->network_name) < 0)
                return -ENOMEM;
        type = field(obj, "type");
        if (!cJSON_IsString(type) || isempty(type->valuestring))
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config", "type must be a string");

        sock = field(obj, "socket");
        if (sock) {
                if (!cJSON_IsString(sock) || !path_valid(sock->valuestring) || strlen(sock->valuestring) > 107)
                        return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                             "socket must be an absolute path of at most 107 bytes");
                if (dup_env(sock->valuestring, &r->socket) < 0)
                        return -ENOMEM;
        }

        prev = field(obj, "prevResult");
        if (prev && !cJSON_IsNull(prev)) {
                const cJSON *ifs = field(prev, "interfaces"), *ips = field(prev, "ips"), *routes = field(prev, "routes"),
                            *dns = field(prev, "dns");
                /* Everything an ADD extends, checked here: nothing is wired for a bad one. */
                if (!cJSON_IsObject(prev) || (ifs && !cJSON_IsArray(ifs)) || (ips && !cJSON_IsArray(ips)) ||
                    (routes && !cJSON_IsArray(routes)) || (dns && !cJSON_IsObject(dns)))
                        return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                             "prevResult must be a result object (interfaces, ips and routes arrays, "
                                             "dns an object)");
                r->prev_result = prev;
        }
        if (r->command == CNI_ADD || r->command == CNI_CHECK) {
                /* The "mac" capability (podman --mac-address): the runtime fills runtimeConfig. */
                const cJSON *rc = field(obj, "runtimeConfig"), *mac = field(rc, "mac");
                if (rc && !cJSON_IsObject(rc))
                        return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                             "runtimeConfig must be an object");
                if (mac && !cJSON_IsString(mac))
                        return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                             "runtimeConfig.mac must be a string");
                if (mac) {
                        int k = set_mac(r, mac->valuestring, CNI_ERR_INVALID_CONFIG, "runtimeConfig.mac", err);
                        if (k < 0)
                                return k;
                }
                if (r->command == CNI_ADD) {
                        int k = parse_runtime_config_ips(r, field(rc, "ips"), err);
                        if (k < 0)
                                return k;
                }
        }
        if (r->command == CNI_CHECK && !r->prev_result && cni_version_compare(r->cni_version, "1.0.0") >= 0)
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config", "CHECK needs prevResult");

        if (r->command == CNI_GC) {
                const cJSON *va = field(obj, "cni.dev/valid-attachments");
                if (va) {
                        int k = parse_valid_attachments(r, va, err);
                        if (k < 0)
                                return k;
                }
        }
        return 0;
}

int cni_request_parse_config(struct cni_request *r, const char *text, size_t size, struct cni_error *err) {
        cJSON *obj;

        if (!text || size == 0)
                return cni_error_set(err, CNI_ERR_DECODE, "failed to decode the network config", "stdin is empty");
        if (memchr(text, '\0', size))
                return cni_error_set(err, CNI_ERR_DECODE, "failed to decode the network config", "stdin holds a NUL byte");
        obj = cJSON_ParseWithLength(text, size);
        if (!obj)
                return cni_error_set(err, CNI_ERR_DECODE, "failed to decode the network config", "not valid JSON");
        return request_set_config(r, obj, err);
}

static bool add_opt_string(cJSON *o, const char *key, const char *v) {
        return !v || cJSON_AddStringToObject(o, key, v);
}

cJSON *cni_request_to_json(const struct cni_request *r) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        _cleanup_free_ char *args = NULL;
        cJSON *cfg;

        if (!o || !cJSON_AddStringToObject(o, "command", cni_command_to_string(r->command)) ||
            !add_opt_string(o, "containerID", r->container_id) || !add_opt_string(o, "netns", r->netns) ||
            !add_opt_string(o, "ifname", r->ifname))
                return NULL;
        if (r->k8s_namespace || r->k8s_name || r->k8s_uid || r->ip_arg || r->mac) {
                if (asprintf(&args, "IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_UID=%s%s%s%s%s",
                             strempty(r->k8s_namespace), strempty(r->k8s_name), strempty(r->k8s_uid),
                             r->ip_arg ? ";IP=" : "", strempty(r->ip_arg), r->mac ? ";MAC=" : "", strempty(r->mac)) < 0)
                        return NULL;
                if (!cJSON_AddStringToObject(o, "args", args))
                        return NULL;
        }
        if (r->config) {
                cfg = cJSON_Duplicate(r->config, true);
                if (!cfg || !cJSON_AddItemToObject(o, "config", cfg))
                        return cJSON_Delete(cfg), NULL;
        }
        return TAKE_PTR(o);
}

struct json_env {
        const cJSON *body;
};

/* Maps the CNI_* names onto the request body's fields, so that the daemon runs the very checks
 * the plugin ran on its environment. */
static const char *json_getenv(const char *name, void *userdata) {
        const struct json_env *e = userdata;
        static const struct {
                const char *env, *key;
        } map[] = {
                { "CNI_COMMAND", "command" }, { "CNI_CONTAINERID", "containerID" },
                { "CNI_NETNS", "netns" },     { "CNI_IFNAME", "ifname" },
                { "CNI_ARGS", "args" },
        };
        for (size_t i = 0; i < ELEMENTSOF(map); i++)
                if (streq(map[i].env, name)) {
                        const cJSON *v = field(e->body, map[i].key);
                        return cJSON_IsString(v) ? v->valuestring : NULL;
                }
        return NULL;
}

int cni_request_from_json(struct cni_request *r, const char *text, size_t size, struct cni_error *err) {
        _cleanup_(cJSON_Deletep) cJSON *body = NULL;
        static const char *const keys[] = { "command", "containerID", "netns", "ifname", "args", "config" };
        const cJSON *item;
        cJSON *cfg;
        int k;

        if (!text || size == 0)
                return cni_error_set(err, CNI_ERR_DECODE, "failed to decode the request", "empty body");
        body = cJSON_ParseWithLength(text, size);
        if (!cJSON_IsObject(body))
                return cni_error_set(err, CNI_ERR_DECODE, "failed to decode the request", "not a JSON object");
        cJSON_ArrayForEach(item, body) {
                bool known = false;
                for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                        known = known || streq(item->string, keys[i]);
                if (!known)
                        return cni_error_set(err, CNI_ERR_UNSUPPORTED_FIELD, "unsupported field in the request",
                                             "'%.64s'", item->string);
                if (!streq(item->string, "config") && !cJSON_IsString(item))
                        return cni_error_set(err, CNI_ERR_DECODE, "failed to decode the request",
                                             "%s must be a string", item->string);
        }
        k = cni_request_from_env(r, json_getenv, &(struct json_env) { body }, err);
        if (k < 0)
                return k;
        cfg = cJSON_DetachItemFromObjectCaseSensitive(body, "config");
        if (!cfg)
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config", "the request has no config");
        return request_set_config(r, cfg, err);
}

cJSON *cni_error_to_json(const struct cni_error *e, const char *cni_version) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "cniVersion", cni_version ? cni_version : CNI_SPEC_VERSION) ||
            !cJSON_AddNumberToObject(o, "code", e->code) ||
            !cJSON_AddStringToObject(o, "msg", e->msg ? e->msg : "error") || !add_opt_string(o, "details", e->details))
                return NULL;
        return TAKE_PTR(o);
}

cJSON *cni_version_result(const char *cni_version) {
        static const char *const supported[] = { CNI_SUPPORTED_VERSIONS };
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        cJSON *list;

        if (!o || !cJSON_AddStringToObject(o, "cniVersion", cni_version ? cni_version : CNI_SPEC_VERSION) ||
            !(list = cJSON_AddArrayToObject(o, "supportedVersions")))
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(supported); i++)
                if (!cJSON_AddItemToArray(list, cJSON_CreateString(supported[i])))
                        return NULL;
        return TAKE_PTR(o);
}
