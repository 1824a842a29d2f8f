/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>

#include "log.h"
#include "module.h"
#include "socket-trust.h"
#include "string-table.h"

static const char *const module_state_table[_MODULE_STATE_MAX] = {
        [MODULE_DISABLED] = "disabled", [MODULE_STARTING] = "starting", [MODULE_RUNNING] = "running",
        [MODULE_DEGRADED] = "degraded", [MODULE_FAILED] = "failed",     [MODULE_STOPPING] = "stopping",
        [MODULE_STOPPED] = "stopped",
};

DEFINE_STRING_TABLE_LOOKUP(module_state, enum module_state);

bool module_state_is_healthy(enum module_state s) {
        switch (s) {
        case MODULE_DISABLED:
        case MODULE_STARTING:
        case MODULE_RUNNING:
        case MODULE_DEGRADED:
                return true;
        case MODULE_FAILED:
        case MODULE_STOPPING:
        case MODULE_STOPPED:
        case _MODULE_STATE_MAX:
        case _MODULE_STATE_INVALID:
                return false;
        }
        return false;
}

static int module_index(const struct module *const *table, unsigned n, const char *name) {
        for (unsigned i = 0; i < n; i++)
                if (streq(table[i]->name, name))
                        return (int) i;
        return -ENOENT;
}

/* Kahn's algorithm, always picking the earliest ready module in table order, so the order is
 * stable and readable: dependencies first, otherwise as listed. */
int module_order(const struct module *const *table, unsigned n, unsigned *ret_order, char **ret_error) {
        _cleanup_free_ bool *placed = calloc(n ? n : 1, sizeof(bool));
        unsigned n_placed = 0;

        if (!placed)
                return -ENOMEM;

        for (unsigned i = 0; i < n; i++)
                for (const char *const *d = table[i]->deps; d && *d; d++)
                        if (module_index(table, n, *d) < 0) {
                                if (ret_error && asprintf(ret_error, "module %s depends on unknown module %s",
                                                          table[i]->name, *d) < 0)
                                        *ret_error = NULL;
                                return -ENOENT;
                        }

        while (n_placed < n) {
                bool progress = false;
                for (unsigned i = 0; i < n && !progress; i++) {
                        if (placed[i])
                                continue;
                        bool ready = true;
                        for (const char *const *d = table[i]->deps; d && *d && ready; d++)
                                ready = placed[module_index(table, n, *d)];
                        if (!ready)
                                continue;
                        placed[i] = true;
                        ret_order[n_placed++] = i;
                        progress = true;
                }
                if (!progress) {
                        for (unsigned i = 0; i < n; i++)
                                if (!placed[i]) {
                                        if (ret_error && asprintf(ret_error, "module dependency cycle involving %s",
                                                                  table[i]->name) < 0)
                                                *ret_error = NULL;
                                        break;
                                }
                        return -ELOOP;
                }
        }
        return 0;
}

static void module_tell_owner(struct module_instance *mi, enum module_event event) {
        if (mi->owner_fn)
                mi->owner_fn(mi, event, mi->owner_userdata);
}

void module_set_state(struct module_instance *mi, enum module_state state, const char *reason_format, ...) {
        _cleanup_free_ char *reason = NULL;
        const char *name = mi->module->name;

        if (reason_format) {
                va_list ap;
                va_start(ap, reason_format);
                if (vasprintf(&reason, reason_format, ap) < 0)
                        reason = NULL;
                va_end(ap);
        }

        if (mi->state == state && streq_ptr(mi->reason, reason))
                return;

        int level = state == MODULE_FAILED ? LOG_ERR : state == MODULE_DEGRADED ? LOG_WARNING : LOG_INFO;
        if (reason)
                log_module_full_errno(name, level, 0, "%s → %s: %s", module_state_to_string(mi->state),
                                      module_state_to_string(state), reason);
        else
                log_module_full_errno(name, level, 0, "%s → %s", module_state_to_string(mi->state),
                                      module_state_to_string(state));

        mi->state = state;
        free(mi->reason);
        mi->reason = TAKE_PTR(reason);
        mi->state_since = now_usec(CLOCK_REALTIME);
        module_tell_owner(mi, MODULE_EVENT_STATE);
}

void module_set_synced(struct module_instance *mi) {
        if (mi->synced)
                return;
        mi->synced = true;
        log_module_debug(mi->module->name, "first sync done");
        module_tell_owner(mi, MODULE_EVENT_SYNCED);
}

void module_stopped(struct module_instance *mi) {
        module_set_state(mi, MODULE_STOPPED, NULL);
        module_tell_owner(mi, MODULE_EVENT_STOPPED);
}

int module_check_socket_dir(const struct config *c, const char *section, const char *key, const char *socket_path,
                            char **ret_error) {
        char why[SOCKET_TRUST_WHY_MAX] = "";
        const char *file;
        unsigned line;
        int r = socket_trust_dir_check(socket_path, why, sizeof(why));

        if (r >= 0 || r == -ENOENT)
                return 0;
        if (r == -ENOMEM)
                return r;
        (void) config_key_where(c, section, key, &file, &line);
        return config_error(ret_error, file, line, "%s %s: %s", key, socket_path, why[0] ? why : strerror(-r));
}
