/* SPDX-License-Identifier: MIT */
/* A target's settings ([reclaim.NAME], or a pod's annotations): copied, compared, freed. */

#include <stdlib.h>
#include <string.h>

#include "target.h"

void target_settings_done(struct reclaim_target_settings *s) {
        s->name = mfree(s->name);
        s->cgroup = mfree(s->cgroup);
        s->pressure_level = mfree(s->pressure_level);
        s->psi = mfree(s->psi);
}

static int strdup_or_null(const char *s, char **ret) {
        if (!s) {
                *ret = NULL;
                return 0;
        }
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

int target_settings_copy(const struct reclaim_target_settings *s, struct reclaim_target_settings *ret) {
        struct reclaim_target_settings c = *s;
        c.name = c.cgroup = c.pressure_level = c.psi = NULL;
        if (strdup_or_null(s->name, &c.name) < 0 || strdup_or_null(s->cgroup, &c.cgroup) < 0 ||
            strdup_or_null(s->pressure_level, &c.pressure_level) < 0 || strdup_or_null(s->psi, &c.psi) < 0) {
                target_settings_done(&c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

static bool level_equal(const struct reclaim_level *a, const struct reclaim_level *b) {
        return a->is_percent == b->is_percent && a->percent == b->percent && a->bytes == b->bytes;
}

bool target_settings_equal(const struct reclaim_target_settings *a, const struct reclaim_target_settings *b) {
        return streq_ptr(a->name, b->name) && streq_ptr(a->cgroup, b->cgroup) && level_equal(&a->high, &b->high) &&
               level_equal(&a->target, &b->target) && a->min_file == b->min_file && a->step == b->step &&
               a->interval == b->interval && streq_ptr(a->pressure_level, b->pressure_level) &&
               streq_ptr(a->psi, b->psi);
}
