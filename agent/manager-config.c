/* SPDX-License-Identifier: MIT */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>

#include "manager-config.h"
#include "manager.h"
#include "module.h"
#include "service.h"
#include "strv.h"

/* Every module's init on a throwaway instance. With ret_enabled (--check-config), the names of
 * those it leaves with work to do go there, and their check() runs. */
static int validate_modules(struct config *c, char ***ret_enabled, char **ret_error) {
        for (unsigned i = 0; i < module_table_size; i++) {
                const struct module *module = module_table[i];
                struct module_instance scratch = { .module = module, .state = MODULE_DISABLED };
                int r = module->init(&scratch, c, ret_error);
                if (r >= 0 && ret_enabled && module->configured && module->configured(&scratch, c)) {
                        r = strv_extend(ret_enabled, module->name);
                        if (r >= 0 && module->check)
                                r = module->check(&scratch, c, ret_error);
                }
                if (scratch.data)
                        module->free(&scratch);
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
        r = agent_settings_parse(c, &s, ret_error);
        if (r < 0)
                return r;
        r = service_check_tls_dirs(c, s.services, s.n_services, s.socket, ret_error);
        if (r >= 0)
                r = validate_modules(c, NULL, ret_error);
        if (r >= 0)
                r = config_check_unclaimed(c, ret_error);
        if (r >= 0) {
                r = agent_settings_fill_node_name(&s);
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

/* ---- --check-config ---- */

static int format_summary(const struct config *c, char *const *enabled, char **ret) {
        _cleanup_free_ char *names = strv_join(enabled, ", ");
        size_t n = strv_length(enabled);

        if (!names)
                return -ENOMEM;
        if (asprintf(ret, "configuration OK (%u file%s, %zu module%s enabled%s%s)", c->n_files,
                     c->n_files == 1 ? "" : "s", n, n == 1 ? "" : "s", n > 0 ? ": " : "", names) < 0)
                return -ENOMEM;
        return 0;
}

int manager_config_check(const struct manager_options *opts, char **ret_summary, char **ret_error) {
        _cleanup_(config_freep) struct config *c = NULL;
        _cleanup_strv_free_ char **enabled = NULL;
        struct agent_settings s = {};
        int r;

        r = manager_config_load(opts, &c, &s, ret_error);
        if (r < 0)
                return r;
        r = module_check_socket_dir(c, "agent", "socket", s.socket, ret_error);
        if (r >= 0)
                r = validate_modules(c, &enabled, ret_error);
        if (r >= 0)
                r = format_summary(c, enabled, ret_summary);
        agent_settings_done(&s);
        return r;
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

int manager_config_list_keys(FILE *out) {
        _cleanup_(config_freep) struct config *c = NULL;
        struct key_listing l = { .out = out };
        struct agent_settings s = {};
        _cleanup_free_ char *error = NULL;
        int r;

        r = config_load_string("(empty)", "", &c, &error);
        if (r < 0)
                return r;
        config_set_table_observer(list_table, &l);
        r = agent_settings_parse(c, &s, &error);
        agent_settings_done(&s);
        if (r >= 0)
                r = validate_modules(c, NULL, &error);
        config_set_table_observer(NULL, NULL);
        strv_free(l.seen);
        if (r >= 0)
                r = l.error;
        if (r >= 0 && fflush(out) != 0)
                r = -errno;
        return r;
}
