/* SPDX-License-Identifier: MIT */
/* Which capabilities the agent keeps: what the core and the enabled modules need, computed from
 * the settings; dropped once before the modules start, checked again after each reload. */
#include "caps.h"
#include "log.h"
#include "manager-caps.h"
#include "manager.h"
#include "metrics-listen.h"
#include "module.h"

/* What the agent needs with its current settings: the core, CAP_NET_BIND_SERVICE for a
 * metrics-listen port below 1024 (the API socket's group is an ACL entry, which needs nothing);
 * each module adds its own. A capability needed but not granted is simply not held. */
static uint64_t module_capabilities(struct module_instance *mi) {
        return mi->module->capabilities ? mi->module->capabilities(mi, mi->manager->config) : 0;
}

static uint64_t manager_needed_capabilities(struct manager *m) {
        uint64_t needed = 0;
        if (metrics_listen_privileged_port(m->settings.metrics_listen))
                needed |= CAP_TO_MASK64(CAP_NET_BIND_SERVICE);
        for (unsigned i = 0; i < m->n_modules; i++)
                needed |= module_capabilities(&m->modules[i]);
        return needed;
}

/* Before any module starts (threads keep the capabilities they were created with): keeps what
 * the enabled modules need, drops everything else. Failing to drop is logged, not fatal: the
 * agent then runs with what its service manager granted. */
void manager_caps_drop(struct manager *m) {
        _cleanup_free_ char *kept = NULL, *dropped = NULL;
        struct caps_state before;
        uint64_t needed = manager_needed_capabilities(m);

        if (!m->settings.drop_capabilities) {
                log_info("Keeping every capability piniond was started with ([agent] drop-capabilities=no)");
                return;
        }
        int r = caps_get(&before);
        if (r >= 0)
                r = caps_keep_only(needed, &m->caps_bounding);
        if (r < 0) {
                log_warning_errno(r, "Failed to drop the capabilities no module needs, keeping all: %m");
                return;
        }
        m->caps_dropped = true;
        m->caps_kept = before.permitted & needed;
        m->caps_dropped_set = before.permitted & ~needed;
        kept = caps_to_string(m->caps_kept);
        dropped = caps_to_string(before.permitted & ~needed);
        log_info("Capabilities: keeping %s; dropped %s%s", kept ? kept : "?", dropped ? dropped : "?",
                 m->caps_bounding ? " (bounding set too)" : " (bounding set left to the service manager)");
}

/* After a reload: a module may now need a capability dropped at start. It cannot come back
 * without a restart; say so once per reload, naming the module. One the service manager never
 * granted (the unit withholds CAP_DAC_OVERRIDE, which configsync and reclaim keep only when a
 * drop-in grants it) is no news: a restart would not bring it either. */
void manager_caps_check(struct manager *m) {
        if (!m->caps_dropped)
                return;
        for (unsigned i = 0; i < m->n_modules; i++) {
                struct module_instance *mi = &m->modules[i];
                uint64_t missing = module_capabilities(mi) & m->caps_dropped_set;
                if (!missing)
                        continue;
                _cleanup_free_ char *names = caps_to_string(missing);
                log_module_warning(mi->module->name,
                                   "the new settings need %s, which piniond dropped at start because no enabled "
                                   "module needed it: restart piniond to grant it",
                                   names ? names : "?");
        }
}
