/* SPDX-License-Identifier: MIT */
/* configsync: downloads, verifies and atomically swaps in the config bundles pods declare
 * ([config.NAME] sections). This file holds its config and its place in the module contract;
 * the downloads land with its issue. */

#include <stddef.h>
#include <stdlib.h>

#include "config.h"
#include "module.h"

struct bundle_settings {
        char *name; /* first: set by config_parse_instances() */
        char *url;
        char *ca_file;
        char *public_key;
        char *dest;
        usec_t interval;
        char *zk_version_node;
        char *on_change;
        unsigned keep_versions;
};

struct configsync_settings {
        struct bundle_settings **bundles;
        size_t n_bundles;
};

#define FIELD(f) offsetof(struct bundle_settings, f)
static const struct config_key bundle_keys[] = {
        { "url", config_parse_url, FIELD(url), NULL, config_free_string },
        { "ca-file", config_parse_path, FIELD(ca_file), NULL, config_free_string },
        { "public-key", config_parse_path, FIELD(public_key), NULL, config_free_string },
        { "dest", config_parse_path, FIELD(dest), NULL, config_free_string },
        { "interval", config_parse_duration, FIELD(interval), "60s" },
        { "zk-version-node", config_parse_path, FIELD(zk_version_node), NULL, config_free_string },
        { "on-change", config_parse_string, FIELD(on_change), NULL, config_free_string },
        { "keep-versions", config_parse_uint, FIELD(keep_versions), "3" },
        {}
};
#undef FIELD

static const char *bundle_check(const void *object) {
        const struct bundle_settings *b = object;
        if (!b->url)
                return "url (the bundle manifest) is required";
        if (!b->dest)
                return "dest (where the files are published) is required";
        if (b->interval < USEC_PER_SEC)
                return "interval must be at least 1s";
        return NULL;
}

static struct configsync_settings *configsync_settings_free(struct configsync_settings *s) {
        if (!s)
                return NULL;
        config_instances_free(bundle_keys, (void **) s->bundles, s->n_bundles);
        free(s);
        return NULL;
}

static int configsync_parse(struct config *c, struct configsync_settings **ret, char **ret_error) {
        struct configsync_settings *s = calloc(1, sizeof(*s));
        int r;

        if (!s)
                return -ENOMEM;
        r = config_parse_instances(c, "config.", bundle_keys, sizeof(struct bundle_settings), bundle_check,
                                   (void ***) &s->bundles, &s->n_bundles, ret_error);
        if (r < 0) {
                free(s);
                return r;
        }
        *ret = s;
        return 0;
}

static void configsync_apply(struct module_instance *mi) {
        struct configsync_settings *s = mi->data;

        if (s->n_bundles == 0)
                module_set_state(mi, MODULE_DISABLED, "no [config.NAME] sections configured");
        else
                module_set_state(mi, MODULE_DISABLED, "config bundle downloads are not part of this build yet");
        module_set_synced(mi);
}

static int configsync_status(struct module_instance *mi, cJSON *obj) {
        struct configsync_settings *s = mi->data;
        cJSON *names = cJSON_AddArrayToObject(obj, "configs");
        if (!names)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_bundles; i++)
                if (!cJSON_AddItemToArray(names, cJSON_CreateString(s->bundles[i]->name)))
                        return -ENOMEM;
        return 0;
}

DEFINE_SETTINGS_MODULE(configsync, struct configsync_settings, ((const char *const[]) { "zkreg", NULL }));
