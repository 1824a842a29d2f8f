/* SPDX-License-Identifier: MIT */
/* reclaim: watches the memory cgroups of co-located components ([reclaim.NAME]) and reclaims
 * their page cache before it drives them into their limit. This file holds its config and its
 * place in the module contract; the reclaiming lands with its issue. */

#include <stddef.h>
#include <stdlib.h>

#include "config.h"
#include "module.h"

struct reclaim_target_settings {
        char *name; /* first: set by config_parse_instances() */
        char *cgroup;
        unsigned high;
        unsigned target;
        uint64_t min_file;
};

struct reclaim_settings {
        struct reclaim_target_settings **targets;
        size_t n_targets;
};

#define FIELD(f) offsetof(struct reclaim_target_settings, f)
static const struct config_key target_keys[] = {
        { "cgroup", config_parse_path, FIELD(cgroup), NULL, config_free_string },
        { "high", config_parse_percent, FIELD(high), "90%" },
        { "target", config_parse_percent, FIELD(target), "80%" },
        { "min-file", config_parse_size, FIELD(min_file), "64M" },
        {}
};
#undef FIELD

static const char *target_check(const void *object) {
        const struct reclaim_target_settings *t = object;
        if (!t->cgroup)
                return "cgroup (a path under the memory hierarchy, e.g. /system.slice/kube-apiserver.service) is required";
        if (t->target >= t->high)
                return "target must be below high";
        if (t->high == 0)
                return "high must be above 0%";
        return NULL;
}

static struct reclaim_settings *reclaim_settings_free(struct reclaim_settings *s) {
        if (!s)
                return NULL;
        config_instances_free(target_keys, (void **) s->targets, s->n_targets);
        free(s);
        return NULL;
}

static int reclaim_parse(struct config *c, struct reclaim_settings **ret, char **ret_error) {
        struct reclaim_settings *s = calloc(1, sizeof(*s));
        int r;

        if (!s)
                return -ENOMEM;
        r = config_parse_instances(c, "reclaim.", target_keys, sizeof(struct reclaim_target_settings),
                                   target_check, (void ***) &s->targets, &s->n_targets, ret_error);
        if (r < 0) {
                free(s);
                return r;
        }
        *ret = s;
        return 0;
}

static void reclaim_apply(struct module_instance *mi) {
        struct reclaim_settings *s = mi->data;

        if (s->n_targets == 0)
                module_set_state(mi, MODULE_DISABLED, "no [reclaim.NAME] sections configured");
        else
                module_set_state(mi, MODULE_DISABLED, "page cache reclaim is not part of this build yet");
        module_set_synced(mi);
}

static int reclaim_status(struct module_instance *mi, cJSON *obj) {
        struct reclaim_settings *s = mi->data;
        cJSON *names = cJSON_AddArrayToObject(obj, "targets");
        if (!names)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_targets; i++)
                if (!cJSON_AddItemToArray(names, cJSON_CreateString(s->targets[i]->name)))
                        return -ENOMEM;
        return 0;
}

DEFINE_SETTINGS_MODULE(reclaim, struct reclaim_settings, NULL);
