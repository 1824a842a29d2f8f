/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <grp.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "manager-config.h"
#include "manager.h"
#include "metrics-listen.h"
#include "module.h"
#include "peer-pod.h"
#include "service.h"
#include "socket-trust.h"
#include "strv.h"

static int parse_log_level(const char *v, void *ret, const char **reason) {
        if (log_level_from_string(v) < 0) {
                *reason = "expected debug, info, notice, warning or error";
                return -EINVAL;
        }
        return config_parse_string(v, ret, reason);
}

static int parse_log_format(const char *v, void *ret, const char **reason) {
        if (log_target_from_string(v) < 0) {
                *reason = "expected auto, journal, text or json";
                return -EINVAL;
        }
        return config_parse_string(v, ret, reason);
}

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
        { "state-dir", config_parse_path, FIELD(state_dir), "/var/lib/pinion", config_free_string },
        { "runtime-dir", config_parse_path, FIELD(runtime_dir), "/run/pinion", config_free_string },
        { "socket", config_parse_path, FIELD(socket), PINION_SOCKET_DEFAULT, config_free_string },
        { "socket-mode", config_parse_mode, FIELD(socket_mode), "0660" },
        { "socket-group", parse_group, FIELD(socket_group), NULL, config_free_string },
        { "pods-dir", config_parse_path, FIELD(pods_dir), "/etc/pinion/pods.d", config_free_string },
        { "pod-cgroup-roots", parse_cgroup_roots, FIELD(pod_cgroup_roots), POD_CGROUP_ROOTS_DEFAULT,
          config_free_strv },
        { "service-cgroup-roots", parse_cgroup_roots, FIELD(service_cgroup_roots), SERVICE_CGROUP_ROOTS_DEFAULT,
          config_free_strv },
        { "log-level", parse_log_level, FIELD(log_level), "info", config_free_string },
        { "log-format", parse_log_format, FIELD(log_format), "auto", config_free_string },
        { "stop-timeout", config_parse_duration, FIELD(stop_timeout), "10s" },
        { "drop-capabilities", config_parse_bool, FIELD(drop_capabilities), "yes" },
        { "release-startup-pages", config_parse_bool, FIELD(release_startup_pages), "yes" },
        { "metrics-listen", parse_metrics_listen, FIELD(metrics_listen), "", config_free_string },
        {}
};
#undef FIELD

void agent_settings_done(struct agent_settings *s) {
        config_free_fields(agent_keys, s);
        services_free(s->services, s->n_services);
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

/* node-name defaults to $NODE_NAME (the DaemonSet's downward API), then the hostname. */
static int fill_node_name(struct agent_settings *s) {
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

static int validate_modules(struct config *c, char **ret_error) {
        for (unsigned i = 0; i < module_table_size; i++) {
                struct module_instance scratch = { .module = module_table[i], .state = MODULE_DISABLED };
                int r = module_table[i]->init(&scratch, c, ret_error);
                if (scratch.data)
                        module_table[i]->free(&scratch);
                if (r < 0)
                        return r;
        }
        return 0;
}

int manager_config_load(const struct manager_options *opts, struct config **ret_config,
                        struct agent_settings *ret_settings, char **ret_error) {
        _cleanup_(config_freep) struct config *c = NULL;
        _cleanup_free_ char *dropins = NULL;
        struct agent_settings s = {};
        const char *file = opts->config_file ? opts->config_file : PINION_DEFAULT_CONFIG;
        int r;

        if (opts->dropin_dir)
                dropins = strdup(opts->dropin_dir);
        else {
                _cleanup_free_ char *copy = strdup(file);
                if (copy && asprintf(&dropins, "%s/conf.d", dirname(copy)) < 0)
                        dropins = NULL;
        }
        if (!dropins)
                return -ENOMEM;

        r = config_load(file, dropins, &c, ret_error);
        if (r < 0)
                return r;
        r = config_parse_section(c, "agent", agent_keys, &s, ret_error);
        if (r >= 0)
                r = services_parse(c, &s.services, &s.n_services, ret_error);
        if (r >= 0)
                r = services_check_tls_dirs(c, s.services, s.n_services, s.socket, ret_error);
        if (r >= 0)
                r = validate_modules(c, ret_error);
        if (r >= 0)
                r = config_check_unclaimed(c, ret_error);
        if (r >= 0) {
                r = fill_node_name(&s);
                if (r == -EINVAL)
                        r = config_error(ret_error, file, 0,
                                         "the node name '%s' (from $NODE_NAME or the hostname) is not a valid "
                                         "Kubernetes node name: set [agent] node-name",
                                         s.node_name);
        }
        if (r < 0) {
                agent_settings_done(&s);
                return r;
        }
        *ret_config = TAKE_PTR(c);
        *ret_settings = s;
        return 0;
}

/* ---- --list-config-keys ---- */

struct key_listing {
        FILE *out;
        char **seen; /* sections already printed */
        int error;
};

static void list_table(const char *section, const struct config_key *table, void *userdata) {
        struct key_listing *l = userdata;

        if (l->error < 0 || strv_contains(l->seen, section))
                return;
        if (strv_extend(&l->seen, section) < 0) {
                l->error = -ENOMEM;
                return;
        }
        fprintf(l->out, "%s[%s]\n", l->seen[1] ? "\n" : "", section);
        for (const struct config_key *k = table; k->key; k++)
                fprintf(l->out, "%s=%s\n", k->key, strempty(k->default_value));
}

int manager_list_config_keys(FILE *out) {
        _cleanup_(config_freep) struct config *c = NULL;
        struct key_listing l = { .out = out };
        struct agent_settings s = {};
        _cleanup_free_ char *error = NULL;
        int r;

        r = config_load_string("(empty)", "", &c, &error);
        if (r < 0)
                return r;
        config_set_table_observer(list_table, &l);
        r = config_parse_section(c, "agent", agent_keys, &s, &error);
        if (r >= 0)
                r = services_parse(c, &s.services, &s.n_services, &error);
        agent_settings_done(&s);
        if (r >= 0)
                r = validate_modules(c, &error);
        config_set_table_observer(NULL, NULL);
        strv_free(l.seen);
        if (r >= 0)
                r = l.error;
        if (r >= 0 && fflush(out) != 0)
                r = -errno;
        return r;
}
