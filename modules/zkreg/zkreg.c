/* SPDX-License-Identifier: MIT */
/* zkreg: registers ready, healthy pods in ZooKeeper as ServerSet members over a
 * single-threaded ZooKeeper session on the loop. This file holds its config and its place in
 * the module contract; the registrations land with its issue. */

#include <stddef.h>
#include <stdlib.h>

#include "config.h"
#include "module.h"

struct zkreg_settings {
        char **servers;
        usec_t session_timeout;
        char *chroot;
        double write_qps;
};

#define FIELD(f) offsetof(struct zkreg_settings, f)
static const struct config_key zkreg_keys[] = {
        { "servers", config_parse_strv, FIELD(servers), NULL, config_free_strv },
        { "session-timeout", config_parse_duration, FIELD(session_timeout), "16s" },
        { "chroot", config_parse_path, FIELD(chroot), NULL, config_free_string },
        { "write-qps", config_parse_double, FIELD(write_qps), "50" },
        {}
};
#undef FIELD

static struct zkreg_settings *zkreg_settings_free(struct zkreg_settings *s) {
        return config_object_free(zkreg_keys, s);
}

static int zkreg_parse(struct config *c, struct zkreg_settings **ret, char **ret_error) {
        struct zkreg_settings *s = NULL;
        const char *problem = NULL;
        int r;

        r = config_parse_section_new(c, "zookeeper", zkreg_keys, sizeof(*s), (void **) &s, ret_error);
        if (r < 0)
                return r;
        STRV_FOREACH(server, s->servers)
                if (!strchr(*server, ':'))
                        problem = "servers must be host:port entries";
        if (s->write_qps <= 0)
                problem = "write-qps must be > 0";
        if (s->session_timeout < 2 * USEC_PER_SEC)
                problem = "session-timeout must be at least 2s";
        if (problem) {
                config_object_free(zkreg_keys, s);
                return config_section_error(c, "zookeeper", ret_error, "%s", problem);
        }
        *ret = s;
        return 0;
}

static void zkreg_apply(struct module_instance *mi) {
        struct zkreg_settings *s = mi->data;

        if (!s->servers)
                module_set_state(mi, MODULE_DISABLED, "no [zookeeper] servers configured");
        else
                module_set_state(mi, MODULE_DISABLED, "ZooKeeper registration is not part of this build yet");
        module_set_synced(mi);
}

static int zkreg_status(struct module_instance *mi, cJSON *obj) {
        struct zkreg_settings *s = mi->data;
        cJSON *servers = cJSON_AddArrayToObject(obj, "servers");
        if (!servers)
                return -ENOMEM;
        STRV_FOREACH(server, s->servers)
                if (!cJSON_AddItemToArray(servers, cJSON_CreateString(*server)))
                        return -ENOMEM;
        return 0;
}

DEFINE_SETTINGS_MODULE(zkreg, struct zkreg_settings, NULL);
