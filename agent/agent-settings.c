/* SPDX-License-Identifier: MIT */
/* [agent]: its keys, their checks and defaults. */
#include <ctype.h>
#include <grp.h>
#include <stdlib.h>
#include <unistd.h>

#include "agent-settings.h"
#include "log.h"
#include "metrics-listen.h"
#include "peer-pod.h"
#include "service.h"
#include "socket-trust.h"
#include "strv.h"

static int parse_group(const char *v, void *ret, const char **reason) {
        if (!isempty(v) && !getgrnam(v)) {
                *reason = "no such group";
                return -EINVAL;
        }
        return config_parse_string(v, ret, reason);
}

static int parse_node_name(const char *v, void *ret, const char **reason) {
        if (!isempty(v) && (strlen(v) > 253 || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-.") != strlen(v))) {
                *reason = "expected a DNS-1123 subdomain (lowercase letters, digits, '-', '.')";
                return -EINVAL;
        }
        return config_parse_string(v, ret, reason);
}

/* Either list of cgroup roots: at least one, each a plain absolute path. */
static int parse_cgroup_roots(const char *v, void *ret, const char **reason) {
        _cleanup_strv_free_ char **roots = NULL;
        int r = config_parse_strv(v, &roots, reason);
        if (r < 0)
                return r;
        /* No pod root would make every pod's root the host's. */
        if (!roots) {
                *reason = "expected at least one cgroup path";
                return -EINVAL;
        }
        STRV_FOREACH(root, roots)
                if (!peer_pod_cgroup_root_valid(*root)) {
                        *reason = "expected absolute cgroup paths other than /, without . or .. or a trailing /";
                        return -EINVAL;
                }
        *(char ***) ret = TAKE_PTR(roots);
        return 0;
}

static int parse_metrics_listen(const char *v, void *ret, const char **reason) {
        if (!isempty(v) && metrics_listen_parse(v, NULL, NULL, reason) < 0)
                return -EINVAL;
        return config_parse_string(v, ret, reason);
}

#define FIELD(f) offsetof(struct agent_settings, f)
static const struct config_key agent_keys[] = {
        { "node-name", parse_node_name, FIELD(node_name), NULL, config_free_string },
        { "state-dir", config_parse_path, FIELD(state_dir), LOCALSTATEDIR "/lib/pinion", config_free_string },
        { "runtime-dir", config_parse_path, FIELD(runtime_dir), PINION_RUNTIME_DIR, config_free_string },
        { "socket", config_parse_path, FIELD(socket), PINION_SOCKET_DEFAULT, config_free_string },
        { "socket-mode", config_parse_mode, FIELD(socket_mode), "0660" },
        { "socket-group", parse_group, FIELD(socket_group), NULL, config_free_string },
        { "pods-dir", config_parse_path, FIELD(pods_dir), SYSCONFDIR "/pinion/pods.d", config_free_string },
        { "pod-cgroup-roots", parse_cgroup_roots, FIELD(pod_cgroup_roots), POD_CGROUP_ROOTS_DEFAULT,
          config_free_strv },
        { "service-cgroup-roots", parse_cgroup_roots, FIELD(service_cgroup_roots), SERVICE_CGROUP_ROOTS_DEFAULT,
          config_free_strv },
        { "log-level", config_parse_string, FIELD(log_level), "info", config_free_string, log_level_name_at },
        { "log-format", config_parse_string, FIELD(log_format), "auto", config_free_string, log_target_name_at },
        { "stop-timeout", config_parse_duration, FIELD(stop_timeout), "10s" },
        { "drop-capabilities", config_parse_bool, FIELD(drop_capabilities), "yes" },
        { "release-startup-pages", config_parse_bool, FIELD(release_startup_pages), "no" },
        { "memory-watermark", config_parse_percent, FIELD(memory_watermark), "90%" },
        { "metrics-listen", parse_metrics_listen, FIELD(metrics_listen), "", config_free_string },
        {}
};
#undef FIELD

int agent_settings_parse(struct config *c, struct agent_settings *ret, char **ret_error) {
        struct agent_settings s = {};
        int r;

        r = config_parse_section(c, "agent", agent_keys, &s, ret_error);
        if (r >= 0)
                r = service_parse_all(c, &s.services, &s.n_services, ret_error);
        if (r < 0) {
                agent_settings_done(&s);
                return r;
        }
        *ret = s;
        return 0;
}

void agent_settings_done(struct agent_settings *s) {
        config_free_fields(agent_keys, s);
        service_free_all(s->services, s->n_services);
        s->services = NULL;
        s->n_services = 0;
}

int agent_settings_socket_gid(const struct agent_settings *s, gid_t *ret) {
        if (!s->socket_group) {
                *ret = (gid_t) -1;
                return 0;
        }
        struct group *g = getgrnam(s->socket_group);
        if (!g)
                return -ESRCH;
        *ret = g->gr_gid;
        return 0;
}

int agent_settings_fill_node_name(struct agent_settings *s) {
        char host[256] = "";
        const char *name;

        if (s->node_name)
                return 0;
        name = getenv("NODE_NAME");
        if (isempty(name)) {
                if (gethostname(host, sizeof(host) - 1) < 0)
                        return -errno;
                name = host;
        }
        /* Kubernetes node names are lowercase (kubelet lowercases the hostname too). */
        s->node_name = strdup(name);
        if (!s->node_name)
                return -ENOMEM;
        for (char *p = s->node_name; *p; p++)
                *p = (char) tolower((unsigned char) *p);
        const char *reason = NULL;
        char *checked = NULL;
        if (parse_node_name(s->node_name, &checked, &reason) < 0)
                return -EINVAL;
        free(checked);
        return 0;
}
