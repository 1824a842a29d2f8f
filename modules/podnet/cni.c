/* SPDX-License-Identifier: MIT */
/* The CNI protocol's parts that need no JSON library: commands, errors, the CNI_* environment,
 * versions, addresses. The static plugin links this alone. See cni.h. */

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cni.h"
#include "json-text.h"
#include "string-table.h"

#define CNI_MAX_ARGS 4096

static const char *const cni_command_table[_CNI_COMMAND_MAX] = {
        [CNI_ADD] = "ADD", [CNI_DEL] = "DEL", [CNI_CHECK] = "CHECK",
        [CNI_STATUS] = "STATUS", [CNI_GC] = "GC", [CNI_VERSION] = "VERSION",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(cni_command, enum cni_command);

static DEFINE_STRING_TABLE_LOOKUP_FROM_STRING(cni_command, enum cni_command);

/* Which CNI_* variables a command needs: CNI_CONTAINERID and CNI_IFNAME, CNI_NETNS. */
static bool cni_command_needs_container(enum cni_command c) {
        return c == CNI_ADD || c == CNI_DEL || c == CNI_CHECK;
}

static bool cni_command_needs_netns(enum cni_command c) {
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

void cni_request_free_fields(struct cni_request *r) {
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
static bool cni_id_valid(const char *s, size_t max) {
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > max || !isalnum((unsigned char) s[0]))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!isalnum((unsigned char) s[i]) && !strchr("_.-", s[i]))
                        return false;
        return true;
}

/* True for a name the kernel accepts as an interface name. */
static bool cni_ifname_valid(const char *s) {
        size_t n = s ? strlen(s) : 0;
        if (n == 0 || n > 15 || streq(s, ".") || streq(s, ".."))
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] == '/' || s[i] == ':' || isspace((unsigned char) s[i]) || !isprint((unsigned char) s[i]))
                        return false;
        return true;
}

/* Absolute, printable, < 4096 bytes. */
static bool cni_path_valid(const char *s) {
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
int cni_request_add_ip(struct cni_request *r, const char *item, const char **why) {
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
                k = cni_request_add_ip(r, item, &why);
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
int cni_request_set_mac(struct cni_request *r, const char *v, int code, const char *what, struct cni_error *err) {
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
                        int k = cni_request_set_mac(r, v, CNI_ERR_INVALID_ENV, "MAC", err);
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

/* *ret = strdup(v) (NULL for NULL), the old freed. */
static int cni_strdup_replace(const char *v, char **ret) {
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
                if (!cni_id_valid(cid, 1024))
                        return cni_error_set(err, CNI_ERR_INVALID_ENV, "invalid CNI_CONTAINERID",
                                             "must start with a letter or digit and hold only letters, digits, '_', '.', '-'");
                if (isempty(ifname))
                        return cni_error_set(err, CNI_ERR_INVALID_ENV, "CNI_IFNAME is not set", NULL);
                if (!cni_ifname_valid(ifname))
                        return cni_error_set(err, CNI_ERR_INVALID_ENV, "invalid CNI_IFNAME",
                                             "'%.32s' is no valid interface name (1-15 characters, no '/', ':' or spaces)", ifname);
                if (cni_strdup_replace(cid, &r->container_id) < 0 || cni_strdup_replace(ifname, &r->ifname) < 0)
                        return -ENOMEM;
        }
        if (cni_command_needs_netns(r->command) && isempty(netns))
                return cni_error_set(err, CNI_ERR_INVALID_ENV, "CNI_NETNS is not set", NULL);
        if (cni_command_needs_container(r->command) && !isempty(netns)) {
                if (!cni_path_valid(netns))
                        return cni_error_set(err, CNI_ERR_INVALID_ENV, "invalid CNI_NETNS", "must be an absolute path");
                if (cni_strdup_replace(netns, &r->netns) < 0)
                        return -ENOMEM;
        }
        if (cni_command_needs_container(r->command) && !isempty(args)) {
                k = parse_cni_args(r, args, err);
                if (k < 0)
                        return k;
        }
        return 0;
}

static void put_member(struct json_text_buf *b, const char *key, const char *value) {
        if (!value)
                return;
        json_text_put(b, b->size > 1 ? "," : "");
        json_text_put_string(b, key);
        json_text_put(b, ":");
        json_text_put_string(b, value);
}

int cni_request_body(const struct cni_request *r, const char *config, size_t config_size, char **ret) {
        struct json_text_buf b = {};
        _cleanup_free_ char *args = NULL;
        int k;

        k = json_text_object_member(config, config_size, NULL, NULL);
        if (k < 0)
                return k;
        /* The arguments the agent acts on, in one form whatever order or extra keys the runtime
         * sent (unknown ones were refused or, with IgnoreUnknown, dropped by the plugin). */
        if ((r->k8s_namespace || r->k8s_name || r->k8s_uid || r->ip_arg || r->mac) &&
            asprintf(&args, "IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_UID=%s%s%s%s%s",
                     strempty(r->k8s_namespace), strempty(r->k8s_name), strempty(r->k8s_uid), r->ip_arg ? ";IP=" : "",
                     strempty(r->ip_arg), r->mac ? ";MAC=" : "", strempty(r->mac)) < 0)
                return -ENOMEM;
        json_text_put(&b, "{");
        put_member(&b, "command", cni_command_to_string(r->command));
        put_member(&b, "containerID", r->container_id);
        put_member(&b, "netns", r->netns);
        put_member(&b, "ifname", r->ifname);
        put_member(&b, "args", args);
        json_text_put(&b, ",\"config\":");
        json_text_put_raw(&b, config, config_size);
        json_text_put(&b, "}");
        return json_text_buf_take(&b, ret);
}

int cni_error_text(const struct cni_error *e, const char *cni_version, char **ret) {
        struct json_text_buf b = {};
        char code[16];

        snprintf(code, sizeof(code), "%d", e->code);
        json_text_put(&b, "{");
        put_member(&b, "cniVersion", cni_version ? cni_version : CNI_SPEC_VERSION);
        json_text_put(&b, ",\"code\":");
        json_text_put(&b, code);
        put_member(&b, "msg", e->msg ? e->msg : "error");
        put_member(&b, "details", e->details);
        json_text_put(&b, "}");
        return json_text_buf_take(&b, ret);
}

int cni_version_text(const char *cni_version, char **ret) {
        static const char *const supported[] = { CNI_SUPPORTED_VERSIONS };
        struct json_text_buf b = {};

        json_text_put(&b, "{");
        put_member(&b, "cniVersion", cni_version ? cni_version : CNI_SPEC_VERSION);
        json_text_put(&b, ",\"supportedVersions\":[");
        for (size_t i = 0; i < ELEMENTSOF(supported); i++) {
                json_text_put(&b, i ? "," : "");
                json_text_put_string(&b, supported[i]);
        }
        json_text_put(&b, "]}");
        return json_text_buf_take(&b, ret);
}

/* ---- the network config's top-level strings: the plugin reads them with json-text, the agent
 * with cJSON; both check them here, so a bad config gets one answer whoever refuses it ---- */

int cni_request_set_version(struct cni_request *r, const char *v, struct cni_error *err) {
        if (isempty(v))
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config", "cniVersion must be a string");
        if (!cni_version_supported(v))
                return cni_error_set(err, CNI_ERR_INCOMPATIBLE_VERSION, "incompatible CNI version",
                                     "cniVersion %.32s is not supported (supported: 0.3.0 to 1.1.0)", v);
        if (cni_strdup_replace(v, &r->cni_version) < 0)
                return -ENOMEM;
        if ((r->command == CNI_CHECK && cni_version_compare(v, "0.4.0") < 0) ||
            ((r->command == CNI_GC || r->command == CNI_STATUS) && cni_version_compare(v, "1.1.0") < 0))
                return cni_error_set(err, CNI_ERR_INCOMPATIBLE_VERSION, "incompatible CNI version",
                                     "%s needs a newer cniVersion than %s", cni_command_to_string(r->command), v);
        return 0;
}

int cni_request_set_name(struct cni_request *r, const char *name, const char *type, struct cni_error *err) {
        if (!name || !cni_id_valid(name, 253))
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                     "name must be a string of letters, digits, '_', '.', '-'");
        if (cni_strdup_replace(name, &r->network_name) < 0)
                return -ENOMEM;
        if (isempty(type))
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config", "type must be a string");
        return 0;
}

int cni_request_set_socket(struct cni_request *r, const char *socket, struct cni_error *err) {
        if (!socket || !cni_path_valid(socket) || strlen(socket) > 107)
                return cni_error_set(err, CNI_ERR_INVALID_CONFIG, "invalid network config",
                                     "socket must be an absolute path of at most 107 bytes");
        return cni_strdup_replace(socket, &r->socket);
}
